"""PoolSandbox.warm_up: starts each worker once, from any number of threads, never waits for a
busy worker, and a closed pool starts nothing."""

from __future__ import annotations

import threading

import pytest

from gemgym.sandbox import Limits, make_sandbox
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.sandbox.pool import PoolSandbox

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


def test_concurrent_warm_ups_start_each_worker_once() -> None:
    sb = PoolSandbox(Limits(timeout=5), size=2)
    with sb:
        threads = [threading.Thread(target=sb.warm_up) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)  # no deadlock between the warm-ups
        assert sb._started == 2 and len(sb._idle) == 2
        procs = [w.proc for w in sb._idle]
        assert all(p.poll() is None for p in procs)
        sb.warm_up()  # idempotent
        assert sb._started == 2 and len(sb._idle) == 2
        assert sb.run("print(6 * 7)").stdout == "42\n"
    assert sb._started == 0 and sb._idle == []
    for p in procs:
        p.wait(10)  # close stopped every worker


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_warm_up_does_not_wait_for_a_busy_worker() -> None:
    sb = PoolSandbox(Limits(timeout=5), size=2)
    with sb:
        busy = threading.Thread(target=sb.run, args=("import time\ntime.sleep(1.5)",))
        busy.start()
        while sb._started == 0:
            threading.Event().wait(0.01)
        done = threading.Event()

        def warm_up() -> None:
            sb.warm_up()
            done.set()

        warm = threading.Thread(target=warm_up)
        warm.start()
        assert done.wait(1.2)  # the second worker started; the busy one was not awaited
        busy.join(10)
        warm.join(10)
        assert sb._started == 2


def test_a_closed_pool_starts_nothing_and_other_backends_accept_warm_up() -> None:
    sb = PoolSandbox(size=2)
    sb.close()
    sb.warm_up()
    assert sb._started == 0 and sb._idle == []
    with make_sandbox("bwrap") as plain:
        plain.warm_up()  # nothing to start: a no-op
        assert plain.run("print(1)").stdout == "1\n"
