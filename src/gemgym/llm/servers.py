"""Backends that sample from an inference server over HTTP (vLLM, SGLang, any chat server).

All of them implement :class:`~gemgym.llm.backend.LLMBackend`: ``await backend.generate(request)``
sends one request; the rollout engine calls it from many tasks at once, and a backend keeps at
most ``max_concurrency`` requests in flight (the server batches what arrives together).

=================================  ===========================  =========  =========  ===========
backend                            endpoint                     token ids  log-probs  re-tokenised
=================================  ===========================  =========  =========  ===========
:class:`VLLMBackend`               ``POST /v1/completions``     yes        yes        no
:class:`SGLangBackend`             ``POST /generate``           yes        yes        no
:class:`TextCompletionsBackend`    ``POST /v1/completions``     no         no         yes
:class:`ChatCompletionsBackend`    ``POST /v1/chat/completions`` no        no         yes
=================================  ===========================  =========  =========  ===========

* :class:`VLLMBackend` sends the prompt as token ids (``prompt: [int, ...]``) to an
  OpenAI-compatible completions endpoint and reads the sampled ids back (vLLM's
  ``return_token_ids``, or the ``token_id:N`` strings of ``return_tokens_as_token_ids``) with
  their log-probs (``logprobs: 0``: the sampled token's own log-prob).
* :class:`SGLangBackend` uses SGLang's native ``/generate`` (``input_ids``,
  ``return_logprob``; ids and log-probs from ``meta_info.output_token_logprobs``).
* :class:`TextCompletionsBackend` decodes the rendered prompt to text and sends that
  (``transformers serve``, or any server that takes text prompts only); the reply's text is
  tokenised here, and the :class:`~gemgym.llm.backend.Generation` says ``retokenized=True``.
* :class:`ChatCompletionsBackend` sends the chat ``messages`` (any OpenAI-compatible chat server,
  images as content parts); the server applies its own chat template; the reply is re-tokenised
  as above.

Failures never raise: each request is retried (``max_retries`` times, exponential backoff with
jitter) when the server cannot be reached, does not answer within ``timeout_s`` seconds, or
answers HTTP 408/429/5xx; a request that still fails, or that the server refuses (another 4xx),
comes back as ``Generation.failed(message)``, which ends only its own episode. A prompt the
server says is longer than its context comes back at once (no retry) as an empty generation with
``finish_reason="length"``, so the episode ends as truncated.

Requests go through gemgym's HTTP client (:mod:`gemgym._http`, aiohttp: kept-alive connections,
one session per event loop); needs ``pip install "gemgym[llm-server]"``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from gemgym._http import (
    RETRY_STATUS,
    AsyncClient,
    RetryPolicy,
    TransportError,
    error_detail as _error_detail,
)
from gemgym.errors import ConfigError
from gemgym.llm.backend import (
    BackendCapabilities,
    FinishReason,
    Generation,
    GenerationRequest,
    SamplingParams,
)

__all__ = [
    "ChatCompletionsBackend",
    "RetryPolicy",
    "SGLangBackend",
    "ServerBackend",
    "TextCompletionsBackend",
    "VLLMBackend",
    "transformers_serve_backend",
]

CONTEXT_OVERFLOW_HINTS = (
    "maximum context length",
    "context length",
    "context window",
    "exceeds the maximum",
    "too long",
    "max_model_len",
    "is longer than",
)
"""Phrases of a 400 reply that mean the prompt does not fit the model's context (vLLM says
"This model's maximum context length is N tokens", SGLang "... exceeds the maximum allowed
length ...")."""


class _Failure(Exception):
    """A request failed; ``retry``: worth another attempt; ``overflow``: the prompt does not
    fit the server's context."""

    def __init__(self, message: str, *, retry: bool, overflow: bool = False) -> None:
        super().__init__(message)
        self.retry = retry
        self.overflow = overflow


class ServerBackend:
    """Common part of the HTTP backends: one client per event loop, at most
    ``max_concurrency`` requests in flight, retries, a deadline per attempt.

    Args:
        base_url: the server's address, e.g. ``http://127.0.0.1:8000`` (a trailing ``/v1`` is
            accepted for the OpenAI-compatible backends).
        model: the served model's name (sent with each request where the API wants one, and
            the name the record stores).
        timeout_s: seconds an attempt may take, from sending to the whole reply.
        connect_timeout_s: seconds to open a connection (at most ``timeout_s``).
        retry: the :class:`RetryPolicy`.
        max_concurrency: requests in flight at once (the server batches them).
        api_key: sent as ``Authorization: Bearer ...`` when given.
        headers: more headers for every request.
        seed: seed of the retry jitter.
        extra: fields added to every request (vLLM: to the body, e.g. ``{"top_k": 20}``;
            SGLang: to ``sampling_params``).
        tokenizer: the served model's tokenizer: the rollout engine renders with it when it is
            given none (``rollout_tokens(env, backend)``); the text-only backends tokenise
            replies with it.
    """

    path: ClassVar[str] = ""
    """The endpoint, relative to ``base_url``."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 256,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        seed: int = 0,
        extra: Mapping[str, Any] | None = None,
        tokenizer: Any = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ConfigError("timeout_s and connect_timeout_s must be > 0")
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(min(connect_timeout_s, timeout_s))
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._rng = random.Random(seed)
        self.extra = dict(extra or {})
        self.tokenizer = tokenizer
        base = self.base_url
        if self.path.startswith("/v1/") and base.endswith("/v1"):
            base = base[: -len("/v1")]  # the /v1 of base_url is not doubled
        # one session per event loop inside; the semaphore belongs to one loop too
        self._client = AsyncClient(
            base,
            headers=self._headers,
            timeout=self.timeout_s,
            connect_timeout=self.connect_timeout_s,
            max_connections=max_concurrency,
            extra="llm-server",
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self.requests_sent = 0
        """Attempts sent (retries included)."""

    # -- what subclasses give ----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.model or self.base_url

    @property
    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities()

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, reply: Any, request: GenerationRequest) -> Generation:
        raise NotImplementedError

    # -- the request -------------------------------------------------------------------------
    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self.max_concurrency), loop
        return self._slots

    async def _attempt(self, body: dict[str, Any]) -> Any:
        """One POST: the decoded JSON reply, or :class:`_Failure`."""
        self.requests_sent += 1
        url = self._client.url(self.path)
        try:
            response = await self._client.post_json(self.path, body)
        except TransportError as e:
            if e.kind == "timeout":
                message = (
                    f"the server at {url} did not answer within {self.timeout_s:g} s (raise "
                    "timeout_s if it is only slow, or check that it is not stuck)"
                )
            elif e.kind == "connect" and e.seconds is not None:
                message = (
                    f"cannot connect to {url}: no connection within {e.seconds:g} s (is the "
                    "server running and reachable?)"
                )
            elif e.kind == "connect":
                message = (
                    f"cannot connect to {url}: {e.detail} (is the server running? start it, or "
                    "fix base_url)"
                )
            else:  # the connection broke mid-reply, a protocol error
                message = f"request to {url} failed: {e.detail}"
            raise _Failure(message, retry=True) from e
        if response.status >= 400:
            detail = _error_detail(response.text)
            status = response.status
            if status in (400, 413, 422) and _is_context_overflow(detail):
                raise _Failure(detail, retry=False, overflow=True)
            raise _Failure(
                f"the server at {url} answered HTTP {status}: {detail}",
                retry=status in RETRY_STATUS,
            )
        try:
            return response.json()
        except ValueError as e:
            raise _Failure(
                f"the server at {url} answered with something that is not JSON: "
                f"{response.text[:200]!r}",
                retry=True,
            ) from e

    async def generate(self, request: GenerationRequest) -> Generation:
        """Sample one turn (see the module docstring for what a failure returns)."""
        t0 = time.perf_counter()
        try:
            body = self._body(request)
        except _Failure as e:
            return Generation.failed(str(e))
        attempt = 0
        async with self._semaphore():
            while True:
                try:
                    reply = await self._attempt(body)
                    gen = self._parse(reply, request)
                except _Failure as e:
                    if e.overflow:
                        return Generation(
                            [],
                            None,
                            "",
                            "length",
                            error=f"the prompt does not fit the server's context: {e}",
                            latency_s=time.perf_counter() - t0,
                        )
                    if not e.retry or attempt >= self.retry.max_retries:
                        tries = f" (after {attempt + 1} attempts)" if attempt else ""
                        return Generation.failed(f"{e}{tries}", time.perf_counter() - t0)
                    await asyncio.sleep(self.retry.delay(attempt, self._rng))
                    attempt += 1
                    continue
                gen.latency_s = time.perf_counter() - t0
                return gen

    async def generate_many(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Send ``requests`` concurrently; the generations in the same order."""
        return list(await asyncio.gather(*(self.generate(r) for r in requests)))

    async def aclose(self) -> None:
        """Close the HTTP connections (idempotent)."""
        self._slots = self._loop = None
        await self._client.aclose()


def _is_context_overflow(message: str) -> bool:
    low = message.lower()
    return any(h in low for h in CONTEXT_OVERFLOW_HINTS)


def _finish(reason: Any, has_error: bool = False) -> FinishReason:
    """An engine's finish reason as ours: ``length`` stays, anything that is not a
    failure (``stop``, ``eos``, ``stop_sequence``) is ``stop``."""
    if has_error or reason in ("abort", "error", "cancelled"):
        return "error"
    return "length" if reason == "length" else "stop"


def _first_choice(reply: Any) -> dict[str, Any]:
    """``reply["choices"][0]`` of an OpenAI-style reply (else a retryable failure)."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise _Failure(f"a reply without choices: {str(reply)[:200]}", retry=True)
    return dict(choices[0])


def _sampling_fields(s: SamplingParams) -> dict[str, Any]:
    """The OpenAI-style sampling fields of a request."""
    out: dict[str, Any] = {
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
    }
    if s.stop:
        out["stop"] = list(s.stop)
    if s.seed is not None:
        out["seed"] = s.seed
    return out


def _prompt_ids(request: GenerationRequest, backend: str) -> list[int]:
    if request.prompt_ids is None:
        raise _Failure(
            f"{backend} sends token ids, but the request has none (the rollout engine renders "
            "them: give it a tokenizer)",
            retry=False,
        )
    return [int(i) for i in request.prompt_ids]


def _refuse_images(request: GenerationRequest, backend: str) -> None:
    if request.images:
        raise _Failure(
            f"{backend} sends token ids only and cannot pass the episode's images; use "
            "ChatCompletionsBackend with a multimodal server",
            retry=False,
        )


class VLLMBackend(ServerBackend):
    """vLLM (or any server with vLLM's completions extensions): token ids in, token ids and
    log-probs out, through ``POST /v1/completions``.

    The request asks for ``prompt`` as ids, ``logprobs: 0`` (the sampled token's log-prob),
    ``return_token_ids`` and ``return_tokens_as_token_ids`` (either gives the ids; vLLM before
    0.10.2 has only the second) and ``include_stop_str_in_output: true`` (so that the text is
    that of the ids, special tokens skipped). vLLM's default
    ``--logprobs-mode raw_logprobs`` returns log-probs of the raw model distribution, as the
    :class:`~gemgym.llm.backend.Generation` contract asks. ``extra`` adds fields to every
    request (e.g. ``{"top_k": 20}``).
    """

    path = "/v1/completions"

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        _refuse_images(request, "VLLMBackend")
        return {
            "model": self.model,
            "prompt": _prompt_ids(request, "VLLMBackend"),
            **_sampling_fields(request.sampling),
            "logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "include_stop_str_in_output": True,
            **self.extra,
        }

    def _parse(self, reply: Any, request: GenerationRequest) -> Generation:
        choice = _first_choice(reply)
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:
            tokens = lp.get("tokens")
            if not tokens or not all(str(t).startswith("token_id:") for t in tokens):
                raise _Failure(
                    "the server returned no token ids: it needs vLLM's completions extensions "
                    "(return_token_ids, or return_tokens_as_token_ids); for a text-only server "
                    "use TextCompletionsBackend",
                    retry=False,
                )
            ids = [int(str(t).split(":", 1)[1]) for t in tokens]
        logprobs = lp.get("token_logprobs")
        if logprobs is not None:
            logprobs = [float(x) if x is not None else float("nan") for x in logprobs]
            if len(logprobs) != len(ids):
                logprobs = None
        usage = reply.get("usage") or {}
        return Generation(
            [int(i) for i in ids],
            logprobs,
            str(choice.get("text") or ""),
            _finish(choice.get("finish_reason")),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
        )


class SGLangBackend(ServerBackend):
    """SGLang's native ``POST /generate``: ``input_ids`` in, ``output_ids`` and
    ``meta_info.output_token_logprobs`` (``[log-prob, id, text]`` per token) out.

    Sampling fields go in ``sampling_params`` (``max_new_tokens``, ``temperature``, ``top_p``,
    ``stop``, ``sampling_seed``), with ``no_stop_trim: true`` (the text keeps a matched stop string).
    SGLang's log-probs are those of the distribution it sampled from (after temperature) unless
    the server runs with ``SGLANG_RETURN_ORIGINAL_LOGPROB=1``; sample at temperature 1, or set
    that, for log-probs of the raw model distribution. ``extra`` adds fields to
    ``sampling_params`` (e.g. ``{"top_k": 20}``).
    """

    path = "/generate"

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        _refuse_images(request, "SGLangBackend")
        s = request.sampling
        sampling: dict[str, Any] = {
            "max_new_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "no_stop_trim": True,
        }
        if s.stop:
            sampling["stop"] = list(s.stop)
        if s.seed is not None:
            sampling["sampling_seed"] = s.seed
        sampling.update(self.extra)
        return {
            "input_ids": _prompt_ids(request, "SGLangBackend"),
            "sampling_params": sampling,
            "return_logprob": True,
        }

    def _parse(self, reply: Any, request: GenerationRequest) -> Generation:
        if isinstance(reply, list) and len(reply) == 1:
            reply = reply[0]
        if not isinstance(reply, dict):
            raise _Failure(
                f"a /generate reply that is not an object: {str(reply)[:200]}", retry=True
            )
        meta = reply.get("meta_info") or {}
        entries = meta.get("output_token_logprobs")
        ids = reply.get("output_ids")
        logprobs: list[float] | None = None
        if entries is not None:
            logprobs = [float(e[0]) if e[0] is not None else float("nan") for e in entries]
            if ids is None:
                ids = [int(e[1]) for e in entries]
        if ids is None:
            raise _Failure(
                "the /generate reply has neither output_ids nor output_token_logprobs (is this "
                "SGLang's native API?)",
                retry=False,
            )
        if logprobs is not None and len(logprobs) != len(ids):
            logprobs = None
        finish = meta.get("finish_reason")
        reason = finish.get("type") if isinstance(finish, dict) else finish
        if reason == "abort":
            message = finish.get("message") if isinstance(finish, dict) else None
            message = str(message or "the server aborted the request")
            if _is_context_overflow(message):
                return Generation([], None, "", "length", error=message)
            return Generation.failed(message)
        return Generation(
            [int(i) for i in ids],
            logprobs,
            str(reply.get("text") or ""),
            _finish(reason),
            prompt_tokens=int(meta.get("prompt_tokens") or 0),
        )


class _Retokenizing(ServerBackend):
    """A text-only server: the reply's text is tokenised here (``retokenized=True``)."""

    @property
    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities(token_ids=False, logprobs=False, images=False, seeds=True)

    def _text_generation(self, text: str, reason: Any, usage: Any) -> Generation:
        usage = usage or {}
        finish = _finish(reason)
        if not text and finish == "length" and int(usage.get("completion_tokens") or 0) > 0:
            # tokens were sampled but their text is empty (whitespace or special tokens the
            # server strips): there is nothing to re-tokenise, and an empty "length" reply
            # would read as a context overflow
            return Generation.failed(
                f"the server sampled {usage['completion_tokens']} tokens whose text is empty; "
                "a text-only server cannot return them (use a token-id backend: vLLM, SGLang)"
            )
        ids: list[int] = []
        if self.tokenizer is not None and text:
            ids = [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        return Generation(ids, None, text, finish, retokenized=True, prompt_tokens=prompt_tokens)


class TextCompletionsBackend(_Retokenizing):
    """A completions server that takes text prompts only (``transformers serve``, llama.cpp,
    any OpenAI-compatible ``/v1/completions``): the rendered prompt ids are decoded with
    ``tokenizer`` (special tokens kept) and sent as text; the server tokenises that text again,
    and the reply's text is tokenised here (``retokenized=True``, no log-probs). The chat
    template stays the one gemgym renders with, unlike :class:`ChatCompletionsBackend`.

    Only the standard fields are sent (``model``, ``prompt``, ``max_tokens``, ``temperature``,
    ``top_p``, ``stop``, ``seed``): ``transformers serve`` refuses others.
    """

    def __init__(self, base_url: str, *, tokenizer: Any, **kwargs: Any) -> None:
        if tokenizer is None:
            raise ConfigError("TextCompletionsBackend needs the model's tokenizer")
        super().__init__(base_url, tokenizer=tokenizer, **kwargs)

    path = "/v1/completions"

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        _refuse_images(request, "TextCompletionsBackend")
        ids = _prompt_ids(request, "TextCompletionsBackend")
        prompt = self.tokenizer.decode(ids, skip_special_tokens=False)
        return {"model": self.model, "prompt": prompt, **_sampling_fields(request.sampling)}

    def _parse(self, reply: Any, request: GenerationRequest) -> Generation:
        choice = _first_choice(reply)
        return self._text_generation(
            str(choice.get("text") or ""), choice.get("finish_reason"), reply.get("usage")
        )


class ChatCompletionsBackend(_Retokenizing):
    """Any OpenAI-compatible chat server (``POST /v1/chat/completions``): the episode's
    ``messages`` are sent and the server applies its chat template; the reply's text is
    tokenised with ``tokenizer`` when one is given (``retokenized=True``, no log-probs; without
    a tokenizer the generation has no ids and the rollout engine tokenises the text).

    ``images=True`` declares that the served model takes images (content parts in the
    messages).
    """

    def __init__(self, base_url: str, *, images: bool = False, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self.images = images

    @property
    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities(token_ids=False, logprobs=False, images=self.images, seeds=True)

    path = "/v1/chat/completions"

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        if request.images and not self.images:
            raise _Failure(
                "the episode has images, but this backend was not told that its model takes "
                "them: pass images=True for a multimodal server",
                retry=False,
            )
        return {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            **_sampling_fields(request.sampling),
        }

    def _parse(self, reply: Any, request: GenerationRequest) -> Generation:
        choice = _first_choice(reply)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _Failure(f"a chat reply without a message: {str(reply)[:200]}", retry=True)
        content = message.get("content")
        return self._text_generation(
            str(content or ""), choice.get("finish_reason"), reply.get("usage")
        )


def transformers_serve_backend(
    base_url: str, *, model: str, tokenizer: Any = None, api: str = "completions", **kwargs: Any
) -> ServerBackend:
    """A backend for ``transformers serve`` (start it with ``transformers serve MODEL``).

    ``transformers serve`` returns neither token ids nor log-probs, so both of its APIs are
    text-only: ``api="completions"`` (default) renders the chat template here and sends the
    prompt as text (:class:`TextCompletionsBackend`, needs ``tokenizer``); ``api="chat"`` sends
    the messages (:class:`ChatCompletionsBackend`, the server's template). ``model`` must be
    the name the server was started with.
    """
    if api == "completions":
        return TextCompletionsBackend(base_url, model=model, tokenizer=tokenizer, **kwargs)
    if api == "chat":
        return ChatCompletionsBackend(base_url, model=model, tokenizer=tokenizer, **kwargs)
    raise ConfigError(f"api must be 'completions' or 'chat', got {api!r}")
