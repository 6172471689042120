"""WikiGame's pages: :class:`WikiPage`, the link graph :class:`PageSet`, and their HTML.

The shipped set (:func:`load_pages`) is 382 pages of the Python 3.11 documentation with the
links between them (``data/pydocs_pages.jsonl``, built by ``scripts/build_wiki_pages.py``; see
``data/README.md``). :func:`render_html` writes a page as Wikipedia-style HTML (an
``h1#firstHeading`` and a ``div.mw-parser-output``, as Kiwix's Wikipedia ZIMs have), which is
what gemgym's ZIM holds and :func:`parse_html` reads back from ``kiwix-serve``.
"""

from __future__ import annotations

import hashlib
import html
import html.parser
import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote, unquote

from gemgym.errors import DatasetError

__all__ = [
    "SHIPPED_PAGES",
    "PageSet",
    "WikiPage",
    "load_pages",
    "parse_html",
    "render_html",
]

SHIPPED_PAGES = "pydocs_pages.jsonl"
"""File name of the shipped page set in ``gemgym/wiki/data``."""


@dataclass(frozen=True)
class WikiPage:
    """One page: its ``title``, its ``text`` and the titles it ``links`` to (in page order).

    ``path`` is where the page lives in a ZIM file or URL (the title with ``_`` for spaces
    and slashes, Wikipedia's convention).
    """

    title: str
    text: str
    links: tuple[str, ...]
    path: str = ""

    def __post_init__(self) -> None:
        if not self.path:
            object.__setattr__(self, "path", path_of(self.title))


def path_of(title: str) -> str:
    """The page path of ``title``: spaces and slashes become underscores."""
    return title.replace(" ", "_").replace("/", "_")


class PageSet(Mapping[str, WikiPage]):
    """An immutable set of pages keyed by title, with the link graph's shortest paths.

    Links to titles outside the set are dropped. Copies (``copy.deepcopy``, as ``Env.spawn``
    makes) share the one instance.
    """

    def __init__(self, pages: Iterable[WikiPage], *, name: str = "pages") -> None:
        listed = list(pages)
        titles = {p.title for p in listed}
        if len(titles) != len(listed):
            raise DatasetError(f"{name}: two pages have the same title")
        self.name = name
        self._pages: dict[str, WikiPage] = {}
        for p in listed:
            links = tuple(dict.fromkeys(t for t in p.links if t in titles and t != p.title))
            self._pages[p.title] = WikiPage(p.title, p.text, links, p.path)
        self._by_path = {p.path: p for p in self._pages.values()}
        if len(self._by_path) != len(self._pages):
            raise DatasetError(f"{name}: two pages have the same path")
        self._incoming: dict[str, list[str]] | None = None
        self._lock = threading.Lock()
        digest = hashlib.sha256()
        for p in self._pages.values():
            digest.update(json.dumps([p.title, p.path, p.text, p.links]).encode())
        self.digest = digest.hexdigest()
        """SHA-256 of the pages (what a ZIM built from them is named by)."""

    # -- Mapping -------------------------------------------------------------------------------
    def __getitem__(self, title: str) -> WikiPage:
        return self._pages[title]

    def __iter__(self) -> Iterator[str]:
        return iter(self._pages)

    def __len__(self) -> int:
        return len(self._pages)

    def __deepcopy__(self, memo: dict[int, object]) -> PageSet:
        return self

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_lock"]
        state["_incoming"] = None
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def by_path(self, path: str) -> WikiPage | None:
        """The page stored at ``path`` (``None`` if none)."""
        return self._by_path.get(path)

    @property
    def titles(self) -> tuple[str, ...]:
        """Every title, in file order."""
        return tuple(self._pages)

    # -- the graph -----------------------------------------------------------------------------
    def distances_from(self, title: str) -> dict[str, int]:
        """Links needed to reach each reachable page from ``title`` (BFS; ``title`` itself: 0)."""
        dist = {title: 0}
        queue = [title]
        for here in queue:
            step = dist[here] + 1
            for there in self._pages[here].links:
                if there not in dist:
                    dist[there] = step
                    queue.append(there)
        return dist

    def distances_to(self, title: str) -> dict[str, int]:
        """Links needed to reach ``title`` from each page that can (BFS on reversed links)."""
        incoming = self._incoming_links()
        dist = {title: 0}
        queue = [title]
        for here in queue:
            step = dist[here] + 1
            for there in incoming.get(here, ()):
                if there not in dist:
                    dist[there] = step
                    queue.append(there)
        return dist

    def _incoming_links(self) -> dict[str, list[str]]:
        with self._lock:
            if self._incoming is None:
                incoming: dict[str, list[str]] = {}
                for p in self._pages.values():
                    for t in p.links:
                        incoming.setdefault(t, []).append(p.title)
                self._incoming = incoming
            return self._incoming


_SHIPPED: PageSet | None = None
_SHIPPED_LOCK = threading.Lock()


def load_pages(path: str | Path | None = None) -> PageSet:
    """The page set in a JSONL file (``title``, ``text``, ``links``, optional ``path``), or the
    shipped one (cached for the process) when ``path`` is ``None``."""
    global _SHIPPED
    if path is None:
        with _SHIPPED_LOCK:
            if _SHIPPED is None:
                raw = (
                    resources.files("gemgym.wiki")
                    .joinpath("data", SHIPPED_PAGES)
                    .read_text("utf-8")
                )
                _SHIPPED = _parse_jsonl(raw.splitlines(), "gemgym's Python documentation pages")
            return _SHIPPED
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DatasetError(f"cannot read the page set {file}: {e}") from e
    return _parse_jsonl(lines, str(file))


def _parse_jsonl(lines: list[str], name: str) -> PageSet:
    pages = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            pages.append(
                WikiPage(
                    str(record["title"]),
                    str(record.get("text", "")),
                    tuple(str(t) for t in record.get("links", ())),
                    str(record.get("path", "")),
                )
            )
        except (ValueError, KeyError, TypeError) as e:
            raise DatasetError(f"{name}, line {i}: not a page record ({e})") from e
    if not pages:
        raise DatasetError(f"{name} holds no pages")
    return PageSet(pages, name=name)


# -- HTML --------------------------------------------------------------------------------------
def render_html(page: WikiPage, pages: Mapping[str, WikiPage] | None = None) -> str:
    """``page`` as a Wikipedia-style HTML document: the title, the text, then its links.

    Each link is ``<a href="PATH" title="TITLE">`` (relative, as in Kiwix's ZIMs); ``pages``
    gives the paths of the linked titles (default: :func:`path_of`).
    """
    esc = html.escape
    items = []
    for t in page.links:
        target = pages.get(t) if pages is not None else None
        path = target.path if target is not None else path_of(t)
        items.append(f'<li><a href="{esc(quote(path))}" title="{esc(t)}">{esc(t)}</a></li>')
    links = "\n".join(items)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(page.title)}</title></head>\n'
        f'<body><h1 id="firstHeading" class="firstHeading">{esc(page.title)}</h1>\n'
        '<div id="mw-content-text"><div class="mw-content-ltr mw-parser-output">\n'
        f"<p>{esc(page.text)}</p>\n"
        '<h2 id="Links">Links</h2>\n'
        f"<ul>\n{links}\n</ul>\n"
        "</div></div></body></html>\n"
    )


class _PageParser(html.parser.HTMLParser):
    """Reads the title, paragraph text and links of a Wikipedia-style page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] | None = None
        self.in_title = False
        self.content_depth = 0
        self.div_depth = 0
        self.in_p = 0
        self.skip = 0
        self.paragraphs: list[str] = []
        self.current: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "h1" and a.get("id") == "firstHeading" and self.title is None:
            self.title, self.in_title = [], True
        if tag == "div":
            self.div_depth += 1
            if not self.content_depth and "mw-parser-output" in classes:
                self.content_depth = self.div_depth
        if not self.content_depth:
            return
        if tag in ("table", "style", "script", "sup", "figure"):
            self.skip += 1
        elif tag == "p":
            self.in_p += 1
        elif tag == "a" and not self.skip:
            href = a.get("href") or ""
            if href and not href.startswith(("#", "http:", "https:", "geo:", "mailto:", "//")):
                target = a.get("title") or unquote(href.rsplit("/", 1)[-1]).replace("_", " ")
                if target not in self.links:
                    self.links.append(target)

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1":
            self.in_title = False
        if tag == "div":
            if self.content_depth == self.div_depth:
                self.content_depth = 0
            self.div_depth -= 1
        if not self.content_depth:
            return
        if tag in ("table", "style", "script", "sup", "figure") and self.skip:
            self.skip -= 1
        elif tag == "p" and self.in_p:
            self.in_p -= 1
            if not self.in_p:
                text = " ".join("".join(self.current).split())
                if text:
                    self.paragraphs.append(text)
                self.current = []

    def handle_data(self, data: str) -> None:
        if self.in_title and self.title is not None:
            self.title.append(data)
        elif self.content_depth and self.in_p and not self.skip:
            self.current.append(data)


def parse_html(document: str) -> tuple[str, str, tuple[str, ...]] | None:
    """``(title, text, links)`` of a page :func:`render_html` wrote, or of a Wikipedia article
    of a Kiwix ZIM (the text is its paragraphs; a link's title is its ``title`` attribute, else
    its path with spaces); ``None`` when the document has no ``h1#firstHeading``."""
    parser = _PageParser()
    parser.feed(document)
    parser.close()
    if parser.title is None:
        return None
    title = " ".join("".join(parser.title).split())
    return title, " ".join(parser.paragraphs), tuple(parser.links)
