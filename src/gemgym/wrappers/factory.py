"""Wrappers by name, as GEM's training scripts select them (``"python_tool,concat_chat"``).

>>> import gemgym
>>> from gemgym.wrappers.factory import get_wrapper_fns
>>> fns = get_wrapper_fns("concat_with_action")
>>> env = gemgym.make("game:GuessTheNumber-v0-easy", wrappers=fns)  # doctest: +SKIP

Every name builds new wrapper (and tool) instances for each env: unlike GEM, no tool is shared
between envs. Names and presets follow GEM:

=========================================  =====================================================
``concat``                                 :class:`~gemgym.wrappers.ConcatHistory`
``concat_with_action``                     ``ConcatHistory(include_action=True)``
``concat_chat``                            :class:`~gemgym.wrappers.ChatHistory` (``tokenizer``)
``python_tool``                            Python tool; rewards 0.05 per call, +0.25 on success, 5 uses
``python_tool_no_int_reward``              Python tool without intermediate rewards
``python_tool_no_int_reward_last_line_error``  the same, keeping only the last line of errors
``search_tool``                            search tool (``$SEARCH_URL``), 0.3 per call, 5 uses
``search_tool_no_int_reward``              search tool without intermediate rewards
``episode_tracking``                       :class:`~gemgym.wrappers.EpisodeStatistics`
``grid``                                   :class:`~gemgym.wrappers.grid.GridObservation`: the
                                           board alone (Minesweeper, Sudoku; not in GEM)
=========================================  =====================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gemgym.core import Env
from gemgym.errors import ConfigError, close_matches
from gemgym.wrappers.common import EpisodeStatistics
from gemgym.wrappers.grid import GridObservation
from gemgym.wrappers.history import ChatHistory, ChatTemplateTokenizer, ConcatHistory

__all__ = ["WRAPPER_NAMES", "get_wrapper_fns"]

WrapperFn = Callable[[Env[Any, Any]], Env[Any, Any]]


def _python(**kw: Any) -> Callable[[ChatTemplateTokenizer | None], WrapperFn]:
    def build(_tok: ChatTemplateTokenizer | None) -> WrapperFn:
        from gemgym.wrappers.tools import python_tool_wrapper

        return python_tool_wrapper(**kw)

    return build


def _search(tool_reward: float) -> Callable[[ChatTemplateTokenizer | None], WrapperFn]:
    def build(_tok: ChatTemplateTokenizer | None) -> WrapperFn:
        def wrap(env: Env[Any, Any]) -> Env[Any, Any]:
            from gemgym.tools.search import SearchTool
            from gemgym.wrappers.tools import ToolEnvWrapper

            tool = SearchTool(topk=3, timeout=5.0)
            return ToolEnvWrapper(env, [tool], max_tool_uses=5, tool_reward=tool_reward)

        return wrap

    return build


def _chat(tok: ChatTemplateTokenizer | None) -> WrapperFn:
    if tok is None:
        raise ConfigError(
            "the 'concat_chat' wrapper needs a tokenizer: get_wrapper_fns(..., tokenizer=tok)"
        )

    def wrap(env: Env[Any, Any]) -> Env[Any, Any]:
        return ChatHistory(env, tokenizer=tok)

    return wrap


_FACTORIES: dict[str, Callable[[ChatTemplateTokenizer | None], WrapperFn]] = {
    "concat": lambda _t: ConcatHistory,
    "concat_with_action": lambda _t: lambda env: ConcatHistory(env, include_action=True),
    "concat_chat": _chat,
    "python_tool": _python(),
    "python_tool_no_int_reward": _python(tool_reward=0.0, tool_success_reward=0.0),
    "python_tool_no_int_reward_last_line_error": _python(
        tool_reward=0.0, tool_success_reward=0.0, keep_error_last_line=True
    ),
    "search_tool": _search(0.3),
    "search_tool_no_int_reward": _search(0.0),
    "episode_tracking": lambda _t: EpisodeStatistics,
    "grid": lambda _t: GridObservation,
}

WRAPPER_NAMES = tuple(_FACTORIES)
"""The names :func:`get_wrapper_fns` accepts."""


def get_wrapper_fns(names: str, tokenizer: ChatTemplateTokenizer | None = None) -> list[WrapperFn]:
    """Wrapper factories for a comma-separated list of names, applied in that order.

    Tool wrappers go before history wrappers (as in GEM), e.g. ``"python_tool,concat_chat"``.
    """
    fns: list[WrapperFn] = []
    for raw in names.split(","):
        name = raw.strip()
        if not name:
            continue
        if name not in _FACTORIES:
            sugg = close_matches(name, _FACTORIES, n=1)
            hint = f" Did you mean {sugg[0]!r}?" if sugg else ""
            raise ConfigError(f"unknown wrapper {name!r}.{hint} Known: {', '.join(WRAPPER_NAMES)}")
        fns.append(_FACTORIES[name](tokenizer))
    return fns
