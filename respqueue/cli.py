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
    add_backup_commands(sub)
    add_history_commands(sub)
    return p


def add_backup_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``respqueue backup DEST`` and ``respqueue restore SRC`` (docs/BACKUPS.md)."""
    b = sub.add_parser("backup", help="copy the store (online, consistent) to a file, a directory or s3://bucket/prefix")
    b.add_argument("dest", metavar="DEST", help="a file, a directory, or s3://bucket/prefix")
    b.add_argument("--dir", help="data directory, default ./respqueue-data (env RESPQUEUE_DIR)")
    r = sub.add_parser("restore", help="verify a backup and put it in place of the store (the server must be stopped)")
    r.add_argument("src", metavar="SRC", help="a backup file, a directory of backups, s3://bucket/key or"
                   " s3://bucket/prefix (the newest backup there)")
    r.add_argument("--dir", help="data directory, default ./respqueue-data (env RESPQUEUE_DIR)")
    r.add_argument("--force", action="store_true", help="restore even without metadata or on a sha256 mismatch")


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
    s.add_argument("--writer", choices=("auto", "process", "thread"),
                   help="who writes the store: process (a child process with its own interpreter lock), thread,"
                   " or auto (default: process)" + env % "WRITER")
    s.add_argument("--backup-to", dest="backup_to",
                   help="scheduled backups to this directory or s3://bucket/prefix" + env % "BACKUP_TO")
    s.add_argument("--backup-interval", dest="backup_interval", type=int,
                   help="seconds between scheduled backups, default 3600" + env % "BACKUP_INTERVAL")
    s.add_argument("--backup-keep", dest="backup_keep", type=int,
                   help="scheduled backups to keep, default 7" + env % "BACKUP_KEEP")
    s.add_argument("--history", type=_history_switch, metavar="on|off",
                   help="record every BullMQ job's life in the store (job_events, job_final), default on"
                   + env % "HISTORY")
    s.add_argument("--history-retention", dest="history_retention", type=_retention, metavar="DURATION",
                   help="keep job history this long: 3600s, 90m, 12h, 7d (default; 0 keeps it forever)"
                   + env % "HISTORY_RETENTION")
    s.add_argument("--native-scripts", dest="native_scripts", choices=("on", "off"),
                   help="native fast paths for BullMQ's hot scripts, default on" + env % "NATIVE_SCRIPTS")
    add_replication_flags(s, env)


def add_replication_flags(s: argparse.ArgumentParser, env: str) -> None:
    """Replication (docs/REPLICATION.md)."""
    s.add_argument("--replicaof", metavar="'HOST PORT'", help="start as a replica of this master" + env % "REPLICAOF")
    s.add_argument("--masterauth", help="password to AUTH to the master with" + env % "MASTERAUTH")
    s.add_argument("--masteruser", help="user to AUTH to the master as" + env % "MASTERUSER")
    s.add_argument("--repl-backlog-size", dest="repl_backlog_size", type=int,
                   help="bytes of replication stream kept for partial resyncs, default 1048576"
                   + env % "REPL_BACKLOG_SIZE")
    s.add_argument("--replica-ack", dest="replica_ack", type=int, metavar="N",
                   help="durable mode: reply to a write once N replicas committed it (default 0)" + env % "REPLICA_ACK")
    s.add_argument("--replica-priority", dest="replica_priority", type=int,
                   help="Sentinel's promotion priority, default 100 (0: never)" + env % "REPLICA_PRIORITY")


def _history_switch(v: str) -> str:
    from compat.history import parse_switch

    try:
        return "on" if parse_switch(v) else "off"
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _retention(v: str) -> str:
    from compat.history import parse_retention

    try:
        parse_retention(v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return v


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
    if ns.cmd in ("backup", "restore"):
        from . import backup

        d = Config.load({"dir": ns.dir}).dir
        if ns.cmd == "backup":
            return backup.cli_backup(ns.dest, d)
        return backup.cli_restore(ns.src, d, ns.force)
    if ns.cmd in ("history", "analytics", "enqueue"):
        return run_history_command(ns)
    build_parser().print_help()
    return 2


def add_history_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``respqueue history export``, ``respqueue analytics`` and ``respqueue enqueue`` (README: Job history)."""
    h = sub.add_parser("history", help="job history: export to Parquet")
    hs = h.add_subparsers(dest="history_cmd", required=True)
    e = hs.add_parser("export", help="export new job history to Parquet (a folder or s3://bucket/prefix)")
    e.add_argument("dest", metavar="DEST", help="a folder or s3://bucket/prefix")
    e.add_argument("--dir", help="data directory (or the respqueue.db file), default ./respqueue-data (env RESPQUEUE_DIR)")
    e.add_argument("--since", help="only rows at or after this time (ISO 8601, UTC unless given, or ms)")
    e.add_argument("--until", help="only rows at or before this time (ISO 8601 or ms)")
    e.add_argument("--full", action="store_true", help="ignore and keep the watermark: export everything that matches")
    e.add_argument("--settle-ms", dest="settle_ms", type=int, default=2000,
                   help="leave final records younger than this for the next run, default 2000")
    from .analytics.job import build_parser as analytics_parser

    a = sub.add_parser("analytics", help="Spark analytics over job history, with an HTML report")
    analytics_parser(a)
    q = sub.add_parser("enqueue", help="add the rows of a Parquet, CSV or JSON-lines file as BullMQ jobs (Spark)")
    q.add_argument("queue", metavar="QUEUE")
    q.add_argument("--from", dest="src", required=True, metavar="FILE", help="a .parquet, .csv or .jsonl file")
    q.add_argument("--name", default="default", help="job name, default 'default'")
    q.add_argument("--name-col", dest="name_col", help="take each job's name from this column")
    q.add_argument("--data-cols", dest="data_cols", help="comma-separated columns for the job data (default: all)")
    q.add_argument("--job-id-col", dest="job_id_col", help="use this column as the job id (idempotent retries)")
    q.add_argument("--opts", help="BullMQ job options as JSON, e.g. '{\"attempts\": 3}'")
    q.add_argument("--host", default="127.0.0.1")
    q.add_argument("--port", type=int, default=6379)
    q.add_argument("--password")
    q.add_argument("--prefix", help="BullMQ key prefix, default bull")
    q.add_argument("--batch", type=int, default=1000, help="jobs per addBulk call, default 1000")
    q.add_argument("--partitions", type=int, help="repartition the input into this many partitions")
    q.add_argument("--master", default="local[*]", help="Spark master, default local[*]")


def run_history_command(ns: argparse.Namespace) -> int:
    """Run ``history export``, ``analytics`` or ``enqueue`` (pyspark/pyarrow are imported only here)."""
    if ns.cmd == "history":
        from .history_export import ExportError, export_history, parse_time

        d = ns.dir if ns.dir and ns.dir.endswith(".db") else Config.load({"dir": ns.dir}).dir
        try:
            res = export_history(d, ns.dest, parse_time(ns.since), parse_time(ns.until),
                                 incremental=not ns.full, settle_ms=ns.settle_ms)
        except ExportError as err:
            print(f"respqueue: {err}", file=sys.stderr)
            return 1
        print(res.summary())
        return 0
    if ns.cmd == "analytics":
        from .analytics.job import run_cli

        return run_cli(ns)
    import json

    from .analytics.job import build_session
    from .pipeline import enqueue, read_file

    conn: dict[str, object] = {"host": ns.host, "port": ns.port}
    if ns.password:
        conn["password"] = ns.password
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    spark = active or build_session(ns.master, app="respqueue-enqueue")
    try:
        df = read_file(spark, ns.src)
        if ns.partitions:
            df = df.repartition(ns.partitions)
        res = enqueue(df, ns.queue, name=ns.name, data_cols=ns.data_cols.split(",") if ns.data_cols else None,
                      opts=json.loads(ns.opts) if ns.opts else None, connection=conn, prefix=ns.prefix,
                      batch_size=ns.batch, name_col=ns.name_col, job_id_col=ns.job_id_col)
    finally:
        if active is None:
            spark.stop()
    print(res.summary())
    return 0
