"""``gem.wrappers.observation_wrapper``: GEM's history-concatenating ``ObservationWrapper``.

Not gemgym's :class:`gemgym.ObservationWrapper` (a base class for observation transforms):
GEM's name for :class:`~gemgym.wrappers.ConcatHistory` (``include_chat_template=False``) and
:class:`~gemgym.wrappers.ChatHistory` (``include_chat_template=True``, needs ``tokenizer``).
``apply_chat_template_on_reset=True`` formats the first observation as a chat prompt and then
concatenates as ``ConcatHistory`` does.
"""

from __future__ import annotations

from typing import Any

import gemgym
from gemgym.compat.gem._adapt import GemEnv, to_gemgym
from gemgym.wrappers import ChatHistory, ConcatHistory

__all__ = ["ObservationWrapper"]


class _ChatPromptOnReset(gemgym.Wrapper[Any, Any, Any, Any]):
    """Format the reset observation with the tokenizer's chat template."""

    def __init__(self, env: gemgym.Env[Any, Any], tokenizer: Any) -> None:
        super().__init__(env)
        self.tokenizer = tokenizer

    def after_reset(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        prompt = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": obs}], tokenize=False, add_generation_prompt=True
        )
        return prompt, info


class ObservationWrapper(GemEnv):
    """GEM's history wrapper (see the module docstring); ``self.env`` is the wrapped env."""

    def __init__(
        self,
        env: Any,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Any = None,
    ) -> None:
        if include_chat_template and apply_chat_template_on_reset:
            raise ValueError(
                "include_chat_template and apply_chat_template_on_reset cannot both be True"
            )
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise ValueError("a chat template needs a tokenizer: pass tokenizer=")
        if include_chat_template and not include_action:
            raise ValueError("a chat template includes the actions: include_action must be True")
        inner, seed, no_answer, base = to_gemgym(env)
        if apply_chat_template_on_reset:
            inner = _ChatPromptOnReset(inner, tokenizer)
        wrapped: gemgym.Env[Any, Any]
        if include_chat_template:
            wrapped = ChatHistory(inner, tokenizer=tokenizer, max_history_length=max_history_length)
        else:
            wrapped = ConcatHistory(
                inner, include_action=include_action, max_history_length=max_history_length
            )
        super().__init__(wrapped, seed=seed, no_answer_reward=no_answer, base=base)
        self.env = env
