"""The compiled hot paths (respqueue/speedups.py, setup.py): the build is what runs, the guard keeps a stale or
partial build from running, and the pure modules still serve BullMQ the same way.

The install command of README.md compiles the modules of ``speedups.MODULES`` with mypyc where it can, so the
rest of the suite runs the compiled code; these tests check that it did (where a compiler and mypyc are
there), that mypy's check which mypyc makes first still passes (an edit that fails it makes the install fall
back to pure Python, silently slower), and that ``RESPQUEUE_PURE=1`` and a stale build both run the sources.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest

from respqueue import speedups

from .servers import ROOT, run_logged

NODE_DRIVER = os.path.join(ROOT, "interop", "bench", "bullmq_bench.js")
HAVE_MYPYC = importlib.util.find_spec("mypyc") is not None
HAVE_CC = shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc") is not None
CAN_BUILD = HAVE_MYPYC and HAVE_CC


@pytest.mark.skipif(not CAN_BUILD, reason="no mypyc or no C compiler here: the install is pure Python")
def test_the_suite_runs_the_compiled_build() -> None:
    """Where the install could compile, it did, from the sources now in the checkout (else: reinstall)."""
    why = speedups._check()
    assert why is None, f"the compiled hot paths are not in use: {why}"
    import compat.native.move_to_finished as mtf

    assert mtf.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), mtf.__file__
    assert speedups.ACTIVE


@pytest.mark.skipif(not HAVE_MYPYC, reason="mypy is not installed")
def test_mypyc_check_passes() -> None:
    """mypy's check with the build's flags: an error there makes ``pip install`` fall back to pure Python."""
    paths = [speedups.source_path(m) for m in speedups.MODULES]
    p = subprocess.run([sys.executable, "-m", "mypy", *speedups.MYPYC_FLAGS, "--no-incremental", *paths],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


REAL = {m: speedups.source_path(m) for m in speedups.MODULES}  # (this checkout's, before any test moves ROOT)


def _tree(root: str, digests: dict[str, str] | None, compiled: bool) -> None:
    """A checkout's shape under ``root``: each module's source, its extension when ``compiled``, the group's
    library and the manifest (``digests``: None leaves it out)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for m in speedups.MODULES:
        src = speedups.source_path(m, root)
        os.makedirs(os.path.dirname(src), exist_ok=True)
        shutil.copyfile(REAL[m], src)
        if compiled:
            open(src[:-3] + suffix, "wb").close()
    if compiled:
        open(os.path.join(root, speedups.GROUP + "__mypyc" + suffix), "wb").close()
    if digests is not None:
        os.makedirs(os.path.join(root, "respqueue"), exist_ok=True)
        with open(os.path.join(root, "respqueue", speedups.MANIFEST), "w") as f:
            json.dump(digests, f)


def test_guard_uses_a_build_only_when_whole_and_current(monkeypatch: pytest.MonkeyPatch) -> None:
    current = {m: speedups.source_digest(REAL[m]) for m in speedups.MODULES}
    monkeypatch.delenv("RESPQUEUE_PURE", raising=False)
    cases = {
        "whole": (current, True, None),
        "pure install": (None, False, "not compiled"),
        "no manifest": (None, True, "no build manifest"),
        "stale": ({**current, speedups.MODULES[0]: "0" * 64}, True, "changed since it was compiled"),
        "new module": ({m: d for m, d in current.items() if m != speedups.MODULES[-1]}, True,
                       "changed since it was compiled"),
    }
    for name, (digests, compiled, want) in cases.items():
        root = tempfile.mkdtemp(prefix="speedups-")
        try:
            _tree(root, digests, compiled)
            monkeypatch.setattr(speedups, "ROOT", root)
            why = speedups._check()
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if want is None:
            assert why is None, (name, why)
        else:
            assert why is not None and want in why, (name, why)
    # one module's extension missing: partial
    root = tempfile.mkdtemp(prefix="speedups-")
    try:
        _tree(root, current, True)
        m = speedups.MODULES[1]
        os.remove(speedups.source_path(m, root)[:-3] + importlib.machinery.EXTENSION_SUFFIXES[0])
        monkeypatch.setattr(speedups, "ROOT", root)
        why = speedups._check()
        assert why is not None and m in why and "not compiled" in why, why
        monkeypatch.setenv("RESPQUEUE_PURE", "1")
        assert speedups._check() == "RESPQUEUE_PURE is set"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_stale_extension_of_a_module_no_longer_compiled_is_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension left beside a module that the current build does not compile (an earlier build compiled
    more modules) would import a group library without that module: the finder loads its source instead."""
    root = tempfile.mkdtemp(prefix="speedups-")
    try:
        _tree(root, None, True)
        extra = "respqueue.types.hash"  # not in MODULES
        assert extra not in speedups.MODULES
        src = speedups.source_path(extra, root)
        shutil.copyfile(speedups.source_path(extra), src)
        open(src[:-3] + importlib.machinery.EXTENSION_SUFFIXES[0], "wb").close()
        monkeypatch.setattr(speedups, "ROOT", root)
        finder = speedups._SourceFinder
        for active in (True, False):
            monkeypatch.setattr(finder, "compiled", frozenset(speedups.MODULES) if active else frozenset())
            spec = finder.find_spec(extra)
            assert spec is not None and spec.origin == src, (active, spec)
            m = speedups.MODULES[0]
            spec = finder.find_spec(m)
            if active:
                assert spec is None  # the build's own extension runs
            else:
                assert spec is not None and spec.origin == speedups.source_path(m, root)
        # a module with no extension beside it is left to the normal import
        assert finder.find_spec("respqueue.types.set") is None
        assert finder.find_spec("redis.client") is None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _node_process(port: int, jobs: int) -> dict:
    p = subprocess.run(["node", NODE_DRIVER, str(port), "process", "--jobs", str(jobs)], cwd=ROOT,
                       capture_output=True, text=True, timeout=240)
    last = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert last, f"the driver printed no RESULT (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}"
    return json.loads(last[-1][7:])


@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("node") is None or not os.path.isdir(os.path.join(ROOT, "interop", "node_modules", "bullmq")),
                    reason="node or interop/node_modules (npm ci in interop/) is missing")
@pytest.mark.parametrize("pure", [False, True], ids=["as-installed", "pure"])
def test_bullmq_worker_on_either_build(pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Node Worker works through a queue natively on the compiled and on the pure modules, durable mode; the
    log says which build ran, and nothing fell back to Lua or failed after writing."""
    if pure:
        monkeypatch.setenv("RESPQUEUE_PURE", "1")
    else:
        monkeypatch.delenv("RESPQUEUE_PURE", raising=False)
    res, alive, log = run_logged(lambda port: _node_process(port, 2000))
    assert alive, "respqueue exited during the run"
    assert res.get("ok") is True and res["dupes"] == 0 and res["lost"] == 0 and res["failed"] == 0, res
    if pure:
        assert "compiled hot paths: off (RESPQUEUE_PURE is set)" in log
    elif CAN_BUILD:
        assert f"compiled hot paths: on ({len(speedups.MODULES)} modules" in log, log[:2000]
    assert "failed after writing" not in log and "internal error" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert log.count("native moveToFinished: ran in a run") >= 1900, log[-3000:]
