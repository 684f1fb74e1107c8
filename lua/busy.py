"""Serving other clients while a slow script blocks the event loop (placeholder)."""

from __future__ import annotations

from typing import Any


def poll_clients(s: Any) -> None:
    """Answer the other connections' requests (BUSY, SCRIPT KILL)."""


def after_busy(s: Any) -> None:
    """Called once the slow script has finished."""
