"""Token weights and masks; the collector's episodes and groups on real vector envs."""

from __future__ import annotations

import numpy as np
import pytest

import gemgym
from gemgym.errors import ConfigError
from gemgym.rl import Collector, pad_batch, token_weights, tokenize_segments

ENV = "game:GuessTheNumber-v0-easy"


def test_token_weights_mask_observations_and_tool_outputs() -> None:
    ep = tokenize_segments(
        [
            ("prompt", [1]),
            ("observation", [10, 11]),
            ("action", [20, 21, 22]),
            ("tool", [30]),
            ("action", [40]),
            ("observation", [50, 51]),
            ("action", [60, 61]),
        ]
    )
    assert ep.input_ids.tolist() == [1, 10, 11, 20, 21, 22, 30, 40, 50, 51, 60, 61]
    assert ep.turn_index.tolist() == [-1, -1, -1, 0, 0, 0, -1, 1, -1, -1, 2, 2]
    assert ep.num_turns == 3
    w = token_weights(ep, [0.5, -1.0, 2.0])
    assert w.tolist() == [0, 0, 0, 0.5, 0.5, 0.5, 0, -1.0, 0, 0, 2.0, 2.0]
    assert np.all(w[~ep.action_mask] == 0)
    with pytest.raises(ConfigError, match="advantages"):
        token_weights(ep, [1.0, 2.0])


def test_pad_batch_right_pads_and_truncates() -> None:
    a = tokenize_segments([("observation", [1, 2]), ("action", [3])])
    b = tokenize_segments([("observation", [4]), ("action", [5, 6, 7])])
    ids, att, w = pad_batch([a, b], [token_weights(a, [1.0]), token_weights(b, [2.0])], pad_id=0)
    assert ids.tolist() == [[1, 2, 3, 0], [4, 5, 6, 7]]
    assert att.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert w.tolist() == [[0, 0, 1, 0], [0, 2, 2, 2]]
    ids, _, w = pad_batch([b], [token_weights(b, [2.0])], pad_id=0, max_length=2)
    assert ids.tolist() == [[4, 5]] and w.tolist() == [[0, 2]]


def _expert_from_history(episodes: list[gemgym.experience.Episode]) -> list[str]:
    """Binary search from the observations alone (a policy that needs the history)."""
    import re

    out = []
    for ep in episodes:
        lo, hi = 1, 10
        for tr in ep.transitions:
            m = re.search(
                r"guessed (\d+), and the target number is (higher|lower)", tr.next_observation
            )
            if m:
                g = int(m.group(1))
                lo, hi = (g + 1, hi) if m.group(2) == "higher" else (lo, g - 1)
        out.append(f"\\boxed{{{(lo + hi) // 2}}}")
    return out


def test_collector_plays_whole_episodes_with_a_history_policy() -> None:
    with Collector(ENV, _expert_from_history, num_envs=3, seed=7, history=True) as col:
        batch = col.collect(10)  # more episodes than envs: slots are refilled
    assert len(batch) == 10
    assert [e.index for e in batch.episodes] == list(range(10))
    assert all(e.done and e.success for e in batch.episodes)
    assert batch.summary()["success_rate"] == 1.0
    # binary search over 1..10 takes at most 4 turns
    assert max(e.length for e in batch.episodes) <= 4
    assert len({e.seed for e in batch.episodes}) == 10  # group_size 1: a seed per episode


def test_collector_groups_share_seed_and_initial_state() -> None:
    guesses = iter(range(10**6))

    def policy(obs: list[str]) -> list[str]:
        return [f"\\boxed{{{next(guesses) % 10 + 1}}}" for _ in obs]

    vec = gemgym.make_vec(ENV, 4, autoreset_mode="disabled")
    col = Collector(vec, policy, group_size=3, seed=100)
    b1 = col.collect(6)
    b2 = col.collect(3)
    vec.close()
    assert b1.group_ids == [0, 0, 0, 1, 1, 1] and b2.group_ids == [2, 2, 2]
    assert [e.seed for e in b1.episodes] == [100, 100, 100, 101, 101, 101]
    assert [e.seed for e in b2.episodes] == [102] * 3  # fresh seeds on the next call
    # same seed => same hidden number, so members of a group see the same game
    env = gemgym.make(ENV)
    for g in (0, 1):
        targets = set()
        for e in b1.episodes[3 * g : 3 * g + 3]:
            env.reset(seed=e.seed)
            targets.add(env.unwrapped.game_number)  # type: ignore[attr-defined]
        assert len(targets) == 1
    # GRPO advantages are constant within an episode and sum to ~0 within a group
    adv = b1.advantages("grpo")
    for a in adv:
        assert np.all(a == a[0])
    assert abs(sum(a[0] for a in adv[:3])) < 1e-6


def test_collector_validates_its_inputs() -> None:
    vec = gemgym.make_vec(ENV, 2)  # default autoreset
    with pytest.raises(ConfigError, match="disabled"):
        Collector(vec, lambda o: o)
    vec.close()
    with Collector(ENV, lambda o: ["\\boxed{1}"], num_envs=2, group_size=2) as col:
        with pytest.raises(ConfigError, match="multiple of group_size"):
            col.collect(3)
        with pytest.raises(ConfigError, match="actions"):
            col.collect(2)  # the policy returns one action for two observations


def test_collector_max_turns_cuts_episodes() -> None:
    with Collector(ENV, lambda o: ["\\boxed{1}"] * len(o), num_envs=2, max_turns=1) as col:
        batch = col.collect(2)
    assert all(e.length == 1 for e in batch.episodes)


def test_collector_state_saves_and_restores_where_the_seeds_stand() -> None:
    with Collector(ENV, lambda obs: ["\\boxed{5}"] * len(obs), num_envs=2, seed=7) as col:
        assert col.next_group == 0 and col.state_dict() == {"next_group": 0}
        col.collect(4)
        state = col.state_dict()
        assert state == {"next_group": 4} and col.next_group == 4
        fresh = [e.seed for e in col.collect(4).episodes]
        assert fresh == [7 + 4, 7 + 5, 7 + 6, 7 + 7]  # never a seed of the first batch
        col.load_state_dict(state)  # a batch thrown away is played again from the same seeds
        assert [e.seed for e in col.collect(4).episodes] == fresh
        for bad in ({"next_group": -1}, {"group": 3}, {"next_group": "3"}, {"next_group": True}):
            with pytest.raises(ConfigError, match=r"Collector\.state_dict"):
                col.load_state_dict(bad)  # type: ignore[arg-type]
        assert col.next_group == 8  # unchanged by the refused states
