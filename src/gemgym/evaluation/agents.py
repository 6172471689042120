"""The agents of ``gemgym eval``: episode engine policies, one async ``act`` per turn.

* :class:`ChatAgent`: any OpenAI-compatible chat-completions server, over kept-alive
  HTTP/1.1 connections (one per request in flight), with retries (exponential backoff
  with full jitter) and a per-request timeout;
* :class:`BackendAgent`: any :class:`gemgym.llm.Backend` (the token-level layer's backends);
* :class:`RandomAgent` / :class:`OracleAgent`: the env's random action / expert (baselines),
  asked through the capability the env grants (:class:`gemgym.episodes.EnvAccess`).

An agent gets an :class:`~gemgym.episodes.ActRequest` each turn: what a model is shown
(:func:`gemgym.prompting.model_view`), the episode's own ``state`` (where the agent keeps the
conversation) and the turn's request seed (derived by the engine from the run seed and the
episode's env, task, sample and turn, so a server that honours seeds samples the same answers
whatever the concurrency). It answers an :class:`~gemgym.episodes.Action` with its token usage
and latency.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping
from typing import Any, Protocol

from gemgym.core import MultimodalObservation
from gemgym.episodes.outcomes import derive_seed
from gemgym.episodes.policy import Action, ActRequest
from gemgym.errors import AgentError, ConfigError
from gemgym.evaluation._http import HttpPool
from gemgym.llm.servers import RETRY_STATUS, RetryPolicy

__all__ = [
    "BackendAgent",
    "ChatAgent",
    "EvalAgent",
    "OracleAgent",
    "RandomAgent",
    "Reply",
]

Reply = Action
"""One turn's action with its cost (:class:`gemgym.episodes.Action`)."""


class EvalAgent(Protocol):
    """An agent of ``gemgym eval``: an episode engine policy with a name."""

    name: str

    async def act(self, request: ActRequest) -> Action:
        """The action for ``request.view`` in the episode of ``request``."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _seed(base: int | None, request: ActRequest) -> int | None:
    """The turn's request seed: the engine's, or one derived from ``base``."""
    if base is None:
        return None
    if request.seed is not None:
        return request.seed
    return derive_seed(base, request.episode.index, request.turn)


class RandomAgent:
    """The env's ``sample_random_action()`` (a lower baseline)."""

    name = "random"

    async def act(self, request: ActRequest) -> Action:
        return Action(request.env.sample_random_action(), requests=0)

    async def aclose(self) -> None:
        """Nothing to release."""


class OracleAgent:
    """The env's ``expert_action()`` (an upper baseline)."""

    name = "oracle"

    async def act(self, request: ActRequest) -> Action:
        return Action(request.env.expert_action(), requests=0)

    async def aclose(self) -> None:
        """Nothing to release."""


def _content(view: Any) -> Any:
    return view.to_openai_content() if isinstance(view, MultimodalObservation) else view


def _user_turn(
    request: ActRequest, system_prompt: str | None, history: bool
) -> list[dict[str, Any]]:
    """The episode's messages (kept in ``request.state``) with this turn's observation."""
    view = request.view
    state = request.state
    if isinstance(view, list):  # the env returns the whole chat (ChatHistory)
        messages = [dict(m) for m in view]
        if system_prompt and not (messages and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": system_prompt})
        state["messages"] = messages
        return messages
    messages = state.get("messages") or []
    if not history or not messages:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": _content(view)})
    state["messages"] = messages
    return messages


class ChatAgent:
    """An OpenAI-compatible chat-completions server, asked asynchronously.

    Args:
        model: the served model's name.
        base_url: the ``/v1`` URL.
        api_key: sent as a bearer token (local servers accept anything).
        system_prompt: a system message at the start of each episode.
        temperature, top_p, max_tokens: sampling settings (``None``: the server's default).
        seed: ``None``: no seed is sent; else each request sends the turn's seed
            (``request.seed``, derived by the engine), or, from an unseeded engine, one derived
            from this base, the episode's index and the turn.
        chat_options: more fields of the request body (``{"top_k": 20}``,
            ``{"chat_template_kwargs": {"enable_thinking": false}}``, ...).
        timeout: seconds one request may take before it counts as failed.
        max_retries: retries of a failed request (HTTP 408/409/425/429/5xx, timeouts,
            connection errors), after ``backoff * 2**attempt`` s at most (full jitter, capped at
            ``max_backoff``).
        history: send the whole episode (default) or only the latest observation.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str = "EMPTY",
        system_prompt: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = 0,
        chat_options: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        history: bool = True,
    ) -> None:
        if not model:
            raise ConfigError("the openai agent needs a model name (--model)")
        if not base_url:
            raise ConfigError("the openai agent needs the server's URL (--base-url .../v1)")
        if timeout <= 0:
            raise ConfigError(f"timeout must be > 0, got {timeout}")
        # full jitter: retry k waits uniformly up to min(max_backoff, backoff * 2**k)
        self.retry = RetryPolicy(max_retries, backoff, max_backoff, jitter=1.0)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.system_prompt = system_prompt
        self.seed = seed
        self.timeout = timeout
        self.history = history
        self._body: dict[str, Any] = {"model": model}
        for k, v in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens)):
            if v is not None:
                self._body[k] = v
        self._body.update(chat_options or {})
        self._http = HttpPool(
            self.base_url, {"authorization": f"Bearer {api_key}", "user-agent": "gemgym-eval"}
        )
        self._jitter = random.Random()

    async def act(self, request: ActRequest) -> Action:
        messages = _user_turn(request, self.system_prompt, self.history)
        body = dict(self._body, messages=messages)
        seed = _seed(self.seed, request)
        if seed is not None:
            body["seed"] = seed
        reply = await self._post(body)
        if self.history:
            messages.append({"role": "assistant", "content": reply.action})
        return reply

    async def _post(self, body: dict[str, Any]) -> Action:
        data = json.dumps(body).encode()
        latency = 0.0
        last = ""
        for attempt in range(self.retry.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1, self._jitter))
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(self.timeout):
                    status, raw = await self._http.post("/chat/completions", data)
            except TimeoutError:
                latency += time.perf_counter() - t0
                last = (
                    f"the LLM server at {self.base_url} did not answer within "
                    f"{self.timeout:g} s (it is reachable but slow or hung; raise --timeout or "
                    "lower --concurrency)"
                )
                continue
            except (OSError, EOFError, ValueError, asyncio.LimitOverrunError) as e:
                latency += time.perf_counter() - t0
                last = (
                    f"cannot reach the LLM server at {self.base_url} ({type(e).__name__}: {e}); "
                    "is it running, and is --base-url right?"
                )
                continue
            latency += time.perf_counter() - t0
            if status != 200:
                last = f"the LLM server answered HTTP {status}: {raw[:300]!r}"
                if status in RETRY_STATUS:
                    continue
                raise AgentError(last)
            try:
                payload = json.loads(raw)
                text = payload["choices"][0]["message"].get("content") or ""
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise AgentError(f"the LLM server's answer is not a chat completion: {e}") from e
            usage = payload.get("usage") or {}
            return Action(
                text,
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                latency_s=latency,
                requests=attempt + 1,
            )
        raise AgentError(f"{last} [gave up after {self.retry.max_retries + 1} tries]")

    async def aclose(self) -> None:
        await self._http.aclose()


class BackendAgent:
    """Any :class:`gemgym.llm.Backend` (transformers, vLLM, SGLang, a chat server) as an agent.

    A backend that takes token ids (``capabilities.token_ids``) gets the conversation rendered
    by the tokenizer's chat template (``tokenizer``, default the backend's own); a text backend
    gets the chat messages. A failed generation raises, so the episode is recorded as an error.
    """

    name = "backend"

    def __init__(
        self,
        backend: Any,
        *,
        sampling: Any = None,
        tokenizer: Any = None,
        system_prompt: str | None = None,
        seed: int | None = 0,
        history: bool = True,
    ) -> None:
        from gemgym.llm.backend import SamplingParams

        self.backend = backend
        self.sampling = sampling if sampling is not None else SamplingParams()
        self.system_prompt = system_prompt
        self.seed = seed
        self.history = history
        self.tokenizer = None
        if backend.capabilities.token_ids:
            self.tokenizer = tokenizer or getattr(backend, "tokenizer", None)
            if self.tokenizer is None:
                raise ConfigError(
                    f"the {backend.name} backend takes token ids: pass its tokenizer "
                    "(--tokenizer) so the conversation can be rendered"
                )
        self.name = f"backend:{backend.name}"

    def _prompt_ids(self, messages: list[dict[str, Any]]) -> list[int] | None:
        if self.tokenizer is None:
            return None
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True
        )
        if not isinstance(ids, list):  # a BatchEncoding in recent transformers
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    async def act(self, request: ActRequest) -> Action:
        from gemgym.llm.backend import GenerationRequest

        messages = _user_turn(request, self.system_prompt, self.history)
        sampling = self.sampling
        seed = _seed(self.seed, request)
        if seed is not None:
            sampling = sampling.replace(seed=seed)
        t0 = time.perf_counter()
        gen = await self.backend.generate(
            GenerationRequest(
                prompt_ids=self._prompt_ids(messages),
                messages=list(messages),
                sampling=sampling,
            )
        )
        if gen.finish_reason == "error":
            raise AgentError(f"the {self.backend.name} backend failed: {gen.error}")
        text = gen.text
        if self.tokenizer is not None and gen.token_ids:  # the reply without special tokens
            text = self.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        if self.history:
            messages.append({"role": "assistant", "content": text})
        return Action(
            text,
            prompt_tokens=int(gen.prompt_tokens),
            completion_tokens=int(gen.completion_tokens),
            latency_s=gen.latency_s or time.perf_counter() - t0,
            requests=1,
        )

    async def aclose(self) -> None:
        await self.backend.aclose()
