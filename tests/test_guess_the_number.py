"""GuessTheNumber: GEM's rules, with its bugs fixed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import gemgym
from gemgym.envs.games.guess_the_number import GuessTheNumberEnv
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> GuessTheNumberEnv:
    env = gemgym.make(f"game:GuessTheNumber-v0-{preset}").unwrapped
    assert isinstance(env, GuessTheNumberEnv)
    return env


@pytest.mark.parametrize(("preset", "lo", "hi", "turns"), [("easy", 1, 10, 4), ("hard", 1, 50, 7)])
def test_presets(preset: str, lo: int, hi: int, turns: int) -> None:
    env = _env(preset)
    obs, info = env.reset(seed=0)
    assert (env.min_number, env.max_number, env.max_turns) == (lo, hi, turns)
    assert f"between {lo} and {hi}" in obs and f"within {turns} turns" in obs
    assert info == {"suffix": "Enter your next guess."}


def test_correct_guess_terminates_with_reward_one() -> None:
    env = _env()
    env.reset(seed=1)
    obs, r, te, tr, info = env.step(f"I think \\boxed{{{env.game_number}}}")
    assert (r, te, tr) == (1.0, True, False)
    assert info["success"] is True
    assert "Congratulations" in obs


def test_hints_and_last_box_wins() -> None:
    env = _env("hard")
    env.reset(seed=3)
    target = env.game_number
    low = 1 if target != 1 else 2
    obs, r, te, tr, _ = env.step(f"\\boxed{{{target}}} no wait \\boxed{{{low}}}")
    if low < target:
        assert "higher" in obs
    else:
        assert "lower" in obs
    assert (r, te, tr) == (0.0, False, False)


def test_format_error_terminates_with_penalty() -> None:
    env = _env()
    env.reset(seed=0)
    obs, r, te, tr, info = env.step("five")
    assert (r, te, tr) == (-0.1, True, False)
    assert info["format_error"] is True


def test_format_error_on_last_turn_is_not_also_truncated() -> None:
    env = _env()
    env.reset(seed=0)
    guesses = [g for g in range(1, 11) if g != env.game_number][:3]
    for g in guesses:
        env.step(f"\\boxed{{{g}}}")
    _, r, te, tr, _ = env.step("no box")
    assert (r, te, tr) == (-0.1, True, False)


def test_zero_is_a_number_not_a_format_error() -> None:
    env = _env()
    env.reset(seed=0)
    obs, r, te, tr, info = env.step(r"\boxed{0}")
    assert "outside the range" in obs
    assert (r, te, tr) == (0.0, False, False)
    assert "format_error" not in info


def test_repeat_guess_is_invalid() -> None:
    env = _env("hard")
    env.reset(seed=0)
    g = 1 if env.game_number != 1 else 2
    env.step(f"\\boxed{{{g}}}")
    obs, r, *_ = env.step(f"\\boxed{{{g}}}")
    assert "already guessed" in obs and r == 0.0


def test_turn_limit_truncates_with_partial_credit() -> None:
    env = _env()
    env.reset(seed=4)
    t = env.game_number
    wrong = [g for g in range(1, 11) if g != t]
    for g in wrong[:3]:
        assert env.step(f"\\boxed{{{g}}}")[2:4] == (False, False)
    last = wrong[3]
    obs, r, te, tr, info = env.step(f"\\boxed{{{last}}}")
    assert (te, tr) == (False, True)
    assert r == pytest.approx(1 - abs(last - t) / 9)
    assert info["success"] is False


def test_a_repeated_last_guess_gets_no_partial_credit() -> None:
    env = _env()
    env.reset(seed=4)
    t = env.game_number
    wrong = [g for g in range(1, 11) if g != t]
    near = min(wrong, key=lambda g: abs(g - t))
    others = [g for g in wrong if g != near][:2]
    for g in [near, *others]:
        env.step(f"\\boxed{{{g}}}")
    obs, r, te, tr, info = env.step(f"\\boxed{{{near}}}")  # the closest miss, again
    assert (r, te, tr, info["success"]) == (0.0, False, True, False)


def test_partial_credit_can_be_turned_off() -> None:
    env = gemgym.make("game:GuessTheNumber-v0-easy", partial_credit=False)
    env.reset(seed=4)
    t = env.unwrapped.game_number  # type: ignore[attr-defined]
    wrong = [g for g in range(1, 11) if g != t]
    for g in wrong[:3]:
        env.step(f"\\boxed{{{g}}}")
    near = min(wrong[3:], key=lambda g: abs(g - t))  # the closest miss still pays nothing
    obs, r, te, tr, info = env.step(f"\\boxed{{{near}}}")
    assert (r, te, tr, info["success"]) == (0.0, False, True, False)
    env.reset(seed=4)
    assert env.step(f"\\boxed{{{t}}}")[1] == 1.0  # a win still pays 1


def test_out_of_range_last_guess_gets_no_negative_credit() -> None:
    env = _env()
    env.reset(seed=4)
    t = env.game_number
    for g in [g for g in range(1, 11) if g != t][:3]:
        env.step(f"\\boxed{{{g}}}")
    assert env.step(r"\boxed{1000}")[1] == 0.0


def test_random_preset_ranges_follow_gem() -> None:
    env = _env("random")
    seen = set()
    for s in range(200):
        env.reset(seed=s)
        lo, hi = env.min_number, env.max_number
        assert 1 <= lo <= 10 and lo + 5 <= hi <= lo + 50
        assert lo <= env.game_number <= hi
        seen.add((lo, hi))
    assert len(seen) > 50


def test_same_seed_same_target_and_make_instances_independent() -> None:
    a, b = _env("hard"), _env("hard")
    targets = set()
    for s in range(30):
        a.reset(seed=s)
        b.reset(seed=s)
        assert a.game_number == b.game_number
        targets.add(a.game_number)
    assert len(targets) > 10


def test_expert_always_solves() -> None:
    from gemgym.agents import OracleAgent

    for preset in ("easy", "hard", "random"):
        eps = list(
            gemgym.rollout(f"game:GuessTheNumber-v0-{preset}", OracleAgent(), episodes=200, seed=0)
        )
        assert all(e.success for e in eps)


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="max_number"):
        GuessTheNumberEnv(min_number=5, max_number=5)
    with pytest.raises(ConfigError):
        GuessTheNumberEnv(min_number=None, max_number=10)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    env = _env("hard")
    env.reset(seed=0)
    obs, r, te, tr, info = env.step(text)
    assert isinstance(obs, str) and not (te and tr)
    assert r in (-0.1, 0.0, 1.0) or 0.0 <= r <= 1.0


def test_huge_numbers_are_out_of_range_not_crashes() -> None:
    env = _env()
    env.reset(seed=0)
    obs, r, te, tr, _ = env.step("\\boxed{" + "9" * 5000 + "}")
    assert "outside the range" in obs and (r, te, tr) == (0.0, False, False)
    obs, *_ = env.step("\\boxed{-" + "9" * 5000 + "}")
    assert "outside the range" in obs
