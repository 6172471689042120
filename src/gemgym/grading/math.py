r"""Grading of math answers: the last ``\boxed{}`` against a gold answer.

:func:`grade_math` decides in three stages, cheapest first:

1. **Normalised text.** Both answers are normalised in the spirit of the MATH benchmark's string
   normalisation that GEM also applies: ``\dfrac``/``\tfrac`` → ``\frac``, ``\left``/``\right``,
   spacing commands, ``$``, degrees, trailing units in ``\text{}``, ``\text{(A)}`` → ``A``, a
   leading ``x =``, thousands separators, spaces. Equal strings are correct.
2. **Plain numbers.** When both sides are plain numbers (integers, decimals, ``a/b``,
   ``\frac{a}{b}``, ``1e3``, percentages) they are compared exactly as rationals, in-process, in
   microseconds: ``\frac{1}{2}`` ≡ ``0.5``, ``3.0`` ≡ ``3``, ``1e3`` ≡ ``1000``, ``0.333`` ≢ ``1/3``.
   A percentage ``p\%`` matches ``p/100`` and, as GEM leniently judged, ``p``.
3. **math-verify** for everything else (radicals, expressions, sets, intervals, tuples, equations),
   run in a shared worker process (:mod:`gemgym.grading.pool`) with a time limit enforced by the
   caller, so it works from threads, processes and Ray workers. An answer that takes longer (for
   example ``9^{9^{9^9}}``) costs at most the limit and is graded wrong.

Several gold answers (a list) count as correct if any matches.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "MAX_ANSWER_CHARS",
    "MathGrade",
    "extract_boxed",
    "grade_math",
    "normalize_math_answer",
    "parse_number",
]

MAX_ANSWER_CHARS = 2000
"""Longer extracted answers are graded wrong without parsing them."""

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE_TOKEN_RE = re.compile(r"\\.|[{}]", re.DOTALL)


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, braces balanced.

    A backslash escapes the next character (``\{`` is no brace). An unclosed box is skipped (the
    last box that closes wins). One pass over the text: linear time on any input (a reply of
    thousands of unclosed boxes included).

    >>> extract_boxed(r"so \boxed{1} no, \boxed{\frac{1}{2}}.")
    '\\frac{1}{2}'
    >>> extract_boxed(r"\boxed{1} \boxed{2")
    '1'
    >>> extract_boxed("no box") is None
    True
    """
    if not isinstance(text, str):
        return None
    boxes = {m.end() for m in _BOX_RE.finditer(text)}  # where each box's content starts
    if not boxes:
        return None
    last = max(boxes)
    depth = 1  # the common case first: the last box closes
    for m in _BRACE_TOKEN_RE.finditer(text, last):
        tok = m.group()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                return text[last : m.start()].strip()
    depth = 0
    opened: list[tuple[int, int]] = []  # (depth inside the box, where its content starts)
    best_start, best_end = -1, -1
    for m in _BRACE_TOKEN_RE.finditer(text, text.rfind("\\", 0, min(boxes))):
        tok = m.group()
        if tok == "{":
            depth += 1
            if m.end() in boxes:
                opened.append((depth, m.end()))
        elif tok == "}":
            if depth == 0:
                continue  # a stray brace outside every box
            if opened and opened[-1][0] == depth:
                start = opened.pop()[1]
                if start > best_start:
                    best_start, best_end = start, m.start()
            depth -= 1
    return text[best_start:best_end].strip() if best_start >= 0 else None


# -- normalisation --------------------------------------------------------------------------------

_SPACING_RE = re.compile(r"\\[!,;:> ]|\\q?quad|~")
_LEFT_RIGHT_RE = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])")
_DEGREE_RE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|°")
_TEXT_CMD = r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)"
_TRAILING_UNIT_RE = re.compile(r"^(.*?\S)\s*" + _TEXT_CMD + r"\{\s*[A-Za-z][A-Za-z .^0-9]*\}$")
_TEXT_WRAP_RE = re.compile(_TEXT_CMD + r"\{([^{}]*)\}")
_LHS_RE = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?!=)(.+)$")
_THOUSANDS_RE = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_CHOICE_RE = re.compile(r"^\(?([A-Ea-e])\)?$")
_FRAC_SHORT_RE = re.compile(r"\\frac(\d)(\d)")
_FRAC_HALF_RE = re.compile(r"\\frac\{([^{}]*)\}(\d)")
_SQRT_SHORT_RE = re.compile(r"\\sqrt(\d+)")


def normalize_math_answer(answer: str) -> str:
    r"""Normalise an answer string for comparison (see the module docstring).

    >>> normalize_math_answer(r"x = \dfrac{1}{2}")
    '\\frac{1}{2}'
    >>> normalize_math_answer(r"5\text{ cm}")
    '5'
    """
    s = answer.strip()
    s = s.strip("$").strip()
    s = s.replace("\\$", "").replace("\n", " ")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = _LEFT_RIGHT_RE.sub("", s)
    s = _SPACING_RE.sub(" ", s)
    s = _DEGREE_RE.sub("", s)
    unit = _TRAILING_UNIT_RE.match(s)
    if unit:
        s = unit.group(1)
    s = _TEXT_WRAP_RE.sub(r"\1", s)
    lhs = _LHS_RE.match(s)
    if lhs and "=" not in lhs.group(1):
        s = lhs.group(1)
    s = s.strip().rstrip(".").strip()
    s = s.replace(" ", "")
    if _THOUSANDS_RE.match(s):
        s = s.replace(",", "")
    s = _FRAC_SHORT_RE.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_HALF_RE.sub(r"\\frac{\1}{\2}", s)
    s = _SQRT_SHORT_RE.sub(r"\\sqrt{\1}", s)
    choice = _CHOICE_RE.match(s)
    if choice:
        s = choice.group(1).upper()
    if s.startswith("."):
        s = "0" + s
    s = s.replace("-.", "-0.")
    return s


_DEC_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?$")
_SLASH_RE = re.compile(r"^([+-]?\d+)/([+-]?\d+)$")
_FRAC_RE = re.compile(r"^([+-]?)\\frac\{([+-]?\d+(?:\.\d+)?)\}\{([+-]?\d+(?:\.\d+)?)\}$")


def parse_number(s: str) -> tuple[Fraction, bool] | None:
    r"""``(value, is_percent)`` for a normalised plain number, else ``None``.

    >>> parse_number(r"\frac{1}{2}")
    (Fraction(1, 2), False)
    >>> parse_number(r"10\%")
    (Fraction(10, 1), True)
    """
    percent = False
    if s.endswith(("\\%", "%")):
        percent = True
        s = s[:-2] if s.endswith("\\%") else s[:-1]
    if not s or len(s) > 60:
        return None
    try:
        if _DEC_RE.match(s):
            return Fraction(s), percent
        m = _SLASH_RE.match(s)
        if m:
            den = int(m.group(2))
            return (Fraction(int(m.group(1)), den), percent) if den else None
        m = _FRAC_RE.match(s)
        if m:
            fden = Fraction(m.group(3))
            if not fden:
                return None
            value = Fraction(m.group(2)) / fden
            return (-value if m.group(1) == "-" else value), percent
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _numbers_equal(gold: tuple[Fraction, bool], pred: tuple[Fraction, bool]) -> bool:
    g, g_pct = gold
    p, p_pct = pred
    if g_pct == p_pct:
        return g == p
    if p_pct:  # pred "10%" vs gold 0.1 (or, leniently as GEM, gold 10)
        return g in (p / 100, p)
    return p in (g / 100, g)


# -- the grader -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MathGrade:
    """The outcome of grading one answer.

    Attributes:
        correct: whether the answer matches a gold answer.
        extracted: the last ``\\boxed{}`` content, or ``None`` when there is none (format error).
        method: what decided: ``"text"``, ``"number"``, ``"math_verify"``, ``"timeout"``,
            ``"too_long"`` or ``"no_answer"``.
    """

    correct: bool
    extracted: str | None
    method: str

    @property
    def timed_out(self) -> bool:
        """Whether math-verify ran past the time limit (graded wrong)."""
        return self.method == "timeout"


_VERDICTS: OrderedDict[tuple[str, str], bool] = OrderedDict()
_VERDICTS_LOCK = threading.Lock()
_VERDICTS_MAX = 8192


def _compare(gold: str, pred: str, timeout: float) -> tuple[bool, str]:
    ng, np_ = normalize_math_answer(gold), normalize_math_answer(pred)
    if ng == np_ and ng:
        return True, "text"
    num_g, num_p = parse_number(ng), parse_number(np_)
    if num_g is not None and num_p is not None:
        return _numbers_equal(num_g, num_p), "number"
    if not np_:
        return False, "text"
    if len(pred) > MAX_ANSWER_CHARS:
        return False, "too_long"
    key = (gold, pred)
    cached = _VERDICTS.get(key)
    if cached is not None:
        return cached, "math_verify"
    from gemgym.grading.pool import default_pool

    verdict = default_pool().verify(gold, pred, timeout)
    if verdict is None:
        return False, "timeout"
    with _VERDICTS_LOCK:
        _VERDICTS[key] = verdict
        if len(_VERDICTS) > _VERDICTS_MAX:
            _VERDICTS.popitem(last=False)
    return verdict, "math_verify"


def grade_math(
    response: str,
    gold: str | int | float | Sequence[str | int | float],
    *,
    timeout: float = 1.0,
) -> MathGrade:
    r"""Grade the last ``\boxed{}`` of ``response`` against ``gold`` (one answer or several).

    Never raises on the response's content; math-verify's time is limited to ``timeout``
    seconds per gold answer.

    >>> grade_math(r"... so \boxed{\frac{1}{2}}", "0.5").correct
    True
    """
    extracted = extract_boxed(response)
    if extracted is None:
        return MathGrade(False, None, "no_answer")
    golds: Sequence[object] = gold if isinstance(gold, list | tuple) else [gold]
    method = "text"
    for g in golds:
        ok, method = _compare(str(g), extracted, timeout)
        if ok:
            return MathGrade(True, extracted, method)
    return MathGrade(False, extracted, method)
