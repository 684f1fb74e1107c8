"""interop/upstream/pytest_resume.py, the runner of BullMQ's Python suite: a selection (-k) runs what it
selects, options keep their values, and a test that ends the process (pytest-timeout's thread method)
counts as failed while the tests after it still run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RESUME = Path(__file__).resolve().parent.parent / "interop" / "upstream" / "pytest_resume.py"

SUITE = '''
import time

def test_a():
    pass

def test_b():
    pass

def test_c_hangs():
    time.sleep(30)

def test_d():
    pass

def test_e_fails():
    assert False
'''


def _run(tmp_path: Path, *args: str) -> str:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_suite.py").write_text(SUITE)
    p = subprocess.run([sys.executable, str(RESUME), "-p", "no:randomly", *args, "tests"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    return p.stdout.splitlines()[-1]


def test_selection_runs_what_it_selects(tmp_path: Path) -> None:
    assert _run(tmp_path, "-k", "test_b") == "passed 1  failed 0  skipped 0"
    assert _run(tmp_path, "-k", "test_a or test_d") == "passed 2  failed 0  skipped 0"


def test_a_hung_test_counts_as_failed_and_the_rest_runs(tmp_path: Path) -> None:
    out = _run(tmp_path, "-o", "timeout=2", "-o", "timeout_method=thread")
    assert out == "passed 3  failed 2  skipped 0"
