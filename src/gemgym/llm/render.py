"""Chat rendering that never re-tokenises sampled text.

A multi-turn episode is rendered incrementally with the tokenizer's own chat template:

1. the prompt: ``apply_chat_template([system?, user: first observation],
   add_generation_prompt=True)``;
2. each turn: the model's sampled ids, appended verbatim;
3. then the template's turn end (``<|im_end|>\\n`` for ChatML; only ``\\n`` when the model
   sampled ``<|im_end|>`` itself), the next observation as a user message (a ``tool`` message
   after a tool call) and the generation prompt, all rendered by the template.

Step 3's text is found by rendering a fixed probe conversation (``[system?, user, assistant]``)
with and without the new message and taking the difference, so it works with any template whose
rendering of a conversation is a prefix of the rendering of its continuation (every template
family measured, see ``docs/llm.md``). Only env and template text is ever tokenised.

The ids a model saw this way can differ from ``apply_chat_template(whole conversation)``:
templates that drop past reasoning (Qwen3 drops ``<think>...</think>`` of earlier turns), that
trim message contents (Llama 3), and any sampled text whose ids are not the tokenizer's own
encoding of that text (common with sampled ids: BPE has many encodings of one string).
:meth:`ChatRenderer.rerender` gives the trainer the other option: the whole conversation
re-rendered by the template, with the assistant spans as the loss mask, recorded as
``rendering="rerendered"`` (the sampled log-probs then no longer apply and are dropped);
:func:`compare_with_full_render` measures where the two differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gemgym.errors import ConfigError
from gemgym.llm.record import ObservationRole, TokenEpisode, TokenTurn

__all__ = ["ChatRenderer", "RenderDiff", "compare_with_full_render"]

_PROBE_USER = "u"
_PROBE_ASSISTANT = "a"


class ChatRenderer:
    """Renders an episode's context tokens with a Hugging Face tokenizer's chat template.

    Args:
        tokenizer: a ``transformers`` tokenizer with a chat template.
        system_prompt: a system message put before the first observation (``None``: none, the
            template may still add its default).
        tool_role: the role tool outputs are rendered as (``"tool"``; ``"user"`` for templates
            without a tool role).
        chat_template_kwargs: extra variables for the template (e.g. ``enable_thinking``).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        system_prompt: str | None = None,
        tool_role: ObservationRole = "tool",
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(
                "the tokenizer has no chat template; load an instruct/chat model's tokenizer or "
                "set tokenizer.chat_template"
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.tool_role = tool_role
        self.template_kwargs = dict(chat_template_kwargs or {})
        self._head: list[dict[str, Any]] = (
            [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
        )
        probe = [
            *self._head,
            {"role": "user", "content": _PROBE_USER},
            {"role": "assistant", "content": _PROBE_ASSISTANT},
        ]
        self._probe = probe
        self._probe_text = self.render_text(probe, generation_prompt=False)
        before = self.render_text(probe[:-1], generation_prompt=True)
        if not self._probe_text.startswith(before + _PROBE_ASSISTANT):
            raise ConfigError(
                "this chat template does not render an assistant message as the generation "
                "prompt followed by its content; incremental rendering needs that"
            )
        self.generation_prompt = before[len(self.render_text(probe[:-1], False)) :]
        # what the template puts after an assistant message's content
        self.turn_end = self._probe_text[len(before) + len(_PROBE_ASSISTANT) :]
        self._stop_texts: dict[int, str] = {}

    # -- template access ---------------------------------------------------------------------
    def render_text(self, messages: Sequence[Mapping[str, Any]], generation_prompt: bool) -> str:
        """The template's text for ``messages``."""
        text = self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=generation_prompt,
            **self.template_kwargs,
        )
        return str(text)

    def encode(self, text: str) -> list[int]:
        """Token ids of env or template text (never of sampled text)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- incremental rendering ---------------------------------------------------------------
    def prompt(self, observation: str) -> tuple[list[int], list[dict[str, Any]]]:
        """``(ids, messages)`` of the first turn: system prompt, observation, generation prompt."""
        messages = [*self._head, {"role": "user", "content": observation}]
        return self.encode(self.render_text(messages, generation_prompt=True)), messages

    def turn_end_text(self, action_ids: Sequence[int]) -> str:
        """What closes an assistant turn after ``action_ids``: the template's turn end, less the
        part the model sampled itself (e.g. ``<|im_end|>``)."""
        if action_ids:
            last = int(action_ids[-1])
            tail = self._stop_texts.get(last)
            if tail is None:
                tail = self.tokenizer.decode([last], skip_special_tokens=False)
                self._stop_texts[last] = tail
            if tail and self.turn_end.startswith(tail) and self._is_special(last):
                return self.turn_end[len(tail) :]
        return self.turn_end

    def _is_special(self, token_id: int) -> bool:
        return token_id in set(getattr(self.tokenizer, "all_special_ids", ()))

    def observation_text(self, observation: str, role: ObservationRole = "user") -> str:
        """The template's text of a new observation message plus the generation prompt."""
        msg = {"role": self.tool_role if role == "tool" else "user", "content": observation}
        full = self.render_text([*self._probe, msg], generation_prompt=True)
        if not full.startswith(self._probe_text):
            raise ConfigError(
                "this chat template re-renders earlier messages when one is added; it cannot be "
                "rendered incrementally (pass a template whose renderings are prefixes)"
            )
        return full[len(self._probe_text) :]

    def continuation(
        self, action_ids: Sequence[int], observation: str | None, role: ObservationRole = "user"
    ) -> list[int]:
        """Context ids after a sampled action: turn end, then (unless ``observation`` is
        ``None``) the observation message and the generation prompt."""
        text = self.turn_end_text(action_ids)
        if observation is not None:
            text += self.observation_text(observation, role)
        return self.encode(text) if text else []

    # -- the other option: re-render for training ---------------------------------------------
    def rerender(self, episode: TokenEpisode) -> TokenEpisode:
        """The episode re-rendered by ``apply_chat_template(whole conversation)``.

        The loss mask covers each assistant message's content and the end-of-turn token that
        follows it; ``logprobs`` are dropped (the ids are no longer the sampled ones) and the
        record says ``rendering="rerendered"``.
        """
        messages = episode.messages
        text = self.render_text(messages, generation_prompt=False)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids: list[int] = list(enc["input_ids"])
        offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
        spans = self._assistant_spans(text, sum(m["role"] == "assistant" for m in messages))
        if len(spans) != len(episode.turns):
            raise ConfigError(
                f"found {len(spans)} assistant messages in the re-rendered text for "
                f"{len(episode.turns)} turns"
            )
        owner = [-1] * len(ids)
        for k, (a, b) in enumerate(spans):
            for j, (s, e) in enumerate(offsets):
                if s >= a and e <= b and e > s:
                    owner[j] = k
        first = [owner.index(k) if k in owner else None for k in range(len(spans))]
        turns: list[TokenTurn] = []
        cut = next((f for f in first if f is not None), len(ids))
        prompt_ids = ids[:cut]
        pos = cut
        for k, t in enumerate(episode.turns):
            action = [ids[j] for j in range(pos, len(ids)) if owner[j] == k]
            end = pos + len(action)
            nxt = next((f for f in first[k + 1 :] if f is not None), len(ids))
            turns.append(replace(t, action_ids=action, logprobs=None, next_ids=ids[end:nxt]))
            pos = nxt
        return replace(episode, prompt_ids=prompt_ids, turns=turns, rendering="rerendered")

    def _assistant_spans(self, text: str, count: int) -> list[tuple[int, int]]:
        """Character spans of the assistant contents (and the end-of-turn token after each)."""
        gp, end = self.generation_prompt, self.turn_end
        eos = self.tokenizer.eos_token or ""
        keep = len(eos) if eos and end.startswith(eos) else 0
        spans: list[tuple[int, int]] = []
        i = 0
        while len(spans) < count:
            a = text.find(gp, i)
            if a < 0:
                break
            a += len(gp)
            b = text.find(end, a) if end else len(text)
            if b < 0:
                b = len(text)
            spans.append((a, b + keep))
            i = b + len(end)
        return spans


@dataclass(frozen=True, slots=True)
class RenderDiff:
    """Where an episode's incremental ids differ from the template's whole-conversation ids.

    Attributes:
        equal: the two id sequences are identical.
        first_mismatch: index of the first differing token (``None`` when equal).
        incremental_tokens, full_tokens: the two lengths.
        changed_action_tokens: sampled tokens whose re-rendered counterpart differs (counted
            per turn as the size of the symmetric difference of the two multisets of ids).
        changed_turns: turns whose action ids differ.
    """

    equal: bool
    first_mismatch: int | None
    incremental_tokens: int
    full_tokens: int
    changed_action_tokens: int
    changed_turns: int


def compare_with_full_render(episode: TokenEpisode, renderer: ChatRenderer) -> RenderDiff:
    """Compare an incrementally rendered episode with its whole-conversation rendering."""
    from collections import Counter

    inc = episode.input_ids
    full = renderer.rerender(episode)
    fid = full.input_ids
    first = next((i for i, (x, y) in enumerate(zip(inc, fid, strict=False)) if x != y), None)
    if first is None and len(inc) != len(fid):
        first = min(len(inc), len(fid))
    changed = 0
    turns = 0
    for a, b in zip(episode.turns, full.turns, strict=True):
        if a.action_ids != b.action_ids:
            turns += 1
            ca, cb = Counter(a.action_ids), Counter(b.action_ids)
            changed += sum(((ca - cb) + (cb - ca)).values())
    return RenderDiff(first is None, first, len(inc), len(fid), changed, turns)
