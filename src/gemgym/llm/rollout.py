"""Token-level rollouts: the episode engine with a backend policy and a token recorder.

:func:`arollout_tokens` plays ``episodes`` episodes of an env with any
:class:`~gemgym.llm.backend.LLMBackend` on the episode engine (:class:`gemgym.episodes.Engine`):
every turn of every episode is a separate request, sent as soon as the episode's env step
returns, and the backend batches whatever is in flight. Each episode comes back as a
:class:`~gemgym.llm.record.TokenEpisode` (the engine's one record, with tokens) rendered by a
:class:`~gemgym.llm.render.ChatRenderer` (sampled ids verbatim, observations rendered by the
chat template).

>>> # doctest: +SKIP
>>> backend = TransformersBackend("Qwen/Qwen2.5-0.5B-Instruct")
>>> eps = rollout_tokens("game:GuessTheNumber-v0-easy", backend, episodes=64, batch_size=16,
...                      sampling=SamplingParams(temperature=1.0, max_tokens=256), seed=0)

What ends an episode (:attr:`TokenEpisode.finish_reason`, see :mod:`gemgym.episodes.outcomes`):

* the env terminates it (``"env_end"``) or truncates it (``"truncation"``, ``truncation="env"``);
* ``max_turns`` turns were played (``"truncation"``, ``"max_turns"``);
* the next prompt has no room left in ``sampling.max_context`` (or the backend says the prompt
  is longer than the model's context): ``"truncation"``, ``"context"``; the last turn's
  ``next_ids`` then hold only the turn end. A first prompt that does not fit at all:
  ``"truncation"``, ``"prompt"``, with no sampled token and the prompt cut to the context. No
  record is ever longer than ``max_context``;
* its reset, request, step, tool or grading fails (the backend raises or answers
  ``finish_reason="error"``, or takes longer than ``request_timeout``; the env raises):
  ``"error"`` with the stage and the message. The other episodes go on.

Envs that block (sandboxes, graders, tools; :attr:`gemgym.Env.blocking_io`) step on the
engine's own threads, so the event loop that feeds the model never waits for them.

Observations are what :func:`gemgym.prompting.model_view` shows; after a tool call
(``info["use_tool"]`` from :class:`~gemgym.wrappers.ToolEnvWrapper`) the next observation is
rendered as a tool message. Image observations go to backends whose capabilities include images
(as OpenAI content parts in ``messages``; the record's ids then hold the text only); with other
backends the rollout stops with a :class:`~gemgym.errors.ConfigError` before any request is
sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from gemgym.core import Env, Image, MultimodalObservation
from gemgym.episodes.engine import Engine, EngineStats, EnvSource, EpisodeSpec
from gemgym.episodes.outcomes import derive_seed, episode_seed
from gemgym.episodes.policy import Action, ActRequest
from gemgym.episodes.record import Episode, ObservationRole, Turn
from gemgym.errors import ConfigError
from gemgym.llm.backend import GenerationRequest, LLMBackend, SamplingParams
from gemgym.llm.render import ChatRenderer
from gemgym.vector import VectorEnv, make_vector_env

__all__ = [
    "BackendPolicy",
    "RolloutStats",
    "TokenRecorder",
    "arollout_tokens",
    "rollout_tokens",
]

RolloutStats = EngineStats
"""Where a rollout's wall time went (:class:`gemgym.episodes.EngineStats`)."""


def _view(view: Any) -> tuple[str, tuple[Image, ...], Any]:
    """``(text, images, message content)`` of what the model is shown."""
    if isinstance(view, MultimodalObservation):
        return view.text, view.images, view.to_openai_content()
    if not isinstance(view, str):
        raise ConfigError(
            f"token rollouts take text or multimodal observations, got {type(view).__name__}; "
            "wrap chat-message envs so they return text"
        )
    return view, (), view


class TokenRecorder:
    """The engine's :class:`~gemgym.episodes.engine.Recorder` for chat models: renders each
    episode with ``renderer`` into token ids and chat messages, within ``max_context``."""

    def __init__(
        self,
        renderer: ChatRenderer,
        *,
        max_context: int | None = None,
        images: bool = False,
        model: str = "",
        sampling: dict[str, Any] | None = None,
    ) -> None:
        self.renderer = renderer
        self.max_context = max_context
        self.images = images
        self.model = model
        self.sampling = dict(sampling or {})

    def _check_images(self, images: tuple[Image, ...]) -> None:
        if images and not self.images:
            raise ConfigError(
                f"this env shows images but the backend {self.model!r} does not take them; "
                "serve a vision model behind a server backend that accepts images"
            )

    def begin(self, episode: Episode, view: Any, state: dict[str, Any]) -> None:
        """Render the first prompt (a prompt that cannot fit ends the episode, flagged)."""
        text, images, content = _view(view)
        self._check_images(images)
        ids, prompt_messages = self.renderer.prompt(text)
        if images:
            prompt_messages[-1] = {"role": "user", "content": content}
        episode.model, episode.sampling = self.model, dict(self.sampling)
        episode.prompt_messages = prompt_messages
        state["messages"] = [dict(m) for m in prompt_messages]
        state["images"] = images
        if self.max_context is not None and len(ids) >= self.max_context:
            episode.prompt_ids = list(ids[: self.max_context])  # no room for one token
            episode.finish_reason, episode.truncation = "truncation", "prompt"
            return
        episode.prompt_ids = list(ids)
        state["context"] = list(ids)

    def prepare(self, request: ActRequest, state: dict[str, Any]) -> bool:
        """Give the request its context, messages, images and room; ``False`` when full."""
        context: list[int] = state["context"]
        room = None if self.max_context is None else self.max_context - len(context)
        if room is not None and room < 1:
            return False
        request.context_ids = context
        request.max_tokens = room
        request.messages = state["messages"]
        request.images = state["images"]
        return True

    def record(
        self,
        episode: Episode,
        turn: Turn,
        action: Action,
        next_view: Any | None,
        role: ObservationRole,
        state: dict[str, Any],
    ) -> bool:
        """Put the turn's sampled ids and the context after it in ``turn``."""
        r = self.renderer
        text = action.action if isinstance(action.action, str) else str(action.action)
        if action.token_ids is None:  # a text-only backend: the ids are the text's
            action_ids, logprobs, retok = r.encode(text), None, True
        else:
            action_ids, logprobs = list(action.token_ids), action.logprobs
            retok = action.retokenized
        next_text, next_images, next_content = (
            ("", (), "") if next_view is None else _view(next_view)
        )
        self._check_images(next_images)
        next_ids = r.continuation(action_ids, None if next_view is None else next_text, role)
        context: list[int] = state["context"]
        fits = True
        if self.max_context is not None:
            if len(context) + len(action_ids) + len(next_ids) > self.max_context:
                fits = False
                if next_view is not None:  # the observation does not fit: the turn end only
                    next_ids = r.continuation(action_ids, None)
            room = self.max_context - len(context)
            if len(action_ids) > room:  # retokenised text can be longer than what was sampled
                action_ids = action_ids[:room]
                logprobs = None if logprobs is None else list(logprobs)[:room]
            next_ids = next_ids[: room - len(action_ids)]
        turn.action_ids = action_ids
        turn.logprobs = None if logprobs is None else list(logprobs)
        turn.finish_reason = action.finish_reason
        turn.next_ids = next_ids
        turn.next_role = role
        turn.retokenized = retok
        context += action_ids
        context += next_ids
        messages: list[dict[str, Any]] = state["messages"]
        messages.append({"role": "assistant", "content": text})
        if next_view is not None and fits:
            messages.append(
                {"role": r.tool_role if role == "tool" else "user", "content": next_content}
            )
            state["images"] = state["images"] + next_images
        return fits

    def overflow(self, episode: Episode, state: dict[str, Any]) -> None:
        """The context is full: the last turn keeps only its turn end (within the context)."""
        if not episode.turns:
            return
        last = episode.turns[-1]
        before = len(episode.input_ids) - len(last.next_ids)
        ids = self.renderer.continuation(last.action_ids, None)
        if self.max_context is not None:
            ids = ids[: max(0, self.max_context - before)]
        last.next_ids = ids


class BackendPolicy:
    """A :class:`~gemgym.llm.backend.LLMBackend` as an engine policy: one request per turn, with
    the recorder's context ids and messages, ``max_tokens`` cut to the room left and the turn's
    derived seed (when ``sampling.seed`` is set)."""

    def __init__(self, backend: LLMBackend, sampling: SamplingParams) -> None:
        self.backend = backend
        self.caps = backend.capabilities
        self.sampling = sampling

    async def act(self, request: ActRequest) -> Action:
        """Generate the turn's reply."""
        params = self.sampling
        room = request.max_tokens
        seed = None
        if params.seed is not None:  # the engine's seed of the turn, else one from ours
            seed = request.seed
            if seed is None:
                seed = derive_seed(params.seed, request.episode.index, request.turn)
        turn_params = params.replace(
            max_tokens=params.max_tokens if room is None else min(params.max_tokens, room),
            seed=seed,
        )
        images = request.images
        gen_request = GenerationRequest(
            prompt_ids=None
            if images or request.context_ids is None
            else tuple(request.context_ids),
            messages=tuple(request.messages or ()),
            sampling=turn_params,
            images=images,
            request_id=f"{request.episode.index}-{request.turn}",
        )
        t = time.perf_counter()
        gen = await self.backend.generate(gen_request)
        if gen.finish_reason == "error":
            return Action(error=gen.error or "the backend reported an error")
        sampled = bool(self.caps.token_ids) or gen.retokenized
        return Action(
            gen.text,
            token_ids=list(gen.token_ids) if sampled else None,
            logprobs=None if gen.logprobs is None or not sampled else list(gen.logprobs),
            finish_reason=gen.finish_reason,
            retokenized=gen.retokenized,
            latency_s=gen.latency_s or time.perf_counter() - t,
            prompt_tokens=int(gen.prompt_tokens),
            completion_tokens=int(gen.completion_tokens),
        )


async def arollout_tokens(
    env: str | Env[Any, Any] | VectorEnv,
    backend: LLMBackend,
    tokenizer: Any | None = None,
    *,
    episodes: int,
    seed: int | None = None,
    group_size: int = 1,
    batch_size: int = 8,
    sampling: SamplingParams | None = None,
    system_prompt: str | None = None,
    max_turns: int | None = None,
    tool_role: ObservationRole = "tool",
    chat_template_kwargs: dict[str, Any] | None = None,
    request_timeout: float | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    stats: EngineStats | None = None,
    vector_backend: str = "sync",
    **make_kwargs: Any,
) -> list[Episode]:
    """Play ``episodes`` episodes with ``backend``; returns them ordered by index (failed ones
    included, with their stage: filter on :attr:`~gemgym.episodes.Episode.failed`).

    Args:
        env: an env id (made ``batch_size`` times with ``make_kwargs``), an env (copied with
            ``spawn``), or a vector env made with ``autoreset_mode="disabled"`` (every slot
            plays; not closed here).
        backend: any :class:`~gemgym.llm.backend.LLMBackend`.
        tokenizer: the model's tokenizer (default: ``backend.tokenizer``).
        episodes: how many episodes.
        seed: episode ``k`` is reset with ``seed + k // group_size``; ``None``: unseeded.
        group_size: episodes per initial state (their :attr:`TokenEpisode.group` is the same).
        batch_size: episodes in flight when ``env`` is an id or an env.
        sampling: sampling settings (default :class:`SamplingParams`).
        system_prompt: a system message before the first observation.
        max_turns: the turn cap (truncation ``"max_turns"``).
        tool_role: role of tool outputs in the chat template (``"tool"`` or ``"user"``).
        chat_template_kwargs: extra template variables (e.g. ``enable_thinking``).
        request_timeout: seconds a request may take before its episode ends as an error.
        on_episode: called with each episode as it ends.
        stats: filled with where the wall time went.
        vector_backend: where the envs run when ``env`` is an id or an env: ``"sync"`` (in
            this process: blocking envs step on the engine's threads), or a vector env of the
            ``"thread"``, ``"process"`` or ``"ray"`` backend.
        make_kwargs: keyword arguments of ``gemgym.make`` (``wrappers=`` included).
    """
    if episodes < 0:
        raise ConfigError(f"episodes must be >= 0, got {episodes}")
    if group_size < 1 or batch_size < 1:
        raise ConfigError("group_size and batch_size must be >= 1")
    tok = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
    if tok is None:
        raise ConfigError("pass the model's tokenizer (tokenizer=...); the backend has none")
    # off the loop: the first renderer of a template compiles it (~15 ms; more on a busy machine)
    renderer = await asyncio.get_running_loop().run_in_executor(
        None,
        partial(
            ChatRenderer,
            tok,
            system_prompt=system_prompt,
            tool_role=tool_role,
            chat_template_kwargs=chat_template_kwargs,
        ),
    )
    params = sampling or SamplingParams()
    n = max(1, min(batch_size, episodes))
    owned: VectorEnv | None = None
    source: Any = env
    if isinstance(env, VectorEnv):
        n = env.num_envs
    elif vector_backend != "sync":
        kwargs = dict(make_kwargs)
        opts: dict[str, Any] = {
            "wrappers": kwargs.pop("wrappers", None),
            "backend": vector_backend,
            "autoreset_mode": "disabled",
        }
        if isinstance(env, str):
            owned = make_vector_env([env] * n, [kwargs] * n, **opts)
        else:
            if kwargs:
                raise ConfigError("make_kwargs are only used when env is an id")
            owned = make_vector_env(env_fns=[env.spawn] * n, **opts)
        source, make_kwargs = owned, {}
    recorder = TokenRecorder(
        renderer,
        max_context=params.max_context,
        images=bool(backend.capabilities.images),
        model=backend.name,
        sampling=params.to_dict(),
    )
    engine = Engine(
        BackendPolicy(backend, params),
        EnvSource.make(source, **make_kwargs),
        concurrency=n,
        max_turns=max_turns,
        seed=params.seed,
        recorder=recorder,
        request_timeout=request_timeout,
        stats=stats,
    )
    specs = (
        EpisodeSpec(
            k, episode_seed(seed, k, group_size), group=k // group_size, sample=k % group_size
        )
        for k in range(episodes)
    )
    results: list[Episode] = []
    try:
        async for ep in engine.play(specs):
            results.append(ep)
            if on_episode is not None:
                on_episode(ep)
    finally:
        await asyncio.get_running_loop().run_in_executor(None, engine.close)
        if owned is not None:
            owned.close()
    return sorted(results, key=lambda e: e.index)


def rollout_tokens(
    env: str | Env[Any, Any] | VectorEnv,
    backend: LLMBackend,
    tokenizer: Any | None = None,
    **kwargs: Any,
) -> list[Episode]:
    """Blocking :func:`arollout_tokens` (runs its own event loop; the backend stays open, so
    one backend serves several calls; ``await backend.aclose()`` or let it go when done)."""
    return asyncio.run(arollout_tokens(env, backend, tokenizer, **kwargs))
