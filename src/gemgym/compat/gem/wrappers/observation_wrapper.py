"""``gem.wrappers.observation_wrapper``: GEM's history-concatenating ``ObservationWrapper``.

Not gemgym's :class:`gemgym.ObservationWrapper` (a base class for observation transforms): GEM's
wrapper, with GEM's text exactly. ``include_chat_template=True`` renders the history with the
tokenizer's chat template (tool results as ``tool`` messages); otherwise the observations (and,
with ``include_action``, the actions) are joined with a newline after each that lacks one. As in
GEM, ``info["prefix"]`` is put before and ``info["suffix"]`` (a game's "Enter your next guess.")
after the whole text, also after a chat template's generation prompt; the action kept is
``info["parsed_action"]`` when a tool parsed one. ``apply_chat_template_on_reset=True`` formats
the first observation as a chat prompt.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gemgym.compat.gem.core import EnvWrapper

__all__ = ["ObservationWrapper", "maybe_add_new_line"]


def maybe_add_new_line(text: str) -> str:
    """``text`` with a newline at its end (none added to an empty text)."""
    if text and not text.endswith("\n"):
        return text + "\n"
    return text


class ObservationWrapper(EnvWrapper):
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
        super().__init__(env)
        self.include_action = include_action
        self.include_chat_template = include_chat_template
        self.apply_chat_template_on_reset = apply_chat_template_on_reset
        self.obs_queue: deque[tuple[Any, bool]] = deque(
            maxlen=max_history_length + 1 if max_history_length else None
        )
        self.act_queue: deque[Any] = deque(maxlen=max_history_length)
        self.tokenizer = tokenizer

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.act_queue.clear()
        self.obs_queue.clear()
        obs, info = self.env.reset(seed=seed, **kwargs)
        if self.apply_chat_template_on_reset:
            obs = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": obs}], tokenize=False, add_generation_prompt=True
            )
        self.obs_queue.append((obs, info.get("use_tool", False)))
        return self.observation(info), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        self.act_queue.append(info.get("parsed_action", action))
        self.obs_queue.append((next_obs, info.get("use_tool", False)))
        return self.observation(info), reward, terminated, truncated, info

    def observation(self, info: dict[str, Any]) -> str:
        """The text the model sees now (GEM's rendering)."""
        if self.include_action:
            obs_list = list(self.obs_queue)[:-1]
            act_list = list(self.act_queue)
            if self.include_chat_template:
                messages: list[dict[str, Any]] = []
                for (o, use_tool), a in zip(obs_list, act_list, strict=False):
                    messages.append({"role": "tool" if use_tool else "user", "content": o})
                    messages.append({"role": "assistant", "content": a})
                last, use_tool = self.obs_queue[-1]
                messages.append({"role": "tool" if use_tool else "user", "content": last})
                wrapped = str(
                    self.tokenizer.apply_chat_template(
                        messages, tokenize=False, add_generation_prompt=True
                    )
                )
            else:
                wrapped = ""
                for (o, _), a in zip(obs_list, act_list, strict=False):
                    wrapped += maybe_add_new_line(str(o))
                    wrapped += maybe_add_new_line(str(a))
                wrapped += maybe_add_new_line(str(self.obs_queue[-1][0]))
        else:
            wrapped = "".join(maybe_add_new_line(str(o)) for o, _ in self.obs_queue)
        if "prefix" in info:
            wrapped = str(info["prefix"]) + wrapped
        if "suffix" in info:
            wrapped = wrapped + str(info["suffix"])
        return wrapped
