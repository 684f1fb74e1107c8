"""Small hashes packed by shape in the store (schema version 8, respqueue/types/hash.py's store shapes).

compat registers BullMQ's job hash field orders as store shapes (compat/engine/shapes.py): a job hash is
stored as msgpack ``[hashtable?, shape number, value, ...]`` instead of ``[hashtable?, {field: value}]``, the
store records the shapes in its meta row ``hash_shapes``, and a cold job keeps its row's bytes. Checked on a
real durable server: the row's form, the hash read back in its order after a restart, the recorded table, a
store whose table disagrees refused, and a process without the plug-in reading the rows by the recorded table.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile

import msgpack
import pytest
import redis

from compat.engine.shapes import job_shapes
from respqueue.types.hash import STORE_SHAPES_MAX

from .servers import ROOT, start_respqueue

JOB = {"name": "j", "data": '{"i":1}', "opts": '{"attempts":0}', "timestamp": "1795776469793", "delay": "0",
       "priority": "0"}
DONE = {**JOB, "processedOn": "1795776469800", "ats": "1", "atm": "1", "returnvalue": "null",
        "finishedOn": "1795776469900"}
OTHER = {"b": "2", "a": "1"}  # no store shape: stored with its names


def _row(datadir: str, key: bytes) -> bytes:
    conn = sqlite3.connect(os.path.join(datadir, "respqueue.db"))
    try:
        return bytes(conn.execute("SELECT value FROM keys WHERE key = ?", (key,)).fetchone()[0])
    finally:
        conn.close()


def _meta_shapes(datadir: str) -> list[tuple[bytes, ...]]:
    conn = sqlite3.connect(os.path.join(datadir, "respqueue.db"))
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = 'hash_shapes'").fetchone()
    finally:
        conn.close()
    return [tuple(x) for x in msgpack.unpackb(row[0], raw=True)]


def test_job_shapes_are_pinned() -> None:
    """The shapes' numbers are on disk: the list may only grow at its end. This digest changes with any
    edit; a new shape appended needs a new digest, and a store written before still reads (its table is a
    prefix of the new one)."""
    shapes = job_shapes()
    assert shapes[0] == (b"name", b"data", b"opts", b"timestamp", b"delay", b"priority")
    assert shapes[1] == shapes[0] + (b"processedOn", b"ats")
    assert len(shapes) == len(set(shapes)) == 56 <= STORE_SHAPES_MAX
    digest = hashlib.sha1(msgpack.packb([list(s) for s in shapes])).hexdigest()
    assert digest == "c37ea882819c74a817244ea6e7d36d49e1fe4450", digest


@pytest.fixture()
def node():
    srv = start_respqueue("--durability", "durable", "--history", "off")
    yield srv
    srv.stop()


def test_job_hash_row_is_packed_by_shape(node) -> None:
    r = redis.Redis(port=node.port)
    r.hset("bull:q:1", mapping=JOB)
    r.hset("bull:q:2", mapping=DONE)
    r.hset("plain", mapping=OTHER)
    datadir = os.path.join(node.workdir, "data")
    shapes = job_shapes()
    for key, h in ((b"bull:q:1", JOB), (b"bull:q:2", DONE)):
        blob = _row(datadir, key)
        ht, no, *values = msgpack.unpackb(blob, raw=True)
        assert (ht, shapes[no]) == (False, tuple(f.encode() for f in h)), blob
        assert values == [v.encode() for v in h.values()]
    assert msgpack.unpackb(_row(datadir, b"plain"), raw=True) == [False, {b"b": b"2", b"a": b"1"}]
    assert _meta_shapes(datadir)[: len(shapes)] == shapes
    # a cold job (compacted at once) is its row's bytes; a change writes the row again, still by shape
    assert r.execute_command("DEBUG", "COLD-HASHES", "COMPACT") is not None
    r.hset("bull:q:1", "progress", "5")  # (a shape that is not a store shape: names again)
    assert msgpack.unpackb(_row(datadir, b"bull:q:1"), raw=True)[1][b"progress"] == b"5"
    r.hdel("bull:q:1", "progress")
    assert msgpack.unpackb(_row(datadir, b"bull:q:1"), raw=True)[1] == 0
    r.close()
    node.stop()
    node2 = start_respqueue("--durability", "durable", "--history", "off", port=node.port, workdir=node.workdir)
    try:
        r = redis.Redis(port=node2.port)
        for key, h in (("bull:q:1", JOB), ("bull:q:2", DONE), ("plain", OTHER)):
            assert r.hgetall(key) == {k.encode(): v.encode() for k, v in h.items()}
            assert r.hkeys(key) == [k.encode() for k in h]  # (the order too)
            assert r.object("encoding", key) == b"listpack"
        r.close()
    finally:
        node2.stop()


def test_store_with_other_shapes_is_refused() -> None:
    workdir = tempfile.mkdtemp(prefix="rq-shapes-")
    srv = start_respqueue("--durability", "durable", workdir=workdir)
    redis.Redis(port=srv.port).hset("bull:q:1", mapping=JOB)
    srv.stop()
    db = os.path.join(workdir, "data", "respqueue.db")
    conn = sqlite3.connect(db)
    wrong = [list(s) for s in job_shapes()]
    wrong[0], wrong[1] = wrong[1], wrong[0]
    conn.execute("UPDATE meta SET value = ? WHERE name = 'hash_shapes'", (msgpack.packb(wrong),))
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="exited"):
        start_respqueue("--durability", "durable", workdir=workdir)
    with open(os.path.join(workdir, "server.log"), "rb") as f:
        assert b"small-hash shapes" in f.read()


def test_a_process_without_the_plugin_reads_the_rows(node) -> None:
    """A tool that opens the store without compat (no shape registered) takes the store's table and reads
    a job hash's row as it was written."""
    r = redis.Redis(port=node.port)
    r.hset("bull:q:7", mapping=DONE)
    r.close()
    node.stop()
    db = os.path.join(node.workdir, "data", "respqueue.db")
    code = (
        "import sys, sqlite3\n"
        "from respqueue.persistence.store import migrate\n"
        "from respqueue.types.hash import ColdHash, store_shapes\n"
        "assert not store_shapes() and 'compat' not in sys.modules\n"
        f"conn = sqlite3.connect({db!r}, isolation_level=None)\n"
        f"migrate(conn, {db!r})\n"
        "v = conn.execute(\"SELECT value FROM keys WHERE key = CAST('bull:q:7' AS BLOB)\").fetchone()[0]\n"
        "print(ColdHash(bytes(v)).fields()[1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str({k.encode(): v.encode() for k, v in DONE.items()})
