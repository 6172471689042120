"""The episode record: one type for every front end, with or without tokens.

An :class:`Episode` is what was played: the env, its reset seed and first observation, and one
:class:`Turn` per step: the observation the model acted on, its action, the env's answer, and
the timings. When a token policy played it (:func:`gemgym.llm.rollout_tokens`, the trainer's
policies, the integrations), the same record also holds the token ids the model was conditioned
on and sampled:

* ``prompt_ids``: the chat template's rendering of the system prompt (if any) and the first
  observation, ending with the generation prompt (context: no loss);
* per turn: ``action_ids``, the ids the model sampled, verbatim (with their ``logprobs``), then
  ``next_ids``: the template's turn end, the next observation as a user or tool message and the
  next generation prompt (context).

So ``input_ids = prompt_ids + action_ids[0] + next_ids[0] + action_ids[1] + ...`` is exactly
what the model was conditioned on at every turn, and :attr:`Episode.loss_mask` is 1 on the
sampled tokens only.

>>> ep = Episode("game:X", 0, 1, "guess", model="m", prompt_ids=[1, 2], turns=[Turn("guess",
...     "hi", 1.0, True, action_ids=[5, 6], logprobs=[-0.1, -0.2], finish_reason="stop",
...     next_ids=[7])], finish_reason="env_end")
>>> ep.input_ids, ep.loss_mask, ep.success
([1, 2, 5, 6, 7], [0, 0, 1, 1, 0], True)

How it ended (:attr:`Episode.finish_reason`, :attr:`Episode.truncation`,
:attr:`Episode.error_stage`) follows :mod:`gemgym.episodes.outcomes`. Records are JSON lines
(:meth:`Episode.to_dict`, :meth:`Episode.from_dict`), which also read the older ``transitions``
and token-episode layouts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from gemgym.core import Image, MultimodalObservation
from gemgym.episodes.outcomes import Finish, Stage, TruncationCause, is_success
from gemgym.errors import ConfigError
from gemgym.prompting import model_view

if TYPE_CHECKING:
    from gemgym.rl.tokens import TokenizedEpisode

__all__ = [
    "Episode",
    "ObservationRole",
    "Rendering",
    "Turn",
    "decode_value",
    "encode_value",
    "read_episodes",
    "write_episodes",
]

ObservationRole = Literal["user", "tool"]
"""The role an observation is shown in: ``"tool"`` after a tool call, else ``"user"``."""

Rendering = Literal["incremental", "rerendered"]
"""``"incremental"``: ``input_ids`` are the ids the model was conditioned on, sampled ids
verbatim. ``"rerendered"``: the conversation was re-rendered with the chat template for
training, so ``action_ids`` may differ from what was sampled and ``logprobs`` are dropped."""


@dataclass(slots=True)
class Turn:
    """One turn: what the model was shown, what it did and what the env answered.

    Attributes:
        observation: the observation the action answers (as the env returned it; the model was
            shown :func:`gemgym.prompting.model_view` of it with the previous step's info).
        action: the action sent to the env (the model's text).
        reward, terminated, truncated, info: the env step's answer.
        next_observation: the env's next observation.
        action_ids: the sampled token ids (token policies; verbatim unless ``retokenized``).
        logprobs: their sampled log-probs (``None`` when the model gave none).
        finish_reason: why the generation stopped (``"stop"``, ``"length"``).
        next_ids: context tokens after the action: turn end, next observation, generation
            prompt (only the turn end after the last turn).
        next_role: the role the next observation was shown in (``"tool"`` after a tool call).
        retokenized: the ids were made by tokenising the text (a text-only backend).
        latency_s: seconds the model took for this action; env_s: seconds the env step took.
    """

    observation: Any = None
    action: Any = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    next_observation: Any = None
    action_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    next_ids: list[int] = field(default_factory=list)
    next_role: ObservationRole = "user"
    retokenized: bool = False
    latency_s: float = 0.0
    env_s: float = 0.0

    @property
    def action_text(self) -> str:
        """The action as text."""
        return self.action if isinstance(self.action, str) else str(self.action)

    @property
    def next_view(self) -> Any:
        """The next observation as the model is shown it (with ``info["suffix"]``)."""
        return model_view(self.next_observation, self.info)

    def to_dict(self, *, timings: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (token fields only when the turn has tokens; the seconds only with
        ``timings``, so that two runs of the same episodes give the same dicts)."""
        d: dict[str, Any] = {
            "observation": encode_value(self.observation),
            "action": encode_value(self.action),
            "reward": float(self.reward),
            "terminated": bool(self.terminated),
            "truncated": bool(self.truncated),
            "info": encode_value(self.info),
            "next_observation": encode_value(self.next_observation),
        }
        if timings:
            d["latency_s"], d["env_s"] = float(self.latency_s), float(self.env_s)
        if self.action_ids or self.next_ids or self.logprobs is not None or self.finish_reason:
            d["action_ids"] = list(self.action_ids)
            d["logprobs"] = None if self.logprobs is None else [float(x) for x in self.logprobs]
            d["finish_reason"] = self.finish_reason
            d["next_ids"] = list(self.next_ids)
            d["next_role"] = self.next_role
            d["retokenized"] = bool(self.retokenized)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        """Inverse of :meth:`to_dict` (also reads the older token-turn layout)."""
        lps = d.get("logprobs")
        return cls(
            observation=decode_value(d.get("observation")),
            action=decode_value(d["action"] if "action" in d else d.get("action_text")),
            reward=float(d.get("reward", 0.0)),
            terminated=bool(d.get("terminated", False)),
            truncated=bool(d.get("truncated", False)),
            info=decode_value(d.get("info", {})),
            next_observation=decode_value(d.get("next_observation")),
            action_ids=[int(t) for t in d.get("action_ids", [])],
            logprobs=None if lps is None else [float(x) for x in lps],
            finish_reason=d.get("finish_reason"),
            next_ids=[int(t) for t in d.get("next_ids", [])],
            next_role=d.get("next_role", "user"),
            retokenized=bool(d.get("retokenized", False)),
            latency_s=float(d.get("latency_s", 0.0)),
            env_s=float(d.get("env_s", 0.0)),
        )


@dataclass(slots=True, weakref_slot=True)
class Episode:
    """One episode (see the module docstring).

    Attributes:
        env_id, index, seed: which env, which episode of the run, its reset seed.
        initial_observation: the reset observation; reset_info: the reset info.
        turns: one :class:`Turn` per env step.
        finish_reason: how it ended (:data:`~gemgym.episodes.outcomes.Finish`).
        truncation: why it was truncated, when ``finish_reason == "truncation"``.
        error, error_stage: the failure's message and stage, when ``finish_reason == "error"``.
        group, sample: the seed group (episodes from one initial state share it) and the
            sample's number within it.
        model: the model's name (token policies).
        prompt_ids: the rendered system prompt and first observation (token policies).
        prompt_messages: the chat messages ``prompt_ids`` render.
        sampling: the sampling settings; rendering: see :data:`Rendering`.
        wall_s: seconds from reset to the end.
        usage: what the model calls cost: ``prompt_tokens``, ``completion_tokens`` and
            ``requests`` (tries included), summed over the turns.
        warnings: what the policy noted about its replies (a reply with no text), one entry
            per turn concerned.
    """

    env_id: str
    index: int
    seed: int | None
    initial_observation: Any = None
    turns: list[Turn] = field(default_factory=list)
    reset_info: dict[str, Any] = field(default_factory=dict)
    finish_reason: Finish = "cut"
    truncation: TruncationCause | None = None
    error: str | None = None
    error_stage: Stage | None = None
    group: int | None = None
    sample: int = 0
    model: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    prompt_messages: list[dict[str, Any]] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)
    rendering: Rendering = "incremental"
    wall_s: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    # -- outcome -----------------------------------------------------------------------------
    @property
    def transitions(self) -> list[Turn]:
        """The turns (the name older code uses)."""
        return self.turns

    @property
    def length(self) -> int:
        """Number of turns."""
        return len(self.turns)

    @property
    def rewards(self) -> list[float]:
        """Per-turn rewards."""
        return [t.reward for t in self.turns]

    @property
    def total_return(self) -> float:
        """Sum of rewards."""
        return float(sum(t.reward for t in self.turns))

    @property
    def done(self) -> bool:
        """Whether the env ended the episode (terminated or truncated it)."""
        return bool(self.turns) and (self.turns[-1].terminated or self.turns[-1].truncated)

    @property
    def failed(self) -> bool:
        """Whether the episode ended in an error (see :attr:`error_stage`)."""
        return self.finish_reason == "error"

    @property
    def success(self) -> bool:
        """:func:`~gemgym.episodes.outcomes.is_success` of the last turn (never for a failed
        episode)."""
        if not self.turns or self.finish_reason == "error":
            return False
        last = self.turns[-1]
        return is_success(last.info, last.terminated, last.reward)

    # -- token views -------------------------------------------------------------------------
    @property
    def input_ids(self) -> list[int]:
        """The whole token sequence: prompt, then each action and the context after it."""
        out = list(self.prompt_ids)
        for t in self.turns:
            out += t.action_ids
            out += t.next_ids
        return out

    @property
    def turn_index(self) -> list[int]:
        """For each token of :attr:`input_ids`: its action turn, or ``-1`` for context."""
        out = [-1] * len(self.prompt_ids)
        for i, t in enumerate(self.turns):
            out += [i] * len(t.action_ids)
            out += [-1] * len(t.next_ids)
        return out

    @property
    def loss_mask(self) -> list[int]:
        """1 on the sampled tokens, 0 on the prompt, observations, tool outputs and template."""
        return [int(i >= 0) for i in self.turn_index]

    @property
    def logprobs(self) -> list[float | None]:
        """For each token of :attr:`input_ids`: its sampled log-prob (``None`` on context)."""
        out: list[float | None] = [None] * len(self.prompt_ids)
        for t in self.turns:
            out += list(t.logprobs) if t.logprobs is not None else [None] * len(t.action_ids)
            out += [None] * len(t.next_ids)
        return out

    @property
    def num_tokens(self) -> int:
        """Length of :attr:`input_ids`."""
        return len(self.prompt_ids) + sum(len(t.action_ids) + len(t.next_ids) for t in self.turns)

    @property
    def num_action_tokens(self) -> int:
        """How many tokens the model sampled."""
        return sum(len(t.action_ids) for t in self.turns)

    @property
    def retokenized(self) -> bool:
        """Whether any turn's ids were made by tokenising text (not the sampled ids)."""
        return any(t.retokenized for t in self.turns)

    def to_tokenized(self) -> TokenizedEpisode:
        """The episode as a :class:`gemgym.rl.TokenizedEpisode` (ids and turn indices)."""
        import numpy as np

        from gemgym.rl.tokens import TokenizedEpisode

        return TokenizedEpisode(
            np.asarray(self.input_ids, dtype=np.int64), np.asarray(self.turn_index, np.int64)
        )

    # -- text for humans ---------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as chat messages: the prompt's (or the first observation), then
        each action and the observation after it (none after the last turn)."""
        if self.prompt_messages:
            out = [dict(m) for m in self.prompt_messages]
        else:
            out = [
                {
                    "role": "user",
                    "content": _content(model_view(self.initial_observation, self.reset_info)),
                }
            ]
        last = len(self.turns) - 1
        for i, t in enumerate(self.turns):
            out.append({"role": "assistant", "content": t.action_text})
            ended = t.terminated or t.truncated or self.finish_reason != "cut"
            if i < last or (not ended and t.next_observation not in (None, "")):
                out.append({"role": t.next_role, "content": _content(t.next_view)})
        return out

    def transcript(self) -> str:
        """The conversation as plain text, one ``[role]`` block per message."""
        parts = []
        for m in self.messages:
            content = m["content"]
            if not isinstance(content, str):
                content = " ".join(str(p.get("text", "<image>")) for p in content)
            parts.append(f"[{m['role']}]\n{content}")
        return "\n\n".join(parts)

    def to_episode(self) -> Episode:
        """This record (token episodes and text episodes are one type)."""
        return self

    # -- JSON --------------------------------------------------------------------------------
    def to_dict(self, *, timings: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (one JSONL line); the seconds spent only with ``timings``."""
        d: dict[str, Any] = {
            "env_id": self.env_id,
            "index": self.index,
            "seed": self.seed,
            "group": self.group,
            "sample": self.sample,
            "initial_observation": encode_value(self.initial_observation),
            "reset_info": encode_value(self.reset_info),
            "turns": [t.to_dict(timings=timings) for t in self.turns],
            "finish_reason": self.finish_reason,
            "truncation": self.truncation,
            "error": self.error,
            "error_stage": self.error_stage,
            "return": self.total_return,
            "length": self.length,
            "success": self.success,
        }
        if timings:
            d["wall_s"] = self.wall_s
        if self.usage:
            d["usage"] = dict(self.usage)
        if self.warnings:
            d["warnings"] = list(self.warnings)
        if self.model or self.prompt_ids:
            d.update(
                model=self.model,
                prompt_ids=list(self.prompt_ids),
                prompt_messages=encode_value(self.prompt_messages),
                sampling=dict(self.sampling),
                rendering=self.rendering,
                num_tokens=self.num_tokens,
                num_action_tokens=self.num_action_tokens,
            )
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        """Inverse of :meth:`to_dict` (also reads the older ``transitions`` layout)."""
        turns = d["turns"] if "turns" in d else d["transitions"]
        return cls(
            env_id=d["env_id"],
            index=int(d["index"]),
            seed=d.get("seed"),
            initial_observation=decode_value(d.get("initial_observation")),
            turns=[Turn.from_dict(t) for t in turns],
            reset_info=decode_value(d.get("reset_info", {})),
            finish_reason=d.get("finish_reason", "cut"),
            truncation=d.get("truncation"),
            error=d.get("error"),
            error_stage=d.get("error_stage"),
            group=d.get("group"),
            sample=int(d.get("sample", 0)),
            model=d.get("model", ""),
            prompt_ids=[int(t) for t in d.get("prompt_ids", [])],
            prompt_messages=decode_value(d.get("prompt_messages", [])),
            sampling=dict(d.get("sampling", {})),
            rendering=d.get("rendering", "incremental"),
            wall_s=float(d.get("wall_s", 0.0)),
            usage={str(k): int(v) for k, v in (d.get("usage") or {}).items()},
            warnings=[str(w) for w in d.get("warnings") or []],
        )


def _content(view: Any) -> Any:
    return view.to_openai_content() if isinstance(view, MultimodalObservation) else view


def encode_value(x: Any) -> Any:
    """``x`` as JSON-ready data (images as base64, numpy values as Python's)."""
    if x is None or isinstance(x, str | bool | int | float):
        return x
    if isinstance(x, MultimodalObservation):
        return {
            "__multimodal__": True,
            "text": x.text,
            "images": [
                {"mime_type": i.mime_type, "data": base64.b64encode(i.data).decode()}
                for i in x.images
            ],
        }
    if isinstance(x, dict):
        return {str(k): encode_value(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [encode_value(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        try:
            return x.item()
        except (TypeError, ValueError):
            pass
    if hasattr(x, "tolist"):
        return x.tolist()
    return repr(x)


def decode_value(x: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if isinstance(x, dict):
        if x.get("__multimodal__"):
            return MultimodalObservation(
                x["text"],
                tuple(Image(base64.b64decode(i["data"]), i["mime_type"]) for i in x["images"]),
            )
        return {k: decode_value(v) for k, v in x.items()}
    if isinstance(x, list):
        return [decode_value(v) for v in x]
    return x


def write_episodes(
    episodes: Iterable[Episode], path: str | Path | IO[str], *, timings: bool = False
) -> int:
    """Write episodes as JSON lines (one episode a line, as each comes); returns how many."""
    if isinstance(path, str | Path):
        with open(path, "w", encoding="utf-8") as f:
            return write_episodes(episodes, f, timings=timings)
    n = 0
    for ep in episodes:
        path.write(json.dumps(ep.to_dict(timings=timings), ensure_ascii=False) + "\n")
        n += 1
    return n


def read_episodes(path: str | Path, *, what: str = "gemgym episode record") -> Iterator[Episode]:
    """Read episodes written by :func:`write_episodes`; a line that is not one is a
    :class:`~gemgym.errors.ConfigError` naming the file, the line and ``what`` was expected."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Episode.from_dict(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ConfigError(f"{path}:{lineno}: not a {what} ({e})") from e
