#!/usr/bin/env python3
"""Build WikiGame's shipped page set from the HTML of the Python documentation.

    apt-get download python3.11-doc && dpkg-deb -x python3.11-doc_*.deb /tmp/pydoc
    python scripts/build_wiki_pages.py /tmp/pydoc/usr/share/doc/python3.11/html

writes ``src/gemgym/wiki/data/pydocs_pages.jsonl`` (one page a line: ``title``, ``path``,
``text``, ``links``), from the pages of the library reference, the tutorial, the HOWTOs, the
language reference, the FAQ, "Python Setup and Usage" and the glossary. A page's links are the
other pages of the set its body links to, in the order they first appear; its text is the start
of its body's text. The output depends only on the input files (sorted walks, no clock), so the
same documentation gives the same bytes. The shipped file was built from Debian's
python3.11-doc 3.11.2-6+deb12u9 (src/gemgym/wiki/data/README.md).
"""

from __future__ import annotations

import argparse
import html.parser
import json
import posixpath
import re
import sys
from pathlib import Path

SECTIONS = ("library", "tutorial", "howto", "reference", "faq", "using")
SINGLE_PAGES = ("glossary.html",)
TEXT_CHARS = 1000
_BLOCKS = {"p", "pre", "li", "dt", "dd", "h1", "h2", "h3", "h4", "div", "tr", "table"}
_SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.\s+")
_MODULE_TITLE = re.compile(r"^([A-Za-z0-9_.]+) — ")
OUT = Path(__file__).resolve().parent.parent / "src/gemgym/wiki/data/pydocs_pages.jsonl"


class _Body(html.parser.HTMLParser):
    """The text, the first <h1> and the hrefs of a Sphinx page's ``div[role=main]``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.inside = False
        self.in_h1 = False
        self.in_headerlink = False
        self.h1: list[str] | None = None
        self.text: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and a.get("role") == "main" and not self.inside:
            self.inside, self.depth = True, 0
        if not self.inside:
            return
        if tag == "div":
            self.depth += 1
        elif tag == "h1" and self.h1 is None:
            self.in_h1, self.h1 = True, []
        elif tag == "a":
            if "headerlink" in (a.get("class") or ""):
                self.in_headerlink = True
            elif a.get("href"):
                self.hrefs.append(a["href"] or "")

    def handle_endtag(self, tag: str) -> None:
        if not self.inside:
            return
        if tag == "a":
            self.in_headerlink = False
        elif tag == "h1":
            self.in_h1 = False
        if tag in _BLOCKS:
            self.text.append("\n")
        if tag == "div":
            self.depth -= 1
            if self.depth == 0:
                self.inside = False

    def handle_data(self, data: str) -> None:
        if not self.inside or self.in_headerlink:
            return
        if self.in_h1 and self.h1 is not None:
            self.h1.append(data)
        self.text.append(data)


def _title(h1: str) -> str:
    h1 = " ".join(h1.split())
    h1 = _SECTION_NUMBER.sub("", h1)
    found = _MODULE_TITLE.match(h1)
    return found.group(1) if found else h1


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit]


def build(html_dir: Path) -> list[dict[str, object]]:
    """The page records of the documentation under ``html_dir``, sorted by file."""
    files = [
        f"{section}/{p.name}"
        for section in SECTIONS
        for p in sorted((html_dir / section).glob("*.html"))
    ]
    files += [f for f in SINGLE_PAGES if (html_dir / f).exists()]
    parsed: dict[str, tuple[str, str, list[str]]] = {}
    h1s: dict[str, str] = {}
    for name in files:
        body = _Body()
        body.feed((html_dir / name).read_text(encoding="utf-8"))
        if body.h1 is None:
            continue
        targets: list[str] = []
        for href in body.hrefs:
            if href.startswith(("#", "http:", "https:", "mailto:")):
                continue
            path = href.split("#", 1)[0]
            if not path.endswith(".html"):
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), path))
            if target != name and target not in targets:
                targets.append(target)
        h1s[name] = _SECTION_NUMBER.sub("", " ".join("".join(body.h1).split()))
        parsed[name] = (_title(h1s[name]), "".join(body.text), targets)
    titles = {name: t for name, (t, _, _) in parsed.items()}
    for name, title in list(titles.items()):
        same = [n for n, t in titles.items() if t == title]
        if len(same) > 1 and Path(name).stem != title:  # Wikipedia's "Title (qualifier)"
            found = _MODULE_TITLE.match(" ".join(h1s[name].split()))
            qualifier = h1s[name].split(" — ", 1)[1] if found else name.split("/", 1)[0]
            titles[name] = f"{title} ({' '.join(qualifier.split())})"
    if len(set(titles.values())) != len(titles):
        raise SystemExit("two pages have the same title")
    records: list[dict[str, object]] = []
    for name, (_, text, targets) in parsed.items():
        title = titles[name]
        records.append(
            {
                "title": title,
                "path": title.replace(" ", "_").replace("/", "_"),
                "source": name,
                "text": _cut(text, TEXT_CHARS),
                "links": [titles[t] for t in targets if t in titles],
            }
        )
    if len({r["path"] for r in records}) != len(records):
        raise SystemExit("two pages have the same path")
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the html/ folder of python3.11-doc")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output JSONL (default {OUT})")
    args = parser.parse_args(argv)
    records = build(args.html_dir)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n")
    links = sum(len(r["links"]) for r in records)  # type: ignore[arg-type]
    print(f"{len(records)} pages, {links} links -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
