"""Wrappers write ``step`` and ``astep`` once: ``astep`` never blocks the event loop, a tool's
async path is what ``astep`` uses, and both give the same results."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pytest

import gemgym
from gemgym.core import Env, Wrapper
from gemgym.errors import ResetNeeded
from gemgym.tools.base import Tool, ToolCall, ToolResult
from gemgym.wrappers import (
    ChatHistory,
    ConcatHistory,
    EpisodeStatistics,
    OrderEnforcing,
    TimeLimit,
)
from gemgym.wrappers.tools import ToolEnvWrapper

DELAY = 0.3


class SlowEnv(Env[str, str]):
    """``step``/``reset`` block for ``delay`` seconds; ``astep``/``areset`` await instead."""

    metadata: ClassVar[Mapping[str, Any]] = {"multi_turn": True}

    def __init__(self, delay: float = DELAY, max_turns: int = 3) -> None:
        self.delay = delay
        self.max_turns = max_turns
        self.turn = 0

    def _start(self, seed: int | None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.turn = 0
        return "start", {"suffix": "go on"}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        time.sleep(self.delay)
        return self._start(seed)

    def _play(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn += 1
        done = action == "win"
        return f"turn {self.turn}: {action}", 1.0 if done else 0.1, done, False, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        time.sleep(self.delay)
        return self._play(action)

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        await asyncio.sleep(self.delay)
        return self._play(action)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        await asyncio.sleep(self.delay)
        return self._start(seed)


class AsyncCalc(Tool):
    """``<calc>a+b</calc>``; records which path ran. The sync path blocks."""

    name = "calc"

    def __init__(self, delay: float = DELAY) -> None:
        self.delay = delay
        self.sync_calls = 0
        self.async_calls = 0

    def instructions(self) -> str:
        return "Add with <calc>a+b</calc>."

    def parse(self, action: str) -> ToolCall | None:
        m = re.search(r"<calc>(\d+)\+(\d+)</calc>", action)
        return None if m is None else ToolCall(self.name, m.groups(), action[: m.end()])

    def _add(self, call: ToolCall) -> ToolResult:
        a, b = call.arguments
        return ToolResult(str(int(a) + int(b)), info={"sum": int(a) + int(b)})

    def execute(self, call: ToolCall) -> ToolResult:
        self.sync_calls += 1
        time.sleep(self.delay)
        return self._add(call)

    async def aexecute(self, call: ToolCall) -> ToolResult:
        self.async_calls += 1
        await asyncio.sleep(self.delay)
        return self._add(call)


class Upper(gemgym.ObservationWrapper[str, str, str]):
    def observation(self, observation: str) -> str:
        return observation.upper()


class Half(gemgym.RewardWrapper[str, str]):
    def reward(self, reward: float) -> float:
        return reward / 2


class Shout(gemgym.ActionWrapper[str, str, str]):
    def action(self, action: str) -> str:
        return action + "!"


STACKS: dict[str, Callable[[float], Env[Any, Any]]] = {
    "ConcatHistory": lambda d: ConcatHistory(SlowEnv(d), include_action=True),
    "ChatHistory": lambda d: ChatHistory(SlowEnv(d)),
    "ToolEnvWrapper": lambda d: ToolEnvWrapper(SlowEnv(d), [AsyncCalc(d)]),
    "ObservationWrapper": lambda d: Upper(SlowEnv(d)),
    "RewardWrapper": lambda d: Half(SlowEnv(d)),
    "ActionWrapper": lambda d: Shout(SlowEnv(d)),
    "TimeLimit": lambda d: TimeLimit(SlowEnv(d), 5),
    "OrderEnforcing": lambda d: OrderEnforcing(SlowEnv(d)),
    "EpisodeStatistics": lambda d: EpisodeStatistics(SlowEnv(d)),
    "full stack": lambda d: ChatHistory(
        ToolEnvWrapper(EpisodeStatistics(TimeLimit(OrderEnforcing(SlowEnv(d)), 5)), [AsyncCalc(d)])
    ),
}


@pytest.mark.parametrize("name", list(STACKS))
def test_asteps_of_two_envs_overlap(name: str) -> None:
    envs = [STACKS[name](DELAY) for _ in range(2)]
    for env in envs:
        env.reset(seed=0)

    async def both() -> tuple[float, float]:
        start = time.perf_counter()
        await asyncio.gather(*(env.astep("move") for env in envs))
        middle = time.perf_counter()
        await asyncio.gather(*(env.areset(seed=1) for env in envs))
        return middle - start, time.perf_counter() - middle

    step_time, reset_time = asyncio.run(both())
    # blocking calls one after the other would take 2 * DELAY
    assert step_time < 1.6 * DELAY, f"{name}: astep blocked the event loop ({step_time:.2f} s)"
    assert reset_time < 1.6 * DELAY, f"{name}: areset blocked the event loop ({reset_time:.2f} s)"


def test_astep_uses_the_tools_async_path() -> None:
    tool = AsyncCalc(0.0)
    env = ToolEnvWrapper(SlowEnv(0.0), [tool])
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = asyncio.run(env.astep("<calc>2+3</calc>"))
    assert (obs, terminated, truncated, info["use_tool"]) == ("5", False, False, True)
    assert (tool.async_calls, tool.sync_calls) == (1, 0)
    env.step("<calc>1+1</calc>")
    assert (tool.async_calls, tool.sync_calls) == (1, 1)


def test_tool_calls_of_two_envs_overlap() -> None:
    envs = [ToolEnvWrapper(SlowEnv(), [AsyncCalc()]) for _ in range(2)]
    for env in envs:
        env.reset(seed=0)

    async def both() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(env.astep("<calc>1+2</calc>") for env in envs))
        return time.perf_counter() - start

    assert asyncio.run(both()) < 1.6 * DELAY


ACTIONS = ["<calc>2+3</calc>", "move", "<calc>x</calc> guess", "<calc>4+4</calc>", "win"]


@pytest.mark.parametrize("name", list(STACKS))
def test_step_and_astep_give_the_same_results(name: str) -> None:
    sync_env, async_env = STACKS[name](0.0), STACKS[name](0.0)

    def run_sync() -> list[Any]:
        out: list[Any] = [sync_env.reset(seed=3)]
        for a in ACTIONS:
            out.append(sync_env.step(a))
            if out[-1][2] or out[-1][3]:
                break
        return out

    async def run_async() -> list[Any]:
        out: list[Any] = [await async_env.areset(seed=3)]
        for a in ACTIONS:
            out.append(await async_env.astep(a))
            if out[-1][2] or out[-1][3]:
                break
        return out

    def strip(results: list[Any]) -> list[Any]:
        for r in results:  # wall times differ between runs
            r[-1].get("episode", {}).pop("time", None)
        return results

    expected = strip(run_sync())
    assert len(expected) > 2
    assert strip(asyncio.run(run_async())) == expected


class StepOnly(Wrapper[str, str, str, str]):
    """A wrapper written before the hooks existed: it overrides ``step`` and ``reset`` only."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return "reset:" + obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, r, te, tr, info = self.env.step(action)
        return "step:" + obs, r, te, tr, info


def test_a_wrapper_that_overrides_step_only_is_still_used_by_astep() -> None:
    env = StepOnly(SlowEnv(0.0))
    assert asyncio.run(env.areset(seed=0))[0] == "reset:start"
    assert asyncio.run(env.astep("a"))[0] == "step:turn 1: a"


class Hooked(Wrapper[str, str, str, str]):
    """The hooks: change the action before, and the result after, the inner step."""

    def before_step(self, action: str) -> str:
        return action.strip()

    def after_step(
        self, action: str, result: tuple[str, float, bool, bool, dict[str, Any]]
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, r, te, tr, info = result
        return obs, r + 1, te, tr, {**info, "sent": action}

    def after_reset(self, obs: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return obs + "!", info


def test_hooks_apply_to_step_and_astep_alike() -> None:
    env = Hooked(SlowEnv(0.0))
    assert env.reset(seed=0)[0] == "start!"
    assert env.step("  a ") == ("turn 1: a", 1.1, False, False, {"sent": "  a "})
    assert asyncio.run(env.areset(seed=0))[0] == "start!"
    assert asyncio.run(env.astep(" b")) == ("turn 1: b", 1.1, False, False, {"sent": " b"})


def test_order_is_enforced_by_astep_too() -> None:
    env = OrderEnforcing(ConcatHistory(SlowEnv(0.0)))
    with pytest.raises(ResetNeeded):
        asyncio.run(env.astep("x"))
