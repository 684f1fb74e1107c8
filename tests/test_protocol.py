"""The wire protocol, byte for byte against redis-server: pipelining, inline
requests, RESP3, protocol errors, QUIT and backpressure."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import hiredis
import pytest

from .servers import RawConn, encode_command, start_redis, start_respqueue


def exchange(
    port: int,
    chunks: Sequence[bytes],
    *,
    expect: bytes | None = None,
    expect_close: bool | None = None,
    quiet: float = 0.3,
    deadline: float = 8.0,
    gap: float = 0.02,
    unix: str | None = None,
) -> tuple[bytes, bool]:
    """Send ``chunks`` (pausing ``gap`` between them) and collect what comes back.

    Returns (bytes received, whether the server closed the connection). Reading
    stops when the server closes, or after ``quiet`` seconds of silence once the
    ``expect``-ed number of bytes (and the close, if ``expect_close``) arrived,
    or at ``deadline``.
    """
    if unix is not None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(unix)
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=deadline)
    out = bytearray()
    closed = False
    try:
        for i, c in enumerate(chunks):
            if i and gap:
                time.sleep(gap)
            try:
                s.sendall(c)
            except OSError:
                break
        end = time.time() + deadline
        want = len(expect) if expect is not None else 0
        while time.time() < end:
            enough = len(out) >= want and not expect_close
            s.settimeout(quiet if enough else max(0.05, end - time.time()))
            try:
                d = s.recv(1 << 16)
            except TimeoutError:
                if enough:
                    break
                continue
            except ConnectionResetError:
                closed = True
                break
            if not d:
                closed = True
                break
            out += d
    finally:
        s.close()
    return bytes(out), closed


def compare_many(ref_port: int, rq_port: int, cases: Sequence[Sequence[bytes]], quiet: float = 0.3) -> list[str]:
    """Run every case on both servers in parallel; describe the differences."""

    def one(chunks: Sequence[bytes]) -> str | None:
        want = exchange(ref_port, chunks, quiet=quiet)
        got = exchange(rq_port, chunks, expect=want[0], expect_close=want[1], quiet=quiet)
        if got != want:
            return f"{list(chunks)!r}:\n   redis: {want!r}\n   respqueue: {got!r}"
        return None

    with ThreadPoolExecutor(max_workers=16) as ex:
        return [d for d in ex.map(one, cases) if d is not None]


# ---- pipelining ------------------------------------------------------------


def _read_n(conn: RawConn, n: int) -> list[bytes]:
    return [conn.read_raw() for _ in range(n)]


def test_pipeline_thousands_in_one_write(rq_server, redis_ref):
    cmds = []
    for i in range(5000):
        cmds.append(("SET", f"k{i % 50}", str(i)))
        cmds.append(("INCR", "counter"))
        cmds.append(("GET", f"k{(i * 7) % 50}"))
    payload = b"".join(encode_command(c) for c in cmds)
    replies = {}
    for name, port in (("rq", rq_server.port), ("ref", redis_ref.port)):
        conn = RawConn(port, timeout=30)
        conn.call_raw("FLUSHALL")
        conn.send_raw(payload)
        replies[name] = _read_n(conn, len(cmds))
        assert conn.call_raw("PING") == b"+PONG\r\n"
        conn.close()
    assert len(replies["rq"]) == len(cmds)
    assert replies["rq"] == replies["ref"]
    assert replies["rq"][-2] == b":5000\r\n"


def test_pipeline_split_at_every_byte(rq_server, redis_ref):
    payload = encode_command(("SET", "split", "a\r\nb")) + encode_command(("GET", "split")) + b"PING\r\n"
    for port in (rq_server.port, redis_ref.port):
        got, closed = exchange(port, [payload[i : i + 1] for i in range(len(payload))], gap=0.001,
                               expect=b"+OK\r\n$4\r\na\r\nb\r\n+PONG\r\n")
        assert got == b"+OK\r\n$4\r\na\r\nb\r\n+PONG\r\n" and not closed


# ---- inline requests and odd input: same bytes as Redis ---------------------
CASES: list[list[bytes]] = [
    [b"PING\r\n"],
    [b"PING\n"],
    [b"ping hello\r\n"],
    [b"SET k \"a b\"\r\nGET k\r\n"],
    [b"SET k \"a\\x41\\n\\t\\\\\"\r\nGET k\r\n"],
    [b"SET k 'it\\'s'\r\nGET k\r\n"],
    [b"ECHO \"a\\\"b\"\r\n"],
    [b"ECHO 'a\"b'\r\n"],
    [b"ECHO \"\\x4\"\r\n"],
    [b"ECHO \"\"\r\n"],
    [b"ECHO a\tb\r\n"],
    [b"\r\n\r\nPING\r\n"],
    [b"   \r\nPING   \r\n"],
    [b"\n\n\nPING\r\n"],
    [b"PING\rPING\r\n"],
    [b"PING\n\rPING\n"],
    [b"PING\r\n*1\r\n$4\r\nPING\r\nPING\r\n"],
    [b"*1\r\n$4\r\nPING\r\n\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n"],
    [b"*2\r\n$4\r\nECHO\r\n$1\r\nab\r\n"],
    [b"*1\r\n$4\r\nPINGxx"],
    [b"*1\r\n$4\r\r\nPING\r\n"],
    [b"SET k \"a", b" b\"\r\nGET k\r\n"],
    [b"PI", b"NG\r\n"],
    [b"*1\r\n$4\r\nPING\r\nEC", b"HO hi\r\n"],
    [b"*0\r\nPING\r\n"],
    [b"*-1\r\nPING\r\n"],
    [b"*-5\r\nPING\r\n"],
    [b"$4\r\nPING\r\n"],
    [b":1\r\n"],
    [b"+PING\r\n"],
    [b"-ERR\r\n"],
    [b"NOSUCH a b\r\n"],
    [b"PING\x00\r\nPING\r\n"],
    [b"*1\r\n$4\r\nPING\r\nECHO a\x00\r\n"],
    [b"QUIT\r\nPING\r\n"],
    [b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n"],
    # protocol errors: an error reply, then the connection closes
    [b"*x\r\n"],
    [b"*\r\n"],
    [b"*+1\r\n"],
    [b"* 1\r\n"],
    [b"*1 \r\n"],
    [b"*01\r\n$4\r\nPING\r\n"],
    [b"*-0\r\nPING\r\n"],
    [b"*2147483648\r\n"],
    [b"*99999999999999999999\r\n"],
    [b"*1\n$4\r\nPING\r\n"],
    [b"*1\r\n$x\r\n"],
    [b"*1\r\n$\r\n"],
    [b"*1\r\n$-1\r\n"],
    [b"*1\r\n$-0\r\n"],
    [b"*1\r\n$+1\r\na\r\n"],
    [b"*1\r\n$04\r\nPING\r\n"],
    [b"*1\r\n$ 4\r\nPING\r\n"],
    [b"*1\r\n$4\nPING\r\n"],
    [b"*1\r\n$600000000\r\n"],
    [b"*1\r\n$536870913\r\n"],
    [b"*1\r\n$2147483648\r\n"],
    [b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$600000000\r\n"],
    [b"*1\r\nx\r\n"],
    [b"*2\r\n$4\r\nPING\r\n:1\r\n"],
    [b"*2\r\n$4\r\nECHO\r\n*1\r\n$1\r\na\r\n"],
    [b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n"],
    [b"*1\r\n$4\r\nPING\r\n*1\r\n$600000000\r\n"],
    [b"PING\r\n*1\r\nx\r\n"],
    [b"SET k \"a b\r\n"],
    [b"SET k 'a\r\n"],
    [b"ECHO \"a\"b\r\n"],
    [b"ECHO a\"b\r\n"],
    [b"ECHO \"\\\r\n"],
    [b"P" * 70000],
    [b"*" + b"1" * 70000],
    [b"*1\r\n$" + b"1" * 70000],
    [b"*1\r\n$4\r\nPING\r\n" + b"X" * 70000],
]


def test_inline_and_odd_requests_match_redis(rq_server, redis_ref):
    diffs = compare_many(redis_ref.port, rq_server.port, CASES)
    assert not diffs, "\n".join(diffs)


def test_non_bulk_arguments_match_redis(rq_server, redis_ref):
    """A request whose arguments are not all bulk strings is a protocol error, wherever the fast path checks it:
    the first request of a read, a request after a run of EVALSHAs (collected for a runner), and a request
    read after more than 1 MiB of input (checked argument by argument instead of with ``b"".join``)."""
    sha = b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db"  # return 1
    evalsha = encode_command(("EVALSHA", sha, "0"))
    load = encode_command(("SCRIPT", "LOAD", "return 1"))
    odd_run = b"*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n:0\r\n"
    big = encode_command(("SET", "big", "x" * ((1 << 20) + 100)))
    cases = [
        [b"*2\r\n$3\r\nGET\r\n:1\r\n"],
        [b"*2\r\n$3\r\nGET\r\n_\r\n"],
        [b"*2\r\n$4\r\nECHO\r\n*1\r\n$1\r\na\r\n"],
        [load + evalsha + evalsha + evalsha + odd_run + evalsha],
        [load + evalsha + evalsha + b"*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n#t\r\n"],
        [big + b"*2\r\n$3\r\nGET\r\n:1\r\n"],
        [big + encode_command(("GET", "x")) + b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n,1.5\r\n"],
        [big + load + evalsha + evalsha + odd_run],
    ]
    diffs = compare_many(redis_ref.port, rq_server.port, cases, quiet=1.0)
    assert not diffs, "\n".join(d[:600] for d in diffs)


def test_unauthenticated_limits_match_redis():
    ref = start_redis("--requirepass", "pw")
    rq = start_respqueue("--requirepass", "pw")
    try:
        cases = [
            [b"*11\r\n"],
            [b"*10\r\n"],
            [b"*1\r\n$16385\r\n"],
            [b"*1\r\n$16384\r\n"],
            [b"*2\r\n$4\r\nECHO\r\n$16385\r\n"],
            [b"PING\r\n"],
            [b"AUTH pw\r\n*1\r\n$16385\r\n"],
            [b"AUTH wrong\r\nPING\r\n"],
            [b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$1\r\nb\r\n"],
            [encode_command(("AUTH", "pw")) + encode_command(("ECHO", "x" * 20000))],
        ]
        diffs = compare_many(ref.port, rq.port, cases)
        assert not diffs, "\n".join(diffs)
    finally:
        ref.stop()
        rq.stop()


def test_protocol_error_closes_only_that_connection(rq_server):
    healthy = RawConn(rq_server.port)
    assert healthy.call_raw("SET", "alive", "1") == b"+OK\r\n"
    for bad in (b"*x\r\n", b"*1\r\n$600000000\r\n", b"SET k \"oops\r\n", b"*1\r\n:1\r\n"):
        got, closed = exchange(rq_server.port, [bad], expect_close=True)
        assert got.startswith(b"-ERR Protocol error: ") and closed, (bad, got, closed)
        assert healthy.call_raw("GET", "alive") == b"$1\r\n1\r\n"
    healthy.close()


def test_quit_replies_ok_then_closes(rq_server):
    for req in (b"QUIT\r\n", encode_command(("QUIT",)), encode_command(("QUIT",)) + encode_command(("SET", "q", "1"))):
        got, closed = exchange(rq_server.port, [req], expect_close=True)
        assert got == b"+OK\r\n" and closed
    c = RawConn(rq_server.port)
    assert c.call_raw("EXISTS", "q") == b":0\r\n"
    c.close()


# ---- RESP3 ------------------------------------------------------------------
def _mask_version(b: bytes) -> bytes:
    import re

    return re.sub(rb"\$5\r\nversion\r\n\$\d+\r\n[0-9.]+\r\n", b"$5\r\nversion\r\n$V\r\nV\r\n", b)


def test_hello3_map_reply_and_nulls(rq_server, redis_ref):
    rq, ref = RawConn(rq_server.port), RawConn(redis_ref.port)
    a, b = rq.call_raw("HELLO", "3"), ref.call_raw("HELLO", "3")
    assert a.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n")

    def fields(x: bytes) -> bytes:
        import re

        x = re.sub(rb"\$7\r\nversion\r\n\$\d+\r\n[0-9.]+\r\n", b"", x)
        return re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"", x)

    assert fields(a) == fields(b)
    for cmd in (("GET", "nokey"), ("HELLO", "4"), ("HELLO", "x"), ("HELLO", "3", "SETNAME", "a b"),
                ("HELLO", "3", "FOO"), ("CLIENT", "GETNAME"), ("MGET", "a", "b")):
        assert rq.call_raw(*cmd) == ref.call_raw(*cmd), cmd
    assert rq.call_raw("GET", "nokey") == b"_\r\n"
    # back to RESP2
    a, b = rq.call_raw("HELLO", "2"), ref.call_raw("HELLO", "2")
    assert a.startswith(b"*14\r\n") and b.startswith(b"*14\r\n")
    assert rq.call_raw("GET", "nokey") == b"$-1\r\n"
    rq.close()
    ref.close()


def test_resp3_doubles_encoding():
    from respqueue.resp import encode_one

    assert encode_one(1.5, resp3=True) == b",1.5\r\n"
    assert encode_one(1.5) == b"$3\r\n1.5\r\n"
    assert encode_one(float("inf"), resp3=True) == b",inf\r\n"
    assert encode_one(float("-inf"), resp3=True) == b",-inf\r\n"
    assert encode_one(0.1, resp3=True) == b",0.10000000000000001\r\n"
    assert encode_one(None, resp3=True) == b"_\r\n"
    assert encode_one({b"a": 1}, resp3=True) == b"%1\r\n$1\r\na\r\n:1\r\n"
    assert encode_one(True, resp3=True) == b"#t\r\n"


def test_resp3_hello_setname_and_client_info(rq_server):
    c = RawConn(rq_server.port)
    r = c.call_raw("HELLO", "3", "SETNAME", "myname")
    assert r.startswith(b"%7\r\n") and b"$5\r\nproto\r\n:3\r\n" in r
    assert c.call_raw("CLIENT", "GETNAME") == b"$6\r\nmyname\r\n"
    info = c.call_raw("CLIENT", "INFO")
    assert info.startswith(b"=") and b"name=myname" in info and b"resp=3" in info
    c.close()


# ---- backpressure --------------------------------------------------------------
def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_client_not_reading_does_not_stall_others(rq_server):
    setup = RawConn(rq_server.port)
    setup.call_raw("SET", "big", "x" * 100_000)
    rss0 = _rss_mb(rq_server.proc.pid)
    hog = socket.create_connection(("127.0.0.1", rq_server.port))
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.settimeout(0.5)
    req = encode_command(("GET", "big")) * 200
    sent = 0
    t_end = time.time() + 3
    # push ~1 GB worth of replies' requests without reading; the server must
    # stop reading from us (our sends eventually block) and stay responsive
    while time.time() < t_end:
        try:
            hog.send(req)
            sent += 1
        except (TimeoutError, BlockingIOError):
            break
    # had the server kept reading, its output buffer would hold sent*200 replies
    # of 100 kB (gigabytes); it must have paused reading at a few MB instead
    assert _rss_mb(rq_server.proc.pid) < rss0 + 300, (sent, _rss_mb(rq_server.proc.pid), rss0)
    for _ in range(20):
        t0 = time.time()
        assert setup.call_raw("PING") == b"+PONG\r\n"
        assert time.time() - t0 < 1.0
    hog.close()
    setup.close()


# ---- fast (hiredis) and exact parsers taking turns ------------------------------------
def _roundtrip(port: int, payload: bytes, n: int, chunk: int = 0) -> list[bytes]:
    c = RawConn(port, timeout=30)
    if chunk:
        for i in range(0, len(payload), chunk):
            c.send_raw(payload[i : i + chunk])
    else:
        c.send_raw(payload)
    out = _read_n(c, n)
    assert c.call_raw("PING") == b"+PONG\r\n"
    c.close()
    return out


@pytest.mark.parametrize("chunk", [0, 1000, 65536])
def test_mixed_inline_multibulk_and_big_values(rq_server, redis_ref, chunk):
    tricky = b"x\n*12345678\r\n>99999999\n%1000000|1234567" * 3
    parts = [
        b"FLUSHALL\r\n",
        encode_command(("SET", "t", tricky)),
        b"GET t\r\n",
        encode_command(("SET", "big", b"y" * 300_000 + b"\n*2147483647\r\n" + b"z" * 100)),
        encode_command(("STRLEN", "big")),
        b"SET inl \"a b\"\r\n",
        encode_command(("GET", "inl")),
        b"*1\r\n$4\r\nPING\r\n" * 50,
        b"ECHO 'x y'\r\n" * 20,
        encode_command(("APPEND", "big", "!")),
        encode_command(("GETRANGE", "big", "-3", "-1")),
    ]
    n = 7 + 50 + 20 + 2
    payload = b"".join(parts)
    assert _roundtrip(rq_server.port, payload, n, chunk) == _roundtrip(redis_ref.port, payload, n, chunk)


def test_large_pipeline_of_big_requests(rq_server, redis_ref):
    cmds = [("SET", f"k{i}", (b"%d" % i) * 5000) for i in range(200)] + [("STRLEN", f"k{i}") for i in range(200)]
    payload = b"".join(encode_command(c) for c in cmds)
    for chunk in (0, 7919):
        assert _roundtrip(rq_server.port, payload, len(cmds), chunk) == _roundtrip(redis_ref.port, payload, len(cmds), chunk)


def test_long_pipeline_blocked_midway_then_protocol_error(rq_server, redis_ref):
    """A long read (~80 KiB of requests): a BLPOP that blocks midway (the rest of the read waits while more
    input arrives), a run of same-command requests after it, and a protocol error at the very end."""
    head = b"".join(encode_command(("SET", f"p{i}", b"v" * (i % 300))) for i in range(400))
    mid = encode_command(("BLPOP", "pq", "0"))
    tail = b"".join(encode_command(("INCRBY", "pc", str(i))) for i in range(600)) + b"ECHO 'in line'\r\n"
    tail += b"".join(encode_command(("GET", f"p{i}")) for i in range(0, 400, 7))
    later = encode_command(("STRLEN", "p299")) + b"*1\r\n$x\r\n"
    results = []
    for port in (rq_server.port, redis_ref.port):
        b = RawConn(port)
        b.call_raw("FLUSHALL")
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(head + mid + tail)
        time.sleep(0.3)
        s.sendall(later)  # arrives while blocked
        time.sleep(0.1)
        assert b.call_raw("RPUSH", "pq", "x") == b":1\r\n"
        out = bytearray()
        while True:
            try:
                d = s.recv(1 << 16)
            except (TimeoutError, ConnectionResetError):
                break
            if not d:
                break
            out += d
        s.close()
        b.close()
        results.append(bytes(out))
    assert len(head + mid + tail) > 4 * 16 * 1024
    assert results[0] == results[1]
    assert results[0].endswith(b"-ERR Protocol error: invalid bulk length\r\n")


def test_resp3_replies_match_redis(diff3):
    diff3("SET", "k", "v")
    diff3("GET", "k")
    diff3("GET", "nokey")
    diff3("MGET", "k", "nokey")
    diff3("INCRBYFLOAT", "f", "1.5")
    diff3("TTL", "k")
    diff3("TYPE", "k")
    diff3("EXISTS", "k")
    diff3("SET", "k", "v", "NX")
    diff3("SET", "k", "v", "XX", "GET")
    diff3("GETEX", "nokey")
    diff3("ZADD", "z", "1.5", "a", "2", "b")
    diff3("ZSCORE", "z", "a")
    diff3("ZSCORE", "z", "nokey")
    diff3("ZINCRBY", "z", "0.1", "b")
    diff3("ZRANGE", "z", "0", "-1", "WITHSCORES")
    a, b = diff3.both("SCAN", "0", "COUNT", "100")
    pa, pb = hiredis.Reader(), hiredis.Reader()
    pa.feed(a)
    pb.feed(b)
    ra, rb = pa.gets(), pb.gets()
    assert ra[0] == rb[0] == b"0" and sorted(ra[1]) == sorted(rb[1])
    diff3("OBJECT", "HELP")
    diff3("ECHO", "x")
    diff3("PING")
    diff3("NOSUCH")
    a, b = diff3.both("CLIENT", "INFO")
    assert a.startswith(b"=") and b.startswith(b"=")


@pytest.mark.parametrize("inline", [True, False])
def test_blocked_client_resumes_its_pipeline(rq_server, redis_ref, inline):
    if inline:
        payload = b"BLPOP bq 0\r\nPING\r\nECHO \"x y\"\r\n"
    else:
        payload = encode_command(("BLPOP", "bq", "0")) + encode_command(("PING",)) + encode_command(("ECHO", "x y"))
    results = []
    for port in (rq_server.port, redis_ref.port):
        a, b = RawConn(port), RawConn(port)
        b.call_raw("DEL", "bq")
        a.send_raw(payload)
        time.sleep(0.2)
        a.send_raw(b"ECHO late\r\n")  # arrives while blocked
        time.sleep(0.1)
        assert b.call_raw("RPUSH", "bq", "v") == b":1\r\n"
        results.append(_read_n(a, 4))
        a.close()
        b.close()
    assert results[0] == results[1]
    assert results[0][1] == b"+PONG\r\n"


def test_alternating_inline_and_multibulk_many_times(rq_server):
    # each alternation hands the input from one parser to the other
    payload = (b"PING\r\n" + encode_command(("PING",))) * 3000
    want = b"+PONG\r\n" * 6000
    got, closed = exchange(rq_server.port, [payload], expect=want, quiet=0.5)
    assert got == want and not closed


def test_pipeline_split_after_complete_requests(rq_server):
    """Complete requests, then a request cut at any byte (e.g. right after its '*'):
    the cut request still parses (the read ending in an aggregate header used to
    lose that header when the exact parser took over)."""
    cmd = b"*3\r\n$3\r\nSET\r\n$2\r\nxx\r\n$1\r\n1\r\n"
    bad = []
    for cut in range(1, len(cmd)):
        s = socket.create_connection(("127.0.0.1", rq_server.port))
        try:
            s.sendall(cmd * 3 + cmd[:cut])
            time.sleep(0.03)
            s.sendall(cmd[cut:] + cmd)
            want = b"+OK\r\n" * 5
            got = b""
            s.settimeout(5)
            while len(got) < len(want):
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            if got != want:
                bad.append((cut, got))
        finally:
            s.close()
    assert bad == []


# ---- the scan of a read for big aggregate headers ------------------------------------
def _big_by_regex(data: bytes) -> bool:
    import re

    return re.search(rb"\n[*~>|][0-9]{7}", data) is not None


@pytest.mark.parametrize("seed", range(3))
def test_big_aggregate_scan_matches_its_regex(seed: int) -> None:
    """protocol.big_aggregate_in finds what the regex it replaces finds (a header of 7+ digits that starts a
    line), over reads made of the bytes that matter: marks, newlines, digits, the edges of the read."""
    import random

    from respqueue.protocol import big_aggregate_in

    rng = random.Random(seed)
    alphabet = b"*~>|\n\r0123456789$x"
    fixed = [b"", b"\n", b"\n*", b"\n*123456", b"\n*1234567", b"*1234567", b"x\n*1234567", b"\n*12345678",
             b"\n~1234567\r\n", b"\n>0000000", b"\n|9999999", b"\n*123456x7", b"\r*1234567", b"\n**1234567",
             b"\n*\n*1234567", b"\n$1234567", b"\n*1\r\n$4\r\nPING\r\n*2147483648\r\n"]
    # reads dense with marks, past the count the scan checks one by one (then the regex decides)
    dense = [b"*" * 5000, b"*" * 5000 + b"\n*1234567", b"\n*1234567" + b"|" * 5000, b"x*" * 200 + b"\n~1234567",
             b"\n*123456" * 300, b"\n*123456" * 300 + b"7"]
    cases = fixed + dense + [bytes(rng.choice(alphabet) for _ in range(rng.randrange(40))) for _ in range(20000)]
    cases += [bytes(rng.choice(alphabet) for _ in range(rng.randrange(100, 600))) for _ in range(500)]
    for data in cases:
        assert big_aggregate_in(data) == _big_by_regex(data), data
