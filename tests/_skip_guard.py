"""A pytest plugin (loaded by tests/conftest.py): with ``GEMGYM_REQUIRE_EXTRAS`` set (scripts/test
sets it for its main run), a test skipped because an extra of that list is missing fails the run.

``GEMGYM_REQUIRE_EXTRAS`` is a comma-separated list of gemgym extras (``all`` is expanded from
pyproject.toml). A skip counts when its reason names one (``gemgym[openenv]``) or is pytest's
``could not import 'MODULE'`` (or ``could not import MODULE``, from
``helpers.extras.needs_package``) for a module that one of them installs. Skips for other reasons
(no bubblewrap, one CPU, an extra outside the list such as ``verl``) are left alone, so the
verdict depends only on what is installed, never on timing.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

VAR = "GEMGYM_REQUIRE_EXTRAS"

# distributions whose import name is not their name with "-" as "_"
_IMPORT_NAMES = {
    "pyyaml": "yaml",
    "faiss-cpu": "faiss",
    "openenv-core": "openenv",
    "dm-tree": "tree",
    "levenshtein": "Levenshtein",
}
_EXTRA_RE = re.compile(r"gemgym\[([A-Za-z0-9_,.-]+)\]")
# pytest's "could not import 'M'" and helpers.extras.needs_package's "(could not import M)"
_IMPORT_RE = re.compile(r"could not import '?([A-Za-z0-9_.]+)")


def _required(pyproject: Path, names: str) -> tuple[set[str], dict[str, str]]:
    """The extras ``names`` asks for (``all`` and other self-references expanded) and, for
    each module they install, the extra it comes from."""
    extras: dict[str, list[str]] = tomllib.loads(pyproject.read_text())["project"][
        "optional-dependencies"
    ]
    wanted: set[str] = set()
    todo = [n.strip() for n in names.split(",") if n.strip()]
    while todo:
        name = todo.pop()
        if name in wanted or name not in extras:
            continue
        wanted.add(name)
        for req in extras[name]:
            match = _EXTRA_RE.match(req.replace(" ", ""))
            if match and req.startswith("gemgym["):
                todo.extend(match.group(1).split(","))
    modules: dict[str, str] = {}
    for name in wanted:
        for req in extras[name]:
            dist = re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()
            if dist and dist != "gemgym":
                modules[_IMPORT_NAMES.get(dist, dist.replace("-", "_"))] = name
    return wanted, modules


def missing_extra(reason: str, wanted: set[str], modules: dict[str, str]) -> str | None:
    """The required extra a skip ``reason`` says is missing, or ``None``."""
    for match in _EXTRA_RE.finditer(reason):
        for extra in match.group(1).split(","):
            if extra in wanted:
                return extra
    match = _IMPORT_RE.search(reason)
    if match:
        return modules.get(match.group(1).split(".")[0])
    return None


class _Guard:
    def __init__(self, wanted: set[str], modules: dict[str, str]) -> None:
        self.wanted = wanted
        self.modules = modules
        self.found: list[tuple[str, str, str]] = []  # (test, extra, reason)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        self._record(report)

    @pytest.hookimpl(trylast=True)
    def pytest_collectreport(self, report: Any) -> None:  # a module-level importorskip
        self._record(report)

    def _record(self, report: Any) -> None:
        if not report.skipped or getattr(report, "wasxfail", None) is not None:
            return
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        extra = missing_extra(reason, self.wanted, self.modules)
        if extra is not None:
            self.found.append((report.nodeid, extra, reason))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.found:
            return
        terminalreporter.section(f"skipped for a missing extra ({VAR})", red=True)
        for nodeid, extra, reason in self.found:
            terminalreporter.line(f"{nodeid}: gemgym[{extra}]: {reason}")
        terminalreporter.line(
            f"{len(self.found)} test(s) of required extras were skipped: install the extras "
            f'(pip install -e ".[{",".join(sorted({e for _, e, _ in self.found}))}]") or '
            f"leave them out of {VAR}"
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        if self.found and exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    names = os.environ.get(VAR, "").strip()
    if not names:
        return
    wanted, modules = _required(Path(__file__).resolve().parents[1] / "pyproject.toml", names)
    config.pluginmanager.register(_Guard(wanted, modules), "gemgym-skip-guard")
