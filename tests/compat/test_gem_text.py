"""The text a model sees through the layer is GEM's, string for string.

``data/gem_text.json`` was captured from GEM itself (axon-rl/gem at 4069f2f, Python 3.11) by
running ``gem_text_capture.py`` with GEM importable (the WikiGame scenarios with ``pywikiapi``
and ``beautifulsoup4`` added, over the loopback MediaWiki API both sides talk to); here the
same scenarios run through the layer. The games' own texts differ where gemgym's games differ on purpose (see
docs/gem-compat.md, "Deliberate differences"): those scenarios are listed below with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.compat import gem_text_capture

from helpers.extras import needs_module

GEM_TEXT: dict[str, list[str] | str] = json.loads(
    (Path(__file__).parent / "data" / "gem_text.json").read_text(encoding="utf-8")
)

_RNG = "boards and examples are drawn from the env's own generator, not GEM's global random"
_NLTK = "GEM needs NLTK's 'words' corpus, a download: GEM could not run it here"
GAME_DIFFERENCES = {
    "game:Crosswords-v0-easy steps": _RNG,
    "game:FifteenPuzzle-v0-easy rules": "gemgym states the turn limit",
    "game:FifteenPuzzle-v0-easy steps": _RNG,
    "game:Game2048-v0-easy rules": _RNG + " (the example move)",
    "game:Game2048-v0-easy steps": _RNG,
    "game:GuessTheNumber-v0-easy rules": "the example guess is fixed, not a draw",
    "game:Hangman-v0-easy rules": _NLTK,
    "game:Hangman-v0-easy steps": _NLTK,
    "game:Mastermind-v0-easy rules": "GEM's 'I will say mark' typo fixed; the example is fixed",
    "game:Mastermind-v0-easy steps": "a guess of the wrong length is reported by count",
    "game:Minesweeper-v0-easy rules": "gemgym states the board size; the examples are fixed",
    "game:Sokoban-v0-easy rules": _RNG + " (the example move)",
    "game:Sokoban-v0-easy steps": _RNG,
    "game:Sudoku-v0-easy rules": "GEM's rules describe nine 4x4 subgrids on a 4x4 board",
    "game:Sudoku-v0-easy steps": _RNG,
    "game:TowerofHanoi-v0-easy rules": "gemgym states the turn limit",
    "game:TowerofHanoi-v0-easy steps": "an invalid action names its turn",
    "game:WordSearch-v0-easy rules": _NLTK,
    "game:WordSearch-v0-easy steps": _NLTK,
    "game:Wordle-v0-easy rules": _NLTK,
    "game:Wordle-v0-easy steps": _NLTK,
}
SAME = sorted(set(GEM_TEXT) - set(GAME_DIFFERENCES))


def test_the_listed_differences_are_games_only() -> None:
    assert set(GAME_DIFFERENCES) <= set(GEM_TEXT)
    assert all(name.startswith("game:") for name in GAME_DIFFERENCES)
    # every wrapper, tool, prompt, order and vector scenario is compared
    for family in ("history", "python tool", "search tool", "qa", "math", "vector", "wikigame"):
        assert any(name.startswith(family) for name in SAME), family


@pytest.mark.usefixtures("gem_switch")
@pytest.mark.parametrize("name", SAME)
def test_the_layer_shows_gems_text(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from gemgym.compat.gem import GemCompatWarning

    if name.startswith(("qa", "math", "vector")):
        needs_module("datasets", "datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GemCompatWarning)  # GEM's use_mp=: ignored, as intended
        got = gem_text_capture.scenarios()[name]()
    assert got == GEM_TEXT[name]
