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
        if name == "repair":
            add_quiet_flag(c)
    add_backup_commands(sub)
    add_history_commands(sub)
    add_cluster_commands(sub)
    return p


def add_cluster_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``respqueue cluster info|check`` (README: Cluster mode)."""
    c = sub.add_parser("cluster", help="cluster tools: info, check, reshard and rebalance")
    cs = c.add_subparsers(dest="cluster_cmd", required=True)
    for name, what in (("info", "keys and slots of every node"),
                       ("check", "info, and whether the nodes agree, cover every slot and have no open slots")):
        x = cs.add_parser(name, help=what)
        x.add_argument("addrs", nargs="*", metavar="HOST:PORT", help="nodes to start from (default: the cluster file)")
        x.add_argument("--cluster-config", dest="cluster_config", metavar="FILE", help="the cluster file")
        x.add_argument("--password", help="AUTH password")
    m = cs.add_parser("reshard", help="move slots (and their keys) to a node, live, as redis-cli --cluster reshard")
    m.add_argument("addrs", nargs="*", metavar="HOST:PORT", help="nodes to start from (default: the cluster file)")
    m.add_argument("--slots", required=True, help="slots to move: 5, 0-99 or 1,5,10-20")
    m.add_argument("--to", required=True, metavar="HOST:PORT", help="the node that gets them")
    m.add_argument("--cluster-config", dest="cluster_config", metavar="FILE", help="the cluster file")
    m.add_argument("--password", help="AUTH password")
    add_rebalance_command(cs)


def add_rebalance_command(cs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``respqueue cluster rebalance`` (respqueue/cluster/rebalance.py)."""
    r = cs.add_parser("rebalance", help="even the slots out over the masters (by weight), moving their keys live,"
                      " as redis-cli --cluster rebalance")
    r.add_argument("addrs", nargs="*", metavar="HOST:PORT", help="nodes to start from (default: the cluster file)")
    r.add_argument("--cluster-config", dest="cluster_config", metavar="FILE", help="the cluster file")
    r.add_argument("--weight", action="append", default=[], metavar="NODE=W",
                   help="a master's weight (NODE: id, id prefix or HOST:PORT; default 1; 0 empties it); repeatable")
    r.add_argument("--threshold", type=float, default=2.0, metavar="PCT",
                   help="move nothing unless a master is more than PCT%% off its share (default 2)")
    r.add_argument("--simulate", action="store_true", help="print the plan, move nothing")
    r.add_argument("--use-empty-masters", action="store_true", help="give slots to masters that have none")
    r.add_argument("--password", help="AUTH password")


def run_cluster_command(ns: argparse.Namespace) -> int:
    from .cluster.admin import move_slots, parse_slots, report, seeds_from_file

    seeds = list(ns.addrs)
    if ns.cluster_config:
        try:
            seeds += seeds_from_file(ns.cluster_config)
        except ValueError as e:
            print(f"respqueue: {e}", file=sys.stderr)
            return 2
    if not seeds:
        print("respqueue: name a node (HOST:PORT) or --cluster-config FILE", file=sys.stderr)
        return 2
    if ns.cluster_cmd == "reshard":
        try:
            slots = parse_slots(ns.slots)
        except ValueError as e:
            print(f"respqueue: {e}", file=sys.stderr)
            return 2
        return move_slots(seeds, slots, ns.to, ns.password)
    if ns.cluster_cmd == "rebalance":
        from .cluster.rebalance import parse_weights, rebalance

        try:
            weights = parse_weights(ns.weight)
        except ValueError as e:
            print(f"respqueue: {e}", file=sys.stderr)
            return 2
        return rebalance(seeds, weights, ns.threshold, ns.simulate, ns.use_empty_masters, ns.password)
    return report(seeds, ns.password, ns.cluster_cmd == "check")


def add_backup_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``respqueue backup DEST`` and ``respqueue restore SRC`` (docs/BACKUPS.md)."""
    b = sub.add_parser("backup", help="copy the store (online, consistent) to a file, a directory or s3://bucket/prefix")
    b.add_argument("dest", metavar="DEST", help="a file, a directory, or s3://bucket/prefix")
    b.add_argument("--dir", help="data directory, default ./respqueue-data (env RESPQUEUE_DIR); a sharded one"
                   " (serve --shards: cluster.toml and shard-K/) is backed up shard by shard into DEST/shard-K/")
    b.add_argument("--cluster", metavar="HOST:PORT", help="back up every node of this running cluster (their"
                   " stores must be on this machine) into DEST/shard-K/, with the cluster file")
    b.add_argument("--password", help="AUTH password of the --cluster nodes")
    add_quiet_flag(b)
    r = sub.add_parser("restore", help="verify a backup and put it in place of the store (the server must be stopped)")
    r.add_argument("src", metavar="SRC", help="a backup file, a directory of backups, s3://bucket/key or"
                   " s3://bucket/prefix (the newest backup there)")
    r.add_argument("--dir", help="data directory, default ./respqueue-data (env RESPQUEUE_DIR)")
    r.add_argument("--force", action="store_true", help="restore even without metadata or on a sha256 mismatch")
    add_quiet_flag(r)


def add_quiet_flag(p: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress display (respqueue/progress.py) on stderr; the summary still prints."""
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr (by default a bar on a terminal, a plain line every 2 s elsewhere)")


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
    s.add_argument("--metrics-port", dest="metrics_port", type=int,
                   help="serve Prometheus /metrics and the dashboard over HTTP on this port, default 0 (off)"
                   + env % "METRICS_PORT")
    s.add_argument("--metrics-host", dest="metrics_host",
                   help="address(es) of the metrics/dashboard HTTP server, default: --host" + env % "METRICS_HOST")
    s.add_argument("--hash-compact-delay", dest="hash_compact_delay", type=int, metavar="MS",
                   help="keep small hashes untouched for MS ms packed (and BullMQ jobs from their add and completion), "
                        "default 1000; 0: never"
                   + env % "HASH_COMPACT_DELAY")
    s.add_argument("--heap-trim-idle", dest="heap_trim_idle", type=int, metavar="MS",
                   help="give the memory freed back to the system once no command ran for MS ms (and after the "
                        "store's load), default 2000; 0: only after the load" + env % "HEAP_TRIM_IDLE")
    add_limit_flags(s)
    add_security_flags(s)
    add_cluster_flags(s)
    add_replication_flags(s, env)


def add_limit_flags(s: argparse.ArgumentParser) -> None:
    """TLS (respqueue/tls.py), maxmemory (respqueue/memory.py), output buffer limits (respqueue/outbuf.py)."""
    env = " (env RESPQUEUE_%s)"
    for name, what in (
        ("tls-cert-file", "server certificate (PEM)"),
        ("tls-key-file", "server private key (PEM)"),
        ("tls-key-file-pass", "passphrase of --tls-key-file"),
        ("tls-ca-cert-file", "CA certificate(s) that client certificates are checked against"),
        ("tls-ca-cert-dir", "directory of CA certificates (OpenSSL hashed names)"),
        ("tls-protocols", 'TLS versions, e.g. "TLSv1.2 TLSv1.3" (the default)'),
        ("tls-ciphers", "TLSv1.2 ciphers, OpenSSL syntax"),
        ("tls-client-cert-file", "certificate of outgoing TLS links (replication); default --tls-cert-file"),
        ("tls-client-key-file", "key of --tls-client-cert-file"),
        ("tls-client-key-file-pass", "passphrase of --tls-client-key-file"),
    ):
        dest = name.replace("-", "_")
        s.add_argument("--" + name, dest=dest, help=what + env % dest.upper())
    s.add_argument("--tls-port", dest="tls_port", type=int,
                   help="TLS port beside --port (0, the default: no TLS; --port 0: TLS only)" + env % "TLS_PORT")
    s.add_argument("--tls-auth-clients", dest="tls_auth_clients", choices=("yes", "no", "optional"),
                   help="require client certificates: yes (default), optional or no" + env % "TLS_AUTH_CLIENTS")
    s.add_argument("--tls-replication", dest="tls_replication", choices=("yes", "no"),
                   help="replication links over TLS, default no" + env % "TLS_REPLICATION")
    s.add_argument("--maxmemory", help="memory limit: bytes or 100mb, 1gb... (0, the default: none)" + env % "MAXMEMORY")
    s.add_argument("--maxmemory-policy", dest="maxmemory_policy",
                   choices=("noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru",
                            "volatile-lfu", "volatile-random", "volatile-ttl"),
                   help="what to do over --maxmemory, default noeviction" + env % "MAXMEMORY_POLICY")
    s.add_argument("--maxmemory-samples", dest="maxmemory_samples", type=int,
                   help="keys sampled per eviction, default 5" + env % "MAXMEMORY_SAMPLES")
    s.add_argument("--client-output-buffer-limit", dest="client_output_buffer_limit", metavar="LIMITS",
                   help='per class "CLASS HARD SOFT SECONDS ...", default'
                   ' "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60"' + env % "CLIENT_OUTPUT_BUFFER_LIMIT")


def add_security_flags(s: argparse.ArgumentParser) -> None:
    """Protected mode, ACL users file, DEBUG and protected configs (README: Security)."""
    env = " (env RESPQUEUE_%s)"
    s.add_argument("--protected-mode", dest="protected_mode", choices=("yes", "no"),
                   help="refuse clients from other hosts than 127.0.0.1/::1 while the default user has no password,"
                   " default yes" + env % "PROTECTED_MODE")
    s.add_argument("--aclfile", help="ACL users file (ACL SAVE / ACL LOAD); without it users persist in"
                   " <dir>/users.acl" + env % "ACLFILE")
    for name, what in (("debug", "DEBUG"), ("module", "MODULE")):
        s.add_argument(f"--enable-{name}-command", dest=f"enable_{name}_command", choices=("no", "yes", "local"),
                       help=f"allow {what}: no (default), yes, or local (loopback and Unix socket clients only)"
                       + env % f"ENABLE_{name.upper()}_COMMAND")
    s.add_argument("--enable-protected-configs", dest="enable_protected_configs", choices=("no", "yes", "local"),
                   help="allow CONFIG SET of protected configs (dir): no (default), yes or local"
                   + env % "ENABLE_PROTECTED_CONFIGS")


def add_cluster_flags(s: argparse.ArgumentParser) -> None:
    """Cluster mode (README: Cluster mode; respqueue/cluster/)."""
    env = " (env RESPQUEUE_%s)"
    s.add_argument("--cluster-enabled", dest="cluster_enabled", choices=("yes", "no"),
                   help="speak the Redis Cluster protocol; alone: a one-node cluster serving every slot"
                   + env % "CLUSTER_ENABLED")
    s.add_argument("--cluster-config", dest="cluster_config", metavar="FILE",
                   help="TOML file naming the cluster's nodes and their slots (implies --cluster-enabled yes)"
                   + env % "CLUSTER_CONFIG")
    s.add_argument("--cluster-announce-ip", dest="cluster_announce_ip", metavar="HOST",
                   help="the host this node has in the cluster file, default --host" + env % "CLUSTER_ANNOUNCE_IP")
    s.add_argument("--shards", metavar="N|auto",
                   help="run N shard processes on ports --port..--port+N-1 as one cluster (auto: one per core),"
                   " default 1" + env % "SHARDS")


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


def load_plugins() -> None:
    """The plug-ins register themselves with the core at import: lua/ the script runtime (with the scripting
    commands); compat/ BullMQ's native scripts (likewise), job history (its tables with the store, its capture
    with the journal, its XADD hook), its metrics and dashboard API (with the HTTP server) and the job-row
    layout (with persistence). The CLI, where the process starts, loads them; the core never does."""
    import compat.engine.layout  # noqa: F401  (BullMQ jobs stored as one row each: persistence.LAYOUTS)
    import compat.engine.shapes  # noqa: F401  (BullMQ's job hashes packed by shape: types.hash store shapes)
    import compat.engine.signals  # noqa: F401  (BullMQ's marker pops skip their own commit: persistence.signals)
    import compat.history  # noqa: F401
    import compat.metrics  # noqa: F401  (BullMQ's /metrics families and the dashboard API: http.PLUGINS)
    import compat.native  # noqa: F401  (BullMQ's hot scripts run natively: commands.scripting.register_router)
    import lua.runtime  # noqa: F401  (EVAL and friends: commands.scripting.register_runtime)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
        args.insert(0, "serve")
    ns = build_parser().parse_args(args)
    load_plugins()
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
        if cfg.shards != "1" or cfg.cluster_config or cfg.cluster_enabled != "no":
            from .cluster.supervisor import serve_cluster

            return serve_cluster(cfg, args)
        from .server import run

        return run(cfg)
    if ns.cmd in ("check", "repair"):
        from .persistence import check, repair

        d = Config.load({"dir": ns.dir}).dir
        if ns.cmd == "check":
            ok, msg = check(d)
        else:
            from .progress import for_cli

            ok, msg = repair(d, for_cli(ns.quiet))
        print(msg, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    if ns.cmd in ("backup", "restore"):
        from . import backup
        from .cluster import backup as cluster_backup

        d = Config.load({"dir": ns.dir}).dir
        if ns.cmd == "backup":
            if ns.cluster or cluster_backup.shard_dirs(d):
                return cluster_backup.cli_backup(ns.dest, d, ns.cluster, ns.password, ns.quiet)
            return backup.cli_backup(ns.dest, d, ns.quiet)
        if cluster_backup.is_cluster_backup(ns.src):
            return cluster_backup.cli_restore(ns.src, d, ns.force, ns.quiet)
        return backup.cli_restore(ns.src, d, ns.force, ns.quiet)
    if ns.cmd in ("history", "analytics", "enqueue"):
        return run_history_command(ns)
    if ns.cmd == "cluster":
        return run_cluster_command(ns)
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
    add_quiet_flag(e)
    from compat.analytics.job import build_parser as analytics_parser

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
    q.add_argument("--queue-col", dest="queue_col", help="take each job's queue from this column (default: QUEUE)")
    q.add_argument("--cluster", action="store_true", default=None,
                   help="--host/--port is a node of a Redis Cluster (default: ask it, INFO cluster); every queue"
                   " needs a {hash tag} in its name or --prefix")
    add_quiet_flag(q)


def run_history_command(ns: argparse.Namespace) -> int:
    """Run ``history export``, ``analytics`` or ``enqueue`` (pyspark/pyarrow are imported only here)."""
    if ns.cmd == "history":
        from compat.history_export import ExportError, export_history, parse_time

        from .progress import for_cli

        d = ns.dir if ns.dir and ns.dir.endswith(".db") else Config.load({"dir": ns.dir}).dir
        from compat.history_export import export_shards, shard_stores

        if shard_stores(d):  # serve --shards: every shard into the one dataset
            try:
                done = export_shards(d, ns.dest, parse_time(ns.since), parse_time(ns.until), incremental=not ns.full,
                                     settle_ms=ns.settle_ms, progress=for_cli(ns.quiet))
            except ExportError as err:
                print(f"respqueue: {err}", file=sys.stderr)
                return 1
            for k, r in done:
                print(f"shard-{k}: {r.summary()}")
            return 0
        try:
            res = export_history(d, ns.dest, parse_time(ns.since), parse_time(ns.until),
                                 incremental=not ns.full, settle_ms=ns.settle_ms, progress=for_cli(ns.quiet))
        except ExportError as err:
            print(f"respqueue: {err}", file=sys.stderr)
            return 1
        print(res.summary())
        return 0
    if ns.cmd == "analytics":
        from compat.analytics.job import run_cli

        return run_cli(ns)
    import json

    from compat.analytics.job import build_session

    from .pipeline import enqueue, read_file
    from .progress import for_cli

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
                      batch_size=ns.batch, name_col=ns.name_col, job_id_col=ns.job_id_col,
                      progress=None if ns.quiet else for_cli(), cluster=ns.cluster, queue_col=ns.queue_col)
    except ValueError as e:  # bad arguments (no such column, a queue without a hash tag on a cluster): one line
        print(f"respqueue enqueue: {e}", file=sys.stderr)
        return 2
    finally:
        if active is None:
            spark.stop()
    print(res.summary())
    return 0
