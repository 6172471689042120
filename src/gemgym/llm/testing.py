"""Tiny random-initialised chat models for smoke runs and tests (no download).

:func:`build_tiny_chat_model` writes a directory that ``AutoModelForCausalLM.from_pretrained``
and ``AutoTokenizer.from_pretrained`` load like any Hub checkpoint: a small Qwen2- or
Llama-architecture model with random weights, a byte-level BPE tokenizer trained on the fly with
``tokenizers`` (every string encodes), and a chat template of one of the families of
:data:`TEMPLATE_FAMILIES`:

==========  ===========================================================================
family      chat template (modelled on the real one)
==========  ===========================================================================
``chatml``  ChatML, no default system prompt; tool messages as ``tool`` turns
``qwen2``   Qwen2.5: ChatML with a default system prompt when none is given; tool
            results inside ``<tool_response>`` in a user turn
``qwen3``   Qwen3: as ``qwen2`` without the default system prompt, and past assistant
            turns lose their ``<think>...</think>`` reasoning when re-rendered
``llama3``  Llama 3: ``<|begin_of_text|>``, header tokens, ``<|eot_id|>``, message
            contents trimmed of surrounding whitespace, tool results as ``ipython``
==========  ===========================================================================

``"qwen"`` and ``"llama"`` are accepted as ``qwen2`` and ``llama3``. The same code path runs
with real weights: only the directory differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from gemgym.errors import ConfigError, missing_dependency

__all__ = [
    "TEMPLATE_FAMILIES",
    "TemplateFamily",
    "build_tiny_chat_model",
    "chat_template",
]

TemplateFamily = Literal["chatml", "qwen2", "qwen3", "llama3"]
TEMPLATE_FAMILIES: tuple[str, ...] = ("chatml", "qwen2", "qwen3", "llama3")

_CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Qwen's tool results (consecutive ones share one user turn), the end of the message loop and
# the generation prompt
_QWEN_TOOL_TURNS = (
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_QWEN2 = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first)"
    " or message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    + _QWEN_TOOL_TURNS
)

_QWEN3 = (
    "{%- set ns = namespace(last_query=-1) %}"
    "{%- for message in messages[::-1] %}"
    "{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if message.role == 'user' and ns.last_query == -1 %}"
    "{%- set ns.last_query = index %}{%- endif %}"
    "{%- endfor %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or message.role == 'system' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set content = message.content %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- if loop.index0 > ns.last_query %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + content"
    " + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}" + _QWEN_TOOL_TURNS
)

_LLAMA3 = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{%- set role = 'ipython' if message['role'] == 'tool' else message['role'] %}"
    "{{- '<|start_header_id|>' + role + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

_TEMPLATES = {"chatml": _CHATML, "qwen2": _QWEN2, "qwen3": _QWEN3, "llama3": _LLAMA3}
_ALIASES = {"qwen": "qwen2", "llama": "llama3"}

_CORPUS = [
    "You are playing a game. Think step by step, then give your answer in \\boxed{}.",
    "Guess the number between 1 and 20. Your guess 10 is too low. Guesses left: 3",
    "Sudoku board:\n  1 2 3 | 4 5 6\n  . . 3 | . . 6\nPlace a digit: \\boxed{[1 2 3]}",
    "<think>\nLet me reason about it.\n</think>\n\nThe answer is \\boxed{42}.",
    "<python>\nprint(2 + 2)\n</python>\nTool output: 4\n",
    "What is 17 * 23? Solve the math problem. Final answer: 391.",
    "The quick brown fox jumps over the lazy dog 0123456789 +-*/=()[]{}<>.,;:!?'\"",
]


def chat_template(family: str) -> str:
    """The Jinja chat template of a :data:`TEMPLATE_FAMILIES` family (``"qwen"`` and ``"llama"``
    name ``qwen2`` and ``llama3``)."""
    try:
        return _TEMPLATES[_ALIASES.get(family, family)]
    except KeyError:
        raise ConfigError(
            f"unknown template family {family!r}; choose one of {list(TEMPLATE_FAMILIES)}"
        ) from None


def _special_tokens(family: str) -> tuple[list[str], str, str]:
    """``(special tokens, eos token, bos token)`` of a family."""
    if family == "llama3":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>"]
        specials += ["<|end_header_id|>", "<|eot_id|>", "<|finetune_right_pad_id|>"]
        return specials, "<|eot_id|>", "<|begin_of_text|>"
    return ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "<|im_end|>", ""


def build_tiny_chat_model(
    path: str | Path,
    family: str = "chatml",
    *,
    vocab_size: int = 512,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 4096,
    seed: int = 0,
    corpus: list[str] | None = None,
    dtype: str = "float32",
) -> Path:
    """Write a random-initialised chat model and its tokenizer to ``path``; returns ``path``.

    ``family`` picks the chat template (:data:`TEMPLATE_FAMILIES`) and the architecture
    (``llama3``: ``LlamaForCausalLM``; the others: ``Qwen2ForCausalLM``). The defaults make a
    model of about 40k parameters that generates a token in well under a millisecond on a CPU;
    ``hidden_size=896, num_layers=24, num_heads=14, vocab_size=32000`` is about the size of
    Qwen2.5-0.5B (for GPU benchmarks). ``corpus`` adds text to the tokenizer's training data.
    """
    try:
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import (
            LlamaConfig,
            LlamaForCausalLM,
            PreTrainedTokenizerFast,
            Qwen2Config,
            Qwen2ForCausalLM,
        )
    except ImportError as e:
        raise missing_dependency(e.name or "transformers", "llm") from e
    template = chat_template(family)
    family = _ALIASES.get(family, family)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    specials, eos, bos = _special_tokens(family)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((_CORPUS + list(corpus or [])) * 4, trainer=trainer)
    fast_cls: Any = PreTrainedTokenizerFast
    fast = fast_cls(
        tokenizer_object=tok,
        eos_token=eos,
        pad_token=specials[0] if family != "llama3" else "<|finetune_right_pad_id|>",
        bos_token=bos or None,
        additional_special_tokens=[s for s in specials if s not in (eos, bos)],
    )
    fast.chat_template = template
    fast.save_pretrained(out)

    ids: dict[str, Any] = {
        "eos_token_id": fast.convert_tokens_to_ids(eos),
        "pad_token_id": fast.pad_token_id,
    }
    if bos:
        ids["bos_token_id"] = fast.convert_tokens_to_ids(bos)
    common: dict[str, Any] = {
        "vocab_size": len(fast),
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_heads,
        "intermediate_size": intermediate_size or 2 * hidden_size,
        "max_position_embeddings": max_position_embeddings,
        "tie_word_embeddings": True,
        **ids,
    }
    with torch.random.fork_rng(devices=[]):  # the caller's torch RNG is left as it was
        torch.manual_seed(seed)
        model: Any
        if family == "llama3":
            model = LlamaForCausalLM(LlamaConfig(**common))
        else:
            model = Qwen2ForCausalLM(Qwen2Config(**common))
    model.to(getattr(torch, dtype))
    model.generation_config.eos_token_id = ids["eos_token_id"]
    model.generation_config.pad_token_id = ids["pad_token_id"]
    model.save_pretrained(out)
    return out
