"""Durability defects found by attacking the store (issue 15): a client told a write failed finds
nothing written (MISCONF inside scripts, the batch whose commit fails), an empty or foreign store
file is refused instead of overwritten, and large strings are journaled by chunk."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile

from .servers import ROOT, free_port


def _serve_fails(datadir: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(
        [sys.executable, "-m", "respqueue", "serve", "--port", str(free_port()), "--dir", datadir],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert p.returncode != 0, p.stdout + p.stderr
    return p


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "respqueue", *args], capture_output=True, text=True, env=env, timeout=60)


# ---- D2: an empty or foreign store file is refused, never overwritten -----------------------------
def test_empty_store_file_refuses_to_start_and_is_left_alone() -> None:
    d = tempfile.mkdtemp(prefix="rq-empty-")
    path = os.path.join(d, "respqueue.db")
    open(path, "wb").close()
    p = _serve_fails(d)
    out = p.stdout + p.stderr
    assert path in out and "empty" in out
    assert "respqueue check" in out and "respqueue repair" in out and "remove" in out
    assert os.path.getsize(path) == 0
    assert not os.path.exists(path + "-wal") or os.path.getsize(path + "-wal") == 0
    c = _cli("check", "--dir", d)
    assert c.returncode == 1 and "empty" in c.stderr + c.stdout
    assert os.path.getsize(path) == 0


def test_foreign_sqlite_file_refuses_to_start_and_is_left_alone() -> None:
    d = tempfile.mkdtemp(prefix="rq-foreign-")
    path = os.path.join(d, "respqueue.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER)")
    conn.execute("INSERT INTO accounts VALUES(1, 100)")
    conn.commit()
    conn.close()
    with open(path, "rb") as f:
        before = f.read()
    p = _serve_fails(d)
    out = p.stdout + p.stderr
    assert path in out and "not a respqueue store" in out
    with open(path, "rb") as f:
        assert f.read() == before
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["accounts"]
    c = _cli("check", "--dir", d)
    assert c.returncode == 1 and "not a respqueue store" in c.stderr + c.stdout
