"""``respqueue history export``: Parquet layout, exact contents, incremental watermark, consistency
while a writer commits, filters, errors, and S3 through a real moto server on loopback."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from compat.analytics import synthetic
from compat.history_schema import TABLES, create_history_tables, has_history

from .servers import ROOT, free_port

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                                reason="pyarrow is not installed (pip install -e '.[test]')")

EV_COLS = [n for n, _ in TABLES["job_events"]]
FI_COLS = [n for n, _ in TABLES["job_final"]]


def rows_of(tbl, cols) -> set[tuple]:
    d = tbl.to_pydict()
    return set(zip(*(d[c] for c in cols), strict=True))


def db_rows(path: str, table: str) -> set[tuple]:
    conn = sqlite3.connect(path)
    try:
        return set(conn.execute("SELECT %s FROM %s" % (",".join(n for n, _ in TABLES[table]), table)))
    finally:
        conn.close()


def export_rows(dest: str) -> tuple[set[tuple], set[tuple], int, int]:
    from compat.history_export import read_export

    ev, fi = read_export(dest, "job_events"), read_export(dest, "job_final")
    return rows_of(ev, EV_COLS), rows_of(fi, FI_COLS), ev.num_rows, fi.num_rows


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    events, finals = synthetic.generate(300, seed=3)
    synthetic.write(str(d / "respqueue.db"), events, finals)
    return d


def test_schema_ddl_is_idempotent(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.db")
    assert not has_history(conn)
    create_history_tables(conn)
    create_history_tables(conn)
    assert has_history(conn)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"job_events", "job_final", "history_watermarks", "job_events_ts"} <= names
    cols = [r[1] for r in conn.execute("PRAGMA table_info(job_final)")]
    assert cols == FI_COLS
    cols = [r[1] for r in conn.execute("PRAGMA table_info(job_events)")]
    assert cols == EV_COLS


def test_export_everything_exactly(store, tmp_path):
    from compat.history_export import export_history

    dest = tmp_path / "out"
    res = export_history(str(store), str(dest))
    db = str(store / "respqueue.db")
    ev, fi, nev, nfi = export_rows(str(dest))
    assert ev == db_rows(db, "job_events") and nev == len(ev) == res.events
    assert fi == db_rows(db, "job_final") and nfi == len(fi) == res.finals
    assert res.queues == ["emails", "odd/queue name", "reports"]
    # Hive layout, queue percent-encoded, date of ts_ms / finished_on (UTC), no queue column in the files
    import pyarrow.parquet as pq

    odd = dest / "job_events" / "queue=odd%2Fqueue%20name"
    assert odd.is_dir()
    days = sorted(p.name for p in odd.iterdir())
    assert days and all(p.startswith("date=2026-11-") for p in days)
    f = next((odd / days[0]).iterdir())
    assert f.name.startswith("part-") and f.suffix == ".parquet"
    assert "queue" not in pq.read_schema(f).names
    for path in res.files:
        assert os.path.exists(path)


def test_incremental_second_run_exports_only_new_rows(tmp_path):
    from compat.history_export import export_history

    d = tmp_path / "data"
    d.mkdir()
    db = str(d / "respqueue.db")
    events, finals = synthetic.generate(400, seed=11)
    mid = synthetic.BASE_MS + 300_000
    # the server would have written the first half by `mid`
    synthetic.write(db, [e for e in events if e[0] <= mid], [f for f in finals if f[-1] <= mid])
    dest = str(tmp_path / "out")
    r1 = export_history(str(d), dest, now_ms=mid + 2000)
    first = export_rows(dest)
    assert r1.events == len(first[0]) and r1.finals == len(first[1]) and r1.events > 0
    r2 = export_history(str(d), dest, now_ms=mid + 2500)
    assert (r2.events, r2.finals) == (0, 0)
    assert "nothing new" in r2.summary()
    synthetic.write(db, [e for e in events if e[0] > mid], [f for f in finals if f[-1] > mid])
    end = max(f[-1] for f in finals)
    r3 = export_history(str(d), dest, now_ms=end + 2000)
    assert r3.events == len(events) - r1.events and r3.finals == len(finals) - r1.finals
    ev, fi, nev, nfi = export_rows(dest)
    assert nev == len(events) and nfi == len(finals)  # no duplicates
    assert ev == db_rows(db, "job_events") and fi == db_rows(db, "job_final")
    # watermark per DEST: another destination starts from zero
    other = str(tmp_path / "other")
    r4 = export_history(str(d), other, now_ms=end + 2000)
    assert (r4.events, r4.finals) == (len(events), len(finals))
    conn = sqlite3.connect(db)
    marks = dict(conn.execute("SELECT dest, last_event_id FROM history_watermarks"))
    (top,) = conn.execute("SELECT max(id) FROM job_events").fetchone()
    assert marks == {os.path.abspath(dest): top, os.path.abspath(other): top}


def test_settle_window_defers_fresh_final_records(tmp_path):
    from compat.history_export import export_history

    db = str(tmp_path / "h.db")
    events, finals = synthetic.generate(40, seed=5)
    synthetic.write(db, events, finals)
    last = max(f[-1] for f in finals)
    dest = str(tmp_path / "out")
    r1 = export_history(db, dest, now_ms=last + 999, settle_ms=1000)  # the newest record is not settled yet
    assert r1.finals == len(finals) - sum(1 for f in finals if f[-1] == last)
    r2 = export_history(db, dest, now_ms=last + 1000, settle_ms=1000)
    assert r1.finals + r2.finals == len(finals)


def test_since_until_and_full(store, tmp_path):
    from compat.history_export import export_history, parse_time

    db = str(store / "respqueue.db")
    lo, hi = synthetic.BASE_MS + 100_000, synthetic.BASE_MS + 200_000
    dest = str(tmp_path / "out")
    res = export_history(str(store), dest, lo, hi, incremental=False)
    ev, fi, _, _ = export_rows(dest)
    assert ev == {r for r in db_rows(db, "job_events") if lo <= r[1] <= hi}
    assert fi == {r for r in db_rows(db, "job_final") if lo <= r[9] <= hi}
    assert res.events == len(ev)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM history_watermarks").fetchone()[0] == 0
    assert parse_time("2026-11-18T00:00:00Z") == parse_time("2026-11-18") == 1_794_960_000_000
    assert parse_time("2026-11-18T01:00:00+01:00") == 1_794_960_000_000
    assert parse_time("1794960000000") == 1_794_960_000_000


def test_snapshot_is_consistent_while_a_writer_commits(tmp_path):
    """Each writer transaction adds one 'completed' event and its final record; every export must see pairs."""
    from compat.history_export import export_history

    db = str(tmp_path / "live.db")
    synthetic.write(db, [], [])
    stop = threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(db, timeout=10)
        i = 0
        while not stop.is_set():
            i += 1
            with conn:
                t = synthetic.BASE_MS + i
                conn.execute(synthetic.EVENT_INSERT, (t, "bull", "q", str(i), "n", "completed", 1, "w", None, 2, None))
                conn.execute(synthetic.FINAL_INSERT, ("bull", "q", str(i), "n", "{}", "{}", t, 0, t, t, 1, None, "1",
                                                      "completed", t))
        conn.close()

    th = threading.Thread(target=writer)
    th.start()
    try:
        for k in range(15):
            dest = str(tmp_path / f"snap{k}")
            res = export_history(db, dest, incremental=False, settle_ms=-10**12)
            assert res.events == res.finals
            time.sleep(0.01)
    finally:
        stop.set()
        th.join()
    assert res.events > 0


def test_errors(tmp_path):
    from compat.history_export import ExportError, export_history, parse_time

    with pytest.raises(ExportError, match="no store"):
        export_history(str(tmp_path / "missing"), str(tmp_path / "o"))
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(ExportError, match="no job history tables"):
        export_history(str(plain), str(tmp_path / "o"))
    with pytest.raises(ExportError, match="not a time"):
        parse_time("yesterday")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "respqueue", *args], capture_output=True, text=True, env=e,
                          timeout=60, cwd=ROOT)


def test_cli_export(store, tmp_path):
    dest = str(tmp_path / "out")
    p = run_cli("history", "export", dest, "--dir", str(store))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("exported ") and "from 3 queue(s) (emails, odd/queue name, reports)" in p.stdout
    p = run_cli("history", "export", dest, "--dir", str(store))
    assert p.returncode == 0 and p.stdout.startswith("nothing new to export"), p.stdout + p.stderr
    p = run_cli("history", "export", dest, "--dir", str(store), "--full", "--since", "2026-11-18T00:00:00Z")
    assert p.returncode == 0 and p.stdout.startswith("exported "), p.stderr
    p = run_cli("history", "export", dest, "--dir", str(tmp_path / "nowhere"))
    assert p.returncode == 1 and "no store at" in p.stderr
    p = run_cli("history", "export", dest, "--dir", str(store), "--since", "soon")
    assert p.returncode == 1 and "not a time" in p.stderr


def moto_server(tmp_path_factory):
    """A real moto S3 server on loopback (a generator: yields the AWS environment pointing at it)."""
    exe = shutil.which("moto_server")
    if exe is None or importlib.util.find_spec("boto3") is None:
        pytest.skip("moto server or boto3 is not installed (pip install 'moto[server]' boto3)")
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            break
        except Exception:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)
    env = {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    yield env
    proc.terminate()
    proc.wait(10)
    log.close()


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    yield from moto_server(tmp_path_factory)


def test_s3_export_on_moto_server(store, tmp_path, moto, monkeypatch):
    for k, v in moto.items():
        monkeypatch.setenv(k, v)
    import boto3

    from compat.history_export import download_s3, export_history

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="hist")
    res = export_history(str(store), "s3://hist/team/a/")
    assert res.dest == "s3://hist/team/a" and res.events > 0
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="hist")["Contents"]]
    assert len(keys) == len(res.files)
    assert all(k.startswith("team/a/job_") and "/queue=" in k and "/date=" in k and k.endswith(".parquet")
               for k in keys)
    assert any(k.startswith("team/a/job_events/queue=odd%2Fqueue%20name/") for k in keys)
    local = download_s3("s3://hist/team/a", str(tmp_path / "dl"))
    ev, fi, _, _ = export_rows(local)
    db = str(store / "respqueue.db")
    assert ev == db_rows(db, "job_events") and fi == db_rows(db, "job_final")
    again = export_history(str(store), "s3://hist/team/a")
    assert (again.events, again.finals) == (0, 0)
    # the CLI with the endpoint from the environment
    p = run_cli("history", "export", "s3://hist/cli", "--dir", str(store), env={**os.environ, **moto})
    assert p.returncode == 0 and p.stdout.startswith("exported "), p.stderr
    assert s3.list_objects_v2(Bucket="hist", Prefix="cli/")["KeyCount"] == len(keys)


def test_server_never_imports_spark_or_pyarrow():
    code = ("import sys, respqueue.server, respqueue.cli, compat.history_schema\n"
            "respqueue.cli.build_parser().parse_args(['serve'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pyarrow', 'boto3', 'bullmq'}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
