"""Each package writes its exports once; ``gemgym._lazy`` derives ``__all__`` and the lazy map."""

from __future__ import annotations

import importlib

import pytest

from gemgym._lazy import parse_exports

PACKAGES = [
    "gemgym",
    "gemgym.audit",
    "gemgym.evaluation",
    "gemgym.llm",
    "gemgym.multiagent",
    "gemgym.rl",
    "gemgym.rl.trainer",
    "gemgym.tools",
    "gemgym.wrappers",
]

SOURCE = """
from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports
from pkg.core import Env as Env, helper
from . import sub as sub

if TYPE_CHECKING:
    from pkg.vector import VectorEnv as VectorEnv, AutoresetMode
    from .rel import Near as Near
    from ..up import Far as Far

__version__ = "1"
LIMIT = 3
_private = 4


def make() -> None: ...


class Thing: ...


__getattr__, __dir__ = lazy_exports(globals())
"""


def test_exports_are_the_explicit_reexports_and_public_definitions() -> None:
    exported, lazy = parse_exports("pkg.inner", SOURCE)
    assert exported == sorted(
        ["Env", "sub", "VectorEnv", "Near", "Far", "__version__", "LIMIT", "make", "Thing"]
    )
    assert lazy == {"VectorEnv": "pkg.vector", "Near": "pkg.inner.rel", "Far": "pkg.up"}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__, name
    for export in package.__all__:
        assert getattr(package, export) is not None, f"{name}.{export}"
        assert export in dir(package)


def test_type_only_imports_are_not_exported() -> None:
    import gemgym.multiagent

    assert "GameSource" not in gemgym.multiagent.__all__
    with pytest.raises(AttributeError, match="GameSource"):
        gemgym.multiagent.GameSource  # noqa: B018


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("gemgym.llm", "Backend", "LLMBackend"),
        ("gemgym.llm.backend", "Backend", "LLMBackend"),
        ("gemgym.sandbox", "Backend", "SandboxBackend"),
    ],
)
def test_renamed_names_are_deprecated_aliases(module: str, old: str, new: str) -> None:
    package = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated; use .*{new}"):
        value = getattr(package, old)
    assert value is getattr(package, new)
    assert old not in package.__all__
