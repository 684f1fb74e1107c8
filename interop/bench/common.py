"""Shared helpers for the benchmarks: start respqueue and redis-server side by side."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tests.servers import free_port, respqueue_argv, respqueue_env, wait_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Proc:
    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.port = port
        self.workdir = tempfile.mkdtemp(prefix=f"bench-{name}-")
        self.proc = subprocess.Popen(argv + [], cwd=self.workdir, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_split(self) -> tuple[float, float]:
        """User+system CPU seconds used so far by the server process itself (respqueue: its event
        loop) and by its live child processes (respqueue: the writer)."""
        ticks = os.sysconf("SC_CLK_TCK")
        out = [0, 0]
        for i, pid in enumerate([self.pid, *_children(self.pid)]):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[min(i, 1)] += int(parts[11]) + int(parts[12])
        return out[0] / ticks, out[1] / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_respqueue(*extra: str) -> Proc:
    port = free_port()
    return Proc("respqueue", respqueue_argv(port, "data", "--log-level", "warning", *extra), port, respqueue_env())


def start_redis(*extra: str) -> Proc:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *extra]
    return Proc("redis", argv, port)


#: PostgreSQL settings that decide durability; start_postgres leaves them at their defaults and
#: the runners print what the server reports for them
PG_DURABILITY_SETTINGS = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers")


def postgres_bin_dir() -> str | None:
    """The folder holding initdb and postgres: $PG_BIN, else the PATH, else /usr/lib/postgresql/N/bin
    (newest first); None when there is none."""
    cands = [os.environ.get("PG_BIN", "")]
    exe = shutil.which("postgres")
    if exe:
        cands.append(os.path.dirname(os.path.realpath(exe)))
    cands += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0, reverse=True)
    for d in cands:
        if d and all(os.access(os.path.join(d, x), os.X_OK) for x in ("initdb", "postgres")):
            return d
    return None


class PgProc:
    """A throwaway PostgreSQL server: initdb into a temp folder, postgres on a free TCP port of
    127.0.0.1 (trust auth, unix socket in the same temp folder), default durability settings.
    As root it runs as the ``postgres`` user (postgres refuses root). ``cpu_split`` counts the
    whole postmaster tree: the postmaster, its live children (backends, WAL writer, checkpointer,
    ...) and, through cutime/cstime, children that already exited."""

    name = "postgres"

    def __init__(self, bindir: str, *extra: str) -> None:
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="bench-postgres-")
        user: str | None = None
        if os.geteuid() == 0:
            import pwd

            user = "postgres"
            pw = pwd.getpwnam(user)
            os.chown(self.workdir, pw.pw_uid, pw.pw_gid)
        kw: dict = {"user": user, "group": user, "extra_groups": []} if user else {}
        data = os.path.join(self.workdir, "data")
        subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                        "--no-locale"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
        self.log = open(os.path.join(self.workdir, "log"), "wb")
        self.proc = subprocess.Popen([os.path.join(bindir, "postgres"), "-D", data, "-p", str(self.port),
                                      "-k", self.workdir, "-c", "listen_addresses=127.0.0.1", *extra],
                                     cwd=self.workdir, stdout=self.log, stderr=self.log, **kw)
        try:
            self._wait_ready(os.path.join(self.workdir, "log"))
        except BaseException:
            self.stop()
            raise
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.bindir = bindir

    def _wait_ready(self, log: str, timeout: float = 60.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {open(log).read()[-2000:]}")
            with open(log) as f:
                if "ready to accept connections" in f.read():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"postgres did not start in {timeout:.0f} s")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def settings(self) -> dict[str, str]:
        """What the server reports for PG_DURABILITY_SETTINGS (via psql; {} without psql)."""
        psql = os.path.join(self.bindir, "psql")
        if not os.access(psql, os.X_OK):
            return {}
        sql = "select name, setting, unit from pg_settings where name in (%s)" % ",".join(f"'{n}'" for n in PG_DURABILITY_SETTINGS)
        out = subprocess.run([psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-At", "-F", "\t", "-c", sql],
                             capture_output=True, text=True).stdout
        res = {}
        for line in out.splitlines():
            name, setting, unit = (line.split("\t") + ["", ""])[:3]
            res[name] = f"{setting} x {unit}" if unit and unit not in ("", "s", "ms") else setting
        return res

    def cpu_split(self) -> tuple[float, float]:
        """(postmaster, everything below it) user+system CPU seconds so far; exited children count
        through the cutime/cstime of whoever reaped them."""
        ticks = os.sysconf("SC_CLK_TCK")
        out = [0, 0]
        todo = [(self.pid, 0)]
        while todo:
            pid, depth = todo.pop()
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[min(depth, 1)] += int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])
            todo += [(c, depth + 1) for c in _children(pid)]
        return out[0] / ticks, out[1] / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # postgres' fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_postgres(*extra: str) -> PgProc | None:
    """A PgProc, or None (with the reason on stderr) when PostgreSQL's binaries are not installed."""
    bindir = postgres_bin_dir()
    if bindir is None:
        print("postgres: initdb/postgres not found ($PG_BIN, PATH, /usr/lib/postgresql/*/bin); "
              "skipping the PostgreSQL target", file=sys.stderr)
        return None
    return PgProc(bindir, *extra)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def machine() -> str:
    return f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
