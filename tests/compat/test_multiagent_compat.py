"""GEM's multi-agent API on the layer (``gem.multiagent`` / ``gem.envs.multiagent``), used as
GEM's ``tests/test_multiagent`` and its tau-bench example use it, and gemgym's games through it."""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar

import numpy as np
import pytest

from gemgym.compat.gem.envs.multiagent import AgentSelector, GameEnv, MultiAgentEnv

Step = tuple[
    dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]
]


class SimpleTestEnv(MultiAgentEnv):
    """The env of GEM's tests/test_multiagent/test_multiagent.py, written as it is there."""

    def __init__(self, mode: str = "sequential", num_agents: int = 3) -> None:
        super().__init__()
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agent_selector = AgentSelector(self.possible_agents, mode=mode)
        self.step_count = 0
        self.max_steps = 10

    def observe(self, agent: str) -> str:
        return f"Step {self.step_count}: Observation for {agent}"

    def _process_actions(self, actions: dict[str, Any]) -> Step:
        observations, rewards = {}, {}
        for agent, action in actions.items():
            observations[agent] = self.observe(agent)
            rewards[agent] = 1.0 if "good" in action else -1.0 if "bad" in action else 0.0
            if action == "exit":
                self.terminations[agent] = True
        self.step_count += 1
        if self.step_count >= self.max_steps:
            for agent in self.agents:
                self.truncations[agent] = True
        return observations, rewards, self.terminations, self.truncations, self.infos


def _active(env: MultiAgentEnv) -> list[str]:
    assert env.agent_selector is not None
    return env.agent_selector.get_active_agents()


def test_module_paths_through_the_switch(gem_switch: None) -> None:
    import gem.envs.multiagent
    import gem.multiagent
    from gem.envs.multiagent.multi_agent_env import AgentSelector as Sel, MultiAgentEnv as Base
    from gem.multiagent import AgentSelector as OldSel, MultiAgentEnv as OldBase

    assert Base is OldBase is gem.envs.multiagent.MultiAgentEnv is MultiAgentEnv
    assert Sel is OldSel is gem.multiagent.AgentSelector is AgentSelector
    from gem.core import Env

    assert issubclass(Base, Env)


def test_sequential_mode_takes_turns_and_accumulates_rewards() -> None:
    env = SimpleTestEnv(mode="sequential")
    obs, info = env.reset()
    assert obs == {a: f"Step 0: Observation for {a}" for a in env.possible_agents}
    assert info == {a: {} for a in env.possible_agents}
    order = []
    for i, action in enumerate(["good_action", "bad_action", "neutral", "good_action"]):
        active = _active(env)
        order.append(active[0])
        obs, rewards, term, trunc, info = env.step({a: action for a in active})
        assert obs == {active[0]: f"Step {i}: Observation for {active[0]}"}  # before the count
        assert list(rewards) == active
    assert order == ["agent_0", "agent_1", "agent_2", "agent_0"]
    assert [env.get_state(a)[1] for a in env.possible_agents] == [2.0, -1.0, 0.0]
    assert env.get_state("agent_1") == ("Step 4: Observation for agent_1", -1.0, False, False, {})
    assert list(env.get_active_states()) == ["agent_1"]


def test_parallel_mode_exit_and_truncation_remove_agents() -> None:
    env = SimpleTestEnv(mode="parallel")
    env.reset()
    assert sorted(env.get_active_states()) == ["agent_0", "agent_1", "agent_2"]
    obs, rewards, term, trunc, info = env.step(
        {"agent_0": "good", "agent_1": "exit", "agent_2": "bad"}
    )
    assert rewards == {"agent_0": 1.0, "agent_1": 0.0, "agent_2": -1.0}
    assert term["agent_1"] is True  # the step reports the termination, then the agent leaves
    assert env.agents == ["agent_0", "agent_2"]
    assert _active(env) == ["agent_0", "agent_2"]
    with pytest.raises(ValueError, match="not active"):
        env.step({"agent_0": "a", "agent_1": "a", "agent_2": "a"})
    steps = 1
    while env.agents:
        env.step(dict.fromkeys(_active(env), "action"))
        steps += 1
    assert steps == env.max_steps and env.agents == [] and _active(env) == []


def test_action_validation_and_errors() -> None:
    env = SimpleTestEnv(mode="sequential")
    env.reset()
    with pytest.raises(ValueError, match="Missing action for active agent agent_0"):
        env.step({})
    with pytest.raises(ValueError, match="agent_1 provided action but is not active"):
        env.step({"agent_0": "action", "agent_1": "action"})
    with pytest.raises(ValueError, match="must be a dict"):
        env.step("not_a_dict")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent_999 not in environment"):
        env.get_state("agent_999")
    with pytest.raises(ValueError, match="Unknown mode"):
        AgentSelector(["a1"], mode="unknown_mode").get_active_agents()
    assert env.step_count == 0  # rejected steps changed nothing
    env.step({"agent_0": "valid_action"})
    assert env.observe("agent_0") == "Step 1: Observation for agent_0"
    assert _active(env) == ["agent_1"]


def test_agent_selector_cycle_and_membership() -> None:
    sel = AgentSelector(["a1", "a2", "a3", "a4"])
    seen = []
    for _ in range(4):
        seen.append((sel.selected, sel.is_first(), sel.is_last()))
        sel.next()
    assert seen == [
        ("a1", True, False),
        ("a2", False, False),
        ("a3", False, False),
        ("a4", False, True),
    ]
    assert sel.is_first() and sel.selected == "a1"
    assert AgentSelector(["a1", "a2"], mode="parallel").get_active_agents() == ["a1", "a2"]
    sel.reinit(["x1", "x2"])
    sel.next()
    assert sel.is_last() and sel.selected == "x2"
    sel.add_agent("x3")
    sel.add_agent("x3")
    assert sel._agents == ["x1", "x2", "x3"]
    sel.remove_agent("x1")  # before the selection: the same agent stays selected
    assert sel.selected == "x2" and sel._agents == ["x2", "x3"]
    sel.remove_agent("x2")
    sel.remove_agent("x3")
    assert sel.selected is None and sel._agents == [] and sel.get_active_agents() == []
    assert AgentSelector([]).selected is None


def test_add_remove_agents_and_messages() -> None:
    env = SimpleTestEnv(mode="sequential")
    env.reset()
    env.add_agent("agent_3")
    assert env.agents[-1] == "agent_3" and env.get_state("agent_3")[1:] == (0.0, False, False, {})
    assert env.agent_selector is not None and "agent_3" in env.agent_selector._agents
    env.remove_agent("agent_3")
    env.remove_agent("agent_3")  # absent: nothing happens
    assert env.agents == ["agent_0", "agent_1", "agent_2"] and "agent_3" not in env.rewards
    env.send_message("agent_0", "agent_1", "Hello!")
    env.broadcast_message("agent_0", "Hello everyone!")
    assert env.shared_memory == [
        {"from": "agent_0", "to": "agent_1", "message": "Hello!"},
        {"from": "agent_0", "to": "agent_1", "message": "Hello everyone!"},
        {"from": "agent_0", "to": "agent_2", "message": "Hello everyone!"},
    ]
    for call in (
        lambda: env.send_message("agent_0", "agent_999", "x"),
        lambda: env.send_message("agent_999", "agent_0", "x"),
        lambda: env.broadcast_message("agent_999", "x"),
    ):
        with pytest.raises(ValueError, match="agent_999 not in environment"):
            call()
    env.reset()
    assert env.shared_memory == [] and env.global_context == ""


def test_random_policy_loop_ends_by_truncation() -> None:
    """GEM's test_random_policy loop: stop when every agent is terminated or truncated."""
    for mode in ("sequential", "parallel"):
        env = SimpleTestEnv(mode=mode)
        env.reset()
        rng = random.Random(0)
        steps = 0
        while steps < 20:
            actions = {a: rng.choice(["good", "bad", "neutral"]) for a in _active(env)}
            _, _, term, trunc, _ = env.step(actions)
            steps += 1
            if all(term.values()) or all(trunc.values()):
                break
        assert steps == env.max_steps and env.agents == []


def test_seeded_reset_gives_the_env_its_own_generator() -> None:
    env = SimpleTestEnv()
    state = random.getstate()
    env.reset(5)  # positional seed, as GEM's reset(seed)
    first = env.np_random.integers(1000, size=4)
    env.reset(seed=5)
    assert np.array_equal(first, env.np_random.integers(1000, size=4))
    assert random.getstate() == state  # the global generator is untouched


class ToolTaskEnv(MultiAgentEnv):
    """The shape of GEM's tau-bench example env: one "assistant" agent, JSON tool calls or a
    ``respond`` reply, a scripted user instead of an LLM, ``reset(seed, task_index)``."""

    TASKS: ClassVar[list[dict[str, Any]]] = [
        {"order": "#1", "refund": 30.0},
        {"order": "#2", "refund": 12.5},
    ]

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["assistant"]
        self.agent_selector = AgentSelector(self.possible_agents, mode="sequential")
        self.tool_definitions = [{"function": {"name": "refund"}}, {"function": {"name": "done"}}]
        self.task: dict[str, Any] = {}
        self.refunds: dict[str, float] = {}

    def reset(
        self, seed: int | None = None, task_index: int | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        observations, infos = super().reset(seed=seed)
        self.task = self.TASKS[task_index or 0]
        self.refunds = {}
        observations["assistant"] = f"I want a refund for order {self.task['order']}."
        infos["assistant"] = {"task": dict(self.task)}
        return observations, infos

    def observe(self, agent: str) -> str:
        return ""

    def _process_actions(self, actions: dict[str, Any]) -> Step:
        action = json.loads(actions["assistant"])
        reward, done = 0.0, False
        if action["name"] == "refund":
            self.refunds[action["kwargs"]["order"]] = action["kwargs"]["amount"]
            obs = "refunded"
        elif action["name"] == "done":
            done = True
            reward = float(self.refunds == {self.task["order"]: self.task["refund"]})
            obs = "###STOP###"
        else:
            obs = f"user: {action['kwargs']['content']}"
        return (
            {"assistant": obs},
            {"assistant": reward},
            {"assistant": done},
            {"assistant": False},
            {"assistant": {"source": action["name"]}},
        )


def _solve(env: ToolTaskEnv, task_index: int, amount: float) -> dict[str, Any]:
    """TauBenchAgent.solve's loop, with a scripted model."""
    observations, infos = env.reset(task_index=task_index)
    order = infos["assistant"]["task"]["order"]
    script = [
        ("respond", {"content": "Sure, let me check."}),
        ("refund", {"order": order, "amount": amount}),
        ("done", {}),
    ]
    reward, num_steps, terminations = 0.0, 0, {"assistant": False}
    for name, kwargs in script:
        action_json = json.dumps({"name": name, "kwargs": kwargs})
        observations, rewards, terminations, _, _ = env.step({"assistant": action_json})
        reward = rewards.get("assistant", 0.0)
        num_steps += 1
        if terminations.get("assistant", False):
            break
    return {"reward": reward, "num_steps": num_steps, "done": terminations["assistant"]}


def test_tool_task_env_in_the_shape_of_the_tau_bench_example() -> None:
    env = ToolTaskEnv()
    assert _solve(env, 1, 12.5) == {"reward": 1.0, "num_steps": 3, "done": True}
    # as in GEM, only agents marked in env.terminations leave; this env (as tau-bench's) returns
    # fresh dicts, so the assistant stays and its cumulative reward is readable
    assert env.agents == ["assistant"] and env.get_state("assistant")[1] == 1.0
    assert _solve(env, 0, 12.5) == {"reward": 0.0, "num_steps": 3, "done": True}
    assert env.refunds == {"#1": 12.5}  # the wrong amount was refunded: no reward


def test_registered_multi_agent_env_through_make(gem_switch: None) -> None:
    import gem

    gem.register("test:SimpleMulti-v0", entry_point=SimpleTestEnv, num_agents=2)
    env = gem.make("test:SimpleMulti-v0", mode="parallel")
    obs, _ = env.reset(0)
    assert isinstance(env, SimpleTestEnv) and env.env_id == "test:SimpleMulti-v0"
    assert sorted(obs) == ["agent_0", "agent_1"] and _active(env) == ["agent_0", "agent_1"]


def _play(env: GameEnv, seed: int) -> tuple[list[str], dict[str, float]]:
    obs, _ = env.reset(seed)
    seen = [obs[a] for a in env.possible_agents]
    returns = dict.fromkeys(env.possible_agents, 0.0)
    while env.agents:
        active = _active(env)
        assert len(active) == 1
        obs, rewards, _, _, _ = env.step({a: env.expert_action(a) for a in active})
        seen += [obs[a] for a in sorted(obs)]
        for agent, r in rewards.items():
            returns[agent] += r
    return seen, returns


def test_gemgym_games_through_gems_api() -> None:
    ttt = GameEnv("ma:TicTacToe-v0")
    seen, returns = _play(ttt, 0)
    assert returns == {"player_0": 0.0, "player_1": 0.0}  # two minimax experts draw
    assert len(seen) == 2 + 2 * 9 and ttt.agents == []
    kuhn = GameEnv("ma:KuhnPoker-v0")
    runs = [_play(kuhn, s) for s in (1, 1, 2)]
    assert runs[0] == runs[1]  # seeded: the same deal and play
    for _, returns in runs:
        assert sum(returns.values()) == 0.0 and returns["player_0"] != 0.0  # zero-sum


def test_game_env_invalid_move_and_turn_order() -> None:
    env = GameEnv("ma:TicTacToe-v0")
    env.reset(seed=0)
    assert _active(env) == ["player_0"]
    with pytest.raises(ValueError, match="player_1 provided action but is not active"):
        env.step({"player_0": "1", "player_1": "2"})
    _, rewards, term, _, infos = env.step({"player_0": "not a move"})
    assert rewards == {"player_0": -0.1, "player_1": 0.0} and infos["player_0"]["invalid_move"]
    assert not any(term.values()) and _active(env) == ["player_0"]  # the seat moves again
    env.step({"player_0": env.expert_action("player_0")})
    assert _active(env) == ["player_1"]
    assert env.get_state("player_0")[1] == pytest.approx(-0.1)
