"""The agents of ``gemgym eval``: episode engine policies, one async ``act`` per turn.

* :class:`ChatAgent`: any OpenAI-compatible chat-completions server, over gemgym's HTTP
  client (:mod:`gemgym._http`: kept-alive connections, one per request in flight), with retries
  (exponential backoff with full jitter) and a per-request timeout; it is the one chat client
  of the package: ``gemgym run`` and ``gemgym eval`` play through it, and the library's
  :class:`~gemgym.agents.OpenAIAgent` sends its requests through it;
* :class:`BackendAgent`: any :class:`gemgym.llm.LLMBackend` (the token-level layer's backends).

The baselines are :class:`gemgym.agents.RandomAgent` and :class:`gemgym.agents.OracleAgent`
(the env's random action and expert, asked through the capability the env grants,
:class:`gemgym.episodes.EnvAccess`): batch policies of the engine, which the runner plays as
they are.

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
import sys
import time
from collections.abc import Mapping
from typing import Any, Protocol

from gemgym._http import (
    RETRY_STATUS,
    AsyncClient,
    Response,
    RetryPolicy,
    TransportError,
    error_detail as _error_detail,
)
from gemgym.core import MultimodalObservation
from gemgym.episodes.outcomes import derive_seed
from gemgym.episodes.policy import Action, ActRequest
from gemgym.errors import ConfigError, ModelUnavailableError
from gemgym.llm.servers import _is_context_overflow

__all__ = [
    "BackendAgent",
    "ChatAgent",
    "CircuitBreaker",
    "EvalAgent",
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


class CircuitBreaker:
    """Stops a run that keeps failing against a dead server.

    Every model request that fails for good (after its retries: the server is unreachable,
    answers 5xx, times out, refuses the request) counts; a request that succeeds resets the
    count. After ``threshold`` such failures in a row the breaker opens: the request that
    opened it, and every request still in flight at its next try, raise
    :class:`~gemgym.errors.ModelUnavailableError` with the reason, so the episode engine stops
    the run instead of sending more requests (finished episodes are kept; ``--resume`` plays
    the rest).
    """

    def __init__(self, threshold: int = 5) -> None:
        if threshold < 1:
            raise ConfigError(f"breaker_threshold must be at least 1, got {threshold}")
        self.threshold = threshold
        self.failures = 0
        self.reason: str | None = None

    @property
    def open(self) -> bool:
        """Whether the breaker has opened (no more requests)."""
        return self.reason is not None

    def success(self) -> None:
        """A request succeeded."""
        self.failures = 0

    def failure(self, message: str) -> None:
        """A request failed for good; raises once ``threshold`` failed in a row."""
        self.failures += 1
        if self.failures >= self.threshold and self.reason is None:
            self.reason = (
                f"stopped the run after {self.failures} model requests in a row failed, each "
                f"after its retries (the last: {message}); finished episodes are kept"
            )
        self.check()

    def check(self) -> None:
        """Raise :class:`~gemgym.errors.ModelUnavailableError` if the breaker is open."""
        if self.reason is not None:
            raise ModelUnavailableError(self.reason)


MODEL_NOT_FOUND_HINTS = ("does not exist", "not found", "unknown model", "no such model")
"""Phrases of a 400/404 reply that mean the server does not serve the model asked for."""


def _detail(raw: bytes) -> str:
    return _error_detail(raw.decode("utf-8", "replace"))


def _reply_warning(message: Mapping[str, Any], finish: Any, text: str) -> str | None:
    """What a reader of the record should know about a reply with no text, else ``None``."""
    if text.strip():
        return None
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        why = "reasoning only: the server returned content null and the reasoning in "
        why += "reasoning_content" if message.get("reasoning_content") else "reasoning"
        why += f" ({len(str(reasoning))} characters)"
    elif message.get("content") is None:
        why = "content null"
    else:
        why = "empty content"
    if finish == "length":
        why += "; finish_reason length: the reply was cut by max_tokens before any answer"
    hint = (
        "raise max_tokens or turn thinking off"
        if finish == "length" or reasoning
        else "check the server's chat template"
    )
    return f"a reply with no text ({why}); the empty text was played (scored); {hint}"


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
        breaker_threshold: requests failing for good in a row that stop the run
            (:class:`CircuitBreaker`; ``None``: never stop, each failure is its turn's own).

    How a turn ends: a reply is played (a reply with no text, reasoning only or cut by
    ``max_tokens``, is played as ``""`` with a warning in the record); a prompt the server says
    is longer than the model's context ends the episode as truncated (``truncation:
    "context"``, as :mod:`gemgym.llm` classifies it); a request that still fails after its
    retries ends its episode as an error (with every try counted in ``requests``); HTTP
    401/403/404 (a refused key, an unknown model: no turn can work) and an open breaker stop the
    run (:class:`~gemgym.errors.ModelUnavailableError`). :meth:`probe` checks the server before
    a run (the engine awaits it through :meth:`open_run`).
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
        breaker_threshold: int | None = 5,
    ) -> None:
        if not model:
            raise ConfigError("ChatAgent needs a model name the server serves (model)")
        if not base_url:
            raise ConfigError("ChatAgent needs base_url, the server's URL (it ends in /v1)")
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
        self.breaker = CircuitBreaker(
            sys.maxsize if breaker_threshold is None else breaker_threshold
        )
        self.probed = False
        self.probe_warning: str | None = None
        self._body: dict[str, Any] = {"model": model}
        for k, v in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens)):
            if v is not None:
                self._body[k] = v
        self._body.update(chat_options or {})
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "gemgym"}
        self._http = self._client(self.timeout, min(10.0, self.timeout))
        self._jitter = random.Random()

    def _client(self, timeout: float, connect_timeout: float) -> AsyncClient:
        return AsyncClient(
            self.base_url,
            headers=self._headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            extra="openai",
        )

    # -- before the run ----------------------------------------------------------------------
    async def open_run(self) -> None:
        """Probe the server once, before the first episode (see :meth:`probe`)."""
        if not self.probed:
            await self.probe()

    async def close_run(self) -> None:
        """Close the run's connections (they belong to its event loop)."""
        await self._http.aclose()

    async def probe(self, *, connect_timeout: float = 5.0) -> str | None:
        """Check, with at most two requests, that the server can serve this agent's turns.

        Raises :class:`~gemgym.errors.ModelUnavailableError` when no turn can work: the server
        cannot be reached (within ``connect_timeout`` s), it refuses the API key (HTTP
        401/403), or it does not serve the model (its ``/models`` list lacks it, or it has no
        ``/models`` (404, as a base_url without ``/v1``), and a chat request answers 404 or
        "model does not exist"). Returns a warning (the server is
        reachable but did not answer the probe well: slow, 5xx) or ``None``; the run goes on
        then, and the circuit breaker stops it if the server stays broken.
        """
        self.probed = True
        http = self._client(min(self.timeout, 30.0), connect_timeout)
        where = f"the LLM server at {self.base_url}"
        try:
            try:
                models = await http.get("/models")
                listed = self._check_models(models)
                # a /models that is not there (404) is often a base_url without /v1: ask a chat
                if models.status == 404 or (listed is not None and self.model not in listed):
                    await self._probe_chat(http, listed, models_missing=models.status == 404)
            except TransportError as e:
                if e.kind != "connect":
                    why = "no answer in time" if e.kind == "timeout" else e.detail
                    self.probe_warning = f"{where} did not answer the probe well ({why}); going on"
                elif e.seconds is not None:
                    raise ModelUnavailableError(
                        f"cannot reach {where}: no connection within {e.seconds:g} s; is it "
                        "running, and is base_url right?"
                    ) from None
                else:
                    raise ModelUnavailableError(
                        f"cannot reach {where} ({e.detail}); is it running, and is base_url right?"
                    ) from None
        finally:
            await http.aclose()
        return self.probe_warning

    def _check_models(self, response: Response) -> list[str] | None:
        """The model ids ``GET /models`` lists (``None``: it lists none, or has no list)."""
        where = f"the LLM server at {self.base_url}"
        status, raw = response.status, response.body
        if status in (401, 403):
            raise ModelUnavailableError(
                f"{where} refused the API key (HTTP {status}: {_detail(raw)}); pass the right "
                "api_key"
            )
        if status != 200:
            return None
        try:
            data = json.loads(raw).get("data") or []
            ids = [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError, TypeError):
            return None
        return ids or None

    async def _probe_chat(
        self, http: AsyncClient, listed: list[str] | None, *, models_missing: bool = False
    ) -> None:
        """A one-token chat request: raises when the server says the model is not served
        (``models_missing``: ``GET /models`` was answered 404 too, so base_url is the likely
        cause)."""
        body = dict(self._body, messages=[{"role": "user", "content": "Say OK."}])
        if "max_completion_tokens" not in body:
            body["max_tokens"] = 1
        response = await http.post("/chat/completions", json.dumps(body).encode())
        status, raw = response.status, response.body
        detail = _detail(raw)
        low = detail.lower()
        if status in (401, 403):
            self._check_models(response)
        if status == 404 or (
            status == 400 and "model" in low and any(h in low for h in MODEL_NOT_FOUND_HINTS)
        ):
            served = f"; it serves: {', '.join(listed[:10])}" if listed else ""
            if models_missing and status == 404:
                raise ModelUnavailableError(
                    f"the LLM server at {self.base_url} answered HTTP 404 to GET /models and to "
                    f"a chat request for model {self.model!r} ({detail}); check base_url, which "
                    "usually ends in /v1, and model"
                )
            raise ModelUnavailableError(
                f"the LLM server at {self.base_url} does not serve model {self.model!r} "
                f"(HTTP {status}: {detail}){served}; check model and base_url, which usually "
                "ends in /v1"
            )

    # -- turns -------------------------------------------------------------------------------
    async def act(self, request: ActRequest) -> Action:
        messages = _user_turn(request, self.system_prompt, self.history)
        reply = await self.complete(messages, _seed(self.seed, request))
        if self.history and reply.error is None and reply.finish_reason != "context":
            messages.append({"role": "assistant", "content": reply.action})
        return reply

    async def complete(self, messages: list[dict[str, Any]], seed: int | None = None) -> Action:
        """One chat completion of ``messages`` (with ``seed`` when not ``None``), retried as
        the class docstring says: the reply's text, or ``Action(error=...)``, or
        ``finish_reason="context"``; raises :class:`~gemgym.errors.ModelUnavailableError` when
        no request can work."""
        body = dict(self._body, messages=messages)
        if seed is not None:
            body["seed"] = seed
        data = json.dumps(body).encode()
        latency = 0.0
        last = ""
        tries = 0
        for attempt in range(self.retry.max_retries + 1):
            self.breaker.check()
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1, self._jitter))
                self.breaker.check()
            tries += 1
            t0 = time.perf_counter()
            try:
                response = await self._http.post("/chat/completions", data)
            except TransportError as e:
                latency += time.perf_counter() - t0
                last = self._transport_message(e)
                continue
            latency += time.perf_counter() - t0
            status, raw = response.status, response.body
            if status != 200:
                detail = _detail(raw)
                if status in (400, 413, 422) and _is_context_overflow(detail):
                    self.breaker.success()  # the server works; the prompt is too long
                    return Action("", finish_reason="context", latency_s=latency, requests=tries)
                last = f"the LLM server answered HTTP {status}: {detail[:300]}"
                if status in RETRY_STATUS:
                    continue
                if status in (401, 403, 404):  # a refused key, an unknown model: no turn works
                    raise ModelUnavailableError(
                        f"{last} (from {self.base_url}); check api_key, model and base_url"
                    )
                break
            try:
                payload = json.loads(raw)
                choice = payload["choices"][0]
                message = choice["message"]
                text = message.get("content") or ""
            except (ValueError, KeyError, IndexError, TypeError) as e:
                last = f"the LLM server's answer is not a chat completion: {e}"
                break
            self.breaker.success()
            usage = payload.get("usage") or {}
            return Action(
                text,
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                latency_s=latency,
                requests=tries,
                warning=_reply_warning(message, choice.get("finish_reason"), text),
            )
        error = f"{last} [gave up after {tries} {'try' if tries == 1 else 'tries'}]"
        self.breaker.failure(error)
        return Action(error=error, latency_s=latency, requests=tries)

    def _transport_message(self, e: TransportError) -> str:
        """What a request that got no answer says (and what to do about it)."""
        where = f"the LLM server at {self.base_url}"
        if e.kind == "timeout":
            return (
                f"{where} did not answer within {self.timeout:g} s (it is reachable but slow or "
                "hung; raise timeout or lower concurrency)"
            )
        if e.kind == "connect":
            why = f"no connection within {e.seconds:g} s" if e.seconds is not None else e.detail
            return f"cannot reach {where} ({why}); is it running, and is base_url right?"
        return f"{where} broke the connection mid-answer ({e.detail}); it may have crashed or restarted"

    async def aclose(self) -> None:
        await self._http.aclose()


class BackendAgent:
    """Any :class:`gemgym.llm.LLMBackend` (transformers, vLLM, SGLang, a chat server) as an agent.

    A backend that takes token ids (``capabilities.token_ids``) gets the conversation rendered
    by the tokenizer's chat template (``tokenizer``, default the backend's own); a text backend
    gets the chat messages. A failed generation ends its episode as an error; a prompt the backend says does not fit
    the context ends it as truncated (``truncation: "context"``).
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
                    f"the {backend.name} backend takes token ids: pass its tokenizer (tokenizer) "
                    "so the conversation can be rendered"
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
        latency = gen.latency_s or time.perf_counter() - t0
        if gen.finish_reason == "error":
            return Action(
                error=f"the {self.backend.name} backend failed: {gen.error}", latency_s=latency
            )
        if gen.finish_reason == "length" and gen.error and not (gen.text or gen.token_ids):
            # the prompt does not fit the model's context (gemgym.llm's classification)
            return Action("", finish_reason="context", latency_s=latency)
        text = gen.text
        if self.tokenizer is not None and gen.token_ids:  # the reply without special tokens
            text = self.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        if self.history:
            messages.append({"role": "assistant", "content": text})
        return Action(
            text,
            prompt_tokens=int(gen.prompt_tokens),
            completion_tokens=int(gen.completion_tokens),
            latency_s=latency,
            requests=1,
        )

    async def aclose(self) -> None:
        await self.backend.aclose()
