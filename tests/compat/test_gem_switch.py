"""The import switch: GEM's module paths resolve to gemgym.compat.gem, never over a real gem."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gemgym.compat.gem as layer

# GEM's public modules and the names GEM code imports from them
GEM_NAMES = {
    "gem": ["Env", "make", "make_vec", "print_envs", "register"],
    "gem.core": ["Env", "EnvWrapper"],
    "gem.envs.registration": ["ENV_REGISTRY", "EnvSpec", "make", "make_vec", "register"],
    "gem.envs.math_env": ["MathEnv"],
    "gem.envs.math_visual_env": ["MathVisualEnv"],
    "gem.envs.code_env": ["CodeEnv"],
    "gem.envs.qa_env": ["QaEnv"],
    "gem.envs.reasoning_gym": ["ReasoningGymEnv"],
    "gem.envs.game_env.guess_the_number": ["GuessTheNumberEnv"],
    "gem.envs.game_env.fifteen_puzzle": ["FifteenPuzzleEnv"],
    "gem.envs.game_env.game_2048": ["Game2048Env"],
    "gem.envs.game_env.sokoban": ["SokobanEnv"],
    "gem.envs.game_env.crosswords": ["CrosswordsEnv"],
    "gem.wrappers.wrapper_factory": ["WRAPPER_FACTORY", "TOKENIZER_REQUIRED", "get_wrapper_fns"],
    "gem.wrappers.observation_wrapper": ["ObservationWrapper"],
    "gem.wrappers.episode_tracking_wrapper": ["EpisodeTrackingWrapper"],
    "gem.tools.base_tool": ["BaseTool"],
    "gem.tools.python_code_tool": ["PythonCodeTool"],
    "gem.tools.search_tool": ["SearchTool"],
    "gem.tools.mcp_tool": ["MCPTool"],
    "gem.tools.tool_env_wrapper": ["ToolEnvWrapper"],
    "gem.vector.vector_env": ["VectorEnv", "AutoresetMode"],
    "gem.vector.sync_vector_env": ["SyncVectorEnv"],
    "gem.vector.async_vector_env": ["AsyncVectorEnv"],
    "gem.utils.debug": ["run_and_print_episode", "run_and_print_episode_with_selective_step"],
    "gem.utils.constants": ["TERMINAL_STATE", "LanguageGameReward"],
    "gem.utils.parsing": ["extract_last_boxed_answer", "extract_last_tagged_answer"],
    "gem.utils.seeding": ["np_random", "set_seed"],
    "gem.utils.sandbox": ["run_python"],
    "gem.utils.math_grader": ["boxed_reward_fn", "grade"],
    "gem.utils.qa_em": ["em_check"],
}


@pytest.mark.usefixtures("gem_switch")
@pytest.mark.parametrize("module", sorted(GEM_NAMES))
def test_gem_module_paths_resolve_to_the_layer(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod is importlib.import_module("gemgym.compat." + module)
    for name in GEM_NAMES[module]:
        assert hasattr(mod, name), f"{module}.{name}"


@pytest.mark.usefixtures("gem_switch")
def test_from_imports_and_the_registry_are_shared() -> None:
    import gem
    from gem.envs.registration import ENV_REGISTRY
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    assert gem is layer
    assert ENV_REGISTRY is layer.envs.registration.ENV_REGISTRY
    assert {"concat", "concat_chat_on_reset", "episode_tracking"} <= set(WRAPPER_FACTORY)


def test_the_switch_never_shadows_a_real_gem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "gem"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert layer.real_gem_location() == str(real / "__init__.py")
        assert layer.install() is False
        assert "real 'gem' package is installed" in capsys.readouterr().err
        import gem

        assert gem.REAL
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("gem", None)
        layer.uninstall()


SCRIPT = """
import sys
import gem
from gem.utils.debug import run_and_print_episode
env = gem.make("game:GuessTheNumber-v0-easy", seed=int(sys.argv[1]))
run_and_print_episode(env, lambda obs: env.sample_random_action())
print("GEM-RAN", gem.__name__, sys.argv[1:])
"""


@pytest.mark.parametrize(
    "runner", [["-m", "gemgym.compat.gem"], ["-m", "gemgym", "gem-run"]], ids=["module", "cli"]
)
def test_an_unmodified_script_runs_through_the_switch(tmp_path: Path, runner: list[str]) -> None:
    script = tmp_path / "gem_script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, *runner, str(script), "7", "--flag"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "GEM-RAN gemgym.compat.gem ['7', '--flag']" in done.stdout


def test_a_module_runs_with_dash_m(tmp_path: Path) -> None:
    pkg = tmp_path / "tests_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "runme.py").write_text(
        "import sys, gem\nif __name__ == '__main__':\n    print('MOD', sys.argv[1:])\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gemgym.compat.gem", "-m", "tests_pkg.runme", "a"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "MOD ['a']" in done.stdout


def test_the_pytest_plugin_lets_gem_tests_import_gem(tmp_path: Path) -> None:
    (tmp_path / "test_uses_gem.py").write_text(
        textwrap.dedent(
            """
            import gem
            from gem.utils.constants import TERMINAL_STATE

            def test_make():
                env = gem.make("game:GuessTheNumber-v0-easy")
                obs, info = env.reset(0)
                assert isinstance(obs, str) and TERMINAL_STATE
            """
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "gemgym.compat.gem.pytest_plugin",
            "test_uses_gem.py",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "gem: gemgym.compat.gem" in done.stdout
