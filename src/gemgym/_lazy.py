"""Names a package exports, some imported only on first use (keeps ``import gemgym`` fast).

A package writes each exported name once, as an explicit re-export (PEP 484's ``X as X``)::

    from typing import TYPE_CHECKING

    from gemgym._lazy import lazy_exports
    from gemgym.core import Env as Env              # exported, imported now

    if TYPE_CHECKING:
        from gemgym.vector import VectorEnv as VectorEnv  # exported, imported on first use
        from gemgym.vector import AutoresetMode           # for annotations only: not exported

    def make_thing() -> None: ...                   # public definitions are exported too

    __getattr__, __dir__ = lazy_exports(globals())

:func:`lazy_exports` reads the package's own source once and derives the three things that
used to be written by hand: ``__all__``, the lazy map (name -> defining module) and, from the
same lines, what type checkers see (they read the ``if TYPE_CHECKING:`` imports directly).
"""

from __future__ import annotations

import ast
import importlib
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def _source(namespace: MutableMapping[str, Any]) -> str:
    path = namespace.get("__file__")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError:
            pass
    spec = namespace.get("__spec__")
    loader = getattr(spec, "loader", None)
    source = loader.get_source(namespace["__name__"]) if loader is not None else None
    if source is None:
        raise ImportError(f"{namespace['__name__']}: its source is needed to read its exports")
    return str(source)


def _resolve(package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return str(node.module)
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def parse_exports(package: str, source: str) -> tuple[list[str], dict[str, str]]:
    """``(__all__, lazy map)`` of a package ``__init__`` written as this module describes.

    Exported: names imported as ``X as X`` (eagerly at top level, or lazily under
    ``if TYPE_CHECKING:``), public top-level ``def``/``class``/assignments, and ``__version__``.
    """
    exported: list[str] = []
    lazy: dict[str, str] = {}

    def reexports(node: ast.stmt) -> list[tuple[str, ast.ImportFrom | None]]:
        if isinstance(node, ast.ImportFrom):
            return [(a.name, node) for a in node.names if a.asname == a.name]
        if isinstance(node, ast.Import):
            return [(a.name, None) for a in node.names if a.asname == a.name]
        return []

    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for inner in node.body:
                for name, imp in reexports(inner):
                    if imp is None:
                        raise ImportError(f"{package}: lazy 'import {name} as {name}' unsupported")
                    lazy[name] = _resolve(package, imp)
                    exported.append(name)
            continue
        names: list[str] = [name for name, _ in reexports(node)]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
        exported += [n for n in names if not n.startswith("_") or n == "__version__"]
    return sorted(set(exported)), lazy


def deprecated_alias(package: str, old: str, new: str) -> None:
    """Warn that ``package.old`` is the deprecated name of ``package.new``."""
    warnings.warn(
        f"{package}.{old} is deprecated; use {package}.{new}", DeprecationWarning, stacklevel=3
    )


def lazy_exports(
    namespace: MutableMapping[str, Any], *, deprecated: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Set the package's ``__all__`` and return its module ``__getattr__`` and ``__dir__``.

    ``namespace`` is the package's ``globals()``. A lazy name is imported on first access and
    kept there, so later accesses are plain attribute lookups. ``deprecated`` maps old names
    (not exported) to the exported names they still resolve to, with a ``DeprecationWarning``.
    """
    package = namespace["__name__"]
    exported, lazy = parse_exports(package, _source(namespace))
    namespace["__all__"] = exported
    renamed = dict(deprecated or {})

    def __getattr__(name: str) -> Any:
        if name in renamed:
            deprecated_alias(package, name, renamed[name])
            new = renamed[name]
            return namespace[new] if new in namespace else __getattr__(new)
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exported))

    return __getattr__, __dir__
