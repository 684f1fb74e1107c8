"""The command line: --version, flags, RESPQUEUE_* environment twins, --config
TOML files, precedence (flags > env > file > defaults) and bad configurations."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

import pytest

from respqueue import __version__
from respqueue.config import Config

from .servers import ROOT, RawConn, ServerProcess, free_port


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESPQUEUE_")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _run(*args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "respqueue", *args], capture_output=True, text=True,
                          env=env or _env(), cwd=cwd or ROOT, timeout=30)


def _serve(args: list[str], port: int, env: dict[str, str] | None = None, cwd: str | None = None) -> ServerProcess:
    workdir = cwd or tempfile.mkdtemp(prefix="rqcli-")
    return ServerProcess([sys.executable, "-m", "respqueue", *args], port, workdir, env or _env())


def _config_get(port: int, name: str) -> bytes:
    c = RawConn(port)
    try:
        return c.call_raw("CONFIG", "GET", name)
    finally:
        c.close()


def test_version():
    for args in (["--version"],):
        p = _run(*args)
        assert p.returncode == 0
        assert p.stdout.strip() == f"respqueue {__version__}"


def test_installed_console_script():
    import shutil

    exe = shutil.which("respqueue")
    if exe is None:
        pytest.skip("the respqueue console script is not installed (pip install -e .); python -m is tested")
    p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.strip() == f"respqueue {__version__}"


def test_console_script_entry_point():
    from respqueue.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0


def test_help_lists_every_flag_with_its_env_twin():
    p = _run("serve", "--help")
    assert p.returncode == 0
    out = " ".join(p.stdout.split())
    for flag in ("--host", "--port", "--unixsocket", "--dir", "--requirepass", "--maxclients", "--timeout",
                 "--config", "--log-level"):
        assert flag in out
        twin = "RESPQUEUE_" + flag[2:].upper().replace("-", "_")
        assert twin in out, twin


def test_unknown_flag_exits_2():
    p = _run("serve", "--no-such-flag")
    assert p.returncode == 2
    assert "unrecognized arguments" in p.stderr


def test_flags_and_env_twins_load():
    flags = {"host": "0.0.0.0", "port": 7000, "unixsocket": "/tmp/x.sock", "dir": "/tmp/d", "requirepass": "pw",
             "maxclients": 5, "timeout": 9, "log_level": "debug", "config": None}
    cfg = Config.load(flags, environ={})
    for k, v in flags.items():
        if v is not None:
            assert getattr(cfg, k) == v
    env = {"RESPQUEUE_HOST": "::1", "RESPQUEUE_PORT": "7001", "RESPQUEUE_UNIXSOCKET": "/tmp/y.sock",
           "RESPQUEUE_DIR": "/tmp/e", "RESPQUEUE_REQUIREPASS": "pw2", "RESPQUEUE_MAXCLIENTS": "6",
           "RESPQUEUE_TIMEOUT": "3", "RESPQUEUE_LOG_LEVEL": "warning"}
    cfg = Config.load({}, environ=env)
    assert (cfg.host, cfg.port, cfg.unixsocket, cfg.dir, cfg.requirepass, cfg.maxclients, cfg.timeout,
            cfg.log_level) == ("::1", 7001, "/tmp/y.sock", "/tmp/e", "pw2", 6, 3, "warning")
    # flags beat the environment
    assert Config.load({"port": 7002}, environ=env).port == 7002


def test_precedence_flags_env_file(tmp_path):
    pf, pe, pc = free_port(), free_port(), free_port()
    conf = tmp_path / "rq.toml"
    conf.write_text(f'port = {pc}\nmaxclients = 11\ntimeout = 5\nrequirepass = "filepw"\n')
    d = str(tmp_path / "data")
    # file only
    srv = _serve(["serve", "--config", str(conf), "--dir", d], pc)
    try:
        c = RawConn(pc)
        assert c.call_raw("PING").startswith(b"-NOAUTH")
        assert c.call_raw("AUTH", "filepw") == b"+OK\r\n"
        assert c.call_raw("CONFIG", "GET", "maxclients") == b"*2\r\n$10\r\nmaxclients\r\n$2\r\n11\r\n"
        c.close()
    finally:
        srv.stop()
    # env beats file; the config file named by the environment too
    env = _env(RESPQUEUE_CONFIG=str(conf), RESPQUEUE_PORT=str(pe), RESPQUEUE_REQUIREPASS="")
    env["RESPQUEUE_MAXCLIENTS"] = "12"
    srv = _serve(["serve", "--dir", d], pe, env=env)
    try:
        c = RawConn(pe)
        assert c.call_raw("AUTH", "filepw") == b"+OK\r\n"  # empty env value: the file's stands
        assert c.call_raw("CONFIG", "GET", "maxclients") == b"*2\r\n$10\r\nmaxclients\r\n$2\r\n12\r\n"
        assert c.call_raw("CONFIG", "GET", "timeout") == b"*2\r\n$7\r\ntimeout\r\n$1\r\n5\r\n"
        c.close()
    finally:
        srv.stop()
    # flags beat env
    srv = _serve(["--port", str(pf), "--maxclients", "13", "--requirepass", "flagpw", "--dir", d], pf, env=env)
    try:
        c = RawConn(pf)
        assert c.call_raw("AUTH", "flagpw") == b"+OK\r\n"
        assert c.call_raw("CONFIG", "GET", "maxclients") == b"*2\r\n$10\r\nmaxclients\r\n$2\r\n13\r\n"
        c.close()
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "content,needle",
    [
        ("port = [", "rq.toml"),
        ("no_such_setting = 1\n", "no_such_setting"),
        ('port = "not a number"\n', "port"),
        ("port = [1, 2]\n", "port"),
    ],
)
def test_bad_config_file_exits_2(tmp_path, content, needle):
    conf = tmp_path / "rq.toml"
    conf.write_text(content)
    p = _run("serve", "--config", str(conf), "--port", str(free_port()))
    assert p.returncode == 2, p.stderr
    assert "bad configuration" in p.stderr and needle in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_missing_config_file_and_bad_env_exit_2(tmp_path):
    p = _run("serve", "--config", str(tmp_path / "missing.toml"))
    assert p.returncode == 2 and "bad configuration" in p.stderr and "missing.toml" in p.stderr
    p = _run("serve", env=_env(RESPQUEUE_PORT="abc"))
    assert p.returncode == 2 and "bad configuration" in p.stderr and "RESPQUEUE_PORT" in p.stderr, p.stderr
    p = _run("serve", "--port", "abc")
    assert p.returncode == 2 and "invalid int value" in p.stderr


def test_port_in_use_fails_cleanly(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = _run("serve", "--port", str(port), "--dir", str(tmp_path / "d"))
    assert p.returncode != 0
    assert "Traceback" not in p.stderr + p.stdout


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_serve_defaults(tmp_path):
    if not _port_free(6379):
        pytest.skip("port 6379 is in use on this machine; the default-port test needs it free")
    srv = _serve(["serve"], 6379, cwd=str(tmp_path))
    try:
        c = RawConn(6379)
        assert c.call_raw("SET", "k", "v") == b"+OK\r\n"
        assert c.call_raw("CONFIG", "GET", "bind") == b"*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n"
        c.close()
        assert (tmp_path / "respqueue-data").is_dir()
    finally:
        srv.stop()
