"""Stopping a run cleanly: SIGINT (Ctrl-C) and SIGTERM ask the trainer to save and stop.

:class:`StopRequest` installs handlers for both signals while a run is in progress (in the main
thread only: Python delivers signals there). The first signal only records itself; the trainer
looks at :attr:`StopRequest.signal` between SFT steps and between RL updates, writes a checkpoint
and the curves, and raises :class:`TrainingInterrupted`. A second signal gives up on saving: it
raises :class:`KeyboardInterrupt` at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

__all__ = ["STOP_SIGNALS", "StopRequest", "TrainingInterrupted"]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals that make a run save a checkpoint and stop."""


class TrainingInterrupted(KeyboardInterrupt):
    """A run stopped on SIGINT or SIGTERM after saving its checkpoint.

    A :class:`KeyboardInterrupt`, so that code which stops on Ctrl-C still does; ``signal`` is
    the signal's number, ``checkpoint`` the checkpoint written, ``message`` what happened (its
    ``str`` adds how to resume).
    """

    def __init__(self, signum: int, checkpoint: str, message: str) -> None:
        super().__init__(
            f"{message}; Trainer.run(resume=True) (gemgym train ... --resume) continues the run"
        )
        self.signal = signum
        self.checkpoint = checkpoint
        self.message = message

    @property
    def exit_status(self) -> int:
        """The shell's status for a process ended by this signal: ``128 + signal``."""
        return 128 + self.signal


class StopRequest:
    """Context manager: while active, SIGINT and SIGTERM set :attr:`signal` instead of stopping
    the process (outside the main thread it installs nothing). ``on_signal`` is called once, on
    the first signal (e.g. to log that the run will stop after the current step)."""

    def __init__(self, on_signal: Callable[[int], None] | None = None) -> None:
        self.signal: int | None = None
        self._on_signal = on_signal
        self._previous: dict[signal.Signals, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived."""
        return self.signal is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is not None:  # the second one: stop now, without saving
            self._restore()
            raise KeyboardInterrupt
        self.signal = signum
        if self._on_signal is not None:
            self._on_signal(signum)

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._restore()
