"""Text <-> token codecs of the reference trainer: a byte-level tokenizer and an HF adapter.

The default :class:`ByteTokenizer` needs no download and keeps the vocabulary tiny (256 bytes and
a few special tokens), so a small randomly initialised model trains fast on CPU. Any Hugging Face
tokenizer works through :class:`HFCodec`.

Episodes are rendered as ``BOS (OBS observation ACT action EOS)*``: the markers delimit what the
env said from what the policy wrote, and ``EOS`` ends each action.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["ByteTokenizer", "Codec", "HFCodec", "WordTokenizer", "make_codec"]


class Codec(Protocol):
    """What the trainer needs from a tokenizer."""

    vocab_size: int
    action_vocab_size: int | None
    """Actions are written with ids below this (``None``: the whole vocabulary)."""
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

    def encode_observation(self, text: str) -> list[int]:
        """Token ids of an observation (input only: it is never decoded)."""
        ...


class ByteTokenizer:
    """UTF-8 bytes as tokens 0-255, then PAD, BOS, EOS, OBS and ACT."""

    PAD, BOS, EOS, OBS, ACT = 256, 257, 258, 259, 260

    def __init__(self) -> None:
        self.vocab_size = 264  # 261 used, rounded up to a multiple of 8
        self.action_vocab_size: int | None = 264
        self.pad_id = self.PAD
        self.eos_id = self.EOS
        self.bos = [self.BOS]
        self.obs_marker = [self.OBS]
        self.act_marker = [self.ACT]

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")

    def encode_observation(self, text: str) -> list[int]:
        return self.encode(text)


_WORD = re.compile(r"[A-Za-z]+|\S")


class WordTokenizer(ByteTokenizer):
    """Bytes for actions, hashed words for observations: about 3x shorter episodes.

    Actions are written byte by byte exactly as with :class:`ByteTokenizer` (the policy samples
    them, and the losses normalise them, over the 264 byte and special ids only). Observations, which
    the policy only reads, are split into words (runs of ASCII letters, each hashed with CRC-32
    into one of ``buckets`` ids after the byte range) and single non-space characters (digits
    and punctuation stay bytes, so a number reads the same in an observation as in an action);
    whitespace is dropped. ``"is higher than 7."`` is 5 tokens instead of 17 bytes. Distinct
    words may share a bucket; with the default 1,024 buckets that is rare for a game's
    vocabulary. Needs no download, like the byte tokenizer.
    """

    def __init__(self, buckets: int = 1024) -> None:
        super().__init__()
        self.buckets = buckets
        self.word_base = self.vocab_size  # word ids come after the byte and special ids
        self.vocab_size = self.word_base + buckets

    def encode_observation(self, text: str) -> list[int]:
        out: list[int] = []
        for tok in _WORD.findall(text):
            if len(tok) > 1 or tok.isalpha():
                out.append(self.word_base + zlib.crc32(tok.encode("utf-8")) % self.buckets)
            else:
                out.extend(tok.encode("utf-8"))
        return out


class HFCodec:
    """A Hugging Face tokenizer; the markers are plain text (``"\\nObservation: "``...)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        self.action_vocab_size: int | None = None
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

    def encode_observation(self, text: str) -> list[int]:
        return self.encode(text)


TOKENIZERS = ("bytes", "words")
"""Names of the tokenizers that need no download (for :func:`make_codec`)."""


def make_codec(name: str) -> ByteTokenizer:
    """``"bytes"`` (:class:`ByteTokenizer`) or ``"words"`` (:class:`WordTokenizer`)."""
    if name == "bytes":
        return ByteTokenizer()
    if name == "words":
        return WordTokenizer()
    from gemgym.errors import ConfigError

    raise ConfigError(f"tokenizer must be one of {list(TOKENIZERS)}, got {name!r}")
