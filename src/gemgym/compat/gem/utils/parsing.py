"""``gem.utils.parsing``: answer extraction (gemgym's extractors under GEM's names)."""

from __future__ import annotations

from gemgym.envs.code import last_code_block
from gemgym.grading.math import extract_boxed
from gemgym.grading.qa import extract_tagged_answer

__all__ = [
    "extract_code_from_model",
    "extract_last_boxed_answer",
    "extract_last_tagged_answer",
]


def extract_last_boxed_answer(solution: str) -> str | None:
    """The content of the last ``\\boxed{...}``, or ``None``."""
    return extract_boxed(solution)


def extract_last_tagged_answer(model_response: str) -> str | None:
    """The content of the last ``<answer>...</answer>``, or ``None``."""
    return extract_tagged_answer(model_response)


def extract_code_from_model(model_response: str) -> str | None:
    """The last fenced code block, or ``None``."""
    return last_code_block(model_response)
