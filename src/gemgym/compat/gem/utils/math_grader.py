"""``gem.utils.math_grader``: GEM's math reward functions on gemgym's grader."""

from __future__ import annotations

from typing import Any

from gemgym.grading.math import extract_boxed, grade_math

__all__ = ["boxed_reward_fn", "extract_answer", "extract_boxed_answer", "grade"]


def extract_boxed_answer(solution: str) -> str | None:
    """The content of the last ``\\boxed{...}``."""
    return extract_boxed(solution)


extract_answer = extract_boxed_answer


def grade(model_answer: str, gt_answer: str, fast: bool = True) -> bool:
    """Whether ``model_answer`` (already extracted) equals ``gt_answer`` mathematically."""
    return grade_math(f"\\boxed{{{model_answer}}}", gt_answer).correct


def boxed_reward_fn(
    model_response: str,
    gt_answer: Any,
    fast: bool = False,
    correct_reward: float = 1.0,
    incorrect_reward: float = 0.0,
) -> tuple[dict[str, bool], float]:
    """``({"formatted": bool}, reward)`` for the last ``\\boxed{}`` of ``model_response``."""
    if extract_boxed(model_response) is None:
        return {"formatted": False}, incorrect_reward
    golds = gt_answer if isinstance(gt_answer, list) else [str(gt_answer)]
    ok = grade_math(model_response, golds).correct
    return {"formatted": True}, correct_reward if ok else incorrect_reward
