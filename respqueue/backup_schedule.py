"""Scheduled backups: every ``--backup-interval`` seconds the server backs its store up to
``--backup-to`` (a directory or ``s3://bucket/prefix``) and keeps the newest
``--backup-keep`` backups. The work runs in a thread, so the event loop never waits on it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .backup import BackupError, backup, prune

log = logging.getLogger("respqueue")


def run_once(directory: str, dest: str, keep: int, cluster_file: str | None = None) -> str:
    """One scheduled backup plus pruning; returns the log line. Raises on failure. A shard of
    ``serve --shards`` (``cluster_file``) also copies the cluster file beside its ``shard-K`` folder."""
    t0 = time.perf_counter()
    where, meta = backup(dest, directory, as_dir=True)
    removed = prune(dest, keep)
    if cluster_file:
        from .cluster.backup import CLUSTER_FILE, parent, put_file

        put_file(parent(dest), CLUSTER_FILE, cluster_file)
    return "backup: wrote %s (%d bytes, sha256 %s) in %.2f s; removed %d old backup(s), keeping %d" % (
        where, meta["size"], meta["sha256"][:16], time.perf_counter() - t0, len(removed), keep)


async def _in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a daemon thread (a stuck upload never holds up the process's exit)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, err: BaseException | None) -> None:
        if fut.done():
            return
        if err is not None:
            fut.set_exception(err)
        else:
            fut.set_result(value)

    def work() -> None:
        value: Any = None
        err: BaseException | None = None
        try:
            value = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the loop
            err = e
        try:
            loop.call_soon_threadsafe(settle, value, err)
        except RuntimeError:  # the loop is gone: the server stopped meanwhile
            pass

    threading.Thread(target=work, name="respqueue-backup", daemon=True).start()
    return await fut


async def backup_loop(directory: str, dest: str, interval: float, keep: int, cluster_file: str | None = None) -> None:
    """Back up every ``interval`` seconds until cancelled; one log line per backup."""
    log.info("scheduled backups to %s every %s s, keeping %d", dest, interval, keep)
    while True:
        await asyncio.sleep(interval)
        try:
            line = await _in_thread(lambda: run_once(directory, dest, keep, cluster_file))
            log.info("%s", line)
        except asyncio.CancelledError:
            raise
        except (BackupError, OSError) as e:
            log.error("backup to %s failed: %s", dest, e)
        except Exception:
            log.exception("backup to %s failed", dest)


def start_scheduled_backups(server: Any) -> asyncio.Task[None] | None:
    """Start the backup task for ``server`` when ``--backup-to`` is set; None otherwise."""
    cfg = server.config
    dest = getattr(cfg, "backup_to", None)
    if not dest:
        return None
    if server.journal is None:
        log.warning("--backup-to %s ignored: durability 'memory' keeps no store to back up", dest)
        return None
    interval = max(1, int(getattr(cfg, "backup_interval", 3600) or 3600))
    keep = max(1, int(getattr(cfg, "backup_keep", 7) or 7))
    cluster_file = None
    if getattr(cfg, "cluster_config", None):
        from .cluster.backup import is_shard_dest

        if is_shard_dest(dest):
            cluster_file = cfg.cluster_config
    return asyncio.get_running_loop().create_task(backup_loop(cfg.dir, dest, interval, keep, cluster_file))
