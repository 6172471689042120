"""make_vec and vector.make_vector_env check their arguments in one place and agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import gemgym
from gemgym.errors import ConfigError, GemGymError
from gemgym.vector import make_vector_env

GTN = "game:GuessTheNumber-v0-easy"


def _error(fn: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises(GemGymError) as e:
        fn().close()
    return type(e.value), str(e.value)


@pytest.mark.parametrize(
    ("ids", "kwargs", "options"),
    [
        ([GTN, GTN], [{}], {}),  # one kwargs mapping for two envs
        ([GTN, GTN], [{}, {}, {}], {}),
        ([GTN, "game:GuessTheNumbr-v0-easy"], None, {}),  # unknown id
        ([GTN, "not an id"], None, {}),
        ([GTN], None, {"backend": "bogus"}),
        ([GTN], None, {"no_such_option": 1}),
        ([], None, {}),
    ],
)
def test_make_vec_and_make_vector_env_reject_the_same_arguments_alike(
    ids: list[str], kwargs: list[dict[str, Any]] | None, options: dict[str, Any]
) -> None:
    backend = options.pop("backend", "sync")
    from_make_vec = _error(
        lambda: gemgym.make_vec(ids, vec_kwargs=kwargs, backend=backend, backend_options=options)
    )
    from_vector = _error(lambda: make_vector_env(ids, kwargs, backend=backend, **options))
    assert from_make_vec == from_vector


@pytest.mark.parametrize("num_envs", [0, -1, "2", 2.0, True])
def test_make_vec_names_a_bad_num_envs(num_envs: Any) -> None:
    with pytest.raises(ConfigError, match="num_envs"):
        gemgym.make_vec(GTN, num_envs=num_envs)


def test_make_vec_num_envs_must_match_a_list_of_ids() -> None:
    with pytest.raises(ConfigError, match="num_envs=3 but 2 env ids"):
        gemgym.make_vec([GTN, GTN], num_envs=3)


def test_make_vec_merges_shared_and_per_env_kwargs() -> None:
    from gemgym.envs.games.guess_the_number import GuessTheNumberEnv
    from gemgym.registry import registry

    built: list[dict[str, Any]] = []

    def factory(**kw: Any) -> GuessTheNumberEnv:
        built.append(kw)
        return GuessTheNumberEnv(**kw)

    gemgym.register("test:MakeVecKwargs-v0", factory, kwargs={"min_number": 1})
    try:
        with gemgym.make_vec(
            "test:MakeVecKwargs-v0", num_envs=2, vec_kwargs=[{"max_turns": 2}, {}], max_turns=4
        ) as venv:
            assert venv.num_envs == 2
    finally:
        registry.unregister("test:MakeVecKwargs-v0")
    assert built == [
        {"min_number": 1, "max_turns": 2},
        {"min_number": 1, "max_turns": 4},
    ]
