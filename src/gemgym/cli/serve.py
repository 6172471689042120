"""``gemgym serve``: serve a gemgym env over OpenEnv's protocol (HTTP, WebSocket and MCP sessions).

Examples::

    gemgym serve game:Wordle-v0-easy --port 8000
    gemgym serve math:GSM8K --env-kwarg dataset=sample --max-sessions 128
    gemgym serve game:Sudoku-v0-easy --workers 4           # 4 server processes on the port
    gemgym serve game:Wordle-v0-easy --host 0.0.0.0 --token "$(openssl rand -hex 16)"

Each WebSocket session (OpenEnv's ``EnvClient``, :class:`gemgym.integrations.openenv.OpenEnvEnv`)
gets its own env. Sessions idle for ``--idle-timeout`` seconds are closed; a full server says
"server full". Needs ``pip install "gemgym[serve]"``. See docs/serving.md.
"""

from __future__ import annotations

import argparse

from gemgym.cli.shared import ENV_KWARGS, add_shared, names_as_flags, read_shared
from gemgym.errors import ConfigError
from gemgym.options import Option
from gemgym.serving import DEFAULT_IDLE_TIMEOUT_S, TOKEN_VAR, Limits

GROUPS = (ENV_KWARGS,)
OPTIONS: tuple[Option, ...] = tuple(opt for g in GROUPS for opt in g)

SERVER_FLAGS = {"token": "--token", "insecure": "--insecure", "port": "--port"}
"""The parameters of :mod:`gemgym.serving` that its start-up errors name, and the flags of
``gemgym serve`` and ``gemgym serve-retriever`` for them."""


def server_error(e: ConfigError) -> ConfigError:
    """``e`` (a server that cannot start) with the parameters it names shown with their flags."""
    return ConfigError(names_as_flags(str(e), SERVER_FLAGS, last=True))


"""The shared options ``gemgym serve`` takes."""


def add_server_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments both servers take: address, token, limits."""
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks one)")
    p.add_argument(
        "--token",
        default=None,
        help=f"bearer token clients must send (default: ${TOKEN_VAR}; none on loopback)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address without a token (a trusted network only)",
    )
    p.add_argument(
        "--max-body-mb", type=float, default=8.0, help="largest request body, MiB (8; 413 beyond)"
    )


def limits_of(args: argparse.Namespace, **more: float) -> Limits:
    """The :class:`gemgym.serving.Limits` the arguments ask for."""
    if not args.max_body_mb > 0:
        raise ConfigError(f"--max-body-mb must be > 0, got {args.max_body_mb}")
    size = int(args.max_body_mb * 1024 * 1024)
    return Limits(max_body_bytes=size, max_message_bytes=size, **more)  # type: ignore[arg-type]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym serve``."""
    p.add_argument("env_id", help="a registered env id (gemgym list)")
    add_server_arguments(p)
    p.add_argument(
        "--max-sessions", type=int, default=64, help="concurrent sessions, one env each (64)"
    )
    p.add_argument(
        "--max-client-sessions",
        type=int,
        default=None,
        help="sessions one client address may hold (default: --max-sessions)",
    )
    p.add_argument(
        "--max-client-envs",
        type=int,
        default=None,
        help="envs (and so sandboxes) one client address may hold, sessions and stateless "
        "resets together (default: --max-client-sessions)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help=f"seconds a session may sit idle before it is closed ({DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes (1); each session stays on one, so steps/s scale with cores "
        "(caps are then per process)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (warning)")
    add_shared(p, *GROUPS)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, got {args.port}")
    read_shared(args, *GROUPS)
    kwargs = dict(args.env_kwargs)
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    from gemgym.serving.env_server import serve_env

    def ready(url: str) -> None:
        print(f"serving {args.env_id} on {url} (OpenEnv protocol; Ctrl-C stops)", flush=True)

    try:
        serve_env(
            args.env_id,
            kwargs,
            host=args.host,
            port=args.port,
            token=args.token,
            insecure=args.insecure,
            workers=args.workers,
            log_level=args.log_level,
            on_ready=ready,
            max_sessions=args.max_sessions,
            max_client_sessions=args.max_client_sessions,
            max_client_envs=args.max_client_envs,
            limits=limits_of(args, idle_timeout_s=args.idle_timeout),
        )
    except ConfigError as e:  # the library names its parameters; show the flags
        raise server_error(e) from None
    return 0
