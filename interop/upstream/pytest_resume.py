"""Run a pytest suite to the end although its timeout plugin ends the process at a hung test.

BullMQ's Python suite sets pytest-timeout's thread method, which dumps the stacks and exits the whole
process at the first test over its limit. This runs the suite once, in order, like a plain
`pytest -v tests`; when the process ends before every collected test has a result, the test it was
running is counted as failed (timeout or crash) and a new pytest carries on with the tests after it.

Usage (from the suite's directory): python pytest_resume.py [pytest args] TESTS_DIR
Prints pytest's output, then "FAILED <id>" lines and "passed N  failed M  skipped K".
"""

from __future__ import annotations

import re
import subprocess
import sys

RESULT = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def run_options(argv: list[str]) -> list[str]:
    """The options for the runs over collected ids: ``argv`` less its last argument (the tests' folder) and
    less its selections (``-k EXPR``, ``-m EXPR``: the ids already are the selection), every other option
    kept with its value (``-o timeout_method=signal``, ``-x``)."""
    out: list[str] = []
    args = argv[:-1]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-k", "-m"):
            i += 2
            continue
        if not (a.startswith("-k") or a.startswith("-m")) or a.startswith("--"):
            out.append(a)
        i += 1
    return out


def main(argv: list[str]) -> int:
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    collected = subprocess.run(base + ["--collect-only", "-q", *argv], capture_output=True, text=True)
    ids = [line.strip() for line in collected.stdout.splitlines() if "::" in line]
    if not ids:
        sys.stdout.write(collected.stdout + collected.stderr)
        return 1
    opts = run_options(argv)
    results: dict[str, str] = {}
    todo = ids
    while todo:
        p = subprocess.Popen(base + ["-v", *opts, *todo], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert p.stdout is not None
        for line in p.stdout:
            sys.stdout.write(line)
            m = RESULT.match(line)
            if m and m.group(1) in todo and m.group(1) not in results:
                results[m.group(1)] = "FAILED" if m.group(2) == "ERROR" else m.group(2)
        p.wait()
        rest = [i for i in todo if i not in results]
        if not rest:
            break
        if len(rest) == len(todo) and p.returncode not in (0, 1):
            # nothing ran at all: do not loop on a broken setup
            for i in rest:
                results[i] = "FAILED"
            break
        results[rest[0]] = "FAILED"  # the test running when the process ended (timeout, crash)
        sys.stdout.write(f"\n[pytest_resume] the run ended in {rest[0]}: counted as failed, carrying on\n")
        todo = rest[1:]
    for i in ids:
        if results.get(i) == "FAILED":
            sys.stdout.write(f"FAILED {i}\n")
    counts = {k: sum(1 for v in results.values() if v == k) for k in ("PASSED", "FAILED", "SKIPPED")}
    sys.stdout.write(f"passed {counts['PASSED']}  failed {counts['FAILED']}  skipped {counts['SKIPPED']}\n")
    return 0 if counts["FAILED"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
