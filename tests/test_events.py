"""respqueue/events.py: the hooks plug-ins subscribe to (compat/history.py uses ``stream_added``)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from respqueue import events
from respqueue.client import Client
from respqueue.config import Config
from respqueue.dispatch import process
from respqueue.server import Server
from respqueue.types.stream import format_id

from .servers import ROOT


def test_stream_added_sees_every_xadd_form() -> None:
    srv = Server(Config(durability="memory"))
    c = Client(srv)
    seen: list[tuple[Any, ...]] = []

    def hook(client: Any, key: bytes, sid: int, argv: list[bytes], pos: int) -> None:
        seen.append((client, key, sid, argv[pos:]))

    events.subscribe("stream_added", hook)
    events.subscribe("stream_added", hook)  # once per function
    try:
        r1 = process(c, [b"XADD", b"s", b"*", b"a", b"1"])
        r2 = process(c, [b"XADD", b"s", b"MAXLEN", b"~", b"10", b"*", b"b", b"2"])
        r3 = process(c, [b"XADD", b"s", b"NOMKSTREAM", b"MAXLEN", b"=", b"5", b"99999999999999-1", b"c", b"3"])
        process(c, [b"XADD", b"none", b"NOMKSTREAM", b"*", b"d", b"4"])  # nothing added: no event
        assert isinstance(process(c, [b"XADD", b"s", b"1-1", b"e", b"5"]), Exception)  # ID too small: no event
    finally:
        events.unsubscribe("stream_added", hook)
    assert [(k, format_id(i), f) for _c, k, i, f in seen] == [
        (b"s", r1, [b"a", b"1"]),
        (b"s", r2, [b"b", b"2"]),
        (b"s", r3, [b"c", b"3"]),
    ]
    assert all(x[0] is c for x in seen)
    process(c, [b"XADD", b"s", b"*", b"f", b"6"])
    assert len(seen) == 3  # unsubscribed
    assert hook not in events.subscribers("stream_added")


def test_unknown_event_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown event"):
        events.subscribe("no_such_event", print)


def test_the_core_knows_nothing_of_bullmq_events_or_history() -> None:
    """commands/ and the core do not mention ``:events`` streams; persistence does not import compat/."""
    core = os.path.join(ROOT, "respqueue")
    for name in ("commands/streams.py", "call.py", "dispatch.py", "keyspace.py", "events.py"):
        with open(os.path.join(core, name)) as fh:
            assert b":events" not in fh.read().encode(), name
    for name in os.listdir(os.path.join(core, "persistence")):
        if name.endswith(".py"):
            with open(os.path.join(core, "persistence", name)) as fh:
                assert not re.search(r"^\s*(from|import) compat", fh.read(), re.M), name
