"""The bad-action sweep over every registered env: no bad reply raises, hangs or is echoed whole.

Each id gets one reset and every reply of :func:`gemgym.testing.bad_actions` (empty, blank, NUL
bytes, a million-digit ``\\boxed{}``, 2 MB of text, nested and unclosed boxes, unclosed tags,
non-``str`` values). The families whose ids share one adapter (reasoning-gym, TextArena, the
terminal tasks) run a few representative ids by default and the rest under ``-m slow``. Ids whose
extra is not installed are skipped, naming it (the registry knows each id's extra: some envs
build without it and need it only to score a reply).
"""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest

import gemgym
from gemgym.core import ECHO_LIMIT, NON_TEXT_KEY, Env, excerpt
from gemgym.errors import DependencyNotInstalled
from gemgym.testing import EnvCheckError, bad_actions, check_bad_actions
from helpers.extras import missing_extra, needs_extra, reason

# The ids gemgym ships (their entry points are in the package); envs that other test modules
# register for themselves (evaltest:*, toy envs) are not part of the suite.
ALL_IDS = [
    i for i in gemgym.list_envs() if str(gemgym.registry.spec(i).entry_point).startswith("gemgym.")
]

# ids that stand for their family in the default run (distinct parsers and scorers)
_REPRESENTATIVES = {
    "rg:basic_arithmetic",
    "rg:countdown",
    "rg:word_ladder",
    "rg:arc_1d",
    "ta:ConnectFour-v0",  # a move regex that is quadratic in the reply's length
    "ta:2048-v0",
    "ta:Mastermind-v0",
    "ta:KuhnPoker-v0",
}
_SHARED_ADAPTER = ("rg:", "ta:", "terminal:")


def _param(env_id: str) -> Any:
    # terminal tasks run each reply in a sandboxed shell (seconds each): all under -m slow
    slow = env_id.startswith(_SHARED_ADAPTER) and env_id not in _REPRESENTATIVES
    extra = missing_extra(env_id)
    marks = [pytest.mark.slow] if slow else []
    return pytest.param(
        env_id, marks=[*marks, pytest.mark.skip(reason=reason(extra, env_id))] if extra else marks
    )


def _make(env_id: str) -> Env[Any, Any]:
    extra = missing_extra(env_id)
    if extra is not None:
        pytest.skip(reason(extra, env_id))
    try:
        return gemgym.make(env_id)
    except DependencyNotInstalled as e:
        pytest.skip(f"{env_id}: {e}")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("env_id", [_param(i) for i in ALL_IDS])
def test_every_env_survives_the_bad_action_sweep(env_id: str) -> None:
    env = _make(env_id)
    try:
        # a terminal task runs a reply as a command, under its own time limit
        check_bad_actions(env, max_seconds=90.0 if env_id.startswith("terminal:") else 20.0)
    finally:
        env.close()


def test_the_representatives_are_registered() -> None:
    assert set(ALL_IDS) >= _REPRESENTATIVES


def test_the_sweep_has_what_the_issue_names() -> None:
    actions = bad_actions()
    texts = [a for a in actions.values() if isinstance(a, str)]
    assert "" in texts and any(t.strip() == "" and t for t in texts)
    assert any("\x00" in t for t in texts)
    assert any(t.startswith("\\boxed{") and t.count("9") == 1_000_000 for t in texts)
    assert any(len(t) >= 2_000_000 for t in texts)
    assert {type(a) for a in actions.values()} >= {str, type(None), int, bytes, list, dict}


@pytest.mark.parametrize(
    "env_id", ["game:GuessTheNumber-v0-easy", "math:GSM8K", "ma:TicTacToe-v0", "code:HumanEval"]
)
@pytest.mark.parametrize("action", [None, 123, b"\\boxed{1}", ["\\boxed{1}"], {"content": "x"}])
def test_a_non_str_action_is_the_empty_reply(env_id: str, action: object) -> None:
    """gemgym's one rule: a non-str action is scored exactly as the empty reply."""
    env = _make(env_id)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(action)
    env.reset(seed=0)
    _, empty_reward, empty_terminated, empty_truncated, empty_info = env.step("")
    assert (reward, terminated, truncated) == (empty_reward, empty_terminated, empty_truncated)
    if env_id.startswith("ma:"):  # an invalid move: the penalty, and the seat tries again
        assert "a move is text, got" in info["invalid_move"] and not terminated
    else:
        assert info["format_error"] and info[NON_TEXT_KEY] == type(action).__name__
        assert empty_info["format_error"] and NON_TEXT_KEY not in empty_info


def test_tictactoe_takes_a_box_of_thousands_of_digits() -> None:
    env = gemgym.make("ma:TicTacToe-v0")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("\\boxed{" + "1" * 4_301 + "}")
    assert reward == -0.1 and not terminated and "is not a cell" in info["invalid_move"]
    assert len(obs) < 2_000
    assert env.step("\\boxed{5}")[0].count("X") >= 1  # the game goes on


@pytest.mark.parametrize("env_id", ["ma:TicTacToe-v0", "ma:KuhnPoker-v0", "ma:Negotiation-v0"])
def test_multiagent_games_echo_a_bounded_excerpt(env_id: str) -> None:
    env = gemgym.make(env_id)
    first, _ = env.reset(seed=0)
    huge = "\\boxed{" + "7" * 1_000_000 + "}"
    obs = env.step(huge)[0]
    assert len(obs) < len(first) + 1_000
    obs = env.step("\\boxed{" + "x" * 2_000_000 + "}")[0]
    assert len(obs) < len(first) + 1_000


def test_negotiation_takes_huge_counts() -> None:
    env = gemgym.make("ma:Negotiation-v0")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("\\boxed{propose " + "9" * 5_000 + " 0 0}")
    assert reward == -0.1 and not terminated and "the pool has only" in info["invalid_move"]


def test_textarena_quotes_long_replies_and_caps_their_length() -> None:
    needs_extra("ta")
    from gemgym.envs.textarena import MAX_ACTION_CHARS

    env = gemgym.make("ta:ConnectFour-v0")
    first, _ = env.reset(seed=0)
    _, reward, terminated, _, info = env.step("a" * 2_000_000)  # TextArena would take hours
    assert reward == -0.1 and not terminated and str(MAX_ACTION_CHARS) in info["invalid_move"]
    long_reply = "think " * 1_000 + "[col 3]"  # under the cap: TextArena plays it, quoted short
    obs = env.step(long_reply)[0]
    assert "[col 3]" not in obs or len(obs) < len(first) + 4_000
    assert long_reply not in obs


def test_excerpt_is_bounded_and_keeps_both_ends() -> None:
    text = "start " + "x" * 10_000 + " end"
    cut = excerpt(text)
    assert len(cut) <= ECHO_LIMIT + 40 and cut.startswith("start ") and cut.endswith(" end")
    assert "characters left out" in cut
    assert excerpt("short") == "short"


def test_check_bad_actions_names_the_reply_an_env_fails_on() -> None:
    class Echo(Env[str, str]):  # echoes the whole reply and chokes on non-str values
        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[str, dict]:  # type: ignore[type-arg]
            return "go", {}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
            return "you said " + action.strip(), 0.0, False, False, {}

    with pytest.raises(EnvCheckError, match=r"'boxed_million_digits'.*grew"):
        check_bad_actions(Echo())
    with pytest.raises(EnvCheckError, match=r"'none' raised AttributeError"):
        check_bad_actions(Echo(), actions={"none": None})


def test_rewards_of_the_sweep_are_finite() -> None:
    env = _make("math:GSM8K")
    for action in bad_actions().values():
        env.reset(seed=0)
        assert math.isfinite(env.step(action)[1])


def test_grading_parsers_take_linear_time_on_unclosed_openers() -> None:
    from gemgym.grading.math import extract_boxed
    from gemgym.grading.qa import extract_tagged_answer

    assert extract_boxed("\\boxed{1} " + "\\boxed{" * 300_000) == "1"
    assert extract_tagged_answer("<answer>a</answer>" + "<answer>" * 250_000) == "a"
    assert extract_boxed("\\boxed{" + "9" * 1_000_000 + "}") == "9" * 1_000_000
    # the last box that closes wins; escaped braces are no braces
    assert extract_boxed("\\boxed{a} \\boxed{\\{b} \\boxed{c") == "\\{b"


def test_the_sweep_actions_pickle() -> None:  # a vector backend sends them to workers
    assert pickle.loads(pickle.dumps(bad_actions())) == bad_actions()
