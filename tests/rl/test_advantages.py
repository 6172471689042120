"""Estimators against hand-computed cases and their defining properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gemgym.errors import ConfigError
from gemgym.rl import (
    compute_advantages,
    discounted_returns,
    drgrpo_advantages,
    gae_advantages,
    grpo_advantages,
    rebn_advantages,
    reinforce_advantages,
    rloo_advantages,
)


def test_discounted_returns_by_hand() -> None:
    # G_2 = 1, G_1 = 0 + 0.9 * 1, G_0 = 0.5 + 0.9 * 0.9
    np.testing.assert_allclose(discounted_returns([0.5, 0.0, 1.0], 0.9), [1.31, 0.9, 1.0])
    np.testing.assert_allclose(discounted_returns([0.5, 0.0, 1.0], 1.0), [1.5, 1.0, 1.0])
    np.testing.assert_allclose(discounted_returns([1.0, 1.0], 0.0), [1.0, 1.0])
    assert discounted_returns([], 0.9).shape == (0,)


def test_gamma_out_of_range_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="gamma"):
        discounted_returns([1.0], 1.5)


def test_reinforce_is_the_returns() -> None:
    adv = reinforce_advantages([[0.0, 1.0], [-0.1]], gamma=0.5)
    np.testing.assert_allclose(adv[0], [0.5, 1.0])
    np.testing.assert_allclose(adv[1], [-0.1])


def test_rebn_by_hand() -> None:
    # returns with gamma 1: [1, 1] and [0] -> flat [1, 1, 0], mean 2/3, std sqrt(2)/3
    adv = rebn_advantages([[0.0, 1.0], [0.0]], gamma=1.0)
    mean, std = 2 / 3, np.sqrt(2) / 3
    np.testing.assert_allclose(adv[0], [(1 - mean) / std] * 2, rtol=1e-6)
    np.testing.assert_allclose(adv[1], [(0 - mean) / std], rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=6),
        min_size=1,
        max_size=10,
    ),
    st.floats(0.0, 1.0),
)
def test_rebn_has_mean_0_std_1_over_the_batch(rewards: list[list[float]], gamma: float) -> None:
    adv = rebn_advantages(rewards, gamma)
    flat = np.concatenate(adv)
    returns = np.concatenate(reinforce_advantages(rewards, gamma))
    assert [len(a) for a in adv] == [len(r) for r in rewards]
    assert abs(flat.mean()) < 1e-6
    if returns.std() > 1e-3:
        assert flat.std() == pytest.approx(1.0, abs=1e-4)
        # normalisation keeps the order of the returns
        lower = returns[:, None] < returns[None, :] - 1e-9
        assert np.all((flat[:, None] < flat[None, :])[lower])
    else:
        assert np.all(np.abs(flat) < 1e3)


def test_rebn_of_equal_returns_is_zero() -> None:
    assert all(np.all(a == 0) for a in rebn_advantages([[1.0], [1.0]], 1.0))


def test_grpo_by_hand_and_same_advantage_on_every_turn() -> None:
    rewards = [[0.0, 1.0], [0.0, 0.0, 0.0], [1.0], [0.5]]
    groups = ["a", "a", "b", "b"]
    adv = grpo_advantages(rewards, groups)
    # group a: returns 1 and 0 -> +1, -1; group b: 1 and 0.5 -> +1, -1
    np.testing.assert_allclose(adv[0], [1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(adv[1], [-1.0, -1.0, -1.0], atol=1e-5)
    np.testing.assert_allclose(adv[2], [1.0], atol=1e-5)
    np.testing.assert_allclose(adv[3], [-1.0], atol=1e-5)
    for a in adv:
        assert np.all(a == a[0])


def test_grpo_ignores_when_the_reward_came() -> None:
    # GRPO's failure mode: an early and a late reward of the same size get the same credit
    early = grpo_advantages([[1.0, 0.0, 0.0], [0.0]], [0, 0])
    late = grpo_advantages([[0.0, 0.0, 1.0], [0.0]], [0, 0])
    np.testing.assert_allclose(early[0], late[0])
    # ReBN with gamma < 1 tells them apart
    assert rebn_advantages([[1.0, 0.0, 0.0], [0.0]], 0.9)[0][0] != pytest.approx(
        rebn_advantages([[0.0, 0.0, 1.0], [0.0]], 0.9)[0][0]
    )


def test_singleton_groups_get_zero() -> None:
    for fn in (grpo_advantages, drgrpo_advantages, rloo_advantages):
        adv = fn([[1.0], [0.0, 0.0]], [0, 1])
        assert all(np.all(a == 0) for a in adv)


def test_drgrpo_and_rloo_by_hand() -> None:
    rewards = [[1.0], [0.0], [0.5]]
    groups = [0, 0, 0]
    np.testing.assert_allclose(np.concatenate(drgrpo_advantages(rewards, groups)), [0.5, -0.5, 0.0])
    # RLOO: 1 - mean(0, .5) = .75; 0 - mean(1, .5) = -.75; .5 - mean(1, 0) = 0
    np.testing.assert_allclose(np.concatenate(rloo_advantages(rewards, groups)), [0.75, -0.75, 0.0])


def test_gae_by_hand() -> None:
    rewards, values = [[0.0, 1.0]], [[0.5, 0.8]]
    # terminated: delta_1 = 1 - 0.8 = 0.2; delta_0 = 0 + 0.9 * 0.8 - 0.5 = 0.22
    adv, targets = gae_advantages(rewards, values, gamma=0.9, lam=0.5)
    np.testing.assert_allclose(adv[0], [0.22 + 0.9 * 0.5 * 0.2, 0.2])
    np.testing.assert_allclose(targets[0], adv[0] + np.array([0.5, 0.8]))
    # lam = 1 gives G_t - V(s_t); a truncated episode bootstraps from V(s_T)
    adv1, _ = gae_advantages(rewards, values, gamma=0.9, lam=1.0, bootstrap=[2.0])
    g = discounted_returns([0.0, 1.0 + 0.9 * 2.0], 0.9)
    np.testing.assert_allclose(adv1[0], g - np.array([0.5, 0.8]))


def test_gae_checks_shapes() -> None:
    with pytest.raises(ConfigError, match="values"):
        gae_advantages([[0.0, 1.0]], [[0.5]])


def test_compute_advantages_dispatch_and_errors() -> None:
    rewards = [[0.0, 1.0], [0.0]]
    np.testing.assert_allclose(
        np.concatenate(compute_advantages("rebn", rewards, gamma=0.9)),
        np.concatenate(rebn_advantages(rewards, 0.9)),
    )
    with pytest.raises(ConfigError, match="group_ids"):
        compute_advantages("grpo", rewards)
    with pytest.raises(ConfigError, match="values"):
        compute_advantages("gae", rewards)
    with pytest.raises(ConfigError, match="unknown estimator"):
        compute_advantages("ppo2", rewards)
    with pytest.raises(ConfigError, match="group ids"):
        compute_advantages("rloo", rewards, group_ids=[0])


def test_rebn_group_by_hand_and_per_group_moments() -> None:
    from gemgym.rl import GROUP_ESTIMATORS, rebn_group_advantages

    # group "a": returns (gamma 0.5) [0.5, 1] and [0.25, 0.5]; group "b": [1] and [0]
    rewards = [[0.0, 1.0], [0.0, 0.5], [1.0], [0.0]]
    ids = ["a", "a", "b", "b"]
    adv = rebn_group_advantages(rewards, ids, gamma=0.5)
    flat_a = np.array([0.5, 1.0, 0.25, 0.5])
    mean, std = flat_a.mean(), flat_a.std()
    np.testing.assert_allclose(adv[0], ([0.5, 1.0] - mean) / std, rtol=1e-6)
    np.testing.assert_allclose(adv[1], ([0.25, 0.5] - mean) / std, rtol=1e-6)
    np.testing.assert_allclose(adv[2], [1.0], rtol=1e-6)  # (1 - 0.5) / 0.5
    np.testing.assert_allclose(adv[3], [-1.0], rtol=1e-6)
    # unlike batch-wide ReBN, each group is centred on its own mean
    whole = rebn_advantages(rewards, 0.5)
    assert not np.allclose(np.concatenate(whole), np.concatenate(adv))
    # a group whose returns are all equal gets 0; dispatch, and group ids are required
    same = compute_advantages("rebn_group", [[1.0], [1.0], [0.0], [1.0]], group_ids=[0, 0, 1, 1])
    assert same[0][0] == 0.0 and same[1][0] == 0.0 and same[2][0] < 0 < same[3][0]
    assert "rebn_group" in GROUP_ESTIMATORS
    with pytest.raises(ConfigError, match="group_ids"):
        compute_advantages("rebn_group", rewards, gamma=0.5)
