"""Reward integrity of the terminal envs: what an agent that does not solve the task tries.

Each test plays an exploit that paid before (issue 41) and must not pay now. They use the
public API and tasks written to ``tmp_path`` only (CI reruns them from a venv of the system's
``/usr/bin/python3`` with gemgym installed non-editable, where the first exploit worked).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import gemgym
from gemgym.envs.terminal.env import TerminalEnv
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.sandbox.shell import ShellSession

pytestmark = [
    pytest.mark.integrity,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed"),
]

SECRET = "s3cr3t-expected-7f1c"


def _play(env: TerminalEnv, *commands: str) -> tuple[str, float, dict[str, object]]:
    for command in commands:
        obs, _, terminated, truncated, _ = env.step(f"```bash\n{command}\n```")
        assert not (terminated or truncated), obs
    obs, reward, terminated, _, info = env.step("done")
    assert terminated
    return obs, reward, info


def _write_task(root: Path, tests: str, name: str = "secret-answer") -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "instruction.md").write_text("Write the answer to /app/answer.txt.\n")
    (task / "tests" / "test_outputs.py").write_text(textwrap.dedent(tests))
    (task / "solution" / "solve.sh").write_text(f"echo {SECRET} > /app/answer.txt\n")
    return task


# What the agent searches for from its shell: the shipped tasks' files by name, any file of
# gemgym's, a venv's marker, and (by content) the hidden tests' and the instruction's text in
# every place a Python installation could be.
HUNT = r"""
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \
  \( -name solve.sh -o -name wrong.sh -o -name 'test_outputs.py' -o -name task.toml \
     -o -name pyvenv.cfg -o \( -path '*gemgym*' -type f \) \) -print 2>/dev/null
for d in / /usr/local /usr/lib/python3* /usr/share/python3* /opt /srv /var /etc /tmp /app; do
  [ -d "$d" ] || continue
  if [ "$d" = / ]; then
    find / -xdev -type f -size -1M 2>/dev/null | xargs -r grep -lF -e "$NEEDLE1" -e "$NEEDLE2" 2>/dev/null
  else
    grep -rlF -e "$NEEDLE1" -e "$NEEDLE2" "$d" 2>/dev/null
  fi
done
python3 -c 'import importlib.util as u; s = u.find_spec("gemgym"); print("gemgym:", s and s.origin)'
echo hunt-done
"""


def test_a_terminal_episode_sees_no_task_files_and_no_host_python() -> None:
    # Reported: from a venv made from /usr/bin/python3 the shell saw the venv, gemgym in it, and
    # every task's solution/solve.sh (running it paid 1.0).
    with gemgym.make("terminal:python-fix-median", prestart=False) as env:
        env.reset(seed=0)
        inner = env.unwrapped
        assert isinstance(inner, TerminalEnv) and inner.current is not None
        tests = (inner.current.tests_dir / "test_outputs.py").read_text()
        needles = ["[7, 7, 1, 9, 3, 2], [2.5, 1.5]", tests.splitlines()[0]]
        assert all(n in tests for n in needles)
        instruction = inner.current.instruction.splitlines()[0]
        # Passed encoded, so that the command's own text (a file in /tmp) does not match.
        b64 = [base64.b64encode(t.encode()).decode() for t in (needles[0], instruction)]
        command = (
            f"export NEEDLE1=$(echo {b64[0]} | base64 -d) NEEDLE2=$(echo {b64[1]} | base64 -d)\n"
            + HUNT
        )
        obs, _, _, _, _ = env.step(f"```bash\n{command}\n```")
        found = obs.rsplit("[exit status", 1)[0].splitlines()
        assert found[-2:] == ["gemgym: None", "hunt-done"], obs
        assert found[:-2] == [], obs
        if sys.prefix != sys.base_prefix:  # this venv's own path shows nothing either
            obs = env.step(f"```bash\nls -A {sys.prefix} 2>/dev/null | head -3\n```")[0]
            assert obs.startswith("[exit status"), obs


def _venv_of_system_python(where: Path) -> Path:
    """A venv made from /usr/bin/python3 (the setup the exploit was found on)."""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3 here")
    done = subprocess.run(
        ["/usr/bin/python3", "-m", "venv", "--without-pip", str(where)],
        capture_output=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.skip("the system python cannot make venvs here (apt-get install python3-venv)")
    return where / "bin" / "python"


def test_a_shell_started_from_a_venv_of_the_system_python_does_not_see_it(
    tmp_path: Path,
) -> None:
    # The same exploit, reproduced from any dev venv: gemgym runs from a venv of
    # /usr/bin/python3 (importing itself from this one's paths), and that venv holds a file the
    # agent must not reach.
    python = _venv_of_system_python(tmp_path / "venv")
    secret = tmp_path / "venv" / "solve.sh"
    secret.write_text(f"echo {SECRET}\n")
    os.chmod(tmp_path, 0o755)  # the sandbox's uid could read it if it were bound
    script = textwrap.dedent(f"""
        from gemgym.sandbox.shell import ShellSession
        with ShellSession() as s:
            print(s.run("cat {secret} 2>/dev/null; ls {tmp_path}/venv 2>/dev/null | wc -l; "
                        "find / -name solve.sh -not -path '/proc/*' 2>/dev/null; echo end").output)
    """)
    path = os.pathsep.join(
        p
        for p in sys.path
        if p and ("-packages" in p or os.path.isfile(os.path.join(p, "gemgym", "__init__.py")))
    )
    done = subprocess.run(
        [str(python), "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
    )
    if "ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr:
        pytest.skip(f"gemgym does not import from the system python here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert SECRET not in done.stdout
    assert done.stdout.split() == ["0", "end"], done.stdout


MEDIAN_THAT_READS_THE_TESTS = r"""
import glob, os, re
_calls = [0]


def _expected():
    for path in ["/tests/test_outputs.py", *glob.glob("/tests/*.py"), *glob.glob("/app/*.py")]:
        try:
            text = open(path).read()
        except OSError:
            continue
        m = re.search(r"\] == (\[[-0-9., ]*\])", text)
        if m:
            return eval(m.group(1))
    for pid in os.listdir("/proc"):  # or the memory of the process that runs the tests
        try:
            data = open(f"/proc/{pid}/cmdline", "rb").read() + open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        m = re.search(rb"\] == (\[[-0-9., ]*\])", data)
        if m:
            return eval(m.group(1))
    raise SystemExit("no answers found")


def median(values):
    want = _expected()
    i = _calls[0]
    _calls[0] += 1
    return want[i % len(want)]
"""


def test_the_code_under_test_cannot_read_the_hidden_tests() -> None:
    # Reported: python-fix-median's median() read the expected values out of
    # /tests/test_outputs.py at grading time and was paid 1.0.
    with gemgym.make("terminal:python-fix-median", prestart=False) as env:
        env.reset(seed=0)
        inner = env.unwrapped
        assert isinstance(inner, TerminalEnv)
        code = f"cat > /app/stats.py <<'EOF'\n{MEDIAN_THAT_READS_THE_TESTS}\nEOF"
        obs, reward, info = _play(inner, code)
        assert reward == 0.0, info
        assert "test_outputs.py::test_medians" in info["test_failures"]  # type: ignore[operator]


def test_an_exit_status_does_not_pass_a_test() -> None:
    # Reported: python-unittest-fix passed with a textutil.py that exits 0 at import.
    with gemgym.make("terminal:python-unittest-fix", prestart=False) as env:
        env.reset(seed=0)
        inner = env.unwrapped
        assert isinstance(inner, TerminalEnv)
        exits = "printf 'import os\\nos._exit(0)\\n' > /app/project/textutil.py"
        obs, reward, info = _play(inner, exits)
        assert reward == 0.0 and info["tests_passed"] in (0, 1), info  # the suite file is kept
        assert "test_outputs.py::test_slugify" in info["test_failures"]  # type: ignore[operator]
        env.reset(seed=0)  # printing what a passing run of unittest prints does not help either
        fake = "printf 'import sys\\nprint(\"OK\")\\nsys.exit(0)\\n' > /app/project/textutil.py"
        assert _play(inner, fake)[1] == 0.0


REDACTION_TESTS = f"""
def test_answer():
    expected = "{SECRET}"
    got = open("/app/answer.txt").read().strip()
    assert got == expected, "wanted %r, got %r" % (expected, got)


def test_lookup():
    table = {{"{SECRET}-key": 1}}
    table[open("/app/answer.txt").read().strip() + "-key"]
"""


def test_failures_returned_to_the_agent_hold_no_test_source(tmp_path: Path) -> None:
    # Reported: info["test_failures"] carried the hidden tests' assert messages and values.
    task = _write_task(tmp_path / "tasks", REDACTION_TESTS)
    with TerminalEnv(path=str(task), prestart=False) as env:
        env.reset(seed=0)
        obs, reward, info = _play(env, "echo wrong > answer.txt")
        assert reward == 0.0 and info["tests_total"] == 2
        assert info["test_failures"] == {
            "test_outputs.py::test_answer": "AssertionError",
            "test_outputs.py::test_lookup": "KeyError",
        }
        assert SECRET not in obs and SECRET not in repr(info)
    broken = _write_task(tmp_path / "more", f"raise RuntimeError('{SECRET}')\n", "broken")
    with TerminalEnv(path=str(broken), prestart=False) as env:
        env.reset(seed=0)
        obs, reward, info = _play(env)
        assert reward == 0.0 and info["grading_error"]
        assert SECRET not in obs and SECRET not in repr(info)


@pytest.mark.parametrize("answer", ["mkfifo /app/hello.txt", "ln -s /dev/zero /app/hello.txt"])
def test_a_fifo_or_device_as_the_answer_file_fails_at_once(answer: str) -> None:
    # Reported: a FIFO as the answer file stalled grading for the 60 s verifier timeout.
    with gemgym.make("terminal:hello-file", prestart=False) as env:
        env.reset(seed=0)
        inner = env.unwrapped
        assert isinstance(inner, TerminalEnv)
        start = time.monotonic()
        obs, reward, info = _play(inner, answer)
        assert time.monotonic() - start < 15
        assert reward == 0.0 and info["grading_error"] is None, info
        assert "test_outputs.py::test_content" in info["test_failures"]  # type: ignore[operator]


def test_the_tests_python_modules_never_reach_the_sandbox(tmp_path: Path) -> None:
    # A grading session: the modules are imported from memory; data files are read-only.
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "helper.py").write_text(f"EXPECTED = {SECRET!r}\n")
    (tests / "data.txt").write_text("data\n")
    (tests / "test_outputs.py").write_text(
        textwrap.dedent("""
        import subprocess
        from pathlib import Path

        import helper


        def test_from_memory():
            assert helper.EXPECTED.startswith("s3cr3t")
            assert Path(__file__).with_name("data.txt").read_text() == "data\\n"


        def test_program_sees_no_module():
            done = subprocess.run(
                ["bash", "-c", "ls -A /tests; grep -rl -D skip s3cr3t / --exclude-dir=proc "
                 "--exclude-dir=sys --exclude-dir=usr --exclude-dir=dev 2>/dev/null; "
                 "echo x > /tests/y"],
                capture_output=True, text=True, timeout=30,
            )
            assert done.stdout.split() == ["data.txt"], done.stdout
        """)
    )
    with ShellSession(tests=tests) as session:
        report = session.run_tests()
    assert report.all_passed, report
