"""compat.releases (the script-table generator) and the generated compat/script_table.py."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from compat import releases, script_table
from compat.releases import build, event_shapes, hash_write_shapes, latest_per_minor, layout, resolve_includes

from .servers import ROOT


def test_latest_per_minor() -> None:
    vs = ["4.9.9", "5.0.0", "5.1.0", "5.1.12", "5.1.2", "5.2.0-beta.1", "6.0.0", "6.0.11", "6.1.2", "7.0.0"]
    assert latest_per_minor(vs, "5.0", 6) == ["5.0.0", "5.1.12", "6.0.11", "6.1.2"]
    assert latest_per_minor(vs, "5.1", 5) == ["5.1.12"]


def test_resolve_includes_once_depth_first_blank_lines_stripped() -> None:
    files = {
        "bullmq/commands/main-1.lua": "--[[ main ]]\n--- @include \"includes/a\"\n\n--- @include 'includes/b'\nreturn 1\n",
        "bullmq/commands/includes/a.lua": "-- @include \"b\"\nlocal function a() end\n",
        "bullmq/commands/includes/b.lua": "local function b() end\n\n",
    }
    out = resolve_includes(files["bullmq/commands/main-1.lua"], "bullmq/commands/main-1.lua", files)
    assert out == "--[[ main ]]\nlocal function b() end\nlocal function a() end\nreturn 1"
    files["bullmq/commands/includes/b.lua"] = "--- @include \"a\"\n"
    with pytest.raises(ValueError, match="circular"):
        resolve_includes(files["bullmq/commands/main-1.lua"], "bullmq/commands/main-1.lua", files)


BODY = b"""--[[
  Does things.
    Input:
      KEYS[1] 'wait',
      KEYS[2] events stream key
      ARGV[1] msgpacked arguments array
            [1]  key prefix,
            [2]  repeat job key
      ARGV[2] msgpacked options
]]
local rcall = redis.call
local args = cmsgpack.unpack(ARGV[1])
local opts = cmsgpack.unpack(ARGV[2])
-- Includes
local function f(x)
  rcall("HMSET", x, "processedOn", args[1], unpack({}))
end
if opts['lifo'] or opts.delay then
  rcall("XADD", KEYS[2], "MAXLEN", "~", 10, "*", "event", "waiting",
        "jobId", args[2])
end
return KEYS[1]
"""


def test_layout_facts() -> None:
    lay = layout(BODY)
    assert lay["keys"] == ["wait", "events stream key"]
    assert lay["argv"] == ["msgpacked arguments array", "msgpacked options"]
    assert lay["argv_fields"] == {"ARGV1": ["1 key prefix", "2 repeat job key"]}
    assert lay["keys_read"] == [1, 2] and lay["argv_read"] == [1, 2]
    assert lay["unpacked"] == {"ARGV1": ["#1", "#2"], "ARGV2": ["delay", "lifo"]}
    assert event_shapes(BODY.decode()) == ["event|waiting|jobId|?"]
    assert hash_write_shapes(BODY.decode()) == ["HMSET|processedOn|?|?"]


def test_table_is_consistent() -> None:
    rels = list(script_table.RELEASES)
    assert len(rels) == len(set(rels)) >= 10
    for sha, (name, nk, rel, size, lid) in script_table.TABLE.items():
        assert len(sha) == 40 and int(sha, 16) >= 0
        assert lid.startswith(name + ":") and lid in script_table.LAYOUTS
        assert nk >= 1 and size > 0
        for part in rel.split(","):
            for r in part.split(".."):
                assert r in rels, (sha, r)
    for lay in script_table.LAYOUTS.values():
        for k in script_table.INTERNED:
            if k in lay:
                assert lay[k] in script_table.PARTS
    # the families the native paths serve are all scanned
    assert {"node-5.0.0", "node-5.81.5", "node-6.7.0", "py-2.26.0", "py-3.4.4"} <= set(rels)


def _table_rows(bodies: dict[str, tuple[str, int, bytes]], release: str) -> dict[str, tuple[str, int, int, str]]:
    table, _layouts = build([(release, bodies)])
    return {s: (e[0], e[1], e[3], e[4]) for s, e in table.items()}


@pytest.mark.parametrize("family", ["node-6.7.0", "py-installed"])
def test_tool_reproduces_the_table_from_installed_packages(family: str) -> None:
    """The generator's extraction and layouts, run on an installed release, give the committed rows."""
    if family.startswith("node"):
        d = os.path.join(ROOT, "interop", "node_modules", "bullmq", "dist", "cjs", "scripts")
        if shutil.which("node") is None or not os.path.isdir(d):
            pytest.skip("interop/node_modules not installed")
        bodies = releases.npm_dir_bodies(d)
    else:
        bullmq = pytest.importorskip("bullmq")
        bodies = releases.py_dir_bodies(os.path.join(os.path.dirname(bullmq.__file__), "commands"))
    assert len(bodies) > 40
    rows = _table_rows(bodies, "x")
    for sha, row in rows.items():
        ent = script_table.TABLE.get(sha)
        assert ent is not None, f"{row[0]} {sha} is not in the table (regenerate it: python -m compat.releases)"
        assert (ent[0], ent[1], ent[3], ent[4]) == row
    assert all(hashlib.sha1(b).hexdigest() in rows for _n, _k, b in bodies.values())


def test_cache_must_be_outside_the_project() -> None:
    with pytest.raises(SystemExit):
        releases._outside_project(os.path.join(ROOT, "compat", "cache"))
