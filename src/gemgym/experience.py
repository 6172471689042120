"""Experience: typed :class:`Transition`/:class:`Episode` records, :func:`rollout`, JSONL in and out.

>>> import gemgym
>>> from gemgym.agents import OracleAgent
>>> eps = list(gemgym.rollout("game:GuessTheNumber-v0-easy", OracleAgent(), episodes=3, seed=0))
>>> all(e.success for e in eps)
True
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gemgym.agents.base import Agent
from gemgym.core import Env, Image, MultimodalObservation
from gemgym.errors import ConfigError

__all__ = ["Episode", "Transition", "read_jsonl", "rollout", "write_jsonl"]


@dataclass
class Transition:
    """One turn: the observation the agent saw, its action and what the env answered."""

    observation: Any
    action: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    next_observation: Any = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "observation": _encode(self.observation),
            "action": _encode(self.action),
            "reward": float(self.reward),
            "terminated": bool(self.terminated),
            "truncated": bool(self.truncated),
            "info": _encode(self.info),
            "next_observation": _encode(self.next_observation),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Transition:
        """Inverse of :meth:`to_dict`."""
        return cls(
            observation=_decode(d["observation"]),
            action=_decode(d["action"]),
            reward=float(d["reward"]),
            terminated=bool(d["terminated"]),
            truncated=bool(d["truncated"]),
            info=_decode(d.get("info", {})),
            next_observation=_decode(d.get("next_observation")),
        )


@dataclass
class Episode:
    """One episode: the env id, its seed, the reset observation and every transition."""

    env_id: str
    index: int
    seed: int | None
    initial_observation: Any
    transitions: list[Transition] = field(default_factory=list)
    reset_info: dict[str, Any] = field(default_factory=dict)

    @property
    def total_return(self) -> float:
        """Sum of rewards."""
        return float(sum(t.reward for t in self.transitions))

    @property
    def length(self) -> int:
        """Number of steps."""
        return len(self.transitions)

    @property
    def done(self) -> bool:
        """Whether the episode ended (terminated or truncated) rather than being cut short."""
        return bool(self.transitions) and (
            self.transitions[-1].terminated or self.transitions[-1].truncated
        )

    @property
    def success(self) -> bool:
        """The env's ``info["success"]`` on the last step, else terminated with reward > 0."""
        if not self.transitions:
            return False
        last = self.transitions[-1]
        return bool(last.info.get("success", last.terminated and last.reward > 0))

    @property
    def rewards(self) -> list[float]:
        """Per-step rewards."""
        return [t.reward for t in self.transitions]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (one JSONL line)."""
        return {
            "env_id": self.env_id,
            "index": self.index,
            "seed": self.seed,
            "initial_observation": _encode(self.initial_observation),
            "reset_info": _encode(self.reset_info),
            "transitions": [t.to_dict() for t in self.transitions],
            "return": self.total_return,
            "length": self.length,
            "success": self.success,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        """Inverse of :meth:`to_dict`."""
        return cls(
            env_id=d["env_id"],
            index=int(d["index"]),
            seed=d.get("seed"),
            initial_observation=_decode(d["initial_observation"]),
            transitions=[Transition.from_dict(t) for t in d["transitions"]],
            reset_info=_decode(d.get("reset_info", {})),
        )


def _encode(x: Any) -> Any:
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
        return {str(k): _encode(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_encode(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        try:
            return x.item()
        except (TypeError, ValueError):
            pass
    if hasattr(x, "tolist"):
        return x.tolist()
    return repr(x)


def _decode(x: Any) -> Any:
    if isinstance(x, dict):
        if x.get("__multimodal__"):
            return MultimodalObservation(
                x["text"],
                tuple(Image(base64.b64decode(i["data"]), i["mime_type"]) for i in x["images"]),
            )
        return {k: _decode(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


def write_jsonl(episodes: Iterable[Episode], path: str | Path | IO[str]) -> int:
    """Write episodes as JSON lines (one episode a line); returns how many were written."""
    n = 0
    if isinstance(path, str | Path):
        with open(path, "w", encoding="utf-8") as f:
            return write_jsonl(episodes, f)
    for ep in episodes:
        path.write(json.dumps(ep.to_dict(), ensure_ascii=False) + "\n")
        n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[Episode]:
    """Read episodes written by :func:`write_jsonl` (or ``gemgym run --out``)."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Episode.from_dict(json.loads(line))
            except (json.JSONDecodeError, KeyError) as e:
                raise ConfigError(f"{path}:{lineno}: not a gemgym episode record ({e})") from e


def rollout(
    env: str | Env[Any, Any],
    agent: Agent,
    *,
    episodes: int,
    seed: int | None = None,
    batch_size: int = 1,
    max_steps: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    **make_kwargs: Any,
) -> Iterator[Episode]:
    """Run ``agent`` for ``episodes`` episodes and yield each :class:`Episode` as it ends.

    Episode ``k`` is reset with ``seed + k`` (when a seed is given), whichever env copy plays it,
    so results do not depend on ``batch_size``. ``batch_size`` envs play at once and the agent
    gets their observations as one batch (an LLM agent then sends its requests concurrently).

    Args:
        env: an env id (made with ``make_kwargs``) or an env (copied with ``spawn``).
        agent: any :class:`~gemgym.agents.Agent`.
        episodes: how many episodes to play.
        seed: base seed; ``None`` leaves episodes unseeded.
        batch_size: envs played in parallel.
        max_steps: cut an episode after this many steps (it is then not ``done``).
        on_episode: called with each finished episode (e.g. to update a progress bar).
    """
    from gemgym.registry import make

    if episodes < 0:
        raise ConfigError(f"episodes must be >= 0, got {episodes}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    n = min(batch_size, episodes)
    if isinstance(env, str):
        env_id = env
        envs = [make(env, **make_kwargs) for _ in range(n)]
        owned = True
    else:
        if make_kwargs:
            raise ConfigError("make_kwargs are only used when env is an id")
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
        envs = [env] + [env.spawn() for _ in range(n - 1)]
        owned = False
    next_index = 0
    current: list[Episode | None] = [None] * n
    obs: list[Any] = [None] * n

    def start(slot: int) -> bool:
        nonlocal next_index
        if next_index >= episodes:
            current[slot] = None
            return False
        k = next_index
        next_index += 1
        s = None if seed is None else seed + k
        o, info = envs[slot].reset(seed=s)
        current[slot] = Episode(env_id, k, s, o, reset_info=info)
        obs[slot] = o
        return True

    try:
        started = [s for s in range(n) if start(s)]
        if started:
            agent.start_episodes(started)
        while any(c is not None for c in current):
            active = [s for s in range(n) if current[s] is not None]
            actions = agent.act(
                [obs[s] for s in active], envs=[envs[s] for s in active], slots=active
            )
            restarted: list[int] = []
            for s, action in zip(active, actions, strict=True):
                ep = current[s]
                assert ep is not None
                o, r, te, tr, info = envs[s].step(action)
                ep.transitions.append(Transition(obs[s], action, float(r), te, tr, info, o))
                obs[s] = o
                if te or tr or (max_steps is not None and ep.length >= max_steps):
                    if on_episode is not None:
                        on_episode(ep)
                    yield ep
                    if start(s):
                        restarted.append(s)
            if restarted:
                agent.start_episodes(restarted)
    finally:
        if owned:
            for e in envs:
                e.close()


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean return, success rate and mean number of turns of some episodes."""
    n = len(episodes)
    if n == 0:
        return {"episodes": 0, "mean_return": 0.0, "success_rate": 0.0, "mean_turns": 0.0}
    return {
        "episodes": n,
        "mean_return": sum(e.total_return for e in episodes) / n,
        "success_rate": sum(e.success for e in episodes) / n,
        "mean_turns": sum(e.length for e in episodes) / n,
    }
