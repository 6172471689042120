"""Tools as a wrapper: :class:`ToolEnvWrapper` lets the model call tools between answers.

GEM's semantics, kept: the tools' instructions are added to the first observation (after an
``"Available tools:"`` header when there are several); a step whose action calls a tool runs the
tool and does **not** step the inner env (its observation is the tool's output, its reward
``tool_reward`` plus ``tool_success_reward`` or ``tool_error_reward``, and it never ends the
episode by itself); at most ``max_tool_uses`` calls per episode, the last one followed by a note
that no more tools can be used, after which tool calls go to the inner env like any answer.
``info`` carries ``use_tool``, ``parsed_action`` (the action cut after the call),
``tool_type`` (the tool's name), ``tool_use_counter``, ``tool_success_counter`` and, at reset,
the previous episode's counters as ``prev_ep_tool_use_counter``/``prev_ep_tool_success_counter``.

**Tool rewards are paid for solving, not for calling** (``pay_tools="on_success"``, the
default): the tool steps' rewards are held back and added to the reward of the episode's last
step when the episode ends in success (:func:`gemgym.episodes.outcomes.is_success`), and dropped
otherwise; ``info["tool_reward"]`` on that step says what was paid. GEM pays them on each tool
step whatever the episode's outcome (``pay_tools="per_call"``): a policy that calls the tool five
times and never answers then earns more than one that solves the task (``gemgym audit`` flags
it), so use that only to reproduce GEM's numbers. Negative rewards (``tool_error_reward < 0``,
a penalty) are paid at once in both modes. GEM's own wrapper in :mod:`gemgym.compat.gem` keeps
GEM's rule.

A step before ``reset``, or after the episode ended (terminated, truncated or the turn limit),
raises :class:`~gemgym.errors.ResetNeeded` and runs no tool, wherever the wrapper sits in the
stack. :meth:`~ToolEnvWrapper.astep` runs the tools' :meth:`~gemgym.tools.base.Tool.aexecute`
(an MCP call awaits its server without blocking the event loop); ``step`` runs ``execute``.

Bugs of GEM fixed:

* parse tracking with several tools: the first tool that parses the action and runs without
  error wins; if every tool that parsed it failed, the *first* failed call is the result (GEM lost
  it when a later tool did not parse, and sent a tool call to the inner env as an answer);
* turn limits: tool turns count toward the episode's turn limit. ``max_turns`` (all turns: tool
  calls and answers) truncates the episode (``truncated=True``, ``info["turn_limit"]=True``)
  when reached without a terminal outcome. Left at ``None`` it is the inner env's own
  ``max_turns`` for multi-turn envs, and unlimited for single-turn ones (whose tool budget is
  ``max_tool_uses``). ``count_tool_turns=False`` gives GEM's behaviour (tool turns are free).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Self

from gemgym.core import Env, Message, MultimodalObservation, StepResult, Wrapper
from gemgym.episodes.outcomes import is_success
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.tools.base import DEFAULT_MAX_OUTPUT_CHARS, Tool, ToolCall, ToolResult
from gemgym.turns import TurnCounter, check_turn_limit

__all__ = ["MAX_TOOL_USES_MESSAGE", "PayTools", "ToolEnvWrapper", "python_tool_wrapper"]

PayTools = Literal["on_success", "per_call"]
"""When tool rewards are paid (see the module docstring)."""

MAX_TOOL_USES_MESSAGE = (
    "\nReached the maximum number of tool uses. Give your final answer now, without calling a tool."
)


def _add_text(obs: Any, text: str) -> Any:
    """``obs`` with ``text`` appended (strings, multimodal text, the last chat message)."""
    if isinstance(obs, str):
        return f"{obs}\n{text}" if obs else text
    if isinstance(obs, MultimodalObservation):
        return MultimodalObservation(_add_text(obs.text, text), obs.images)
    if isinstance(obs, list) and obs and isinstance(obs[-1], dict):
        msgs = copy.copy(obs)
        last = dict(msgs[-1])
        last["content"] = _add_text(str(last.get("content", "")), text)
        msgs[-1] = Message(role=last["role"], content=last["content"])
        return msgs
    return obs


class ToolEnvWrapper(Wrapper[Any, str, Any, str]):
    """Give the model tools (see the module docstring).

    Args:
        env: a text env.
        tools: the tools, tried in order; each instance belongs to this wrapper.
        max_tool_uses: tool calls allowed per episode.
        tool_reward: reward of every tool call.
        tool_success_reward: added when the call succeeds.
        tool_error_reward: added when the call fails (error, timeout).
        max_turns: limit on all turns of an episode (see the module docstring).
        count_tool_turns: whether tool calls count toward ``max_turns``.
        pay_tools: ``"on_success"`` (tool rewards held back and paid at the end of a
            successful episode) or ``"per_call"`` (GEM's rule: paid on each tool step).
    """

    def __init__(
        self,
        env: Env[Any, str],
        tools: Sequence[Tool],
        max_tool_uses: int = 10,
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_error_reward: float = 0.0,
        max_turns: int | None = None,
        count_tool_turns: bool = True,
        pay_tools: PayTools = "on_success",
    ) -> None:
        super().__init__(env)
        if pay_tools not in ("on_success", "per_call"):
            raise ConfigError(f"pay_tools must be 'on_success' or 'per_call', got {pay_tools!r}")
        tools = list(tools)
        if not tools or not all(isinstance(t, Tool) for t in tools):
            raise ConfigError("tools must be a non-empty sequence of gemgym.tools.Tool instances")
        if len({id(t) for t in tools}) != len(tools):
            raise ConfigError("the same tool instance appears twice in tools")
        if isinstance(max_tool_uses, bool) or not isinstance(max_tool_uses, int):
            raise ConfigError(f"max_tool_uses must be an int, got {max_tool_uses!r}")
        if max_tool_uses < 0:
            raise ConfigError(f"max_tool_uses must be >= 0, got {max_tool_uses}")
        self.tools = tools
        self.blocking_io = any(t.blocking_io for t in tools)
        self.max_tool_uses = max_tool_uses
        self.tool_reward = float(tool_reward)
        self.tool_success_reward = float(tool_success_reward)
        self.tool_error_reward = float(tool_error_reward)
        self.max_turns = check_turn_limit(max_turns)
        self.count_tool_turns = count_tool_turns
        self.pay_tools: PayTools = pay_tools
        self._held = 0.0  # tool rewards held back until the episode ends (on_success)
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        self.turns = TurnCounter()
        """Turns of this episode (tool calls included unless ``count_tool_turns=False``)."""
        self._needs_reset = True

    def warmup(self) -> None:
        """Warm up the inner env and every tool (a closed wrapper starts nothing)."""
        if self.closed:
            return
        self.env.warmup()
        for t in self.tools:
            t.warmup()

    # -- helpers ---------------------------------------------------------------------------
    def instructions(self) -> str:
        """The text added to the first observation."""
        parts = [t.instructions() for t in self.tools]
        if len(parts) == 1:
            return parts[0]
        return "Available tools:\n" + "\n\n".join(parts)

    @property
    def turn_count(self) -> int:
        """Turns played in this episode (:attr:`turns`' count)."""
        return self.turns.count

    def turn_limit(self) -> int | None:
        """The episode's limit on turns, tool calls included (``None``: none here)."""
        if self.max_turns is not None:
            return self.max_turns
        if not self.env.metadata.get("multi_turn", False):
            return None
        try:
            inner = self.env.get_wrapper_attr("max_turns")
        except AttributeError:
            return None
        return inner if isinstance(inner, int) and not isinstance(inner, bool) else None

    def _calls(self, action: str) -> Iterator[tuple[Tool, ToolCall]]:
        if self.tool_use_counter >= self.max_tool_uses:
            return
        for tool in self.tools:
            call = tool.parse(action)
            if call is not None:
                yield tool, call

    def _call(self, action: str) -> tuple[Tool, ToolCall, ToolResult] | None:
        failed: tuple[Tool, ToolCall, ToolResult] | None = None
        for tool, call in self._calls(action):
            result = tool.execute(call)
            if result.ok:
                return tool, call, result
            failed = failed or (tool, call, result)
        return failed

    async def _acall(self, action: str) -> tuple[Tool, ToolCall, ToolResult] | None:
        failed: tuple[Tool, ToolCall, ToolResult] | None = None
        for tool, call in self._calls(action):
            result = await tool.aexecute(call)
            if result.ok:
                return tool, call, result
            failed = failed or (tool, call, result)
        return failed

    def _counters(self) -> dict[str, Any]:
        return {
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
        }

    # -- hooks of Wrapper: step and astep are written once there ------------------------------
    def after_reset(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        info = dict(info)
        info["prev_ep_tool_use_counter"] = self.tool_use_counter
        info["prev_ep_tool_success_counter"] = self.tool_success_counter
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        self._held = 0.0
        self.turns.limit = self.turn_limit()
        self.turns.restart()
        self._needs_reset = False
        for tool in self.tools:
            tool.reset()
        info.update(self._counters(), use_tool=False)
        return _add_text(obs, self.instructions()), info

    def before_step(self, action: str) -> str:
        """Refuse a step before ``reset`` or after the episode ended: no tool runs then."""
        if self._needs_reset:
            raise ResetNeeded(
                "call reset() before step(): the env has not been reset or its episode has ended"
            )
        return action

    def intercept_step(self, action: str) -> StepResult[Any] | None:
        """Run the tool ``action`` calls, if any (the inner env is not stepped then)."""
        outcome = self._call(action)
        return None if outcome is None else self._tool_step(*outcome)

    async def aintercept_step(self, action: str) -> StepResult[Any] | None:
        """:meth:`intercept_step` through the tools' ``aexecute``."""
        outcome = await self._acall(action)
        return None if outcome is None else self._tool_step(*outcome)

    def after_step(self, action: str, result: StepResult[Any]) -> StepResult[Any]:
        obs, reward, terminated, truncated, info = result
        info = dict(info)
        info.update(self._counters(), use_tool=False)
        self.turns.tick()
        return self._limit(obs, reward, terminated, truncated, info)

    def _settle(self, result: StepResult[Any]) -> StepResult[Any]:
        """Pay (or drop) the held tool rewards on the step that ends the episode."""
        obs, reward, terminated, truncated, info = result
        if self.pay_tools != "on_success" or not (terminated or truncated):
            return result
        held, self._held = self._held, 0.0
        paid = held if held and is_success(info, terminated, reward) else 0.0
        if held:
            info = dict(info)
            info["tool_reward"] = paid
        return obs, reward + paid, terminated, truncated, info

    def _tool_step(self, tool: Tool, call: ToolCall, result: ToolResult) -> StepResult[Any]:
        self.tool_use_counter += 1
        if result.ok:
            self.tool_success_counter += 1
        reward = self.tool_reward + (
            self.tool_success_reward if result.ok else self.tool_error_reward
        )
        if self.pay_tools == "on_success" and reward > 0:
            self._held += reward
            reward = 0.0
        obs = result.observation
        if self.tool_use_counter >= self.max_tool_uses:
            obs += MAX_TOOL_USES_MESSAGE
        info = {
            "use_tool": True,
            "parsed_action": call.raw,
            "tool_type": tool.name,
            "tool_ok": result.ok,
            "tool_info": result.info,
            **self._counters(),
        }
        if self.count_tool_turns:
            self.turns.tick()
        return self._limit(obs, reward, False, False, info)

    def _limit(
        self, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> StepResult[Any]:
        result = self._settle(self.turns.cut((obs, reward, terminated, truncated, info)))
        if result[2] or result[3]:
            self._needs_reset = True
        return result

    def spawn(self, same_state: bool = False) -> Self:
        """A copy with its own tools; unless ``same_state``, it must be reset before a step."""
        new = super().spawn(same_state=same_state)
        if not same_state:
            new._needs_reset = True
        return new

    def close(self) -> None:
        for tool in self.tools:
            tool.close()
        super().close()


def python_tool_wrapper(
    *,
    timeout: float = 5.0,
    tool_reward: float = 0.05,
    tool_success_reward: float = 0.25,
    tool_error_reward: float = 0.0,
    max_tool_uses: int = 5,
    persistent: bool = False,
    keep_error_last_line: bool = False,
    backend: str = "auto",
    max_turns: int | None = None,
    count_tool_turns: bool = True,
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    pay_tools: PayTools = "on_success",
) -> Callable[[Env[Any, str]], ToolEnvWrapper]:
    """A wrapper factory giving an env the Python tool (GEM's ``python_tool`` preset defaults).

    Each env it wraps gets its own :class:`~gemgym.tools.python.PythonTool`::

        env = gemgym.make("math:GSM8K", wrappers=[python_tool_wrapper()])

    GEM's ``python_tool_no_int_reward`` is ``tool_reward=0, tool_success_reward=0``, and its
    ``..._last_line_error`` adds ``keep_error_last_line=True``. ``max_output_chars`` cuts the
    tool's output (``None``: no cut). The tool rewards are paid only at the end of a successful
    episode unless ``pay_tools="per_call"`` (GEM's rule; see the module docstring).
    """

    def wrap(env: Env[Any, str]) -> ToolEnvWrapper:
        from gemgym.tools.python import PythonTool

        tool = PythonTool(
            backend=backend,
            timeout=timeout,
            persistent=persistent,
            keep_error_last_line=keep_error_last_line,
            max_output_chars=max_output_chars,
        )
        return ToolEnvWrapper(
            env,
            [tool],
            max_tool_uses=max_tool_uses,
            tool_reward=tool_reward,
            tool_success_reward=tool_success_reward,
            tool_error_reward=tool_error_reward,
            max_turns=max_turns,
            count_tool_turns=count_tool_turns,
            pay_tools=pay_tools,
        )

    return wrap
