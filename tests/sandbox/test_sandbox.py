"""The sandbox API: backend choice (fail closed), limits, requests, copies, the other backends."""

from __future__ import annotations

import os
import pickle
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gemgym.errors import ClosedError, ConfigError, SandboxUnavailableError
from gemgym.sandbox import (
    Limits,
    RunRequest,
    bwrap as bwrap_mod,
    docker as docker_mod,
    make_sandbox,
    shared_sandbox,
)
from gemgym.sandbox._host import UID_RANGE, SandboxCgroup
from gemgym.sandbox.bwrap import BwrapSandbox, bwrap_available
from gemgym.sandbox.docker import DockerSandbox, docker_argv
from gemgym.sandbox.pool import PoolSandbox
from gemgym.sandbox.unsafe_local import UnsafeLocalSandbox, UnsafeSandboxWarning

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


@needs_bwrap
def test_auto_is_the_warm_pool() -> None:
    with make_sandbox(limits=Limits(timeout=3)) as sb:
        assert isinstance(sb, PoolSandbox) and sb.isolating
        assert sb.run("print(1 + 1)").stdout == "2\n"
    with pytest.raises(ClosedError):
        sb.run("print(1)")


def test_fail_closed_without_an_isolating_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_mod, "bwrap_available", lambda: False)
    monkeypatch.setattr(docker_mod, "docker_available", lambda docker="docker": False)
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap") as e:
        make_sandbox()
    assert "unsafe-local" in str(e.value)


def test_bwrap_missing_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_mod, "bwrap_binary", lambda: None)
    bwrap_mod._probe.cache_clear()
    try:
        with pytest.raises(SandboxUnavailableError, match="install bubblewrap"):
            BwrapSandbox()
        with pytest.raises(SandboxUnavailableError, match="install bubblewrap"):
            PoolSandbox()
    finally:
        bwrap_mod._probe.cache_clear()


def test_bad_configuration() -> None:
    with pytest.raises(ConfigError, match="unknown sandbox backend"):
        make_sandbox("firejail")
    with pytest.raises(ConfigError, match="timeout"):
        Limits(timeout=0)
    with pytest.raises(ConfigError, match="memory"):
        Limits(memory=-1)
    with pytest.raises(ConfigError, match="cpu_time"):
        Limits(cpu_time=0)
    assert Limits(timeout=2.5).cpu_seconds == 4
    assert Limits(cpu_time=1.5).cpu_seconds == 2


@needs_bwrap
def test_requests_stdin_files_setup_and_check() -> None:
    with PoolSandbox(Limits(timeout=3), size=2) as sb:
        r = sb.run(
            "print(open('data.txt').read().upper(), input())", "in\n", files={"data.txt": "x"}
        )
        assert r.stdout == "X in\n"
        r = sb.run("print(a + 1)", setup="a = 41\nprint('hidden')")
        assert r.stdout == "42\n"
        good = sb.run("def f(x):\n    return x * 2", check="assert f(2) == 4")
        assert good.ok and good.check_passed is True
        bad = sb.run("def f(x):\n    return x", check="assert f(2) == 4")
        # the tests fail in their own process: the program itself exited normally
        assert bad.check_passed is False and bad.exit_code == 0 and not bad.stderr
        assert bad.check_error is not None and bad.check_error.startswith("AssertionError")
        exits = sb.run("import sys\nsys.exit(0)", check="assert False")
        assert exits.exit_code == 0 and exits.check_passed is not True
        plain = sb.run("print(1)")
        assert plain.check_passed is None


@needs_bwrap
@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_run_many_keeps_order_and_runs_in_parallel() -> None:
    with PoolSandbox(Limits(timeout=5), size=2) as sb:
        sb.warm_up()
        start = time.monotonic()
        results = sb.run_many(
            [RunRequest(f"import time\ntime.sleep(0.5)\nprint({i})") for i in range(4)]
        )
        elapsed = time.monotonic() - start
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
        assert elapsed < 1.9  # two workers: about 1 s, not 2 s


@needs_bwrap
def test_copies_are_new_working_sandboxes() -> None:
    with PoolSandbox(Limits(timeout=3), size=1) as sb:
        sb.run("print(1)")
        clone = pickle.loads(pickle.dumps(sb))
        assert isinstance(clone, PoolSandbox) and clone is not sb
        assert clone.limits == sb.limits
        assert clone.run("print(2)").stdout == "2\n"
        clone.close()


@needs_bwrap
def test_shared_sandbox_is_reused() -> None:
    a = shared_sandbox()
    assert shared_sandbox() is a
    assert shared_sandbox(limits=Limits(timeout=1)) is not a


@needs_bwrap
def test_bwrap_as_a_leased_uid_with_rlimit_nproc() -> None:
    if os.geteuid() != 0:
        pytest.skip("the uid mode matters for root")
    limits = Limits(timeout=5, max_processes=16, memory_scope="process")
    with BwrapSandbox(limits, process_limit="uid") as sb:
        r = sb.run("import os\nprint(os.getuid())")
        assert r.ok and int(r.stdout) in UID_RANGE
        assert r.memory_scope == "process"
        bomb = sb.run("import os\nwhile True:\n    os.fork()")
        assert not bomb.ok and "BlockingIOError" in bomb.stderr


@needs_bwrap
def test_cgroups_are_removed() -> None:
    if not SandboxCgroup.usable():
        pytest.skip("no writable pids cgroup here")
    probe = SandboxCgroup(8, 1 << 30)
    bases = [d.parent for d in probe.dirs]
    probe.remove()

    def mine() -> set[str]:
        return {
            f"{b}/{p.name}"
            for b in bases
            for p in b.iterdir()
            if p.name.startswith(f"{os.getpid()}-")
        }

    before = mine()
    with PoolSandbox(Limits(timeout=3), size=1) as sb:
        sb.run("print(1)")
        assert len(mine() - before) == len(bases)  # the pids and memory cgroups
    BwrapSandbox(Limits(timeout=3)).run("print(1)")
    assert mine() == before


def test_unsafe_local_is_explicit_and_loud() -> None:
    with pytest.warns(UnsafeSandboxWarning, match="does NOT isolate"):
        sb = make_sandbox("unsafe-local", limits=Limits(timeout=1))
    assert isinstance(sb, UnsafeLocalSandbox) and not sb.isolating
    r = sb.run("import os\nprint(os.getcwd())")
    assert r.ok
    workdir = r.stdout.strip()
    assert workdir.startswith(tempfile.gettempdir()) and not os.path.exists(workdir)
    assert sb.run("while True: pass").killed_by == "timeout"
    assert sb.run("x = bytearray(4 << 30)").killed_by == "memory"
    os.environ["GEMGYM_UNSAFE_SECRET"] = "s3cret"
    try:
        assert "s3cret" not in sb.run("import os\nprint(os.environ)").stdout
    finally:
        del os.environ["GEMGYM_UNSAFE_SECRET"]


def test_docker_command_is_locked_down() -> None:
    argv = docker_argv(Limits(memory=1 << 30, max_processes=32, tmp_size=1 << 20), "img", "n1")
    joined = " ".join(argv)
    for flag in (
        "--network none",
        "--read-only",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--user 65534:65534",
        "--pids-limit 32",
        f"--memory {1 << 30}",
        f"--memory-swap {1 << 30}",
        "--rm -i --name n1",
        f"/tmp:rw,exec,nosuid,size={1 << 20}",
    ):
        assert flag in joined
    assert argv[-1] == "img" and "HOME=/tmp" in argv


def test_docker_without_an_engine_fails_closed() -> None:
    with pytest.raises(SandboxUnavailableError, match="Docker engine"):
        DockerSandbox(docker="/nonexistent/docker")


def test_docker_backend_runs_through_the_cli(tmp_path: Path) -> None:
    """A stand-in ``docker`` CLI (no engine here) checks the run path end to end."""
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = info ]; then echo 27.0; exit 0; fi\n'
        'if [ "$1" = kill ]; then exit 0; fi\n'
        'while [ "$1" != fake-image ]; do shift; done\nshift\nshift\n'
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    sb = DockerSandbox(Limits(timeout=2), image="fake-image", docker=str(fake))
    assert sb.command(sb.limits, "n")[:2] == [str(fake), "run"]
    r = sb.run("print(input()[::-1])", "abc\n")
    assert r.ok and r.stdout == "cba\n"
    assert sb.run("while True: pass").timed_out


@needs_bwrap
def test_a_worker_that_cannot_be_verified_clean_is_retired(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: the server's own check reports something left after a marked run."""
    from gemgym.sandbox import _host

    source = _host.runner_source()
    injected = (
        source + "\n_verified_cleanup = _cleanup\n"
        "def _cleanup(isolated, pids, *rest):\n"
        "    marked = os.path.exists('/tmp/work/leave-me')\n"
        "    strays, problem = _verified_cleanup(isolated, pids, *rest)\n"
        "    return strays, 'files left after the run: /tmp/work/leave-me' if marked else problem\n"
    )
    monkeypatch.setattr(_host, "runner_source", lambda: injected)
    with PoolSandbox(Limits(timeout=3), size=1) as sb:
        first = sb.run("import os\nprint(os.getpid())")
        assert first.ok and first.notes == ()
        bad = sb.run("open('leave-me', 'w').write('x')\nprint('done')")
        assert bad.ok and bad.stdout == "done\n"  # the run itself is reported as it was
        assert len(bad.notes) == 1 and "retired" in bad.notes[0] and "leave-me" in bad.notes[0]
        assert sb.retired == 1
        after = sb.run("import os\nprint(sorted(os.listdir('/tmp/work')))")
        assert after.ok and after.stdout == "[]\n" and after.notes == ()


@needs_bwrap
@pytest.mark.parametrize(
    ("returned", "check", "passes"),
    [
        ("1", "assert f() == True", False),  # a bool is expected: 1 is not one
        ("True", "assert f() == 1", False),
        ("(1, 2)", "assert f() == [1, 2]", False),
        ("[True, 0]", "assert f() == [1, 0]", False),
        ("{'a': 1}", "assert f() == {'a': True}", False),
        ("2", "assert f() != 2.0", False),
        ("2", "assert f() == 2.0", True),  # numbers compare by value, as in Python
        ("[1, (2, 'x')]", "assert f() == [1, (2, 'x')]\nassert f() != [1, [2, 'x']]", True),
        (
            "1",
            "x = f()\nif x == True:\n    raise AssertionError('outside asserts == is Python')",
            False,
        ),
    ],
)
def test_asserts_compare_types_too(returned: str, check: str, passes: bool) -> None:
    """``==`` and ``!=`` in the tests' asserts are type-aware (bool is not int, tuple is not
    list); elsewhere the test code keeps Python's own equality."""
    with PoolSandbox(Limits(timeout=5), size=1) as sb:
        r = sb.run(f"def f():\n    return {returned}\n", check=check)
    assert r.check_passed is passes, r
