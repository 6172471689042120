"""Red-team tests: attacks on the real bubblewrap backends (one-shot and warm pool) are contained."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gemgym.sandbox import Limits, RunResult, Sandbox
from gemgym.sandbox.bwrap import BwrapSandbox, bwrap_available
from gemgym.sandbox.pool import PoolSandbox

pytestmark = pytest.mark.skipif(
    not bwrap_available(), reason="bubblewrap is not installed (scripts/test installs it)"
)

LIMITS = Limits(timeout=2.0, memory=1 << 30, max_output=64 * 1024, max_file_size=4 << 20)


@pytest.fixture(scope="module", params=["pool", "bwrap"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    sb: Sandbox
    if request.param == "pool":
        sb = PoolSandbox(LIMITS, size=1)
        sb.warm_up()  # the timing tests measure limits, not the worker's start-up
    else:
        sb = BwrapSandbox(LIMITS)
    yield sb
    sb.close()


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


def _still_works(sandbox: Sandbox) -> None:
    result = sandbox.run("print(6 * 7)")
    assert result.ok and result.stdout == "42\n"


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_infinite_loop_is_killed_at_the_timeout(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.run("while True:\n    pass", timeout=1.0)
    wall = time.monotonic() - start
    assert result.timed_out and result.killed_by == "timeout"
    assert 1.0 <= result.duration < 1.2  # honoured to within 0.2 s
    assert wall < 2.0
    _still_works(sandbox)


def test_cpu_time_limit(sandbox: Sandbox) -> None:
    with type(sandbox)(Limits(timeout=5.0, cpu_time=1)) as limited:
        result = limited.run("while True:\n    pass")
    assert result.killed_by == "cpu" and not result.timed_out  # before the 5 s wall timeout


def test_memory_bomb(sandbox: Sandbox) -> None:
    result = sandbox.run("x = bytearray(3 << 30)\nprint('allocated')")
    assert result.killed_by == "memory" and "allocated" not in result.stdout
    grow = sandbox.run("x = []\nwhile True:\n    x.append(bytearray(50 << 20))", timeout=10)
    assert grow.killed_by == "memory"
    _still_works(sandbox)


def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = sandbox.run(code, timeout=1.5)
    assert not result.ok
    assert result.killed_by in ("timeout", "processes")
    _still_works(sandbox)


def test_fork_refused_beyond_the_process_limit(sandbox: Sandbox) -> None:
    code = (
        "import os, time\nn = 0\nfor _ in range(500):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5)\n"
        "        os._exit(0)\n    n += 1\nprint(n)"
    )
    result = sandbox.run(code, timeout=3.0)
    assert result.exit_code == 0, result
    # A pids cgroup (as root) is exact. RLIMIT_NPROC (not root) counts every process of the uid
    # on the machine, taken when the run starts: others of the uid that exit meanwhile (this
    # test suite's own) free a place or two.
    slack = 0 if sandbox.limiter.mode == "cgroup" else 3  # type: ignore[attr-defined]
    assert int(result.stdout) <= LIMITS.max_processes + slack
    _still_works(sandbox)


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "/etc/shadow", "/root/.bashrc", "/root/.ssh", "/home", "/work/main/src"],
)
def test_reads_outside_the_allowed_paths_fail(sandbox: Sandbox, path: str) -> None:
    assert sandbox.run(f"import os\nprint(os.path.exists({path!r}))").stdout == "False\n"
    result = sandbox.run(f"print(open({path!r}).read())")
    assert result.exit_code != 0 and "FileNotFoundError" in result.stderr


def test_the_callers_files_are_invisible(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    result = sandbox.run(f"print(open({str(secret)!r}).read())")
    assert result.exit_code != 0 and "TOP-SECRET" not in result.stdout
    assert "FileNotFoundError" in result.stderr
    repo = Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert "FileNotFoundError" in sandbox.run(f"open({str(repo)!r})").stderr


@pytest.mark.parametrize("target", ["/usr/evil", "/evil", "/etc/evil", "/dev/evil", "/proc/evil"])
def test_writes_outside_tmp_fail(sandbox: Sandbox, target: str) -> None:
    result = sandbox.run(f"open({target!r}, 'w').write('x')")
    assert result.exit_code != 0
    assert "Error" in result.stderr
    assert not Path(target).exists()


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
def test_tmp_is_private_writable_and_emptied(sandbox: Sandbox, folder: str) -> None:
    path = f"{folder}/left-behind-{uuid.uuid4().hex}"
    wrote = sandbox.run(f"open({path!r}, 'w').write('x'); print('ok')")
    assert wrote.ok and wrote.stdout == "ok\n"
    assert not Path(path).exists()
    after = sandbox.run(f"import os\nprint(os.path.exists({path!r}))")
    assert after.stdout == "False\n"


@pytest.fixture(scope="module")
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def test_network_is_unreachable(sandbox: Sandbox, listener: int) -> None:
    with socket.create_connection(("127.0.0.1", listener), timeout=2):
        pass  # the host can connect
    for host in ("127.0.0.1", "8.8.8.8"):
        code = (
            "import socket\ns = socket.socket()\ns.settimeout(1)\n"
            f"s.connect(({host!r}, {listener if host == '127.0.0.1' else 53}))\nprint('connected')"
        )
        result = sandbox.run(code)
        assert "connected" not in result.stdout
        assert result.exit_code != 0
        assert "ConnectionRefusedError" in result.stderr or "unreachable" in result.stderr


def test_environment_variables_are_not_inherited(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMGYM_TEST_SECRET", "hunter2")
    result = sandbox.run("import os\nprint(dict(os.environ))")
    assert result.ok
    assert "hunter2" not in result.stdout and "GEMGYM_TEST_SECRET" not in result.stdout
    assert "HOME" in result.stdout
    code = (
        "import os\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n        try:\n"
        "            print(open(f'/proc/{p}/environ').read())\n"
        "        except PermissionError:\n            pass"
    )
    every = sandbox.run(code)
    assert every.ok and "hunter2" not in every.stdout and "/work" not in every.stdout


def test_import_and_getattr_tricks_stay_inside(sandbox: Sandbox, tmp_path: Path) -> None:
    marker = tmp_path / "escaped"
    code = (
        "sp = __import__('sub' + 'process')\n"
        "system = getattr(__import__('o' + 's'), 'sys' + 'tem')\n"
        f"system('touch {marker}; cat /etc/shadow')\n"
        f"sp.run(['sh', '-c', 'echo pwned > {marker}'])\n"
        "ctypes = __import__('ctypes')\n"
        "libc = ctypes.CDLL(None)\n"
        "print('mount', libc.mount(b'none', b'/usr', b'tmpfs', 0, None))\n"
        "print('setuid', libc.setuid(0), 'unshare', libc.unshare(0x10000000))\n"
    )
    result = sandbox.run(code)
    assert not marker.exists()
    assert "mount -1" in result.stdout  # no capability to remount anything
    assert "root:" not in result.stdout


def test_no_background_process_is_left_behind(sandbox: Sandbox) -> None:
    marker = f"gemgym-redteam-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys, os\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    import time; time.sleep(60)\n"
        "print('started')"
    )
    result = sandbox.run(code)
    assert result.stdout == "started\n" and not result.timed_out
    assert result.duration < 1.5  # the run ends when the program exits, not when its children do
    deadline = time.monotonic() + 2
    while _host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_processes_with(marker) == []


def test_huge_output_is_cut(sandbox: Sandbox) -> None:
    result = sandbox.run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)")
    assert result.killed_by == "output"
    assert len(result.stdout) <= LIMITS.max_output
    both = sandbox.run("import sys\nprint('o' * 50000)\nprint('e' * 50000, file=sys.stderr)")
    assert both.killed_by == "output"
    assert len(both.stdout) + len(both.stderr) <= LIMITS.max_output


def test_file_size_limit(sandbox: Sandbox) -> None:
    result = sandbox.run("open('/tmp/big', 'wb').write(b'x' * (8 << 20))")
    assert result.killed_by == "file_size"


def test_results_are_typed(sandbox: Sandbox) -> None:
    result = sandbox.run("import sys\nprint(input())\nsys.exit(3)", stdin="hi\n")
    assert isinstance(result, RunResult)
    assert (result.stdout, result.exit_code, result.timed_out, result.killed_by) == (
        "hi\n",
        3,
        False,
        None,
    )
    err = sandbox.run("raise ValueError('boom')")
    assert err.exit_code == 1 and err.stderr.endswith("ValueError: boom\n")
    assert 'File "<string>", line 1' in err.stderr


def test_pool_leaves_no_process_between_runs() -> None:
    with PoolSandbox(LIMITS, size=1) as pool:
        pool.run("import subprocess\nsubprocess.Popen(['sleep', '30'])\nprint('x')")
        pids = pool.run(
            "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
        )
        # only the fork-server (PID 1 of the sandbox) and this snippet exist
        assert eval(pids.stdout)[0] == 1 and len(eval(pids.stdout)) == 2


def test_pool_server_cannot_be_killed_from_inside() -> None:
    """The server is PID 1 of its sandbox: signals from inside its namespace do not reach it."""
    with PoolSandbox(LIMITS, size=1) as pool:
        for sig in ("SIGKILL", "SIGTERM", "SIGSTOP"):
            result = pool.run(
                f"import os, signal\nos.kill(os.getppid(), signal.{sig})\nos.kill(1, signal.{sig})\nprint('sent')"
            )
            assert result.ok and result.stdout == "sent\n" and result.error is None
        _still_works(pool)


def test_pool_snippets_cannot_write_to_the_protocol_channel() -> None:
    with PoolSandbox(LIMITS, size=1) as pool:
        for fd in (0, 1, 4, 5, 6, 7):
            pool.run(
                f"import os\ntry:\n    os.write({fd}, b'\\x00\\x00\\x00\\x02{{}}')\nexcept OSError:\n    pass"
            )
        _still_works(pool)
