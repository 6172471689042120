"""WikiGame's backends: where pages come from (GEM's "trawlers").

* :class:`InProcessBackend` (``"inprocess"``, the default): a :class:`~gemgym.wiki.pages.PageSet`
  in memory; no binary, no network.
* :class:`KiwixBackend` (``"kiwix"``): pages fetched over HTTP from ``kiwix-serve`` serving a
  ZIM file (``/raw/<book>/content/<path>``, parsed from the article's HTML). With no ``url`` it
  serves gemgym's own ZIM itself (built on first use, one ``kiwix-serve`` per process shared by
  every env, stopped when the last env closes); with a ``url`` it reads any kiwix-serve, a
  Wikipedia ZIM included (``zimfile`` = the book name, the file name without ``.zim``).
* :class:`MediaWikiBackend` (``"mw"``): the MediaWiki API (``action=query``: extracts, links,
  random pages, search for a missing title), e.g. ``https://en.wikipedia.org/w/api.php``.

A backend answers :meth:`WikiBackend.get_page` (``None``: no such page) and, when it knows the
whole link graph, exposes it as :attr:`WikiBackend.pages` (then the env draws start/target
pairs by distance and its expert plays shortest paths); otherwise :meth:`random_title` draws
pages as GEM does. A backend that cannot answer (server down, timeouts after retries) raises
:class:`~gemgym.errors.EnvLostError`: that is not the model's fault, so no reward is made up.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from gemgym.errors import ConfigError, EnvLostError
from gemgym.wiki.pages import PageSet, WikiPage, load_pages, parse_html, path_of

__all__ = [
    "BACKENDS",
    "InProcessBackend",
    "KiwixBackend",
    "MediaWikiBackend",
    "WikiBackend",
    "make_backend",
]

USER_AGENT = "gemgym-WikiGame/0.1 (https://github.com/gemgym/gemgym)"
_CACHE_LIMIT = 20_000


_CLIENTS: dict[tuple[str, float], Any] = {}


def _client(url: str, timeout_s: float) -> Any:
    """The process's :class:`gemgym._http.SyncClient` for ``url`` (kept out of the backends, so
    they pickle and copy without it; connections are pooled across envs)."""
    key = (url, timeout_s)
    client = _CLIENTS.get(key)
    if client is None:
        from gemgym._http import SyncClient

        client = SyncClient(
            url, timeout=timeout_s, extra="wiki", headers={"User-Agent": USER_AGENT}, name="url"
        )
        _CLIENTS[key] = client
    return client


class WikiBackend(ABC):
    """Where WikiGame's pages come from (see the module docstring)."""

    name: ClassVar[str] = ""
    pages: PageSet | None = None
    """The whole page set when the backend knows it (distance-ranged pairs, the expert)."""

    @abstractmethod
    def get_page(self, title: str) -> WikiPage | None:
        """The page called ``title`` (``None``: there is none). Raises
        :class:`~gemgym.errors.EnvLostError` when the backend cannot answer."""

    def random_title(self, rng: random.Random) -> str | None:
        """A random page's title (drawn from ``rng`` when the backend knows its pages)."""
        if self.pages is None:
            return None
        return rng.choice(self.pages.titles)

    def close(self) -> None:
        """Release what the backend holds (idempotent)."""


class InProcessBackend(WikiBackend):
    """Pages from a :class:`PageSet` in memory (default: the shipped Python documentation)."""

    name = "inprocess"

    def __init__(self, pages: PageSet | str | Path | None = None) -> None:
        self.pages = pages if isinstance(pages, PageSet) else load_pages(pages)

    def get_page(self, title: str) -> WikiPage | None:
        assert self.pages is not None
        return self.pages.get(title)


class _HttpBackend(WikiBackend):
    """Shared by the HTTP backends: GET with retries, a delay between queries, a page cache."""

    def __init__(
        self,
        url: str,
        *,
        query_delay_ms: int = 0,
        max_query_attempts: int = 5,
        query_use_cache: bool = True,
        timeout_s: float = 10.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"{self.name} backend: url must be http(s)://..., got {url!r}")
        if max_query_attempts < 1:
            raise ConfigError(f"max_query_attempts must be at least 1, got {max_query_attempts}")
        if query_delay_ms < 0 or timeout_s <= 0:
            raise ConfigError("query_delay_ms must be >= 0 and timeout_s > 0")
        self.url = url.rstrip("/")
        self.query_delay_ms = query_delay_ms
        self.max_query_attempts = max_query_attempts
        self.query_use_cache = query_use_cache
        self.timeout_s = timeout_s
        self._cache: dict[str, WikiPage | None] = {}

    def _get(self, url: str) -> tuple[int, str, str]:
        """``(status, final URL, body)``; 404 is an answer, other failures are retried."""
        from gemgym._http import TransportError

        client = _client(self.url, self.timeout_s)
        path = url[len(self.url) :] if url.startswith(self.url) else url
        last = ""
        for attempt in range(self.max_query_attempts):
            if self.query_delay_ms:
                time.sleep(self.query_delay_ms / 1000)
            try:
                response = client.get(path)
            except TransportError as e:
                last = str(e)
            else:
                if response.status == 404:
                    return 404, url, ""
                if response.status < 400:
                    return response.status, response.url, response.text
                last = f"HTTP {response.status}"
            time.sleep(min(2.0, 0.1 * 2**attempt))
        raise EnvLostError(
            f"the {self.name} backend at {self.url} did not answer after "
            f"{self.max_query_attempts} attempts ({last})"
        )

    def get_page(self, title: str) -> WikiPage | None:
        if self.query_use_cache and title in self._cache:
            return self._cache[title]
        page = self._fetch(title)
        if self.query_use_cache:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[title] = page
        return page

    @abstractmethod
    def _fetch(self, title: str) -> WikiPage | None: ...


class KiwixBackend(_HttpBackend):
    """Pages from ``kiwix-serve`` (see the module docstring).

    Args:
        url: a running kiwix-serve; ``None`` (default) starts one on loopback over gemgym's
            ZIM (:func:`gemgym.wiki.kiwix.ensure_zim`; needs ``kiwix-serve`` and
            ``pip install "gemgym[wiki]"`` for the first build).
        zimfile: the book to read (its file name without ``.zim``; default gemgym's).
        pages: the page set of gemgym's ZIM when ``url`` serves it (default: the shipped set
            when ``zimfile`` is gemgym's book; a path to a JSONL page set otherwise).
        query_delay_ms, max_query_attempts, query_use_cache, timeout_s: as GEM's trawler.
    """

    name = "kiwix"

    def __init__(
        self,
        url: str | None = None,
        zimfile: str | None = None,
        pages: str | None = None,
        query_delay_ms: int = 0,
        max_query_attempts: int = 5,
        query_use_cache: bool = True,
        timeout_s: float = 10.0,
    ) -> None:
        from gemgym.wiki import kiwix

        self._server: kiwix.KiwixServer | None = None
        self._pages_path = pages
        known = load_pages(pages) if pages is not None else None
        if url is None:
            if zimfile not in (None, kiwix.BOOK_NAME):
                raise ConfigError("kiwix backend: a zimfile other than gemgym's needs a url")
            known = known if known is not None else load_pages()
            self._server = kiwix.shared_server(kiwix.ensure_zim(known))
            url, zimfile = self._server.url, self._server.book
        elif zimfile is None or zimfile == kiwix.BOOK_NAME:
            zimfile = kiwix.BOOK_NAME
            known = known if known is not None else load_pages()
        super().__init__(
            url,
            query_delay_ms=query_delay_ms,
            max_query_attempts=max_query_attempts,
            query_use_cache=query_use_cache,
            timeout_s=timeout_s,
        )
        self.zimfile = zimfile
        self.pages = known

    @property
    def server(self) -> Any:
        """The :class:`~gemgym.wiki.kiwix.KiwixServer` this backend started (``None`` if it
        reads a server of the user's)."""
        return self._server

    def _fetch(self, title: str) -> WikiPage | None:
        path = self.pages[title].path if self.pages and title in self.pages else path_of(title)
        quoted = urllib.parse.quote(path)
        status, _, body = self._get(f"{self.url}/raw/{self.zimfile}/content/{quoted}")
        if status == 404:
            return None
        parsed = parse_html(body)
        if parsed is None:
            return None
        found, text, links = parsed
        return WikiPage(found, text, links, path)

    def random_title(self, rng: random.Random) -> str | None:
        if self.pages is not None:
            return super().random_title(rng)
        status, final, _ = self._get(f"{self.url}/random?content={self.zimfile}")
        if status != 200:
            return None
        _, _, path = final.partition(f"/{self.zimfile}/")
        return urllib.parse.unquote(path).replace("_", " ") or None

    def close(self) -> None:
        if self._server is not None:
            from gemgym.wiki import kiwix

            server, self._server = self._server, None
            kiwix.release_server(server)

    # copies (Env.spawn, pickle) hold a server of their own process, never the original's
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_owns_server"] = state.pop("_server") is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        owns = state.pop("_owns_server", False)
        self.__dict__.update(state)
        self._server = None
        if owns:
            from gemgym.wiki import kiwix

            pages = self.pages if self.pages is not None else load_pages(self._pages_path)
            self._server = kiwix.shared_server(kiwix.ensure_zim(pages))
            self.url = self._server.url

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class MediaWikiBackend(_HttpBackend):
    """Pages from a MediaWiki API (``api.php``), Wikipedia's by default.

    A page's text is its plain-text extract and its links the articles it links to (main
    namespace). A disambiguation page resolves to its first existing option and a missing
    title to the first search result, as GEM's trawler does. Not seedable: the API's random
    pages are the server's draw.
    """

    name = "mw"

    def __init__(
        self,
        url: str = "https://en.wikipedia.org/w/api.php",
        query_delay_ms: int = 25,
        max_query_attempts: int = 5,
        query_use_cache: bool = True,
        timeout_s: float = 10.0,
    ) -> None:
        super().__init__(
            url,
            query_delay_ms=query_delay_ms,
            max_query_attempts=max_query_attempts,
            query_use_cache=query_use_cache,
            timeout_s=timeout_s,
        )

    def _query(self, **params: str) -> dict[str, Any]:
        query = {"action": "query", "format": "json", "formatversion": "2", **params}
        status, _, body = self._get(f"{self.url}?{urllib.parse.urlencode(query)}")
        if status != 200:
            raise EnvLostError(f"the MediaWiki API at {self.url} answered {status}")
        try:
            data = json.loads(body)
        except ValueError as e:
            raise EnvLostError(f"the MediaWiki API at {self.url} sent no JSON: {e}") from e
        return data if isinstance(data, dict) else {}

    def _page_record(self, title: str) -> dict[str, Any] | None:
        params = {
            "prop": "extracts|links|pageprops",
            "titles": title,
            "explaintext": "1",
            "redirects": "1",
            "ppprop": "disambiguation",
            "plnamespace": "0",
            "pllimit": "max",
        }
        record: dict[str, Any] | None = None
        links: list[str] = []
        for _ in range(10):  # links come in batches (``continue``)
            data = self._query(**params)
            found = (data.get("query") or {}).get("pages") or []
            if not found or found[0].get("missing") or found[0].get("invalid"):
                return None
            record = record or found[0]
            links += [str(x.get("title", "")) for x in found[0].get("links") or []]
            more = data.get("continue")
            if not isinstance(more, dict) or "plcontinue" not in more:
                break
            params = {**params, **{k: str(v) for k, v in more.items()}}
        if record is not None:
            record["links"] = [t for t in links if t]
        return record

    def _fetch(self, title: str) -> WikiPage | None:
        record = self._page_record(title)
        if record is None:
            data = self._query(list="search", srsearch=title, srlimit="1", srprop="")
            hits = (data.get("query") or {}).get("search") or []
            if not hits or hits[0].get("title") == title:
                return None
            record = self._page_record(str(hits[0]["title"]))
            if record is None:
                return None
        if "disambiguation" in (record.get("pageprops") or {}):
            for option in record["links"]:
                resolved = self._page_record(option)
                if resolved is not None and "disambiguation" not in (
                    resolved.get("pageprops") or {}
                ):
                    record = resolved
                    break
            else:
                return None
        text = " ".join(str(record.get("extract", "")).split())
        return WikiPage(str(record["title"]), text, tuple(record["links"]))

    def random_title(self, rng: random.Random) -> str | None:
        data = self._query(list="random", rnnamespace="0", rnlimit="1")
        found = (data.get("query") or {}).get("random") or []
        return str(found[0]["title"]) if found else None


BACKENDS: dict[str, type[WikiBackend]] = {
    "inprocess": InProcessBackend,
    "kiwix": KiwixBackend,
    "mw": MediaWikiBackend,
}
"""The backends by name (``backend=`` of the env)."""


def make_backend(name: str, kwargs: Mapping[str, Any] | None = None) -> WikiBackend:
    """The backend ``name`` built with ``kwargs`` (GEM's ``trawler_kwargs``)."""
    from gemgym.registry import check_kwargs

    cls = BACKENDS.get(name)
    if cls is None:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    kwargs = dict(kwargs or {})
    check_kwargs(cls, kwargs, f"the {name} backend (trawler_kwargs)")
    return cls(**kwargs)
