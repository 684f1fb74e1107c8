"""Progress output of long CLI work (respqueue/progress.py): a \\r-redrawn bar with rate and ETA on a
terminal, plain periodic lines with counts elsewhere, nothing with --quiet; the summary on stdout is
unchanged. The CLI runs as a real process, on a pipe or under a pseudo-terminal (the pty module)."""

from __future__ import annotations

import fcntl
import importlib.util
import io
import os
import pty
import re
import select
import shutil
import sqlite3
import struct
import subprocess
import sys
import termios
import time

import pytest

from respqueue.progress import Progress, format_bytes, format_eta

from .servers import ROOT
from .test_backup import _bucket, _env, make_store, read_strings, s3  # noqa: F401 - s3 is a fixture

ROWS = 20_000  # 20,000 rows of 400 bytes: a ~10 MiB store, three online-backup steps of 1,024 pages


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = str(tmp_path_factory.mktemp("progress") / "data")
    make_store(d, {b"k%05d" % i: bytes([i % 251]) * 400 for i in range(ROWS)})
    return d


def cli(*args: str, interval: str | None = "0", **extra: str) -> subprocess.CompletedProcess[str]:
    env = _env(**extra, **({"RESPQUEUE_PROGRESS_INTERVAL": interval} if interval is not None else {}))
    return subprocess.run(
        [sys.executable, "-m", "respqueue", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def cli_in_pty(*args: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (stdout on a pipe): (exit status, stdout, what the
    terminal received)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    p = subprocess.Popen(
        [sys.executable, "-m", "respqueue", *args], stdout=subprocess.PIPE, stderr=slave, env=_env(), cwd=ROOT
    )
    os.close(slave)
    out = bytearray()
    deadline = time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    stdout = p.stdout.read().decode() if p.stdout else ""
    p.wait(30)
    return p.returncode, stdout, out.decode()


LINE = re.compile(
    r"^(?P<label>[a-z0-9 :]+): (?P<done>done, )?(?P<amount>.+?)(?: \((?P<pct>\d+)%\))?, (?P<rate>.+?/s)"
    r"(?:, (?:ETA|in) \d+:\d\d)?$"
)


def plain_lines(stderr: str, label: str) -> list[re.Match[str]]:
    found = [LINE.match(line) for line in stderr.splitlines() if line.startswith(label + ":")]
    assert found and all(found), stderr
    return found  # type: ignore[return-value]


# ---- the module ---------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_bar_on_a_terminal_redraws_with_rate_and_eta():
    clock, out = Clock(), io.StringIO()
    p = Progress("export", 1000, "rows", stream=out, tty=True, clock=clock)
    for _ in range(4):
        clock.t += 1
        p.update(200)
    p.close()
    text = out.getvalue()
    frames = text.split("\r")[1:]
    assert frames[0] == "export [####................] 20% 200/1,000 rows 200 rows/s ETA 0:04\x1b[K"
    assert frames[3] == "export [################....] 80% 800/1,000 rows 200 rows/s ETA 0:01\x1b[K"
    assert frames[-1] == "export [################....] 80% 800/1,000 rows 200 rows/s in 0:04\x1b[K\n"
    assert "\n" not in text[:-1]  # one terminal line, redrawn


def test_bar_fits_the_terminal_width():
    clock = Clock()
    p = Progress("restore: downloading", 25 << 20, "B", stream=io.StringIO(), tty=True, clock=clock, columns=70)
    clock.t += 1
    p.set(10 << 20)
    assert p.render_bar() == "restore: downloading [###.....] 40% 10.0/25.0 MiB 10.0 MiB/s ETA 0:02"  # 69 columns
    p.columns = 100
    assert "[########............]" in p.render_bar()  # room for the full 20
    p.columns = 60  # too narrow for a bar: the figures stay, the bar goes
    assert p.render_bar() == "restore: downloading 40% 10.0/25.0 MiB 10.0 MiB/s ETA 0:02"


def test_bar_redraws_at_most_ten_times_a_second():
    clock, out = Clock(), io.StringIO()
    p = Progress("copy", 10_000, "B", stream=out, tty=True, clock=clock)
    for _ in range(1000):
        clock.t += 0.001
        p.update(10)
    assert out.getvalue().count("\r") == 10  # the first draw, then one per 0.1 s
    p.close()


def test_plain_lines_every_interval_then_a_done_line():
    clock, out = Clock(), io.StringIO()
    p = Progress("repair", 1000, "rows", stream=out, tty=False, interval=2, clock=clock)
    for _ in range(10):
        clock.t += 0.5
        p.update(100)
    p.close()
    assert out.getvalue().splitlines() == [
        "repair: 400/1,000 rows (40%), 200 rows/s, ETA 0:03",
        "repair: 800/1,000 rows (80%), 200 rows/s, ETA 0:01",
        "repair: done, 1,000/1,000 rows (100%), 200 rows/s, in 0:05",
    ]
    assert "\r" not in out.getvalue()


def test_quick_work_and_quiet_print_nothing():
    clock, out = Clock(), io.StringIO()
    with Progress("quick", 10, "rows", stream=out, tty=False, interval=2, clock=clock) as p:
        p.update(10)
    with Progress("quiet", 10, "rows", stream=out, tty=True, quiet=True, clock=clock) as p:
        clock.t += 5
        p.update(5)
    assert out.getvalue() == ""


def test_unknown_total_failure_and_formats():
    clock, out = Clock(), io.StringIO()
    p = Progress("enqueue", None, "jobs", stream=out, tty=True, clock=clock)
    clock.t += 2
    p.set(5000)
    assert p.eta() is None and out.getvalue() == "\renqueue 5,000 jobs 2,500 jobs/s\x1b[K"
    with pytest.raises(RuntimeError), p:
        raise RuntimeError("boom")
    assert out.getvalue().endswith("\x1b[K\n")  # the bar's line ended, no final state drawn
    assert (format_bytes(512), format_bytes(3 * 1024 * 1024), format_eta(3725), format_eta(59.6)) == (
        "512 B",
        "3.0 MiB",
        "1:02:05",
        "1:00",
    )


# ---- the commands -------------------------------------------------------------------------------
def test_backup_and_restore_print_plain_progress_lines_off_a_terminal(store, tmp_path):
    dest = str(tmp_path / "b.db")
    p = cli("backup", dest, "--dir", store)
    assert p.returncode == 0, p.stderr
    size = os.path.getsize(dest)
    assert re.fullmatch(
        rf"wrote {re.escape(dest)} \({size} bytes, sha256 [0-9a-f]{{64}}\)\n"
        rf"wrote {re.escape(dest)}\.meta\.json\n",
        p.stdout,
    )
    copying = plain_lines(p.stderr, "backup: copying")
    pcts = [int(m["pct"]) for m in copying if not m["done"]]
    assert len(pcts) >= 3 and pcts == sorted(pcts) and pcts[-1] == 100, p.stderr  # several steps, in order
    mib = format_bytes(size)
    assert copying[-1]["done"] and copying[-1]["amount"] == f"{mib.split()[0]}/{mib}"
    assert plain_lines(p.stderr, "backup: sha256")[-1]["done"]
    assert "\r" not in p.stderr

    r = cli("restore", dest, "--dir", str(tmp_path / "restored"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"restored {dest}, created ") and r.stdout.count("\n") == 1
    assert plain_lines(r.stderr, "restore: copying")[-1]["done"]
    assert plain_lines(r.stderr, "restore: sha256")[-1]["done"]
    assert len(read_strings(str(tmp_path / "restored" / "respqueue.db"))) == ROWS


def test_s3_upload_and_download_progress(store, tmp_path, s3):  # noqa: F811 - the s3 fixture
    _bucket(s3, "rq-progress")
    p = cli("backup", "s3://rq-progress/p", "--dir", store, **s3)
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(
        r"wrote (s3://rq-progress/p/respqueue-\S+\.db) \(\d+ bytes, sha256 [0-9a-f]{64}\)\nwrote \1\.meta\.json\n",
        p.stdout,
    )
    up = plain_lines(p.stderr, "backup: uploading")
    size = format_bytes(os.path.getsize(os.path.join(store, "respqueue.db")))
    assert up[-1]["done"] and up[-1]["amount"] == f"{size.split()[0]}/{size}", p.stderr
    r = cli("restore", "s3://rq-progress/p", "--dir", str(tmp_path / "r"), **s3)
    assert r.returncode == 0, r.stderr
    down = plain_lines(r.stderr, "restore: downloading")
    assert down[-1]["done"] and down[-1]["amount"] == up[-1]["amount"]
    assert len(read_strings(str(tmp_path / "r" / "respqueue.db"))) == ROWS


def test_quiet_and_the_default_interval_keep_stderr_empty(store, tmp_path):
    q = cli("backup", str(tmp_path / "q.db"), "--dir", store, "--quiet")
    assert q.returncode == 0 and q.stderr == "" and q.stdout.startswith("wrote ")
    # at the default 2 s interval a backup this small is done before the first line is due
    d = cli("backup", str(tmp_path / "d.db"), "--dir", store, interval=None)
    assert d.returncode == 0 and d.stderr == ""
    r = cli("restore", str(tmp_path / "q.db"), "--dir", str(tmp_path / "rq"), "-q")
    assert r.returncode == 0 and r.stderr == ""


def test_repair_counts_rows(store, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    src = sqlite3.connect(os.path.join(store, "respqueue.db"))
    dst = sqlite3.connect(str(d / "respqueue.db"))
    src.backup(dst)
    src.close()
    dst.close()
    p = cli("repair", "--dir", str(d))
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(rf"{re.escape(str(d))}/respqueue\.db: recovered {ROWS} rows; the old file is \S+\n", p.stdout)
    lines = plain_lines(p.stderr, "repair: copying rows")
    assert lines[0]["amount"] == f"1,000/{ROWS:,} rows" and lines[0]["pct"] == "5"
    assert lines[-1]["done"] and lines[-1]["amount"] == f"{ROWS:,}/{ROWS:,} rows"


def test_backup_under_a_terminal_draws_a_bar(store, tmp_path):
    dest = str(tmp_path / "tty.db")
    rc, stdout, term = cli_in_pty("backup", dest, "--dir", store)
    assert rc == 0, term
    assert stdout.startswith(f"wrote {dest} (") and stdout.endswith(f"wrote {dest}.meta.json\n")
    assert "\rbackup: copying [" in term and "ETA " in term and "MiB/s" in term, term
    assert re.search(r"\rbackup: copying \[#{20}\] 100% [^\r]* in \d+:\d\d\x1b\[K\r?\n", term), term
    assert "\rbackup: sha256 [" in term
    assert all(len(frame.split("\x1b")[0]) <= 79 for frame in term.split("\r")), term  # an 80-column terminal
    rc, stdout, term = cli_in_pty("backup", str(tmp_path / "tty-q.db"), "--dir", store, "--quiet")
    assert rc == 0 and term == "" and stdout.startswith("wrote ")


needs_arrow = pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pip install pyarrow")


@needs_arrow
def test_history_export_counts_rows(tmp_path):
    from compat.analytics import synthetic

    db = str(tmp_path / "h.db")
    assert synthetic.main([db, "200"]) == 0
    p = cli("history", "export", str(tmp_path / "out"), "--dir", db)
    assert p.returncode == 0, p.stderr
    m = re.match(r"exported (\d+) events and (\d+) final records", p.stdout)
    assert m and p.stdout.count("\n") == 1, p.stdout
    total = int(m[1]) + int(m[2])
    lines = plain_lines(p.stderr, "history export: writing")
    assert lines[-1]["done"] and lines[-1]["amount"] == f"{total:,}/{total:,} rows"
    assert len(lines) > 2


needs_spark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None
    or importlib.util.find_spec("bullmq") is None
    or shutil.which("java") is None,
    reason="needs pyspark and a Java runtime (pip install -e '.[test,spark]') and the bullmq package",
)


@needs_spark
def test_enqueue_shows_jobs_added_as_they_go(spark, rq_server):
    import redis

    from respqueue.pipeline import enqueue

    r = redis.Redis(port=rq_server.port)
    r.flushall()
    r.set("bull:progress:id", 41)  # earlier jobs of the queue: the display counts from here
    out = io.StringIO()

    def factory(label: str, total: int | None = None, unit: str = "") -> Progress:
        return Progress(label, total, unit, stream=out, tty=False, interval=0)

    n = 4000
    df = spark.createDataFrame([(i,) for i in range(n)], ["i"]).repartition(2)
    # (the counter read every 10 ms: 4,000 jobs take a few tenths of a second, the default 0.25 s could miss them)
    res = enqueue(
        df, "progress", connection={"host": "127.0.0.1", "port": rq_server.port}, batch_size=100, progress=factory,
        progress_every=0.01,
    )
    assert res.total == n and res.summary().startswith(f"added {n} jobs to progress from 2 partition(s) in ")
    lines = plain_lines(out.getvalue(), "enqueue: progress")
    counts = [int(m["amount"].split("/")[0].replace(",", "")) for m in lines]
    assert counts == sorted(counts) and any(0 < c < n for c in counts), out.getvalue()  # seen while adding
    assert all(m["amount"].endswith(f"/{n:,} jobs") for m in lines)
    assert lines[-1]["done"] and lines[-1]["amount"] == f"{n:,}/{n:,} jobs"
    assert r.llen("bull:progress:wait") == n
