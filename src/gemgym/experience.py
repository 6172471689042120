"""Experience: typed :class:`Transition`/:class:`Episode` records, :func:`rollout`, JSONL in and out.

:func:`play` is the one rollout engine: :func:`rollout` (agents) and
:class:`gemgym.rl.Collector` (batched policies, seed groups) both play their episodes with it on
a :class:`~gemgym.vector.VectorEnv`.

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
from typing import IO, TYPE_CHECKING, Any

from gemgym.agents.base import Agent
from gemgym.core import Env, Image, MultimodalObservation
from gemgym.errors import ConfigError
from gemgym.prompting import model_view

if TYPE_CHECKING:
    from gemgym.vector import VectorEnv

__all__ = ["Episode", "Transition", "play", "read_jsonl", "rollout", "write_jsonl"]


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


def play(
    venv: VectorEnv,
    seeds: Sequence[int | None],
    act: Callable[[list[int], list[Episode], list[Any]], Sequence[Any]],
    *,
    env_id: str | None = None,
    max_turns: int | None = None,
    on_start: Callable[[list[int]], None] | None = None,
) -> Iterator[Episode]:
    """The rollout engine under :func:`rollout` and :class:`gemgym.rl.Collector`.

    Plays one episode per entry of ``seeds`` on ``venv`` (made with
    ``autoreset_mode="disabled"``): episode ``k`` is reset with ``seeds[k]`` on the first free
    env slot, and its :class:`Episode` has ``index=k``. Free slots are refilled in slot order as
    episodes end, so the same seeds and the same actions give the same episodes on every backend.

    Args:
        venv: the vector env; its slots are reset and stepped here, never by ``act``.
        seeds: one reset seed per episode (``None``: the slot's own random stream).
        act: ``act(slots, episodes, observations) -> actions``: one action for each slot in
            ``slots`` (the slots with an episode in progress, ascending), given the episodes
            in progress there and their latest observations as a model should see them
            (:func:`gemgym.prompting.model_view`: the observation with the board or state the
            env keeps in ``info["suffix"]``). The episodes keep the raw observations and infos.
        env_id: the ``env_id`` of every episode (default: the id of the slot's env).
        max_turns: cut an episode after this many turns (it is then not ``done``).
        on_start: called with the slots where new episodes were just reset.

    Yields:
        each episode as it ends (episodes ending on the same step in slot order).
    """
    n = venv.num_envs
    running: list[Episode | None] = [None] * n
    obs: list[Any] = [None] * n
    last_info: list[dict[str, Any]] = [{} for _ in range(n)]
    next_job = 0

    def start(slots: list[int]) -> None:
        nonlocal next_job
        reset_seeds: list[int | None] = [None] * n
        mask = [False] * n
        jobs: list[int] = []
        for s in slots:
            reset_seeds[s] = seeds[next_job]
            mask[s] = True
            jobs.append(next_job)
            next_job += 1
        new_obs, infos = venv.reset(seed=reset_seeds, options={"reset_mask": mask})
        for s, k, o, info in zip(slots, jobs, new_obs, infos, strict=True):
            eid = venv.env_ids[s] if env_id is None else env_id
            running[s] = Episode(eid, k, seeds[k], o, reset_info=info)
            obs[s] = o
            last_info[s] = info
        if on_start is not None:
            on_start(slots)

    first = list(range(min(n, len(seeds))))
    if first:
        start(first)
    while True:
        active = [s for s in range(n) if running[s] is not None]
        if not active:
            return
        eps = [e for e in running if e is not None]
        actions = list(act(active, eps, [model_view(obs[s], last_info[s]) for s in active]))
        if len(actions) != len(active):
            raise ConfigError(f"policy returned {len(actions)} actions for {len(active)} inputs")
        new_obs, rewards, terms, truncs, infos = venv.step(dict(zip(active, actions, strict=True)))
        ended: list[int] = []
        for j, s in enumerate(active):
            ep = eps[j]
            te, tr = bool(terms[j]), bool(truncs[j])
            ep.transitions.append(
                Transition(obs[s], actions[j], float(rewards[j]), te, tr, infos[j], new_obs[j])
            )
            obs[s] = new_obs[j]
            last_info[s] = infos[j]
            if te or tr or (max_turns is not None and ep.length >= max_turns):
                running[s] = None
                ended.append(s)
                yield ep
        refill = ended[: max(0, len(seeds) - next_job)]
        if refill:
            start(refill)


def rollout(
    env: str | Env[Any, Any] | VectorEnv,
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
    so results do not depend on ``batch_size`` or on the vector backend. ``batch_size`` envs
    play at once and the agent gets their observations as one batch (an LLM agent then sends its
    requests concurrently). The episodes are played by :func:`play` on a vector env, and the
    agent gets observations and slot ids, never env objects.

    Args:
        env: an env id (made with ``make_kwargs``), an env (copied with ``spawn``) or a
            :class:`~gemgym.vector.VectorEnv` made with ``autoreset_mode="disabled"`` (any
            backend; all its envs play, ``batch_size`` is not used, and it is not closed).
        agent: any :class:`~gemgym.agents.Agent`.
        episodes: how many episodes to play.
        seed: base seed; ``None`` leaves episodes unseeded.
        batch_size: envs played in parallel.
        max_steps: cut an episode after this many steps (it is then not ``done``).
        on_episode: called with each finished episode (e.g. to update a progress bar).
    """
    from gemgym.vector import VectorEnv

    if episodes < 0:
        raise ConfigError(f"episodes must be >= 0, got {episodes}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if not isinstance(env, VectorEnv) and min(batch_size, episodes) == 0:
        return
    venv, env_id, owned = open_vector_env(env, min(batch_size, episodes), make_kwargs)

    def act(slots: list[int], _: list[Episode], observations: list[Any]) -> Sequence[Any]:
        return agent.act(observations, slots=slots, venv=venv)

    seeds = [None if seed is None else seed + k for k in range(episodes)]
    try:
        for ep in play(
            venv, seeds, act, env_id=env_id, max_turns=max_steps, on_start=agent.start_episodes
        ):
            if on_episode is not None:
                on_episode(ep)
            yield ep
    finally:
        if owned:
            venv.close()


def open_vector_env(
    env: str | Env[Any, Any] | VectorEnv,
    n: int,
    make_kwargs: dict[str, Any],
    *,
    backend: str = "sync",
) -> tuple[VectorEnv, str | None, bool]:
    """The vector env a rollout plays on: ``(venv, env_id, owned)``.

    ``env`` is an id (made ``n`` times with ``make_kwargs``; ``wrappers=`` among them wraps every
    copy), an env (copied ``n`` times with ``spawn``) or a vector env made with
    ``autoreset_mode="disabled"`` (used as it is). ``env_id`` names the episodes (``None``: each
    slot's own id); ``owned`` says whether the caller must close the vector env.
    """
    from gemgym.vector import VectorEnv, make_vector_env

    if isinstance(env, VectorEnv):
        if make_kwargs:
            raise ConfigError("make_kwargs are only used when env is an id")
        if env.autoreset_mode.value != "disabled":
            raise ConfigError(
                'rollouts reset the envs themselves; make the vector env with autoreset_mode="disabled"'
            )
        return env, None, False
    kwargs = dict(make_kwargs)
    opts: dict[str, Any] = {
        "wrappers": kwargs.pop("wrappers", None),
        "backend": backend,
        "autoreset_mode": "disabled",
    }
    if isinstance(env, str):
        return make_vector_env([env] * n, [kwargs] * n, **opts), env, True
    if kwargs:
        raise ConfigError("make_kwargs are only used when env is an id")
    env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    return make_vector_env(env_fns=[env.spawn] * n, **opts), env_id, True


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
