"""A small GPT in plain torch: the reference trainer's default policy model.

The architecture is GPT-2's (learned positions, pre-norm blocks, GELU MLP, tied input and
output embeddings), so that the default model needs no ``transformers``: with the same weights
it computes what ``GPT2LMHeadModel`` computes (tested). It is no faster at the default size and
byte-level contexts (the arithmetic dominates; see ``docs/rl.md``). It exposes the small part of the Hugging Face interface that
:class:`~gemgym.rl.trainer.policy.LMPolicy` and the losses use (``input_ids``,
``attention_mask``, ``position_ids``, ``past_key_values``, ``logits_to_keep``,
``get_output_embeddings``, ``base_model_prefix``), so the trainer treats both alike; any
Hugging Face model path still works through ``--model``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gemgym.errors import missing_dependency

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError as e:
    raise missing_dependency(e.name or "torch", "train") from e

__all__ = ["KVBuffer", "TinyGPT", "TinyGPTConfig"]

Cache = list[tuple[torch.Tensor, torch.Tensor]]


class KVBuffer:
    """Every layer's keys and values in buffers allocated once, for decoding token by token.

    Pass it as ``past_key_values``: each forward call writes its new keys and values in place
    after the ones already held and attends to views of the buffers, where a plain cache
    (a list of ``(keys, values)``) is concatenated into new tensors at every call, copying
    the whole cache once per generated token. ``out.past_key_values`` is this same object,
    advanced by the call's tokens. Iterating it gives each layer's ``(keys, values)`` held so
    far, ``(batch, heads, length, head_dim)``, as a plain cache does.
    """

    def __init__(self, buffers: Cache, length: int) -> None:
        """A buffer over ``buffers`` (per layer, ``(batch, heads, capacity, head_dim)`` keys and
        values, not copied), whose first ``length`` positions are held."""
        self.layers: Cache = list(buffers)
        self.length = length
        self.capacity = int(buffers[0][0].shape[2])
        if self.capacity < length:
            raise ValueError(f"capacity {self.capacity} is under the {length} cached positions")

    @classmethod
    def from_cache(cls, past: Cache, capacity: int) -> KVBuffer:
        """Buffers of ``capacity`` positions that begin with ``past`` (a plain cache)."""
        length = int(past[0][0].shape[2])
        out = cls([(_room(k, capacity), _room(v, capacity)) for k, v in past], length)
        for (kb, vb), (k, v) in zip(out.layers, past, strict=True):
            kb[:, :, :length] = k
            vb[:, :, :length] = v
        return out

    def extend(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``layer``'s new keys and values after the held ones; the views of all of them
        (the length advances once every layer has been written: :meth:`advance`)."""
        n, t = self.length, k.shape[2]
        if n + t > self.capacity:
            raise ValueError(f"the buffer holds {self.capacity} positions, {n + t} were asked for")
        kb, vb = self.layers[layer]
        kb[:, :, n : n + t] = k
        vb[:, :, n : n + t] = v
        return kb[:, :, : n + t], vb[:, :, : n + t]

    def advance(self, t: int) -> None:
        """Count the ``t`` positions every layer has just written as held."""
        self.length += t

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        kb, vb = self.layers[layer]
        return kb[:, :, : self.length], vb[:, :, : self.length]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return (self[i] for i in range(len(self.layers)))


def _room(x: torch.Tensor, capacity: int) -> torch.Tensor:
    """An uninitialised ``(batch, heads, capacity, head_dim)`` tensor like ``x``."""
    return x.new_empty((x.shape[0], x.shape[1], capacity, x.shape[3]))


@dataclass
class TinyGPTConfig:
    """Sizes of a :class:`TinyGPT`."""

    vocab_size: int
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_positions: int = 512


class _Out(dict[str, Any]):
    """A model output readable as ``out.logits`` and ``out["past_key_values"]``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Block(nn.Module):
    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.fc_out = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        past: tuple[torch.Tensor, torch.Tensor] | tuple[KVBuffer, int] | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``past``: a layer's cached ``(keys, values)``, or ``(buffer, layer)`` to write the
        new ones into a :class:`KVBuffer`."""
        b, t, c = x.shape
        h = self.n_head
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q = q.view(b, t, h, c // h).transpose(1, 2)
        k = k.view(b, t, h, c // h).transpose(1, 2)
        v = v.view(b, t, h, c // h).transpose(1, 2)
        if past is not None:
            if isinstance(past[0], KVBuffer):
                k, v = past[0].extend(int(past[1]), k, v)
            else:
                k = torch.cat([past[0], k], dim=2)
                v = torch.cat([past[1], v], dim=2)
        if mask is None:  # training: right padding needs only the causal mask
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        x = x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))
        return x, (k, v)


class _Trunk(nn.Module):
    """Embeddings, blocks and the final norm: hidden states without the output layer."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.h = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: Cache | KVBuffer | None = None,
    ) -> _Out:
        b, t = input_ids.shape
        buffer = past_key_values if isinstance(past_key_values, KVBuffer) else None
        if buffer is not None:
            past_len = buffer.length
        else:
            past_len = 0 if not past_key_values else past_key_values[0][0].shape[2]
        if position_ids is None:
            position_ids = torch.arange(past_len, past_len + t, device=input_ids.device)[None, :]
        x = self.wte(input_ids) + self.wpe(position_ids)
        mask = None
        if attention_mask is not None:  # (b, past + t) key mask, 1 = real token
            mask = attention_mask[:, None, None, :].bool()
            if t > 1:  # a prompt: causal too (one new token may see every key)
                causal = torch.ones(t, past_len + t, dtype=torch.bool, device=x.device)
                mask = mask & causal.tril(past_len)[None, None]
                # a fully masked row (a pad query) would give NaN: let every query see itself
                idx = torch.arange(t, device=x.device)
                mask[:, :, idx, past_len + idx] = True
        elif past_len:
            raise ValueError("decoding with a cache needs the attention_mask")
        cache: Cache = []
        for i, block in enumerate(self.h):
            if buffer is not None:
                x, kv = block(x, mask, (buffer, i))
            else:
                x, kv = block(x, mask, past_key_values[i] if past_key_values else None)
            cache.append(kv)
        if buffer is None:
            return _Out(last_hidden_state=self.ln_f(x), past_key_values=cache)
        buffer.advance(t)
        return _Out(last_hidden_state=self.ln_f(x), past_key_values=buffer)

    def forward_shared_prefix(self, input_ids: torch.Tensor, split: int) -> torch.Tensor:
        """The hidden states of positions ``split ..`` of a right-padded batch whose rows all
        begin with the same ``split`` tokens: that prefix is computed once, not once per row.

        Equal (up to float rounding) to ``forward(input_ids).last_hidden_state[:, split:]``, and
        so are the gradients (the prefix's keys and values are shared by broadcasting, whose
        backward sums the rows' contributions). Episodes of one env often start with the same
        rules text: a third or more of each sequence for GuessTheNumber.
        """
        b, t = input_ids.shape
        dev = input_ids.device
        pos = torch.arange(t, device=dev)
        xp = self.wte(input_ids[:1, :split]) + self.wpe(pos[:split])[None]
        x = self.wte(input_ids[:, split:]) + self.wpe(pos[split:])[None]
        # a suffix query at position split + q sees every prefix key and suffix keys <= q
        mask = torch.ones(t - split, t, dtype=torch.bool, device=dev).tril(split)[None, None]
        for block in self.h:
            xp_next, (k, v) = block(xp, None, None)
            shape = (b, k.shape[1], k.shape[2], k.shape[3])
            x, _ = block(x, mask, (k.expand(shape), v.expand(shape)))
            xp = xp_next
        out: torch.Tensor = self.ln_f(x)
        return out


class TinyGPT(nn.Module):
    """GPT-2's architecture in a few lines of torch; see the module docstring."""

    base_model_prefix = "transformer"

    def __init__(self, config: TinyGPTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = _Trunk(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual outputs
            if name.endswith(("proj.weight", "fc_out.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def get_output_embeddings(self) -> nn.Module:
        """The output layer (tied to the token embeddings)."""
        return self.lm_head

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: Cache | KVBuffer | None = None,
        use_cache: bool = False,
        logits_to_keep: int = 0,
    ) -> _Out:
        """``out.logits`` (the last ``logits_to_keep`` positions, or all with 0) and, with
        ``use_cache``, ``out.past_key_values`` to pass to the next call."""
        out = self.transformer(input_ids, attention_mask, position_ids, past_key_values)
        hidden = out.last_hidden_state
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:, :]
        return _Out(
            logits=self.lm_head(hidden),
            past_key_values=out.past_key_values if use_cache else None,
        )
