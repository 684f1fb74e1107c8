"""The ``respqueue`` command line."""

from __future__ import annotations

import argparse
import logging
import sys

from . import __version__
from .config import Config

_LEVELS = {"debug": logging.DEBUG, "verbose": logging.INFO, "info": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="respqueue", description="A Redis-protocol server for BullMQ job queues.")
    p.add_argument("--version", action="version", version=f"respqueue {__version__}")
    sub = p.add_subparsers(dest="cmd")
    s = sub.add_parser("serve", help="run the server (the default)")
    add_serve_flags(s)
    for name, what in (("check", "check the store (integrity and schema version)"),
                       ("repair", "copy what can be read into a fresh store; keep the old file")):
        c = sub.add_parser(name, help=what)
        c.add_argument("--dir", help="data directory, default ./respqueue-data (env RESPQUEUE_DIR)")
    return p


def add_serve_flags(s: argparse.ArgumentParser) -> None:
    env = " (env RESPQUEUE_%s)"
    s.add_argument("--host", help="address(es) to listen on, default 127.0.0.1" + env % "HOST")
    s.add_argument("--port", type=int, help="TCP port, default 6379; 0 picks a free one" + env % "PORT")
    s.add_argument("--unixsocket", help="also listen on this Unix socket" + env % "UNIXSOCKET")
    s.add_argument("--dir", help="data directory, default ./respqueue-data" + env % "DIR")
    s.add_argument("--requirepass", help="password clients must AUTH with" + env % "REQUIREPASS")
    s.add_argument("--maxclients", type=int, help="connection limit, default 10000" + env % "MAXCLIENTS")
    s.add_argument("--timeout", type=int, help="close clients idle this many seconds (0: never)" + env % "TIMEOUT")
    s.add_argument("--config", help="TOML file with any of these settings" + env % "CONFIG")
    s.add_argument("--log-level", dest="log_level", help="debug, info, warning or error" + env % "LOG_LEVEL")
    s.add_argument("--durability", choices=("durable", "buffered", "memory"),
                   help="durable (default): reply after fsync; buffered: commit every --buffer-ms;"
                   " memory: no disk" + env % "DURABILITY")
    s.add_argument("--buffer-ms", dest="buffer_ms", type=int, help="buffered mode: commit interval in ms, default 10" + env % "BUFFER_MS")
    s.add_argument("--buffer-writes", dest="buffer_writes", type=int,
                   help="buffered mode: commit after this many changes, default 1000" + env % "BUFFER_WRITES")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
        args.insert(0, "serve")
    ns = build_parser().parse_args(args)
    if ns.cmd == "serve":
        flags = {k: v for k, v in vars(ns).items() if k != "cmd"}
        try:
            cfg = Config.load(flags)
        except (OSError, ValueError) as e:
            print(f"respqueue: bad configuration: {e}", file=sys.stderr)
            return 2
        logging.basicConfig(
            level=_LEVELS.get(cfg.log_level.lower(), logging.INFO),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        from .server import run

        return run(cfg)
    if ns.cmd in ("check", "repair"):
        from .persistence import check, repair

        d = Config.load({"dir": ns.dir}).dir
        ok, msg = (check if ns.cmd == "check" else repair)(d)
        print(msg, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    build_parser().print_help()
    return 2
