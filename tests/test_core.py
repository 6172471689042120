"""The core API: Env, Wrapper, seeding, state, spawn, close."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

import gemgym
from gemgym import Env, Image, MultimodalObservation, Wrapper
from gemgym.errors import ConfigError, ResetNeeded


class Counter(Env[str, str]):
    """A tiny env: observation is a random letter; reward counts steps; ends after 3."""

    def __init__(self) -> None:
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self.rng.choice("abcdefgh"), {"options": options}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self.rng.choice("abcdefgh"), float(self.t), self.t >= 3, False, {}

    def sample_random_action(self) -> str:
        return "x"


def test_reset_step_contract() -> None:
    env = Counter()
    obs, info = env.reset(seed=3, options={"k": 1})
    assert isinstance(obs, str)
    assert info == {"options": {"k": 1}}
    obs, reward, terminated, truncated, info = env.step("a")
    assert reward == 1.0 and terminated is False and truncated is False


def test_seeding_is_per_instance_and_leaves_global_state_alone() -> None:
    state = random.getstate()
    a, b = Counter(), Counter()
    seq_a = [a.reset(seed=7)[0]] + [a.step("")[0] for _ in range(2)]
    seq_b = [b.reset(seed=7)[0]] + [b.step("")[0] for _ in range(2)]
    assert seq_a == seq_b
    assert random.getstate() == state
    assert a.np_random.integers(0, 1000) == b.np_random.integers(0, 1000)


def test_different_seeds_differ() -> None:
    firsts = {Counter().reset(seed=s)[0] for s in range(40)}
    assert len(firsts) > 3


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_seed_is_a_clear_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="seed"):
        Counter().reset(seed=bad)  # type: ignore[arg-type]


def test_numpy_integer_seed_is_accepted() -> None:
    import numpy as np

    assert Counter().reset(seed=np.int64(5))[0] == Counter().reset(seed=5)[0]


def test_state_roundtrip_and_spawn() -> None:
    env = Counter()
    env.reset(seed=1)
    env.step("")
    snap = env.get_state()
    after = env.step("")
    env.set_state(snap)
    assert env.step("") == after
    env.reset(seed=1)
    env.step("")
    twin = env.spawn(same_state=True)
    assert twin.step("") == env.step("")
    fresh = env.spawn()
    assert fresh.reset(seed=9)[0] == Counter().reset(seed=9)[0]


def test_close_is_idempotent_and_context_manager() -> None:
    with Counter() as env:
        env.reset()
    assert env.closed
    env.close()
    assert env.closed


def test_pickle_roundtrip_keeps_random_stream() -> None:
    env = Counter()
    env.reset(seed=2)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.step("") == env.step("")


class Doubler(Wrapper[str, str, str, str]):
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, r, te, tr, info = self.env.step(action)
        return obs, 2 * r, te, tr, info


def test_wrapper_forwards_explicitly_without_copying() -> None:
    inner = Counter()
    env = Doubler(inner)
    env.reset(seed=0)
    env.step("")
    assert env.step("")[1] == 4.0
    # no stale snapshot: attributes are read from the inner env, not copied
    assert "t" not in vars(env)
    assert env.get_wrapper_attr("t") == 2
    assert env.unwrapped is inner
    assert env.rng is inner.rng
    assert env.sample_random_action() == "x"
    with pytest.raises(AttributeError):
        env.get_wrapper_attr("does_not_exist")


def test_wrapper_requires_an_env() -> None:
    with pytest.raises(TypeError, match=r"gemgym\.Env"):
        Doubler("not an env")  # type: ignore[arg-type]


def test_typed_wrapper_bases() -> None:
    class Upper(gemgym.ObservationWrapper[str, str, str]):
        def observation(self, observation: str) -> str:
            return observation.upper()

    class Neg(gemgym.RewardWrapper[str, str]):
        def reward(self, reward: float) -> float:
            return -reward

    class Prefix(gemgym.ActionWrapper[str, str, str]):
        def action(self, action: str) -> str:
            return "p" + action

    env = Neg(Upper(Prefix(Counter())))
    obs, _ = env.reset(seed=0)
    assert obs.isupper()
    assert env.step("a")[1] == -1.0


def test_wrapper_spawn_and_state_include_wrapper_state() -> None:
    env = gemgym.make("game:GuessTheNumber-v0-hard", max_episode_steps=3)
    env.reset(seed=0)
    env.step(r"\boxed{1}")
    twin = env.spawn(same_state=True)
    assert twin.step(r"\boxed{2}")[:4] == env.step(r"\boxed{2}")[:4]
    snap = env.get_state()
    a = env.step(r"\boxed{3}")
    env.set_state(snap)
    assert env.step(r"\boxed{3}")[:4] == a[:4]


def test_step_before_reset_raises() -> None:
    env = gemgym.make("game:GuessTheNumber-v0-easy")
    with pytest.raises(ResetNeeded, match="reset"):
        env.step(r"\boxed{1}")


def test_multimodal_observation_types() -> None:
    img = Image(b"\x89PNG fake", "image/png")
    obs = MultimodalObservation("what is x?", (img,))
    content = obs.to_openai_content()
    assert content[0] == {"type": "text", "text": "what is x?"}
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
