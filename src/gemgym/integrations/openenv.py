"""OpenEnv (0.3): any gemgym env as an OpenEnv server, and any OpenEnv server as a gemgym env.

OpenEnv serves an environment over HTTP and WebSocket (FastAPI): ``/reset``, ``/step``,
``/state``, ``/health``, ``/schema``, and ``/ws`` sessions, one environment instance each,
which its ``EnvClient`` (and TRL's OpenEnv path) talk to. This module gives gemgym both sides:

* :class:`GemgymEnvironment`: an OpenEnv ``Environment`` around a gemgym env. The action is
  :class:`TextAction` (``message``: the model's reply); the observation is
  :class:`GemgymObservation`: ``text`` (what the model is shown,
  :func:`gemgym.prompting.model_view`), ``reward``, ``done`` (terminated or truncated),
  ``truncated`` and the env's ``info`` (JSON-safe). ``reset`` takes ``seed`` (the same seed
  gives the same episode as in-process) and gemgym ``options``.
* :func:`create_app` / :func:`serve` (``gemgym serve ENV_ID``): gemgym's own server speaking
  OpenEnv's protocol for a gemgym env id, one env per WebSocket session (``max_concurrent_envs``
  sessions at once), with tokens, limits, idle timeouts and caps (:mod:`gemgym.serving`).
* :class:`GemgymEnvClient`: OpenEnv's ``EnvClient`` for such a server.
* :class:`OpenEnvEnv`: a gemgym ``Env[str, str]`` whose episodes run on any OpenEnv server
  with a text action (``action_field``) and a text observation (``observation_field``); so
  gemgym's vector envs, token rollouts and ``gemgym eval`` can play remote envs.

    gemgym serve game:Wordle-v0-easy --port 8000                      # terminal 1
    env = OpenEnvEnv("http://127.0.0.1:8000")                     # anywhere
    obs, info = env.reset(seed=3)

Needs ``pip install "gemgym[openenv]"`` (``openenv-core``).
"""

from __future__ import annotations

import json
import pickle
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from gemgym.core import Env
from gemgym.errors import ConfigError, ResetNeeded, missing_dependency
from gemgym.integrations.common import observation_text
from gemgym.integrations.openenv_pool import EndpointPool

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server import Action, Environment, Observation, State
    from pydantic import Field
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "openenv", "openenv") from e

__all__ = [
    "GemgymEnvClient",
    "GemgymEnvironment",
    "GemgymObservation",
    "OpenEnvEnv",
    "TextAction",
    "create_app",
    "serve",
]


class TextAction(Action):  # type: ignore[misc]
    """The model's reply."""

    message: str = Field(description="the model's reply, as the env's step() takes it")


class GemgymObservation(Observation):  # type: ignore[misc]
    """What a gemgym env step answered, as OpenEnv carries it."""

    text: str = Field(default="", description="the observation as the model is shown it")
    truncated: bool = Field(default=False, description="the episode was cut (turn limit)")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info (JSON)")


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (numpy numbers and arrays, tuples, sets, anything else as
    its ``str``)."""

    def default(o: Any) -> Any:
        if hasattr(o, "tolist"):
            return o.tolist()
        if isinstance(o, set | frozenset):
            return sorted(o, key=str)
        return str(o)

    return json.loads(json.dumps(value, default=default))


class GemgymEnvironment(Environment):  # type: ignore[misc]
    """An OpenEnv environment playing one gemgym env (see the module docstring).

    Args:
        env_id: a registered gemgym env id.
        make_kwargs: keyword arguments of :func:`gemgym.make` (``wrappers=`` included).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session makes its own env

    def __init__(self, env_id: str, **make_kwargs: Any) -> None:
        import gemgym

        super().__init__()
        self.env_id = env_id
        self.env = gemgym.make(env_id, **make_kwargs)
        self._state = State(episode_id=None, step_count=0)
        self._done = True

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GemgymObservation:
        options = kwargs.pop("options", None)
        if kwargs:
            raise ConfigError(
                f"unknown reset fields {sorted(kwargs)}; a gemgym env takes seed, episode_id "
                "and options"
            )
        obs, info = self.env.reset(seed=seed, options=options)
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        self._done = False
        return GemgymObservation(
            text=observation_text(obs, info), reward=None, done=False, info=_json_safe(info)
        )

    def step(
        self, action: TextAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GemgymObservation:
        if self._done:
            raise ResetNeeded("the episode has ended (or was never reset); reset first")
        obs, reward, terminated, truncated, info = self.env.step(action.message)
        self._state.step_count += 1
        self._done = bool(terminated or truncated)
        return GemgymObservation(
            text=observation_text(obs, info),
            reward=float(reward),
            done=self._done,
            truncated=bool(truncated) and not terminated,
            info=_json_safe(info),
        )

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self.env.close()


def create_app(
    env_id: str,
    *,
    max_concurrent_envs: int = 64,
    token: str | None = None,
    limits: Any = None,
    max_client_sessions: int | None = None,
    max_client_envs: int | None = None,
    **make_kwargs: Any,
) -> Any:
    """The ASGI app of ``gemgym serve`` for ``gemgym.make(env_id, **make_kwargs)``: OpenEnv's
    protocol from gemgym's hardened server (:class:`gemgym.serving.env_server.EnvServer`), one
    env per session, at most ``max_concurrent_envs`` sessions at once; run it with uvicorn."""
    from gemgym.serving.env_server import EnvServer

    if isinstance(max_concurrent_envs, bool) or not (
        isinstance(max_concurrent_envs, int) and max_concurrent_envs >= 1
    ):
        raise ConfigError(f"max_concurrent_envs must be >= 1, got {max_concurrent_envs}")
    return EnvServer(
        env_id,
        make_kwargs,
        max_sessions=max_concurrent_envs,
        max_client_sessions=max_client_sessions,
        max_client_envs=max_client_envs,
        limits=limits,
        token=token,
    )


def serve(
    env_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_concurrent_envs: int = 64,
    workers: int = 1,
    log_level: str = "warning",
    token: str | None = None,
    insecure: bool = False,
    **make_kwargs: Any,
) -> None:
    """Serve ``env_id`` until interrupted (``gemgym serve``; see
    :func:`gemgym.serving.env_server.serve_env`).

    ``workers`` > 1 runs that many server processes on the port; a session stays on the process
    that accepted it, so sessions spread over the processes and the steps/s scale with the cores
    (``max_concurrent_envs`` is then per process).
    """
    from gemgym.serving.env_server import serve_env

    serve_env(
        env_id,
        make_kwargs,
        host=host,
        port=port,
        token=token,
        insecure=insecure,
        workers=workers,
        log_level=log_level,
        max_sessions=max_concurrent_envs,
    )


class GemgymEnvClient(EnvClient):  # type: ignore[misc]
    """OpenEnv's client for a gemgym env server: ``TextAction`` in, ``GemgymObservation``
    out (``await client.reset(seed=3)``, ``await client.step(TextAction(message=...))``, or
    ``client.sync()``)."""

    def _step_payload(self, action: TextAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> Any:
        obs = GemgymObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
        )
        return StepResult(observation=obs, reward=obs.reward, done=obs.done)

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)


class OpenEnvEnv(Env[str, str]):
    """A gemgym env playing episodes on an OpenEnv server (its own WebSocket session).

    Args:
        base_url: the server (``http://host:port`` or ``ws://...``), a list of servers that
            serve the same env, or an :class:`~gemgym.integrations.openenv_pool.EndpointPool`
            (shared by every copy): sessions are sticky, a reset that fails is retried on
            another server, a server lost mid-episode raises
            :class:`~gemgym.errors.EnvLostError` (stage ``"env"`` in the episode engine), and
            a server that comes back is used again (see :mod:`gemgym.integrations.openenv_pool`).
        action_field: the action's text field (``message`` for gemgym servers and TextArena's
            OpenEnv envs).
        observation_field: the observation's text field (``text`` for gemgym servers); the
            whole observation goes in ``info["observation"]``.
        reset_kwargs: more fields for every reset (a server's own reset parameters).
        message_timeout_s: how long a reply may take.
        random_actions: replies :meth:`sample_random_action` draws from (with the env's seeded
            :attr:`rng`); the server's action space is not known here, so none by default.
        token: the servers' bearer token (``gemgym serve --token``; default
            ``$GEMGYM_SERVE_TOKEN``); with a pool, the pool's.

    ``terminated`` is the server's ``done`` unless the observation says ``truncated``. Copies
    (pickling, ``spawn``) open their own session. Bad actions are the server's to judge.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "category": "remote"}

    blocking_io = True  # reset and step wait on the server

    def __init__(
        self,
        base_url: str | Sequence[str] | EndpointPool,
        *,
        action_field: str = "message",
        observation_field: str = "text",
        reset_kwargs: Mapping[str, Any] | None = None,
        message_timeout_s: float = 60.0,
        random_actions: Sequence[str] = (),
        token: str | None = None,
    ) -> None:
        if isinstance(base_url, EndpointPool):
            if token is not None:
                raise ConfigError(
                    "the token goes to the pool: EndpointPool(urls, token=...), not "
                    "OpenEnvEnv(pool, token=...)"
                )
            self.pool = base_url
        else:
            self.pool = EndpointPool(base_url, message_timeout_s=message_timeout_s, token=token)
        self.base_url = base_url
        self._endpoint: Any = None
        self.action_field = action_field
        self.observation_field = observation_field
        self.reset_kwargs = dict(reset_kwargs or {})
        self.message_timeout_s = message_timeout_s
        self.random_actions = tuple(random_actions)
        self._client: Any = None
        self._done = True
        self._episode: tuple[int | None, dict[str, Any] | None, list[str]] | None = None

    def _drop(self) -> None:
        """Leave the session (its server may be gone)."""
        from gemgym.integrations.openenv_pool import close_quietly

        client, self._client = self._client, None
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            self.pool.release(endpoint)
        if client is not None:
            close_quietly(client)

    def _reset_on_pool(self, fields: dict[str, Any]) -> Any:
        """Reset on this env's session; a session whose server is lost (or full) is given up
        and the reset retried on the pool's next server."""
        from gemgym.integrations.openenv_pool import is_lost

        pool = self.pool
        if self._endpoint is not None and pool.should_move(self._endpoint):
            moved = pool.open([self._endpoint], ready_only=True)  # even out the load
            if moved is not None:
                self._drop()
                self._endpoint, self._client = moved
        tried: list[Any] = []
        errors: list[str] = []
        while True:
            if self._client is None:
                self._endpoint, self._client = pool.open(tried, errors=errors)
            try:
                return self._client.reset(**fields)
            except Exception as e:
                if not is_lost(e):
                    raise
                endpoint = self._endpoint
                pool.mark_lost(endpoint, e)
                errors.append(f"{endpoint.url}: {pool.endpoint_error(endpoint)}")
                tried.append(endpoint)
                self._drop()

    def _text(self, result: Any) -> str:
        value = result.observation.get(self.observation_field)
        if value is None:
            raise ConfigError(
                f"the server's observation has no {self.observation_field!r} field; it has "
                f"{sorted(result.observation)} (pass observation_field=...)"
            )
        return str(value)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        fields = dict(self.reset_kwargs)
        if seed is not None:
            fields["seed"] = seed
        if options:
            fields["options"] = options
        self._done = True
        result = self._reset_on_pool(fields)
        self._done = bool(result.done)
        self._episode = (seed, dict(options) if options else None, [])
        info = dict(result.observation.get("info") or {})
        info["observation"] = result.observation
        return self._text(result), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done:
            raise ResetNeeded("the episode has ended (or was never reset); call reset() first")
        if self._client is None:  # a copy made mid-episode replays it; this one lost it
            raise ResetNeeded("the episode has ended (or was never reset); call reset() first")
        try:
            result = self._client.step({self.action_field: action})
        except Exception as e:
            from gemgym.integrations.openenv_pool import is_lost

            if not is_lost(e):
                raise
            self._lost(e)
        if self._episode is not None:
            self._episode[2].append(action)
        obs = result.observation
        truncated = bool(obs.get("truncated", False)) and bool(result.done)
        terminated = bool(result.done) and not truncated
        self._done = bool(result.done)
        info = dict(obs.get("info") or {})
        info["observation"] = obs
        reward = 0.0 if result.reward is None else float(result.reward)
        return self._text(result), reward, terminated, truncated, info

    def _lost(self, error: BaseException) -> Any:
        """The server of this episode went away: the episode ends with an EnvLostError."""
        from gemgym.errors import EnvLostError
        from gemgym.integrations.openenv_pool import describe

        endpoint = self._endpoint
        self.pool.mark_lost(endpoint, error)
        self._drop()
        self._done = True
        others = len(self.pool.urls) - 1
        where = (
            f"the next reset plays on another of the pool's {others + 1} servers"
            if others
            else "the next reset connects to it again"
        )
        raise EnvLostError(
            f"the env server {endpoint.url} was lost mid-episode ({describe(error)}); the "
            f"episode's state was there, so it cannot go on; {where}"
        ) from None

    def sample_random_action(self) -> str:
        """One of ``random_actions``, drawn with the env's seeded random stream."""
        if not self.random_actions:
            raise NotImplementedError(
                "OpenEnvEnv does not know the server's actions: pass random_actions=[...]"
            )
        return self.rng.choice(self.random_actions)

    def spawn(self, same_state: bool = False) -> OpenEnvEnv:
        """A new env on the same server, in its own session. With ``same_state`` the copy
        replays this episode there (its seed and actions), so the server must play seeded
        episodes deterministically (gemgym envs do); an unseeded episode cannot be copied."""
        if not same_state:
            return _remote(self.pool, self._kwargs())
        copy: OpenEnvEnv = pickle.loads(pickle.dumps(self))
        return copy

    def close(self) -> None:
        self._drop()

    def _kwargs(self) -> dict[str, Any]:
        return {
            "action_field": self.action_field,
            "observation_field": self.observation_field,
            "reset_kwargs": self.reset_kwargs,
            "message_timeout_s": self.message_timeout_s,
            "random_actions": self.random_actions,
        }

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy connects anew (its own session) and replays the current episode there: its
        seed, options and actions (see :meth:`spawn`)."""
        episode = None if self._done else self._episode
        if episode is not None and episode[0] is None:
            raise NotImplementedError(
                "this episode was reset without a seed, so no copy can replay it; reset with "
                "seed=... to copy mid-episode"
            )
        return (_remote, (self.pool, self._kwargs(), episode, pickle.dumps(self._rng)))


def _remote(
    base_url: str | EndpointPool,
    kwargs: dict[str, Any],
    episode: tuple[int | None, dict[str, Any] | None, list[str]] | None = None,
    rng: bytes | None = None,
) -> OpenEnvEnv:
    env = OpenEnvEnv(base_url, **kwargs)
    if rng is not None:
        env._rng = pickle.loads(rng)
    if episode is not None:
        seed, options, actions = episode
        state = env._rng
        env.reset(seed=seed, options=options)
        env._rng = state  # the copy's random stream is the original's, not a reseeded one
        for action in actions:
            env.step(action)
    return env
