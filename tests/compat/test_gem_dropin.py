"""GEM's drop-in behaviours in the layer: attribute writes, re-grading, env.dataset, signatures,
item order, vector seeds, GEM's newer module paths, and where the switch finds ``gem``."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import gemgym.compat.gem as gem
from gemgym.compat.gem import GemCompatWarning
from helpers.extras import needs_module


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore", GemCompatWarning)


def _rows(n: int) -> list[dict[str, str]]:
    return [{"problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(n)]


def test_gems_evaluation_loop_sets_the_answer_and_steps_again() -> None:
    # GEM's tests/test_env/test_qa.py evaluate_llm: no reset, env.answer set before each step
    env = gem.make("math:GSM8K", dataset=_rows(5))
    golds = ["7", "11", "13"]
    rewards = []
    for gold in golds:
        env.answer = gold
        rewards.append(env.step(rf"The answer is \boxed{{{gold}}}")[1])
    assert rewards == [1.0, 1.0, 1.0]
    assert env.answer == "13"
    env.answer = "99"
    assert env.step(r"\boxed{13}")[1] == 0.0  # graded against what was set, not the item
    env.reset()
    assert env.answer != "99"  # a reset serves the next item's own answer


def test_code_env_grades_against_the_tests_set() -> None:
    env = gem.make("code:CodeContest", dataset="sample")
    env.reset()
    env.tests = {"inputs": ["2 3\n"], "outputs": ["5\n"]}
    solution = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert env.step(solution)[1] == 1.0
    env.tests = {"inputs": ["2 3\n"], "outputs": ["6\n"]}
    assert env.step(solution)[1] == 0.0


def test_a_game_after_its_end_still_returns_the_end_without_reward() -> None:
    env = gem.make("game:GuessTheNumber-v0-easy", seed=0)
    env.reset()
    end = env.step("no guess")
    assert end[2]
    again = env.step(r"\boxed{3}")
    assert again[1] == 0.0 and again[4]["episode_over"]


def test_env_dataset_is_a_hugging_face_dataset_with_gems_columns() -> None:
    datasets = needs_module("datasets", "datasets")
    env = gem.make("qa:HotpotQA", dataset="sample")
    ds = env.dataset
    assert isinstance(ds, datasets.Dataset)
    assert ds["question"][0].startswith("For any question, always reason")
    first = ds.select(range(2))
    assert len(first) == 2
    env.answer = ds["answer"][1]
    assert env.step(f"<answer>{ds['answer'][1][0]}</answer>")[1] == 1.0


def test_gems_positional_signatures() -> None:
    from gemgym.compat.gem.envs.math_env import MathEnv
    from gemgym.compat.gem.envs.qa_env import QaEnv
    from gemgym.compat.gem.vector.sync_vector_env import SyncVectorEnv
    from gemgym.compat.gem.vector.vector_env import AutoresetMode

    math = MathEnv("sample", "train")
    assert isinstance(math.reset()[0], str)
    qa = QaEnv("", None, _rows(3), "problem", "answer", 0)
    assert qa.reset()[0].endswith("+ 1?\n")
    with pytest.raises(TypeError):
        MathEnv("sample", split="train", dataset_name="x")  # given twice
    ids = ["game:GuessTheNumber-v0-easy"] * 2
    vec = SyncVectorEnv(
        ids, [lambda: gem.make(ids[0]), lambda: gem.make(ids[0])], AutoresetMode.NEXT_STEP
    )
    assert vec.autoreset_mode is AutoresetMode.NEXT_STEP and len(vec.envs) == 2
    vec.close()


def test_item_order_is_fixed_unless_seeded_and_vector_seeds_are_offset() -> None:
    a = gem.make("math:GSM8K", dataset=_rows(6))
    b = gem.make("math:GSM8K", dataset=_rows(6))
    order = [a.reset()[0] for _ in range(6)]
    assert order == [b.reset()[0] for _ in range(6)]
    assert sorted(order) == sorted(r["problem"] for r in _rows(6))  # one pass, each once
    assert a.reset(seed=4)[0] == b.reset(seed=4)[0]
    vec = gem.make_vec(["math:GSM8K"] * 3, dataset=_rows(40))
    seeded = vec.reset(seed=3)[0]
    single = [
        gem.make("math:GSM8K", dataset=_rows(40), seed=i).reset(seed=3 + i)[0] for i in range(3)
    ]
    assert list(seeded) == single


def test_gems_wikigame_and_webshop_module_paths(gem_switch: None) -> None:
    from gem.envs.game_env.wikigame import WikiGameEnv
    from gem.envs.webshop.webshop import WebshopEnv

    wiki = WikiGameEnv(30)
    assert wiki.max_turns == 30 and "Wikipedia" in wiki.reset(seed=1)[0]
    shop = WebshopEnv("text", "test")
    assert isinstance(shop.reset(seed=1)[0], str)
    assert shop.gemgym_env.unwrapped.error_tolerance == 0  # GEM's class default
    assert "game:WikiGame-v0-hard" in gem.envs.registration.ENV_REGISTRY


def test_webshop_reset_takes_gems_session_and_instruction_text() -> None:
    # GEM's WebshopEnv.reset(seed, session, instruction_text): an int session picks the goal
    env = gem.make("webshop:test-text")
    with warnings.catch_warnings():
        warnings.simplefilter("error", GemCompatWarning)  # taken, not ignored
        env.reset(session=3)
        assert env.goal_index == 3
        _, info = env.reset(None, session=5, instruction_text="i want a red hat")
        assert env.goal_index == 5 and "i want a red hat" in info["suffix"]
        env.reset(session="abc")  # GEM: another session is a random goal
        assert 0 <= env.goal_index < env.num_goals
    with pytest.warns(GemCompatWarning, match="session"):
        gem.make("game:GuessTheNumber-v0-easy").reset(session=3)  # not a WebShop keyword


def test_wikigame_reset_fixed_page_starts_the_episode_it_names() -> None:
    # GEM's tests/test_env/test_wikigame.py: _reset_fixed_page, then step from that start
    env = gem.make("game:WikiGame-v0-easy")
    obs, info = env._reset_fixed_page("copy", "pickle")
    assert "You started at 'copy' and your target page is 'pickle'" in obs
    assert env.current_page.title == "copy" and env.target_page.title == "pickle"
    obs, reward, terminated, truncated, _ = env.step(r"\boxed{Built-in_Types}")
    assert env.current_page.title == "Built-in Types" and reward == -0.05
    assert env.target_page.title == "pickle"  # the step played the fixed episode
    assert not (terminated or truncated)
    env._reset_fixed_page("copy", "pickle")  # a second fixed episode, mid-way through one
    assert env.step(r"\boxed{pickle}")[1:3] == (1.0, True)
    assert (
        env._reset_fixed_page("copy", "pickle", seed=3)[0]
        == env.reset(options={"start": "copy", "target": "pickle"})[0]
    )


def test_the_switch_finds_gem_where_plain_python_would(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "gem").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "gem" / "__init__.py").write_text("WHO = 'checkout'\n")
    script = "import gem\nprint(getattr(gem, 'WHO', 'layer'))\n"
    (project / "beside.py").write_text(script)
    (elsewhere / "away.py").write_text(script)

    def run(path: Path, cwd: Path) -> str:
        cmd = [sys.executable, "-m", "gemgym.compat.gem", str(path)]
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    # a checkout beside the script is what `python beside.py` imports, from any directory
    assert run(project / "beside.py", elsewhere) == "checkout"
    # one in the working directory is not on `python away.py`'s path: the layer is used
    assert run(elsewhere / "away.py", project) == "layer"
