"""Token-level multi-turn LLM rollouts: exact token ids, log-probs and masks.

* :mod:`gemgym.llm.backend`: the :class:`Backend` interface (``generate`` one turn from prompt
  ids and/or chat messages with :class:`SamplingParams`, returning a :class:`Generation`);
* :mod:`gemgym.llm.record`: the :class:`TokenEpisode` record (ids, log-probs, loss mask,
  rewards, finish reasons), JSONL in and out, token-level advantages;
* :mod:`gemgym.llm.render`: chat rendering that never re-tokenises sampled text;
* :mod:`gemgym.llm.transformers_backend`: a local Hugging Face model as a backend;
* :mod:`gemgym.llm.vllm_engine`: an in-process vLLM engine (``vllm.LLM``) as a backend;
* :mod:`gemgym.llm.rollout`: the engine (:func:`rollout_tokens`): many episodes in flight over
  a vector env, each turn sent as soon as its env step returns;
* :mod:`gemgym.llm.servers`: inference servers over HTTP (:class:`VLLMBackend`,
  :class:`SGLangBackend`, text-only :class:`TextCompletionsBackend` and
  :class:`ChatCompletionsBackend`, ``transformers serve``), with retries and timeouts;
* :mod:`gemgym.llm.testing`: tiny random-initialised chat models for tests.

Everything heavy (torch, transformers) is imported only where used
(``pip install "gemgym[llm]"``). See ``docs/llm.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports

if TYPE_CHECKING:
    from gemgym.llm.backend import (
        Backend,
        BackendCapabilities,
        FinishReason,
        Generation,
        GenerationRequest,
        SamplingParams,
    )
    from gemgym.llm.record import (
        TokenEpisode,
        TokenTurn,
        read_token_jsonl,
        token_advantages,
        write_token_jsonl,
    )
    from gemgym.llm.render import ChatRenderer, RenderDiff, compare_with_full_render
    from gemgym.llm.rollout import RolloutStats, arollout_tokens, rollout_tokens
    from gemgym.llm.servers import (
        ChatCompletionsBackend,
        RetryPolicy,
        SGLangBackend,
        TextCompletionsBackend,
        VLLMBackend,
        transformers_serve_backend,
    )
    from gemgym.llm.testing import build_tiny_chat_model
    from gemgym.llm.transformers_backend import TransformersBackend
    from gemgym.llm.vllm_engine import VLLMEngineBackend

_EXPORTS: dict[str, str] = {
    "Backend": "gemgym.llm.backend",
    "BackendCapabilities": "gemgym.llm.backend",
    "FinishReason": "gemgym.llm.backend",
    "Generation": "gemgym.llm.backend",
    "GenerationRequest": "gemgym.llm.backend",
    "SamplingParams": "gemgym.llm.backend",
    "TokenEpisode": "gemgym.llm.record",
    "TokenTurn": "gemgym.llm.record",
    "read_token_jsonl": "gemgym.llm.record",
    "token_advantages": "gemgym.llm.record",
    "write_token_jsonl": "gemgym.llm.record",
    "ChatRenderer": "gemgym.llm.render",
    "RenderDiff": "gemgym.llm.render",
    "compare_with_full_render": "gemgym.llm.render",
    "RolloutStats": "gemgym.llm.rollout",
    "arollout_tokens": "gemgym.llm.rollout",
    "rollout_tokens": "gemgym.llm.rollout",
    "ChatCompletionsBackend": "gemgym.llm.servers",
    "RetryPolicy": "gemgym.llm.servers",
    "SGLangBackend": "gemgym.llm.servers",
    "TextCompletionsBackend": "gemgym.llm.servers",
    "VLLMBackend": "gemgym.llm.servers",
    "transformers_serve_backend": "gemgym.llm.servers",
    "build_tiny_chat_model": "gemgym.llm.testing",
    "TransformersBackend": "gemgym.llm.transformers_backend",
    "VLLMEngineBackend": "gemgym.llm.vllm_engine",
}

__all__ = [
    "Backend",
    "BackendCapabilities",
    "ChatCompletionsBackend",
    "ChatRenderer",
    "FinishReason",
    "Generation",
    "GenerationRequest",
    "RenderDiff",
    "RetryPolicy",
    "RolloutStats",
    "SGLangBackend",
    "SamplingParams",
    "TextCompletionsBackend",
    "TokenEpisode",
    "TokenTurn",
    "TransformersBackend",
    "VLLMBackend",
    "VLLMEngineBackend",
    "arollout_tokens",
    "build_tiny_chat_model",
    "compare_with_full_render",
    "read_token_jsonl",
    "rollout_tokens",
    "token_advantages",
    "transformers_serve_backend",
    "write_token_jsonl",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
