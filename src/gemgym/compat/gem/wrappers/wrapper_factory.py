"""``gem.wrappers.wrapper_factory``: GEM's ``WRAPPER_FACTORY`` and ``get_wrapper_fns``.

The same names and presets as GEM. Unlike GEM, each tool wrapper gets its own tool instance
(GEM built one tool at import and shared it between every env) and importing this module starts
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from gemgym.compat.gem.tools.python_code_tool import PythonCodeTool
from gemgym.compat.gem.tools.search_tool import SearchTool
from gemgym.compat.gem.tools.tool_env_wrapper import ToolEnvWrapper
from gemgym.compat.gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gemgym.compat.gem.wrappers.observation_wrapper import ObservationWrapper

__all__ = ["TOKENIZER_REQUIRED", "WRAPPER_FACTORY", "get_wrapper_fns"]


def _tool_wrapper(
    make_tool: Callable[[], Any], tool_reward: float, tool_success_reward: float
) -> Callable[..., Any]:
    def wrap(env: Any, **kwargs: Any) -> ToolEnvWrapper:
        options: dict[str, Any] = {
            "tool_reward": tool_reward,
            "tool_success_reward": tool_success_reward,
            "max_tool_uses": 5,
        }
        options.update(kwargs)
        return ToolEnvWrapper(env, tools=[make_tool()], **options)

    return wrap


WRAPPER_FACTORY: dict[str, Callable[..., Any]] = {
    "python_tool": _tool_wrapper(lambda: PythonCodeTool(timeout=5), 0.05, 0.25),
    "python_tool_no_int_reward": _tool_wrapper(lambda: PythonCodeTool(timeout=5), 0.0, 0.0),
    "python_tool_no_int_reward_last_line_error": _tool_wrapper(
        lambda: PythonCodeTool(timeout=5, keep_error_last_line=True), 0.0, 0.0
    ),
    "search_tool": _tool_wrapper(lambda: SearchTool(topk=3, timeout=5), 0.3, 0.0),
    "search_tool_no_int_reward": _tool_wrapper(lambda: SearchTool(topk=3, timeout=5), 0.0, 0.0),
    "concat": partial(ObservationWrapper, include_action=False, include_chat_template=False),
    "concat_chat": partial(ObservationWrapper, include_action=True, include_chat_template=True),
    "concat_with_action": partial(
        ObservationWrapper, include_action=True, include_chat_template=False
    ),
    "concat_chat_on_reset": partial(
        ObservationWrapper,
        include_action=True,
        include_chat_template=False,
        apply_chat_template_on_reset=True,
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}
"""Wrapper constructors by GEM's names."""

TOKENIZER_REQUIRED = ["concat_chat", "concat_chat_on_reset"]
"""The names that need ``tokenizer=``."""


def get_wrapper_fns(wrappers: str, tokenizer: Any = None) -> list[Callable[..., Any]]:
    """The wrapper constructors for a comma-separated list of names, in order."""
    fns: list[Callable[..., Any]] = []
    for raw in (wrappers or "").split(","):
        name = raw.strip()
        if not name:
            continue
        if name not in WRAPPER_FACTORY:
            from gemgym.errors import close_matches

            hint = close_matches(name, WRAPPER_FACTORY, n=1)
            extra = f" Did you mean {hint[0]!r}?" if hint else ""
            raise KeyError(f"unknown wrapper {name!r}.{extra} Known: {', '.join(WRAPPER_FACTORY)}")
        fn = WRAPPER_FACTORY[name]
        if name in TOKENIZER_REQUIRED and tokenizer is not None:
            fn = partial(fn, tokenizer=tokenizer)
        fns.append(fn)
    return fns
