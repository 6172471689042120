"""The process backend: crash isolation, per-step timeout, errors, and no orphan processes."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gemgym.errors import VectorEnvError
from gemgym.vector import AutoresetMode, make_vector_env
from gemgym.vector._channel import SharedMemoryChannel, create_shared_file, shared_memory_supported
from gemgym.vector.process import ProcessVectorEnv
from helpers.envs import FaultyEnv, SleepEnv


def faulty(n: int, mode: str = "same_step", **opts: object) -> ProcessVectorEnv:
    venv = make_vector_env(
        env_fns=[functools.partial(FaultyEnv, episode_length=50)] * n,
        backend="process",
        autoreset_mode=mode,
        num_workers=2,
        **opts,
    )
    assert isinstance(venv, ProcessVectorEnv)
    return venv


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(pid: int) -> set[int]:
    """Pids of the live processes below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found and alive(c):
                found.add(c)
                todo.append(c)
    return found


def shm_files() -> set[str]:
    """The shared memory files of process-backend workers now in /dev/shm."""
    if not os.path.isdir("/dev/shm"):
        return set()
    return {f for f in os.listdir("/dev/shm") if f.startswith("gemgym-vec-")}


def wait_dead(pids: set[int], timeout: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return left
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


def test_a_dead_worker_is_restarted_and_its_envs_truncated() -> None:
    with faulty(4) as venv:
        venv.reset(seed=0)
        old = venv.worker_pids
        obs, rew, te, tr, infos = venv.step(["crash", "ok", "ok", "ok"])
        # envs 0 and 1 shared the dead worker: both are cut short, the batch goes on
        assert tr.tolist() == [True, True, False, False] and not te.any()
        assert rew[:2].tolist() == [0.0, 0.0]
        for k in (0, 1):
            assert "died" in infos[k]["worker_error"] and "exit code 3" in infos[k]["worker_error"]
            assert obs[k].startswith("start ")  # SAME_STEP: already a fresh episode
            assert infos[k]["final_obs"] is None
        assert obs[2].startswith("step 1") and "worker_error" not in infos[2]
        assert venv.restarts == 1
        assert venv.worker_pids[0] != old[0] and venv.worker_pids[1] == old[1]
        assert not alive(old[0])
        obs, _, _, tr, _ = venv.step(["ok"] * 4)
        assert not tr.any() and obs[0].startswith("step 1")


def test_envs_not_stepped_when_their_worker_died_are_told_on_their_next_step() -> None:
    with faulty(4, mode=AutoresetMode.NEXT_STEP) as venv:
        venv.reset(seed=0)
        obs, _, _, tr, infos = venv.step({0: "crash", 2: "ok"})
        assert tr.tolist() == [True, False] and obs[0] is None and "worker_error" in infos[0]
        obs, _, _, tr, infos = venv.step({1: "ok"})  # env 1 lived in the lost worker
        assert tr.tolist() == [True] and "worker_error" in infos[0]
        # NEXT_STEP: the following step starts a new episode, then play goes on
        obs, rew, _, tr, _ = venv.step(["ok"] * 4)
        assert obs[0].startswith("start ") and obs[1].startswith("start ") and rew[0] == 0.0
        assert obs[2].startswith("step 2")


@pytest.mark.parametrize("mode", ["same_step", "next_step", "disabled"])
def test_envs_rebuilt_after_a_crash_are_seeded_reproducibly(mode: str) -> None:
    def play() -> list[object]:
        with faulty(4, mode=mode) as venv:
            venv.reset(seed=7)
            out: list[object] = list(venv.step(["crash", "ok", "ok", "ok"])[0])
            if mode == "disabled":  # reset the lost envs yourself, without a seed
                out += venv.reset(options={"reset_mask": [True, True, False, False]})[0]
            for _ in range(3):
                out += list(venv.step(["ok"] * 4)[0])
            return out

    first, second = play(), play()
    assert first == second  # the same seeds and the same crash: the same episodes
    # the rebuilt envs got different seeds from each other and from the originals
    starts = [o for o in first if isinstance(o, str) and o.startswith("start ")]
    assert len(starts) == 2 and starts[0] != starts[1]
    # an env that was never seeded is rebuilt unseeded
    with faulty(2, mode=mode) as venv:
        venv.reset()
        venv.step(["crash", "ok"])
        assert venv._restart_seeds([0, 1], venv.restarts) == [None, None]


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_a_hung_worker_is_killed_after_the_step_timeout() -> None:
    with faulty(4, step_timeout=1.0) as venv:
        venv.reset(seed=0)
        t0 = time.perf_counter()
        obs, _, _, tr, infos = venv.step(["ok", "ok", "hang", "ok"])
        elapsed = time.perf_counter() - t0
        assert tr.tolist() == [False, False, True, True]
        assert "no reply within 1.0 s" in infos[2]["worker_error"]
        assert 0.9 < elapsed < 10
        obs, _, _, tr, _ = venv.step(["ok"] * 4)
        assert not tr.any()


def test_an_env_exception_is_raised_in_the_parent_and_the_worker_survives() -> None:
    with faulty(4) as venv:
        venv.reset(seed=0)
        pids = venv.worker_pids
        with pytest.raises(ValueError, match="asked to raise") as info:
            venv.step(["ok", "ok", "ok", "raise"])
        assert any("raised in worker 1" in note for note in info.value.__notes__)
        assert venv.worker_pids == pids and venv.restarts == 0
        obs, _, _, tr, _ = venv.step(["ok"] * 4)  # the protocol stayed in step
        assert obs[0].startswith("step 2") and obs[3].startswith("step 1")


def test_an_env_that_cannot_be_built_fails_construction_clearly() -> None:
    with pytest.raises(TypeError, match="episode_lenght"):
        make_vector_env(env_fns=[functools.partial(FaultyEnv, episode_lenght=3)], backend="process")


def test_a_script_without_a_main_guard_gets_a_clear_error(tmp_path: Path) -> None:
    # the workers import the main module again; a script that makes the vector env at import
    # time fails in every worker: the parent says what to add, and no internal error hides it
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import gemgym\n"
        'venv = gemgym.make_vec("game:GuessTheNumber-v0-hard", 2, backend="process",\n'
        '                       backend_options={"num_workers": 1})\n'
        "venv.close()\n"
    )
    shm_before = shm_files()
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gemgym.errors.VectorEnvError: worker 0")
    assert 'if __name__ == "__main__":' in last
    assert "AssertionError" not in done.stderr
    if os.path.isdir("/dev/shm"):
        assert shm_files() <= shm_before


def test_close_leaves_no_worker_processes() -> None:
    before = descendants(os.getpid())
    venv = faulty(4)
    venv.reset(seed=0)
    workers = set(venv.worker_pids)
    assert len(workers) == 2 and workers <= descendants(os.getpid())
    venv.close()
    assert wait_dead(workers, timeout=2.0) == set()
    assert descendants(os.getpid()) - before <= _forkserver(before)


def _forkserver(before: set[int]) -> set[int]:
    """multiprocessing's forkserver (one per parent, shared, kept by design) if any."""
    out = set()
    for pid in descendants(os.getpid()) - before:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"forkserver" in cmd:
            out.add(pid)
    return out


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_workers_die_with_their_parent(tmp_path: Path, start_method: str) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, time
            import gemgym
            if __name__ == "__main__":
                venv = gemgym.make_vec(
                    "game:GuessTheNumber-v0-hard", 4,
                    backend="process",
                    backend_options={{"num_workers": 2, "start_method": {start_method!r}}},
                )
                venv.reset(seed=0)
                print(" ".join(map(str, venv.worker_pids)), flush=True)
                time.sleep(600)
            """
        )
    )
    shm_before = shm_files()
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        workers = {int(p) for p in proc.stdout.readline().split()}
        assert len(workers) == 2 and all(alive(p) for p in workers)
        below = descendants(proc.pid)
        assert workers <= below
        os.kill(proc.pid, signal.SIGKILL)  # no cleanup code runs in the parent
        proc.wait(10)
        assert wait_dead(below) == set(), "worker processes outlived their parent"
        if os.path.isdir("/dev/shm"):  # shared memory files were removed once mapped
            assert shm_files() <= shm_before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_busy_wait_polls_while_waits_are_short_and_sleeps_after_a_long_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import multiprocessing as mp

    from gemgym.vector import _channel

    yields: list[int] = []
    real_yield = os.sched_yield
    monkeypatch.setattr(_channel.os, "sched_yield", lambda: (yields.append(1), real_yield())[1])
    a, b = mp.Pipe()
    try:
        replies = _channel.BusyWait(a, 0.002)
        b.send_bytes(b"x")
        assert replies.wait(None) is True and replies.spin  # readable at once: a short wait
        a.recv_bytes()
        t0 = time.perf_counter()
        assert replies.wait(0.01) is False  # polled for 2 ms, then slept out the timeout
        assert time.perf_counter() - t0 >= 0.01
        assert yields and replies.spin is False
        yields.clear()
        assert replies.wait(0.005) is False  # after a long wait it sleeps without polling
        assert not yields
        b.send_bytes(b"y")
        assert replies.wait(None) is True and replies.spin  # a short wait: polling is back
        a.recv_bytes()
        b.close()
        assert replies.wait(1.0) is True  # the other end closed: readable (recv raises EOF)
        never = _channel.BusyWait(a, 0.0)
        assert never.spin is False
    finally:
        a.close()


@pytest.mark.parametrize("shared_memory", [False, True])
@pytest.mark.parametrize("busy_poll", [0.0, 0.001])
def test_busy_polling_and_shared_memory_change_no_result(
    busy_poll: float, shared_memory: bool
) -> None:
    import gemgym

    ids = ["game:GuessTheNumber-v0-hard"] * 6
    actions = [[f"\\boxed{{{(7 * k + i) % 50 + 1}}}" for i in range(6)] for k in range(40)]

    def run(backend: str, **opts: object) -> list[object]:
        venv = gemgym.make_vec(ids, backend=backend, backend_options=opts)
        try:
            out: list[object] = [venv.reset(seed=3)[0]]
            for batch in actions:
                obs, rew, term, trunc, _ = venv.step(batch)
                out.append((obs, rew.tolist(), term.tolist(), trunc.tolist()))
            return out
        finally:
            venv.close()

    if shared_memory and not shared_memory_supported():
        pytest.skip("shared memory messages need Linux on x86")
    opts = {"num_workers": 2, "busy_poll": busy_poll, "shared_memory": shared_memory}
    assert run("process", **opts) == run("sync")
    with pytest.raises(Exception, match="busy_poll"):
        make_vector_env(env_fns=[FaultyEnv], backend="process", busy_poll=-1.0)


needs_shm = pytest.mark.skipif(
    not shared_memory_supported(), reason="shared memory messages need Linux on x86"
)


@needs_shm
def test_messages_larger_than_shared_memory_go_through_the_pipe() -> None:
    before = shm_files()
    with faulty(4, busy_poll=0.001) as venv:
        assert venv.shared_memory
        venv.reset(seed=0)
        big = 3 << 20  # over the region (256 KiB), both ways
        for k in range(3):
            obs, _, _, tr, _ = venv.step(["x" * big, f"big:{big}", "ok", f"big:{10 + k}"])
            assert not tr.any()
            assert obs[0].startswith(f"step {2 * k + 1}:") and obs[2].startswith(
                f"step {2 * k + 1}:"
            )
            assert obs[1] == "b" * big and obs[3] == "b" * (10 + k)
            obs, _, _, _, _ = venv.step(["ok"] * 4)  # small ones through memory again
            assert obs[1].startswith(f"step {2 * k + 2}:")
    assert shm_files() <= before  # removed once mapped


@needs_shm
@pytest.mark.parametrize("busy_poll", [0.0, 0.001])
def test_shared_memory_wakes_a_sleeping_side(busy_poll: float) -> None:
    # a slow parent: the workers stop polling and sleep on their pipes, and are woken
    with faulty(4, busy_poll=busy_poll) as venv:
        venv.reset(seed=0)
        for k in range(3):
            time.sleep(0.02)
            obs, _, _, tr, _ = venv.step(["ok"] * 4)
            assert not tr.any() and obs[0].startswith(f"step {k + 1}")
    # slow envs: the parent stops polling and sleeps until a worker wakes it
    venv = make_vector_env(
        env_fns=[functools.partial(SleepEnv, sleep_s=0.01)] * 4,
        backend="process",
        num_workers=2,
        busy_poll=busy_poll,
    )
    with venv:
        venv.reset(seed=0)
        for k in range(5):
            t0 = time.perf_counter()
            obs, _, _, _, _ = venv.step(["a"] * 4)
            assert obs[3].startswith(f"step {k + 1}")
            assert time.perf_counter() - t0 < 1.0


@needs_shm
def test_shared_memory_channel_times_out_and_sees_a_closed_peer() -> None:
    import multiprocessing as mp

    a, b = mp.Pipe()
    path = create_shared_file(64)
    try:
        parent = SharedMemoryChannel(a, path, 64, parent=True, spin_s=0.001)
        worker = SharedMemoryChannel(b, path, 64, parent=False, spin_s=0.001)
    finally:
        os.unlink(path)
    t0 = time.perf_counter()
    assert worker.recv(0.05) is None
    assert 0.04 < time.perf_counter() - t0 < 1.0
    parent.send(b"hello")
    assert worker.recv(1.0) == b"hello"
    parent.send(b"z" * 100)  # over capacity: through the pipe
    assert worker.recv(1.0) == b"z" * 100
    worker.send(b"back")
    assert parent.recv(None) == b"back"
    worker.close()
    with pytest.raises((EOFError, OSError)):
        parent.recv(1.0)
    parent.close()


def test_shared_memory_true_is_refused_where_it_is_unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemgym.vector import process

    monkeypatch.setattr(process, "shared_memory_supported", lambda: False)
    with pytest.raises(VectorEnvError, match="x86"):
        faulty(2, shared_memory=True)
    with faulty(2) as venv:  # the default falls back to pipes
        assert venv.shared_memory is False
        venv.reset(seed=0)
        assert venv.step(["ok", "ok"])[0][1].startswith("step 1")


@needs_shm
def test_a_worker_without_room_in_dev_shm_uses_its_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemgym.vector import process

    def full(capacity: int) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(process, "create_shared_file", full)
    with faulty(4) as venv:
        assert all(type(wk.chan).__name__ == "PipeChannel" for wk in venv._workers)
        venv.reset(seed=0)
        obs, _, _, tr, _ = venv.step(["ok", "crash", "ok", "ok"])
        assert tr.tolist() == [True, True, False, False] and obs[2].startswith("step 1")
