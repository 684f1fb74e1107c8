"""Build: pyproject.toml holds the metadata; this file adds the compiled hot paths (respqueue/speedups.py).

With mypyc importable (``[build-system]`` asks for mypy) and a C compiler, the modules listed in
``respqueue.speedups.MODULES`` are compiled into C extensions; respqueue installs as pure Python when either
is missing, when compiling fails, or with ``RESPQUEUE_PURE=1``. The build writes respqueue/_speedups_manifest.json
(the digest of each source it compiled), which tells the running server that the build matches its source.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _speedups() -> Any:
    spec = importlib.util.spec_from_file_location("_respqueue_speedups", os.path.join(HERE, "respqueue", "speedups.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _warn(msg: str) -> None:
    print(f"respqueue: {msg}; installing the pure Python modules", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext that leaves respqueue pure Python when compiling fails (no C compiler, no headers)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any failure leaves the pure modules, which are always installed
            _warn(f"compiling the hot paths failed ({e})")

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            _warn(f"compiling {ext.name} failed ({e})")


def _ext_modules() -> list[Any]:
    sp = _speedups()
    if sp.pure_requested():
        return []
    if not {"bdist_wheel", "editable_wheel", "build_ext", "build", "develop", "install"} & set(sys.argv[1:]):
        return []  # (metadata only: pip asks for it before the build)
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not available")
        return []
    paths = [os.path.relpath(sp.source_path(m, HERE), HERE) for m in sp.MODULES]
    try:
        exts = mypycify([*sp.MYPYC_FLAGS, *paths], opt_level="3", group_name=sp.GROUP)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - mypy's check failed: pure Python
        _warn(f"mypyc refused the hot paths ({e})")
        return []
    with open(os.path.join(HERE, "respqueue", sp.MANIFEST), "w") as f:
        json.dump({m: sp.source_digest(sp.source_path(m, HERE)) for m in sp.MODULES}, f, indent=1)
    return list(exts)


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
