"""client-output-buffer-limit as Redis: parsing, the text CONFIG GET shows, and enforcement.

``client-output-buffer-limit "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60"``: per client
class a hard limit, a soft limit and the seconds the soft limit may be exceeded (0 switches a limit
off). A client whose pending output passes the hard limit, or stays over the soft limit for longer
than the soft seconds, is disconnected (its pending output discarded, as Redis frees it) and the
server logs it; INFO stats counts it in ``client_output_buffer_limit_disconnections`` (a field of
Redis 7.4; Redis 7.0 logs only).

Pending output is what the transport has not yet handed to the kernel
(``transport.get_write_buffer_size()``), checked when output is added, as Redis checks in
``_addReplyToBufferOrList``. A client's class is ``pubsub`` while it is subscribed to a channel or
pattern and ``normal`` otherwise (monitors are normal, as in Redis); ``replica`` is parsed and shown
for replicas to use.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("respqueue")

CLASSES = ("normal", "slave", "pubsub")
_ALIASES = {"normal": "normal", "slave": "slave", "replica": "slave", "pubsub": "pubsub"}
_DEFAULT = {
    "normal": (0, 0, 0),
    "slave": (256 * 1024 * 1024, 64 * 1024 * 1024, 60),
    "pubsub": (32 * 1024 * 1024, 8 * 1024 * 1024, 60),
}

Limits = dict[str, tuple[int, int, int]]


def _memtoull(v: str) -> int | None:
    from .commands.config import parse_memory_strict

    return parse_memory_strict(v.encode("latin-1", "replace"))


def parse_limits(text: str | bytes, base: Limits | None = None) -> Limits:
    """The classes' (hard, soft, soft seconds) after applying ``text`` to ``base`` (the defaults when
    None); ValueError with Redis's reason when invalid."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    parts = text.split()
    if len(parts) % 4:
        raise ValueError("Wrong number of arguments in buffer limit configuration.")
    out = dict(_DEFAULT if base is None else base)
    for i in range(0, len(parts), 4):
        cls = _ALIASES.get(parts[i].lower())
        if cls is None:
            raise ValueError("Invalid client class specified in buffer limit configuration.")
        hard = _memtoull(parts[i + 1])
        soft = _memtoull(parts[i + 2])
        secs_s = parts[i + 3]
        secs = int(secs_s) if secs_s.lstrip("-").isdigit() else None
        if hard is None or soft is None or secs is None or secs < 0:
            raise ValueError("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
        out[cls] = (hard, soft, secs)
    return out


def format_limits(limits: Limits) -> str:
    """The text CONFIG GET client-output-buffer-limit shows (bytes, ``slave`` for replicas)."""
    return " ".join(f"{c} {limits[c][0]} {limits[c][1]} {limits[c][2]}" for c in CLASSES)


def apply(server: Any, text: str) -> None:
    """Install the limits of ``text`` (already valid) on ``server``: ``obl`` maps a class to its
    limits, or None when that class has none; ``obl_normal`` is the normal class's (None: off), the
    one attribute ClientConnection.write tests."""
    limits = parse_limits(text)
    server.config.client_output_buffer_limit = format_limits(limits)
    server.obl = {c: (v if (v[0] or v[1]) else None) for c, v in limits.items()}
    server.obl_normal = server.obl["normal"]


def check(client: Any, transport: Any) -> bool:
    """Enforce the limits of ``client``'s class after output was added; True when it was dropped."""
    server = client.server
    obl = getattr(server, "obl", None)
    if obl is None:
        return False
    cls = "pubsub" if (client.channels or client.patterns) else "normal"
    lim = obl[cls]
    if lim is None:
        return False
    hard, soft, secs = lim
    size = transport.get_write_buffer_size()
    over = hard and size >= hard
    if not over and soft and size >= soft:
        now = time.monotonic()
        since = client.obl_soft_since
        if since is None:
            client.obl_soft_since = now
        elif now - since > secs:
            over = True
    elif client.obl_soft_since is not None and (not soft or size < soft):
        client.obl_soft_since = None
    if not over:
        return False
    log.warning(
        "Client id=%d addr=%s closed for overcoming of output buffer limits (class %s, %d bytes pending).",
        client.id,
        client.addr.decode(),
        cls,
        size,
    )
    server.stats_obl_disconnections = getattr(server, "stats_obl_disconnections", 0) + 1
    client.closing = True
    transport.abort()
    return True
