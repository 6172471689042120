"""Fixtures of the GEM compatibility tests: the import switch on for one test, warnings reset."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def gem_switch() -> Iterator[None]:
    """``import gem`` resolves to gemgym.compat.gem during the test."""
    from gemgym.compat.gem import install, uninstall

    assert install(quiet=True)
    try:
        yield
    finally:
        uninstall()


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    """Each test sees the layer's once-per-keyword warnings afresh."""
    from gemgym.compat.gem import _adapt

    _adapt._WARNED.clear()
    yield
    _adapt._WARNED.clear()
