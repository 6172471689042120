"""The token episode record: what a model sampled, token for token, and what the env answered.

One :class:`TokenEpisode` is one episode as the model saw it: a single token sequence made of

* ``prompt_ids``: the chat template's rendering of the system prompt (if any) and the first
  observation, ending with the generation prompt (context: no loss);
* for every turn ``t`` (:class:`TokenTurn`): ``action_ids``, the ids the model sampled, verbatim
  (trained on, with their sampled ``logprobs``), then ``next_ids``: the template's turn end
  (e.g. ``<|im_end|>``'s newline when the model sampled ``<|im_end|>`` itself), the next
  observation rendered as a user or tool message, and the next generation prompt (context).

So ``input_ids = prompt_ids + action_ids[0] + next_ids[0] + action_ids[1] + ...`` is exactly
what the model was conditioned on at every turn, and :attr:`TokenEpisode.loss_mask` is 1 on the
sampled tokens only (tool outputs, observations and template tokens are masked out).

>>> ep = TokenEpisode("game:X", 0, 1, "m", [1, 2], [TokenTurn([5, 6], [-0.1, -0.2], "stop",
...     "hi", reward=1.0, terminated=True, next_ids=[7])], finish_reason="env_end")
>>> ep.input_ids
[1, 2, 5, 6, 7]
>>> ep.loss_mask
[0, 0, 1, 1, 0]
>>> token_advantages([ep], "reinforce")[0].tolist()
[0.0, 0.0, 1.0, 1.0, 0.0]

Episodes are JSONL-serialisable (:func:`write_token_jsonl`, :func:`read_token_jsonl`) and
convert to :class:`gemgym.experience.Episode` (:meth:`TokenEpisode.to_episode`) for the
summaries the rest of gemgym computes.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from gemgym.errors import ConfigError
from gemgym.experience import Episode, Transition, _decode, _encode
from gemgym.llm.backend import FinishReason

if TYPE_CHECKING:
    import numpy as np

    from gemgym.rl.tokens import TokenizedEpisode

__all__ = [
    "EpisodeFinish",
    "ObservationRole",
    "Rendering",
    "TokenEpisode",
    "TokenTurn",
    "TruncationCause",
    "read_token_jsonl",
    "token_advantages",
    "write_token_jsonl",
]

EpisodeFinish = Literal["env_end", "truncation", "error", "cut"]
"""How an episode ended: ``"env_end"`` (the env terminated it), ``"truncation"`` (see
:data:`TruncationCause`), ``"error"`` (a backend request failed; :attr:`TokenEpisode.error`
says why), ``"cut"`` (not ended: the rollout stopped before the episode did)."""

TruncationCause = Literal["env", "context", "max_turns"]
"""Why an episode was truncated: the env's own limit (``truncated=True``), the context window
(the next turn had no room, see :attr:`~gemgym.llm.SamplingParams.max_context`), or the
rollout's ``max_turns``."""

Rendering = Literal["incremental", "rerendered"]
"""``"incremental"``: ``input_ids`` are the ids the model was conditioned on, sampled ids
verbatim. ``"rerendered"``: the conversation was re-rendered with the chat template for
training (``apply_chat_template`` of the whole conversation), so ``action_ids`` may differ from
what was sampled and ``logprobs`` are dropped (see :mod:`gemgym.llm.render`)."""

ObservationRole = Literal["user", "tool"]


@dataclass(slots=True)
class TokenTurn:
    """One turn: the sampled action and what followed it.

    Attributes:
        action_ids: the sampled token ids (verbatim, unless ``retokenized``).
        logprobs: their sampled log-probs (``None`` when the backend gave none).
        finish_reason: why the generation stopped (``"stop"`` or ``"length"``).
        action_text: the decoded action, as sent to the env.
        reward, terminated, truncated, info: the env step's answer.
        next_ids: context tokens after the action: turn end, next observation, generation
            prompt (only the turn end after the last turn).
        next_observation: the next observation as the model was shown it
            (:func:`gemgym.prompting.model_view`), ``""`` after the last turn.
        next_role: the role the next observation was rendered as (``"tool"`` after a tool call).
        retokenized: the ids were made by tokenising the text (a text-only backend).
        latency_s: the backend's latency for this turn.
    """

    action_ids: list[int]
    logprobs: list[float] | None
    finish_reason: FinishReason
    action_text: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    next_ids: list[int] = field(default_factory=list)
    next_observation: str = ""
    next_role: ObservationRole = "user"
    retokenized: bool = False
    latency_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "action_ids": list(self.action_ids),
            "logprobs": None if self.logprobs is None else [float(x) for x in self.logprobs],
            "finish_reason": self.finish_reason,
            "action_text": self.action_text,
            "reward": float(self.reward),
            "terminated": bool(self.terminated),
            "truncated": bool(self.truncated),
            "info": _encode(self.info),
            "next_ids": list(self.next_ids),
            "next_observation": self.next_observation,
            "next_role": self.next_role,
            "retokenized": self.retokenized,
            "latency_s": self.latency_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TokenTurn:
        """Inverse of :meth:`to_dict`."""
        return cls(
            action_ids=[int(t) for t in d["action_ids"]],
            logprobs=None if d.get("logprobs") is None else [float(x) for x in d["logprobs"]],
            finish_reason=d["finish_reason"],
            action_text=d["action_text"],
            reward=float(d.get("reward", 0.0)),
            terminated=bool(d.get("terminated", False)),
            truncated=bool(d.get("truncated", False)),
            info=_decode(d.get("info", {})),
            next_ids=[int(t) for t in d.get("next_ids", [])],
            next_observation=d.get("next_observation", ""),
            next_role=d.get("next_role", "user"),
            retokenized=bool(d.get("retokenized", False)),
            latency_s=float(d.get("latency_s", 0.0)),
        )


@dataclass(slots=True)
class TokenEpisode:
    """One episode as token ids, masks, log-probs and rewards (see the module docstring).

    Attributes:
        env_id, index, seed: which env, which episode of the rollout, its reset seed.
        model: the backend's model name.
        prompt_ids: the rendered system prompt and first observation, with the generation
            prompt.
        turns: one :class:`TokenTurn` per env step.
        finish_reason: how the episode ended (:data:`EpisodeFinish`).
        truncation: why it was truncated, when ``finish_reason == "truncation"``.
        error: the failed request's message, when ``finish_reason == "error"``.
        prompt_messages: the chat messages ``prompt_ids`` render (system, first observation).
        reset_info: the env's reset info.
        sampling: the sampling settings (:meth:`SamplingParams.to_dict`).
        rendering: :data:`Rendering`.
        group: the seed group (episodes from the same initial state share it), for GRPO-style
            advantages.
    """

    env_id: str
    index: int
    seed: int | None
    model: str
    prompt_ids: list[int]
    turns: list[TokenTurn] = field(default_factory=list)
    finish_reason: EpisodeFinish = "cut"
    truncation: TruncationCause | None = None
    error: str | None = None
    prompt_messages: list[dict[str, Any]] = field(default_factory=list)
    reset_info: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    rendering: Rendering = "incremental"
    group: int | None = None

    # -- token views -------------------------------------------------------------------------
    @property
    def input_ids(self) -> list[int]:
        """The whole sequence: prompt, then each action and the context after it."""
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
        """For each token of :attr:`input_ids`: its sampled log-prob (``None`` on context
        tokens and where the backend gave none)."""
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

    # -- rewards -----------------------------------------------------------------------------
    @property
    def rewards(self) -> list[float]:
        """Per-turn rewards."""
        return [t.reward for t in self.turns]

    @property
    def total_return(self) -> float:
        """Sum of rewards."""
        return float(sum(self.rewards))

    @property
    def success(self) -> bool:
        """The env's ``info["success"]`` on the last turn, else terminated with reward > 0."""
        if not self.turns:
            return False
        last = self.turns[-1]
        return bool(last.info.get("success", last.terminated and last.reward > 0))

    # -- text for humans ---------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as chat messages: the prompt's, then each action and observation."""
        out = [dict(m) for m in self.prompt_messages]
        for t in self.turns:
            out.append({"role": "assistant", "content": t.action_text})
            if t.next_observation:
                out.append({"role": t.next_role, "content": t.next_observation})
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

    # -- conversions -------------------------------------------------------------------------
    def to_episode(self) -> Episode:
        """The episode as a :class:`gemgym.experience.Episode` (texts, rewards, infos)."""
        obs: Any = self.prompt_messages[-1]["content"] if self.prompt_messages else ""
        ep = Episode(self.env_id, self.index, self.seed, obs, reset_info=dict(self.reset_info))
        for t in self.turns:
            ep.transitions.append(
                Transition(
                    obs,
                    t.action_text,
                    t.reward,
                    t.terminated,
                    t.truncated,
                    t.info,
                    t.next_observation,
                )
            )
            obs = t.next_observation
        return ep

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (one JSONL line)."""
        return {
            "env_id": self.env_id,
            "index": self.index,
            "seed": self.seed,
            "model": self.model,
            "prompt_ids": list(self.prompt_ids),
            "turns": [t.to_dict() for t in self.turns],
            "finish_reason": self.finish_reason,
            "truncation": self.truncation,
            "error": self.error,
            "prompt_messages": _encode(self.prompt_messages),
            "reset_info": _encode(self.reset_info),
            "sampling": dict(self.sampling),
            "rendering": self.rendering,
            "group": self.group,
            "return": self.total_return,
            "num_tokens": self.num_tokens,
            "num_action_tokens": self.num_action_tokens,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TokenEpisode:
        """Inverse of :meth:`to_dict`."""
        return cls(
            env_id=d["env_id"],
            index=int(d["index"]),
            seed=d.get("seed"),
            model=d.get("model", ""),
            prompt_ids=[int(t) for t in d["prompt_ids"]],
            turns=[TokenTurn.from_dict(t) for t in d["turns"]],
            finish_reason=d.get("finish_reason", "cut"),
            truncation=d.get("truncation"),
            error=d.get("error"),
            prompt_messages=_decode(d.get("prompt_messages", [])),
            reset_info=_decode(d.get("reset_info", {})),
            sampling=dict(d.get("sampling", {})),
            rendering=d.get("rendering", "incremental"),
            group=d.get("group"),
        )


def write_token_jsonl(episodes: Iterable[TokenEpisode], path: str | Path | IO[str]) -> int:
    """Write episodes as JSON lines (one episode a line); returns how many were written."""
    if isinstance(path, str | Path):
        with open(path, "w", encoding="utf-8") as f:
            return write_token_jsonl(episodes, f)
    n = 0
    for ep in episodes:
        path.write(json.dumps(ep.to_dict(), ensure_ascii=False) + "\n")
        n += 1
    return n


def read_token_jsonl(path: str | Path) -> Iterator[TokenEpisode]:
    """Read episodes written by :func:`write_token_jsonl`."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield TokenEpisode.from_dict(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ConfigError(f"{path}:{lineno}: not a gemgym token episode ({e})") from e


def token_advantages(
    episodes: Sequence[TokenEpisode],
    estimator: str,
    *,
    gamma: float = 1.0,
    group_ids: Sequence[Hashable] | None = None,
    **kwargs: Any,
) -> list[np.ndarray]:
    """Turn-level advantages (:func:`gemgym.rl.compute_advantages`) broadcast onto tokens.

    Returns one float array per episode, aligned with its :attr:`~TokenEpisode.input_ids`:
    turn ``t``'s advantage on the tokens of action ``t``, 0 on every context token.
    ``group_ids`` defaults to the episodes' :attr:`~TokenEpisode.group` for the group
    estimators (GRPO, RLOO, ...).
    """
    from gemgym.rl.advantages import GROUP_ESTIMATORS, compute_advantages
    from gemgym.rl.tokens import token_weights

    if group_ids is None and estimator in GROUP_ESTIMATORS:
        if any(e.group is None for e in episodes):
            raise ConfigError(
                f"estimator {estimator!r} needs group ids: pass group_ids= or roll out with "
                "group_size > 1 so every episode has a group"
            )
        group_ids = [e.group for e in episodes]
    advs = compute_advantages(
        estimator, [e.rewards for e in episodes], gamma=gamma, group_ids=group_ids, **kwargs
    )
    return [token_weights(e.to_tokenized(), a) for e, a in zip(episodes, advs, strict=True)]
