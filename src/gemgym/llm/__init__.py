"""Token-level multi-turn LLM rollouts: exact token ids, log-probs and masks.

* :mod:`gemgym.llm.backend`: the :class:`LLMBackend` interface (``generate`` one turn from prompt
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
        BackendCapabilities as BackendCapabilities,
        FinishReason as FinishReason,
        Generation as Generation,
        GenerationRequest as GenerationRequest,
        LLMBackend as LLMBackend,
        SamplingParams as SamplingParams,
    )
    from gemgym.llm.record import (
        TokenEpisode as TokenEpisode,
        TokenTurn as TokenTurn,
        read_token_jsonl as read_token_jsonl,
        token_advantages as token_advantages,
        write_token_jsonl as write_token_jsonl,
    )
    from gemgym.llm.render import (
        ChatRenderer as ChatRenderer,
        RenderDiff as RenderDiff,
        compare_with_full_render as compare_with_full_render,
    )
    from gemgym.llm.rollout import (
        RolloutStats as RolloutStats,
        arollout_tokens as arollout_tokens,
        rollout_tokens as rollout_tokens,
    )
    from gemgym.llm.servers import (
        ChatCompletionsBackend as ChatCompletionsBackend,
        RetryPolicy as RetryPolicy,
        SGLangBackend as SGLangBackend,
        TextCompletionsBackend as TextCompletionsBackend,
        VLLMBackend as VLLMBackend,
        transformers_serve_backend as transformers_serve_backend,
    )
    from gemgym.llm.testing import (
        build_tiny_chat_model as build_tiny_chat_model,
    )
    from gemgym.llm.transformers_backend import (
        TransformersBackend as TransformersBackend,
    )
    from gemgym.llm.vllm_engine import (
        VLLMEngineBackend as VLLMEngineBackend,
    )


# ``Backend`` was this interface's name until "Backend" also meant a sandbox kind
__getattr__, __dir__ = lazy_exports(globals(), deprecated={"Backend": "LLMBackend"})
