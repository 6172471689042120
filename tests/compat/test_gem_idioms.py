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


def test_dataset_env_state_round_trip_and_spawn() -> None:
    """A dataset env's ``get_state()`` / ``set_state()`` under GEM's names bring back the item
    graded (the walk over the items goes on, as GEM's); ``spawn(same_state=True)`` grades the
    same item."""
    datasets = pytest.importorskip("datasets", reason=reason("datasets", "could not import"))
    import gemgym.compat.gem as gem

    ds = datasets.Dataset.from_dict(
        {"problem": ["What is 2 + 2?", "What is 3 * 3?"], "answer": ["4", "9"]}
    )
    env = gem.make("math:GSM8K", dataset=ds, seed=1)
    first, _ = env.reset()
    state = env.get_state()
    assert state["first_obs"] == first and state["answer"] == env.answer
    second, _ = env.reset()
    assert second != first
    env.set_state(state)
    assert env.answer == state["answer"]
    assert env.step("\\boxed{" + str(state["answer"]) + "}")[1] == 1.0
    child = env.spawn(same_state=True)
    assert child.answer == env.answer and child.seed == 1
    assert child.step("\\boxed{" + str(env.answer) + "}")[1] == 1.0
