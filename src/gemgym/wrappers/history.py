"""History wrappers: what the model sees each turn, matching GEM's observation modes.

* :class:`ConcatHistory` — all observations so far, joined by newlines (GEM's ``concat``);
  with ``include_action=True`` observations and actions interleave (GEM's
  ``concat_with_action``).
* :class:`ChatHistory` — the episode as chat messages (user observations, assistant actions,
  ``tool`` messages for tool outputs); with a ``tokenizer`` the messages are rendered through its
  chat template into one string (GEM's ``concat_chat``). ``transformers`` is never imported here;
  pass any object with ``apply_chat_template``.

Both append ``info["suffix"]`` of the latest step (the board state or "Enter your guess") and
prepend ``info["prefix"]`` when the env provides them, as GEM does. When an inner wrapper reports
``info["parsed_action"]`` (a tool call trimmed to its code block) that is the action recorded.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from gemgym.core import (
    ChatObservation,
    Env,
    Message,
    MultimodalObservation,
    StepResult,
    Wrapper,
)
from gemgym.errors import ConfigError

__all__ = ["ChatHistory", "ChatTemplateTokenizer", "ConcatHistory"]


class ChatTemplateTokenizer(Protocol):
    """Anything with a Hugging Face style ``apply_chat_template``."""

    def apply_chat_template(
        self, conversation: Any, *, tokenize: bool = ..., add_generation_prompt: bool = ...
    ) -> Any: ...


def _text(obs: Any) -> str:
    if isinstance(obs, str):
        return obs
    if isinstance(obs, MultimodalObservation):
        return obs.text
    if isinstance(obs, list):
        return "\n".join(str(m.get("content", "")) for m in obs if isinstance(m, dict))
    return str(obs)


class _History(Wrapper[Any, str, Any, str]):
    def __init__(self, env: Env[Any, str], max_history_length: int | None) -> None:
        super().__init__(env)
        if max_history_length is not None and max_history_length <= 0:
            raise ConfigError(f"max_history_length must be positive, got {max_history_length}")
        self.max_history_length = max_history_length
        # (kind, text): kind is "obs", "tool" or "action"; one turn = obs + action.
        maxlen = None if max_history_length is None else 2 * max_history_length
        self.history: deque[tuple[str, str]] = deque(maxlen=maxlen)
        self._prefix = ""
        self._suffix = ""

    def _remember_info(self, info: dict[str, Any]) -> None:
        self._prefix = str(info.get("prefix", "") or "")
        self._suffix = str(info.get("suffix", "") or "")

    def after_reset(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        self.history.clear()
        self.history.append(("obs", _text(obs)))
        self._remember_info(info)
        return self.render(), info

    def after_step(self, action: str, result: StepResult[Any]) -> StepResult[Any]:
        obs, reward, terminated, truncated, info = result
        recorded = info.get("parsed_action", action)
        self.history.append(("action", str(recorded)))
        self.history.append(("tool" if info.get("use_tool") else "obs", _text(obs)))
        self._remember_info(info)
        return self.render(), reward, terminated, truncated, info

    def render(self) -> Any:
        raise NotImplementedError


class ConcatHistory(_History):
    """Observation = every observation so far (and optionally every action), newline-joined.

    Args:
        env: a text env.
        include_action: interleave the agent's actions with the observations.
        max_history_length: keep only the last N turns.
        separator: string placed between entries.
    """

    def __init__(
        self,
        env: Env[Any, str],
        include_action: bool = False,
        max_history_length: int | None = None,
        separator: str = "\n",
    ) -> None:
        super().__init__(env, max_history_length)
        self.include_action = include_action
        self.separator = separator

    def render(self) -> str:
        parts = [t for kind, t in self.history if self.include_action or kind != "action"]
        body = self.separator.join(parts)
        if self._prefix:
            body = self._prefix + self.separator + body
        if self._suffix:
            body = body + self.separator + self._suffix
        return body


class ChatHistory(_History):
    """Observation = the episode as chat messages, or a string rendered by a chat template.

    Args:
        env: a text env.
        tokenizer: when given, messages are rendered with ``tokenizer.apply_chat_template(...,
            tokenize=False, add_generation_prompt=True)`` and the observation is a string.
        system_prompt: an optional system message put first.
        max_history_length: keep only the last N turns (the first observation always stays).
    """

    def __init__(
        self,
        env: Env[Any, str],
        tokenizer: ChatTemplateTokenizer | None = None,
        system_prompt: str | None = None,
        max_history_length: int | None = None,
    ) -> None:
        super().__init__(env, None)
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.max_turns_kept = max_history_length
        if max_history_length is not None and max_history_length <= 0:
            raise ConfigError(f"max_history_length must be positive, got {max_history_length}")

    def messages(self) -> ChatObservation:
        """The current conversation as a list of messages."""
        entries = list(self.history)
        if self.max_turns_kept is not None and len(entries) > 1:
            first, rest = entries[:1], entries[1:]
            entries = first + rest[-2 * self.max_turns_kept :]
        msgs: ChatObservation = []
        if self.system_prompt:
            msgs.append(Message(role="system", content=self.system_prompt))
        for i, (kind, text) in enumerate(entries):
            last = i == len(entries) - 1
            if kind == "obs" and i == 0 and self._prefix:
                text = f"{self._prefix}\n{text}"
            if kind != "action" and last and self._suffix:
                text = f"{text}\n{self._suffix}"
            role = {"obs": "user", "tool": "tool", "action": "assistant"}[kind]
            msgs.append(Message(role=role, content=text))  # type: ignore[typeddict-item]
        return msgs

    def render(self) -> ChatObservation | str:
        msgs = self.messages()
        if self.tokenizer is None:
            return msgs
        return str(
            self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        )
