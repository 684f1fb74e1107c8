"""Job history, analytics and the Spark enqueue on ``serve --shards 2`` (issue 14, item 4).

``respqueue history export --dir D`` over a sharded data directory writes every shard's history into one
Parquet dataset (files named by shard, a watermark per shard), and ``respqueue analytics`` over it counts every
shard's jobs. ``respqueue enqueue`` into hash-tagged queues on a cluster lands each queue on its own shard."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from respqueue.cluster.slots import key_slot

from .cluster_servers import Shards, env
from .servers import ROOT, RawConn

INTEROP = os.path.join(ROOT, "interop")
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the Node client tests",
)
needs_spark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None
    or importlib.util.find_spec("pyarrow") is None
    or shutil.which("java") is None,
    reason="Spark needs pyspark, pyarrow and a Java runtime",
)


def rq(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "respqueue", *args], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=timeout
    )


@pytest.fixture(scope="module")
def shards():
    s = Shards(2)
    yield s
    s.stop()


def _shard_of(tag: str) -> int:
    return key_slot(tag.encode()) * 2 // 16384


@needs_node
@needs_spark
def test_history_export_and_analytics_over_every_shard(shards, tmp_path):
    # interop/cluster_clients.js: 12 jobs each on {rq-alpha} (shard 1), {rq-delta} and {rq-q2} (shard 0)
    assert [_shard_of(f"rq-{q}") for q in ("alpha", "delta", "q2")] == [1, 0, 0]
    p = subprocess.run(
        ["node", "cluster_clients.js", "bullmq", *map(str, shards.ports)],
        cwd=INTEROP,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    dest = str(tmp_path / "export")
    p = rq("history", "export", dest, "--dir", shards.dir, "--settle-ms", "0", "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("shard-0: exported ") and "\nshard-1: exported " in p.stdout
    files = glob.glob(os.path.join(dest, "*", "queue=*", "date=*", "*.parquet"))
    by_shard = {0: set(), 1: set()}
    for f in files:
        name = os.path.basename(f)
        assert name.startswith(("part-shard-0-", "part-shard-1-")), name
        by_shard[int(name.split("-")[2])].add(f.split(os.sep + "queue=")[1].split(os.sep)[0])
    assert by_shard == {0: {"delta", "q2"}, 1: {"alpha"}}
    # incremental: each shard's own watermark, so a second run finds nothing new on either
    p = rq("history", "export", dest, "--dir", shards.dir, "--settle-ms", "0", "-q")
    assert p.returncode == 0 and p.stdout.count("nothing new to export") == 2, p.stdout
    out = str(tmp_path / "report")
    p = rq("analytics", dest, out, "--master", "local[1]")
    assert p.returncode == 0, p.stderr[-3000:]
    summary: dict[str, list[int]] = {}
    for line in p.stdout.splitlines():
        if ": added " in line:  # "queue/name: added A, completed C, ..."
            q = line.split("/")[0]
            a = int(line.split("added ")[1].split(",")[0])
            c = int(line.split("completed ")[1].split(",")[0])
            summary[q] = [x + y for x, y in zip(summary.get(q, [0, 0]), [a, c], strict=True)]
    assert summary == {"alpha": [12, 12], "delta": [12, 12], "q2": [12, 12]}, p.stdout
    # analytics straight from the sharded data directory sees the same jobs
    p2 = rq("analytics", shards.dir, str(tmp_path / "live"), "--master", "local[1]")
    assert p2.returncode == 0, p2.stderr[-3000:]

    def counts(text: str) -> list[str]:
        return sorted(line.split(", failed")[0] for line in text.splitlines() if ": added " in line)

    assert counts(p2.stdout) == counts(p.stdout)


def _call(port: int, *args: str) -> bytes:
    c = RawConn(port)
    try:
        return c.call_raw(*args)
    finally:
        c.close()


@needs_spark
def test_spark_enqueue_spreads_hash_tagged_queues_over_the_shards(shards, spark):
    from respqueue.pipeline import enqueue, is_cluster

    queues = {"{emails}": 0, "{sms}": 1, "{push}": 0}  # queue -> the shard of its hash tag
    assert {q: _shard_of(q[1:-1]) for q in queues} == queues
    counts = {"{emails}": 120, "{sms}": 90, "{push}": 45}
    rows = [(i, q, f"u{i}") for q, n in counts.items() for i in range(n)]
    df = spark.createDataFrame(rows, "i long, q string, user string").repartition(3)
    conn = {"host": "127.0.0.1", "port": shards.ports[0]}
    assert is_cluster(conn) is True
    res = enqueue(df, "{emails}", name="send", data_cols=["i", "user"], connection=conn, queue_col="q", batch_size=25)
    assert res.total == sum(counts.values()) and res.queues == counts
    assert "{emails} (120), {push} (45), {sms} (90)" in res.summary()
    for q, k in queues.items():
        owner, other = shards.ports[k], shards.ports[1 - k]
        assert _call(owner, "LLEN", f"bull:{q}:wait") == b":%d\r\n" % counts[q]
        assert _call(owner, "GET", f"bull:{q}:id") == b"$%d\r\n%d\r\n" % (len(str(counts[q])), counts[q])
        assert _call(other, "LLEN", f"bull:{q}:wait").startswith(b"-MOVED ")
    # one queue, its tag in the prefix instead; the cluster named, not detected
    res = enqueue(df.limit(30), "plain", connection=conn, prefix="{pfx}", cluster=True)
    assert res.total == 30 and res.queues == {"plain": 30}
    k = _shard_of("pfx")
    assert _call(shards.ports[k], "LLEN", "bull:{pfx}:plain:wait".replace("bull:", "")) == b":30\r\n"
    # no hash tag: every key of the queue would be in another slot
    with pytest.raises(ValueError, match="hash tag"):
        enqueue(df, "untagged", connection=conn)


@needs_spark
def test_cli_enqueue_on_a_cluster(shards, tmp_path):
    src = tmp_path / "rows.jsonl"
    with open(src, "w") as fh:
        for i in range(40):
            fh.write(json.dumps({"i": i, "q": "{cli-a}" if i % 4 else "{cli-b}"}) + "\n")
    port = str(shards.ports[1])
    p = rq("enqueue", "{cli-a}", "--from", str(src), "--port", port, "--queue-col", "q", "--master", "local[1]", "-q")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "added 40 jobs to {cli-a} (30), {cli-b} (10)" in p.stdout
    for q, n in (("{cli-a}", 30), ("{cli-b}", 10)):
        owner = shards.ports[_shard_of(q[1:-1])]
        assert _call(owner, "LLEN", f"bull:{q}:wait") == b":%d\r\n" % n
    p = rq("enqueue", "nohashtag", "--from", str(src), "--port", port, "--cluster", "--master", "local[1]", "-q")
    assert p.returncode == 2 and "has no {hash tag}" in p.stderr and "Traceback" not in p.stderr, p.stderr[-3000:]
