"""The interface every inference backend implements: :class:`LLMBackend`.

A backend turns one :class:`GenerationRequest` (prompt token ids and/or chat messages, with
:class:`SamplingParams`) into one :class:`Generation` (the sampled token ids, their log-probs,
the text, why it stopped). The rollout engine (:mod:`gemgym.llm.rollout`) sends one request per
episode turn, each as soon as that episode's env step returns, so many requests are in flight at
once; a backend batches them as it can (the transformers backend gathers concurrent requests
into one forward pass per token, a server batches them itself).

Token ids are the currency: a backend that takes prompt ids and returns sampled ids
(``capabilities.token_ids``: the transformers backend, vLLM's completions API, SGLang's generate
API) lets the engine build each episode's token sequence without ever re-tokenising sampled
text. A text-only backend (a plain chat-completions server) takes ``messages`` and returns text;
the engine then tokenises that text itself and the record says so
(:attr:`Generation.retokenized`).

Failures: a backend either raises :class:`~gemgym.errors.BackendError` (or any exception) or
returns a :class:`Generation` with ``finish_reason="error"`` and an ``error`` message; in both
cases the engine ends only that request's episode, recorded as an error, never the batch. A
generation with no tokens and ``finish_reason="length"`` means the prompt did not fit the
model's context: the engine ends the episode as truncated (``truncation="context"``).

Log-probs: ``Generation.logprobs[i]`` is the log-probability of ``token_ids[i]`` under the
model's own next-token distribution (log-softmax of the raw logits, before temperature and
top-p), which is what vLLM and SGLang return by default and what a trainer's forward pass
recomputes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from gemgym.core import Image
from gemgym.errors import ConfigError

__all__ = [
    "BackendCapabilities",
    "FinishReason",
    "Generation",
    "GenerationRequest",
    "LLMBackend",
    "SamplingParams",
]

FinishReason = Literal["stop", "length", "error"]
"""Why a generation ended: ``"stop"`` (an end-of-turn token or a stop string), ``"length"``
(``max_tokens`` or the context limit reached), ``"error"`` (the request failed)."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to sample one turn.

    Attributes:
        temperature: softmax temperature; ``0`` is greedy decoding.
        top_p: nucleus sampling threshold in ``(0, 1]`` (``1``: off).
        max_tokens: the most tokens one turn may generate.
        stop: strings that end a turn when the generated text contains one (the tokens sampled
            so far, the one completing the stop string included, are kept).
        max_context: the most tokens of an episode (prompt, every observation and action); a
            turn whose prompt leaves no room ends the episode as truncated, and a turn's
            ``max_tokens`` is cut to the room left. ``None``: no limit beyond the model's.
        seed: base seed; the engine derives one seed per episode and turn from it, so a rerun
            with the same seeds samples the same tokens on backends that honour seeds.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    max_context: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.max_context is not None and self.max_context < 2:
            raise ConfigError(f"max_context must be >= 2 tokens, got {self.max_context}")
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise ConfigError(f"stop must be a tuple of non-empty strings, got {self.stop!r}")

    def replace(self, **changes: Any) -> SamplingParams:
        """A copy with some fields changed (validated again)."""
        return SamplingParams(**{**asdict(self), **changes})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SamplingParams:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "stop": tuple(d.get("stop", ()))})


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One turn to generate.

    Attributes:
        prompt_ids: the whole episode so far as token ids, ending with the chat template's
            generation prompt (``None`` only for text-only backends fed ``messages``).
        messages: the same conversation as chat messages (``{"role", "content"}``; a content
            may be an OpenAI content-part list when the turn carries images). Always set by the
            engine, so a text-only backend can use it.
        sampling: the sampling settings of this turn (``max_tokens`` already cut to the
            context room; ``seed`` already this turn's own).
        images: the images of the conversation, in order (for backends that accept them).
        request_id: a unique id for logs and server-side tracing.
    """

    prompt_ids: Sequence[int] | None
    messages: Sequence[Mapping[str, Any]]
    sampling: SamplingParams
    images: tuple[Image, ...] = ()
    request_id: str = ""


@dataclass(slots=True)
class Generation:
    """What a backend sampled for one request.

    Attributes:
        token_ids: the sampled token ids, verbatim (the end-of-turn token included when the
            model sampled it).
        logprobs: ``logprobs[i]`` is the log-probability of ``token_ids[i]`` (raw model
            distribution, see the module docstring); ``None`` when the backend cannot say.
        text: the decoded text of ``token_ids``, special tokens skipped (as vLLM returns it);
            this is the action the env gets.
        finish_reason: ``"stop"``, ``"length"`` or ``"error"``.
        error: what went wrong when ``finish_reason == "error"``.
        retokenized: ``True`` when ``token_ids`` were not returned by the engine but made by
            tokenising ``text`` (text-only servers); their ``logprobs`` are then ``None``.
        prompt_tokens: prompt length the backend counted (0 when unknown).
        latency_s: seconds from sending the request to receiving the reply.
    """

    token_ids: list[int]
    logprobs: list[float] | None
    text: str
    finish_reason: FinishReason
    error: str | None = None
    retokenized: bool = False
    prompt_tokens: int = 0
    latency_s: float = 0.0

    @property
    def completion_tokens(self) -> int:
        """How many tokens were sampled."""
        return len(self.token_ids)

    @classmethod
    def failed(cls, error: str, latency_s: float = 0.0) -> Generation:
        """A failed request: no tokens, ``finish_reason="error"``."""
        return cls([], None, "", "error", error=error, latency_s=latency_s)


@dataclass(frozen=True, slots=True)
class BackendCapabilities:
    """What a backend accepts and returns.

    Attributes:
        token_ids: takes ``prompt_ids`` and returns the sampled ids (no re-tokenisation).
        logprobs: returns log-probs of the sampled tokens.
        images: accepts image observations (in ``messages`` content parts or ``images``).
        seeds: honours ``SamplingParams.seed``.
    """

    token_ids: bool = True
    logprobs: bool = True
    images: bool = False
    seeds: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class LLMBackend(Protocol):
    """An inference engine the rollout engine can sample from.

    Implementations: :class:`gemgym.llm.TransformersBackend` (a local Hugging Face model) and
    the OpenAI-compatible server backends (vLLM, SGLang, ``transformers serve``, any chat
    server). ``generate`` is called concurrently from many tasks of one event loop; it must not
    block the loop (run model code in a thread or await the network).
    """

    @property
    def name(self) -> str:
        """The model's name as the record stores it (a path, a served model id)."""
        ...

    @property
    def capabilities(self) -> BackendCapabilities:
        """What this backend accepts and returns."""
        ...

    async def generate(self, request: GenerationRequest) -> Generation:
        """Sample one turn. May raise (the engine records the episode as an error)."""
        ...

    async def aclose(self) -> None:
        """Release the backend's resources (threads, HTTP clients); idempotent."""
        ...


def __getattr__(name: str) -> Any:
    if name == "Backend":  # the name until 0.2; deprecated
        from gemgym._lazy import deprecated_alias

        deprecated_alias(__name__, "Backend", "LLMBackend")
        return LLMBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
