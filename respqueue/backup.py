"""Backups of the SQLite store to a file or to S3, and restores from them.

A backup is a consistent copy of ``<dir>/respqueue.db`` made with SQLite's online backup
API while a server may be serving from it, plus a metadata object beside it
(``<backup>.meta.json``: sha256, size, created, source, schema_version). Restore verifies
the sha256, runs ``PRAGMA integrity_check``, refuses while a server holds
``<dir>/respqueue.lock``, moves the current store aside and puts the backup in place.

Destinations: a file path; a directory (then the file is ``respqueue-<UTC timestamp>.db``
in it); ``s3://bucket/prefix`` (the object is ``prefix/respqueue-<UTC timestamp>.db``).
S3 goes through boto3 with the usual AWS environment and config (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_PROFILE, ...). See docs/BACKUPS.md.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import re
import socket
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from . import __version__
from .persistence.store import DB_FILE, LOCK_FILE, SCHEMA_VERSION, schema_version, try_lock
from .progress import Progress, ProgressFactory, silent

META_SUFFIX = ".meta.json"
BACKUP_RE = re.compile(r"^respqueue-\d{8}T\d{6}\.\d{3}Z\.db$")
BUSY_TIMEOUT_S = 30.0
STEP_PAGES = 1024  # pages the online backup copies per step (a progress update between steps)


class BackupError(Exception):
    """A backup or restore that cannot be done; the message says why and what to do."""


@dataclass
class S3Location:
    bucket: str
    key: str  # the object key, or a prefix (possibly "")


def is_s3(url: str) -> bool:
    return url.startswith("s3://")


def parse_s3(url: str) -> S3Location:
    rest = url[5:]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise BackupError(f"{url}: no bucket name (use s3://bucket/prefix)")
    return S3Location(bucket, key)


def db_path(directory: str) -> str:
    return os.path.join(directory, DB_FILE)


def backup_name(now: float | None = None) -> str:
    """``respqueue-YYYYMMDDTHHMMSS.mmmZ.db`` in UTC: names sort by time."""
    t = time.time() if now is None else now
    d = _dt.datetime.fromtimestamp(t, _dt.UTC)
    return "respqueue-%s.%03dZ.db" % (d.strftime("%Y%m%dT%H%M%S"), d.microsecond // 1000)


def sha256_file(path: str, progress: Progress | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
            if progress is not None:
                progress.update(len(b))
    return h.hexdigest()


def _sha256_with_progress(path: str, label: str, progress: ProgressFactory) -> str:
    with progress(label, os.path.getsize(path), "B") as pr:
        return sha256_file(path, pr)


def _s3_client() -> Any:
    try:
        import boto3
    except ImportError:  # pragma: no cover - boto3 is a dependency
        raise BackupError("S3 backups need boto3 (pip install boto3)") from None
    return boto3.client("s3")


# ---- taking a snapshot --------------------------------------------------------
def _open_source(path: str) -> sqlite3.Connection:
    """The live store, read-only when SQLite allows it, with a busy timeout."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        # a WAL store without its -shm file (no server running) cannot always be opened read-only
        pass
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def snapshot(directory: str, out_path: str, created: float | None = None,
             progress: ProgressFactory = silent) -> dict[str, Any]:
    """Copy the store in ``directory`` to ``out_path`` (a new file) with the online backup API
    and return its metadata. The copy is one read transaction, so it is consistent even while
    a server commits to the store. ``progress`` makes the progress display of each phase."""
    src_path = db_path(directory)
    if not os.path.exists(src_path):
        raise BackupError(f"no store at {src_path} (is --dir right? a server in memory mode writes none)")
    t0 = time.time() if created is None else created
    try:
        src = _open_source(src_path)
    except sqlite3.Error as e:
        raise BackupError(f"cannot open the store {src_path}: {e}") from None
    try:
        dst = sqlite3.connect(out_path, isolation_level=None)
        try:
            # One read transaction held across every step: each step copies pages of the same WAL
            # snapshot, so the copy is consistent (and never restarts) while a server commits.
            src.execute("BEGIN")
            page_size = src.execute("PRAGMA page_size").fetchone()[0]
            pages = src.execute("PRAGMA page_count").fetchone()[0]
            with progress("backup: copying", pages * page_size, "B") as pr:

                def step(_status: int, remaining: int, total: int) -> None:
                    pr.set_total(total * page_size)
                    pr.set((total - remaining) * page_size)

                src.backup(dst, pages=STEP_PAGES, progress=step)
            src.execute("ROLLBACK")
            # a standalone file: rollback journal, so the copy needs no -wal/-shm to be read
            dst.execute("PRAGMA journal_mode=DELETE")
            version = schema_version(dst)
        finally:
            dst.close()
    except sqlite3.Error as e:
        raise BackupError(f"backup of {src_path} failed: {e}") from None
    finally:
        src.close()
    meta: dict[str, Any] = {
        "format": "respqueue-sqlite",
        "sha256": _sha256_with_progress(out_path, "backup: sha256", progress),
        "size": os.path.getsize(out_path),
        "created": _dt.datetime.fromtimestamp(t0, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "source": f"{socket.gethostname()}:{os.path.abspath(src_path)}",
        "respqueue_version": __version__,
    }
    if version:
        meta["schema_version"] = version
    return meta


def _meta_bytes(meta: dict[str, Any]) -> bytes:
    return (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---- backup -----------------------------------------------------------------
def backup(dest: str, directory: str, as_dir: bool = False, now: float | None = None,
           progress: ProgressFactory = silent) -> tuple[str, dict[str, Any]]:
    """Back up the store in ``directory`` to ``dest``; returns (where, metadata).

    ``dest`` is ``s3://bucket/prefix``, a directory (``as_dir``, an existing directory or a
    path ending in "/": the file is named ``respqueue-<timestamp>.db``) or a file path."""
    now = time.time() if now is None else now
    name = backup_name(now)
    if is_s3(dest):
        loc = parse_s3(dest)
        prefix = loc.key.rstrip("/")
        key = f"{prefix}/{name}" if prefix else name
        with tempfile.TemporaryDirectory(prefix="respqueue-backup-") as td:
            tmp = os.path.join(td, name)
            meta = snapshot(directory, tmp, now, progress)
            s3 = _s3_client()
            try:
                with progress("backup: uploading", meta["size"], "B") as pr:
                    s3.upload_file(tmp, loc.bucket, key, Callback=pr.update)
                # the metadata goes last: a backup with metadata is complete
                s3.put_object(Bucket=loc.bucket, Key=key + META_SUFFIX, Body=_meta_bytes(meta),
                              ContentType="application/json")
            except Exception as e:  # botocore's ClientError, connection errors, ...
                raise BackupError(f"upload to s3://{loc.bucket}/{key} failed: {e}") from None
        return f"s3://{loc.bucket}/{key}", meta
    if as_dir or dest.endswith("/") or os.path.isdir(dest):
        os.makedirs(dest, exist_ok=True)
        path = os.path.join(dest, name)
    else:
        path = dest
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise BackupError(f"cannot write {path}: the directory {parent} does not exist")
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".respqueue-backup-", suffix=".tmp", dir=parent)
    os.close(fd)
    os.unlink(tmp)  # sqlite creates it
    try:
        meta = snapshot(directory, tmp, now, progress)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _write_atomic(path + META_SUFFIX, _meta_bytes(meta))
        _fsync_dir(parent)
    except BaseException:
        for p in (tmp, tmp + "-journal"):
            if os.path.exists(p):
                os.unlink(p)
        raise
    return path, meta


# ---- listing and pruning ----------------------------------------------------
def list_backups(dest: str) -> list[str]:
    """Backups named ``respqueue-<timestamp>.db`` in a directory or under an S3 prefix, oldest first."""
    if is_s3(dest):
        loc = parse_s3(dest)
        prefix = loc.key.rstrip("/")
        prefix = prefix + "/" if prefix else ""
        s3 = _s3_client()
        keys: list[str] = []
        try:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=loc.bucket, Prefix=prefix, Delimiter="/"):
                for o in page.get("Contents", ()):
                    k = o["Key"]
                    if BACKUP_RE.match(k[len(prefix):]):
                        keys.append(k)
        except Exception as e:
            raise BackupError(f"cannot list s3://{loc.bucket}/{prefix}: {e}") from None
        return [f"s3://{loc.bucket}/{k}" for k in sorted(keys)]
    if not os.path.isdir(dest):
        return []
    return [os.path.join(dest, n) for n in sorted(os.listdir(dest)) if BACKUP_RE.match(n)]


def prune(dest: str, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` backups in ``dest`` (and their metadata); returns what went."""
    backups = list_backups(dest)
    if keep < 1 or len(backups) <= keep:
        return []
    old = backups[: len(backups) - keep]
    if is_s3(dest):
        bucket = parse_s3(dest).bucket
        objs = []
        for u in old:
            k = parse_s3(u).key
            objs += [{"Key": k}, {"Key": k + META_SUFFIX}]
        s3 = _s3_client()
        try:
            for i in range(0, len(objs), 1000):
                s3.delete_objects(Bucket=bucket, Delete={"Objects": objs[i : i + 1000], "Quiet": True})
        except Exception as e:
            raise BackupError(f"cannot delete old backups in s3://{bucket}: {e}") from None
    else:
        for p in old:
            for f in (p, p + META_SUFFIX):
                try:
                    os.unlink(f)
                except FileNotFoundError:
                    pass
    return old


# ---- restore ----------------------------------------------------------------
def _newest_with_meta(backups: list[str], has_meta: Any) -> str:
    for b in reversed(backups):
        if has_meta(b):
            return b
    return backups[-1]


def _fetch(src: str, tmp: str, progress: ProgressFactory = silent) -> tuple[str, dict[str, Any] | None]:
    """Bring the backup named by ``src`` to ``tmp``; returns (its full name, metadata or None)."""
    if is_s3(src):
        loc = parse_s3(src)
        s3 = _s3_client()

        def exists(key: str) -> bool:
            try:
                s3.head_object(Bucket=loc.bucket, Key=key)
                return True
            except Exception as e:
                code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
                if code in ("404", "NoSuchKey", "NotFound"):
                    return False
                raise BackupError(f"cannot read s3://{loc.bucket}/{key}: {e}") from None

        key = loc.key
        if not key or key.endswith("/") or not exists(key):
            found = list_backups(src)
            if not found:
                raise BackupError(f"no backup at {src} (no object there, and no respqueue-*.db under it)")
            key = parse_s3(_newest_with_meta(found, lambda u: exists(parse_s3(u).key + META_SUFFIX))).key
        try:
            size = s3.head_object(Bucket=loc.bucket, Key=key).get("ContentLength")
            with progress("restore: downloading", size, "B") as pr:
                s3.download_file(loc.bucket, key, tmp, Callback=pr.update)
        except Exception as e:
            raise BackupError(f"download of s3://{loc.bucket}/{key} failed: {e}") from None
        meta: dict[str, Any] | None = None
        try:
            body = s3.get_object(Bucket=loc.bucket, Key=key + META_SUFFIX)["Body"].read()
            meta = json.loads(body)
        except Exception as e:
            code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
            if code not in ("404", "NoSuchKey", "NotFound"):
                if isinstance(e, ValueError):
                    raise BackupError(f"s3://{loc.bucket}/{key}{META_SUFFIX} is not valid JSON: {e}") from None
                raise BackupError(f"cannot read s3://{loc.bucket}/{key}{META_SUFFIX}: {e}") from None
        return f"s3://{loc.bucket}/{key}", meta
    path = src
    if os.path.isdir(src):
        found = list_backups(src)
        if not found:
            raise BackupError(f"no backup in the directory {src} (no respqueue-*.db there)")
        path = _newest_with_meta(found, lambda p: os.path.exists(p + META_SUFFIX))
    if not os.path.isfile(path):
        raise BackupError(f"no backup at {path}")
    with open(path, "rb") as fi, open(tmp, "wb") as fo, progress("restore: copying", os.path.getsize(path), "B") as pr:
        while True:
            b = fi.read(1 << 20)
            if not b:
                break
            fo.write(b)
            pr.update(len(b))
        fo.flush()
        os.fsync(fo.fileno())
    meta = None
    if os.path.exists(path + META_SUFFIX):
        try:
            with open(path + META_SUFFIX, "rb") as f:
                meta = json.load(f)
        except ValueError as e:
            raise BackupError(f"{path}{META_SUFFIX} is not valid JSON: {e}") from None
    return path, meta


def _take_lock(directory: str) -> int:
    """Hold ``<dir>/respqueue.lock`` for the restore; a running server holds it, so this fails."""
    lp = os.path.join(directory, LOCK_FILE)
    fd = try_lock(lp)
    if fd is None:
        raise BackupError(
            f"a running respqueue server holds {lp}: stop the server that uses {directory} before restoring"
        )
    return fd


@dataclass
class Restored:
    name: str  # the backup that was restored
    meta: dict[str, Any] | None  # its metadata (None: restored with --force without metadata)
    aside: str | None  # where the previous store was moved, if there was one
    warnings: list[str]  # checks that --force overrode


def restore(src: str, directory: str, force: bool = False, progress: ProgressFactory = silent) -> Restored:
    """Restore the backup ``src`` (a file, a directory of backups, ``s3://bucket/key`` or
    ``s3://bucket/prefix``: the newest backup there) into the data directory ``directory``.

    Refuses (BackupError) when a server holds the directory, when the metadata is missing or
    its sha256 or size do not match (unless ``force``), and when the integrity check fails."""
    os.makedirs(directory, exist_ok=True)
    lock_fd = _take_lock(directory)
    target = db_path(directory)
    tmp = target + ".restore-tmp"
    warnings: list[str] = []
    try:
        for p in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"):
            if os.path.exists(p):
                os.unlink(p)
        name, meta = _fetch(src, tmp, progress)
        problems: list[str] = []
        if meta is None:
            problems.append(f"{name} has no metadata ({name}{META_SUFFIX} is missing), so its sha256 cannot be verified")
        else:
            want = meta.get("sha256")
            got = _sha256_with_progress(tmp, "restore: sha256", progress)
            if want != got:
                problems.append(f"{name}: sha256 mismatch: the metadata says {want}, the file is {got}; the backup "
                                "is damaged or is not the one the metadata describes")
            size = os.path.getsize(tmp)
            if meta.get("size") not in (None, size):
                problems.append(f"{name}: size mismatch: the metadata says {meta.get('size')}, the file has {size}")
        if problems and not force:
            raise BackupError("; ".join(problems) + "; refusing to restore (use --force to restore it anyway)")
        warnings += problems
        try:
            conn = sqlite3.connect(f"file:{tmp}?mode=ro", uri=True)
            try:
                res = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
                version = schema_version(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            raise BackupError(f"{name} is not a readable SQLite database: {e}") from None
        if res != ["ok"]:
            raise BackupError(f"{name}: integrity check failed: {'; '.join(map(str, res[:10]))}")
        if version > SCHEMA_VERSION:
            raise BackupError(f"{name} has schema version {version}, newer than this respqueue supports"
                              f" ({SCHEMA_VERSION}); upgrade respqueue")
        aside: str | None = None
        if os.path.exists(target):
            ts = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
            aside = f"{target}.before-restore-{ts}"
            n = 1
            while os.path.exists(aside):
                n += 1
                aside = f"{target}.before-restore-{ts}-{n}"
            os.replace(target, aside)
            # its WAL holds committed pages: it goes with it, never with the restored file
            for suffix in ("-wal", "-shm"):
                if os.path.exists(target + suffix):
                    os.replace(target + suffix, aside + suffix)
        else:
            for suffix in ("-wal", "-shm", "-journal"):
                if os.path.exists(target + suffix):
                    os.unlink(target + suffix)
        os.replace(tmp, target)
        _fsync_dir(directory)
        return Restored(name, meta, aside, warnings)
    finally:
        for p in (tmp, tmp + "-journal"):
            if os.path.exists(p):
                os.unlink(p)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
        finally:
            os.close(lock_fd)


# ---- command line -----------------------------------------------------------
def cli_backup(dest: str, directory: str, quiet: bool = False) -> int:
    """``respqueue backup DEST``: prints what it wrote (progress on stderr unless ``quiet``); exit status 0 or 1."""
    import sys

    from .progress import for_cli

    try:
        where, meta = backup(dest, directory, progress=for_cli(quiet))
    except (BackupError, OSError) as e:
        print(f"respqueue backup: {e}", file=sys.stderr)
        return 1
    meta_where = where + META_SUFFIX
    print(f"wrote {where} ({meta['size']} bytes, sha256 {meta['sha256']})")
    print(f"wrote {meta_where}")
    return 0


def cli_restore(src: str, directory: str, force: bool = False, quiet: bool = False) -> int:
    """``respqueue restore SRC``: prints what it did (progress on stderr unless ``quiet``); exit status 0 or 1."""
    import sys

    from .progress import for_cli

    try:
        r = restore(src, directory, force, progress=for_cli(quiet))
    except (BackupError, OSError) as e:
        print(f"respqueue restore: {e}", file=sys.stderr)
        return 1
    for w in r.warnings:
        print(f"warning (--force): {w}", file=sys.stderr)
    if r.aside:
        print(f"moved the previous store to {r.aside}")
    created = f", created {r.meta.get('created')}" if r.meta else ""
    print(f"restored {r.name}{created} to {db_path(directory)}")
    return 0
