"""Large strings in durable mode (not a test): what APPEND and SETRANGE cost, and what they cost others.

    python3 -m interop.bench.large_strings [--runs N]

Starts respqueue (durable, the default process writer) in a temporary directory and prints:
the time of APPEND of 10 bytes to a 50 MB string (median of --runs), the time of
SETRANGE big 536870911 x (a new key: a 512 MB string) and the longest PING round trip of
another client meanwhile (it pings every 5 ms), and the time of SETRANGE of 2 bytes inside that
512 MB string. See docs/STORAGE.md ("Large strings are stored in chunks") for the figures.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

import redis

from tests.servers import start_respqueue


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    p = start_respqueue(workdir=tempfile.mkdtemp(prefix="rq-bench-strings-"))
    try:
        r = redis.Redis(port=p.port, socket_timeout=300)
        r.set("s", b"a" * (50 << 20))
        ts = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            r.append("s", b"0123456789")
            ts.append(time.perf_counter() - t0)
        ts_ms = " ".join(f"{t * 1000:.0f}" for t in ts)
        print(f"APPEND 10 B to a 50 MB string: median {sorted(ts)[len(ts) // 2] * 1000:.1f} ms (runs: {ts_ms})")
        pings: list[float] = []
        stop = threading.Event()

        def pinger() -> None:
            r2 = redis.Redis(port=p.port, socket_timeout=300)
            r2.ping()
            while not stop.is_set():
                t0 = time.perf_counter()
                r2.ping()
                pings.append(time.perf_counter() - t0)
                time.sleep(0.005)
            r2.close()

        th = threading.Thread(target=pinger)
        th.start()
        time.sleep(0.3)
        t0 = time.perf_counter()
        r.setrange("big", 536870911, "x")
        took = time.perf_counter() - t0
        time.sleep(0.3)
        stop.set()
        th.join()
        print(f"SETRANGE big 536870911 x: {took:.2f} s; longest PING of another client {max(pings) * 1000:.0f} ms")
        t0 = time.perf_counter()
        r.setrange("big", 1000, "yz")
        print(f"SETRANGE of 2 B inside the 512 MB string: {(time.perf_counter() - t0) * 1000:.0f} ms")
        r.close()
    finally:
        p.stop()


if __name__ == "__main__":
    main()
