"""The server: listeners, clients, databases, blocked clients, cron, shutdown."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import secrets
import signal
import time
from collections import deque
from typing import Any

from . import __version__, speedups
from .config import Config
from .keyspace import Database, mstime
from .resp import RedisError

log = logging.getLogger("respqueue")

#: the cyclic GC's youngest-generation threshold while serving (see run)
GC_GEN0_THRESHOLD = 50_000


class Server:
    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._next_id = 0
        self.dbs = [Database(i, self) for i in range(self.config.databases)]
        self.clients: dict[int, Any] = {}
        # (db index, key) of keys that blocked clients wait on and that changed
        self.ready_keys: dict[tuple[int, bytes], None] = {}
        self.pubsub_channels: dict[bytes, dict[Any, None]] = {}
        self.pubsub_patterns: dict[bytes, dict[Any, None]] = {}
        self.monitors: list[Any] = []
        self.busy_script: Any = None
        self.journal: Any = None  # persistence hooks in here
        # a RedisError (MISCONF) while the store cannot be written: write commands are refused
        self.write_refused: RedisError | None = None
        self.loaded_keys = 0
        self.loaded_expired = 0
        self.scripting: Any = None  # the Lua runtime hooks in here
        self.history: Any = None  # compat.history.HistoryCapture when job history is on
        self.repl: Any = None  # replication.Replication: role, replicas, the link to a master
        self.slowlog: deque[list[Any]] = deque(maxlen=self.config.slowlog_max_len)
        self.slowlog_next_id = 0
        self.run_id = secrets.token_hex(20)
        self.start_time = time.time()
        self.dirty = 0
        self.lastsave = int(time.time())
        self.stats_commands = 0
        self.stats_connections_received = 0
        self.stats_rejected_connections = 0
        self.stats_rejected_calls = 0
        self.stats_expired_keys = 0
        self.stats_keyspace_hits = 0
        self.stats_keyspace_misses = 0
        self.listeners: list[asyncio.AbstractServer] = []
        self.tcp_port = self.config.port
        self._stop: asyncio.Future[None] | None = None
        self._cron_task: asyncio.Task[None] | None = None
        self.shutdown_nosave = False
        self.active_expire_enabled = True
        self.errorstats: dict[bytes, int] = {}
        # the metrics/dashboard HTTP server (respqueue/http, --metrics-port): fn(exposition) writers of
        # more /metrics families, and (method, path) -> route of more endpoints; compat/ adds BullMQ's
        self.metrics_providers: list[Any] = []
        self.http_routes: dict[tuple[str, str], Any] = {}
        self.http: Any = None
        # maxmemory (respqueue/memory.py): the guard while maxmemory > 0, and whether the command
        # being run found the server over the limit
        self.mem_guard: Any = None
        self.oom_state = False
        # cold hashes (respqueue/coldhash.py): the compaction queue, and in memory mode the same object
        # for Database.modified to note changed hashes in (None: off, or the journal notes them)
        self.cold_hashes: Any = None
        self.cold_notes: Any = None
        self._idle_trim: Any = None  # the C heap's trim once idle (respqueue/heap.py), from start()
        self.stats_evicted_keys = 0
        # client-output-buffer-limit (respqueue/outbuf.py)
        self.obl: Any = None
        self.obl_normal: Any = None
        self.stats_obl_disconnections = 0
        # TLS (respqueue/tls.py): the listener's context, and its port once listening
        self.tls_context: Any = None
        self.tls_listener: Any = None
        self.tls_servers: list[asyncio.AbstractServer] = []
        self.tls_port = self.config.tls_port
        from .acl import AclState

        self.acl = AclState(self)  # users, ACL LOG (respqueue/acl.py)
        self.cluster: Any = None  # respqueue.cluster.topology.Cluster in cluster mode (set in start)

    # ---- clients ----------------------------------------------------------
    def next_client_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def client_gone(self, c: Any) -> None:
        if getattr(c, "blocked", None) is not None:
            self.unblock_client(c)
        for db, key in [(w[0], w[1]) for w in c.watched_keys]:
            s = db.watched.get(key)
            if s is not None:
                s.discard(c)
                if not s:
                    del db.watched[key]
        c.watched_keys = []
        for ch in c.channels:
            subs = self.pubsub_channels.get(ch)
            if subs is not None:
                subs.pop(c, None)
                if not subs:
                    del self.pubsub_channels[ch]
        for p in c.patterns:
            subs = self.pubsub_patterns.get(p)
            if subs is not None:
                subs.pop(c, None)
                if not subs:
                    del self.pubsub_patterns[p]
        c.channels = set()
        c.patterns = set()
        if c in self.monitors:
            self.monitors.remove(c)
        if self.repl is not None:
            self.repl.client_gone(c)
        self.clients.pop(c.id, None)

    # ---- blocking ---------------------------------------------------------
    def block_client(self, c: Any, st: Any) -> None:
        db = st.db
        for key in st.keys:
            q = db.blocking.get(key)
            if q is None:
                q = db.blocking[key] = deque()
            q.append(c)

    def unblock_client(self, c: Any) -> None:
        st = c.blocked
        if st is None:
            return
        c.blocked = None
        if st.timer is not None:
            st.timer.cancel()
        db = st.db
        for key in st.keys:
            q = db.blocking.get(key)
            if q is not None:
                try:
                    q.remove(c)
                except ValueError:
                    pass
                if not q:
                    del db.blocking[key]

    def handle_ready_keys(self, writer: Any = None) -> None:
        """Serve clients blocked on keys that changed, first come first served. ``writer``: the connection
        whose command made the keys ready; in durable mode its held reply goes out after theirs, in the
        order Redis writes them (a served client is linked at the head of clients_pending_write)."""
        from .dispatch import Block, call, resolve

        while self.ready_keys:
            ready = self.ready_keys
            self.ready_keys = {}
            for dbi, key in ready:
                db = self.dbs[dbi]
                q = db.blocking.get(key)
                if not q:
                    continue
                for c in list(q):
                    st = c.blocked
                    if st is None:
                        continue
                    cmd = resolve(st.argv)
                    if isinstance(cmd, RedisError):
                        r: Any = cmd
                    else:
                        st.ready_key = key
                        r = call(c, cmd, st.argv)
                        st.ready_key = None
                    if type(r) is Block:
                        continue
                    self.unblock_client(c)
                    durable = self.journal is not None and self.journal.durable
                    if durable:
                        # what it read (or wrote) is in the open batch, not committed yet: its reply
                        # waits for that commit, and if the commit fails it gets the writers' error
                        # instead (a read-only XREAD included: what it read was rolled back)
                        c.journal_hold(last=True)
                    c.unblocked_with(r, durable)
                    if key not in db.data:
                        break
        j = self.journal
        if writer is not None and j is not None and j.durable and writer.held and writer.hold_bid == j.open_id:
            writer.journal_hold(last=True)  # released after the clients it served

    def unblock_by_id(self, client_id: int, error: bool) -> bool:
        c = self.clients.get(client_id)
        if c is None or getattr(c, "blocked", None) is None:
            return False
        st = c.blocked
        self.unblock_client(c)
        if error:
            c.unblocked_with(RedisError("UNBLOCKED client unblocked via CLIENT UNBLOCK"))
        else:
            c.unblocked_with(st.timeout_reply)
        return True

    # ---- monitor ----------------------------------------------------------
    def feed_monitors(self, c: Any, argv: list[bytes]) -> None:
        t = time.time()
        parts = " ".join('"%s"' % _repr_arg(a) for a in argv)
        line = "+%.6f [%d %s] %s\r\n" % (t, c.db.index, c.addr.decode(), parts)
        data = line.encode()
        for m in list(self.monitors):
            if m is not c:
                m.write(data)

    def busy_error(self) -> RedisError:
        return RedisError(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        )

    # ---- lifecycle --------------------------------------------------------
    async def start(self) -> None:
        from .protocol import ClientConnection

        loop = asyncio.get_running_loop()
        cfg = self.config
        if cfg.tls_port:
            from .tls import listener_context

            listener_context(self)  # TLSConfigError (an OSError): startup fails, says why
        from . import memory, outbuf

        outbuf.apply(self, cfg.client_output_buffer_limit)
        os.makedirs(cfg.dir, exist_ok=True)
        if not getattr(self.acl, "_started", False):
            self.acl.startup()  # ACL users: --aclfile or <dir>/users.acl; raises ValueError
            self.acl._started = True
        if self.journal is None:
            from .persistence import open_persistence

            self.journal = open_persistence(self)
            if self.journal is not None:
                self.journal.start()
        memory.setup(self)  # after the store is loaded, before clients: measures the keyspace when maxmemory is set
        from . import heap

        heap.trim()  # the load's temporaries: their pages back to the system
        self._idle_trim = heap.IdleTrim(int(cfg.heap_trim_idle or 0))
        if self.cold_hashes is None:
            from . import coldhash

            coldhash.setup(self)
        if self.repl is None:
            from .replication import open_replication

            self.repl = open_replication(self)
        if cfg.backup_to and getattr(self, "_backup_task", None) is None:
            from .backup_schedule import start_scheduled_backups

            self._backup_task = start_scheduled_backups(self)
        if cfg.port:
            hosts = cfg.host.split() if cfg.host else None
            srv = await loop.create_server(
                lambda: ClientConnection(self), hosts, cfg.port, reuse_address=True, backlog=511
            )
            self.listeners.append(srv)
            socks = srv.sockets or []
            if socks:
                self.tcp_port = socks[0].getsockname()[1]
            log.info("listening on %s port %d", cfg.host, self.tcp_port)
        if cfg.tls_port:
            from .tls import listen

            await listen(self)
        if cfg.unixsocket:
            try:
                os.unlink(cfg.unixsocket)
            except FileNotFoundError:
                pass
            srv = await loop.create_unix_server(lambda: ClientConnection(self), cfg.unixsocket)
            self.listeners.append(srv)
            log.info("listening on unix socket %s", cfg.unixsocket)
        if cfg.metrics_port:
            await self._start_http()
        if cfg.cluster_enabled == "yes" or cfg.cluster_config:
            from .cluster.topology import build

            self.cluster = build(cfg, self.tcp_port)
            if self.scripting is not None:
                self.scripting.cluster = self.cluster
        self._stop = loop.create_future()
        self._cron_task = loop.create_task(self._cron())

    async def _start_http(self) -> None:
        """The metrics and dashboard HTTP server (``--metrics-port``), with what plug-ins registered in ``http.PLUGINS``."""
        from .http import PLUGINS, start_http

        for plugin in PLUGINS:  # compat/ registers BullMQ's queues and the dashboard API (cli.load_plugins)
            plugin(self)
        self.http = await start_http(self)

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        await self.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.request_shutdown, sig.name)
            except (NotImplementedError, RuntimeError):
                pass
        log.info("respqueue %s ready to accept connections (pid %d); %s", __version__, os.getpid(), speedups.describe())
        assert self._stop is not None
        await self._stop
        await self.close()

    def request_shutdown(self, reason: str = "SHUTDOWN") -> None:
        log.info("shutdown requested (%s)", reason)
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(None)

    async def close(self) -> None:
        for srv in self.listeners:
            srv.close()
        if self.http is not None:
            self.http.close()
        if self._cron_task is not None:
            self._cron_task.cancel()
        for c in list(self.clients.values()):
            c.close_after_reply()
        if self.journal is not None:
            await self.journal.close()
        for srv in self.listeners:
            try:
                await asyncio.wait_for(srv.wait_closed(), 2)
            except (TimeoutError, Exception):
                pass
        if self.config.unixsocket:
            try:
                os.unlink(self.config.unixsocket)
            except OSError:
                pass
        log.info("respqueue stopped; bye")

    async def _cron(self) -> None:
        tick = 0
        while True:
            await asyncio.sleep(1.0 / max(1, self.config.hz))
            tick += 1
            try:
                now = mstime()
                if self.active_expire_enabled:
                    for db in self.dbs:
                        if db.expire_heap:
                            db.active_expire(now)
                if self.ready_keys:
                    self.handle_ready_keys()
                if self.cold_hashes is not None:
                    self.cold_hashes.tick(now)
                if tick % max(1, self.config.hz) == 0:
                    if self.config.timeout:
                        self._close_idle_clients()
                    if self._idle_trim is not None:
                        self._idle_trim.tick(self.stats_commands, time.monotonic())
            except Exception:
                log.exception("error in server cron")

    def _close_idle_clients(self) -> None:
        limit = self.config.timeout
        now = time.time()
        for c in list(self.clients.values()):
            if c.blocked is not None or c.channels or c.patterns or c.monitor:
                continue
            if now - c.last_interaction > limit:
                c.close("idle timeout")


def _repr_arg(a: bytes) -> str:
    out = []
    for ch in a:
        if ch == 92:
            out.append("\\\\")
        elif ch == 34:
            out.append('\\"')
        elif ch == 10:
            out.append("\\n")
        elif ch == 13:
            out.append("\\r")
        elif ch == 9:
            out.append("\\t")
        elif 32 <= ch < 127:
            out.append(chr(ch))
        else:
            out.append("\\x%02x" % ch)
    return "".join(out)


def run(config: Config) -> int:
    """Run a server until SIGTERM/SIGINT or SHUTDOWN; returns the exit code."""
    try:
        import uvloop  # type: ignore[import-not-found]

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    from .persistence import StoreError

    # The cyclic GC's youngest generation is collected every 700 container allocations by default:
    # a BullMQ job's commands allocate thousands (argv lists, rows, replies), nearly none of them in
    # cycles. Collecting every 50,000 saves ~3-5% of the loop's CPU (docs/BENCHMARKS.md, "Server CPU
    # per job"); the older generations keep their ratios (a full pass every 10 young ones x 10).
    gc.set_threshold(GC_GEN0_THRESHOLD, 10, 10)
    server = Server(config)
    try:
        runner(server.serve_forever())
    except StoreError as e:
        log.error("cannot start: %s", e)
        import sys

        print(f"respqueue: cannot start: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        log.error("cannot start: %s", e)
        from .tls import TLSConfigError

        if isinstance(e, TLSConfigError):
            import sys

            print(f"respqueue: cannot start: TLS: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # ACL users file errors (respqueue/acl.py)
        import sys

        log.error("cannot start: %s", e)
        print(f"respqueue: cannot start: {e}", file=sys.stderr)
        return 1
    return 0
