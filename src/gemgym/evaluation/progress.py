"""Live progress of a run with rich: one bar per env (success so far, errors) and a total bar
(episodes/s, tokens/s, errors)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["EvalProgress"]


class EvalProgress:
    """Per-env bars and a total bar, fed with each record as it is written."""

    def __init__(
        self, totals: Mapping[str, int], done: Sequence[Mapping[str, Any]], *, enabled: bool
    ) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.enabled = enabled
        self.progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            "{task.fields[stats]}",
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not enabled,
            transient=False,
            refresh_per_second=4,
        )
        self._ok: Counter[str] = Counter()
        self._success: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._tokens = 0
        self._episodes = 0
        self._t0 = time.perf_counter()
        width = max((len(n) for n in totals), default=10)
        self._bars = {
            name: self.progress.add_task(name.ljust(width), total=total, stats="")
            for name, total in totals.items()
        }
        self._total = self.progress.add_task(
            "total".ljust(width), total=sum(totals.values()), stats=""
        )
        for r in done:
            if r.get("status") != "error" and r["env"] in self._bars:
                self._count(r)
                self.progress.advance(self._bars[r["env"]])
                self.progress.advance(self._total)
        self._episodes = 0  # rates count this session only

    @property
    def episodes(self) -> int:
        """Records counted this session."""
        return self._episodes

    def _count(self, r: Mapping[str, Any]) -> None:
        name = r["env"]
        if r["status"] != "error":
            self._ok[name] += 1
            self._success[name] += bool(r["success"])
        else:
            self._errors[name] += 1

    def __enter__(self) -> EvalProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, r: Mapping[str, Any]) -> None:
        """Count one record."""
        name = r["env"]
        self._count(r)
        self._episodes += 1
        self._tokens += int(r.get("usage", {}).get("completion_tokens", 0))
        if not self.enabled:
            return
        ok = self._ok[name]
        rate = f"{self._success[name] / ok:6.1%}" if ok else "   -  "
        err = self._errors[name]
        stats = f"success {rate}" + (f" [red]errors {err}[/]" if err else "")
        if r["status"] != "error":
            self.progress.update(self._bars[name], advance=1, stats=stats)
            self.progress.advance(self._total)
        else:
            self.progress.update(self._bars[name], stats=stats)
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        errors = sum(self._errors.values())
        total_stats = f"{self._episodes / elapsed:7.1f} ep/s {self._tokens / elapsed:9.1f} tok/s"
        if errors:
            total_stats += f" [red]errors {errors}[/]"
        self.progress.update(self._total, stats=total_stats)
