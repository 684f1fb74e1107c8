"""``respqueue analytics`` on Spark local[2]: every figure equals an independent plain-Python computation
over a synthetic history with chosen delays, failures, retries, stalls and backlog; the Parquet tables
hold the same figures; the report is self-contained and renders in headless Chromium."""

from __future__ import annotations

import importlib.util
import math
import shutil
import struct
import subprocess
import zlib
from collections import Counter, defaultdict

import pytest

from compat.analytics import synthetic

N_JOBS = 700
needs_spark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None
    or shutil.which("java") is None,
    reason="Spark needs pyspark, pyarrow and a Java runtime (pip install -e '.[spark]'; apt-get install default-jre-headless)",
)
pytestmark = needs_spark


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    from compat.history_export import export_history

    base = tmp_path_factory.mktemp("hist")
    data = base / "data"
    data.mkdir()
    events, finals = synthetic.generate(N_JOBS, seed=42)
    synthetic.write(str(data / "respqueue.db"), events, finals)
    export_history(str(data), str(base / "export"))
    return {"base": base, "data": data, "export": base / "export", "events": events, "finals": finals}


@pytest.fixture(scope="module")
def result(spark, history):
    from compat.analytics.job import run_analytics

    out = history["base"] / "out"
    data = run_analytics(str(history["export"]), str(out), spark=spark)
    return {"out": out, "data": data}


# ---- the expected figures, computed independently -------------------------------------------------------

def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    pos = p * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def minute(ms: int) -> int:
    return ms // 60000 * 60000


def expected(events: list[tuple], finals: list[tuple]) -> dict[str, list[dict]]:
    ev_by = defaultdict(Counter)
    for _ts, _prefix, queue, _jid, name, kind, *_ in events:
        ev_by[(queue, name or "")][kind] += 1
    fi_by = defaultdict(list)
    for f in finals:
        fi_by[(f[1], f[3] or "")].append(f)
    summary = []
    for key in sorted(set(ev_by) | set(fi_by)):
        fs = fi_by.get(key, [])
        waits = [f[8] - f[6] - (f[7] or 0) for f in fs if f[8] is not None]
        runs = [f[9] - f[8] for f in fs if f[8] is not None and f[9] is not None]
        mins = [minute(f[9]) for f in fs]
        tput = len(fs) / ((max(mins) - min(mins)) / 60000 + 1) if fs else 0.0
        row = {"queue": key[0], "name": key[1], "added": ev_by[key]["added"],
               "completed": sum(f[13] == "completed" for f in fs), "failed": sum(f[13] == "failed" for f in fs),
               "stalled": ev_by[key]["stalled"], "retried": ev_by[key]["retried"], "throughput_per_min": tput}
        for p in (50, 95, 99):
            row[f"wait_p{p}"] = pct(waits, p / 100)
            row[f"run_p{p}"] = pct(runs, p / 100)
        summary.append(row)

    tp = defaultdict(Counter)
    for f in finals:
        k = (f[1], f[3] or "", minute(f[9]))
        tp[k]["finished"] += 1
        tp[k][f[13]] += 1
    throughput = [{"queue": q, "name": n, "minute": m, "finished": c["finished"], "completed": c["completed"],
                   "failed": c["failed"]} for (q, n, m), c in sorted(tp.items())]

    bl = defaultdict(Counter)
    for ts, _p, queue, _j, name, kind, *_ in events:
        if kind == "added":
            bl[(queue, name or "", minute(ts))]["added"] += 1
    for f in finals:
        bl[(f[1], f[3] or "", minute(f[9]))]["finished"] += 1
    backlog, run = [], {}
    for (q, n, m), c in sorted(bl.items()):
        d = c["added"] - c["finished"]
        run[(q, n)] = run.get((q, n), 0) + d
        backlog.append({"queue": q, "name": n, "minute": m, "added": c["added"], "finished": c["finished"],
                        "delta": d, "backlog": run[(q, n)]})

    rt = Counter((f[1], f[3] or "", f[10]) for f in finals)
    retries = [{"queue": q, "name": n, "attempts_made": a, "jobs": c} for (q, n, a), c in sorted(rt.items())]

    fr = defaultdict(Counter)
    for f in finals:
        if f[13] == "failed":
            fr[(f[1], f[3] or "")][f[11] or ""] += 1
    reasons = []
    for (q, n) in sorted(fr):
        ranked = sorted(fr[(q, n)].items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        reasons += [{"queue": q, "name": n, "reason": r, "count": c, "rank": i + 1} for i, (r, c) in enumerate(ranked)]
    return {"summary": summary, "throughput": throughput, "backlog": backlog, "retries": retries,
            "failure_reasons": reasons}


def same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w), (g, w)
        for k, v in w.items():
            if isinstance(v, float) or isinstance(g[k], float):
                assert g[k] == pytest.approx(v, rel=1e-12, abs=1e-9), (k, g, w)
            else:
                assert g[k] == v, (k, g, w)


# ---- tests ------------------------------------------------------------------------------------------------

def test_workload_has_what_we_test():
    events, finals = synthetic.generate(N_JOBS, seed=42)
    kinds = Counter(e[5] for e in events)
    assert kinds["stalled"] > 10 and kinds["retried"] > 20 and kinds["failed"] > 20 and kinds["delayed"] > 50
    assert len(finals) < N_JOBS  # some jobs never finish (backlog)
    assert {f[10] for f in finals} >= {1, 2, 3}


@pytest.mark.parametrize("table", ["summary", "throughput", "backlog", "retries", "failure_reasons"])
def test_figures_equal_independent_computation(result, history, table):
    want = expected(history["events"], history["finals"])[table]
    same(result["data"][table], want)


@pytest.mark.parametrize("table", ["summary", "throughput", "backlog", "retries", "failure_reasons"])
def test_parquet_tables_hold_the_figures(result, table):
    import pyarrow.parquet as pq

    path = result["out"] / "tables" / table
    tbl = pq.read_table(str(path))
    rows = tbl.to_pylist()
    key = [k for k in ("queue", "name", "minute", "attempts_made", "rank") if k in tbl.column_names]
    rows.sort(key=lambda r: tuple(r[k] for k in key))
    same(rows, result["data"][table])


def test_live_store_source_gives_the_same_figures(spark, history, result, tmp_path):
    from compat.analytics.job import run_analytics

    live = run_analytics(str(history["data"]), str(tmp_path / "live"), spark=spark)
    same(live["summary"], result["data"]["summary"])
    # the snapshot export must not move the export watermark
    import sqlite3

    conn = sqlite3.connect(history["data"] / "respqueue.db")
    assert [r[0] for r in conn.execute("SELECT dest FROM history_watermarks")] == [str(history["export"])]


@pytest.fixture(scope="module")
def s3env(tmp_path_factory):
    from .test_history_export import moto_server

    yield from moto_server(tmp_path_factory)


def test_s3_export_source(spark, history, result, tmp_path, s3env, monkeypatch):
    """SRC = s3://bucket/prefix (a real moto server on loopback): same figures as the local export."""
    for k, v in s3env.items():
        monkeypatch.setenv(k, v)
    import boto3

    from compat.analytics.job import run_analytics
    from compat.history_export import export_history

    boto3.client("s3").create_bucket(Bucket="hist-an")
    export_history(str(history["data"]), "s3://hist-an/x")
    data = run_analytics("s3://hist-an/x", str(tmp_path / "s3out"), spark=spark)
    for table in ("summary", "backlog", "failure_reasons"):
        same(data[table], result["data"][table])


def test_empty_export(spark, tmp_path):
    from compat.analytics.job import run_analytics

    (tmp_path / "empty").mkdir()
    data = run_analytics(str(tmp_path / "empty"), str(tmp_path / "out"), spark=spark)
    assert data["summary"] == [] and data["backlog"] == []
    assert "no data" in (tmp_path / "out" / "report.html").read_text()


def test_report_is_self_contained(result):
    html = (result["out"] / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html and "<link" not in html and "src=" not in html
    assert html.count("<svg") == 4
    for title in ("Throughput", "Backlog", "Latency percentiles", "Top failure reasons"):
        assert title in html
    assert "odd/queue name" in html and "polyline" in html and "timeout" in html


def png_info(path: str) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the decompressed image data) of a PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    return w, h, len(set(raw))


def test_report_renders_in_headless_chromium(result, tmp_path):
    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium); .ci/run installs it")
    png = tmp_path / "report.png"
    html = result["out"] / "report.html"
    p = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1200,1600",
         f"file://{html}"],
        capture_output=True, text=True, timeout=90,
    )
    assert png.exists(), p.stderr[-2000:]
    w, h, distinct = png_info(str(png))
    assert (w, h) == (1200, 1600)
    assert distinct > 30  # a blank page decompresses to a handful of byte values


def test_cli_runs_the_job(spark, history, tmp_path, capsys):
    """`respqueue analytics SRC OUT --master local[2]` (in process: it reuses the active session)."""
    from respqueue.cli import main

    out = tmp_path / "cli"
    assert main(["analytics", str(history["export"]), str(out), "--master", "local[2]"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("wrote 5 tables to ")
    want = expected(history["events"], history["finals"])["summary"]
    assert len(lines) == len(want) + 1
    first = want[0]
    assert lines[0].startswith(f"{first['queue']}/{first['name']}: added {first['added']}, "
                               f"completed {first['completed']}, failed {first['failed']}")
    assert (out / "report.html").exists() and (out / "tables" / "summary").is_dir()
    assert not spark.sparkContext._jsc.sc().isStopped()
