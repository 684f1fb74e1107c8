"""Real servers for the tests: respqueue as a subprocess, redis-server from Debian."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import hiredis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T], timeout: float = 100.0) -> T:
    """``asyncio.run(coro)`` in a thread of its own, waited for at most ``timeout`` seconds.

    The Python BullMQ client's tasks run in that loop. Under ``asyncio.run`` in the test's own thread a hang
    there could outlive pytest-timeout: its one alarm can land in an event-loop callback, where asyncio logs
    and drops the exception, and ``asyncio.run`` then waits for tasks that swallow their cancellation. Here
    the test fails with the loop thread's stack instead, and the (daemon) thread is left behind."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001  (handed to the test's thread)
            box["error"] = e

    t = threading.Thread(target=target, name="run_async", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        frame = sys._current_frames().get(t.ident or 0)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        raise AssertionError(f"the coroutine ran past {timeout} s; its thread's stack:\n{stack}")
    if "error" in box:
        raise box["error"]
    return box["value"]


def compile_sources() -> None:
    """Compile this checkout's packages into their (git-ignored) __pycache__ folders, as pip does at install.

    Every test that starts a server, a CLI or a client runs a fresh interpreter from this checkout. With
    PYTHONDONTWRITEBYTECODE set (this environment and the Docker image set it) no bytecode is ever written,
    so each of those starts compiled every module again: ~1 s more per server start on the 2-core VM. Stale
    files are harmless: a .pyc whose source changed since is ignored (mtime and size are checked)."""
    import compileall

    for pkg in ("respqueue", "compat", "lua"):
        compileall.compile_dir(os.path.join(ROOT, pkg), quiet=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing answered on port {port}")


class ServerProcess:
    """A server process on a free port, stopped by :meth:`stop`."""

    def __init__(self, argv: list[str], port: int, workdir: str, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "server.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir, env=env)
        try:
            wait_port(port, self.proc)
        except Exception:
            self.stop()
            raise

    def stop(self, sig: int | None = None) -> int | None:
        if self.proc.poll() is None:
            if sig is None:
                self.proc.terminate()
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def output(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def start_respqueue(
    *extra: str, port: int | None = None, workdir: str | None = None, debug_command: str | None = "local"
) -> ServerProcess:
    """respqueue on a free port; DEBUG is enabled for local clients unless ``debug_command`` is None."""
    port = port or free_port()
    if debug_command is not None and "--enable-debug-command" not in extra:
        extra = ("--enable-debug-command", debug_command, *extra)
    workdir = workdir or tempfile.mkdtemp(prefix="rq-")
    return ServerProcess(respqueue_argv(port, os.path.join(workdir, "data"), *extra), port, workdir, respqueue_env())


def run_logged(fn: Callable[[int], Any], *extra: str) -> tuple[Any, bool, str]:
    """``fn(port)`` against a fresh respqueue logging at debug level (``extra``: more flags): what ``fn``
    returned, whether the server was still running after it, and the server's log; the server is stopped and
    its files removed."""
    srv = start_respqueue("--log-level", "debug", *extra)
    try:
        res = fn(srv.port)
        alive = srv.proc.poll() is None
        log = srv.output()
    finally:
        srv.stop()
        shutil.rmtree(srv.workdir, ignore_errors=True)
    return res, alive, log


def respqueue_argv(port: int, datadir: str, *extra: str) -> list[str]:
    """``respqueue serve`` on ``port`` with its data in ``datadir``, run by this interpreter."""
    return [sys.executable, "-m", "respqueue", "serve", "--port", str(port), "--dir", datadir, *extra]


def respqueue_env() -> dict[str, str]:
    """This process's environment with this checkout first on PYTHONPATH (the server runs its code)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def start_redis(*extra: str, debug_command: str | None = "local") -> ServerProcess:
    """redis-server on a free port; DEBUG is enabled for local clients unless ``debug_command`` is None."""
    exe = redis_server_path()
    if exe is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="redis-")
    if debug_command is not None and "--enable-debug-command" not in extra:
        extra = ("--enable-debug-command", debug_command, *extra)
    return ServerProcess([*redis_argv(exe, port, workdir), *extra], port, workdir)


def redis_argv(exe: str, port: int, workdir: str) -> list[str]:
    """A reference redis-server on loopback without persistence, its files in ``workdir``."""
    return [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir]


def encode_command(args: tuple[Any, ...] | list[Any]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, (int, float)):
            a = repr(a).encode() if isinstance(a, float) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RawConn:
    """A raw RESP connection that returns each reply's exact bytes."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = hiredis.Reader()
        self.pending = b""

    def send(self, *args: Any) -> None:
        self.sock.sendall(encode_command(args))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_raw(self) -> bytes:
        """Read exactly one reply and return its bytes."""
        buf = bytearray()
        reader = hiredis.Reader(notEnoughData=Ellipsis)
        data = self.pending
        self.pending = b""
        while True:
            if data:
                # feed byte ranges until one reply completes, to keep leftovers
                reader.feed(data)
                buf += data
                r = reader.gets()
                if r is not Ellipsis:
                    # find the exact end: re-parse prefix lengths
                    end = _reply_end(bytes(buf))
                    self.pending = bytes(buf[end:])
                    return bytes(buf[:end])
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("server closed the connection")

    def call_raw(self, *args: Any) -> bytes:
        self.send(*args)
        return self.read_raw()

    def close(self) -> None:
        self.sock.close()


def _reply_end(buf: bytes, pos: int = 0) -> int:
    """Offset just past the RESP value starting at ``pos``."""
    t = buf[pos : pos + 1]
    nl = buf.index(b"\r\n", pos)
    line = buf[pos + 1 : nl]
    pos = nl + 2
    if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
        return pos
    if t in (b"$", b"=", b"!"):
        n = int(line)
        return pos if n < 0 else pos + n + 2
    if t in (b"*", b"~", b">", b"%", b"|"):
        n = int(line)
        if n < 0:
            return pos
        if t in (b"%", b"|"):
            n *= 2
        for _ in range(n):
            pos = _reply_end(buf, pos)
        return pos
    raise ValueError(f"bad RESP type byte {t!r}")


def chromium() -> str | None:
    """Debian's chromium (or another Chrome) for the page tests; None when none is installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def chromium_cmd(exe: str, profile: str, *extra: str) -> list[str]:
    """A headless Chromium command line with its own profile and no network of its own; ``extra`` adds the
    window size, time budget and what to write (--screenshot=PNG or --dump-dom)."""
    return [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *extra,
    ]


@contextlib.contextmanager
def env_var(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` for the block (servers started in it inherit it), then as it was."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
