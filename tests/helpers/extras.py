"""Skips that name the gemgym extra a test needs, so a test of a missing extra skips (never
fails) and says what to install.

The reason always reads ``needs pip install "gemgym[EXTRA]"``: ``tests/_skip_guard.py`` reads
the extra from it, so a CI run that requires the extra fails instead of skipping.

* module level: ``needs_extra("rg")`` (or ``ray = needs_module("ray", "ray")`` to get the module);
  a package that no gemgym extra installs: ``needs_package("rapidfuzz.fuzz", "rapidfuzz")``;
* parametrised env ids: ``env_params(ids)``, each id that needs a missing extra marked skip
  (the registry knows each env's extra: :attr:`gemgym.EnvSpec.extra`);
* everywhere else (tests/conftest.py loads :class:`SkipMissingExtras`): a test or fixture that
  stops on gemgym's :class:`~gemgym.errors.DependencyNotInstalled` for an extra that is indeed
  not installed is skipped with that error as the reason. An error that names an installed
  extra, or none, still fails.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.requirements import Requirement

__all__ = [
    "SkipMissingExtras",
    "env_extra",
    "env_params",
    "extra_installed",
    "missing_extra",
    "needs_extra",
    "needs_module",
    "needs_package",
    "reason",
    "skip_without",
]


def reason(extra: str, what: str = "") -> str:
    """The skip reason for a missing ``extra`` (``what``: the module or id that needs it)."""
    return f'needs pip install "gemgym[{extra}]"' + (f" ({what})" if what else "")


_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@functools.cache
def _extras() -> dict[str, list[Requirement]]:
    """Each extra's requirements: from the checkout's pyproject.toml (the installed metadata of
    an editable install can be older), else from the installed gemgym's metadata."""
    out: dict[str, list[Requirement]] = {}
    if _PYPROJECT.is_file():
        table = tomllib.loads(_PYPROJECT.read_text())["project"]["optional-dependencies"]
        for name, reqs in table.items():
            out[name] = [Requirement(r) for r in reqs]
        return out
    for line in importlib.metadata.requires("gemgym") or ():
        req = Requirement(line)
        for name in _marker_extras(req):
            out.setdefault(name, []).append(Requirement(str(req).split(";", 1)[0]))
    return out


def _marker_extras(req: Requirement) -> list[str]:
    return re.findall(r"extra == ['\"]([^'\"]+)['\"]", str(req.marker or ""))


@functools.cache
def extra_installed(extra: str) -> bool:
    """Whether every distribution ``gemgym[extra]`` asks for (on this platform) is installed;
    an unknown extra is not."""
    extras = _extras()
    if extra not in extras:
        return False
    for req in extras[extra]:
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        if req.name == "gemgym":  # gemgym[a,b]: those extras
            if not all(extra_installed(e) for e in req.extras if e != extra):
                return False
            continue
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            return False
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            return False
    return True


def needs_extra(*extras: str, what: str = "") -> None:
    """Skip the calling module (or test) unless every one of ``extras`` is installed."""
    __tracebackhide__ = True  # the skip is reported at the caller's line, not here
    for extra in extras:
        if not extra_installed(extra):
            pytest.skip(reason(extra, what), allow_module_level=True)


def needs_module(module: str, extra: str) -> ModuleType:
    """``pytest.importorskip(module)`` with the reason naming ``extra``; returns the module."""
    __tracebackhide__ = True
    return pytest.importorskip(module, reason=reason(extra, f"could not import {module}"))


def needs_package(module: str, install: str) -> ModuleType:
    """``pytest.importorskip(module)`` for a package that no gemgym extra installs, the reason
    naming what to install (``install``: the arguments of ``pip install``)."""
    __tracebackhide__ = True
    return pytest.importorskip(
        module, reason=f"needs pip install {install} (could not import {module})"
    )


def skip_without(*extras: str) -> pytest.MarkDecorator:
    """A mark that skips a test unless every one of ``extras`` is installed."""
    missing = [e for e in extras if not extra_installed(e)]
    return pytest.mark.skipif(bool(missing), reason=reason(missing[0]) if missing else "")


def env_extra(env_id: str) -> str | None:
    """The extra the registered ``env_id`` needs (:attr:`gemgym.EnvSpec.extra`), or ``None``;
    an audit id with a tool (``math:GSM8K+python``) is its env's."""
    from gemgym.errors import EnvNotFoundError
    from gemgym.registry import spec

    try:
        return spec(env_id.split("+", 1)[0]).extra
    except EnvNotFoundError:
        return None


def missing_extra(env_id: str) -> str | None:
    """The extra ``env_id`` needs and that is not installed, or ``None``."""
    extra = env_extra(env_id)
    return extra if extra is not None and not extra_installed(extra) else None


def env_params(ids: Iterable[Any], *marks: Any) -> list[Any]:
    """``pytest.param`` for each id (a string or a ``pytest.param`` of one, keeping its marks),
    with ``marks``, skipped when its extra is missing."""
    out = []
    for item in ids:
        if isinstance(item, str):
            env_id, own, param_id = item, (), item
        else:  # a ParameterSet
            env_id, own, param_id = item.values[0], tuple(item.marks), item.id
        extra = missing_extra(env_id)
        skip = [pytest.mark.skip(reason=reason(extra, env_id))] if extra else []
        out.append(pytest.param(env_id, id=param_id, marks=[*own, *marks, *skip]))
    return out


_EXTRA_RE = re.compile(r"gemgym\[([A-Za-z0-9_.-]+)\]")


def _missing_dependency(exc: BaseException | None) -> tuple[str, str] | None:
    """``(extra, message)`` when ``exc`` (or an error it was raised from) is gemgym's
    ``DependencyNotInstalled`` naming an extra that is not installed."""
    from gemgym.errors import DependencyNotInstalled

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DependencyNotInstalled):
            match = _EXTRA_RE.search(str(exc))
            if match and not extra_installed(match.group(1)):
                return match.group(1), str(exc)
            return None
        exc = exc.__cause__ or exc.__context__
    return None


class SkipMissingExtras:
    """A pytest plugin: a test whose setup or call raises ``DependencyNotInstalled`` for a
    missing extra is skipped, the reason naming the extra (see the module doc)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        return (yield from self._skip_on_missing())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        return (yield from self._skip_on_missing())

    @staticmethod
    def _skip_on_missing() -> Any:
        try:
            return (yield)
        except Exception as e:
            found = _missing_dependency(e)
            if found is None:
                raise
            extra, message = found
            skip = pytest.skip.Exception(reason(extra, message.split("; ", 1)[0]))
            skip._use_item_location = True  # reported at the test, as a skip mark's are
            raise skip from e
