"""Text <-> token codecs of the reference trainer: a byte-level tokenizer and an HF adapter.

The default :class:`ByteTokenizer` needs no download and keeps the vocabulary tiny (256 bytes and
a few special tokens), so a small randomly initialised model trains fast on CPU. Any Hugging Face
tokenizer works through :class:`HFCodec`.

Episodes are rendered as ``BOS (OBS observation ACT action EOS)*``: the markers delimit what the
env said from what the policy wrote, and ``EOS`` ends each action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["ByteTokenizer", "Codec", "HFCodec"]


class Codec(Protocol):
    """What the trainer needs from a tokenizer."""

    vocab_size: int
    pad_id: int
    eos_id: int
    bos: list[int]
    obs_marker: list[int]
    act_marker: list[int]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` (special tokens dropped)."""
        ...


class ByteTokenizer:
    """UTF-8 bytes as tokens 0-255, then PAD, BOS, EOS, OBS and ACT."""

    PAD, BOS, EOS, OBS, ACT = 256, 257, 258, 259, 260

    def __init__(self) -> None:
        self.vocab_size = 264  # 261 used, rounded up to a multiple of 8
        self.pad_id = self.PAD
        self.eos_id = self.EOS
        self.bos = [self.BOS]
        self.obs_marker = [self.OBS]
        self.act_marker = [self.ACT]

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")


class HFCodec:
    """A Hugging Face tokenizer; the markers are plain text (``"\\nObservation: "``...)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        eos = tokenizer.eos_token_id
        if eos is None:
            eos = tokenizer.sep_token_id
        if eos is None:
            from gemgym.errors import ConfigError

            raise ConfigError("the tokenizer has no eos_token_id (nor sep_token_id) to end actions")
        self.eos_id = int(eos)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_id
        bos = tokenizer.bos_token_id
        self.bos = [int(bos)] if bos is not None else []
        self.obs_marker = self.encode("\nObservation: ")
        self.act_marker = self.encode("\nAction: ")

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))
