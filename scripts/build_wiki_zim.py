#!/usr/bin/env python3
"""Build gemgym's WikiGame ZIM file from the shipped page set (or a JSONL page set of yours).

    python scripts/build_wiki_zim.py gemgym_pydocs.zim
    python scripts/build_wiki_zim.py my_pages.zim --pages my_pages.jsonl

Needs ``pip install "gemgym[wiki]"`` (libzim). Deterministic: the same pages give the same bytes
(see :func:`gemgym.wiki.kiwix.build_zim`). Serve the file with ``kiwix-serve --port 8080 FILE``
or ``gemgym serve-wiki --zim FILE``. The envs build and cache it themselves when they need it
(:func:`gemgym.wiki.kiwix.ensure_zim`), so this script is for serving it elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from gemgym.wiki.kiwix import build_zim
    from gemgym.wiki.pages import load_pages

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the ZIM file to write")
    parser.add_argument("--pages", type=Path, default=None, help="a JSONL page set")
    args = parser.parse_args(argv)
    pages = load_pages(args.pages)
    path = build_zim(args.out, pages)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    print(f"{path}: {len(pages)} pages, {path.stat().st_size} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
