"""``gemgym serve-wiki``: serve WikiGame's pages with ``kiwix-serve`` (Debian: kiwix-tools).

Examples::

    gemgym serve-wiki --port 8080                 # gemgym's ZIM (built and cached on first use)
    gemgym serve-wiki --zim wikipedia_en_simple_all_nopic_2025-11.zim --port 8080
    gemgym serve-wiki --build gemgym_pydocs.zim   # only write the ZIM file

Then ``make("game:WikiGame-v0-easy", backend="kiwix", trawler_kwargs={"url":
"http://127.0.0.1:8080"})`` (add ``"zimfile": "<file name without .zim>"`` for another ZIM).
The server binds loopback; another ``--host`` needs ``--insecure`` (kiwix-serve takes no bearer
token, unlike ``gemgym serve``). It stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gemgym.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym serve-wiki``."""
    p.add_argument("--zim", type=Path, default=None, help="serve this ZIM file (default: gemgym's)")
    p.add_argument("--pages", type=Path, default=None, help="a JSONL page set to build the ZIM of")
    p.add_argument(
        "--build", type=Path, default=None, metavar="PATH", help="write the ZIM, do not serve"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address (kiwix-serve takes no token: a trusted network only)",
    )
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: a free one)")
    p.add_argument("--threads", type=int, default=4, help="kiwix-serve's threads (default 4)")
    p.add_argument(
        "--duration", type=float, default=None, help=argparse.SUPPRESS
    )  # seconds to serve, then stop (tests)


def run(args: argparse.Namespace) -> int:
    """Build the ZIM if needed, then serve it until interrupted."""
    from gemgym.wiki.kiwix import KiwixServer, build_zim, ensure_zim
    from gemgym.wiki.pages import load_pages

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, got {args.port}")
    if args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {args.threads}")
    from gemgym.serving import is_loopback

    if not is_loopback(args.host) and not args.insecure and args.build is None:
        raise ConfigError(
            f"--host {args.host} is not a loopback address and kiwix-serve takes no token: "
            "anyone who reaches it can read the pages and load the machine; serve it on "
            "127.0.0.1, or pass --insecure on a trusted network"
        )
    if args.build is not None:
        path = build_zim(args.build, load_pages(args.pages))
        print(f"wrote {path} ({path.stat().st_size} bytes)", flush=True)
        return 0
    if args.zim is not None and args.pages is not None:
        raise ConfigError("--zim and --pages exclude each other")
    zim = args.zim if args.zim is not None else ensure_zim(load_pages(args.pages))
    with KiwixServer(zim, host=args.host, port=args.port or None, threads=args.threads) as server:
        print(
            f"serving {zim} as book {server.book!r} at {server.url} "
            f"(pages: {server.url}/raw/{server.book}/content/<path>)",
            flush=True,
        )
        deadline = None if args.duration is None else time.monotonic() + args.duration
        try:
            while server.running and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.2)
        except KeyboardInterrupt:
            print("stopping", file=sys.stderr)
        if not server.running and deadline is None:
            print("kiwix-serve exited", file=sys.stderr)
            return 1
    return 0
