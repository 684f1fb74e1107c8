"""MIGRATE: move keys to another node (live slot migration, ``redis-cli --cluster reshard``).

respqueue has no DUMP/RESTORE payload, so each key is rebuilt on the target with ordinary commands inside
one ``ASKING`` + ``MULTI`` ... ``EXEC`` (SET, HSET, RPUSH, SADD, ZADD, XADD/XSETID/XGROUP/XCLAIM, then
PEXPIREAT), which any Redis-protocol target accepts, a real Redis Cluster node included. Like Redis's, the
command blocks this server while it talks to the target (``timeout`` ms for each read and write).
"""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from typing import Any

import hiredis

from ..numbers import str2int
from ..resp import RedisError, Status

CHUNK = 500  # elements per rebuilding command
NOKEY = Status(b"NOKEY")


def migrate_key_indexes(argv: list[bytes]) -> list[int]:
    """Redis's migrateGetKeys: the key at 3, or the keys after KEYS when argv[3] is empty."""
    if argv[3] == b"":
        for i in range(6, len(argv)):
            a = argv[i].lower()
            if a == b"keys":
                return list(range(i + 1, len(argv)))
            if a == b"auth":
                break  # past the options Redis scans (AUTH's password could be "keys")
    return [3] if len(argv) > 3 else []


def _score(x: float) -> bytes:
    if math.isinf(x):
        return b"inf" if x > 0 else b"-inf"
    return repr(x).encode()


def rebuild(key: bytes, v: Any) -> Iterator[list[bytes]]:
    """Commands that create ``v`` as ``key`` on an empty target."""
    from ..types.stream import Stream, format_id

    if type(v) is bytes:
        yield [b"SET", key, v]
        return
    t = v.rtype
    if t == b"hash":
        flat: list[bytes] = []
        for f, x in v.items():
            flat += [f, x]
        for i in range(0, len(flat), 2 * CHUNK):
            yield [b"HSET", key, *flat[i : i + 2 * CHUNK]]
    elif t == b"list":
        items = list(v)
        for i in range(0, len(items), CHUNK):
            yield [b"RPUSH", key, *items[i : i + CHUNK]]
    elif t == b"set":
        items = list(v)
        for i in range(0, len(items), CHUNK):
            yield [b"SADD", key, *items[i : i + CHUNK]]
    elif t == b"zset":
        pairs: list[bytes] = []
        for s, m in v.items():
            pairs += [_score(s), m]
        for i in range(0, len(pairs), 2 * CHUNK):
            yield [b"ZADD", key, *pairs[i : i + 2 * CHUNK]]
    elif isinstance(v, Stream):
        entries = v.range(0, (1 << 128) - 1)
        for eid, fields in entries:
            yield [b"XADD", key, eid, *fields]
        if not entries:
            # an empty stream: create it through a group, then drop that group if it was not one of its own
            yield [b"XGROUP", b"CREATE", key, b"__respqueue_migrate__", b"0", b"MKSTREAM"]
            yield [b"XGROUP", b"DESTROY", key, b"__respqueue_migrate__"]
        yield [
            b"XSETID",
            key,
            format_id(v.last_id),
            b"ENTRIESADDED",
            str(v.entries_added).encode(),
            b"MAXDELETEDID",
            format_id(v.max_deleted),
        ]
        for name, g in (v.groups or {}).items():
            yield [b"XGROUP", b"CREATE", key, name, format_id(g.last_id), b"ENTRIESREAD", str(g.entries_read).encode()]
            for cname in g.consumers:
                yield [b"XGROUP", b"CREATECONSUMER", key, name, cname]
            for id_, nack in g.pel.items():
                owner = nack.consumer.name if nack.consumer is not None else b""
                yield [
                    b"XCLAIM",
                    key,
                    name,
                    owner,
                    b"0",
                    format_id(id_),
                    b"TIME",
                    str(nack.delivery_time).encode(),
                    b"RETRYCOUNT",
                    str(nack.delivery_count).encode(),
                    b"FORCE",
                    b"JUSTID",
                ]
    else:
        raise RedisError(b"ERR MIGRATE cannot move a value of type " + t)


class _Target:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError:
            raise RedisError(b"IOERR error or timeout connecting to the client") from None
        self.reader = hiredis.Reader()

    def send(self, cmds: list[list[bytes]]) -> None:
        out = []
        for argv in cmds:
            out.append(b"*%d\r\n" % len(argv))
            for a in argv:
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        try:
            self.sock.sendall(b"".join(out))
        except OSError:
            raise RedisError(b"IOERR error or timeout writing to target instance") from None

    def read(self) -> Any:
        while True:
            r = self.reader.gets()
            if r is not False:
                return r
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                raise RedisError(b"IOERR error or timeout reading to target instance")
            self.reader.feed(data)

    def close(self) -> None:
        self.sock.close()


def _target_error(r: Any) -> RedisError:
    return RedisError(b"ERR Target instance replied with error: " + str(r).encode())


def migrate(c: Any, argv: list[bytes]) -> Any:
    """MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS key ...]"""
    copy = replace = False
    auth: list[bytes] | None = None
    keys: list[bytes] = []
    first_key = 0
    i = 6
    while i < len(argv):
        a = argv[i].lower()
        more = len(argv) - i - 1
        if a == b"copy":
            copy = True
        elif a == b"replace":
            replace = True
        elif a == b"auth" and more >= 1:
            auth = [b"AUTH", argv[i + 1]]
            i += 1
        elif a == b"auth2" and more >= 2:
            auth = [b"AUTH", argv[i + 1], argv[i + 2]]
            i += 2
        elif a == b"keys":
            if argv[3] != b"":
                raise RedisError(
                    b"ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
                )
            first_key = i + 1
            keys = argv[first_key:]
            break
        else:
            raise RedisError(b"ERR syntax error")
        i += 1
    dbid = str2int(argv[4])
    timeout = str2int(argv[5])
    if timeout is None or dbid is None:
        raise RedisError(b"ERR value is not an integer or out of range")
    if timeout <= 0:
        timeout = 1000
    if not first_key:
        keys = [argv[3]]
    db = c.db
    present = [(k, v) for k in keys if (v := db.lookup(k)) is not None]
    if not present:
        return NOKEY
    port = str2int(argv[2])
    if port is None or not 0 < port < 65536:
        raise RedisError(b"IOERR error or timeout connecting to the client")
    t = _Target(argv[1].decode("latin-1"), port, timeout / 1000)
    try:
        head: list[list[bytes]] = []
        if auth is not None:
            head.append(auth)
        if dbid != 0:
            head.append([b"SELECT", argv[4]])
        if head:
            t.send(head)
            for _ in head:
                r = t.read()
                if isinstance(r, hiredis.ReplyError):
                    raise _target_error(r)
        if not replace:
            # one key a request: several keys of an importing slot would get TRYAGAIN
            t.send([x for k, _ in present for x in ([b"ASKING"], [b"EXISTS", k])])
            for _ in present:
                t.read()
                r = t.read()
                if isinstance(r, hiredis.ReplyError):
                    raise _target_error(r)
                if r:
                    raise RedisError(b"ERR Target instance replied with error: BUSYKEY Target key name already exists.")
        # every key in one pipeline; a key is deleted here once its EXEC succeeded there
        batches = []
        for k, v in present:
            cmds = [[b"ASKING"], [b"MULTI"], [b"DEL", k], *rebuild(k, v)]
            ttl = db.get_expire(k)
            if ttl != -1:
                cmds.append([b"PEXPIREAT", k, str(ttl).encode()])
            cmds.append([b"EXEC"])
            batches.append((k, len(cmds)))
            t.send(cmds)
        first_error: RedisError | None = None
        for k, n in batches:
            replies = [t.read() for _ in range(n)]
            err = _batch_error(replies)
            if err is not None:
                first_error = first_error or err
            elif not copy:
                db.delete(k)
        if first_error is not None:
            raise first_error
    finally:
        t.close()
    return Status(b"OK")


def _batch_error(replies: list[Any]) -> RedisError | None:
    for r in replies[1:-1]:  # ASKING fails on a target that is not in cluster mode: no matter
        if isinstance(r, hiredis.ReplyError):
            return _target_error(r)
    if not isinstance(replies[-1], list):
        return _target_error(replies[-1])
    for r in replies[-1]:
        if isinstance(r, hiredis.ReplyError):
            return _target_error(r)
    return None
