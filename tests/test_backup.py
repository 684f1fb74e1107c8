"""Backups and restores (issue 4, item 6): `respqueue backup DEST`, `respqueue restore SRC`,
scheduled backups (--backup-to/--backup-interval/--backup-keep), to files and to S3.

S3 is a real S3-compatible server on loopback (moto's server mode as a subprocess), reached
by the CLI and the server through boto3 with AWS_ENDPOINT_URL, never a mocked client."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
import redis

from respqueue.backup import BACKUP_RE, backup_name
from respqueue.config import Config
from respqueue.persistence.store import SCHEMA_VERSION

from .servers import ROOT, ServerProcess, free_port, start_respqueue

AWS_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION",
            "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESPQUEUE_") and k not in AWS_KEYS}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def rq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "respqueue", *args], capture_output=True, text=True,
                          env=env or _env(), cwd=ROOT, timeout=60)


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_store(d: str, rows: dict[bytes, bytes]) -> str:
    """A store file made directly with sqlite3 (the store's schema: meta + keys), in WAL mode."""
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "respqueue.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    from respqueue.persistence.store import migrate

    migrate(conn, path)  # idempotent: version 5's ALTER TABLE runs once per file
    conn.executemany("INSERT OR REPLACE INTO keys(db, key, type, expire_ms, version, value) VALUES(0,?,'string',NULL,1,?)",
                     list(rows.items()))
    conn.close()
    return path


def read_strings(db_file: str) -> dict[bytes, bytes]:
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    try:
        return {bytes(k): bytes(v) for k, v in conn.execute("SELECT key, value FROM keys WHERE type='string'")}
    finally:
        conn.close()


# ---- file backups and restores (no server needed) ---------------------------
def test_backup_to_file_writes_metadata_and_prints_it(tmp_path):
    d = str(tmp_path / "data")
    make_store(d, {b"a": b"1", b"b": b"2"})
    dest = str(tmp_path / "b.db")
    p = rq("backup", dest, "--dir", d)
    assert p.returncode == 0, p.stderr
    assert f"wrote {dest} (" in p.stdout and f"wrote {dest}.meta.json" in p.stdout
    meta = json.loads(open(dest + ".meta.json").read())
    assert meta["sha256"] == sha256(dest)
    assert meta["sha256"] in p.stdout
    assert meta["size"] == os.path.getsize(dest)
    assert meta["schema_version"] == SCHEMA_VERSION
    assert meta["source"].endswith(os.path.join(d, "respqueue.db"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", meta["created"])
    # a standalone SQLite file, readable by the sqlite3 CLI, with the data
    assert read_strings(dest) == {b"a": b"1", b"b": b"2"}
    conn = sqlite3.connect(dest)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_backup_to_directory_names_by_timestamp(tmp_path):
    d = str(tmp_path / "data")
    make_store(d, {b"k": b"v"})
    out = tmp_path / "backups"
    out.mkdir()
    assert rq("backup", str(out), "--dir", d).returncode == 0
    assert rq("backup", str(tmp_path / "new") + "/", "--dir", d).returncode == 0
    for folder in (out, tmp_path / "new"):
        names = sorted(os.listdir(folder))
        assert len(names) == 2 and BACKUP_RE.match(names[0]) and names[1] == names[0] + ".meta.json"
    assert backup_name(0) == "respqueue-19700101T000000.000Z.db"
    assert backup_name(1.5) < backup_name(2.25) < backup_name(10)


def test_backup_errors(tmp_path):
    p = rq("backup", str(tmp_path / "x.db"), "--dir", str(tmp_path / "nothing"))
    assert p.returncode == 1
    assert "no store at" in p.stderr and "respqueue.db" in p.stderr
    d = str(tmp_path / "data")
    make_store(d, {b"k": b"v"})
    p = rq("backup", str(tmp_path / "no" / "such" / "dir" / "x.db"), "--dir", d)
    assert p.returncode == 1 and "does not exist" in p.stderr
    p = rq("backup", "s3:///x", "--dir", d)
    assert p.returncode == 1 and "no bucket name" in p.stderr


def test_restore_round_trip_moves_the_old_store_aside(tmp_path):
    src_dir = str(tmp_path / "src")
    make_store(src_dir, {b"a": b"from-backup"})
    bk = str(tmp_path / "b.db")
    assert rq("backup", bk, "--dir", src_dir).returncode == 0
    d = str(tmp_path / "data")
    make_store(d, {b"a": b"current", b"c": b"3"})
    # a WAL with committed pages beside the current store (a writer that died): it must move with it
    code = ("import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
            " c.execute('PRAGMA wal_autocheckpoint=0'); c.execute(\"UPDATE keys SET value=x'6e6577' WHERE key=x'63'\");"
            " os._exit(0)")
    subprocess.run([sys.executable, "-c", code, os.path.join(d, "respqueue.db")], check=True, timeout=30)
    assert os.path.getsize(os.path.join(d, "respqueue.db-wal")) > 0
    p = rq("restore", bk, "--dir", d)
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(os.path.join(d, "respqueue.db-wal"))
    assert f"restored {bk}" in p.stdout and "moved the previous store to" in p.stdout
    assert read_strings(os.path.join(d, "respqueue.db")) == {b"a": b"from-backup"}
    aside = [n for n in os.listdir(d) if n.startswith("respqueue.db.before-restore-") and "-wal" not in n
             and "-shm" not in n]
    assert len(aside) == 1
    assert read_strings(os.path.join(d, aside[0])) == {b"a": b"current", b"c": b"new"}
    # restore into an empty directory: nothing to move aside
    d2 = str(tmp_path / "fresh")
    p = rq("restore", bk, "--dir", d2)
    assert p.returncode == 0 and "moved" not in p.stdout
    assert read_strings(os.path.join(d2, "respqueue.db")) == {b"a": b"from-backup"}


def test_restore_from_a_directory_takes_the_newest(tmp_path):
    d = str(tmp_path / "data")
    out = str(tmp_path / "backups")
    for v in (b"1", b"2", b"3"):
        make_store(d, {b"v": v})
        assert rq("backup", out + "/", "--dir", d).returncode == 0
        time.sleep(0.01)
    d2 = str(tmp_path / "restored")
    p = rq("restore", out, "--dir", d2)
    assert p.returncode == 0, p.stderr
    assert read_strings(os.path.join(d2, "respqueue.db")) == {b"v": b"3"}
    p = rq("restore", str(tmp_path / "empty-dir-does-not-exist.db"), "--dir", d2)
    assert p.returncode == 1 and "no backup at" in p.stderr


def test_restore_refuses_sha_mismatch_and_missing_metadata(tmp_path):
    d = str(tmp_path / "data")
    make_store(d, {b"a": b"1"})
    bk = str(tmp_path / "b.db")
    assert rq("backup", bk, "--dir", d).returncode == 0
    target = str(tmp_path / "target")
    make_store(target, {b"a": b"mine"})
    before = sha256(os.path.join(target, "respqueue.db"))
    # the metadata names another file
    meta = json.loads(open(bk + ".meta.json").read())
    meta["sha256"] = "0" * 64
    open(bk + ".meta.json", "w").write(json.dumps(meta))
    p = rq("restore", bk, "--dir", target)
    assert p.returncode == 1
    assert "sha256 mismatch" in p.stderr and "refusing" in p.stderr and "--force" in p.stderr
    assert sha256(os.path.join(target, "respqueue.db")) == before
    assert not [n for n in os.listdir(target) if "before-restore" in n or "restore-tmp" in n]
    # --force restores it, with a warning
    p = rq("restore", bk, "--dir", target, "--force")
    assert p.returncode == 0, p.stderr
    assert "warning (--force)" in p.stderr and "sha256 mismatch" in p.stderr
    assert read_strings(os.path.join(target, "respqueue.db")) == {b"a": b"1"}
    # no metadata at all
    os.unlink(bk + ".meta.json")
    p = rq("restore", bk, "--dir", target)
    assert p.returncode == 1 and "has no metadata" in p.stderr and "--force" in p.stderr
    assert rq("restore", bk, "--dir", target, "--force").returncode == 0


def test_restore_refuses_a_damaged_file_even_with_matching_sha(tmp_path):
    d = str(tmp_path / "data")
    make_store(d, {b"k%d" % i: b"x" * 200 for i in range(200)})
    bk = str(tmp_path / "b.db")
    assert rq("backup", bk, "--dir", d).returncode == 0
    # damage the b-tree pages (not the header), then make the metadata describe the damaged file
    size = os.path.getsize(bk)
    assert size > 5 * 4096
    with open(bk, "r+b") as f:
        f.seek(4096)
        f.write(os.urandom(size - 4096))
    meta = json.loads(open(bk + ".meta.json").read())
    meta["sha256"] = sha256(bk)
    open(bk + ".meta.json", "w").write(json.dumps(meta))
    target = str(tmp_path / "target")
    p = rq("restore", bk, "--dir", target, "--force")
    assert p.returncode == 1
    assert "integrity check failed" in p.stderr or "not a readable SQLite database" in p.stderr
    assert not os.path.exists(os.path.join(target, "respqueue.db"))
    # not a database at all
    junk = str(tmp_path / "junk.db")
    open(junk, "wb").write(b"hello" * 1000)
    p = rq("restore", junk, "--dir", target, "--force")
    assert p.returncode == 1 and "not a readable SQLite database" in p.stderr


def test_restore_refuses_while_the_lock_is_held(tmp_path):
    d = str(tmp_path / "data")
    make_store(d, {b"a": b"1"})
    bk = str(tmp_path / "b.db")
    assert rq("backup", bk, "--dir", d).returncode == 0
    fd = os.open(os.path.join(d, "respqueue.lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        p = rq("restore", bk, "--dir", d)
        assert p.returncode == 1
        assert "a running respqueue server holds" in p.stderr and "respqueue.lock" in p.stderr
    finally:
        os.close(fd)
    assert rq("restore", bk, "--dir", d).returncode == 0


def test_cli_help_and_config_twins():
    p = rq("backup", "--help")
    assert p.returncode == 0 and "DEST" in p.stdout and "--dir" in p.stdout
    p = rq("restore", "--help")
    assert p.returncode == 0 and "SRC" in p.stdout and "--force" in p.stdout
    p = rq("serve", "--help")
    out = " ".join(p.stdout.split())
    for flag in ("--backup-to", "--backup-interval", "--backup-keep"):
        assert flag in out and "RESPQUEUE_" + flag[2:].upper().replace("-", "_") in out
    cfg = Config.load({}, environ={})
    assert (cfg.backup_to, cfg.backup_interval, cfg.backup_keep) == (None, 3600, 7)
    cfg = Config.load({}, environ={"RESPQUEUE_BACKUP_TO": "s3://b/p", "RESPQUEUE_BACKUP_INTERVAL": "60",
                                   "RESPQUEUE_BACKUP_KEEP": "3"})
    assert (cfg.backup_to, cfg.backup_interval, cfg.backup_keep) == ("s3://b/p", 60, 3)
    cfg = Config.load({"backup_to": "/x", "backup_interval": 5, "backup_keep": 2},
                      environ={"RESPQUEUE_BACKUP_TO": "s3://b/p"})
    assert (cfg.backup_to, cfg.backup_interval, cfg.backup_keep) == ("/x", 5, 2)


# ---- a live server ------------------------------------------------------------
def _store_file(srv: ServerProcess) -> str:
    return os.path.join(srv.workdir, "data", "respqueue.db")


def _need_store(srv: ServerProcess) -> None:
    r = redis.Redis(port=srv.port)
    r.set("probe", "1")
    r.close()
    deadline = time.time() + 5
    while time.time() < deadline and not os.path.exists(_store_file(srv)):
        time.sleep(0.05)
    if not os.path.exists(_store_file(srv)):
        srv.stop()
        raise AssertionError(f"no store file at {_store_file(srv)} 5 s after the first write")


class Writer(threading.Thread):
    """Keeps writing MULTI/EXEC batches: INCR n; RPUSH l n; HSET h f<n> n. In every consistent
    snapshot GET n == LLEN l == HLEN h."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.r = redis.Redis(port=port)
        self.stop_flag = threading.Event()
        self.n = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                p = self.r.pipeline(transaction=True)
                p.incr("n")
                p.rpush("l", "x" * 50)
                p.hset("h", f"f{self.n + 1}", "y" * 50)
                n, _, _ = p.execute()
                self.n = n
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def _consistent_count(db_file: str) -> int:
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        row = conn.execute("SELECT value FROM keys WHERE db=0 AND key=x'6e'").fetchone()
        n = int(bytes(row[0])) if row else 0
        llen = conn.execute("SELECT count(*) FROM list_items WHERE db=0 AND key=x'6c'").fetchone()[0]
        hlen = conn.execute("SELECT count(*) FROM hash_fields WHERE db=0 AND key=x'68'").fetchone()[0]
        if not hlen:  # a small hash is one row: keys.value = msgpack [hashtable?, {field: value}]
            blob = conn.execute("SELECT value FROM keys WHERE db=0 AND key=x'68'").fetchone()
            hlen = len(msgpack.unpackb(blob[0], raw=True)[1]) if blob and blob[0] is not None else 0
    finally:
        conn.close()
    assert n == llen == hlen, (n, llen, hlen)
    return n


def test_live_backup_while_writing_then_restore_round_trip(tmp_path):
    srv = start_respqueue()
    _need_store(srv)
    w = Writer(srv.port)
    backups: list[str] = []
    try:
        w.start()
        deadline = time.time() + 10
        while w.n < 200 and time.time() < deadline:
            time.sleep(0.05)
        for i in range(3):
            dest = str(tmp_path / f"live{i}.db")
            p = rq("backup", dest, "--dir", os.path.join(srv.workdir, "data"))
            assert p.returncode == 0, p.stderr
            backups.append(dest)
            time.sleep(0.2)
        w.stop_flag.set()
        w.join(10)
        assert w.error is None, w.error
        assert w.n > 200
    finally:
        w.stop_flag.set()
        srv.stop()
    counts = [_consistent_count(b) for b in backups]
    assert 0 < counts[0] <= counts[1] <= counts[2] <= w.n
    assert counts[0] < counts[2]  # the writer kept writing while the backups were taken
    for b in backups:
        assert json.loads(open(b + ".meta.json").read())["sha256"] == sha256(b)
    # restore the middle backup into the stopped server's directory and serve from it
    data = os.path.join(srv.workdir, "data")
    p = rq("restore", backups[1], "--dir", data)
    assert p.returncode == 0, p.stderr
    srv2 = start_respqueue(workdir=srv.workdir)
    try:
        r = redis.Redis(port=srv2.port)
        assert int(r.get("n")) == counts[1]
        assert r.llen("l") == counts[1] and r.hlen("h") == counts[1]
        assert r.get("probe") == b"1"
        # restoring under a running server is refused
        p = rq("restore", backups[2], "--dir", data)
        assert p.returncode == 1 and "a running respqueue server holds" in p.stderr
        r.close()
    finally:
        srv2.stop()


def _wait_for(cond: Any, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_scheduled_backups_every_second_keep_two(tmp_path):
    out = str(tmp_path / "backups")
    srv = start_respqueue("--backup-to", out, "--backup-interval", "1", "--backup-keep", "2")
    try:
        _need_store(srv)
        r = redis.Redis(port=srv.port)
        r.set("x", "1")
        _wait_for(lambda: srv.output().count("backup: wrote") >= 4, 20, "four scheduled backups")
        r.close()
    finally:
        srv.stop()
    log = srv.output()
    assert "scheduled backups to " + out in log
    assert "removed 1 old backup(s), keeping 2" in log
    names = sorted(os.listdir(out))
    dbs = [n for n in names if BACKUP_RE.match(n)]
    assert len(dbs) == 2, names
    assert sorted(names) == sorted(dbs + [n + ".meta.json" for n in dbs])
    for n in dbs:
        meta = json.loads(open(os.path.join(out, n + ".meta.json")).read())
        assert meta["sha256"] == sha256(os.path.join(out, n))
        assert read_strings(os.path.join(out, n))[b"probe"] == b"1"


def test_scheduled_backups_need_a_store(tmp_path):
    srv = start_respqueue("--durability", "memory", "--backup-to", str(tmp_path / "b"), "--backup-interval", "1")
    try:
        r = redis.Redis(port=srv.port)
        assert r.ping()
        r.close()
    finally:
        srv.stop()
    assert "ignored: durability 'memory' keeps no store to back up" in srv.output()
    assert not os.path.exists(tmp_path / "b")


# ---- S3 on loopback (moto's server mode) ------------------------------------
@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[test]')")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="moto-")
    log = open(os.path.join(workdir, "moto.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("moto server did not start: " + open(log.name).read()) from None
                time.sleep(0.1)
        env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
        yield env
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _client(env: dict[str, str]) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="testing",
                        aws_secret_access_key="testing", region_name="us-east-1")


def _bucket(env: dict[str, str], name: str) -> Any:
    c = _client(env)
    c.create_bucket(Bucket=name)
    return c


def _keys(c: Any, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", ()))


def test_s3_backup_and_restore(tmp_path, s3):
    c = _bucket(s3, "rq-backups")
    env = _env(**s3)
    d = str(tmp_path / "data")
    make_store(d, {b"v": b"1"})
    p = rq("backup", "s3://rq-backups/prod/nightly", "--dir", d, env=env)
    assert p.returncode == 0, p.stderr
    m = re.search(r"wrote (s3://rq-backups/(prod/nightly/respqueue-\S+\.db)) ", p.stdout)
    assert m, p.stdout
    key1 = m.group(2)
    assert f"wrote {m.group(1)}.meta.json" in p.stdout
    body = c.get_object(Bucket="rq-backups", Key=key1)["Body"].read()
    meta = json.loads(c.get_object(Bucket="rq-backups", Key=key1 + ".meta.json")["Body"].read())
    assert meta["sha256"] == hashlib.sha256(body).hexdigest() and meta["size"] == len(body)
    time.sleep(0.01)
    make_store(d, {b"v": b"2"})
    assert rq("backup", "s3://rq-backups/prod/nightly/", "--dir", d, env=env).returncode == 0
    keys = _keys(c, "rq-backups")
    assert len(keys) == 4 and all(k.startswith("prod/nightly/respqueue-") for k in keys)
    # a prefix: the newest backup under it
    t = str(tmp_path / "t1")
    p = rq("restore", "s3://rq-backups/prod/nightly", "--dir", t, env=env)
    assert p.returncode == 0, p.stderr
    assert read_strings(os.path.join(t, "respqueue.db")) == {b"v": b"2"}
    # an exact key
    p = rq("restore", "s3://rq-backups/" + key1, "--dir", t, env=env)
    assert p.returncode == 0, p.stderr
    assert read_strings(os.path.join(t, "respqueue.db")) == {b"v": b"1"}
    assert "moved the previous store to" in p.stdout
    # nothing there
    p = rq("restore", "s3://rq-backups/other", "--dir", t, env=env)
    assert p.returncode == 1 and "no backup at s3://rq-backups/other" in p.stderr
    p = rq("backup", "s3://no-such-bucket/x", "--dir", d, env=env)
    assert p.returncode == 1 and "NoSuchBucket" in p.stderr


def test_s3_restore_refuses_a_tampered_object(tmp_path, s3):
    c = _bucket(s3, "rq-tamper")
    env = _env(**s3)
    d = str(tmp_path / "data")
    make_store(d, {b"v": b"good"})
    assert rq("backup", "s3://rq-tamper", "--dir", d, env=env).returncode == 0
    (key,) = [k for k in _keys(c, "rq-tamper") if k.endswith(".db")]
    # another valid store uploaded in place of the backup
    other = str(tmp_path / "other")
    make_store(other, {b"v": b"evil"})
    assert rq("backup", str(tmp_path / "o.db"), "--dir", other).returncode == 0
    c.upload_file(str(tmp_path / "o.db"), "rq-tamper", key)
    t = str(tmp_path / "t")
    make_store(t, {b"v": b"current"})
    p = rq("restore", "s3://rq-tamper/" + key, "--dir", t, env=env)
    assert p.returncode == 1 and "sha256 mismatch" in p.stderr
    assert read_strings(os.path.join(t, "respqueue.db")) == {b"v": b"current"}
    c.delete_object(Bucket="rq-tamper", Key=key + ".meta.json")
    p = rq("restore", "s3://rq-tamper", "--dir", t, env=env)
    assert p.returncode == 1 and "has no metadata" in p.stderr
    p = rq("restore", "s3://rq-tamper", "--dir", t, "--force", env=env)
    assert p.returncode == 0 and read_strings(os.path.join(t, "respqueue.db")) == {b"v": b"evil"}


def test_s3_scheduled_backups_keep_n(tmp_path, s3, monkeypatch):
    c = _bucket(s3, "rq-sched")
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in s3.items():
        monkeypatch.setenv(k, v)
    # an unrelated object under the prefix is never pruned
    c.put_object(Bucket="rq-sched", Key="q/notes.txt", Body=b"keep me")
    srv = start_respqueue("--backup-to", "s3://rq-sched/q", "--backup-interval", "1", "--backup-keep", "2")
    try:
        _need_store(srv)
        _wait_for(lambda: srv.output().count("backup: wrote s3://rq-sched/q/") >= 4, 30, "four S3 backups")
    finally:
        srv.stop()
    keys = _keys(c, "rq-sched")
    dbs = [k for k in keys if k.endswith(".db")]
    assert len(dbs) == 2, keys
    assert sorted(keys) == sorted(dbs + [k + ".meta.json" for k in dbs] + ["q/notes.txt"])
    # the newest one restores
    t = str(tmp_path / "t")
    p = rq("restore", "s3://rq-sched/q/", "--dir", t, env=_env(**s3))
    assert p.returncode == 0, p.stderr
    assert f"restored s3://rq-sched/{dbs[-1]}" in p.stdout
    assert read_strings(os.path.join(t, "respqueue.db"))[b"probe"] == b"1"
