"""Bugs GEM's examples ran into: a reset at dataset size 10**9, an unclosed vector env at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

import gemgym
from gemgym.envs.reasoning_gym import permuted_index
from helpers.extras import needs_module


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 500, 1001])
def test_permuted_index_is_a_seeded_permutation(n: int) -> None:
    for seed in (0, 5, -3, 2**70):
        order = [permuted_index(n, seed, i) for i in range(n)]
        assert sorted(order) == list(range(n))
        assert order == [permuted_index(n, seed, i) for i in range(n)]
    if n >= 64:
        assert [permuted_index(n, 1, i) for i in range(n)] != [
            permuted_index(n, 2, i) for i in range(n)
        ]


def test_reasoning_gym_reset_is_constant_time_at_a_billion_items() -> None:
    needs_module("reasoning_gym", "rg")
    env = gemgym.make("rg:leg_counting", size=10**9, dataset_seed=10)
    env.reset(seed=0)  # the first item of a task may load its data
    start = time.perf_counter()
    indices = [env.reset()[1]["index"] for _ in range(50)]
    indices += [env.reset(seed=s)[1]["index"] for s in range(50)]
    elapsed = time.perf_counter() - start
    # list(range(10**9)) alone takes seconds and ~40 GB; 100 resets here take milliseconds
    assert elapsed < 2.0, elapsed
    assert all(0 <= i < 10**9 for i in indices) and len(set(indices)) > 90
    assert env.reset(seed=3)[1]["index"] == env.reset(seed=3)[1]["index"]  # seeded determinism
    obs, reward, *_ = env.step(env.unwrapped.expert_action())
    assert reward == 1.0


_UNCLOSED = """
import gemgym
venv = gemgym.make_vec(["game:GuessTheNumber-v0-easy"] * 3, {how})
venv.reset(seed=0)
venv.step([r"\\boxed{{3}}"] * 3)
print("stepped", flush=True)
"""


@pytest.mark.parametrize("how", ["async_mode=True", "backend='thread'", "backend='sync'"])
def test_an_unclosed_vector_env_does_not_hang_the_exit(how: str) -> None:
    code = textwrap.dedent(_UNCLOSED.format(how=how))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stepped"


def test_an_unclosed_gem_async_vector_env_does_not_hang_the_exit() -> None:
    # GEM's examples make AsyncVectorEnvs and never close them
    code = (
        "import gemgym.compat.gem as gem\n"
        "v = gem.make_vec(['game:GuessTheNumber-v0-easy'] * 3, async_mode=True)\n"
        "v.reset()\n"
        "v.step([r'\\boxed{3}'] * 3)\n"
        "print('stepped', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stepped"


def test_an_unclosed_process_vector_env_does_not_hang_the_exit(tmp_path: object) -> None:
    code = (
        "import gemgym\n"
        "if __name__ == '__main__':\n"
        "    v = gemgym.make_vec(['game:GuessTheNumber-v0-easy'] * 2, backend='process')\n"
        "    v.reset(seed=0)\n"
        "    print('stepped', flush=True)\n"
    )
    script = f"{tmp_path}/unclosed.py"
    with open(script, "w") as f:
        f.write(code)
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stepped"
