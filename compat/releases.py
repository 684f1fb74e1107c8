"""Build compat/script_table.py from published BullMQ releases (facts only, no script text).

    python -m compat.releases [--npm VER ...] [--pypi VER ...] [--npm-minors 5.0-6] [--pypi-minors 2-3]
                              [--cache DIR] [--out compat/script_table.py] [--dump-bodies DIR]

For every release it downloads the published package with the ordinary client (``npm pack bullmq@VER``,
``pip download --no-deps bullmq==VER``) into a cache directory outside the project, reads each Lua
script exactly as the client sends it, and records per SHA1 digest: the script name, numkeys, the
releases that send it, the body size and an *argument layout* (see :func:`layout`). The generated module
holds data only; compat/scripts.py imports it.

* npm: ``dist/cjs/scripts/<name>-<numkeys>.js`` exports ``{name, content, keys}``; RedisConnection calls
  ``defineCommand(name, {numberOfKeys: keys, lua: content})`` and ioredis sends ``content`` (EVAL) or its
  SHA1 (EVALSHA). The modules are loaded with node, so the text is the template literal's value.
* PyPI: ``bullmq/commands/<name>-<numkeys>.lua``; the client reads each file in text mode (universal
  newlines) and redis-py registers the UTF-8 encoding. ``--- @include`` lines, where a release still has
  them, are resolved the way BullMQ's script loader does (each include inlined once, depth first, before
  its first user; blank lines stripped).

``--npm-minors A-B`` / ``--pypi-minors A-B`` add the latest patch of every minor from major.minor A up to
major B (``npm view bullmq versions --json`` / ``pip index versions bullmq``). Without arguments the tool
scans :data:`DEFAULT_NPM` and :data:`DEFAULT_PYPI`.

Which of the recorded digests run natively is decided by compat/native/ (each script's accept function) from
the layouts. After regenerating the table, check every scanned release against the Lua oracle (it downloads them again):
``RESPQUEUE_RELEASE_SWEEP=1 python -m pytest tests/test_native_scripts.py -k release_family``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CACHE = os.path.join(tempfile.gettempdir(), "respqueue-bullmq-releases")
DEFAULT_OUT = os.path.join(ROOT, "compat", "script_table.py")

#: scripts whose layout also records what their hot paths do (the scripts with native implementations or
#: candidates for one): the events they XADD, their hash writes and reads, and which helpers call which
HELPERS_FOR = frozenset({"addStandardJob", "addPrioritizedJob", "addDelayedJob", "addParentJob", "moveToActive",
                         "moveToFinished", "moveToDelayed", "extendLock", "extendLocks", "moveStalledJobsToWait",
                         "retryJob", "promote", "getCounts", "isFinished", "changePriority"})

_NODE_READ = (
    "const fs=require('fs'),path=require('path');const d=path.resolve(process.argv[1]);const out={};"
    "for(const f of fs.readdirSync(d)){if(!f.endsWith('.js')||f==='index.js')continue;"
    "const m=require(path.join(d,f));for(const k of Object.keys(m)){const s=m[k];"
    "if(s&&typeof s.content==='string'&&typeof s.name==='string')out[f.slice(0,-3)]=[s.name,s.keys,s.content];}}"
    "process.stdout.write(JSON.stringify(out));"
)


# ---- versions ---------------------------------------------------------------------------
#: the releases ``python -m compat.releases`` scans when none is named: the latest patch of every minor of
#: npm bullmq 5.0 to 6.x and of PyPI bullmq 2.x/3.x, as ``--npm-minors 5.0-6 --pypi-minors 2.0-3`` picked
#: them on 2026-11-25 (PyPI 2.1-2.12 are left out: their sdists cannot be prepared by pip download)
DEFAULT_NPM = (
    "5.0.0 5.1.12 5.2.1 5.3.3 5.4.6 5.5.4 5.6.0 5.7.15 5.8.7 5.9.0 5.10.4 5.11.0 5.12.15 5.13.2 5.14.0 5.15.0 "
    "5.16.0 5.17.1 5.18.0 5.19.1 5.20.1 5.21.2 5.22.0 5.23.1 5.24.0 5.25.6 5.26.2 5.28.2 5.29.1 5.30.1 5.31.2 "
    "5.32.0 5.33.1 5.34.10 5.35.1 5.36.0 5.37.0 5.38.0 5.39.2 5.40.5 5.41.9 5.42.0 5.43.1 5.44.4 5.45.2 5.46.1 "
    "5.47.3 5.48.1 5.49.2 5.50.0 5.51.1 5.52.3 5.53.3 5.54.3 5.55.0 5.56.10 5.57.0 5.58.9 5.59.0 5.60.0 5.61.2 "
    "5.62.2 5.63.2 5.64.1 5.65.1 5.66.7 5.67.3 5.68.0 5.69.4 5.70.4 5.71.1 5.72.1 5.73.5 5.74.2 5.75.2 5.76.11 "
    "5.77.7 5.78.1 5.79.4 5.80.12 5.81.5 6.0.11 6.1.2 6.2.2 6.3.16 6.4.0 6.5.4 6.7.0"
).split()
DEFAULT_PYPI = ("2.0.0 2.13.1 2.14.0 2.15.1 2.16.2 2.17.0 2.18.3 2.19.8 2.20.4 2.21.1 2.22.0 2.23.1 2.24.0 2.25.4 "
                "2.26.0 3.0.6 3.1.1 3.2.8 3.3.4 3.4.4").split()


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _plain(v: str) -> bool:
    return re.fullmatch(r"\d+\.\d+\.\d+", v) is not None


def latest_per_minor(versions: Iterable[str], lo: str, hi_major: int) -> list[str]:
    """The latest patch of every minor from ``lo`` (major.minor) up to major ``hi_major`` inclusive."""
    lo_k = _vkey(lo)
    best: dict[tuple[int, int], str] = {}
    for v in versions:
        if not _plain(v):
            continue
        k = _vkey(v)
        if k[:2] < lo_k[:2] or k[0] > hi_major:
            continue
        cur = best.get(k[:2])
        if cur is None or _vkey(cur) < k:
            best[k[:2]] = v
    return [best[m] for m in sorted(best)]


def npm_versions() -> list[str]:
    p = subprocess.run(["npm", "view", "bullmq", "versions", "--json"], capture_output=True, text=True, check=True,
                       timeout=120)
    return list(json.loads(p.stdout))


def pypi_versions() -> list[str]:
    p = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "bullmq"], capture_output=True, text=True,
                       check=True, timeout=120)
    for line in p.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",")]
    raise RuntimeError("pip index versions: no version list")


def _minor_range(spec: str) -> tuple[str, int]:
    lo, _, hi = spec.partition("-")
    if lo.count(".") == 0:
        lo += ".0"
    return lo, int(hi or lo.split(".")[0])


# ---- download and extraction ---------------------------------------------------------------
def _outside_project(path: str) -> str:
    p = os.path.realpath(path)
    if p == ROOT or p.startswith(ROOT + os.sep):
        raise SystemExit(f"the download cache must be outside the project: {p}")
    os.makedirs(p, exist_ok=True)
    return p


def npm_bodies(version: str, cache: str) -> dict[str, tuple[str, int, bytes]]:
    """file stem -> (script name, numkeys, body as ioredis sends it) for npm bullmq ``version``."""
    tgz = os.path.join(cache, f"bullmq-{version}.tgz")
    if not os.path.exists(tgz):
        subprocess.run(["npm", "pack", f"bullmq@{version}", "--silent", "--pack-destination", cache],
                       check=True, capture_output=True, timeout=300)
    d = os.path.join(cache, f"npm-{version}")
    scripts = os.path.join(d, "package", "dist", "cjs", "scripts")
    if not os.path.isdir(scripts):
        with tarfile.open(tgz) as t:
            members = [m for m in t.getmembers() if m.name.startswith("package/dist/cjs/scripts/") and m.isfile()]
            t.extractall(d, members=members, filter="data")
    return npm_dir_bodies(scripts)


def npm_dir_bodies(scripts: str) -> dict[str, tuple[str, int, bytes]]:
    """file stem -> (name, numkeys, body) for an npm bullmq's ``dist/cjs/scripts`` folder (loaded with node)."""
    p = subprocess.run(["node", "-e", _NODE_READ, scripts], capture_output=True, check=True, timeout=120)
    return {stem: (name, int(nk), content.encode("utf-8")) for stem, (name, nk, content) in json.loads(p.stdout).items()}


def py_dir_bodies(commands: str) -> dict[str, tuple[str, int, bytes]]:
    """file stem -> (name, numkeys, body) for an installed Python bullmq's ``commands`` folder."""
    files = {}
    for root, _dirs, names in os.walk(commands):
        for n in names:
            if n.endswith(".lua"):
                path = os.path.join(root, n)
                with open(path, encoding="utf-8") as f:  # as the client reads them (universal newlines)
                    files[os.path.normpath(os.path.join("bullmq/commands", os.path.relpath(path, commands)))] = f.read()
    return _py_scripts(files)


_INCLUDE_RE = re.compile(r"^[ \t]*-{2,3}[ \t]*@include[ \t]+[\"']([^\"']+)[\"'][ \t]*$", re.M)


def resolve_includes(text: str, path: str, files: dict[str, str]) -> str:
    """BullMQ's include resolution (commands/script-loader): each include inlined once, depth first,
    before its first user; later references removed; then all blank lines stripped."""
    seen: set[str] = set()

    def expand(txt: str, here: str, stack: tuple[str, ...]) -> str:
        def sub(m: re.Match[str]) -> str:
            ref = m.group(1)
            if not os.path.splitext(ref)[1]:
                ref += ".lua"
            target = os.path.normpath(os.path.join(os.path.dirname(here), ref))
            if target in stack:
                raise ValueError(f"circular include {target}")
            if target in seen:
                return ""
            seen.add(target)
            if target not in files:
                raise ValueError(f"missing include {target} (from {here})")
            return expand(files[target], target, (*stack, target))

        return _INCLUDE_RE.sub(sub, txt)

    out = expand(text, path, (path,))
    return "\n".join(ln for ln in out.split("\n") if ln.strip())


def pypi_bodies(version: str, cache: str) -> dict[str, tuple[str, int, bytes]]:
    """file stem -> (script name, numkeys, body as redis-py sends it) for PyPI bullmq ``version``."""
    def find() -> str | None:
        for f in (f"bullmq-{version}-py3-none-any.whl", f"bullmq-{version}.tar.gz"):
            if os.path.exists(os.path.join(cache, f)):
                return os.path.join(cache, f)
        return None

    pkg = find()
    if pkg is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "--quiet",
                        "--disable-pip-version-check", f"bullmq=={version}", "-d", cache],
                       check=True, capture_output=True, timeout=300)
        pkg = find()
    if pkg is None:
        raise RuntimeError(f"pip download produced no wheel or sdist for bullmq {version}")
    raw_files: dict[str, bytes] = {}
    if pkg.endswith(".whl"):
        with zipfile.ZipFile(pkg) as z:
            for n in z.namelist():
                raw_files[n] = z.read(n) if n.endswith(".lua") else b""
    else:  # an sdist: bullmq-VER/bullmq/commands/... is what gets installed
        with tarfile.open(pkg) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.endswith(".lua"):
                    f = t.extractfile(m)
                    raw_files[m.name.split("/", 1)[1]] = f.read() if f else b""
    files: dict[str, str] = {}
    for n, data in raw_files.items():
        if n.startswith("bullmq/commands/") and n.endswith(".lua"):
            # open(path, "r").read(): UTF-8 text with universal newlines
            files[os.path.normpath(n)] = io.StringIO(data.decode("utf-8"), newline=None).read()
    return _py_scripts(files)


def _py_scripts(files: dict[str, str]) -> dict[str, tuple[str, int, bytes]]:
    out = {}
    for path, text in files.items():
        rel = path[len("bullmq/commands/"):]
        if os.sep in rel:
            continue  # includes live in sub folders
        stem = rel[:-4]
        m = re.fullmatch(r"(.+)-(\d+)", stem)
        if not m:
            continue
        if _INCLUDE_RE.search(text):
            text = resolve_includes(text, path, files)
        out[stem] = (m.group(1), int(m.group(2)), text.encode("utf-8"))
    return out


# ---- the argument layout ------------------------------------------------------------------
_HDR_RE = re.compile(r"^\s*(KEYS|ARGV)\[(\d+)\]\s*(.*)$")
_SUB_RE = re.compile(r"^\s*\[(\d+)\]\s*(.*)$")
_FUNC_RE = re.compile(r"^local function (\w+)", re.M)
_UNPACK_RE = re.compile(r"local\s+(\w+)\s*=\s*cmsgpack\.unpack\(\s*ARGV\[(\d+)\]\s*\)")


def _norm_desc(s: str) -> str:
    s = re.sub(r"[^a-z0-9 ]+", " ", s.lower())
    return " ".join(s.split())


def layout(body: bytes) -> dict[str, Any]:
    """The argument layout a script reads, from its text: what its header documents for each KEYS/ARGV slot
    (and for the fields of a msgpacked ARGV), which KEYS/ARGV indexes the code reads, per msgpack-unpacked ARGV
    the fields/indexes read from it, and the names of the helper functions it includes."""
    text = body.decode("utf-8", "replace")
    hdr: dict[str, dict[int, str]] = {"KEYS": {}, "ARGV": {}}
    sub: dict[str, list[str]] = {}  # ARGV<n> -> its documented fields ("[1] key prefix", ...)
    end = text.find("]]")
    cur = None
    for line in text[: end if end > 0 else 0].splitlines():
        m = _HDR_RE.match(line)
        if m:
            cur = f"ARGV{m.group(2)}" if m.group(1) == "ARGV" else None
            hdr[m.group(1)].setdefault(int(m.group(2)), _norm_desc(m.group(3)))
            continue
        m = _SUB_RE.match(line)
        if m and cur is not None:
            sub.setdefault(cur, []).append(f"{m.group(1)} {_norm_desc(m.group(2))}")
        elif line.strip() and not m:
            cur = None if not line.startswith("      ") else cur
    code = re.sub(r"--\[\[.*?\]\]", "", text, flags=re.S)
    code = re.sub(r"--[^\n]*", "", code)
    keys_read = sorted({int(x) for x in re.findall(r"KEYS\[(\d+)\]", code)})
    argv_read = sorted({int(x) for x in re.findall(r"ARGV\[(\d+)\]", code)})
    unpacked: dict[str, list[str]] = {}
    for var, idx in _UNPACK_RE.findall(code):
        fields = set(re.findall(r"\b" + var + r"\s*\[\s*['\"]([\w.-]+)['\"]\s*\]", code))
        fields |= set(re.findall(r"\b" + var + r"\.(\w+)", code))
        fields |= {"#" + x for x in re.findall(r"\b" + var + r"\s*\[\s*(\d+)\s*\]", code)}
        unpacked.setdefault(f"ARGV{idx}", [])
        unpacked[f"ARGV{idx}"] = sorted(set(unpacked[f"ARGV{idx}"]) | fields)
    return {
        "keys": [hdr["KEYS"].get(i, "") for i in range(1, max(hdr["KEYS"], default=0) + 1)],
        "argv": [hdr["ARGV"].get(i, "") for i in range(1, max(hdr["ARGV"], default=0) + 1)],
        "keys_read": keys_read,
        "argv_read": argv_read,
        "unpacked": unpacked,
        "argv_fields": sub,
    }


def _call_args(code: str, cmds: str) -> list[tuple[str, list[str]]]:
    """(command, its arguments as source text) for each ``rcall("<cmd>", ...)`` (or ``redis.call``, as
    updateJobFields in npm 5.33-5.38 writes) in ``code`` whose command is
    one of ``cmds`` (a regex alternation); arguments split at top-level commas."""
    return [(m.group(1), _args_at(code, m.end()))
            for m in re.finditer(r"""(?:rcall|redis\.call)\(\s*["'](""" + cmds + r""")["']\s*,""", code)]


def _args_at(code: str, k: int) -> list[str]:
    """The arguments of a call from ``code[k]`` (just after its first argument's comma) to its closing
    parenthesis, as source text, split at top-level commas."""
    depth, quote = 1, ""
    args: list[str] = []
    cur: list[str] = []
    while k < len(code) and depth:
        ch = code[k]
        if quote:
            if ch == quote and code[k - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if not depth:
                break
        elif ch == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            k += 1
            continue
        cur.append(ch)
        k += 1
    args.append("".join(cur).strip())
    return args


def call_facts(text: str, cmds: str) -> list[str]:
    """Per call of one of ``cmds`` (a regex alternation), its arguments as source text (whitespace collapsed),
    ``|``-joined, e.g. HINCRBY's ``jobKey|"stc"|1`` (the counter field a release increments) or LREM's
    ``KEYS[1]|0|ARGV[4]`` (how many occurrences it removes)."""
    return sorted({"|".join(" ".join(a.split()) for a in args) for _c, args in _call_args(_code(text), cmds)})


def dynamic_calls(text: str) -> list[str]:
    """The calls whose command is not a literal (``rcall(ARGV[3], target, ARGV[4])``: the caller names the
    push), as source text: the command's expression, then its arguments, ``|``-joined."""
    code = _code(text)
    return sorted({"|".join([m.group(1)] + [" ".join(a.split()) for a in _args_at(code, m.end())])
                   for m in re.finditer(r"""(?:rcall|redis\.call)\(\s*([A-Za-z_][\w.]*(?:\[\w+\])?)\s*,""", code)})


def _lit(a: str) -> str:
    return a[1:-1] if len(a) >= 2 and a[0] in "\"'" and a[-1] == a[0] else "?"


def _code(text: str) -> str:
    return re.sub(r"--[^\n]*", "", re.sub(r"--\[\[.*?\]\]", "", text, flags=re.S))


def event_shapes(text: str) -> list[str]:
    """The events a script writes: per XADD call, its literal arguments after the ID (field names and fixed
    values; a variable shows as ``?``), e.g. ``event|?|jobId|?|prev|active``."""
    out = set()
    for _cmd, args in _call_args(_code(text), "XADD"):
        if '"*"' in args:
            out.add("|".join(_lit(a) for a in args[args.index('"*"') + 1 :]))
    return sorted(out)


def hash_write_shapes(text: str, cmds: str = "HSET|HMSET") -> list[str]:
    """The hash writes a script makes: per HSET/HMSET call (HDEL too, where the caller names it), the command
    and its literal arguments after the key (a variable shows as ``?``), e.g. ``HMSET|processedOn|?|?``.
    With ``cmds="HMGET|HGET|HEXISTS"``: its reads."""
    return sorted({"|".join([cmd] + [_lit(a) for a in args[1:]]) for cmd, args in _call_args(_code(text), cmds)})


#: the callers whose calls :func:`call_graph` records: the main code and the helpers on the hot paths
CALLERS = frozenset({"main", "prepareJobForProcessing", "fetchNextJob", "addJobInTargetList", "storeJob",
                     "getTargetQueueList", "getQueueMetadata", "isQueuePausedOrMaxed", "trimEvents", "removeLock",
                     "moveJobFromPrioritizedToActive", "moveJobFromPriorityToActive", "getOrSetMaxEvents",
                     "addDelayedJob", "addJobWithPriority", "addDelayMarkerIfNeeded", "moveJobToWait",
                     "checkStalledJobs"})


def score_ranges(text: str) -> list[str]:
    """The score ranges a script reads: per ZRANGEBYSCORE call, its arguments after the key as source text
    (whitespace collapsed), e.g. ``0|(timestamp + 1) * 0x1000 - 1|"LIMIT"|0|1000``: releases differ in a
    bound by one, which no other fact shows."""
    return sorted({"|".join(" ".join(a.split()) for a in args[1:])
                   for _cmd, args in _call_args(_code(text), "ZRANGEBYSCORE")})


def priority_scores(text: str) -> list[str]:
    """The priority scores a script computes: each expression (assigned or returned) that multiplies by
    ``0x100000000``, as source text (whitespace collapsed): releases before 5.8 add ``bit.band(prioCounter,
    0xffffffffffff)`` (a 32-bit operation in Redis's Lua), later ones ``prioCounter % 0x100000000``, which
    the helper's name alone does not show (5.8-5.40 compute it inline)."""
    return sorted({" ".join(m.group(1).split()) for m in
                   re.finditer(r"(?:=|\breturn)\s*([^\n=]*0x100000000[^\n]*)", _code(text))})


def main_sequence(text: str) -> list[str]:
    """The main code's calls in source order: each ``rcall("<CMD>"`` as the command, each call of a helper the
    script defines as its name (where releases differ only in the order of two steps, e.g. moveToFinished's
    lock removal and its pending-children check). A main code that only calls one helper (the whole script
    wrapped in a function) records that helper's calls."""
    code = _code(text)
    names = set(_FUNC_RE.findall(code))
    lines, in_func = [], False
    for line in code.splitlines():  # (a function defined at column 0 ends at the next "end" there)
        if in_func:
            in_func = not re.match(r"end\b", line)
        elif re.match(r"(local\s+)?(function\s+[\w.:]+|[\w.]+\s*=\s*function)\b", line):
            in_func = True
        else:
            lines.append(line)
    out = _calls_in("\n".join(lines), names)
    if len(out) == 1:  # the whole script one helper (npm 5.0.0's checkStalledJobs): that helper's calls
        m = re.search(r"^local function " + out[0] + r"\b[^\n]*\n(.*?)^end\b", code, re.S | re.M)
        if m:
            return _calls_in(m.group(1), names - {out[0]})
    return out


def _calls_in(body: str, names: set[str]) -> list[str]:
    """``body``'s calls in source order: ``rcall("<CMD>"`` as the command, a helper of ``names`` by name."""
    out = []
    for m in re.finditer(r"""rcall\(\s*["'](\w+)["']|\b(\w+)\s*\(""", body):
        if m.group(1):
            out.append(m.group(1).upper())
        elif m.group(2) in names:
            out.append(m.group(2))
    return out


def call_graph(text: str) -> list[str]:
    """Which helper functions the script's main code (``main``) and its hot-path helpers (:data:`CALLERS`)
    call: ``caller>callee``."""
    code = re.sub(r"--\[\[.*?\]\]", "", text, flags=re.S)
    code = re.sub(r"--[^\n]*", "", code)
    names = set(_FUNC_RE.findall(code))
    bodies: dict[str, str] = {}
    main = []
    pos = 0
    for m in re.finditer(r"^local function (\w+)[^\n]*\n(.*?)^end\b", code, re.S | re.M):
        main.append(code[pos : m.start()])
        bodies[m.group(1)] = bodies.get(m.group(1), "") + m.group(2)
        pos = m.end()
    main.append(code[pos:])
    bodies["main"] = "".join(main)
    out = set()
    for caller, body in bodies.items():
        if caller not in CALLERS:
            continue
        for callee in names:
            if callee != caller and re.search(r"\b" + callee + r"\s*\(", body):
                out.add(f"{caller}>{callee}")
    return sorted(out)


def layout_id(name: str, lay: dict[str, Any]) -> str:
    return name + ":" + hashlib.sha1(json.dumps(lay, sort_keys=True).encode()).hexdigest()[:8]


# ---- the table ------------------------------------------------------------------------------
def _ranges(rel_order: list[str], rels: set[str]) -> str:
    """Releases as a string; runs of consecutive scanned releases of one client as ``first..last``."""
    parts: list[str] = []
    run: list[str] = []
    for r in rel_order + [""]:
        if r in rels and (not run or run[0].split("-")[0] == r.split("-")[0]):
            run.append(r)
            continue
        if run:
            parts.append(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}")
            run = []
        if r in rels:
            run = [r]
    return ",".join(parts)


def build(releases: list[tuple[str, dict[str, tuple[str, int, bytes]]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(sha1 -> [name, numkeys, releases, size, layout id], layout id -> layout)."""
    order = [r for r, _ in releases]
    by_sha: dict[str, dict[str, Any]] = {}
    layouts: dict[str, Any] = {}
    for rel, bodies in releases:
        for name, nk, body in bodies.values():
            s = hashlib.sha1(body).hexdigest()
            e = by_sha.get(s)
            if e is None:
                lay = layout(body)
                if name in HELPERS_FOR:
                    text = body.decode("utf-8", "replace")
                    lay["events"] = event_shapes(text)
                    lay["hash_writes"] = hash_write_shapes(text, "HSET|HMSET|HDEL")
                    lay["hash_reads"] = hash_write_shapes(text, "HMGET|HGET|HEXISTS")
                    lay["calls"] = call_graph(text)
                    lay["score_ranges"] = score_ranges(text)
                    lay["main"] = main_sequence(text)
                    lay["prio_scores"] = priority_scores(text)
                    lay["dels"] = sorted({"|".join(" ".join(a.split()) for a in args)
                                          for _c, args in _call_args(_code(text), "DEL")})
                    lay["zadds"] = sorted({"|".join(" ".join(a.split()) for a in args)
                                           for _c, args in _call_args(_code(text), "ZADD")})
                    lay["hincrbys"] = call_facts(text, "HINCRBY")
                    lay["lrems"] = call_facts(text, "LREM")
                    lay["dyn_calls"] = dynamic_calls(text)
                    lay["counts"] = sorted({"|".join([c] + [" ".join(a.split()) for a in args])
                                            for c, args in _call_args(_code(text), "SCARD|ZCARD")})
                lid = layout_id(name, lay)
                layouts[lid] = lay
                e = by_sha[s] = {"name": name, "numkeys": nk, "rels": set(), "size": len(body), "layout": lid}
            e["rels"].add(rel)
    table = {s: [e["name"], e["numkeys"], _ranges(order, e["rels"]), e["size"], e["layout"]]
             for s, e in sorted(by_sha.items(), key=lambda kv: (kv[1]["name"], min(order.index(r) for r in kv[1]["rels"])))}
    return table, layouts


INTERNED = ("keys", "argv", "argv_fields", "events", "hash_writes", "hash_reads", "calls", "score_ranges", "counts", "main", "dels", "zadds",
            "prio_scores", "hincrbys", "lrems", "dyn_calls")


def render(table: dict[str, Any], layouts: dict[str, Any], releases: list[str]) -> str:
    lines = [
        '"""GENERATED by ``python -m compat.releases`` from the published BullMQ packages: do not edit.',
        "",
        "Facts only (no script text): RELEASES scanned; TABLE maps the SHA1 of each script body, as the client",
        "sends it, to (name, numkeys, releases, body size, layout id); LAYOUTS maps a layout id to the argument",
        "layout read from that script's text (documented KEYS/ARGV slots, indexes read, msgpack fields read, and",
        "for the hot scripts their events, hash writes/reads and helper calls); compat.scripts.layout() resolves one.",
        "Releases: node-X = npm bullmq X, py-X = PyPI bullmq X; 'a..b' = every scanned release from a to b.",
        '"""',
        "",
        "# fmt: off",
        "RELEASES: tuple[str, ...] = (",
    ]
    for i in range(0, len(releases), 8):
        lines.append("    " + " ".join(f'"{r}",' for r in releases[i : i + 8]))
    lines += [")", "", "TABLE: dict[str, tuple[str, int, str, int, str]] = {"]
    for s, (name, nk, rels, size, lid) in table.items():
        lines.append(f'    "{s}": ("{name}", {nk}, "{rels}", {size}, "{lid}"),')
    # the long parts of the layouts (documented slots, helper names) are stored once each, in PARTS
    parts: dict[str, str] = {}
    ids: dict[str, str] = {}
    out_layouts = {}
    for lid in sorted(layouts):
        lay = dict(layouts[lid])
        for k in INTERNED:
            if k in lay:
                v = json.dumps(lay[k], sort_keys=True)
                if v not in ids:
                    ids[v] = f"{k[0]}{len(ids)}"
                    parts[ids[v]] = v
                lay[k] = ids[v]
        out_layouts[lid] = lay
    lines += ["}", "", "LAYOUTS: dict[str, dict[str, object]] = {  # the values of " + ", ".join(INTERNED) + ": PARTS ids"]
    for lid, lay in out_layouts.items():
        lines.append(f'    "{lid}": {json.dumps(lay, sort_keys=True)},')
    lines += ["}", "", f"INTERNED: tuple[str, ...] = {INTERNED!r}", "", "PARTS: dict[str, object] = {"]
    for pid, v in parts.items():
        lines.append(f'    "{pid}": {v},')
    lines += ["}", "# fmt: on", ""]
    return "\n".join(lines).replace(": true", ": True").replace(": false", ": False").replace(": null", ": None")


def collect(npm: list[str], pypi: list[str], cache: str) -> list[tuple[str, dict[str, tuple[str, int, bytes]]]]:
    out = []
    for v in sorted(set(npm), key=_vkey):
        print(f"npm bullmq {v}", file=sys.stderr)
        out.append((f"node-{v}", npm_bodies(v, cache)))
    for v in sorted(set(pypi), key=_vkey):
        print(f"pypi bullmq {v}", file=sys.stderr)
        try:
            out.append((f"py-{v}", pypi_bodies(v, cache)))
        except (subprocess.CalledProcessError, RuntimeError) as e:  # e.g. an sdist pip cannot prepare
            print(f"  skipped: {e}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compat.releases", description=__doc__.split("\n\n")[0])
    ap.add_argument("--npm", action="append", default=[], help="an npm bullmq version (repeatable)")
    ap.add_argument("--pypi", action="append", default=[], help="a PyPI bullmq version (repeatable)")
    ap.add_argument("--npm-minors", help="the latest patch of each minor, e.g. 5.0-6")
    ap.add_argument("--pypi-minors", help="the latest patch of each minor, e.g. 2.0-3")
    ap.add_argument("--cache", default=DEFAULT_CACHE, help="download cache, outside the project")
    ap.add_argument("--out", default=DEFAULT_OUT, help="the generated module (default compat/script_table.py)")
    ap.add_argument("--dump-bodies", help="also write <release>/<name>-<numkeys>.lua here (outside the project)")
    a = ap.parse_args(argv)
    cache = _outside_project(a.cache)
    npm, pypi = list(a.npm), list(a.pypi)
    if a.npm_minors:
        npm += latest_per_minor(npm_versions(), *_minor_range(a.npm_minors))
    if a.pypi_minors:
        pypi += latest_per_minor(pypi_versions(), *_minor_range(a.pypi_minors))
    if not npm and not pypi:
        npm, pypi = list(DEFAULT_NPM), list(DEFAULT_PYPI)
    rels = collect(npm, pypi, cache)
    if a.dump_bodies:
        d = _outside_project(a.dump_bodies)
        for rel, bodies in rels:
            os.makedirs(os.path.join(d, rel), exist_ok=True)
            for stem, (_n, _k, body) in bodies.items():
                with open(os.path.join(d, rel, stem + ".lua"), "wb") as f:
                    f.write(body)
    table, layouts = build(rels)
    with open(a.out, "w") as f:
        f.write(render(table, layouts, [r for r, _ in rels]))
    print(f"{len(rels)} releases, {len(table)} digests, {len(layouts)} layouts -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
