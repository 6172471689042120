"""Stock wrappers: TimeLimit, OrderEnforcing, EpisodeStatistics, history wrappers."""

from __future__ import annotations

from typing import Any

import pytest

import gemgym
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.wrappers import (
    ChatHistory,
    ConcatHistory,
    EpisodeStatistics,
    OrderEnforcing,
    TimeLimit,
)


def _guess(preset: str = "hard") -> gemgym.Env[str, str]:
    return gemgym.make(f"game:GuessTheNumber-v0-{preset}")


def test_time_limit_truncates_and_resets_count() -> None:
    env = TimeLimit(_guess(), 2)
    for _ in range(2):
        env.reset(seed=0)
        assert env.step(r"\boxed{1}")[3] is False
        _, _, te, tr, info = env.step(r"\boxed{2}")
        assert (te, tr) == (False, True) and info["TimeLimit.truncated"]


def test_time_limit_terminal_step_wins_over_truncation() -> None:
    env = TimeLimit(_guess("easy"), 1)
    env.reset(seed=0)
    _, _, te, tr, _ = env.step("no answer")  # format error terminates
    assert (te, tr) == (True, False)


@pytest.mark.parametrize("bad", [0, -3, 1.5])
def test_time_limit_rejects_bad_limits(bad: Any) -> None:
    with pytest.raises(ConfigError):
        TimeLimit(_guess(), bad)


def test_order_enforcing_after_episode_end() -> None:
    env = _guess("easy")
    assert isinstance(env, OrderEnforcing) and not env.has_reset
    env.reset(seed=0)
    env.step("garbage")  # ends the episode
    with pytest.raises(ResetNeeded):
        env.step(r"\boxed{1}")
    env.reset()
    env.step(r"\boxed{1}")


def test_order_enforcing_require_reset() -> None:
    env = _guess("easy")
    assert isinstance(env, OrderEnforcing)
    env.reset(seed=0)
    env.require_reset()
    assert not env.has_reset
    with pytest.raises(ResetNeeded):
        env.step(r"\boxed{1}")
    env.reset()
    assert env.has_reset
    env.step(r"\boxed{1}")


def test_episode_statistics() -> None:
    env = EpisodeStatistics(_guess("easy"))
    env.reset(seed=0)
    info: dict[str, Any] = {}
    done = False
    steps = 0
    while not done:
        _, _, te, tr, info = env.step(env.expert_action())
        steps += 1
        done = te or tr
    ep = info["episode"]
    assert ep["return"] == 1.0 and ep["length"] == steps and ep["success"] is True
    assert ep["time"] >= 0
    assert env.episode_returns == [1.0] and env.episode_successes == [True]


def test_concat_history_observations_only() -> None:
    env = ConcatHistory(_guess())
    obs0, _ = env.reset(seed=0)
    assert obs0.endswith("Enter your next guess.")
    obs1, *_ = env.step(r"I say \boxed{1}")
    lines = obs1.split("\n")
    assert "I say" not in obs1
    assert any("you guessed 1" in line for line in lines)
    assert obs1.startswith("You are playing Guess The Number.")
    assert obs1.endswith("Enter your next guess.")


def test_concat_history_with_actions_and_limit() -> None:
    env = ConcatHistory(_guess(), include_action=True, max_history_length=1)
    env.reset(seed=0)
    env.step(r"first \boxed{1}")
    obs, *_ = env.step(r"second \boxed{2}")
    assert "second \\boxed{2}" in obs and "first" not in obs
    assert "You are playing" not in obs  # history limited to the last turn


def test_chat_history_messages_and_roles() -> None:
    env = ChatHistory(_guess(), system_prompt="be brief")
    msgs, _ = env.reset(seed=0)
    assert [m["role"] for m in msgs] == ["system", "user"]
    msgs, *_ = env.step(r"\boxed{1}")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == r"\boxed{1}"
    assert msgs[-1]["content"].endswith("Enter your next guess.")
    # the suffix is only on the latest message
    assert not msgs[1]["content"].endswith("Enter your next guess.")


class _FakeTokenizer:
    """Stands in for a Hugging Face tokenizer: renders messages with a simple template."""

    def apply_chat_template(
        self, conversation: Any, *, tokenize: bool = True, add_generation_prompt: bool = False
    ) -> str:
        assert tokenize is False
        body = "".join(f"<|{m['role']}|>{m['content']}\n" for m in conversation)
        return body + ("<|assistant|>" if add_generation_prompt else "")


def test_chat_history_with_tokenizer_renders_a_string() -> None:
    env = ChatHistory(_guess(), tokenizer=_FakeTokenizer())
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, str) and obs.startswith("<|user|>You are playing")
    assert obs.endswith("<|assistant|>")
    obs, *_ = env.step(r"\boxed{3}")
    assert "<|assistant|>\\boxed{3}" in obs


def test_history_uses_parsed_action_and_tool_role() -> None:
    class FakeTool(gemgym.Wrapper[str, str, str, str]):
        def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
            if action.startswith("<python>"):
                return (
                    "Code execution result: 2",
                    0.0,
                    False,
                    False,
                    {
                        "use_tool": True,
                        "parsed_action": "<python>print(1+1)</python>",
                    },
                )
            return self.env.step(action)

    env = ChatHistory(FakeTool(_guess()))
    env.reset(seed=0)
    msgs, *_ = env.step("<python>print(1+1)</python> and some trailing text")
    assert msgs[-2] == {"role": "assistant", "content": "<python>print(1+1)</python>"}
    assert msgs[-1]["role"] == "tool"


def test_history_wrappers_pass_check_env() -> None:
    from gemgym.testing import check_env

    check_env(ConcatHistory(_guess(), include_action=True))
    check_env(ChatHistory(_guess()))
