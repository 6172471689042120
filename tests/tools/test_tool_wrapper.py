"""ToolEnvWrapper: GEM's semantics, its multi-tool and turn-limit bugs fixed."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

import gemgym
from gemgym.core import Env
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.testing import check_env
from gemgym.tools.base import Tool, ToolCall, ToolResult
from gemgym.wrappers.history import ChatHistory
from gemgym.wrappers.tools import MAX_TOOL_USES_MESSAGE, ToolEnvWrapper, python_tool_wrapper


class CalcTool(Tool):
    """Evaluates ``<calc>a+b</calc>``; anything but two integers added is an error."""

    name = "calc"

    def __init__(self) -> None:
        self.calls = 0
        self.resets = 0

    def instructions(self) -> str:
        return "Add numbers with <calc>a+b</calc>."

    def parse(self, action: str) -> ToolCall | None:
        m = re.search(r"<calc>(.*?)</calc>", action)
        return None if m is None else ToolCall(self.name, m.group(1), action[: m.end()])

    def execute(self, call: ToolCall) -> ToolResult:
        self.calls += 1
        m = re.fullmatch(r"(\d+)\+(\d+)", call.arguments)
        if m is None:
            return ToolResult(f"calc error: cannot add {call.arguments!r}", ok=False)
        return ToolResult(str(int(m.group(1)) + int(m.group(2))))

    def reset(self) -> None:
        self.resets += 1


class EchoTool(Tool):
    """Parses anything containing ``<calc>`` too, and always succeeds."""

    name = "echo"

    def instructions(self) -> str:
        return "Echo with <echo>text</echo>."

    def parse(self, action: str) -> ToolCall | None:
        m = re.search(r"<(?:echo|calc)>(.*?)</(?:echo|calc)>", action)
        return None if m is None else ToolCall(self.name, m.group(1), action[: m.end()])

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(f"echo: {call.arguments}")


def _game(**kwargs: Any) -> Env[Any, str]:
    return gemgym.make("game:GuessTheNumber-v0-hard", **kwargs)


def _wrapped(**kwargs: Any) -> tuple[ToolEnvWrapper, CalcTool]:
    tool = CalcTool()
    return ToolEnvWrapper(_game(), [tool], **kwargs), tool


def test_reset_adds_instructions_and_counters() -> None:
    env, tool = _wrapped()
    obs, info = env.reset(seed=0)
    assert obs.endswith("\nAdd numbers with <calc>a+b</calc>.")
    assert "Guess The Number" in obs
    assert info["use_tool"] is False
    assert info["tool_use_counter"] == info["tool_success_counter"] == 0
    assert info["suffix"] == "Enter your next guess."  # the inner env's info is kept
    assert tool.resets == 1
    two = ToolEnvWrapper(_game(), [CalcTool(), EchoTool()])
    obs, _ = two.reset(seed=0)
    assert "Available tools:\nAdd numbers" in obs and obs.endswith("Echo with <echo>text</echo>.")


def test_a_tool_call_does_not_step_the_inner_env() -> None:
    env, _ = _wrapped(
        tool_reward=0.05, tool_success_reward=0.25, tool_error_reward=-0.5, pay_tools="per_call"
    )
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("Let me add <calc>2+3</calc> trailing")
    assert obs == "5"
    assert reward == pytest.approx(0.30)
    assert (terminated, truncated) == (False, False)
    assert info == {
        "use_tool": True,
        "parsed_action": "Let me add <calc>2+3</calc>",
        "tool_type": "calc",
        "tool_ok": True,
        "tool_info": {},
        "tool_use_counter": 1,
        "tool_success_counter": 1,
    }
    assert env.unwrapped.turn_count == 0  # type: ignore[attr-defined]
    obs, reward, _, _, info = env.step("<calc>two+3</calc>")
    assert obs.startswith("calc error") and reward == pytest.approx(0.05 - 0.5)
    assert info["tool_use_counter"] == 2 and info["tool_success_counter"] == 1
    obs, reward, _, _, info = env.step(r"\boxed{25}")
    assert info["use_tool"] is False and "guessed" in obs and "25" in obs
    assert env.unwrapped.turn_count == 1  # type: ignore[attr-defined]
    assert info["tool_use_counter"] == 2


def test_max_tool_uses_message_then_actions_go_to_the_env() -> None:
    env, tool = _wrapped(max_tool_uses=2)
    env.reset(seed=0)
    assert env.step("<calc>1+1</calc>")[0] == "2"
    obs = env.step("<calc>1+2</calc>")[0]
    assert obs == "3" + MAX_TOOL_USES_MESSAGE
    obs, reward, terminated, _, info = env.step("<calc>1+3</calc>")  # no boxed guess
    assert info["use_tool"] is False and terminated and reward == -0.1
    assert tool.calls == 2


def test_counters_of_the_previous_episode() -> None:
    env, _ = _wrapped()
    env.reset(seed=0)
    env.step("<calc>1+1</calc>")
    env.step("<calc>x</calc>")
    _, info = env.reset(seed=1)
    assert info["prev_ep_tool_use_counter"] == 2
    assert info["prev_ep_tool_success_counter"] == 1
    assert info["tool_use_counter"] == 0


def test_first_successful_tool_wins() -> None:
    calc, echo = CalcTool(), EchoTool()
    env = ToolEnvWrapper(_game(), [calc, echo])
    env.reset(seed=0)
    _, _, _, _, info = env.step("<calc>1+1</calc>")
    assert info["tool_type"] == "calc"
    obs, _, _, _, info = env.step("<calc>oops</calc>")  # calc fails, echo parses and succeeds
    assert info["tool_type"] == "echo" and obs == "echo: oops" and info["tool_ok"]


def test_a_failed_call_is_not_lost_when_a_later_tool_does_not_parse() -> None:
    """GEM overwrote the parse flag with the last tool's and sent the call to the env."""

    class Never(EchoTool):
        name = "never"

        def parse(self, action: str) -> ToolCall | None:
            return None

    env = ToolEnvWrapper(_game(), [CalcTool(), Never()], tool_error_reward=-1.0)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<calc>bad</calc>")
    assert info["use_tool"] is True and info["tool_type"] == "calc" and not info["tool_ok"]
    assert obs.startswith("calc error") and reward == -1.0
    assert not terminated and not truncated
    assert env.unwrapped.turn_count == 0  # type: ignore[attr-defined]


def test_tool_turns_count_toward_the_turn_limit() -> None:
    env, _ = _wrapped()  # GuessTheNumber-hard: 7 turns
    assert env.turn_limit() == 7
    env.reset(seed=0)
    for _ in range(6):
        assert env.step("<calc>1+1</calc>")[3] is False
    obs, _, terminated, truncated, info = env.step("<calc>1+1</calc>")
    assert truncated and not terminated and info["turn_limit"] is True and obs == "2"


def test_gem_behaviour_when_tool_turns_are_free() -> None:
    env, _ = _wrapped(count_tool_turns=False, max_tool_uses=20)
    env.reset(seed=0)
    for _ in range(10):
        _, _, te, tr, _ = env.step("<calc>1+1</calc>")
        assert not (te or tr)
    for _ in range(6):
        assert not env.step(r"\boxed{50}")[2]
    _, _, terminated, truncated, info = env.step(r"\boxed{49}")
    assert truncated and not terminated  # the inner env's own limit


def test_explicit_turn_limit_and_single_turn_envs() -> None:
    env, _ = _wrapped(max_turns=2)
    env.reset(seed=0)
    env.step("<calc>1+1</calc>")
    _, _, terminated, truncated, info = env.step(r"\boxed{1}")
    assert truncated != terminated and (terminated or info["turn_limit"])
    single = ToolEnvWrapper(gemgym.make("code:StdioBasics"), [CalcTool()], max_tool_uses=3)
    assert single.turn_limit() is None
    single.reset(seed=0)
    for _ in range(3):
        assert not any(single.step("<calc>1+1</calc>")[2:4])
    obs, reward, terminated, truncated, _ = single.step("no code at all")
    assert terminated and not truncated and reward == -0.1


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="non-empty"):
        ToolEnvWrapper(_game(), [])
    tool = CalcTool()
    with pytest.raises(ConfigError, match="twice"):
        ToolEnvWrapper(_game(), [tool, tool])
    with pytest.raises(ConfigError, match="max_tool_uses"):
        ToolEnvWrapper(_game(), [CalcTool()], max_tool_uses=-1)
    with pytest.raises(ConfigError, match="max_turns"):
        ToolEnvWrapper(_game(), [CalcTool()], max_turns=0)


def test_history_wrappers_see_tool_turns() -> None:
    env = ChatHistory(ToolEnvWrapper(_game(), [CalcTool()]))
    env.reset(seed=0)
    msgs, *_ = env.step("I will add <calc>2+2</calc> and then guess")
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1]["content"] == "I will add <calc>2+2</calc>"  # parsed_action
    assert msgs[2]["content"] == "4"


def test_each_wrapped_env_gets_its_own_tool() -> None:
    factory = python_tool_wrapper(timeout=3)
    a, b = factory(_game()), factory(_game())
    assert a.tools[0] is not b.tools[0]
    assert (a.tool_reward, a.tool_success_reward, a.max_tool_uses) == (0.05, 0.25, 5)


def test_python_tool_episode_and_conformance() -> None:
    from gemgym.sandbox.bwrap import bwrap_available

    if not bwrap_available():
        pytest.skip("bubblewrap is not installed")
    env = gemgym.make("game:GuessTheNumber-v0-easy", wrappers=[python_tool_wrapper(timeout=3)])
    obs, _ = env.reset(seed=0)
    assert "<python>" in obs
    obs, reward, *_, info = env.step("<python>print(sum(range(5)))</python>")
    assert obs == "Code execution result: 10\n" and reward == 0.0  # held until the end
    assert info["tool_type"] == "python"
    check_env(
        env,
        make_copy=lambda: gemgym.make(
            "game:GuessTheNumber-v0-easy", wrappers=[python_tool_wrapper(timeout=3)]
        ),
    )


def _after_the_end(env: Env[Any, str]) -> None:
    """Step ``env`` until its episode ends (the turn limit, tool calls only)."""
    env.reset(seed=0)
    for _ in range(50):
        _, _, terminated, truncated, _ = env.step("<calc>1+1</calc>")
        if terminated or truncated:
            return
    raise AssertionError("the episode never ended")


@pytest.mark.parametrize("action", ["<calc>1+1</calc>", r"\boxed{50}"])
def test_no_tool_call_or_move_after_the_episode_ended(action: str) -> None:
    tool = CalcTool()
    env = gemgym.make("game:GuessTheNumber-v0-hard", wrappers=[lambda e: ToolEnvWrapper(e, [tool])])
    _after_the_end(env)
    calls = tool.calls
    with pytest.raises(ResetNeeded, match="reset"):
        env.step(action)
    with pytest.raises(ResetNeeded, match="reset"):
        asyncio.run(env.astep(action))
    assert tool.calls == calls  # the tool did not run
    env.reset(seed=1)
    assert env.step("<calc>1+1</calc>")[0] == "2"


def test_a_bare_tool_wrapper_refuses_to_step_before_reset_and_after_the_end() -> None:
    tool = CalcTool()
    env = ToolEnvWrapper(gemgym.make("game:GuessTheNumber-v0-hard"), [tool], max_turns=2)
    with pytest.raises(ResetNeeded, match="reset"):
        env.step("<calc>1+1</calc>")
    _after_the_end(env)
    with pytest.raises(ResetNeeded, match="reset"):
        env.step("<calc>1+1</calc>")
    assert tool.calls == 2
    env.reset(seed=0)
    assert env.step("<calc>2+2</calc>")[0] == "4"


def _guess_to_the_end(env: ToolEnvWrapper, solve: bool) -> tuple[float, dict[str, Any]]:
    """Play GuessTheNumber-hard by bisection (``solve``) or by repeating 1, to the end."""
    lo, hi, total = 1, 50, 0.0
    for _ in range(100):
        guess = (lo + hi) // 2 if solve else 1
        obs, reward, terminated, truncated, info = env.step(rf"\boxed{{{guess}}}")
        total += reward
        if terminated or truncated:
            return total, info
        if "higher" in obs:
            lo = guess + 1
        elif "lower" in obs:
            hi = guess - 1
    raise AssertionError("the episode did not end")


def test_tool_rewards_are_paid_only_when_the_episode_is_solved() -> None:
    """Calling the tool is not paid by itself: a policy that never solves earns nothing from it."""
    solved = ToolEnvWrapper(
        _game(max_turns=20), [CalcTool()], tool_reward=0.05, tool_success_reward=0.25
    )
    solved.reset(seed=0)
    for _ in range(3):
        _, reward, terminated, truncated, _ = solved.step("<calc>1+1</calc>")
        assert reward == 0.0 and not terminated and not truncated
    total, info = _guess_to_the_end(solved, solve=True)
    assert info["tool_reward"] == pytest.approx(0.9)  # three calls, paid on the last step
    assert total == pytest.approx(1.0 + 0.9)

    failed = ToolEnvWrapper(
        _game(max_turns=20), [CalcTool()], tool_reward=0.05, tool_success_reward=0.25
    )
    failed.reset(seed=0)
    for _ in range(3):
        failed.step("<calc>1+1</calc>")
    total, info = _guess_to_the_end(failed, solve=False)
    assert info["tool_reward"] == 0.0 and total <= 0.0

    # tool calls until the turn limit: truncated, nothing paid
    only_tools = ToolEnvWrapper(
        _game(), [CalcTool()], tool_reward=0.05, tool_success_reward=0.25, max_turns=4
    )
    only_tools.reset(seed=0)
    rewards = []
    for _ in range(4):
        _, reward, terminated, truncated, info = only_tools.step("<calc>1+1</calc>")
        rewards.append(reward)
    assert truncated and not terminated and sum(rewards) == 0.0 and info["tool_reward"] == 0.0

    # a penalty is paid at once; GEM's rule pays every call as it happens
    penalised = ToolEnvWrapper(_game(), [CalcTool()], tool_error_reward=-0.5)
    penalised.reset(seed=0)
    assert penalised.step("<calc>two+3</calc>")[1] == pytest.approx(-0.5)
    gem = ToolEnvWrapper(_game(), [CalcTool()], tool_reward=0.05, pay_tools="per_call")
    gem.reset(seed=0)
    assert gem.step("<calc>1+1</calc>")[1] == pytest.approx(0.05)
    with pytest.raises(ConfigError, match="pay_tools"):
        ToolEnvWrapper(_game(), [CalcTool()], pay_tools="later")  # type: ignore[arg-type]
