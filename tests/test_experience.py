"""Episode records, rollout and JSONL round trips."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym import Image, MultimodalObservation
from gemgym.agents import BaseAgent, FunctionAgent, OracleAgent, RandomAgent
from gemgym.errors import ConfigError
from gemgym.experience import Episode, Transition, read_jsonl, rollout, summarize, write_jsonl
from gemgym.rl.collector import Collector
from gemgym.vector import VectorEnv


def test_rollout_is_reproducible_and_independent_of_batch_size() -> None:
    a = list(rollout("game:GuessTheNumber-v0-hard", RandomAgent(), episodes=10, seed=5))
    b = sorted(
        rollout("game:GuessTheNumber-v0-hard", RandomAgent(), episodes=10, seed=5, batch_size=4),
        key=lambda e: e.index,
    )
    assert [e.index for e in a] == list(range(10))
    assert [e.seed for e in a] == list(range(5, 15))
    assert [e.initial_observation for e in a] == [e.initial_observation for e in b]
    # the oracle's play depends only on the env, so it is identical across batch sizes
    oa = list(rollout("game:GuessTheNumber-v0-hard", OracleAgent(), episodes=10, seed=5))
    ob = sorted(
        rollout("game:GuessTheNumber-v0-hard", OracleAgent(), episodes=10, seed=5, batch_size=3),
        key=lambda e: e.index,
    )
    assert [e.to_dict() for e in oa] == [e.to_dict() for e in ob]


def test_episode_properties() -> None:
    (ep,) = rollout("game:GuessTheNumber-v0-easy", OracleAgent(), episodes=1, seed=0)
    assert ep.done and ep.success and ep.total_return == 1.0
    assert ep.length == len(ep.rewards) >= 1
    assert ep.transitions[-1].terminated and not ep.transitions[-1].truncated
    assert ep.transitions[0].observation == ep.initial_observation


def test_max_steps_cuts_episodes() -> None:
    eps = list(
        rollout("game:GuessTheNumber-v0-hard", RandomAgent(), episodes=3, seed=0, max_steps=1)
    )
    assert all(e.length == 1 for e in eps)


def test_rollout_from_an_env_instance() -> None:
    env = gemgym.make("game:GuessTheNumber-v0-easy")
    eps = list(rollout(env, OracleAgent(), episodes=5, seed=1, batch_size=2))
    assert len(eps) == 5 and all(e.env_id == "game:GuessTheNumber-v0-easy" for e in eps)


def test_rollout_validates_arguments() -> None:
    with pytest.raises(ConfigError):
        list(rollout("game:GuessTheNumber-v0-easy", OracleAgent(), episodes=-1))
    with pytest.raises(ConfigError):
        list(rollout("game:GuessTheNumber-v0-easy", OracleAgent(), episodes=1, batch_size=0))


def test_jsonl_roundtrip(tmp_path: Path) -> None:
    eps = list(rollout("game:GuessTheNumber-v0-hard", RandomAgent(), episodes=6, seed=0))
    path = tmp_path / "traces.jsonl"
    assert write_jsonl(eps, path) == 6
    back = list(read_jsonl(path))
    assert [e.to_dict() for e in back] == [e.to_dict() for e in eps]
    assert summarize(back) == summarize(eps)


def test_jsonl_keeps_multimodal_observations(tmp_path: Path) -> None:
    obs = MultimodalObservation("find x", (Image(b"\x00\x01png", "image/png"),))
    ep = Episode("math:Geo", 0, 1, obs, [Transition(obs, r"\boxed{3}", 1.0, True, False, {"k": 1})])
    path = tmp_path / "mm.jsonl"
    write_jsonl([ep], path)
    (back,) = read_jsonl(path)
    assert back.initial_observation == obs
    assert back.transitions[0].info == {"k": 1}


def test_read_jsonl_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        list(read_jsonl(path))


def _sorted(episodes: Iterable[Episode]) -> list[dict[str, Any]]:
    return [e.to_dict() for e in sorted(episodes, key=lambda e: e.index)]


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_oracle_agent_runs_on_every_backend(backend: str) -> None:
    """The oracle reads its moves through the vector env, so it plays where the envs live."""
    expected = _sorted(
        rollout("game:GuessTheNumber-v0-hard", OracleAgent(), episodes=5, seed=4, batch_size=2)
    )
    with gemgym.make_vec(
        "game:GuessTheNumber-v0-hard", 2, backend=backend, autoreset_mode="disabled"
    ) as venv:
        got = _sorted(rollout(venv, OracleAgent(), episodes=5, seed=4))
        venv.reset(seed=0)  # a vector env that was passed in is left open
    assert got == expected
    assert all(e["success"] for e in got)


def test_rollout_refuses_a_vector_env_that_resets_itself() -> None:
    with (
        gemgym.make_vec("game:GuessTheNumber-v0-easy", 2) as venv,
        pytest.raises(ConfigError, match="disabled"),
    ):
        list(rollout(venv, OracleAgent(), episodes=2))


def test_agents_get_observations_and_slots_never_envs() -> None:
    seen: list[set[str]] = []

    class Recorder(BaseAgent):
        def act(self, observations: Sequence[Any], **kwargs: Any) -> list[Any]:
            seen.append(set(kwargs))
            assert isinstance(kwargs["venv"], VectorEnv)
            assert all(isinstance(o, str) for o in observations)
            return [r"\boxed{1}"] * len(observations)

    list(rollout("game:GuessTheNumber-v0-easy", Recorder(), episodes=3, seed=0, batch_size=2))
    assert seen and all(keys == {"slots", "venv"} for keys in seen)


def test_rollout_and_collector_play_the_same_episodes() -> None:
    """One engine: a rollout and a collector with the same seeds and policy agree exactly."""

    def policy(obs: list[Any]) -> list[str]:
        return ["\\boxed{" + str(10 + len(o) % 50) + "}" for o in obs]

    a = _sorted(
        rollout(
            "game:GuessTheNumber-v0-hard",
            FunctionAgent(policy),
            episodes=6,
            seed=9,
            batch_size=3,
            max_steps=4,
        )
    )
    with Collector("game:GuessTheNumber-v0-hard", policy, num_envs=3, seed=9, max_turns=4) as col:
        b = [e.to_dict() for e in col.collect(6).episodes]
    assert a == b


def test_rollout_of_an_id_takes_wrappers() -> None:
    from gemgym.wrappers.common import TimeLimit

    eps = list(
        rollout(
            "game:GuessTheNumber-v0-hard",
            FunctionAgent(lambda obs: ["\\boxed{1}"] * len(obs)),
            episodes=2,
            seed=0,
            wrappers=[lambda env: TimeLimit(env, 2)],
        )
    )
    assert [e.length for e in eps] == [2, 2] and all(e.transitions[-1].truncated for e in eps)
