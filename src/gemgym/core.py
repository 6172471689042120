"""The generic core: :class:`Env`, :class:`Wrapper` and the observation types.

An environment is a (possibly multi-turn) interaction between an agent, usually an LLM, and a
task. Its API follows Gymnasium:

* ``reset(*, seed=None, options=None) -> (observation, info)`` starts an episode. A seed reseeds the
  env's own random generators (:attr:`Env.rng`, :attr:`Env.np_random`); the global ``random`` and
  numpy states are never touched, so the same seed gives the same episode in any process.
* ``step(action) -> (observation, reward, terminated, truncated, info)`` plays one turn.
  ``terminated`` means the task reached a terminal state (solved, failed, single-turn answered);
  ``truncated`` means the episode was cut from outside the task (a turn limit). They are never
  both true for the same step, so RL code can bootstrap correctly.
* ``close()`` releases resources; it is idempotent. Envs are context managers.

Observations are plain text (``str``), a chat-message list (:data:`ChatObservation`) or text with
images (:class:`MultimodalObservation`). Actions of text envs are strings (the model's reply).

Bad actions from a model (no ``\\boxed{}``, garbage, out of range) are never exceptions: an env
turns them into an observation and a reward. An action that is not a ``str`` (``None``, a number,
bytes, a message dict) is the empty reply: the env's format-error path, never coerced with
``str()`` (:func:`non_text_info`). An observation echoes at most :data:`ECHO_LIMIT` characters of
a reply (:func:`excerpt`).

This module imports nothing else of gemgym except :mod:`gemgym.errors`.
"""

from __future__ import annotations

import base64
import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypedDict, TypeVar, cast

from gemgym.errors import ConfigError

if TYPE_CHECKING:
    from typing import Self

    import numpy as np

    from gemgym.env_spec import EnvSpec

__all__ = [
    "ECHO_LIMIT",
    "NON_TEXT_KEY",
    "ActT",
    "ActionWrapper",
    "ChatObservation",
    "Env",
    "Image",
    "Message",
    "MultimodalObservation",
    "ObsT",
    "Observation",
    "ObservationWrapper",
    "RewardWrapper",
    "StepResult",
    "Wrapper",
    "blocks_loop",
    "excerpt",
    "non_text_info",
]

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")
WObsT = TypeVar("WObsT")
WActT = TypeVar("WActT")


class Message(TypedDict):
    """One chat message, as the OpenAI chat API and Hugging Face chat templates take it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str


ChatObservation = list[Message]
"""An observation given as a conversation (for chat-template training)."""


@dataclass(frozen=True, slots=True)
class Image:
    """An encoded image (PNG, JPEG, ...) carried inside an observation."""

    data: bytes
    mime_type: str = "image/png"

    @classmethod
    def from_file(cls, path: str | Path) -> Image:
        """Read an image file; the MIME type follows the file suffix."""
        p = Path(path)
        suffix = p.suffix.lower().lstrip(".")
        mime = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif"}.get(
            suffix, f"image/{suffix or 'png'}"
        )
        return cls(p.read_bytes(), mime)

    def to_data_url(self) -> str:
        """The image as a ``data:`` URL, as OpenAI-compatible vision APIs accept it."""
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class MultimodalObservation:
    """Text with images (math with diagrams, screenshots)."""

    text: str
    images: tuple[Image, ...] = ()

    def to_openai_content(self) -> list[dict[str, Any]]:
        """The observation as an OpenAI chat ``content`` list (text part, then image parts)."""
        parts: list[dict[str, Any]] = [{"type": "text", "text": self.text}]
        parts.extend(
            {"type": "image_url", "image_url": {"url": img.to_data_url()}} for img in self.images
        )
        return parts


Observation = str | ChatObservation | MultimodalObservation
"""Any observation a built-in env produces."""

StepResult = tuple[ObsT, float, bool, bool, dict[str, Any]]
"""``(observation, reward, terminated, truncated, info)``."""


ECHO_LIMIT = 200
"""The most characters of a model's reply that an observation quotes back (:func:`excerpt`)."""

NON_TEXT_KEY = "non_text_action"
"""``info`` key of a step whose action was not a ``str``: the action's type name."""


def excerpt(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` when it has at most ``limit`` characters, else its start and end around a marker
    that counts the characters left out (at most ``limit + 40`` characters in all).

    Observations that quote a model's invalid reply use it, so a 2 MB reply is not echoed into
    the next prompt.
    """
    if len(text) <= limit:
        return text
    head = max(1, limit * 3 // 4)
    tail = max(0, limit - head)
    left_out = len(text) - head - tail
    return f"{text[:head]}…[{left_out} characters left out]…{text[len(text) - tail :]}"


def non_text_info(action: object) -> dict[str, Any]:
    """The ``info`` entries of a step whose action is not a ``str`` (the one rule for every env):
    it is scored as the empty reply, the env's format error, and ``info`` says so with
    ``format_error=True`` and :data:`NON_TEXT_KEY` naming the action's type."""
    return {"format_error": True, NON_TEXT_KEY: type(action).__name__}


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        try:
            import numpy as np

            if isinstance(seed, np.integer):
                seed = int(seed)
        except ImportError:  # pragma: no cover - numpy is a core dependency
            pass
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative int or None, got {seed!r}")
    return seed


class Env(Generic[ObsT, ActT]):
    """An environment: ``reset`` starts an episode, ``step`` plays one turn.

    Subclasses implement :meth:`reset` and :meth:`step`; they call ``super().reset(seed=seed)``
    first so that a seed reseeds :attr:`rng` and :attr:`np_random`. Optional methods:
    :meth:`sample_random_action` (a well-formed random action), :meth:`expert_action` (what an
    expert would play now), :meth:`get_state`/:meth:`set_state`, :meth:`spawn`, :meth:`close`.

    Attributes:
        metadata: static facts about the env class (e.g. ``{"multi_turn": True}``).
        spec: the :class:`~gemgym.registry.EnvSpec` it was made from, set by :func:`gemgym.make`.
    """

    metadata: ClassVar[Mapping[str, Any]] = {}
    spec: EnvSpec | None = None
    blocking_io: bool = False
    """Whether ``step``/``reset`` wait on I/O or do heavy work (a sandbox, a grader, a server)
    that this class's ``astep``/``areset`` do not move off the event loop. The episode engine
    (:mod:`gemgym.episodes`) runs the sync methods of such an env (any layer of it, see
    :func:`blocks_loop`) on its own bounded executor; an env whose ``astep``/``areset`` truly
    await leaves it ``False``."""

    _rng: random.Random | None = None
    _np_random: np.random.Generator | None = None
    _np_seed: int | None = None
    _closed: bool = False

    # -- episode API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsT, dict[str, Any]]:
        """Start a new episode and return ``(observation, info)``.

        Args:
            seed: reseeds this env's generators; the same seed gives the same episode. ``None``
                continues the current random stream (seeded from OS entropy on first use).
            options: env-specific options for this episode (e.g. ``{"index": 3}`` for a fixed
                dataset item).

        The base implementation only reseeds; subclasses call it and then build the episode.
        """
        if seed is not None:
            seed = _check_seed(seed)
            self._rng = random.Random(seed)
            self._np_random = None
            self._np_seed = seed
        return cast("tuple[ObsT, dict[str, Any]]", (None, {}))

    def step(self, action: ActT) -> tuple[ObsT, float, bool, bool, dict[str, Any]]:
        """Play one turn: ``(observation, reward, terminated, truncated, info)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    async def astep(self, action: ActT) -> tuple[ObsT, float, bool, bool, dict[str, Any]]:
        """Async :meth:`step`. Envs that wait on I/O override it; the default calls ``step``."""
        return self.step(action)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsT, dict[str, Any]]:
        """Async :meth:`reset`. The default calls ``reset``."""
        return self.reset(seed=seed, options=options)

    def warmup(self) -> None:
        """Start now what the first step would start (grader worker pools, sandboxes), so that
        no episode waits for it. Idempotent and cheap once done; the default does nothing. The
        episode engine calls it (on its env executor) before the first episode."""

    def sample_random_action(self) -> ActT:
        """Return a random, well-formed action (one the env parses; not necessarily legal)."""
        raise NotImplementedError(f"{type(self).__name__} does not define sample_random_action()")

    def expert_action(self) -> ActT:
        """Return what an expert would play now (used by :class:`gemgym.agents.OracleAgent`)."""
        raise NotImplementedError(f"{type(self).__name__} has no expert (expert_action())")

    # -- randomness ----------------------------------------------------------------------------
    @property
    def rng(self) -> random.Random:
        """This env's own :class:`random.Random`, reseeded by ``reset(seed=...)``."""
        if self._rng is None:
            self._rng = random.Random()
        return self._rng

    @property
    def np_random(self) -> np.random.Generator:
        """This env's own numpy generator, reseeded by ``reset(seed=...)`` (created lazily)."""
        if self._np_random is None:
            import numpy as np

            self._np_random = np.random.default_rng(self._np_seed)
        return self._np_random

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> Any:
        """Return a snapshot of the env's state that :meth:`set_state` restores.

        The default deep-copies the instance attributes, which fits pure-Python envs; envs that
        hold external resources (processes, servers) override it or raise ``NotImplementedError``.
        """
        return copy.deepcopy({k: v for k, v in vars(self).items() if k != "spec"})

    def set_state(self, state: Any) -> None:
        """Restore a snapshot taken by :meth:`get_state`."""
        vars(self).update(copy.deepcopy(state))

    def spawn(self, same_state: bool = False) -> Self:
        """Return an independent copy of this env.

        Args:
            same_state: copy the current episode state (and random stream) too. When false the
                copy has the same configuration, a fresh random stream, and must be reset.
        """
        new = copy.deepcopy(self)
        if not same_state:
            new._rng = None
            new._np_random = None
            new._np_seed = None
        return new

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release resources. Calling it again does nothing."""
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def unwrapped(self) -> Env[Any, Any]:
        """The innermost env (itself, for an env that is not a wrapper)."""
        return self

    def get_wrapper_attr(self, name: str) -> Any:
        """Look ``name`` up on this env or, for wrappers, down the wrapper stack."""
        return getattr(self, name)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __str__(self) -> str:
        env_id = self.spec.id if self.spec is not None else None
        return f"<{type(self).__name__}{f' {env_id}' if env_id else ''}>"

    __repr__ = __str__


class Wrapper(Env[WObsT, WActT], Generic[WObsT, WActT, ObsT, ActT]):
    """Base class of wrappers: every call is forwarded explicitly to :attr:`env`.

    Nothing is copied from the inner env: attributes of inner envs are reached with
    :meth:`get_wrapper_attr` or through :attr:`unwrapped`. The ``reset``/``step`` signatures never
    change.

    ``step`` and ``astep`` (and ``reset``/``areset``) are written once, here, from hooks; a wrapper
    overrides the hooks, not the methods, and then works the same sync and async, without
    blocking an event loop:

    * :meth:`before_step` checks or transforms the action before the inner step;
    * :meth:`intercept_step` (async: :meth:`aintercept_step`, for a hook that waits on I/O)
      answers a step itself, without stepping the inner env (a tool call);
    * :meth:`after_step` transforms the inner env's result;
    * :meth:`after_reset` transforms the inner env's first observation and info.

    A wrapper that overrides ``step`` (or ``reset``) itself but not ``astep`` (``areset``) still
    works: its ``astep`` runs its ``step``, blocking the loop for that long.
    """

    # which step hooks a class overrides, so that a step calls only those (it is the hot path):
    # 0 after_step only, 1 before_step too, 2 intercept_step too
    _step_hooks: ClassVar[int] = 0
    _astep_runs_step: ClassVar[bool] = False
    _areset_runs_reset: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        intercepts = (
            cls.intercept_step is not Wrapper.intercept_step
            or cls.aintercept_step is not Wrapper.aintercept_step
        )
        cls._step_hooks = 2 if intercepts else int(cls.before_step is not Wrapper.before_step)
        cls._astep_runs_step = cls.step is not Wrapper.step and cls.astep is Wrapper.astep
        cls._areset_runs_reset = cls.reset is not Wrapper.reset and cls.areset is Wrapper.areset

    def __init__(self, env: Env[ObsT, ActT]) -> None:
        if not isinstance(env, Env):
            raise TypeError(f"a Wrapper wraps a gemgym.Env, got {type(env).__name__}")
        self.env = env

    # -- hooks -----------------------------------------------------------------------------------
    def before_step(self, action: WActT) -> ActT:
        """The action the inner env gets (runs first; may raise, e.g. a step needing a reset)."""
        return cast("ActT", action)

    def intercept_step(self, action: WActT) -> StepResult[WObsT] | None:
        """Answer this step without the inner env, or ``None`` to step it.

        The result is returned as is (:meth:`after_step` does not see it).
        """
        return None

    async def aintercept_step(self, action: WActT) -> StepResult[WObsT] | None:
        """Async :meth:`intercept_step`, used by :meth:`astep`; the default calls it."""
        return self.intercept_step(action)

    def after_step(self, action: WActT, result: StepResult[ObsT]) -> StepResult[WObsT]:
        """This wrapper's result, from the inner env's ``result`` for ``action``."""
        return cast("StepResult[WObsT]", result)

    def after_reset(self, obs: ObsT, info: dict[str, Any]) -> tuple[WObsT, dict[str, Any]]:
        """This wrapper's first observation and info, from the inner env's."""
        return cast("WObsT", obs), info

    # -- episode API -----------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[WObsT, dict[str, Any]]:
        """Reset the inner env, then :meth:`after_reset`."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self.after_reset(obs, info)

    def step(self, action: WActT) -> tuple[WObsT, float, bool, bool, dict[str, Any]]:
        """:meth:`before_step`, then :meth:`intercept_step` or the inner step and
        :meth:`after_step`."""
        hooks = self._step_hooks
        if not hooks:  # no cast() here: a call per step and layer
            return self.after_step(action, self.env.step(action))  # type: ignore[arg-type]
        inner_action = self.before_step(action)
        if hooks == 2:
            answered = self.intercept_step(action)
            if answered is not None:
                return answered
        return self.after_step(action, self.env.step(inner_action))

    async def astep(self, action: WActT) -> tuple[WObsT, float, bool, bool, dict[str, Any]]:
        """Async :meth:`step`: the same hooks around the inner env's ``astep``."""
        if self._astep_runs_step:
            return self.step(action)
        inner_action = self.before_step(action)
        if self._step_hooks == 2:
            answered = await self.aintercept_step(action)
            if answered is not None:
                return answered
        return self.after_step(action, await self.env.astep(inner_action))

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[WObsT, dict[str, Any]]:
        """Async :meth:`reset`: the inner env's ``areset``, then :meth:`after_reset`."""
        if self._areset_runs_reset:
            return self.reset(seed=seed, options=options)
        obs, info = await self.env.areset(seed=seed, options=options)
        return self.after_reset(obs, info)

    def warmup(self) -> None:
        """Forward to the inner env."""
        self.env.warmup()

    def sample_random_action(self) -> WActT:
        """Forward to the inner env."""
        return cast("WActT", self.env.sample_random_action())

    def expert_action(self) -> WActT:
        """Forward to the inner env."""
        return cast("WActT", self.env.expert_action())

    @property
    def rng(self) -> random.Random:
        """The inner env's generator."""
        return self.env.rng

    @property
    def np_random(self) -> np.random.Generator:
        """The inner env's numpy generator."""
        return self.env.np_random

    @property
    def spec(self) -> EnvSpec | None:
        """The spec of the env stack (set on the outermost env by :func:`gemgym.make`)."""
        own: EnvSpec | None = vars(self).get("_spec")
        return own if own is not None else self.env.spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = value

    @property
    def metadata(self) -> Mapping[str, Any]:  # type: ignore[override]
        """The inner env's metadata."""
        return self.env.metadata

    def get_state(self) -> Any:
        """This wrapper's own state together with the inner env's state."""
        own = {k: v for k, v in vars(self).items() if k not in ("env", "_spec")}
        return {"wrapper": copy.deepcopy(own), "env": self.env.get_state()}

    def set_state(self, state: Any) -> None:
        """Restore a snapshot taken by :meth:`get_state`."""
        vars(self).update(copy.deepcopy(state["wrapper"]))
        self.env.set_state(state["env"])

    def spawn(self, same_state: bool = False) -> Self:
        """Copy this wrapper around an independent copy of the inner env."""
        new = copy.copy(self)
        own = {k: v for k, v in vars(self).items() if k != "env"}
        vars(new).update(copy.deepcopy(own))
        new.env = self.env.spawn(same_state=same_state)
        return new

    def close(self) -> None:
        """Close the inner env (idempotent)."""
        self._closed = True
        self.env.close()

    @property
    def closed(self) -> bool:
        """Whether the inner env is closed."""
        return self.env.closed

    @property
    def unwrapped(self) -> Env[Any, Any]:
        """The innermost env."""
        return self.env.unwrapped

    def get_wrapper_attr(self, name: str) -> Any:
        """Return ``name`` from the outermost layer of the stack that has it."""
        if name in vars(self) or hasattr(type(self), name):
            return getattr(self, name)
        return self.env.get_wrapper_attr(name)

    def __str__(self) -> str:
        return f"<{type(self).__name__}{self.env}>"

    __repr__ = __str__


class ObservationWrapper(Wrapper[WObsT, ActT, ObsT, ActT]):
    """A wrapper that transforms observations with :meth:`observation`."""

    def observation(self, observation: ObsT) -> WObsT:
        """Transform one observation."""
        raise NotImplementedError

    def after_reset(self, obs: ObsT, info: dict[str, Any]) -> tuple[WObsT, dict[str, Any]]:
        return self.observation(obs), info

    def after_step(self, action: ActT, result: StepResult[ObsT]) -> StepResult[WObsT]:
        obs, reward, terminated, truncated, info = result
        return self.observation(obs), reward, terminated, truncated, info


class ActionWrapper(Wrapper[ObsT, WActT, ObsT, ActT]):
    """A wrapper that transforms actions with :meth:`action` before the inner env sees them."""

    def action(self, action: WActT) -> ActT:
        """Transform one action."""
        raise NotImplementedError

    def before_step(self, action: WActT) -> ActT:
        return self.action(action)


class RewardWrapper(Wrapper[ObsT, ActT, ObsT, ActT]):
    """A wrapper that transforms rewards with :meth:`reward`."""

    def reward(self, reward: float) -> float:
        """Transform one reward."""
        raise NotImplementedError

    def after_step(self, action: ActT, result: StepResult[ObsT]) -> StepResult[ObsT]:
        obs, reward, terminated, truncated, info = result
        return obs, self.reward(reward), terminated, truncated, info


def blocks_loop(env: Env[Any, Any]) -> bool:
    """Whether any layer of ``env`` declares :attr:`Env.blocking_io` (its ``astep``/``areset``
    would hold an event loop while it waits)."""
    layer: Env[Any, Any] = env
    while True:
        if layer.blocking_io:
            return True
        if not isinstance(layer, Wrapper):
            return False
        layer = layer.env
