"""An in-process vLLM engine (``vllm.LLM``) as a :class:`~gemgym.llm.backend.LLMBackend`.

Trainers that own a vLLM engine in their own process (Oat's actors, a custom loop) sample
through it without a server: :class:`VLLMEngineBackend` gathers the requests of the turns in
flight into one ``LLM.generate`` call (run in a worker thread, so envs keep stepping), sends
each prompt as token ids and returns the sampled ids verbatim with their log-probs (vLLM's
``logprobs=0``: the sampled token's own). A prompt that does not fit the engine's
``max_model_len`` gets no tokens and ``finish_reason="length"`` (the rollout ends the episode
as truncated by the context) instead of failing the whole batch.

    llm = vllm.LLM("Qwen/Qwen2.5-0.5B-Instruct")
    backend = VLLMEngineBackend(llm)
    episodes = rollout_tokens("game:GuessTheNumber-v0-easy", backend, episodes=64)

The same calls work with vLLM 0.8 (Oat's pin) and current vLLM. Text-only (images need a
server backend). Needs vLLM installed (``pip install vllm``; it is not a gemgym extra).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gemgym.errors import DependencyNotInstalled
from gemgym.llm._batching import BatchedBackend, BatchQueue
from gemgym.llm.backend import (
    FinishReason,
    Generation,
    GenerationRequest,
    SamplingParams,
)

__all__ = ["VLLMEngineBackend"]

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


class VLLMEngineBackend(BatchedBackend):
    """Sample from an in-process ``vllm.LLM`` (see the module docstring).

    Args:
        llm: the engine.
        name: the model name records store (default: the engine's model).
        lora_request: called before each batch; returns the ``LoRARequest`` to sample with, or
            ``None`` (Oat's actors swap LoRA adapters this way).
        sampling_extra: more ``vllm.SamplingParams`` fields for every request (``top_k``,
            ``repetition_penalty``, ...).
        max_batch_size: the most requests in one ``generate`` call.
    """

    def __init__(
        self,
        llm: Any,
        *,
        name: str | None = None,
        lora_request: Callable[[], Any] | None = None,
        sampling_extra: Mapping[str, Any] | None = None,
        max_batch_size: int = 1024,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise DependencyNotInstalled(
                "VLLMEngineBackend needs vLLM in this environment (pip install vllm; it is "
                "not a gemgym extra). Without it, serve the model with vLLM elsewhere and use "
                "gemgym.llm.VLLMBackend, or use gemgym.llm.TransformersBackend"
            ) from e
        self._vllm = vllm
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
        self.max_model_len = int(getattr(config, "max_model_len", 0) or 0) or None
        self._name = name or str(getattr(config, "model", "") or "vllm")
        self.lora_request = lora_request
        self.sampling_extra = dict(sampling_extra or {})
        self._queue = BatchQueue(self._generate_batch, max_batch_size)

    async def generate(self, request: GenerationRequest) -> Generation:
        """Queue one request; it joins the next ``LLM.generate`` call."""
        return await self._submit(request, self.max_model_len)

    def sampling_params(self, s: SamplingParams, prompt_tokens: int) -> Any:
        """vLLM's ``SamplingParams`` for gemgym's (``max_tokens`` cut to the room left)."""
        max_tokens = s.max_tokens
        if self.max_model_len is not None:
            max_tokens = min(max_tokens, self.max_model_len - prompt_tokens)
        return self._vllm.SamplingParams(
            n=1,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=max_tokens,
            stop=list(s.stop) or None,
            include_stop_str_in_output=True,
            seed=s.seed,
            logprobs=0,
            **self.sampling_extra,
        )

    # -- the batch, in a worker thread ---------------------------------------------------------
    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        prompts = [{"prompt_token_ids": list(r.prompt_ids or ())} for r in requests]
        params = [
            self.sampling_params(r.sampling, len(p["prompt_token_ids"]))
            for r, p in zip(requests, prompts, strict=True)
        ]
        kwargs: dict[str, Any] = {"sampling_params": params, "use_tqdm": False}
        lora = self.lora_request() if self.lora_request is not None else None
        if lora is not None:
            kwargs["lora_request"] = lora
        outputs = self.llm.generate(prompts, **kwargs)
        return [
            _generation(out, len(p["prompt_token_ids"]))
            for out, p in zip(outputs, prompts, strict=True)
        ]


def _generation(out: Any, prompt_tokens: int) -> Generation:
    """gemgym's :class:`Generation` from one vLLM ``RequestOutput``."""
    completion = out.outputs[0]
    ids = [int(t) for t in completion.token_ids]
    logprobs: list[float] | None = None
    if completion.logprobs is not None:
        logprobs = [
            float(step[tok].logprob) for step, tok in zip(completion.logprobs, ids, strict=True)
        ]
    reason = _FINISH.get(str(completion.finish_reason))
    if reason is None:
        return Generation.failed(f"vLLM finished the request with {completion.finish_reason!r}")
    return Generation(ids, logprobs, completion.text, reason, prompt_tokens=prompt_tokens)
