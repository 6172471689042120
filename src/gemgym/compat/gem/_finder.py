"""The import switch: ``gem`` and ``gem.*`` resolve to :mod:`gemgym.compat.gem`.

:func:`install` puts a meta-path finder first on ``sys.meta_path`` that answers ``import gem.x``
with the module ``gemgym.compat.gem.x`` (the same module object under both names, so classes and
registries are shared). It refuses, and says so, when a real ``gem`` package (``gem-llm``) is
importable: the real one always wins.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["GemFinder", "install", "installed", "real_gem_location", "uninstall"]

_TARGET = "gemgym.compat.gem"


class _AliasLoader(importlib.abc.Loader):
    """Load ``gem.x`` as the already importable ``gemgym.compat.gem.x``."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set __spec__ to the alias's spec: give the module its own back
        if self._spec is not None:
            module.__spec__ = self._spec


class GemFinder(importlib.abc.MetaPathFinder):
    """Find ``gem`` and ``gem.*`` in :mod:`gemgym.compat.gem`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "gem" and not fullname.startswith("gem."):
            return None
        target_name = _TARGET + fullname[len("gem") :]
        try:
            found = importlib.util.find_spec(target_name)
        except ModuleNotFoundError:
            return None
        if found is None:
            return None
        return importlib.util.spec_from_loader(
            fullname,
            _AliasLoader(target_name),
            is_package=found.submodule_search_locations is not None,
        )


_FINDER = GemFinder()


def real_gem_location() -> str | None:
    """Where a real ``gem`` package would be imported from, or ``None`` when there is none."""
    loaded = sys.modules.get("gem")
    if loaded is not None and not loaded.__name__.startswith(_TARGET):
        return str(getattr(loaded, "__file__", None) or loaded)
    for finder in sys.meta_path:
        if isinstance(finder, GemFinder):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find("gem", None)
        except Exception:  # a broken finder says nothing about gem
            continue
        if spec is not None:
            return str(spec.origin or list(spec.submodule_search_locations or []))
    return None


def installed() -> bool:
    """Whether the switch is on."""
    return any(isinstance(f, GemFinder) for f in sys.meta_path)


def install(*, quiet: bool = False) -> bool:
    """Turn the switch on: ``import gem`` gives this layer. Returns whether it is on.

    When a real ``gem`` package is importable, nothing changes (the real one is used) and, unless
    ``quiet``, a line on stderr says so.
    """
    if installed():
        return True
    real = real_gem_location()
    if real is not None:
        if not quiet:
            print(
                f"gemgym.compat.gem: a real 'gem' package is installed ({real}); it is used, "
                "the gemgym compatibility layer is not switched on",
                file=sys.stderr,
            )
        return False
    sys.meta_path.insert(0, _FINDER)
    return True


def uninstall() -> None:
    """Turn the switch off and forget the ``gem`` modules it gave (for tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, GemFinder)]
    for name in [n for n in sys.modules if n == "gem" or n.startswith("gem.")]:
        if sys.modules[name].__name__.startswith(_TARGET):
            del sys.modules[name]
