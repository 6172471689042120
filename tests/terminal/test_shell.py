"""The sandboxed shell session behind the terminal envs (a real bubblewrap sandbox)."""

from __future__ import annotations

import io
import os
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gemgym.errors import SandboxError
from gemgym.sandbox import Limits
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.sandbox.shell import ShellSession, decode_keys

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


@pytest.fixture(scope="module")
def shell() -> Iterator[ShellSession]:
    with ShellSession(Limits(timeout=5, max_processes=32)) as session:
        yield session


def test_commands_share_one_shell(shell: ShellSession) -> None:
    assert shell.run("echo hi").output == "hi\n"
    r = shell.run("cd /tmp && export GREETING=hello; false")
    assert r.exit_status == 1
    r = shell.run("echo $GREETING; pwd")
    assert (r.output, r.exit_status) == ("hello\n/tmp\n", 0)
    shell.run("cd /app")


def test_multiline_commands_and_heredocs(shell: ShellSession) -> None:
    r = shell.run("for i in 1 2; do\n  echo n$i\ndone\ncat <<'X'\n$NOT_EXPANDED\nX")
    assert r.output == "n1\nn2\n$NOT_EXPANDED\n"
    assert shell.run("if then fi").exit_status == 2  # a syntax error, not a hang


def test_the_sandbox_is_hardened(shell: ShellSession) -> None:
    assert shell.run("id -u").output.strip() != "0" or os.geteuid() != 0
    assert shell.run("touch /usr/x").exit_status != 0  # read-only system
    assert shell.run("ls /root /home /work 2>/dev/null").exit_status != 0
    net = "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)'"
    assert shell.run(net).exit_status != 0
    assert shell.run("echo data > /app/f && cat /app/f").output == "data\n"
    assert shell.run("ls /tests").exit_status != 0  # hidden tests exist only when grading


def test_a_command_that_runs_too_long_is_interrupted(shell: ShellSession) -> None:
    start = time.monotonic()
    r = shell.run("echo started; sleep 30", timeout=0.5)
    assert r.killed_by == "timeout" and r.exit_status == 124 and "started" in r.output
    assert time.monotonic() - start < 5
    r = shell.run("bash -c \"trap '' INT; sleep 30\"", timeout=0.5)  # ignores Ctrl-C: killed
    assert r.killed_by == "timeout"
    assert shell.run("echo alive").output == "alive\n"


def test_output_is_cut_with_a_marker(shell: ShellSession) -> None:
    r = shell.run("seq 1 300000")
    assert r.exit_status == 0
    assert r.output.startswith("1\n2\n") and r.output.endswith("299999\n300000\n")
    assert "bytes cut" in r.output and len(r.output) < 1_100_000


def test_keystrokes_drive_an_interactive_program(shell: ShellSession) -> None:
    r = shell.keys("cat\\n")
    assert r.running
    assert shell.run("echo ignored").note == "busy"  # the terminal belongs to cat
    assert shell.keys("hello\\n").output == "hello\n"
    r = shell.keys("^C")
    assert not r.running and r.exit_status == 130
    assert shell.run("echo back").output == "back\n"


def test_exit_starts_a_new_shell(shell: ShellSession) -> None:
    shell.run("cd /tmp; export GONE=1")
    r = shell.run("exit 3")
    assert r.shell_restarted and r.exit_status == 3
    assert shell.run("echo ${GONE:-unset}; pwd").output == "unset\n/app\n"


def test_export_and_load_round_trip() -> None:
    with ShellSession() as a:
        a.run("mkdir -p d && echo x > d/f && chmod 600 d/f && ln -s d/f link && mkfifo pipe")
        a.run("mkdir locked && echo y > locked/f && chmod 000 locked/f locked")  # still saved
        archive = a.export()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = set(tar.getnames())
    assert {"./d/f", "./link", "./pipe"} <= names
    with ShellSession() as b:
        b.load(archive)
        r = b.run("cat link; stat -c %a d/f; test -p pipe && echo fifo; cat locked/f")
        assert r.output == "x\n600\nfifo\ny\n"


def test_hidden_directories_are_empty_and_read_only() -> None:
    # Where gemgym is installed under /usr, its task directory (the hidden tests) is covered.
    docs = Path("/usr/share/doc")
    found = sorted(p for p in docs.iterdir() if p.is_dir() and any(p.iterdir()))
    if not found:
        pytest.skip("no /usr/share/doc directory to hide here")
    target = str(found[0])
    with ShellSession(hide=[target, "/not/a/system/dir"]) as s:
        r = s.run(f"ls -A {target} | wc -l; touch {target}/x")
        assert r.output.startswith("0\n") and r.exit_status != 0
        assert s.run(f"ls {docs} | wc -l").output.strip() != "0"


def test_decode_keys() -> None:
    assert decode_keys("ls\\n^C\\x04\\e\\\\") == b"ls\n\x03\x04\x1b\\"
    assert decode_keys("\\xZZ ^a") == b"\\xZZ ^a"


def test_a_closed_session_says_so() -> None:
    session = ShellSession()
    session.close()
    with pytest.raises(SandboxError, match="closed"):
        session.run("echo hi")


@pytest.mark.parametrize(
    "sabotage",
    ["chmod 000 /tmp", "unset PROMPT_COMMAND", "kill -STOP $$", "exec sleep 100", "stty -isig"],
)
def test_an_agent_that_breaks_its_shell_gets_a_working_one_back(sabotage: str) -> None:
    with ShellSession(Limits(timeout=1)) as s:
        start = time.monotonic()
        s.run(sabotage)
        s.run("sleep 5")  # stopped at the timeout whatever the terminal's settings
        r = s.run("echo ok")
        if r.output != "ok\n":  # the first command after a lost prompt restarts the shell
            r = s.run("echo ok")
        assert r.output == "ok\n"
        assert time.monotonic() - start < 20


def test_gemgym_is_found_wherever_it_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A system-wide install (/usr/local/lib/python3*/dist-packages) shows up to the shell's
    # /usr/bin/python3: every trace of gemgym in a site directory is masked, not only the
    # package this process imported.
    from gemgym.sandbox import shell as shell_module

    site = tmp_path / "dist-packages"
    for name in ("gemgym", "gemgym-0.1.0.dist-info", "__editable__.gemgym-0.1.0.pth", "numpy"):
        (site / name).mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    shell_module._gemgym_installs.cache_clear()
    try:
        found = shell_module._gemgym_installs()
    finally:
        shell_module._gemgym_installs.cache_clear()
    assert {str(site / n) for n in ("gemgym", "gemgym-0.1.0.dist-info")} <= set(found)
    assert str(site / "__editable__.gemgym-0.1.0.pth") in found
    assert str(site / "numpy") not in found
    # Under the system directories they are covered; elsewhere they are not bound at all.
    assert shell_module._mask_mounts([str(site / "gemgym")]) == []
    doc = sorted(p for p in Path("/usr/share/doc").iterdir() if p.is_dir())[:1]
    for path in doc:
        mounts = shell_module._mask_mounts([str(path), str(path / "x")])
        assert mounts == ["--size", "4096", "--tmpfs", str(path), "--remount-ro", str(path)]
