"""gemgym's ZIM file and ``kiwix-serve``: :func:`build_zim`, :func:`ensure_zim`, :class:`KiwixServer`.

:func:`build_zim` writes a page set as a ZIM file with ``libzim`` (``pip install
"gemgym[wiki]"``): one HTML article per page (:func:`gemgym.wiki.pages.render_html`), a
``Main_Page`` listing them, no full-text index. The file is deterministic: the same pages give
the same bytes (one compression worker, fixed metadata, and the header's UUID, which libzim
draws at random, replaced by one derived from the pages, with the checksum recomputed).

:class:`KiwixServer` runs Debian's ``kiwix-serve`` (package ``kiwix-tools``) on loopback over a
ZIM file; :func:`shared_server` hands every env of a process the same server, stopped when the
last one releases it (and at exit; ``kiwix-serve`` is also told to exit with this process).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import html
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError, DependencyNotInstalled, missing_dependency
from gemgym.wiki.pages import PageSet, load_pages, render_html

__all__ = [
    "BOOK_NAME",
    "KiwixServer",
    "build_zim",
    "default_zim_path",
    "ensure_zim",
    "kiwix_serve_binary",
    "shared_server",
]

BOOK_NAME = "gemgym_pydocs"
"""File name (without ``.zim``) of gemgym's ZIM, which is also its book name in kiwix-serve."""
MAIN_PATH = "Main_Page"
ZIM_DATE = "2023-02-08"
"""The ZIM's ``Date`` metadata: the release of the Python 3.11.2 documentation it holds."""


def _libzim_writer() -> Any:
    try:
        import libzim.writer
    except ImportError as e:
        raise missing_dependency("libzim", "wiki") from e
    return libzim.writer


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """libzim's creator prints its progress on file descriptor 1 whatever its verbosity."""
    import sys

    with contextlib.suppress(Exception):
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def build_zim(path: str | Path, pages: PageSet | None = None, *, quiet: bool = True) -> Path:
    """Write ``pages`` (default: the shipped set) as the ZIM file ``path``; returns the path.

    Deterministic: the same pages give the same bytes. ``quiet`` silences libzim's progress
    lines (it prints them on the process's standard output).
    """
    writer = _libzim_writer()
    pages = pages if pages is not None else load_pages()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)

    class _Article(writer.Item):  # type: ignore[misc, name-defined]
        def __init__(self, path: str, title: str, content: str, front: bool) -> None:
            super().__init__()
            self._path, self._title, self._content, self._front = path, title, content, front

        def get_path(self) -> str:
            return self._path

        def get_title(self) -> str:
            return self._title

        def get_mimetype(self) -> str:
            return "text/html"

        def get_contentprovider(self) -> Any:
            return writer.StringProvider(self._content)

        def get_hints(self) -> dict[Any, int]:
            return {writer.Hint.FRONT_ARTICLE: self._front}

    try:
        with (
            _quiet_stdout() if quiet else contextlib.nullcontext(),
            writer.Creator(str(tmp))
            .config_verbose(False)
            .config_indexing(False, "eng")
            .config_nbworkers(1) as creator,
        ):
            creator.set_mainpath(MAIN_PATH)
            for page in pages.values():
                creator.add_item(_Article(page.path, page.title, render_html(page, pages), True))
            creator.add_item(_Article(MAIN_PATH, "Main Page", _main_page(pages), False))
            for name, value in (
                ("Name", BOOK_NAME),
                ("Title", "Python documentation (gemgym WikiGame)"),
                ("Description", "The Python 3.11 documentation pages of gemgym's WikiGame"),
                ("Language", "eng"),
                ("Creator", "Python Software Foundation"),
                ("Publisher", "gemgym"),
                ("Date", ZIM_DATE),
                ("License", "PSF License Agreement for Python 3.11"),
                ("Source", "Debian python3.11-doc 3.11.2-6+deb12u9"),
            ):
                creator.add_metadata(name, value)
        _fix_uuid(tmp, bytes.fromhex(pages.digest)[:16])
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _main_page(pages: PageSet) -> str:
    esc = html.escape
    items = "\n".join(
        f'<li><a href="{esc(p.path)}" title="{esc(p.title)}">{esc(p.title)}</a></li>'
        for p in sorted(pages.values(), key=lambda p: p.title.casefold())
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Main Page</title>'
        f"</head>\n<body><h1>Python documentation: {len(pages)} pages</h1>\n<ul>\n{items}\n"
        "</ul></body></html>\n"
    )


_XAPIAN_MAGIC = b"\x0f\rXapian Glass"
_XAPIAN_UUID_OFFSET = len(_XAPIAN_MAGIC) + 2  # the magic, the 2-byte format version, the UUID


def _fix_uuid(path: Path, uuid: bytes) -> None:
    """Write ``uuid`` into the ZIM header and the title index, and recompute the checksum.

    Header (openZIM): magic (4 bytes), versions (2 + 2), UUID (16) at offset 8, ...,
    ``checksumPos`` (uint64, little-endian) at offset 72; the checksum is the MD5 of every byte
    before ``checksumPos`` and is stored there. libzim also stores a title index (a Xapian
    glass database, uncompressed) whose version file holds a random UUID of its own.
    """
    data = bytearray(path.read_bytes())
    if data[:4] != b"ZIM\x04":
        raise ConfigError(f"{path} is not a ZIM file")
    data[8:24] = uuid
    at = data.find(_XAPIAN_MAGIC)
    if at >= 0 and data.find(_XAPIAN_MAGIC, at + 1) < 0:
        start = at + _XAPIAN_UUID_OFFSET
        data[start : start + 16] = hashlib.md5(uuid, usedforsecurity=False).digest()
    path.write_bytes(data)
    with open(path, "r+b") as f:
        header = f.read(80)
        (checksum_pos,) = struct.unpack_from("<Q", header, 72)
        f.seek(0)
        md5 = hashlib.md5(usedforsecurity=False)
        left = checksum_pos
        while left:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                raise ConfigError(f"{path} is truncated")
            md5.update(chunk)
            left -= len(chunk)
        f.seek(checksum_pos)
        f.write(md5.digest())


def default_zim_path(pages: PageSet | None = None) -> Path:
    """Where :func:`ensure_zim` keeps the ZIM of ``pages``: ``$GEMGYM_WIKI_DIR`` (default
    ``$XDG_CACHE_HOME/gemgym/wiki``, ``~/.cache/gemgym/wiki``), a folder per page-set digest,
    ``gemgym_pydocs.zim`` in it."""
    pages = pages if pages is not None else load_pages()
    root = os.environ.get("GEMGYM_WIKI_DIR")
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(cache) / "gemgym" / "wiki")
    return Path(root) / pages.digest[:16] / f"{BOOK_NAME}.zim"


_BUILD_LOCK = threading.Lock()


def ensure_zim(pages: PageSet | None = None) -> Path:
    """The ZIM of ``pages`` (default: the shipped set) at :func:`default_zim_path`, built the
    first time (about a second)."""
    path = default_zim_path(pages)
    with _BUILD_LOCK:
        if not path.exists():
            build_zim(path, pages)
    return path


def kiwix_serve_binary() -> str:
    """The ``kiwix-serve`` executable (``$GEMGYM_KIWIX_SERVE`` or on ``PATH``)."""
    found = os.environ.get("GEMGYM_KIWIX_SERVE") or shutil.which("kiwix-serve")
    if not found:
        raise DependencyNotInstalled(
            "'kiwix-serve' is not installed; the kiwix backend needs it. On Debian or Ubuntu: "
            "apt-get install kiwix-tools (or use backend='inprocess', the default)"
        )
    return found


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class KiwixServer:
    """A ``kiwix-serve`` process serving one ZIM file on ``host`` (loopback by default).

    ``url`` is its base URL and ``book`` the name it serves the file under (the file name
    without ``.zim``). Use it as a context manager or call :meth:`stop`.
    """

    def __init__(
        self,
        zim_path: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        threads: int = 2,
        start_timeout_s: float = 30.0,
        binary: str | None = None,
    ) -> None:
        self.zim_path = Path(zim_path)
        if not self.zim_path.is_file():
            raise ConfigError(f"no ZIM file at {self.zim_path}")
        self.host = host
        self.book = self.zim_path.stem
        binary = binary or kiwix_serve_binary()
        attempts = 1 if port else 3  # a free port can be taken before kiwix-serve binds it
        for attempt in range(attempts):
            self.port = port or _free_port(host)
            self.process = subprocess.Popen(
                [
                    binary,
                    "--address",
                    host,
                    "--port",
                    str(self.port),
                    "--threads",
                    str(threads),
                    "--attachToProcess",
                    str(os.getpid()),
                    "--nosearchbar",
                    str(self.zim_path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            if self._wait(start_timeout_s):
                return
            err = self._stop_and_read()
            if attempt == attempts - 1:
                raise ConfigError(f"kiwix-serve did not start on {host}:{self.port}: {err}")

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8123``."""
        return f"http://{self.host}:{self.port}"

    def _wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def _stop_and_read(self) -> str:
        self.stop()
        err = b""
        if self.process.stderr is not None:
            with contextlib.suppress(Exception):
                err = self.process.stderr.read()
        return err.decode("utf-8", "replace").strip()[-500:] or "no message"

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process.poll() is None

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None:
            with contextlib.suppress(Exception):
                self.process.stderr.close()

    def __enter__(self) -> KiwixServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SHARED: dict[Path, tuple[KiwixServer, int]] = {}
_SHARED_LOCK = threading.Lock()


def shared_server(zim_path: str | Path) -> KiwixServer:
    """This process's server of ``zim_path``, started on first use; pair each call with
    :func:`release_server`."""
    key = Path(zim_path).resolve()
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is not None and found[0].running:
            _SHARED[key] = (found[0], found[1] + 1)
            return found[0]
        server = KiwixServer(key)
        _SHARED[key] = (server, 1)
        return server


def release_server(server: KiwixServer) -> None:
    """Give back a server of :func:`shared_server`; the last release stops it."""
    key = server.zim_path.resolve()
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None or found[0] is not server:
            server.stop()
            return
        if found[1] > 1:
            _SHARED[key] = (server, found[1] - 1)
            return
        del _SHARED[key]
    server.stop()


@atexit.register
def _stop_all() -> None:
    with _SHARED_LOCK:
        servers = [s for s, _ in _SHARED.values()]
        _SHARED.clear()
    for s in servers:
        with contextlib.suppress(Exception):
            s.stop()
