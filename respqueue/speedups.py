"""Compiled hot paths: the modules ``setup.py`` compiles with mypyc, and the guard that runs their source instead
when the compiled build is missing, partial, stale or turned off.

``pip install .`` (and ``pip install -e .``) compiles :data:`MODULES` into C extensions with mypyc when the build
environment has it and a C compiler (``[build-system]`` in pyproject.toml asks for mypy); otherwise, or with
``RESPQUEUE_PURE=1`` set at install time, respqueue installs as pure Python. The same code runs either way:
mypyc compiles the annotated Python as it is (and checks the annotations of what crosses a compiled function's
boundary at run time).

An extension module is imported before its ``.py`` beside it, so a build left behind by an edit of the source
(an editable install) would run old code. :func:`install`, called by ``respqueue/__init__.py`` before any of
these modules is imported, therefore uses the compiled modules only when all of them are there and each was
built from the source now beside it (``_speedups_manifest.json``, written by the build: the SHA-256 of every
source it compiled); else a finder it puts first on ``sys.meta_path`` loads all of them from their source, so
a compiled module never calls a stale sibling through mypyc's direct calls. Whichever build runs, that finder
also loads from source any module of respqueue, compat or lua whose extension is not the current build's (one
left by an earlier build that compiled more modules). ``RESPQUEUE_PURE=1`` in the environment of a run does the
same on purpose (the test suite uses it to run the pure modules too).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from typing import Any

#: the compiled modules: the hot paths of a BullMQ job's life (moveToFinished and its fetch, the helpers the
#: native scripts share, the stream every event goes to)
MODULES = (
    "compat.native.helpers",
    "compat.native.move_to_finished",
    "compat.native.move_to_active",
    "compat.native.add_standard_job",
    "compat.scripts",
    "compat.history",
    "compat.engine.layout",
    "compat.engine.idindex",
    "respqueue.cluster.slots",
    "respqueue.types.stream",
    "respqueue.commands.streams",
    "respqueue.call",
    "respqueue.persistence.journal",
    "respqueue.persistence.codec",
    "respqueue.protocol",
    "respqueue.dispatch",
    "respqueue.keyspace",
    "respqueue.types.zset",
    "respqueue.commands.zsets",
    "respqueue.commands.registry",
)
#: mypyc's group: the shared library holding the compiled code of all of MODULES (``<GROUP>__mypyc``)
GROUP = "respqueue_speedups"
#: the build's record of what it compiled: {module: SHA-256 of its source}, in respqueue/
MANIFEST = "_speedups_manifest.json"
#: mypy's check before compiling (mypyc refuses a module with errors): the imported modules are read, not
#: checked; errors that compiled code would turn into a TypeError at run time (a value that does not match a
#: variable's, an argument's or a return's annotation) stay on, while those about operations on an Optional or
#: a union (which compiled code does as Python would: ``None`` fails there either way) are left out
MYPYC_FLAGS = (
    "--ignore-missing-imports",
    "--follow-imports=silent",
    "--disable-error-code=union-attr",
    "--disable-error-code=index",
    "--disable-error-code=operator",
    "--disable-error-code=misc",
    "--disable-error-code=list-item",
    "--disable-error-code=call-arg",
    "--disable-error-code=attr-defined",
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: whether the compiled modules are in use (set by :func:`install`), and why not when they are not
ACTIVE = False
REASON = "not checked"


def source_path(module: str, root: str | None = None) -> str:
    """The ``.py`` of ``module`` under ``root`` (default: the tree this respqueue runs from)."""
    return os.path.join(root or ROOT, *module.split(".")) + ".py"


def source_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _extension(base: str) -> str | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(base + suffix):
            return base + suffix
    return None


def pure_requested() -> bool:
    """Whether ``RESPQUEUE_PURE`` asks for the pure modules (at install time: setup.py; at run time: here)."""
    return os.environ.get("RESPQUEUE_PURE", "") not in ("", "0")


def _check() -> str | None:
    """None when the compiled build is whole and current, else why it is not used."""
    if pure_requested():
        return "RESPQUEUE_PURE is set"
    if _extension(os.path.join(ROOT, GROUP + "__mypyc")) is None:
        return "not compiled (pure Python install)"
    try:
        with open(os.path.join(ROOT, "respqueue", MANIFEST)) as f:
            built = json.load(f)
    except (OSError, ValueError):
        return "no build manifest"
    for m in MODULES:
        path = source_path(m)
        if _extension(path[:-3]) is None:
            return f"{m} is not compiled"
        try:
            if built.get(m) != source_digest(path):
                return f"{m} changed since it was compiled (reinstall to compile it again)"
        except OSError:
            return f"{m} has no source"
    return None


#: the packages whose modules may have been compiled (by this build or an earlier one)
PACKAGES = ("respqueue.", "compat.", "lua.")


class _SourceFinder:
    """Finds a module as its ``.py`` where an extension beside it must not run: every module of MODULES
    while the build is not used, and always a module with an extension that is not in MODULES (left by an
    earlier build that compiled more modules: it would import a group library that no longer has it)."""

    #: the modules whose extension runs (MODULES while the build is used, else none)
    compiled: frozenset[str] = frozenset()

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in _SourceFinder.compiled or not fullname.startswith(PACKAGES):
            return None
        src = source_path(fullname)
        if fullname not in MODULES and _extension(src[:-3]) is None:
            return None  # no extension beside it: the normal import finds the source
        if not os.path.exists(src):
            return None
        return importlib.util.spec_from_file_location(fullname, src)


def install() -> None:
    """Decide, once, whether the compiled modules run (see the module's docstring)."""
    global ACTIVE, REASON
    if any(m in sys.modules for m in MODULES):
        return  # decided already (or imported before: nothing to change)
    why = _check()
    ACTIVE = why is None
    REASON = why or "compiled"
    _SourceFinder.compiled = frozenset(MODULES) if ACTIVE else frozenset()
    if _SourceFinder not in sys.meta_path:
        sys.meta_path.insert(0, _SourceFinder)  # type: ignore[arg-type]


def describe() -> str:
    """One line for the log: which build runs."""
    if ACTIVE:
        return f"compiled hot paths: on ({len(MODULES)} modules, mypyc)"
    return f"compiled hot paths: off ({REASON})"
