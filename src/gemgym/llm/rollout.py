"""The token-level rollout engine: many episodes in flight, each turn sent as soon as it can be.

:func:`arollout_tokens` plays ``episodes`` episodes of an env on a
:class:`~gemgym.vector.VectorEnv` (one asyncio task per env slot) with any
:class:`~gemgym.llm.backend.Backend`. Every turn of every episode is a separate request: an
episode whose env step returns sends its next turn at once, without waiting for the others, and
the backend batches whatever is in flight. Each episode comes back as a
:class:`~gemgym.llm.record.TokenEpisode` rendered by a :class:`~gemgym.llm.render.ChatRenderer`
(sampled ids verbatim, observations rendered by the chat template).

>>> # doctest: +SKIP
>>> backend = TransformersBackend("Qwen/Qwen2.5-0.5B-Instruct")
>>> eps = rollout_tokens("game:GuessTheNumber-v0-easy", backend, episodes=64, batch_size=16,
...                      sampling=SamplingParams(temperature=1.0, max_tokens=256), seed=0)

What ends an episode (:attr:`TokenEpisode.finish_reason`):

* the env terminates it (``"env_end"``) or truncates it (``"truncation"``, ``truncation="env"``);
* ``max_turns`` turns were played (``"truncation"``, ``"max_turns"``);
* the next prompt has no room left in ``sampling.max_context`` (or the backend says the prompt
  is longer than the model's context): ``"truncation"``, ``"context"``; the last turn's
  ``next_ids`` then hold only the turn end (the observation that did not fit is kept as text);
* its request fails (the backend raises or answers ``finish_reason="error"``, or it takes longer
  than ``request_timeout``), or its env step raises: ``"error"`` with the message. The other
  episodes go on.

Observations are what :func:`gemgym.prompting.model_view` shows (the observation and the board
in ``info["suffix"]``); after a tool call (``info["use_tool"]`` from
:class:`~gemgym.wrappers.ToolEnvWrapper`) the next observation is rendered as a tool message.
Image observations go to backends whose capabilities include images (as OpenAI content parts
in ``messages``; the record's ids then hold the text only); with other backends the rollout
stops with a :class:`~gemgym.errors.ConfigError` before any request is sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gemgym.core import Env, Image, MultimodalObservation
from gemgym.errors import ConfigError
from gemgym.experience import open_vector_env
from gemgym.llm.backend import Backend, Generation, GenerationRequest, SamplingParams
from gemgym.llm.record import ObservationRole, TokenEpisode, TokenTurn
from gemgym.llm.render import ChatRenderer
from gemgym.prompting import model_view

if TYPE_CHECKING:
    from gemgym.vector import VectorEnv

__all__ = ["RolloutStats", "arollout_tokens", "rollout_tokens"]


@dataclass
class RolloutStats:
    """Where a rollout's wall time went (filled in by :func:`arollout_tokens`).

    Attributes:
        wall_s: the whole rollout.
        env_s: time in env resets and steps (tools included), summed over episodes.
        render_s: time rendering and tokenising observations, summed over episodes.
        requests: requests sent; turns: turns played; episodes: episodes played.
    """

    wall_s: float = 0.0
    env_s: float = 0.0
    render_s: float = 0.0
    requests: int = 0
    turns: int = 0
    episodes: int = 0


def _turn_seed(base: int | None, episode: int, turn: int) -> int | None:
    if base is None:
        return None
    return (base * 1_000_003 + episode * 10_007 + turn) % (2**63 - 1)


def _view(observation: Any, info: dict[str, Any]) -> tuple[str, tuple[Image, ...], Any]:
    """``(text, images, message content)`` of what the model is shown."""
    view = model_view(observation, info)
    if isinstance(view, MultimodalObservation):
        return view.text, view.images, view.to_openai_content()
    if not isinstance(view, str):
        raise ConfigError(
            f"token rollouts take text or multimodal observations, got {type(view).__name__}; "
            "wrap chat-message envs so they return text"
        )
    return view, (), view


async def arollout_tokens(
    env: str | Env[Any, Any] | VectorEnv,
    backend: Backend,
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
    on_episode: Callable[[TokenEpisode], None] | None = None,
    stats: RolloutStats | None = None,
    vector_backend: str = "sync",
    **make_kwargs: Any,
) -> list[TokenEpisode]:
    """Play ``episodes`` episodes with ``backend``; returns them ordered by index.

    Args:
        env: an env id (made ``batch_size`` times with ``make_kwargs``), an env (copied with
            ``spawn``), or a vector env made with ``autoreset_mode="disabled"`` (every slot
            plays; not closed here).
        backend: any :class:`~gemgym.llm.backend.Backend`.
        tokenizer: the model's tokenizer (default: ``backend.tokenizer``).
        episodes: how many episodes.
        seed: episode ``k`` is reset with ``seed + k // group_size``; ``None``: unseeded.
        group_size: episodes per initial state (their :attr:`TokenEpisode.group` is the same).
        batch_size: envs (so episodes in flight) when ``env`` is an id or an env.
        sampling: sampling settings (default :class:`SamplingParams`).
        system_prompt: a system message before the first observation.
        max_turns: cut episodes after this many turns (truncation ``"max_turns"``).
        tool_role: role of tool outputs in the chat template (``"tool"`` or ``"user"``).
        chat_template_kwargs: extra template variables (e.g. ``enable_thinking``).
        request_timeout: seconds a request may take before its episode ends as an error.
        on_episode: called with each episode as it ends.
        stats: filled with where the wall time went.
        vector_backend: the vector env's backend when ``env`` is an id or an env (``"sync"``,
            ``"thread"``, ``"process"``, ``"ray"``).
        make_kwargs: keyword arguments of ``gemgym.make`` (``wrappers=`` included).
    """
    if episodes < 0:
        raise ConfigError(f"episodes must be >= 0, got {episodes}")
    if group_size < 1 or batch_size < 1:
        raise ConfigError("group_size and batch_size must be >= 1")
    tok = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
    if tok is None:
        raise ConfigError("pass the model's tokenizer (tokenizer=...); the backend has none")
    renderer = ChatRenderer(
        tok,
        system_prompt=system_prompt,
        tool_role=tool_role,
        chat_template_kwargs=chat_template_kwargs,
    )
    params = sampling or SamplingParams()
    st = stats if stats is not None else RolloutStats()
    venv, _, owned = open_vector_env(
        env, max(1, min(batch_size, episodes)), make_kwargs, backend=vector_backend
    )
    engine = _Engine(backend, renderer, params, max_turns, request_timeout, st)
    results: list[TokenEpisode | None] = [None] * episodes
    next_job = 0

    async def slot_worker(slot: int) -> None:
        nonlocal next_job
        handle = venv.handle(slot)
        while next_job < episodes:
            k = next_job
            next_job += 1
            group = k // group_size
            ep_seed = None if seed is None else seed + group
            ep = await engine.play(handle, venv.env_ids[slot], k, ep_seed, group)
            results[k] = ep
            st.episodes += 1
            if on_episode is not None:
                on_episode(ep)

    t0 = time.perf_counter()
    try:
        tasks = [asyncio.ensure_future(slot_worker(s)) for s in range(venv.num_envs)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:  # e.g. images for a text-only backend: stop every slot
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    finally:
        st.wall_s += time.perf_counter() - t0
        if owned:
            venv.close()
    return [e for e in results if e is not None]


def rollout_tokens(
    env: str | Env[Any, Any] | VectorEnv,
    backend: Backend,
    tokenizer: Any | None = None,
    **kwargs: Any,
) -> list[TokenEpisode]:
    """Blocking :func:`arollout_tokens` (runs its own event loop; the backend stays open, so
    one backend serves several calls; ``await backend.aclose()`` or let it go when done)."""
    return asyncio.run(arollout_tokens(env, backend, tokenizer, **kwargs))


class _Engine:
    """Plays one episode at a time per call of :meth:`play` (many calls run concurrently)."""

    def __init__(
        self,
        backend: Backend,
        renderer: ChatRenderer,
        sampling: SamplingParams,
        max_turns: int | None,
        request_timeout: float | None,
        stats: RolloutStats,
    ) -> None:
        self.backend = backend
        self.caps = backend.capabilities
        self.renderer = renderer
        self.sampling = sampling
        self.max_turns = max_turns
        self.timeout = request_timeout
        self.stats = stats

    async def play(
        self, handle: Any, env_id: str, index: int, seed: int | None, group: int
    ) -> TokenEpisode:
        st, r, params = self.stats, self.renderer, self.sampling
        t = time.perf_counter()
        obs, info = await handle.areset(seed=seed)
        st.env_s += time.perf_counter() - t
        t = time.perf_counter()
        text, images, content = _view(obs, info)
        self._check_images(images)
        ids, prompt_messages = r.prompt(text)
        if images:
            prompt_messages[-1] = {"role": "user", "content": content}
        messages: list[dict[str, Any]] = [dict(m) for m in prompt_messages]
        all_images: tuple[Image, ...] = images
        st.render_s += time.perf_counter() - t
        ep = TokenEpisode(
            env_id,
            index,
            seed,
            self.backend.name,
            list(ids),
            prompt_messages=prompt_messages,
            reset_info=info,
            sampling=params.to_dict(),
            group=group,
        )
        context = list(ids)
        while True:
            turn = len(ep.turns)
            if self.max_turns is not None and turn >= self.max_turns:
                return self._end(ep, "truncation", "max_turns")
            room = None if params.max_context is None else params.max_context - len(context)
            if room is not None and room < 1:
                return self._context_overflow(ep)
            turn_params = params.replace(
                max_tokens=params.max_tokens if room is None else min(params.max_tokens, room),
                seed=_turn_seed(params.seed, index, turn),
            )
            request = GenerationRequest(
                prompt_ids=None if all_images else tuple(context),
                messages=tuple(messages),
                sampling=turn_params,
                images=all_images,
                request_id=f"{index}-{turn}",
            )
            gen = await self._generate(request)
            st.requests += 1
            if gen.finish_reason == "error":
                return self._end(ep, "error", error=gen.error or "the backend reported an error")
            if not gen.token_ids and gen.finish_reason == "length":
                return self._context_overflow(ep)
            t = time.perf_counter()
            action_ids = list(gen.token_ids)
            retok = gen.retokenized or not self.caps.token_ids
            logprobs = gen.logprobs
            if retok and not gen.retokenized:
                action_ids = r.encode(gen.text)
                logprobs = None
            st.render_s += time.perf_counter() - t
            t = time.perf_counter()
            try:
                obs, reward, term, trunc, info = await handle.astep(gen.text)
            except Exception as e:  # an env that breaks ends its own episode only
                return self._end(ep, "error", error=f"env step failed: {type(e).__name__}: {e}")
            finally:
                st.env_s += time.perf_counter() - t
            t = time.perf_counter()
            done = bool(term or trunc)
            last = done or (self.max_turns is not None and turn + 1 >= self.max_turns)
            next_text, next_images, next_content = ("", (), "") if last else _view(obs, info)
            role: ObservationRole = "tool" if info.get("use_tool") else "user"
            if next_images:
                self._check_images(next_images)
            next_ids = r.continuation(action_ids, None if last else next_text, role)
            ep.turns.append(
                TokenTurn(
                    action_ids,
                    None if logprobs is None else list(logprobs),
                    gen.finish_reason,
                    gen.text,
                    reward=float(reward),
                    terminated=bool(term),
                    truncated=bool(trunc),
                    info=info,
                    next_ids=next_ids,
                    next_observation=next_text,
                    next_role=role,
                    retokenized=retok,
                    latency_s=gen.latency_s,
                )
            )
            context += action_ids
            context += next_ids
            messages.append({"role": "assistant", "content": gen.text})
            if not last:
                msg_role = r.tool_role if role == "tool" else "user"
                messages.append({"role": msg_role, "content": next_content})
                all_images += next_images
            st.turns += 1
            st.render_s += time.perf_counter() - t
            if term:
                return self._end(ep, "env_end")
            if trunc:
                return self._end(ep, "truncation", "env")

    def _check_images(self, images: tuple[Image, ...]) -> None:
        if images and not self.caps.images:
            raise ConfigError(
                f"this env shows images but the backend {self.backend.name!r} does not take "
                "them; serve a vision model behind a server backend that accepts images"
            )

    async def _generate(self, request: GenerationRequest) -> Generation:
        t = time.perf_counter()
        try:
            if self.timeout is None:
                return await self.backend.generate(request)
            return await asyncio.wait_for(self.backend.generate(request), self.timeout)
        except TimeoutError:
            return Generation.failed(
                f"request took longer than request_timeout={self.timeout}s",
                time.perf_counter() - t,
            )
        except Exception as e:  # a failed request ends only its own episode
            return Generation.failed(f"{type(e).__name__}: {e}", time.perf_counter() - t)

    def _context_overflow(self, ep: TokenEpisode) -> TokenEpisode:
        if ep.turns:  # keep the ids within the context: drop the observation that did not fit
            last = ep.turns[-1]
            last.next_ids = self.renderer.continuation(last.action_ids, None)
        return self._end(ep, "truncation", "context")

    @staticmethod
    def _end(
        ep: TokenEpisode, reason: Any, truncation: Any = None, error: str | None = None
    ) -> TokenEpisode:
        ep.finish_reason = reason
        ep.truncation = truncation
        ep.error = error
        return ep
