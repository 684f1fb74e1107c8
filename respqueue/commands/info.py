"""INFO and its sections."""

from __future__ import annotations

import os
import platform
import resource
import secrets
import sys
import time
from typing import Any

from .. import __version__, heap
from ..resp import Verbatim
from .config import get_config
from .connection import REDIS_VERSION
from .introspection import _COMMAND_CMD, _COMMAND_SUBS, _all_commands
from .registry import command

# =========================================================================
# INFO
# =========================================================================

DEFAULT_SECTIONS = (
    "server", "clients", "memory", "persistence", "stats", "replication",
    "cpu", "modules", "errorstats", "cluster", "keyspace",
)
ALL_SECTIONS = (
    "server", "clients", "memory", "persistence", "stats", "replication",
    "cpu", "modules", "commandstats", "errorstats", "latencystats", "cluster", "keyspace",
)
_TITLES = {
    "server": "Server", "clients": "Clients", "memory": "Memory", "persistence": "Persistence",
    "stats": "Stats", "replication": "Replication", "cpu": "CPU", "modules": "Modules",
    "commandstats": "Commandstats", "errorstats": "Errorstats", "latencystats": "Latencystats",
    "cluster": "Cluster", "keyspace": "Keyspace",
}


def bytes_to_human(n: int) -> str:
    """Redis's bytesToHuman: 0B, 1.06M, 2.00G..."""
    for unit, size in (("P", 1024**5), ("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n}B"


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _master_replid(server: Any) -> str:
    rid = getattr(server, "master_replid", None)
    if rid is None:
        rid = server.master_replid = secrets.token_hex(20)
    return rid


def _sec_server(server: Any) -> list[str]:
    now = time.time()
    uptime = int(now - server.start_time)
    u = platform.uname()
    cfg = server.config
    return [
        "redis_version:" + REDIS_VERSION,
        "redis_git_sha1:00000000",
        "redis_git_dirty:0",
        "redis_build_id:0",
        "redis_mode:" + ("standalone" if server.cluster is None else "cluster"),
        f"os:{u.system} {u.release} {u.machine}",
        f"arch_bits:{64 if sys.maxsize > 2**32 else 32}",
        "monotonic_clock:POSIX clock_gettime",
        "multiplexing_api:epoll",
        "atomicvar_api:c11-builtin",
        "gcc_version:0.0.0",
        f"process_id:{os.getpid()}",
        "process_supervised:no",
        "run_id:" + server.run_id,
        f"tcp_port:{server.tcp_port}",
        f"server_time_usec:{int(now * 1_000_000)}",
        f"uptime_in_seconds:{uptime}",
        f"uptime_in_days:{uptime // 86400}",
        f"hz:{cfg.hz}",
        f"configured_hz:{cfg.hz}",
        f"lru_clock:{int(now) & ((1 << 24) - 1)}",
        "executable:" + os.path.abspath(sys.argv[0] if sys.argv and sys.argv[0] else sys.executable),
        "config_file:",
        "io_threads_active:0",
        "respqueue_version:" + __version__,
    ]


def _sec_clients(server: Any) -> list[str]:
    blocked = 0
    for cl in server.clients.values():
        if getattr(cl, "blocked", None) is not None:
            blocked += 1
    return [
        f"connected_clients:{len(server.clients)}",
        "cluster_connections:0",
        f"maxclients:{server.config.maxclients}",
        "client_recent_max_input_buffer:0",
        "client_recent_max_output_buffer:0",
        f"blocked_clients:{blocked}",
        "tracking_clients:0",
        f"clients_in_timeout_table:{blocked}",
    ]


def _sec_memory(server: Any) -> list[str]:
    rss = used = _rss_bytes()
    guard = getattr(server, "mem_guard", None)
    if guard is not None:
        used = guard.used()  # with maxmemory set: the tracked estimate that is enforced (memory.py)
    peak = max(getattr(server, "used_memory_peak", 0), used)
    server.used_memory_peak = peak
    maxmem = int(get_config(server, "maxmemory"))
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 0
    scripting = server.scripting
    lua_mem = scripting.memory() if scripting is not None else 0
    lua_scripts = len(scripting.cache) if scripting is not None else 0
    return [
        f"used_memory:{used}",
        "used_memory_human:" + bytes_to_human(used),
        f"used_memory_rss:{rss}",
        "used_memory_rss_human:" + bytes_to_human(rss),
        f"used_memory_peak:{peak}",
        "used_memory_peak_human:" + bytes_to_human(peak),
        f"used_memory_peak_perc:{100.0 * used / peak if peak else 100.0:.2f}%",
        "used_memory_overhead:0",
        "used_memory_startup:0",
        f"used_memory_dataset:{used}",
        "used_memory_dataset_perc:100.00%",
        f"total_system_memory:{total}",
        "total_system_memory_human:" + bytes_to_human(total),
        f"used_memory_lua:{lua_mem}",
        f"used_memory_scripts:{lua_mem}",
        f"number_of_cached_scripts:{lua_scripts}",
        f"maxmemory:{maxmem}",
        "maxmemory_human:" + bytes_to_human(maxmem),
        "maxmemory_policy:" + get_config(server, "maxmemory-policy"),
        "mem_fragmentation_ratio:1.00",
        "mem_fragmentation_bytes:0",  # used_memory is the RSS: no fragmentation to report (redis_exporter)
        f"allocator_allocated:{used}",
        f"allocator_active:{used}",
        f"allocator_resident:{used}",
        "active_defrag_running:0",
        f"heap_trims:{heap.trims}",  # (respqueue: the C heap's free pages given back, respqueue/heap.py)
        "mem_allocator:libc",
        "lazyfree_pending_objects:0",
        "lazyfreed_objects:0",
    ]


def _sec_persistence(server: Any) -> list[str]:
    bgsave_ok = getattr(server, "last_bgsave_ok", True)
    j = server.journal
    if j is not None:
        extra = [
            f"durability:{j.mode}",
            f"store_path:{j.store.path}",
            f"store_writer:{j.store.writer}",
            f"last_commit_ms:{j.last_commit_ms:.3f}",
            f"commits:{j.commits}",
            f"uncommitted_changes:{j.uncommitted()}",
            f"commit_errors:{j.commit_errors}",
            "store_status:" + ("ok" if server.write_refused is None else "err"),
        ]
        bgsave_ok = server.write_refused is None
    else:
        extra = ["durability:memory", "store_path:", "store_writer:none", "last_commit_ms:0", "commits:0", "uncommitted_changes:0", "commit_errors:0", "store_status:ok"]
    return [
        f"loading:{1 if getattr(server, 'loading', False) else 0}",
        "async_loading:0",
        "current_cow_peak:0",
        "current_cow_size:0",
        "current_cow_size_age:0",
        "current_fork_perc:0.00",
        "current_save_keys_processed:0",
        "current_save_keys_total:0",
        f"rdb_changes_since_last_save:{server.dirty}",
        "rdb_bgsave_in_progress:0",
        f"rdb_last_save_time:{server.lastsave}",
        "rdb_last_bgsave_status:" + ("ok" if bgsave_ok else "err"),
        "rdb_last_bgsave_time_sec:-1",
        "rdb_current_bgsave_time_sec:-1",
        f"rdb_saves:{getattr(server, 'rdb_saves', 0)}",
        "rdb_last_cow_size:0",
        f"rdb_last_load_keys_expired:{getattr(server, 'loaded_expired', 0)}",
        f"rdb_last_load_keys_loaded:{getattr(server, 'loaded_keys', 0)}",
        f"aof_enabled:{1 if get_config(server, 'appendonly') == 'yes' else 0}",
        "aof_rewrite_in_progress:0",
        "aof_rewrite_scheduled:0",
        "aof_last_rewrite_time_sec:-1",
        "aof_current_rewrite_time_sec:-1",
        "aof_last_bgrewrite_status:ok",
        "aof_rewrites:0",
        "aof_rewrites_consecutive_failures:0",
        "aof_last_write_status:ok",
        "aof_last_cow_size:0",
        "module_fork_in_progress:0",
        "module_fork_last_cow_size:0",
    ] + extra


def _sec_stats(server: Any) -> list[str]:
    errs = getattr(server, "errorstats", None)
    total_errors = sum(errs.values()) if isinstance(errs, dict) else 0
    return [
        f"total_connections_received:{server.stats_connections_received}",
        f"total_commands_processed:{server.stats_commands}",
        f"instantaneous_ops_per_sec:{_ops_per_sec(server)}",
        "total_net_input_bytes:0",
        "total_net_output_bytes:0",
        "total_net_repl_input_bytes:0",
        "total_net_repl_output_bytes:0",
        "instantaneous_input_kbps:0.00",
        "instantaneous_output_kbps:0.00",
        "instantaneous_input_repl_kbps:0.00",
        "instantaneous_output_repl_kbps:0.00",
        f"rejected_connections:{server.stats_rejected_connections}",
        "sync_full:0",
        "sync_partial_ok:0",
        "sync_partial_err:0",
        f"expired_keys:{server.stats_expired_keys}",
        "expired_stale_perc:0.00",
        "expired_time_cap_reached_count:0",
        "expire_cycle_cpu_milliseconds:0",
        f"evicted_keys:{getattr(server, 'stats_evicted_keys', 0)}",
        "evicted_clients:0",
        "total_eviction_exceeded_time:0",
        "current_eviction_exceeded_time:0",
        f"keyspace_hits:{server.stats_keyspace_hits}",
        f"keyspace_misses:{server.stats_keyspace_misses}",
        f"pubsub_channels:{len(server.pubsub_channels)}",
        f"pubsub_patterns:{len(server.pubsub_patterns)}",
        "pubsubshard_channels:0",
        "latest_fork_usec:0",
        "total_forks:0",
        "migrate_cached_sockets:0",
        "slave_expires_tracked_keys:0",
        "active_defrag_hits:0",
        "active_defrag_misses:0",
        "active_defrag_key_hits:0",
        "active_defrag_key_misses:0",
        "total_active_defrag_time:0",
        "current_active_defrag_time:0",
        "tracking_total_keys:0",
        "tracking_total_items:0",
        "tracking_total_prefixes:0",
        "unexpected_error_replies:0",
        f"total_error_replies:{total_errors}",
        f"client_output_buffer_limit_disconnections:{getattr(server, 'stats_obl_disconnections', 0)}",
        "dump_payload_sanitizations:0",
        "total_reads_processed:0",
        "total_writes_processed:0",
        "io_threaded_reads_processed:0",
        "io_threaded_writes_processed:0",
        "reply_buffer_shrinks:0",
        "reply_buffer_expands:0",
    ]


def _ops_per_sec(server: Any) -> int:
    """Commands per second since the previous sample (taken at most once a second)."""
    now = time.monotonic()
    prev = getattr(server, "ops_sample", None)
    cur = (now, server.stats_commands)
    if prev is None:
        server.ops_sample = cur
        server.ops_rate = 0
        return 0
    dt = now - prev[0]
    if dt >= 1.0:
        server.ops_rate = int(max(0, cur[1] - prev[1]) / dt) if dt < 60 else 0
        server.ops_sample = cur
    return getattr(server, "ops_rate", 0)


def _sec_replication(server: Any) -> list[str]:
    if server.repl is not None:
        from ..replication.commands import info_lines

        return info_lines(server)
    return [
        "role:master",
        "connected_slaves:0",
        "master_failover_state:no-failover",
        "master_replid:" + _master_replid(server),
        "master_replid2:0000000000000000000000000000000000000000",
        "master_repl_offset:0",
        "second_repl_offset:-1",
        "repl_backlog_active:0",
        "repl_backlog_size:1048576",
        "repl_backlog_first_byte_offset:0",
        "repl_backlog_histlen:0",
    ]


def _sec_cpu(server: Any) -> list[str]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        f"used_cpu_sys:{ru.ru_stime:.6f}",
        f"used_cpu_user:{ru.ru_utime:.6f}",
        f"used_cpu_sys_children:{ch.ru_stime:.6f}",
        f"used_cpu_user_children:{ch.ru_utime:.6f}",
        f"used_cpu_sys_main_thread:{ru.ru_stime:.6f}",
        f"used_cpu_user_main_thread:{ru.ru_utime:.6f}",
    ]


def _sec_commandstats(server: Any) -> list[str]:
    out = []
    for cmd in _all_commands():
        if cmd.parent is _COMMAND_CMD and cmd.name == "count":
            # bare COMMAND: the container's own calls, less those of its subcommands
            bare = _bare_command_stats()
            if bare is not None:
                out.append(bare)
        if not (cmd.calls or cmd.failed_calls or cmd.rejected_calls):
            continue
        per_call = cmd.usec / cmd.calls if cmd.calls else 0.0
        out.append(
            f"cmdstat_{cmd.fullname}:calls={cmd.calls},usec={cmd.usec},usec_per_call={per_call:.2f},"
            f"rejected_calls={cmd.rejected_calls},failed_calls={cmd.failed_calls}"
        )
    return out


def _bare_command_stats() -> str | None:
    assert _COMMAND_CMD is not None
    subs = _COMMAND_SUBS.values()
    calls = _COMMAND_CMD.calls - sum(x.calls + x.rejected_calls for x in subs)
    failed = _COMMAND_CMD.failed_calls - sum(x.failed_calls + x.rejected_calls for x in subs)
    if calls <= 0:
        return None
    return (
        f"cmdstat_command:calls={calls},usec=0,usec_per_call=0.00,"
        f"rejected_calls={_COMMAND_CMD.rejected_calls},failed_calls={max(failed, 0)}"
    )


def _sec_errorstats(server: Any) -> list[str]:
    errs = getattr(server, "errorstats", None)
    if not isinstance(errs, dict):
        return []
    return [f"errorstat_{k.decode() if isinstance(k, bytes) else k}:count={v}" for k, v in errs.items()]


def _sec_keyspace(server: Any) -> list[str]:
    out = []
    for db in server.dbs:
        if db.data:
            out.append(f"db{db.index}:keys={len(db.data)},expires={len(db.expires)},avg_ttl={db.avg_ttl}")
    return out


_SECTION_FUNCS: dict[str, Any] = {
    "server": _sec_server,
    "clients": _sec_clients,
    "memory": _sec_memory,
    "persistence": _sec_persistence,
    "stats": _sec_stats,
    "replication": _sec_replication,
    "cpu": _sec_cpu,
    "modules": lambda s: [],
    "commandstats": _sec_commandstats,
    "errorstats": _sec_errorstats,
    "latencystats": lambda s: [],
    "cluster": lambda s: ["cluster_enabled:%d" % (s.cluster is not None)],
    "keyspace": _sec_keyspace,
}


def info_text(server: Any, sections: list[bytes] | None = None) -> bytes:
    """The INFO reply for ``sections`` (None: the default sections)."""
    wanted: set[str] = set()
    if not sections:
        wanted.update(DEFAULT_SECTIONS)
    for s in sections or ():
        name = s.decode("latin-1").lower()
        if name == "default":
            wanted.update(DEFAULT_SECTIONS)
        elif name in ("all", "everything"):
            wanted.update(ALL_SECTIONS)
        elif name in _SECTION_FUNCS:
            wanted.add(name)
    parts = []
    for name in ALL_SECTIONS:
        if name in wanted:
            lines = _SECTION_FUNCS[name](server)
            parts.append("# " + _TITLES[name] + "\r\n" + "".join(line + "\r\n" for line in lines))
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


@command("info", -1, "loading stale", group="server")
def info(c: Any, argv: list[bytes]) -> Any:
    return Verbatim(info_text(c.server, argv[1:]))
