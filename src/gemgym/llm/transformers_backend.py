"""A local Hugging Face causal LM as a :class:`~gemgym.llm.backend.LLMBackend` (CPU or GPU).

:class:`TransformersBackend` gathers the requests that arrive while it is busy into one batch
(left-padded, one forward pass per generated token with a KV cache), samples each row with its
own settings (temperature, top-p, max tokens, stop strings, seed) and returns the sampled ids
with their log-probs under the model (log-softmax of the raw logits). The model runs in a worker
thread, so the event loop keeps stepping envs while it computes.

    backend = TransformersBackend("Qwen/Qwen2.5-0.5B-Instruct")   # or a local directory
    gen = await backend.generate(GenerationRequest(prompt_ids, messages, SamplingParams()))

Needs ``pip install "gemgym[llm]"``. Text-only: a request with images raises
:class:`~gemgym.errors.BackendError` (use a server backend with a vision model).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, missing_dependency
from gemgym.llm._batching import BatchedBackend, BatchQueue
from gemgym.llm.backend import (
    FinishReason,
    Generation,
    GenerationRequest,
)

__all__ = ["TransformersBackend"]


class TransformersBackend(BatchedBackend):
    """Sample from a local ``transformers`` causal LM (see the module docstring).

    Args:
        model: a model directory or Hub id (loaded with ``AutoModelForCausalLM``), or a loaded
            model.
        tokenizer: its tokenizer (default: loaded from ``model``).
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when available, else CPU).
        dtype: ``"float32"``, ``"bfloat16"``, ... when loading (default: the checkpoint's).
        max_batch_size: the most requests in one batch.
        name: the model name records store (default: the path).
    """

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any | None = None,
        *,
        device: str | None = None,
        dtype: str | None = None,
        max_batch_size: int = 64,
        name: str | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise missing_dependency(e.name or "transformers", "llm") from e
        if max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self._torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if isinstance(model, str | Path):
            kwargs: dict[str, Any] = {}
            if dtype is not None:
                kwargs["dtype"] = getattr(torch, dtype)
            self.model: Any = AutoModelForCausalLM.from_pretrained(str(model), **kwargs)
            self._name = name or str(model)
            if tokenizer is None:
                tokenizer = AutoTokenizer.from_pretrained(str(model))
        else:
            self.model = model
            self._name = name or str(getattr(model, "name_or_path", type(model).__name__))
        if tokenizer is None:
            raise ConfigError("pass the tokenizer of a loaded model (tokenizer=...)")
        net: Any = self.model
        net.to(self.device)
        net.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        eos: set[int] = set()
        for src in (getattr(self.model.generation_config, "eos_token_id", None),):
            if isinstance(src, int):
                eos.add(src)
            elif src is not None:
                eos.update(int(x) for x in src)
        if tokenizer.eos_token_id is not None:
            eos.add(int(tokenizer.eos_token_id))
        self.eos_ids = frozenset(eos)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else next(iter(eos), 0))
        import inspect

        # transformers 5 names the KV cache argument ``cache``; 4.x ``past_key_values``
        # a PEFT model forwards its keywords to the base model: the base model's names count
        base = getattr(self.model, "get_base_model", None)
        forward = base().forward if callable(base) else self.model.forward
        params = inspect.signature(forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))
        self._queue = BatchQueue(self._generate_batch, max_batch_size)
        self._lock = threading.Lock()
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(0)
        self.model_seconds = 0.0
        """Seconds spent in batches (forward passes and sampling), for benchmarks."""

    async def generate(self, request: GenerationRequest) -> Generation:
        """Queue one request; it joins the next batch."""
        return await self._submit(request, self.max_positions)

    # -- the batch, in a worker thread ---------------------------------------------------------
    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        with self._lock:
            t0 = time.perf_counter()
            try:
                with self._torch.inference_mode():
                    return self._decode(requests)
            finally:
                self.model_seconds += time.perf_counter() - t0

    def _decode(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        torch = self._torch
        dev = self.device
        b = len(requests)
        prompts = [list(r.prompt_ids or ()) for r in requests]
        length = max(len(p) for p in prompts)
        ids = torch.full((b, length), self.pad_id, dtype=torch.long)
        att = torch.zeros((b, length), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, length - len(p) :] = torch.tensor(p, dtype=torch.long)
            att[i, length - len(p) :] = 1
        ids, att = ids.to(dev), att.to(dev)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        limits = [
            min(r.sampling.max_tokens, self.max_positions - len(p))
            for r, p in zip(requests, prompts, strict=True)
        ]
        temps = torch.tensor([r.sampling.temperature for r in requests], device=dev)
        top_ps = torch.tensor([r.sampling.top_p for r in requests], device=dev)
        greedy = temps == 0
        any_top_p = bool((top_ps < 1).any())
        gens: list[Any] | None = None
        if any(r.sampling.seed is not None for r in requests):
            gens = []
            for r in requests:
                g = torch.Generator(device=dev)
                if r.sampling.seed is not None:
                    g.manual_seed(r.sampling.seed)
                else:
                    g.manual_seed(int(torch.randint(0, 2**62, (1,), generator=self._generator)))
                gens.append(g)
        out_ids: list[list[int]] = [[] for _ in range(b)]
        out_lp: list[list[float]] = [[] for _ in range(b)]
        finish: list[FinishReason | None] = [None] * b
        stops = [r.sampling.stop for r in requests]
        eos = self.eos_ids

        out = self.model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True)
        cache = self._cache_of(out)
        logits = out.logits[:, -1, :].float()
        for _step in range(max(limits)):
            logp = torch.log_softmax(logits, dim=-1)
            scaled = logits / torch.where(greedy, torch.ones_like(temps), temps)[:, None]
            probs = torch.softmax(scaled, dim=-1)
            if any_top_p:
                probs = _top_p(torch, probs, top_ps)
            if gens is None:
                sampled = torch.multinomial(probs, 1, generator=self._generator)[:, 0]
            else:
                sampled = torch.cat(
                    [torch.multinomial(probs[i : i + 1], 1, generator=gens[i])[0] for i in range(b)]
                )
            nxt = torch.where(greedy, logits.argmax(-1), sampled)
            chosen_lp = logp.gather(1, nxt[:, None])[:, 0]
            nxt_list = nxt.tolist()
            lp_list = chosen_lp.tolist()
            for i in range(b):
                if finish[i] is not None:
                    continue
                tok = int(nxt_list[i])
                out_ids[i].append(tok)
                out_lp[i].append(float(lp_list[i]))
                if tok in eos or (stops[i] and self._hit_stop(out_ids[i], stops[i])):
                    finish[i] = "stop"
                elif len(out_ids[i]) >= limits[i]:
                    finish[i] = "length"
            if all(f is not None for f in finish):
                break
            att = torch.cat([att, torch.ones((b, 1), dtype=att.dtype, device=dev)], dim=1)
            pos = pos[:, -1:] + 1
            out = self.model(
                input_ids=nxt[:, None],
                attention_mask=att,
                position_ids=pos,
                use_cache=True,
                **{self._cache_arg: cache},
            )
            cache = self._cache_of(out)
            logits = out.logits[:, -1, :].float()
        texts = self.tokenizer.batch_decode(out_ids, skip_special_tokens=True)
        return [
            Generation(
                out_ids[i],
                out_lp[i],
                texts[i],
                finish[i] or "length",
                prompt_tokens=len(prompts[i]),
            )
            for i in range(b)
        ]

    def _cache_of(self, out: Any) -> Any:
        cache = getattr(out, "cache", None)
        return cache if cache is not None else out.past_key_values

    def _hit_stop(self, ids: list[int], stop: Sequence[str]) -> bool:
        # the stop string can only end in the text of the last few tokens
        tail = self.tokenizer.decode(ids[-16:], skip_special_tokens=True)
        return any(s in tail for s in stop)


def _top_p(torch: Any, probs: Any, top_p: Any) -> Any:
    """Zero the tail of each row's distribution beyond its nucleus ``top_p`` (rows with
    ``top_p == 1`` unchanged)."""
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    cum = sorted_p.cumsum(-1)
    drop = (cum - sorted_p) > top_p[:, None]
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(-1, idx, sorted_p)
