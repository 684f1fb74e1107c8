"""The Dockerfile, docker-compose.yml and the example BullMQ worker (issue 4, item 8).

`docker compose config` validates the compose file where a docker compose CLI exists; the
structural tests need no docker: the image's CMD uses flags that `respqueue serve` accepts,
the compose file has the data volume, the healthcheck and the worker pointing at the
respqueue service, and the example worker really processes jobs on a respqueue server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from .servers import ROOT, start_respqueue

DOCKERFILE = os.path.join(ROOT, "Dockerfile")
COMPOSE = os.path.join(ROOT, "docker-compose.yml")
WORKER_DIR = os.path.join(ROOT, "interop", "example-worker")


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for line in open(DOCKERFILE).read().splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        instr, _, rest = buf.strip().partition(" ")
        out.append((instr.upper(), rest.strip()))
        buf = ""
    return out


def _compose() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with the test extra's moto[server])")
    return yaml.safe_load(open(COMPOSE))


def _compose_cli() -> list[str] | None:
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        try:
            p = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return cmd
    return None


def test_docker_compose_config_validates():
    cmd = _compose_cli()
    if cmd is None:
        pytest.skip("no docker compose CLI")
    p = subprocess.run([*cmd, "-f", COMPOSE, "config"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "respqueue" in p.stdout and "worker" in p.stdout


def test_dockerfile_structure():
    ins = _dockerfile()
    names = [i for i, _ in ins]
    assert ins[0] == ("FROM", "python:3.11-slim")
    args = dict(ins)  # the last of each kind
    assert "6379" in args["EXPOSE"].split()
    assert args["VOLUME"] in ("/data", '["/data"]')
    assert any(i == "RUN" and re.search(r"\bpip install \.(\s|$)", a) for i, a in ins)
    # everything that `pip install .` packages is copied in (pyproject's packages.find)
    copied = " ".join(a for i, a in ins if i == "COPY")
    for needed in ("pyproject.toml", "setup.py", "README.md", "respqueue", "compat", "lua"):
        assert needed in copied, needed
        assert os.path.exists(os.path.join(ROOT, needed)), needed
    assert names.index("EXPOSE") > names.index("FROM") and "HEALTHCHECK" in names
    cmd = json.loads(args["CMD"])
    assert cmd[:2] == ["respqueue", "serve"]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    assert cmd[cmd.index("--dir") + 1] == "/data"


def test_dockerfile_cmd_flags_are_accepted_by_the_cli(tmp_path):
    cmd = json.loads(dict(_dockerfile())["CMD"])
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "respqueue", "serve", "--help"], capture_output=True, text=True,
                       env=env, timeout=30)
    assert p.returncode == 0
    flags = [a for a in cmd[2:] if a.startswith("--")]
    assert flags
    for f in flags:
        assert re.search(r"(^|\s)" + re.escape(f) + r"\b", p.stdout), f
    # and the parser takes the whole command line
    from respqueue.cli import build_parser

    ns = build_parser().parse_args(cmd[1:])
    assert ns.cmd == "serve" and ns.host == "0.0.0.0" and ns.dir == "/data"


def test_healthcheck_pings_a_real_server():
    """The Dockerfile's healthcheck one-liner answers 0 against a live server, non-zero without one."""
    ins = _dockerfile()
    hc = dict(ins)["HEALTHCHECK"]
    argv = json.loads(hc[hc.index("CMD") + 3:].strip())
    assert argv[:2] == ["python", "-c"]
    code = argv[2]
    srv = start_respqueue("--durability", "memory")
    try:
        ok = subprocess.run([sys.executable, "-c", code.replace("6379", str(srv.port))], timeout=30)
        assert ok.returncode == 0
    finally:
        srv.stop()
    bad = subprocess.run([sys.executable, "-c", code.replace("6379", str(srv.port))], capture_output=True, timeout=30)
    assert bad.returncode != 0
    # the compose file's healthcheck is the same probe
    comp = _compose()
    assert comp["services"]["respqueue"]["healthcheck"]["test"] == ["CMD", "python", "-c", code]


def test_compose_structure():
    comp = _compose()
    svcs = comp["services"]
    rq = svcs["respqueue"]
    assert rq["build"] == "."
    assert "6379:6379" in rq["ports"]
    vols = rq["volumes"]
    named = [v.split(":")[0] for v in vols if v.split(":")[1] == "/data"]
    assert named and named[0] in comp["volumes"]  # a named volume at /data
    assert rq["healthcheck"]["test"][0] == "CMD"
    w = svcs["worker"]
    assert w["depends_on"]["respqueue"]["condition"] == "service_healthy"
    assert w["environment"]["REDIS_HOST"] == "respqueue"  # the service, by name
    assert str(w["environment"]["REDIS_PORT"]) == "6379"
    build = w["build"] if isinstance(w["build"], str) else w["build"]["context"]
    assert os.path.normpath(os.path.join(ROOT, build)) == WORKER_DIR
    assert os.path.exists(os.path.join(WORKER_DIR, "Dockerfile"))
    # every RESPQUEUE_* setting named in the compose file is a real setting
    from respqueue.config import Config

    text = open(COMPOSE).read()
    for name in set(re.findall(r"RESPQUEUE_([A-Z_]+)", text)):
        assert name.lower() in Config.__dataclass_fields__, name


def test_example_worker_package_is_pinned_like_interop():
    pkg = json.load(open(os.path.join(WORKER_DIR, "package.json")))
    interop = json.load(open(os.path.join(ROOT, "interop", "package.json")))["dependencies"]
    for name, version in pkg["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), (name, version)  # exact pins
        assert interop.get(name) == version, name
    assert "bullmq" in pkg["dependencies"]
    src = open(os.path.join(WORKER_DIR, "worker.js")).read()
    assert "'respqueue'" in src  # the default host is the compose service name


def test_example_worker_processes_jobs_on_respqueue():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not os.path.isdir(os.path.join(ROOT, "interop", "node_modules", "bullmq")):
        pytest.skip("interop/node_modules is missing (cd interop && npm ci)")
    srv = start_respqueue()
    try:
        env = dict(os.environ, REDIS_HOST="127.0.0.1", REDIS_PORT=str(srv.port), QUEUE_NAME="demo",
                   PRODUCE="5", EXIT_AFTER="5")
        # node finds bullmq in interop/node_modules, the parent folder's
        p = subprocess.run([node, "worker.js"], cwd=WORKER_DIR, env=env, capture_output=True, text=True, timeout=90)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "worker ready on queue \"demo\"" in p.stdout
        done = re.findall(r"completed job (\d+) \(sum\): (\{.*\})", p.stdout)
        assert sorted(int(i) for i, _ in done) == [1, 2, 3, 4, 5]
        sums = {int(i): json.loads(r)["sum"] for i, r in done}
        assert sums == {i: 3 * i for i in range(1, 6)}  # job i holds [i-1, i, i+1]
        import redis

        r = redis.Redis(port=srv.port)
        assert r.zcard("bull:demo:completed") == 5
        r.close()
    finally:
        srv.stop()


def test_image_build_steps_install_and_run(tmp_path):
    """What the image does, without a docker daemon: copy exactly the Dockerfile's COPY sources,
    `pip install` them into a fresh venv (dependencies from this environment), delete the
    sources as the image does, then run the image's CMD (on a free port and a temp /data)."""
    ins = _dockerfile()
    src = tmp_path / "src"
    src.mkdir()
    for i, a in ins:
        if i != "COPY":
            continue
        parts = a.split()
        assert not parts[0].startswith("--"), a
        *sources, dest = parts
        for s in sources:
            target = src / dest / os.path.basename(s) if dest.endswith("/") or len(sources) > 1 else src / dest
            p = os.path.join(ROOT, s)
            if os.path.isdir(p):
                # (not the extensions an editable install compiled in place: the build makes its own)
                shutil.copytree(p, target, ignore=shutil.ignore_patterns("__pycache__", "node_modules", "*.so",
                                                                       "_speedups_manifest.json"))
            else:
                shutil.copy(p, target)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--disable-pip-version-check", str(src)], capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path))
    assert pip.returncode == 0, pip.stdout + pip.stderr
    shutil.rmtree(src)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import lua, respqueue; print(respqueue.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert where.returncode == 0 and where.stdout.startswith(str(venv)), where.stdout + where.stderr
    cmd = json.loads(dict(ins)["CMD"])
    exe = str(venv / "bin" / cmd[0])
    assert os.path.exists(exe), "the console script of CMD is installed"
    data = str(tmp_path / "data")
    argv = [exe, *[data if a == "/data" else a for a in cmd[1:]]]
    from .servers import ServerProcess, free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("RESPQUEUE_")}
    srv = ServerProcess([*argv, "--port", str(port)], port, str(tmp_path), env)
    try:
        import redis

        r = redis.Redis(port=port)
        assert r.set("k", "v") and r.eval("return redis.call('get', KEYS[1])", 1, "k") == b"v"
        r.close()
    finally:
        srv.stop()
    assert "0.0.0.0" in srv.output()
    assert os.path.exists(os.path.join(data, "respqueue.db"))
    if shutil.which("gcc") or shutil.which("cc"):  # the image installs gcc for its build: compiled hot paths
        assert "compiled hot paths: on" in srv.output(), srv.output()[-2000:]
