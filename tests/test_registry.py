"""register / make / spec / list_envs, id grammar and errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.errors import (
    DuplicateEnvError,
    EnvNotFoundError,
    InvalidEnvIdError,
    UnknownParameterError,
)
from gemgym.registry import EnvSpec, parse_env_id, registry
from gemgym.wrappers import OrderEnforcing, TimeLimit


@pytest.fixture
def scratch_id() -> Iterator[str]:
    env_id = "test:Scratch-v0"
    yield env_id
    registry.unregister(env_id)


@pytest.mark.parametrize(
    ("env_id", "parts"),
    [
        ("game:GuessTheNumber-v0-hard", ("game", "GuessTheNumber", 0, "hard")),
        ("game:Game2048-v0-extreme-hard", ("game", "Game2048", 0, "extreme-hard")),
        ("math:GSM8K", ("math", "GSM8K", None, None)),
        ("math:Math8K-3to5", ("math", "Math8K", None, "3to5")),
        ("rg:basic_arithmetic", ("rg", "basic_arithmetic", None, None)),
        ("logic:RuleTaker-d0", ("logic", "RuleTaker", None, "d0")),
        ("CartPole-v1", (None, "CartPole", 1, None)),
    ],
)
def test_id_grammar(env_id: str, parts: tuple[Any, ...]) -> None:
    assert parse_env_id(env_id) == parts


@pytest.mark.parametrize("bad", ["", "game:", "has space", ":x"])
def test_bad_ids_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidEnvIdError):
        parse_env_id(bad)


def test_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(EnvNotFoundError, match="Did you mean 'game:GuessTheNumber-v0-easy'"):
        gemgym.make("game:GuessTheNumber-v0-eassy")
    with pytest.raises(ValueError):  # GEM raised ValueError; ours is a subclass
        gemgym.make("game:NoSuchGame-v0")


def test_unknown_kwarg_names_valid_ones() -> None:
    with pytest.raises(UnknownParameterError) as e:
        gemgym.make("game:GuessTheNumber-v0-easy", max_turn=5)
    assert "max_turns" in str(e.value) and "min_number" in str(e.value)


def test_kwargs_override_spec(scratch_id: str) -> None:
    env = gemgym.make("game:GuessTheNumber-v0-easy", max_turns=2)
    assert env.unwrapped.max_turns == 2  # type: ignore[attr-defined]
    assert env.spec is not None and env.spec.kwargs["max_turns"] == 2


def test_register_duplicate_and_callable(scratch_id: str) -> None:
    from gemgym.envs.games.guess_the_number import GuessTheNumberEnv

    gemgym.register(scratch_id, lambda **kw: GuessTheNumberEnv(**kw), kwargs={"max_turns": 3})
    with pytest.raises(DuplicateEnvError):
        gemgym.register(scratch_id, "gemgym.envs.games.guess_the_number:GuessTheNumberEnv")
    env = gemgym.make(scratch_id)
    assert env.unwrapped.max_turns == 3  # type: ignore[attr-defined]
    assert gemgym.spec(scratch_id).kwargs == {"max_turns": 3}


def test_make_applies_default_wrappers_and_time_limit() -> None:
    env = gemgym.make("game:GuessTheNumber-v0-hard", max_episode_steps=2)
    assert isinstance(env, TimeLimit)
    assert isinstance(env.env, OrderEnforcing)
    env.reset(seed=0)
    assert env.step(r"\boxed{1}")[3] is False
    _, _, terminated, truncated, info = env.step(r"\boxed{2}")
    assert truncated and not terminated and info["TimeLimit.truncated"]


def test_make_with_wrapper_factories() -> None:
    from gemgym.wrappers import EpisodeStatistics

    env = gemgym.make("game:GuessTheNumber-v0-easy", wrappers=[EpisodeStatistics])
    assert isinstance(env, EpisodeStatistics)
    assert env.spec is not None and env.spec.id == "game:GuessTheNumber-v0-easy"


def test_list_envs_patterns() -> None:
    assert gemgym.list_envs("game:GuessTheNumber-*") == [
        "game:GuessTheNumber-v0-easy",
        "game:GuessTheNumber-v0-hard",
        "game:GuessTheNumber-v0-random",
    ]
    assert "game:GuessTheNumber-v0-easy" in gemgym.list_envs("guessthe")


def test_print_envs(capsys: pytest.CaptureFixture[str]) -> None:
    gemgym.print_envs("GuessTheNumber")
    assert "GuessTheNumber-v0-hard" in capsys.readouterr().out


def test_missing_module_names_the_extra(scratch_id: str) -> None:
    gemgym.register(scratch_id, "gemgym_no_such_module:Env", extra="math")
    with pytest.raises(ImportError, match=r'pip install "gemgym\[math\]"'):
        gemgym.make(scratch_id)


def test_every_builtin_env_module_imports() -> None:
    gemgym.list_envs()
    assert registry.import_errors == {}


def test_third_party_envs_register_through_entry_points(tmp_path: Path) -> None:
    dist = tmp_path / "fakeplugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[gemgym.envs]\nfake = fakeplugin:register_all\n")
    (tmp_path / "fakeplugin.py").write_text(
        "import gemgym\n"
        "def register_all():\n"
        "    gemgym.register('plugin:Guess-v0', "
        "'gemgym.envs.games.guess_the_number:GuessTheNumberEnv', kwargs={'max_turns': 2})\n"
    )
    code = (
        "import gemgym\n"
        "env = gemgym.make('plugin:Guess-v0')\n"
        "print(env.unwrapped.max_turns, 'plugin:Guess-v0' in gemgym.list_envs())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "True"]


def test_concurrent_lookups_wait_for_the_first_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread that looks an id up while another thread is loading the envs waits for the load
    instead of failing with EnvNotFoundError (the lazy-load flag is read under the lock)."""
    race_id = "test:Race-v0"
    loading = threading.Event()

    def slow_plugins() -> None:  # the last step of the first load, made slow
        loading.set()
        time.sleep(0.3)
        registry.register(EnvSpec(race_id, "gemgym.envs.games.guess_the_number:GuessTheNumberEnv"))

    monkeypatch.setattr(registry, "_specs", {})  # a fresh registry state
    monkeypatch.setattr(registry, "_builtins_loaded", False)
    monkeypatch.setattr(registry, "_load_plugins", slow_plugins)
    results: dict[str, object] = {}

    def look_up(name: str, fn: Callable[[], object]) -> None:
        try:
            results[name] = fn()
        except Exception as e:  # the assertion below reports it
            results[name] = e

    first = threading.Thread(target=look_up, args=("first", lambda: gemgym.spec(race_id)))
    first.start()
    assert loading.wait(5)
    others = [
        threading.Thread(target=look_up, args=("spec", lambda: gemgym.spec(race_id))),
        threading.Thread(target=look_up, args=("make", lambda: gemgym.make(race_id))),
        threading.Thread(target=look_up, args=("ids", lambda: race_id in gemgym.list_envs())),
    ]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(10)
    assert isinstance(results["first"], EnvSpec)
    assert isinstance(results["spec"], EnvSpec), results["spec"]
    assert isinstance(results["make"], gemgym.Env), results["make"]
    assert results["ids"] is True
