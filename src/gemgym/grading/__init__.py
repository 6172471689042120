"""Answer grading shared by the task envs: math (boxed answers) and QA (exact match, F1).

Nothing heavy is imported here; math-verify runs in worker processes (:mod:`gemgym.grading.pool`).
"""

from gemgym.grading.math import MathGrade, extract_boxed, grade_math, normalize_math_answer
from gemgym.grading.qa import (
    extract_tagged_answer,
    normalize_qa_answer,
    qa_exact_match,
    qa_f1,
)

__all__ = [
    "MathGrade",
    "extract_boxed",
    "extract_tagged_answer",
    "grade_math",
    "normalize_math_answer",
    "normalize_qa_answer",
    "qa_exact_match",
    "qa_f1",
]
