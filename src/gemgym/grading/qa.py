"""QA grading: answer extraction, SQuAD-style normalisation, exact match and token F1.

The normalisation is the one of the SQuAD evaluation script (which GEM's QA envs also use):
lower case, drop punctuation, drop the articles *a*, *an*, *the*, collapse whitespace.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

__all__ = ["extract_tagged_answer", "normalize_qa_answer", "qa_exact_match", "qa_f1"]

_ANSWER_TAG_RE = re.compile(r"<(/?)answer>", re.IGNORECASE)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def extract_tagged_answer(text: str, tag: str = "answer") -> str | None:
    """The content of the last ``<answer>...</answer>`` in ``text`` (``None`` if there is none).

    Tags match case-insensitively; an opening tag pairs with the next closing tag (later opening
    tags before it are content). One pass: linear time on any input, unclosed tags included.
    """
    if not isinstance(text, str):
        return None
    pattern = (
        _ANSWER_TAG_RE if tag == "answer" else re.compile(rf"<(/?){re.escape(tag)}>", re.IGNORECASE)
    )
    found: tuple[int, int] | None = None
    content_start = -1
    for m in pattern.finditer(text):
        if not m.group(1):  # an opening tag
            if content_start < 0:
                content_start = m.end()
        elif content_start >= 0:
            found = (content_start, m.start())
            content_start = -1
    return text[found[0] : found[1]].strip() if found is not None else None


def normalize_qa_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces.

    >>> normalize_qa_answer("The  Eiffel Tower!")
    'eiffel tower'
    """
    s = str(text).lower().translate(_PUNCT)
    s = _ARTICLES_RE.sub(" ", s)
    return " ".join(s.split())


def _golds(gold: object) -> list[str]:
    if isinstance(gold, str | int | float):
        return [str(gold)]
    if isinstance(gold, Iterable):
        return [str(g) for g in gold]
    return [str(gold)]


def qa_exact_match(prediction: str, gold: object) -> bool:
    """Whether the normalised prediction equals a normalised gold answer (one or several)."""
    pred = normalize_qa_answer(prediction)
    return any(pred == normalize_qa_answer(g) for g in _golds(gold))


def qa_f1(prediction: str, gold: object) -> float:
    """The best token-overlap F1 between the prediction and any gold answer (SQuAD)."""
    pred_tokens = normalize_qa_answer(prediction).split()
    best = 0.0
    for g in _golds(gold):
        gold_tokens = normalize_qa_answer(g).split()
        if not pred_tokens or not gold_tokens:
            best = max(best, float(pred_tokens == gold_tokens))
            continue
        common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if common == 0:
            continue
        precision, recall = common / len(pred_tokens), common / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best
