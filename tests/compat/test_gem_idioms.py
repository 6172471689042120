"""Every common GEM idiom of tests/compat/gem_idioms.py, as a GEM user writes it (``import gem``),
runs on gemgym's layer through the import switch. The same list passes on GEM itself
(``scripts/gem_idioms.py`` under GEM's interpreter; docs/gem-compat.md has both counts)."""

from __future__ import annotations

import importlib.util
import re
import warnings

import pytest
from tests.compat.gem_idioms import IDIOMS, Idiom, run_idiom

from helpers.extras import missing_extra, reason

_EXTRA_OF_MODULE = {"datasets": "datasets", "reasoning_gym": "rg"}
_ENV_ID = re.compile(r"\"((?:game|math|qa|code|rg):[A-Za-z0-9_.-]+)\"")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _missing(idiom: Idiom) -> str | None:
    """Why this idiom cannot run here (an extra it or one of its env ids needs), or ``None``."""
    for module in idiom.needs:
        extra = _EXTRA_OF_MODULE[module]
        if importlib.util.find_spec(module) is None:
            return reason(extra, f"could not import {module}")
    for env_id in _ENV_ID.findall(idiom.code):
        extra = missing_extra(env_id)
        if extra is not None:
            return reason(extra, env_id)
    return None


def test_the_list_is_long_and_named_once() -> None:
    names = [i.name for i in IDIOMS]
    assert len(names) == len(set(names)) >= 37
    assert all(i.code.lstrip().startswith(("import", "from", "class")) for i in IDIOMS)
    assert not any("gemgym" in i.code for i in IDIOMS)  # GEM code, not gemgym's


@pytest.mark.parametrize("idiom", IDIOMS, ids=[i.name for i in IDIOMS])
def test_gem_idiom_runs_on_the_layer(idiom: Idiom, gem_switch: None) -> None:
    why = _missing(idiom)
    if why is not None:
        pytest.skip(why)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GemCompatWarning for keywords the layer ignores
        outcome = run_idiom(idiom)
    import gem

    assert gem.__file__ is not None and gem.__file__.endswith("gemgym/compat/gem/__init__.py")
    assert outcome.status == "pass", f"{idiom.name} ({idiom.source}):\n{outcome.detail}"
