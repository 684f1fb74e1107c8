"""Backups and restores of a whole cluster (issue 14, item 4): ``respqueue backup DEST --dir D`` of a sharded
data directory and ``--cluster HOST:PORT`` of a running one write DEST/shard-K/ and DEST/cluster.toml;
``respqueue restore`` puts every shard back; ``serve --shards N --backup-to`` backs each shard up into its own
sub-prefix. To folders and to S3 (moto's server on loopback, as tests/test_backup.py)."""

from __future__ import annotations

import glob
import os
import tempfile
import time

from redis.cluster import RedisCluster as PyCluster

from .cluster_servers import Shards
from .test_backup import _bucket, _env, _keys, rq, s3  # noqa: F401  (s3 is a fixture)


def _fill(port: int, n: int = 200, prefix: str = "k") -> None:
    rc = PyCluster(host="127.0.0.1", port=port, socket_timeout=20)
    try:
        for i in range(n):
            rc.set(f"{prefix}:{i}", f"v{i}")
        rc.rpush("{q}list", *range(50))
    finally:
        rc.close()


def _check(port: int, n: int = 200, prefix: str = "k") -> None:
    rc = PyCluster(host="127.0.0.1", port=port, socket_timeout=20)
    try:
        assert [rc.get(f"{prefix}:{i}") for i in range(n)] == [f"v{i}".encode() for i in range(n)]
        assert rc.llen("{q}list") == 50
    finally:
        rc.close()


def _restart_from(tmp: str, base: int) -> Shards:
    """``serve --shards 2`` on the same ports, from the data directory tmp/data."""
    return Shards(2, workdir=tmp, base=base)


def test_backup_of_a_sharded_dir_and_of_a_running_cluster_then_restore(tmp_path):
    s = Shards(2)
    try:
        _fill(s.base)
        dest = str(tmp_path / "bk")
        p = rq("backup", dest, "--dir", s.dir, "-q")
        assert p.returncode == 0, p.stderr
        for k in (0, 1):
            assert len(glob.glob(os.path.join(dest, f"shard-{k}", "respqueue-*.db"))) == 1
            assert len(glob.glob(os.path.join(dest, f"shard-{k}", "respqueue-*.db.meta.json"))) == 1
        assert os.path.isfile(os.path.join(dest, "cluster.toml"))
        assert p.stdout.count("wrote ") == 3  # the two stores (with their metadata) and the cluster file
        live = str(tmp_path / "live")
        p = rq("backup", live, "--cluster", f"127.0.0.1:{s.ports[1]}", "-q")
        assert p.returncode == 0, p.stderr
        assert sorted(os.listdir(live)) == ["cluster.toml", "shard-0", "shard-1"]
        with open(os.path.join(live, "cluster.toml")) as fh:
            text = fh.read()
        assert f"port = {s.ports[0]}" in text and 'slots = "0-8191"' in text and 'slots = "8192-16383"' in text
        # restoring under a running cluster is refused, and changes nothing
        p = rq("restore", dest, "--dir", s.dir, "-q")
        assert p.returncode == 1 and "stop the cluster" in p.stderr
        # an unknown node
        p = rq("backup", str(tmp_path / "x"), "--cluster", "127.0.0.1:1", "-q")
        assert p.returncode == 1 and "cannot ask node 127.0.0.1:1" in p.stderr
    finally:
        s.stop()
    for src in (dest, live):
        work = tempfile.mkdtemp(prefix="rq-restore-", dir=tmp_path)
        p = rq("restore", src, "--dir", os.path.join(work, "data"), "-q")
        assert p.returncode == 0, p.stderr
        assert p.stdout.count("restored ") == 3
        r = _restart_from(work, s.base)
        try:
            _check(r.base)
        finally:
            r.stop()


def test_scheduled_backups_of_a_sharded_serve(tmp_path):
    dest = str(tmp_path / "sched")
    s = Shards(2, "--backup-to", dest, "--backup-interval", "1", "--backup-keep", "2")
    try:
        _fill(s.base, 50)
        deadline = time.time() + 60
        while time.time() < deadline:
            ok = all(len(glob.glob(os.path.join(dest, f"shard-{k}", "respqueue-*.db.meta.json"))) >= 2 for k in (0, 1))
            if ok and os.path.exists(os.path.join(dest, "cluster.toml")):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"no scheduled backups in {dest}: {os.listdir(dest) if os.path.isdir(dest) else []}")
        time.sleep(1.5)  # one more round after the keys were written
        assert sorted(os.listdir(dest)) == ["cluster.toml", "shard-0", "shard-1"]
        for k in (0, 1):  # --backup-keep applies per shard
            assert len(glob.glob(os.path.join(dest, f"shard-{k}", "respqueue-*.db"))) <= 3
    finally:
        s.stop()
    work = str(tmp_path / "again")
    p = rq("restore", dest, "--dir", os.path.join(work, "data"), "-q")
    assert p.returncode == 0, p.stderr
    r = _restart_from(work, s.base)
    try:
        _check(r.base, 50)
    finally:
        r.stop()


def test_s3_backup_and_restore_of_a_sharded_dir(tmp_path, s3):  # noqa: F811
    c = _bucket(s3, "rq-cluster")
    env = _env(**s3)
    s = Shards(2)
    try:
        _fill(s.base, 100, "s3k")
    finally:
        s.stop()
    p = rq("backup", "s3://rq-cluster/nightly", "--dir", s.dir, "-q", env=env)
    assert p.returncode == 0, p.stderr
    keys = _keys(c, "rq-cluster")
    assert "nightly/cluster.toml" in keys
    for k in (0, 1):
        assert len([x for x in keys if x.startswith(f"nightly/shard-{k}/respqueue-") and x.endswith(".db")]) == 1
    work = str(tmp_path / "from-s3")
    p = rq("restore", "s3://rq-cluster/nightly", "--dir", os.path.join(work, "data"), "-q", env=env)
    assert p.returncode == 0, p.stderr
    r = _restart_from(work, s.base)
    try:
        _check(r.base, 100, "s3k")
    finally:
        r.stop()


def test_backup_of_shards_run_from_a_hand_written_cluster_file(tmp_path):
    """serve --shards 2 --cluster-config FILE writes no cluster.toml into --dir: the shards are still found."""
    from .cluster_servers import free_port_range, write_cluster_file

    base = free_port_range(2)
    path = str(tmp_path / "hand.toml")
    write_cluster_file(path, [base, base + 1], ["0-8191", "8192-16383"])
    s = Shards(2, "--cluster-config", path, base=base)
    try:
        _fill(s.base, 40)
        assert not os.path.exists(os.path.join(s.dir, "cluster.toml"))
        dest = str(tmp_path / "bk")
        p = rq("backup", dest, "--dir", s.dir, "-q")
        assert p.returncode == 0, p.stderr
        assert sorted(os.listdir(dest)) == ["shard-0", "shard-1"] and p.stdout.count("wrote ") == 2
    finally:
        s.stop()
    p = rq("restore", dest, "--dir", str(tmp_path / "again" / "data"), "-q")
    assert p.returncode == 0 and p.stdout.count("restored ") == 2, p.stderr
    r = Shards(2, "--cluster-config", path, workdir=str(tmp_path / "again"), base=base)
    try:
        _check(r.base, 40)
    finally:
        r.stop()
