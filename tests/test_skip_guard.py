"""The skip guard (tests/_skip_guard.py): with GEMGYM_REQUIRE_EXTRAS set, a test skipped for a
missing required extra fails the run; other skips do not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent

SKIPS = """
import pytest

def test_openenv():
    pytest.skip('needs pip install "gemgym[openenv]"')

def test_module_of_a_required_extra():
    pytest.skip("could not import 'bm25s': No module named 'bm25s'")

def test_package_a_required_extra_installs():
    pytest.skip('needs pip install "transformers[serving]" (could not import fastapi)')

def test_other_extra():
    pytest.skip('needs pip install "gemgym[verl]"')

def test_no_tool():
    pytest.skip("bubblewrap is not installed")
"""


def _run(
    tmp_path: Path, required: str | None, body: str = SKIPS
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skips.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if k != "GEMGYM_REQUIRE_EXTRAS"}
    if required is not None:
        env["GEMGYM_REQUIRE_EXTRAS"] = required
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "_skip_guard",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_skips.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def test_skips_of_required_extras_fail_the_run(tmp_path: Path) -> None:
    proc = _run(tmp_path, "all,openenv")
    assert proc.returncode == 1, proc.stdout
    assert "test_skips.py::test_openenv: gemgym[openenv]" in proc.stdout
    assert "test_skips.py::test_module_of_a_required_extra: gemgym[search]" in proc.stdout
    # fastapi comes with the openenv extra (transformers serve's tests need it too)
    assert "test_skips.py::test_package_a_required_extra_installs: gemgym[openenv]" in proc.stdout
    assert "test_other_extra" not in proc.stdout.split("skipped for a missing extra")[1]
    assert "test_no_tool" not in proc.stdout.split("skipped for a missing extra")[1]


def test_other_skips_and_unset_variable_pass(tmp_path: Path) -> None:
    assert _run(tmp_path, None).returncode == 0
    only_others = SKIPS.split("def test_other_extra")[0].split("def test_openenv")[0]
    only_others += SKIPS[SKIPS.index("def test_other_extra") :]
    assert _run(tmp_path, "all,openenv", only_others).returncode == 0


def test_a_failing_test_keeps_its_own_status(tmp_path: Path) -> None:
    proc = _run(tmp_path, "openenv", SKIPS + "\ndef test_fails():\n    assert False\n")
    assert proc.returncode == 1
    assert "1 failed" in proc.stdout
