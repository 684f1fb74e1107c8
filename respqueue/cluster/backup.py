"""Backups and restores of a whole cluster: every shard's store, plus the cluster file.

A sharded data directory (``serve --shards N --dir D``) holds ``D/cluster.toml`` and ``D/shard-K/`` (each
a plain respqueue data directory). Its backup is laid out the same way::

    DEST/cluster.toml
    DEST/shard-K/respqueue-<UTC timestamp>.db (+ .meta.json)     # or s3://bucket/prefix/shard-K/...

Each shard's copy is made with respqueue/backup.py (SQLite's online backup: consistent in itself, safe
while the shard serves); all shards of one run carry the same timestamp. A running cluster can be named
instead of a directory (``--cluster HOST:PORT``): its nodes come from CLUSTER NODES, each node's store from
``CONFIG GET dir`` (it must be on this machine), and the cluster file is written from the live slot table.
A restore puts every ``shard-K`` back into ``D/shard-K`` and the cluster file into ``D/cluster.toml``.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from ..backup import BackupError, Restored, backup, is_s3, parse_s3, restore
from ..persistence.store import DB_FILE, LOCK_FILE, try_lock
from ..progress import ProgressFactory, silent

CLUSTER_FILE = "cluster.toml"
SHARD_RE = re.compile(r"^shard-(\d+)$")


def shard_dirs(directory: str) -> list[tuple[int, str]]:
    """``[(K, D/shard-K)]`` when ``directory`` is a sharded data directory (shard-K folders holding stores, no
    store of its own; ``serve --shards`` also writes cluster.toml there unless ``--cluster-config`` names
    another file), sorted by K; else ``[]``."""
    if not os.path.isdir(directory) or os.path.exists(os.path.join(directory, DB_FILE)):
        return []
    out = []
    for name in os.listdir(directory):
        m = SHARD_RE.match(name)
        d = os.path.join(directory, name)
        if (
            m
            and os.path.isdir(d)
            and (os.path.isfile(os.path.join(d, DB_FILE)) or os.path.isfile(os.path.join(directory, CLUSTER_FILE)))
        ):
            out.append((int(m.group(1)), d))
    return sorted(out)


def join(dest: str, name: str) -> str:
    """``dest``/``name`` for a folder or an S3 prefix."""
    if is_s3(dest):
        loc = parse_s3(dest)
        prefix = loc.key.strip("/")
        return f"s3://{loc.bucket}/{prefix + '/' if prefix else ''}{name}"
    return os.path.join(dest, name)


def parent(dest: str) -> str:
    """The folder or S3 prefix above ``dest``."""
    return dest.rstrip("/").rsplit("/", 1)[0] if is_s3(dest) else os.path.dirname(os.path.abspath(dest))


def is_shard_dest(dest: str) -> bool:
    """Whether ``dest`` ends in ``shard-K`` (the sub-prefix ``serve --shards`` gives each shard's backups)."""
    return bool(SHARD_RE.match(dest.rstrip("/").rsplit("/", 1)[-1]))


def put_file(dest: str, name: str, local: str) -> str:
    """Copy the local file ``local`` to ``dest``/``name`` (a folder or an S3 prefix); returns where."""
    where = join(dest, name)
    if is_s3(where):
        from ..backup import _s3_client

        loc = parse_s3(where)
        try:
            _s3_client().upload_file(local, loc.bucket, loc.key)
        except Exception as e:
            raise BackupError(f"upload to {where} failed: {e}") from None
        return where
    os.makedirs(dest, exist_ok=True)
    with open(local, "rb") as f:
        data = f.read()
    tmp = where + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, where)
    return where


def get_file(src: str, name: str, local: str) -> bool:
    """Copy ``src``/``name`` to the local file ``local``; False when there is none."""
    where = join(src, name)
    if is_s3(where):
        from ..backup import _s3_client

        loc = parse_s3(where)
        try:
            body = _s3_client().get_object(Bucket=loc.bucket, Key=loc.key)["Body"].read()
        except Exception as e:
            code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                return False
            raise BackupError(f"cannot read {where}: {e}") from None
    else:
        if not os.path.isfile(where):
            return False
        with open(where, "rb") as f:
            body = f.read()
    tmp = local + ".tmp"
    with open(tmp, "wb") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, local)
    return True


def backup_shards(
    dest: str,
    shards: list[tuple[int, str]],
    cluster_file: str | None,
    now: float | None = None,
    progress: ProgressFactory = silent,
) -> list[tuple[str, dict[str, Any]]]:
    """Back up every ``(K, dir)`` into ``dest``/shard-K/ and the cluster file beside them; returns what was
    written (the cluster file last: a backup with its cluster file is complete)."""
    if not shards:
        raise BackupError("no shards to back up")
    now = time.time() if now is None else now
    out = []
    for k, d in shards:
        out.append(backup(join(dest, f"shard-{k}"), d, as_dir=True, now=now, progress=progress))
    if cluster_file is not None:
        out.append((put_file(dest, CLUSTER_FILE, cluster_file), {}))
    return out


def backup_dir(dest: str, directory: str, progress: ProgressFactory = silent) -> list[tuple[str, dict[str, Any]]]:
    """Back up the sharded data directory ``directory`` (see ``shard_dirs``)."""
    shards = shard_dirs(directory)
    if not shards:
        raise BackupError(f"{directory} is not a sharded data directory (no shard-K folders with stores)")
    cf = os.path.join(directory, CLUSTER_FILE)
    return backup_shards(dest, shards, cf if os.path.isfile(cf) else None, progress=progress)


@dataclass
class LiveNode:
    host: str
    port: int
    node_id: str
    dir: str
    ranges: list[tuple[int, int]]


def live_nodes(seed: str, password: str | None = None) -> list[LiveNode]:
    """Every node of the running cluster that ``seed`` (HOST:PORT) belongs to, sorted by address, with its
    data directory (CONFIG GET dir) and slots."""
    from .admin import NodeConn, _split_addr, gather

    views, errors = gather([seed], password)
    if errors:
        raise BackupError("; ".join(errors))
    if not views:
        raise BackupError(f"no node answered at {seed}")
    out = []
    for addr, v in views.items():
        host, port = _split_addr(addr)
        try:
            c = NodeConn(host, port, password)
            try:
                reply = c.call("CONFIG", "GET", "dir")
            finally:
                c.close()
        except (OSError, RuntimeError) as e:
            raise BackupError(f"cannot ask node {addr} for its data directory: {e}") from None
        d = reply[1].decode() if isinstance(reply, list) and len(reply) == 2 else ""
        slots = sorted(v.slots_of(v.myid))
        ranges: list[tuple[int, int]] = []
        for s in slots:
            if ranges and ranges[-1][1] == s - 1:
                ranges[-1] = (ranges[-1][0], s)
            else:
                ranges.append((s, s))
        out.append(LiveNode(host, port, v.myid, d, ranges))
    out.sort(key=lambda n: (n.host, n.port))
    for n in out:
        if not n.dir or not os.path.isfile(os.path.join(n.dir, DB_FILE)):
            raise BackupError(
                f"node {n.host}:{n.port} keeps its store in {n.dir!r}, which is not on this machine"
                " (or it runs with --durability memory): run the backup where its store is"
            )
    return out


def backup_live(
    dest: str, seed: str, password: str | None = None, progress: ProgressFactory = silent
) -> list[tuple[str, dict[str, Any]]]:
    """Back up every node of the running cluster ``seed`` belongs to: node K (by address) into shard-K/, and
    a cluster file of the live slot table."""
    from .topology import write_file

    nodes = live_nodes(seed, password)
    with tempfile.TemporaryDirectory(prefix="respqueue-cluster-backup-") as td:
        cf = os.path.join(td, CLUSTER_FILE)
        write_file(cf, [(n.host, n.port, n.ranges) for n in nodes], [n.node_id for n in nodes])
        return backup_shards(dest, [(k, n.dir) for k, n in enumerate(nodes)], cf, progress=progress)


def backup_shard_names(src: str) -> list[int]:
    """The K of every shard-K/ under ``src`` (a folder or an S3 prefix)."""
    names: list[str] = []
    if is_s3(src):
        from ..backup import _s3_client

        loc = parse_s3(src)
        prefix = loc.key.strip("/")
        prefix = prefix + "/" if prefix else ""
        try:
            pages = (
                _s3_client().get_paginator("list_objects_v2").paginate(Bucket=loc.bucket, Prefix=prefix, Delimiter="/")
            )
            for page in pages:
                names += [p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", ())]
        except Exception as e:
            raise BackupError(f"cannot list {src}: {e}") from None
    elif os.path.isdir(src):
        names = [n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n))]
    return sorted(int(m.group(1)) for m in map(SHARD_RE.match, names) if m)


def is_cluster_backup(src: str) -> bool:
    """Whether ``src`` holds shard-K/ backups (an unreadable S3 prefix: no; the plain restore says why)."""
    try:
        return bool(backup_shard_names(src))
    except BackupError:
        return False


def restore_shards(
    src: str, directory: str, force: bool = False, progress: ProgressFactory = silent
) -> tuple[list[tuple[int, Restored]], bool]:
    """Restore every ``src``/shard-K (its newest backup) into ``directory``/shard-K, and ``src``/cluster.toml
    into ``directory``/cluster.toml (when the backup has one: the second value says whether). Refuses before
    changing anything while any shard's server runs."""
    ks = backup_shard_names(src)
    if not ks:
        raise BackupError(f"no shard-K backups under {src}")
    os.makedirs(directory, exist_ok=True)
    if os.path.exists(os.path.join(directory, DB_FILE)):
        raise BackupError(f"{directory} holds a single server's store; restore a cluster backup into its own directory")
    for k in ks:  # every shard stopped? (restore() checks again, holding the lock)
        d = os.path.join(directory, f"shard-{k}")
        os.makedirs(d, exist_ok=True)
        fd = try_lock(os.path.join(d, LOCK_FILE))
        if fd is None:
            raise BackupError(f"a running respqueue server holds {d}/{LOCK_FILE}: stop the cluster before restoring")
        os.close(fd)
    out = []
    for k in ks:
        out.append((k, restore(join(src, f"shard-{k}"), os.path.join(directory, f"shard-{k}"), force, progress)))
    return out, get_file(src, CLUSTER_FILE, os.path.join(directory, CLUSTER_FILE))


# ---- command line -------------------------------------------------------------
def cli_backup(dest: str, directory: str | None, seed: str | None, password: str | None, quiet: bool = False) -> int:
    import sys

    from ..progress import for_cli

    try:
        if seed:
            written = backup_live(dest, seed, password, progress=for_cli(quiet))
        else:
            assert directory is not None
            written = backup_dir(dest, directory, progress=for_cli(quiet))
    except (BackupError, OSError) as e:
        print(f"respqueue backup: {e}", file=sys.stderr)
        return 1
    for where, meta in written:
        if meta:
            print(f"wrote {where} ({meta['size']} bytes, sha256 {meta['sha256']})")
        else:
            print(f"wrote {where}")
    return 0


def cli_restore(src: str, directory: str, force: bool = False, quiet: bool = False) -> int:
    import sys

    from ..backup import db_path
    from ..progress import for_cli

    try:
        done, had_file = restore_shards(src, directory, force, progress=for_cli(quiet))
    except (BackupError, OSError) as e:
        print(f"respqueue restore: {e}", file=sys.stderr)
        return 1
    for k, r in done:
        for w in r.warnings:
            print(f"warning (--force): shard-{k}: {w}", file=sys.stderr)
        if r.aside:
            print(f"moved the previous store of shard-{k} to {r.aside}")
        created = f", created {r.meta.get('created')}" if r.meta else ""
        print(f"restored {r.name}{created} to {db_path(os.path.join(directory, f'shard-{k}'))}")
    if had_file:
        print(f"restored {join(src, CLUSTER_FILE)} to {os.path.join(directory, CLUSTER_FILE)}")
    return 0
