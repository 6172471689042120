"""A run's files: ``episodes.jsonl`` (one record per episode), ``run.json``, ``summary.json``.

Records are appended and flushed as episodes end, so a run stopped at any moment (Ctrl-C, a
kill) keeps every finished episode; a torn last line (a kill mid-write) is dropped when the run
is resumed. A record is identified by its key ``(env, task, sample)``. An error played again by
``--resume`` appends its new record (its ``attempt`` one more); the run then compacts the file
(:meth:`RunDir.compact`, when it ends or is resumed), so that ``episodes.jsonl`` holds one line
per episode. A reader of a file that was not compacted (a run killed mid-way) keeps the last
record of each key (:meth:`RunDir.read_records`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from gemgym.errors import ConfigError

__all__ = ["RunDir", "record_key"]

EPISODES = "episodes.jsonl"
CONFIG = "run.json"
SUMMARY = "summary.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"


def record_key(record: Mapping[str, Any]) -> tuple[str, int, int]:
    """``(env, task, sample)`` of a record."""
    return (str(record["env"]), int(record["task"]), int(record["sample"]))


class RunDir:
    """The folder of one evaluation run."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.episodes = self.path / EPISODES
        self.config = self.path / CONFIG
        self.summary = self.path / SUMMARY
        self.report_md = self.path / REPORT_MD
        self.report_html = self.path / REPORT_HTML
        self._file: IO[str] | None = None

    @classmethod
    def open_existing(cls, path: str | Path) -> RunDir:
        """A finished or stopped run (a folder with ``episodes.jsonl``, or that file itself)."""
        p = Path(path)
        if p.is_file() and p.name == EPISODES:
            p = p.parent
        run = cls(p)
        if not run.episodes.is_file():
            raise ConfigError(f"{p} is not a gemgym eval run (no {EPISODES} in it)")
        return run

    def exists(self) -> bool:
        """Whether the folder already holds episodes."""
        return self.episodes.is_file() and self.episodes.stat().st_size > 0

    def read_config(self) -> dict[str, Any]:
        """``run.json`` (empty when missing)."""
        if not self.config.is_file():
            return {}
        data: dict[str, Any] = json.loads(self.config.read_text(encoding="utf-8"))
        return data

    def write_json(self, path: Path, data: Any) -> None:
        """Write JSON atomically (a temporary file renamed over the target)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def read_records(self) -> list[dict[str, Any]]:
        """The records, the last one of each key, in file order of those last records."""
        if not self.episodes.is_file():
            return []
        latest: dict[tuple[str, int, int], dict[str, Any]] = {}
        with open(self.episodes, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a torn last line: the episode did not finish writing
                try:
                    rec = json.loads(line)
                    key = record_key(rec)
                except (ValueError, KeyError, TypeError):
                    continue
                latest.pop(key, None)
                latest[key] = rec
        return list(latest.values())

    def compact(self) -> bool:
        """Rewrite ``episodes.jsonl`` with one line per episode (the last record of each key)
        when it holds superseded or unreadable lines; returns whether it was rewritten."""
        if not self.episodes.is_file():
            return False
        with open(self.episodes, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        records = self.read_records()
        if len(records) == lines:
            return False
        self.rewrite(records)
        return True

    def open_for_append(self) -> None:
        """Open ``episodes.jsonl`` for appending, first cutting a torn last line."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.episodes.is_file():
            with open(self.episodes, "rb+") as f:
                data = f.read()
                end = data.rfind(b"\n") + 1
                if end != len(data):
                    f.truncate(end)
        self._file = open(self.episodes, "a", encoding="utf-8")  # noqa: SIM115

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it to the OS (it survives a kill of this process)."""
        assert self._file is not None, "open_for_append() first"
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def rewrite(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Replace ``episodes.jsonl`` with ``records`` (atomically)."""
        tmp = self.episodes.with_name(EPISODES + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, self.episodes)

    def close(self) -> None:
        """Close the episodes file."""
        if self._file is not None:
            self._file.close()
            self._file = None
