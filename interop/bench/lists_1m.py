"""List operations on a 1M-element list: respqueue vs redis-server, plus the bare container.

    python -m interop.bench.lists_1m [-n 1000000] [--reps 20]

The shape is BullMQ's: ``wait`` holds job ids pushed on the left and moved
from the right into ``active``; finished jobs leave ``active`` with
``LREM active -1 <id>``; ``LPOS wait <id>`` looks a job up. Reports the median
latency per command (one request at a time, over TCP) for both servers, and
the container-level cost without the network.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from collections.abc import Callable

import hiredis

from .common import ROOT, machine, start_redis, start_respqueue


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def call(self, *args: bytes | str) -> object:
        return self.pipeline([args])[0]

    def pipeline(self, cmds: list[tuple[bytes | str, ...]]) -> list[object]:
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                b = a.encode() if isinstance(a, str) else a
                out.append(b"$%d\r\n%b\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        replies: list[object] = []
        while len(replies) < len(cmds):
            r = self.reader.gets()
            if r is False:
                self.reader.feed(self.sock.recv(1 << 20))
                continue
            replies.append(r)
        return replies


def fill(conn: Conn, key: str, n: int) -> None:
    batch = 10000
    for start in range(0, n, batch):
        ids = [b"%d" % i for i in range(start, min(n, start + batch))]
        conn.call("RPUSH", key, *ids)


def cases(n: int) -> list[tuple[str, Callable[[int], tuple[bytes | str, ...]], Callable[[int], tuple[bytes | str, ...]] | None]]:
    """(label, command for rep i, undo command for rep i or None)."""
    near_tail = n - 5
    return [
        ("LPUSH wait <new>", lambda i: ("LPUSH", "wait", b"new%d" % i), lambda i: ("LPOP", "wait")),
        ("RPOPLPUSH wait active", lambda i: ("RPOPLPUSH", "wait", "active"), lambda i: ("RPOPLPUSH", "active", "wait")),
        ("LREM wait -1 <id near tail>", lambda i: ("LREM", "wait", "-1", b"%d" % near_tail), lambda i: ("RPUSH", "wait", b"%d" % near_tail)),
        ("LREM wait 1 <id near head>", lambda i: ("LREM", "wait", "1", b"%d" % 3), lambda i: ("LPUSH", "wait", b"3")),
        ("LREM wait -1 <id in middle>", lambda i: ("LREM", "wait", "-1", b"%d" % (n // 2)), lambda i: ("LINSERT", "wait", "BEFORE", b"%d" % (n // 2 + 1), b"%d" % (n // 2))),
        ("LREM wait -1 <absent> (full scan)", lambda i: ("LREM", "wait", "-1", "absent"), None),
        ("LPOS wait <id near head>", lambda i: ("LPOS", "wait", b"10"), None),
        ("LPOS wait <id in middle>", lambda i: ("LPOS", "wait", b"%d" % (n // 2)), None),
        ("LPOS wait <id near tail> RANK -1", lambda i: ("LPOS", "wait", b"%d" % near_tail, "RANK", "-1"), None),
        ("LPOS wait <absent> (full scan)", lambda i: ("LPOS", "wait", "absent"), None),
        ("LINDEX wait -3", lambda i: ("LINDEX", "wait", "-3"), None),
        ("LINDEX wait <middle>", lambda i: ("LINDEX", "wait", b"%d" % (n // 2)), None),
        ("LRANGE wait -10 -1", lambda i: ("LRANGE", "wait", "-10", "-1"), None),
        ("LRANGE wait 0 9", lambda i: ("LRANGE", "wait", "0", "9"), None),
        ("LSET wait -2 x", lambda i: ("LSET", "wait", "-2", "x"), None),
        ("LLEN wait", lambda i: ("LLEN", "wait"), None),
    ]


def bench_server(name: str, port: int, n: int, reps: int) -> dict[str, float]:
    conn = Conn(port)
    conn.call("FLUSHALL")
    t = time.perf_counter()
    fill(conn, "wait", n)
    fill_s = time.perf_counter() - t
    assert conn.call("LLEN", "wait") == n
    results = {"fill, total (RPUSH x10000 batches)": fill_s * 1e6}
    for label, cmd, undo in cases(n):
        times = []
        for i in range(reps):
            t = time.perf_counter()
            r = conn.call(*cmd(i))
            times.append(time.perf_counter() - t)
            if isinstance(r, hiredis.ReplyError):
                raise RuntimeError(f"{name}: {cmd(i)!r}: {r}")
            if undo is not None:
                conn.call(*undo(i))
        results[label] = statistics.median(times) * 1e6
    return results


def bench_container(n: int, reps: int) -> dict[str, float]:
    sys.path.insert(0, ROOT)
    from respqueue.types.list import List

    lst = List(b"%d" % i for i in range(n))
    near_tail = b"%d" % (n - 5)
    mid = b"%d" % (n // 2)

    def timeit(fn: Callable[[], object]) -> float:
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e6

    out: dict[str, float] = {}

    def rem_tail() -> None:
        lst.remove(near_tail, -1)
        lst.push_one(near_tail, False)

    def rem_mid() -> None:
        lst.remove(mid, -1)
        lst.insert(b"%d" % (n // 2 + 1), mid, False)

    out["LREM -1 <id near tail> (+undo)"] = timeit(rem_tail)
    out["LREM -1 <id in middle> (+undo)"] = timeit(rem_mid)
    out["LREM -1 <absent>"] = timeit(lambda: lst.remove(b"absent", -1))
    out["LPOS <id in middle>"] = timeit(lambda: lst.positions(mid, 1, 1, 0, False))
    out["LPOS <id near tail> RANK -1"] = timeit(lambda: lst.positions(near_tail, 1, 1, 0, True))
    out["LPOS <absent>"] = timeit(lambda: lst.positions(b"absent", 1, 1, 0, False))
    out["LINDEX <middle>"] = timeit(lambda: lst.get(n // 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    print(f"# {machine()}; list of {args.n} ids; median latency in microseconds over {args.reps} calls")
    rq = start_respqueue()
    rd = start_redis()
    try:
        a = bench_server("respqueue", rq.port, args.n, args.reps)
        b = bench_server("redis", rd.port, args.n, args.reps)
    finally:
        rq.stop()
        rd.stop()
    print(f"{'command':40s} {'respqueue':>12s} {'redis':>12s} {'ratio':>8s}")
    for k in a:
        print(f"{k:40s} {a[k]:12.1f} {b[k]:12.1f} {a[k] / b[k]:8.2f}")
    print("\n# container only (no network), microseconds")
    for k, v in bench_container(args.n, args.reps).items():
        print(f"{k:40s} {v:12.1f}")


if __name__ == "__main__":
    main()
