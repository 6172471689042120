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

>>> from gemgym.episodes import Turn
>>> ep = TokenEpisode("game:X", 0, 1, "guess", model="m", prompt_ids=[1, 2], turns=[Turn(
...     "guess", "hi", 1.0, True, action_ids=[5, 6], logprobs=[-0.1, -0.2],
...     finish_reason="stop", next_ids=[7])], finish_reason="env_end")
>>> ep.input_ids
[1, 2, 5, 6, 7]
>>> ep.loss_mask
[0, 0, 1, 1, 0]
>>> token_advantages([ep], "reinforce")[0].tolist()
[0.0, 0.0, 1.0, 1.0, 0.0]

:class:`TokenEpisode` and :class:`TokenTurn` are the episode engine's one record
(:class:`gemgym.episodes.Episode`, :class:`gemgym.episodes.Turn`) holding tokens: the same type
as :class:`gemgym.experience.Episode`, so every summary and writer takes them.

Episodes are JSONL-serialisable (:func:`write_token_jsonl`, :func:`read_token_jsonl`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gemgym.episodes.outcomes import Finish, TruncationCause
from gemgym.episodes.record import (
    Episode,
    ObservationRole,
    Rendering,
    Turn,
    read_episodes,
    write_episodes,
)
from gemgym.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

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

EpisodeFinish = Finish
"""How an episode ended (:data:`gemgym.episodes.Finish`)."""

TokenEpisode = Episode
"""An episode with its tokens: the engine's one record, :class:`gemgym.episodes.Episode`."""

TokenTurn = Turn
"""A turn with its tokens: :class:`gemgym.episodes.Turn`."""


def write_token_jsonl(episodes: Iterable[TokenEpisode], path: str | Path | IO[str]) -> int:
    """Write episodes as JSON lines (one episode a line); returns how many were written."""
    return write_episodes(episodes, path)


def read_token_jsonl(path: str | Path) -> Iterator[TokenEpisode]:
    """Read episodes written by :func:`write_token_jsonl`."""
    return read_episodes(path, what="gemgym token episode")


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
