r"""Question answering and rule reasoning, graded by SQuAD-style exact match (single turn).

============  =================================================================================
ids           ``qa:NaturalQuestions``, ``qa:HotpotQA`` (answer in ``<answer>...</answer>``);
              ``logic:RuleTaker-d0``, ``-d1``, ``-d2``, ``-d3``, ``-d5`` (answer in ``\boxed{}``:
              ``True``/``False``); search-QA evaluation sets, meant for the search tool, in dataset
              order: ``eval:QaOpen``, ``eval:NaturalQuestions``, ``eval:TriviaQA``, ``eval:PopQA``,
              ``eval:HotpotQA``, ``eval:2Wiki``, ``eval:Musique``, ``eval:Bamboogle``
data          GEM's Hugging Face datasets (``axon-rl/NaturalQuestions``, ``axon-rl/HotpotQA``,
              ``axon-rl/RuleTaker-d*-70k``, ``axon-rl/search-eval``, ``nq_open``); offline
              without a cache the env uses the sample shipped in ``gemgym/envs/data/{qa,logic}/``
              and warns; ``dataset=`` / ``columns=`` as for every task env
observation   the question (as GEM: the answer format is for your prompt to ask)
action        any text; the last ``<answer>...</answer>`` (or the last ``\boxed{}`` for the
              RuleTaker ids and with ``extract_boxed=True``) is the answer
reward        1.0 if the normalised answer (lower case, no punctuation, no articles, single
              spaces) equals a normalised gold answer (any of several), else 0.0; no answer: −0.1
              (gemgym's penalty; GEM gives 0.0). The episode ends after one step
              (``terminated``)
info          ``correct``, ``extracted``, ``f1`` (best SQuAD token F1 over the gold answers),
              ``index``; ``format_error`` when no answer was found
expert        the first gold answer, tagged (or boxed)
============  =================================================================================

Reward integrity (``gemgym audit``): the RuleTaker answers are ``True``/``False``, so a fixed
reply (``copy_majority``, ``copy_other``, ``constant`` when it is a label) is right about half
the time, while the random action (a random short answer) almost never is: that gain is the
task's base rate, not an exploit (docs/audit.md).

Differences from upstream GEM: offline loading from a local file or the shipped sample, per-env
seeded order, ``terminated=True, truncated=False`` (GEM set both), token F1 reported in ``info``,
a reply without an answer scores −0.1 where GEM gives 0.0 (``gemgym.compat.gem``, the GEM
compatibility layer, gives GEM's 0.0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gemgym.envs.dataset import DatasetEnv, DatasetSource, DatasetSpec, Item
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["NO_ANSWER_REWARD", "QA_DATASETS", "QaEnv"]

NO_ANSWER_REWARD = -0.1
"""Reward of a reply with no extractable answer (gemgym's format penalty; GEM gives 0.0)."""

_SEARCH = "axon-rl/search-eval"

QA_DATASETS: dict[str, DatasetSpec] = {
    "qa:NaturalQuestions": DatasetSpec(
        "NaturalQuestions", "axon-rl/NaturalQuestions", sample="qa/nq.jsonl"
    ),
    "qa:HotpotQA": DatasetSpec("HotpotQA", "axon-rl/HotpotQA", sample="qa/hotpotqa.jsonl"),
    **{
        f"logic:RuleTaker-d{d}": DatasetSpec(
            f"RuleTaker-d{d}", f"axon-rl/RuleTaker-d{d}-70k", sample="logic/ruletaker.jsonl"
        )
        for d in (0, 1, 2, 3, 5)
    },
    "eval:QaOpen": DatasetSpec(
        "NQ-open", "google-research-datasets/nq_open", split="validation", sample="qa/nq.jsonl"
    ),
    **{
        f"eval:{name}": DatasetSpec(
            name,
            _SEARCH,
            split=split,
            sample="qa/hotpotqa.jsonl" if multihop else "qa/nq.jsonl",
        )
        for name, split, multihop in (
            ("NaturalQuestions", "nq", False),
            ("TriviaQA", "triviaqa", False),
            ("PopQA", "popqa", False),
            ("HotpotQA", "hotpotqa", True),
            ("2Wiki", "2wikimultihopqa", True),
            ("Musique", "musique", True),
            ("Bamboogle", "bamboogle", True),
        )
    },
}
"""The default dataset of every QA id (Hub id, split, shipped sample)."""


class QaEnv(DatasetEnv[str]):
    """A question per episode, graded by normalised exact match (see the module docstring).

    Args:
        dataset: where the questions come from (see :mod:`gemgym.envs.dataset`).
        columns: field -> column mapping for ``question`` and ``answer``.
        split: the split to load (default: the id's).
        spec_id: which default dataset to use (the registered id sets it).
        shuffle: seeded order (training) or dataset order (evaluation).
        extract_boxed: read the answer from the last ``\\boxed{}`` instead of ``<answer>``.
    """

    def __init__(
        self,
        dataset: DatasetSource = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        spec_id: str = "qa:NaturalQuestions",
        shuffle: bool = True,
        extract_boxed: bool = False,
    ) -> None:
        if spec_id not in QA_DATASETS:
            raise ConfigError(f"spec_id must be one of {sorted(QA_DATASETS)}, got {spec_id!r}")
        self.extract_boxed = extract_boxed
        self._init_dataset(
            dataset, columns=columns, split=split, spec=QA_DATASETS[spec_id], shuffle=shuffle
        )

    def observe(self, item: Item) -> str:
        return str(item["question"])

    def _wrap(self, answer: str) -> str:
        return f"\\boxed{{{answer}}}" if self.extract_boxed else f"<answer>{answer}</answer>"

    def grade(self, action: str, item: Item) -> tuple[float, dict[str, Any]]:
        from gemgym.grading.math import extract_boxed
        from gemgym.grading.qa import extract_tagged_answer, qa_exact_match, qa_f1

        extracted = extract_boxed(action) if self.extract_boxed else extract_tagged_answer(action)
        if extracted is None:
            info = {"correct": False, "success": False, "extracted": None, "f1": 0.0}
            return NO_ANSWER_REWARD, {**info, "format_error": True}
        ok = qa_exact_match(extracted, item["answer"])
        f1 = qa_f1(extracted, item["answer"])
        return (1.0 if ok else 0.0), {
            "correct": ok,
            "success": ok,
            "extracted": extracted,
            "f1": f1,
        }

    def sample_random_action(self) -> str:
        words = ("yes", "no", "Paris", "1969", "True", "False", "the river", "unknown")
        return self._wrap(self.rng.choice(words))

    def expert_action(self) -> str:
        if self.item is None:
            return self._wrap("")
        gold = self.item["answer"]
        first = gold[0] if isinstance(gold, list | tuple) and gold else gold
        return self._wrap(str(first))


for _id, _spec in QA_DATASETS.items():
    _is_eval = _id.startswith("eval:")
    _boxed = _id.startswith("logic:")
    register(
        _id,
        "gemgym.envs.qa:QaEnv",
        kwargs={"spec_id": _id, "shuffle": not _is_eval, "extract_boxed": _boxed},
        description=f"{_spec.name}: "
        + ("True/False in \\boxed{}" if _boxed else "short answer in <answer>")
        + f" ({_spec.hub_id}{', split ' + _spec.split if _is_eval else ''})",
    )
