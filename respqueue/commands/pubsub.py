"""Pub/Sub (pubsub.c): (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, (S)PUBLISH, PUBSUB *.

Registries: ``server.pubsub_channels`` (channel -> insertion-ordered dict of
clients), ``server.pubsub_patterns`` (pattern -> dict of clients) and, on the
client, ``c.channels`` / ``c.patterns``.

Shard channels (SSUBSCRIBE...) behave as plain channels do on a standalone
server but live in their own namespace: they are stored in the same
registries under the key ``(SHARD, channel)`` (a tuple, so no PUBLISH can ever
reach them and the server's disconnect cleanup covers them too). The client
keeps how many of its ``c.channels`` are shard channels in ``c.shard_count``.

Confirmations ([p|s]subscribe / [p|s]unsubscribe) are replies, not pushes:
they must come out in order with the other replies of a pipeline, so they are
returned (one message) or appended to the connection's pending output (more).
"""

from __future__ import annotations

from typing import Any

from ..glob import compile_glob
from ..resp import NO_REPLY, Push, RedisError, Status, encode
from .registry import command, container, subcommand

SHARD = b"shard"

_SUBSCRIBE = b"subscribe"
_UNSUBSCRIBE = b"unsubscribe"
_PSUBSCRIBE = b"psubscribe"
_PUNSUBSCRIBE = b"punsubscribe"
_SSUBSCRIBE = b"ssubscribe"
_SUNSUBSCRIBE = b"sunsubscribe"
_MESSAGE = b"message"
_PMESSAGE = b"pmessage"
_SMESSAGE = b"smessage"


# ---- delivering replies in order -------------------------------------------
def _pending_out(c: Any) -> list[bytes] | None:
    """The output list the connection is accumulating for the current read (``pending_out``, set by the
    protocol layer exactly while it processes a read; None outside one, and for clients without one).

    The protocol layer (protocol.py) batches the replies of one read into a list and writes it when the
    read is done; a command that must emit several replies appends them there to keep pipeline order.
    """
    return getattr(c, "pending_out", None)


def _emit(c: Any, msgs: list[list[Any]]) -> Any:
    """Send confirmation messages to the caller as its reply(ies)."""
    if c.in_exec or c.is_script:
        # inside EXEC the messages become the command's entry in the array
        return Push(msgs[0]) if len(msgs) == 1 else [Push(m) for m in msgs]
    if len(msgs) == 1:
        return Push(msgs[0])
    out = _pending_out(c)
    if out is not None:
        resp3 = c.resp == 3
        for m in msgs:
            encode(Push(m), out, resp3)
        return NO_REPLY
    for m in msgs[:-1]:
        c.send_push(m)
    return Push(msgs[-1])


def _push_to_self(c: Any, msg: list[Any]) -> None:
    """A RESP3 client publishing to itself: the message goes before the reply."""
    out = _pending_out(c)
    if out is not None:
        encode(Push(msg), out, c.resp == 3)
    else:
        c.send_push(msg)


# ---- counts ------------------------------------------------------------------
def _shard_count(c: Any) -> int:
    return getattr(c, "shard_count", 0)


def _count(c: Any) -> int:
    """Channel + pattern subscriptions (what (P)SUBSCRIBE replies report)."""
    return len(c.channels) - _shard_count(c) + len(c.patterns)


def _ensure_pattern_dict(c: Any) -> dict[bytes, None]:
    # Redis 7.0 keeps a client's patterns in subscription order (PUNSUBSCRIBE
    # without arguments reports them in that order): use an ordered dict.
    p = c.patterns
    if type(p) is not dict:
        p = c.patterns = dict.fromkeys(p)
    return p


# ---- subscribe / unsubscribe primitives --------------------------------------
def _sub_channel(c: Any, key: Any) -> None:
    if key in c.channels:
        return
    reg = c.server.pubsub_channels
    d = reg.get(key)
    if d is None:
        d = reg[key] = {}
    d[c] = None
    c.channels.add(key)


def _unsub_channel(c: Any, key: Any) -> bool:
    if key not in c.channels:
        return False
    c.channels.discard(key)
    reg = c.server.pubsub_channels
    d = reg.get(key)
    if d is not None:
        d.pop(c, None)
        if not d:
            del reg[key]
    return True


def _sub_pattern(c: Any, pat: bytes) -> None:
    pats = _ensure_pattern_dict(c)
    if pat in pats:
        return
    reg = c.server.pubsub_patterns
    d = reg.get(pat)
    if d is None:
        d = reg[pat] = {}
    d[c] = None
    pats[pat] = None


def _unsub_pattern(c: Any, pat: bytes) -> bool:
    pats = _ensure_pattern_dict(c)
    if pat not in pats:
        return False
    del pats[pat]
    reg = c.server.pubsub_patterns
    d = reg.get(pat)
    if d is not None:
        d.pop(c, None)
        if not d:
            del reg[pat]
    return True


def _unsub_all_channels(c: Any, notify: bool) -> list[list[Any]]:
    msgs: list[list[Any]] = []
    for ch in [x for x in c.channels if type(x) is bytes]:
        _unsub_channel(c, ch)
        if notify:
            msgs.append([_UNSUBSCRIBE, ch, _count(c)])
    if notify and not msgs:
        msgs.append([_UNSUBSCRIBE, None, _count(c)])
    return msgs


def _unsub_all_patterns(c: Any, notify: bool) -> list[list[Any]]:
    msgs: list[list[Any]] = []
    for pat in list(c.patterns):
        _unsub_pattern(c, pat)
        if notify:
            msgs.append([_PUNSUBSCRIBE, pat, _count(c)])
    if notify and not msgs:
        msgs.append([_PUNSUBSCRIBE, None, _count(c)])
    return msgs


def _unsub_all_shard(c: Any, notify: bool) -> list[list[Any]]:
    msgs: list[list[Any]] = []
    for key in [x for x in c.channels if type(x) is tuple]:
        _unsub_channel(c, key)
        c.shard_count = _shard_count(c) - 1
        if notify:
            msgs.append([_SUNSUBSCRIBE, key[1], _shard_count(c)])
    if notify and not msgs:
        msgs.append([_SUNSUBSCRIBE, None, _shard_count(c)])
    return msgs


def unsubscribe_all(c: Any, notify: bool) -> None:
    """Drop every subscription of ``c`` (RESET); with ``notify``, push the confirmations."""
    msgs = _unsub_all_channels(c, notify) + _unsub_all_shard(c, notify) + _unsub_all_patterns(c, notify)
    if notify:
        for m in msgs:
            c.send_push(m)


# ---- commands ----------------------------------------------------------------
@command("subscribe", -2, "pubsub noscript loading stale", group="pubsub")
def subscribe(c: Any, argv: list[bytes]) -> Any:
    msgs = []
    for ch in argv[1:]:
        _sub_channel(c, ch)
        msgs.append([_SUBSCRIBE, ch, _count(c)])
    return _emit(c, msgs)


@command("unsubscribe", -1, "pubsub noscript loading stale", group="pubsub")
def unsubscribe(c: Any, argv: list[bytes]) -> Any:
    if len(argv) == 1:
        return _emit(c, _unsub_all_channels(c, True))
    msgs = []
    for ch in argv[1:]:
        _unsub_channel(c, ch)
        msgs.append([_UNSUBSCRIBE, ch, _count(c)])
    return _emit(c, msgs)


@command("psubscribe", -2, "pubsub noscript loading stale", group="pubsub")
def psubscribe(c: Any, argv: list[bytes]) -> Any:
    msgs = []
    for pat in argv[1:]:
        _sub_pattern(c, pat)
        msgs.append([_PSUBSCRIBE, pat, _count(c)])
    return _emit(c, msgs)


@command("punsubscribe", -1, "pubsub noscript loading stale", group="pubsub")
def punsubscribe(c: Any, argv: list[bytes]) -> Any:
    if len(argv) == 1:
        return _emit(c, _unsub_all_patterns(c, True))
    msgs = []
    for pat in argv[1:]:
        _unsub_pattern(c, pat)
        msgs.append([_PUNSUBSCRIBE, pat, _count(c)])
    return _emit(c, msgs)


@command("ssubscribe", -2, "pubsub noscript loading stale", 1, -1, 1, group="pubsub")
def ssubscribe(c: Any, argv: list[bytes]) -> Any:
    if c.in_exec or c.is_script:
        raise RedisError(b"ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
    msgs = []
    for ch in argv[1:]:
        key = (SHARD, ch)
        if key not in c.channels:
            _sub_channel(c, key)
            c.shard_count = _shard_count(c) + 1
        msgs.append([_SSUBSCRIBE, ch, _shard_count(c)])
    return _emit(c, msgs)


@command("sunsubscribe", -1, "pubsub noscript loading stale", 1, -1, 1, group="pubsub")
def sunsubscribe(c: Any, argv: list[bytes]) -> Any:
    if len(argv) == 1:
        return _emit(c, _unsub_all_shard(c, True))
    msgs = []
    for ch in argv[1:]:
        if _unsub_channel(c, (SHARD, ch)):
            c.shard_count = _shard_count(c) - 1
        msgs.append([_SUNSUBSCRIBE, ch, _shard_count(c)])
    return _emit(c, msgs)


def _deliver(c: Any, subs: dict[Any, None], msg: list[Any]) -> int:
    for sub in tuple(subs):
        if sub is c:
            _push_to_self(c, msg)
            continue
        sub.send_push(msg)
        if getattr(sub, "closing", False):
            _drop_if_overflowing(sub)
    return len(subs)


def _drop_if_overflowing(sub: Any) -> None:
    """A subscriber closed for exceeding the pub/sub output limit never drains its
    buffer, so a graceful close would never complete (and it would stay
    subscribed): drop its connection now, as Redis frees such a client."""
    t = getattr(sub, "transport", None)
    obl = getattr(sub.server, "obl", None)  # client-output-buffer-limit (respqueue/outbuf.py)
    limit = obl["pubsub"][0] if obl and obl["pubsub"] else 0
    if t is not None and limit and t.get_write_buffer_size() > limit:
        t.abort()


def publish_message(c: Any, channel: bytes, message: bytes) -> int:
    """Deliver ``message`` to the subscribers of ``channel``; the receiver count."""
    server = c.server
    n = 0
    subs = server.pubsub_channels.get(channel)
    if subs:
        n += _deliver(c, subs, [_MESSAGE, channel, message])
    if server.pubsub_patterns:
        for pat, psubs in tuple(server.pubsub_patterns.items()):
            if compile_glob(pat)(channel):
                n += _deliver(c, psubs, [_PMESSAGE, pat, channel, message])
    return n


@command("publish", 3, "loading stale fast", group="pubsub")
def publish(c: Any, argv: list[bytes]) -> Any:
    cluster = c.server.cluster
    if cluster is not None and len(cluster.nodes) > 1:
        cluster.bus.publish(argv[1], argv[2])  # the other nodes' subscribers (respqueue/cluster/bus.py)
    return publish_message(c, argv[1], argv[2])


@command("spublish", 3, "loading stale fast", 1, 1, 1, group="pubsub")
def spublish(c: Any, argv: list[bytes]) -> Any:
    subs = c.server.pubsub_channels.get((SHARD, argv[1]))
    if not subs:
        return 0
    return _deliver(c, subs, [_SMESSAGE, argv[1], argv[2]])


# ---- PUBSUB ------------------------------------------------------------------
container("pubsub", -2, "", group="pubsub")


def _bad_args(argv: list[bytes]) -> RedisError:
    return RedisError(
        b"ERR unknown subcommand or wrong number of arguments for '" + argv[1] + b"'. Try PUBSUB HELP."
    )


def _channels(c: Any, argv: list[bytes], shard: bool) -> list[bytes]:
    if len(argv) > 3:
        raise _bad_args(argv)
    match = compile_glob(argv[2]) if len(argv) == 3 else None
    out: list[bytes] = []
    for key in c.server.pubsub_channels:
        if shard:
            if type(key) is not tuple:
                continue
            ch = key[1]
        else:
            if type(key) is not bytes:
                continue
            ch = key
        if match is None or match(ch):
            out.append(ch)
    return out


@subcommand("pubsub", "channels", -2, "loading stale")
def pubsub_channels(c: Any, argv: list[bytes]) -> Any:
    return _channels(c, argv, False)


@subcommand("pubsub", "shardchannels", -2, "loading stale")
def pubsub_shardchannels(c: Any, argv: list[bytes]) -> Any:
    return _channels(c, argv, True)


@subcommand("pubsub", "numsub", -2, "loading stale")
def pubsub_numsub(c: Any, argv: list[bytes]) -> Any:
    reg = c.server.pubsub_channels
    out: list[Any] = []
    for ch in argv[2:]:
        d = reg.get(ch)
        out.append(ch)
        out.append(len(d) if d else 0)
    return out


@subcommand("pubsub", "shardnumsub", -2, "loading stale")
def pubsub_shardnumsub(c: Any, argv: list[bytes]) -> Any:
    reg = c.server.pubsub_channels
    out: list[Any] = []
    for ch in argv[2:]:
        d = reg.get((SHARD, ch))
        out.append(ch)
        out.append(len(d) if d else 0)
    return out


@subcommand("pubsub", "numpat", 2, "loading stale")
def pubsub_numpat(c: Any, argv: list[bytes]) -> Any:
    return len(c.server.pubsub_patterns)


_HELP = [
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
]


@subcommand("pubsub", "help", 2, "loading stale")
def pubsub_help(c: Any, argv: list[bytes]) -> Any:
    return [Status(x.encode()) for x in _HELP]
