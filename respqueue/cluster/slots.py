"""Hash slots as Redis Cluster computes them: CRC16 (XMODEM) of the key, or of its ``{hash tag}``, mod 16384."""

from __future__ import annotations

from binascii import crc_hqx

SLOTS = 16384


def key_slot(key: bytes) -> int:
    """The hash slot of ``key``: the first ``{...}`` with something inside is hashed instead of the whole key."""
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1 : e]
    # crc_hqx is CRC-CCITT with polynomial 0x1021; started from 0 it is XMODEM, the CRC16 Redis uses
    return crc_hqx(key, 0) & 16383


def keys_slot(argv: list[bytes], start: int, stop: int) -> int:
    """The slot that ``argv[start:stop]`` (at least one key) share, or -1 when they span slots. A key that
    begins with the first key's ``{hash tag}`` (every key of a BullMQ queue does) shares its slot: no CRC is
    computed for it."""
    first = argv[start]
    slot = key_slot(first)
    tag = b""
    if first[:1] == b"{":
        e = first.find(b"}", 1)
        if e > 1:
            tag = first[: e + 1]
    for i in range(start + 1, stop):
        k = argv[i]
        if tag and k.startswith(tag):
            continue
        if key_slot(k) != slot:
            return -1
    return slot


def script_slot(argv: list[bytes]) -> int:
    """The slot of a script call's keys (EVAL/EVALSHA/FCALL: numkeys at ``argv[2]``, the keys after it): -1 when
    they span slots, -2 when it has none or numkeys is not a count of the arguments there (the command itself
    answers that error; numkeys read as Redis's string2ll reads it)."""
    if len(argv) < 3:
        return -2
    nk = argv[2]
    ln = len(nk)
    if ln == 0 or ln > 9 or (ln > 1 and nk[0] == 48):
        return -2
    n = 0
    for c in nk:
        if c < 48 or c > 57:
            return -2
        n = n * 10 + c - 48
    if n == 0 or 3 + n > len(argv):
        return -2
    return keys_slot(argv, 3, 3 + n)


def parse_ranges(spec: object, where: str) -> list[tuple[int, int]]:
    """Slot ranges from a cluster file: ``"0-5460"``, ``"0-100 200 300-400"``, ``[0, "5-9"]`` or ``[[0, 99]]``."""
    items: list[object]
    if isinstance(spec, str):
        items = list(spec.replace(",", " ").split())
    elif isinstance(spec, int) and not isinstance(spec, bool):
        items = [spec]
    elif isinstance(spec, list):
        items = spec
    else:
        raise ValueError(f'{where}: slots must be a string such as "0-5460" or a list, not {spec!r}')
    out: list[tuple[int, int]] = []
    for it in items:
        if isinstance(it, bool):
            raise ValueError(f"{where}: bad slot {it!r}")
        if isinstance(it, int):
            a = b = it
        elif isinstance(it, list) and len(it) == 2 and all(isinstance(x, int) for x in it):
            a, b = it[0], it[1]
        elif isinstance(it, str):
            part = it.strip()
            try:
                if "-" in part:
                    x, y = part.split("-", 1)
                    a, b = int(x), int(y)
                else:
                    a = b = int(part)
            except ValueError:
                raise ValueError(f"{where}: bad slot range {it!r}") from None
        else:
            raise ValueError(f"{where}: bad slot range {it!r}")
        if not (0 <= a <= b < SLOTS):
            raise ValueError(f"{where}: slot range {a}-{b} is outside 0-{SLOTS - 1} or reversed")
        out.append((a, b))
    return out


def split_even(n: int) -> list[tuple[int, int]]:
    """Slot ranges for ``n`` masters, as ``redis-cli --cluster create`` allocates them."""
    per = SLOTS / n
    first = 0
    cursor = 0.0
    out = []
    for i in range(n):
        last = _lround(cursor + per - 1)
        if last > SLOTS or i == n - 1:
            last = SLOTS - 1
        if last < first:
            last = first
        out.append((first, last))
        first = last + 1
        cursor += per
    return out


def _lround(x: float) -> int:
    # C's lround: halves away from zero (Python's round() goes to even)
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def ranges_of(slots: list[int]) -> list[tuple[int, int]]:
    """Sorted slot numbers as (start, end) runs."""
    out: list[tuple[int, int]] = []
    for s in slots:
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out
