"""Token-level multi-turn LLM rollouts: exact token ids, log-probs and masks.

* :mod:`gemgym.llm.backend`: the :class:`Backend` interface (``generate`` one turn from prompt
  ids and/or chat messages with :class:`SamplingParams`, returning a :class:`Generation`);
* :mod:`gemgym.llm.record`: the :class:`TokenEpisode` record (ids, log-probs, loss mask,
  rewards, finish reasons), JSONL in and out, token-level advantages;
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
    from gemgym.llm.testing import build_tiny_chat_model

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
    "build_tiny_chat_model": "gemgym.llm.testing",
}

__all__ = [
    "Backend",
    "BackendCapabilities",
    "FinishReason",
    "Generation",
    "GenerationRequest",
    "SamplingParams",
    "TokenEpisode",
    "TokenTurn",
    "build_tiny_chat_model",
    "read_token_jsonl",
    "token_advantages",
    "write_token_jsonl",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
