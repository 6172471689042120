"""What every trainer integration shares: naming envs, dataset rows, a text-level episode.

* :data:`EnvsArg` / :func:`resolve_envs`: a run names its envs as one registered id
  (``"game:GuessTheNumber-v0-easy"``), a factory (``lambda: ToolEnvWrapper(gemgym.make(...),
  [PythonTool()])``), or a mapping of names to either, for runs that mix envs;
* :func:`task_rows`: the rows of a trainer's dataset, ``{"env": name, "seed": s, "prompt": ...}``,
  mixing the envs round-robin; every rollout of a row starts from the same state (its seed), so
  group baselines (GRPO, RLOO, ReBN per group) compare like with like;
* :class:`TextEpisode`: one episode driven with the model's text (for frameworks whose own code
  renders and tokenises the conversation: verifiers, the Tinker cookbook, OpenRLHF, Oat). It
  shows the model what :func:`gemgym.prompting.model_view` shows, and a finished episode refuses
  another step.

>>> envs = resolve_envs({"guess": "game:GuessTheNumber-v0-easy"})
>>> rows = task_rows(envs, 2, seed=7)
>>> [(r["env"], r["seed"]) for r in rows]
[('guess', 7), ('guess', 8)]
>>> ep = TextEpisode(envs["guess"], seed=7)
>>> isinstance(ep.reset(), str), ep.done
(True, False)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gemgym.core import Env, blocks_loop
from gemgym.episodes.outcomes import Stage, episode_seed, is_success, turn_cap_reached
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.prompting import model_view

if TYPE_CHECKING:
    from gemgym.llm.record import TokenEpisode

__all__ = [
    "PRESETS",
    "CompletionView",
    "EnvFactory",
    "EnvsArg",
    "StepOutcome",
    "TextEpisode",
    "completion_view",
    "env_factory",
    "env_names",
    "named_envs",
    "observation_text",
    "preset_envs",
    "resolve_envs",
    "task_rows",
]

EnvFactory = Callable[[], Env[Any, Any]]
"""Builds one fresh env (a registered id is turned into ``lambda: gemgym.make(id)``)."""

EnvsArg = str | EnvFactory | Mapping[str, "str | EnvFactory"]
"""One env id, one factory, or ``{name: id or factory}`` for runs mixing several envs."""


def _factory(spec: str | EnvFactory) -> EnvFactory:
    if isinstance(spec, str):
        import gemgym

        gemgym.spec(spec)  # an unknown id fails now, with close matches, not mid-training

        def make(env_id: str = spec) -> Env[Any, Any]:
            return gemgym.make(env_id)

        return make
    if callable(spec):
        return spec
    raise ConfigError(f"an env is a registered id or a zero-argument factory, got {spec!r}")


def resolve_envs(envs: EnvsArg) -> dict[str, EnvFactory]:
    """``{name: factory}`` from any :data:`EnvsArg`; a single id is named after itself, a
    single factory ``"env"``."""
    if isinstance(envs, str):
        return {envs: _factory(envs)}
    if isinstance(envs, Mapping):
        if not envs:
            raise ConfigError("no envs given: pass an env id, a factory or {name: id/factory}")
        return {str(name): _factory(spec) for name, spec in envs.items()}
    return {"env": _factory(envs)}


PRESETS: dict[str, str] = {
    "guess": "GuessTheNumber (game:GuessTheNumber-v0-easy): guesses in \\boxed{}, hints each turn",
    "math": "GSM8K (math:GSM8K, the shipped sample) with the Python tool (<python>...</python>)",
    "qa": "HotpotQA (the shipped sample) with BM25 search over the shipped corpus (<search>)",
}
"""The example envs every framework's example runs (:func:`preset_envs`)."""


def preset_envs(names: str) -> dict[str, EnvFactory]:
    """Factories for comma-separated :data:`PRESETS` names (``"guess,math"`` mixes two).

    Offline-safe: the math and QA envs read the samples shipped with gemgym.
    """
    out: dict[str, EnvFactory] = {}
    for name in (n.strip() for n in names.split(",")):
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {list(PRESETS)}")
        out[name] = _preset(name)
    return out


def env_factory(name: str) -> EnvFactory:
    """The factory of one :data:`PRESETS` name or registered env id."""
    return _preset(name) if name in PRESETS else _factory(name)


def env_names(spec: str) -> list[str]:
    """The names in comma-separated ``spec`` (presets or env ids), blanks dropped."""
    return [n.strip() for n in spec.split(",") if n.strip()]


def named_envs(spec: str) -> dict[str, EnvFactory]:
    """``{name: factory}`` for comma-separated :data:`PRESETS` names or registered env ids
    (``"guess,game:Sudoku-v0-easy"`` mixes two), the form command lines and config files use."""
    names = env_names(spec)
    if not names:
        raise ConfigError(f"no envs in {spec!r}: name presets {list(PRESETS)} or env ids")
    return {name: env_factory(name) for name in names}


def _preset(name: str) -> EnvFactory:
    import gemgym

    if name == "guess":
        return _factory("game:GuessTheNumber-v0-easy")

    from gemgym.wrappers.tools import ToolEnvWrapper

    if name == "math":
        from gemgym.tools import PythonTool

        def make_math() -> Env[Any, Any]:
            return ToolEnvWrapper(gemgym.make("math:GSM8K", dataset="sample"), [PythonTool()])

        return make_math
    from gemgym.retrieval import build_retriever, sample_corpus_path, sample_qa_path
    from gemgym.tools import SearchTool

    retriever = build_retriever(str(sample_corpus_path()))  # one index for every env

    def make_qa() -> Env[Any, Any]:
        search = SearchTool(retriever=retriever)
        return ToolEnvWrapper(gemgym.make("qa:HotpotQA", dataset=str(sample_qa_path())), [search])

    return make_qa


def observation_text(observation: Any, info: Mapping[str, Any] | None) -> str:
    """The observation as the text a chat model is shown (:func:`model_view`); chat and
    multimodal observations are refused with what to do instead."""
    shown = model_view(observation, info)
    if isinstance(shown, str):
        return shown
    raise ConfigError(
        f"this integration sends text; the env observed {type(shown).__name__}. Use a text env "
        "(or gemgym.llm's rollouts, which pass chat and image observations to engines that take "
        "them)"
    )


def task_rows(
    envs: Mapping[str, EnvFactory], n: int, *, seed: int = 0, with_prompt: bool = True
) -> list[dict[str, Any]]:
    """``n`` dataset rows cycling through ``envs``: ``{"env", "seed", "prompt"}``.

    Row ``i`` plays env ``names[i % len(names)]`` from seed ``seed + i``; ``prompt`` is its
    first observation as a chat message list (what trainers log and what a TRL dataset needs),
    left out with ``with_prompt=False``.
    """
    if n < 1:
        raise ConfigError(f"n must be >= 1, got {n}")
    names = list(envs)
    rows: list[dict[str, Any]] = []
    made: dict[str, Env[Any, Any]] = {}
    try:
        for i in range(n):
            name = names[i % len(names)]
            row_seed = episode_seed(seed, i) or 0
            row: dict[str, Any] = {"env": name, "seed": row_seed}
            if with_prompt:
                env = made.get(name) or made.setdefault(name, envs[name]())
                obs, info = env.reset(seed=row_seed)
                row["prompt"] = [{"role": "user", "content": observation_text(obs, info)}]
            rows.append(row)
    finally:
        for env in made.values():
            env.close()
    return rows


@dataclass(slots=True)
class StepOutcome:
    """What one env step answered, with the next observation as the model's text."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Whether the episode ended."""
        return self.terminated or self.truncated


class TextEpisode:
    """One episode of a gemgym env, driven with the model's text replies, for frameworks whose
    own loop drives the env (OpenRLHF, Tinker, verifiers).

    ``reset()`` returns the first observation as text; ``step(text)`` plays one reply (async:
    :meth:`areset`, :meth:`astep`, which run a blocking env, :func:`gemgym.core.blocks_loop`,
    on a thread as the episode engine does). Rewards accumulate in :attr:`rewards` (one per
    step). The env is built on first use and closed when the episode ends (or by :meth:`close`).

    A step that raises ends the episode as the engine ends a failed one: the outcome is
    truncated with reward 0, :attr:`error` and :attr:`error_stage` say what broke, and
    :attr:`failed` is true, so the framework's loop goes on.
    """

    def __init__(self, factory: EnvFactory, seed: int | None = None) -> None:
        self._factory = factory
        self.seed = seed
        self._env: Env[Any, Any] | None = None
        self.rewards: list[float] = []
        self.last: StepOutcome | None = None
        self.reset_info: dict[str, Any] = {}
        self.error: str | None = None
        self.error_stage: Stage | None = None

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self.last is not None and self.last.done

    @property
    def failed(self) -> bool:
        """Whether the episode ended in an error."""
        return self.error is not None

    @property
    def total_return(self) -> float:
        """Sum of the rewards so far."""
        return float(sum(self.rewards))

    @property
    def success(self) -> bool:
        """:func:`gemgym.episodes.is_success` of the last step (never for a failed episode)."""
        if self.last is None or self.failed:
            return False
        return is_success(self.last.info, self.last.terminated, self.last.reward)

    def turn_cap_reached(self, max_turns: int | None) -> bool:
        """Whether the episode has played ``max_turns`` turns (the engine's turn cap)."""
        return turn_cap_reached(len(self.rewards), max_turns)

    def reset(self) -> str:
        """Start the episode; returns the first observation as text."""
        if self._env is None:
            self._env = self._factory()
        obs, info = self._env.reset(seed=self.seed)
        self.rewards, self.last, self.reset_info = [], None, dict(info)
        self.error = self.error_stage = None
        return observation_text(obs, info)

    async def areset(self) -> str:
        """Async :meth:`reset` (a blocking env resets on a thread)."""
        return await asyncio.to_thread(self.reset) if self._blocks() else self.reset()

    def step(self, text: str) -> StepOutcome:
        """Play one reply; the env is closed once the episode ends."""
        env = self._check()
        try:
            result = env.step(text)
        except Exception as e:  # an env that breaks ends its own episode only
            return self._fail(e)
        return self._record(*result)

    async def astep(self, text: str) -> StepOutcome:
        """Async :meth:`step` (a blocking env steps on a thread, else its ``astep``)."""
        env = self._check()
        try:
            if self._blocks():
                result = await asyncio.to_thread(env.step, text)
            else:
                result = await env.astep(text)
        except Exception as e:
            return self._fail(e)
        return self._record(*result)

    def close(self) -> None:
        """Close the env (idempotent)."""
        if self._env is not None:
            env, self._env = self._env, None
            env.close()

    def _blocks(self) -> bool:
        if self._env is None:
            self._env = self._factory()
        return blocks_loop(self._env)

    def _check(self) -> Env[Any, Any]:
        if self._env is None or self.done:
            raise ResetNeeded("the episode has ended (or was never reset); call reset() first")
        return self._env

    def _record(
        self, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> StepOutcome:
        out = StepOutcome(
            observation_text(obs, info), float(reward), bool(terminated), bool(truncated), info
        )
        self.rewards.append(out.reward)
        self.last = out
        if out.done:
            self.close()
        return out

    def _fail(self, exc: Exception) -> StepOutcome:
        from gemgym.episodes.engine import error_stage

        self.error_stage = error_stage(exc, "step")
        self.error = f"{type(exc).__name__}: {exc}"
        return self._record(
            "", 0.0, False, True, {"error": self.error, "error_stage": self.error_stage}
        )


@dataclass(slots=True)
class CompletionView:
    """A token episode as trainers that split prompt and response take it."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    mask: list[int]


def completion_view(episode: TokenEpisode, pad_token_id: int) -> CompletionView:
    """``prompt_ids`` (the first prompt) and everything after it as the response: each action
    (mask 1, its sampled log-probs) and the context between actions (mask 0, log-prob 0). The
    context after the last action is left out (no model conditions on it); an episode with no
    token (its first request failed) gets one masked ``pad_token_id``, so batches stay
    rectangular."""
    ids: list[int] = []
    lps: list[float] = []
    mask: list[int] = []
    for k, t in enumerate(episode.turns):
        ids += t.action_ids
        lps += list(t.logprobs) if t.logprobs is not None else [0.0] * len(t.action_ids)
        mask += [1] * len(t.action_ids)
        if k < len(episode.turns) - 1:
            ids += t.next_ids
            lps += [0.0] * len(t.next_ids)
            mask += [0] * len(t.next_ids)
    if not ids:
        ids, lps, mask = [pad_token_id], [0.0], [0]
    return CompletionView(list(episode.prompt_ids), ids, lps, mask)
