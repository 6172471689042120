"""``gem.utils.qa_em``: SQuAD exact match (gemgym's grader under GEM's names)."""

from __future__ import annotations

from typing import Any

from gemgym.grading.qa import normalize_qa_answer, qa_exact_match

__all__ = ["em_check", "normalize_answer"]


def normalize_answer(s: str) -> str:
    """Lower case, no punctuation, no articles, single spaces."""
    return normalize_qa_answer(s)


def em_check(prediction: str, golden_answers: Any) -> int:
    """1 if ``prediction`` matches one of ``golden_answers`` after normalising, else 0."""
    return int(qa_exact_match(prediction, golden_answers))
