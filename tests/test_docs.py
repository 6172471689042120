"""The Python examples in the README and the concepts page run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# examples that need a server or a package the reader writes themselves are not run
NEEDS_OUTSIDE = ("localhost", "mygames", "mypkg", "[project.")


def _blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [
        b
        for b in re.findall(r"```python\n(.*?)```", text, re.S)
        if not any(s in b for s in NEEDS_OUTSIDE)
    ]


PAGES = ["README.md", "docs/concepts.md", "docs/episodes.md"]


@pytest.mark.parametrize("page", PAGES)
def test_examples_run_in_order(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's examples build on each other, so they run in one namespace, in order."""
    blocks = _blocks(ROOT / page)
    assert blocks, f"{page} has no runnable examples"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"<{page} example {i}>", "exec"), namespace)
