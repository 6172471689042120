"""``gemgym serve``: serve a gemgym env as an OpenEnv server (HTTP and WebSocket sessions).

Examples::

    gemgym serve game:Wordle-v0-easy --port 8000
    gemgym serve math:GSM8K --env-kwargs '{"dataset": "sample"}' --max-sessions 128
    gemgym serve game:Sudoku-v0-easy --workers 4           # 4 server processes on the port

Each WebSocket session (OpenEnv's ``EnvClient``, :class:`gemgym.integrations.openenv.OpenEnvEnv`)
gets its own env. Needs ``pip install "gemgym[openenv]"``. See docs/integrations.md.
"""

from __future__ import annotations

import argparse
import json

from gemgym.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym serve``."""
    p.add_argument("env_id", help="a registered env id (gemgym list)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--max-sessions", type=int, default=64, help="concurrent sessions, one env each (64)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes (1); each session stays on one, so steps/s scale with cores",
    )
    p.add_argument(
        "--env-kwargs", default="{}", help="JSON object of keyword arguments for gemgym.make"
    )
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (warning)")


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, got {args.port}")
    try:
        kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--env-kwargs is not JSON: {e}") from None
    if not isinstance(kwargs, dict):
        raise ConfigError('--env-kwargs must be a JSON object, e.g. \'{"dataset": "sample"}\'')
    import gemgym
    from gemgym.integrations.openenv import serve

    gemgym.spec(args.env_id)  # an unknown id fails before anything is printed
    print(f"serving {args.env_id} on http://{args.host}:{args.port} (OpenEnv; Ctrl-C stops)")
    serve(
        args.env_id,
        host=args.host,
        port=args.port,
        max_concurrent_envs=args.max_sessions,
        workers=args.workers,
        log_level=args.log_level,
        **kwargs,
    )
    return 0
