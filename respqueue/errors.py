"""Redis's error texts, in one place, because clients match on them."""

from __future__ import annotations

from .resp import RedisError

WRONGTYPE = RedisError(b"WRONGTYPE Operation against a key holding the wrong kind of value")
SYNTAX = RedisError(b"ERR syntax error")
NOT_INTEGER = RedisError(b"ERR value is not an integer or out of range")
NOT_FLOAT = RedisError(b"ERR value is not a valid float")
OVERFLOW = RedisError(b"ERR increment or decrement would overflow")
NO_SUCH_KEY = RedisError(b"ERR no such key")
OUT_OF_RANGE = RedisError(b"ERR index out of range")
NOAUTH = RedisError(b"NOAUTH Authentication required.")
WRONGPASS = RedisError(b"WRONGPASS invalid username-password pair or user is disabled.")
NOSCRIPT = RedisError(b"NOSCRIPT No matching script. Please use EVAL.")
TIMEOUT_NOT_FLOAT = RedisError(b"ERR timeout is not a float or out of range")
TIMEOUT_NEGATIVE = RedisError(b"ERR timeout is negative")
SCORE_NOT_FLOAT = RedisError(b"ERR value is not a valid float")
MIN_MAX_NOT_FLOAT = RedisError(b"ERR min or max is not a float")
MIN_MAX_NOT_LEX = RedisError(b"ERR min or max not valid string range item")
DB_INDEX_OUT_OF_RANGE = RedisError(b"ERR DB index is out of range")
INVALID_DB_INDEX = RedisError(b"ERR value is not an integer or out of range")


def wrong_args(name: str | bytes) -> RedisError:
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return RedisError(f"ERR wrong number of arguments for '{name.lower()}' command")


def unknown_command(argv: list[bytes]) -> RedisError:
    args = b""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + a[: 128 - len(args)] + b"' "
    return RedisError(
        b"ERR unknown command '" + argv[0][:128] + b"', with args beginning with: " + args
    )


def unknown_subcommand(sub: bytes, container: str | bytes) -> RedisError:
    if isinstance(container, str):
        container = container.encode()
    return RedisError(b"ERR unknown subcommand '" + sub[:128] + b"'. Try " + container.upper() + b" HELP.")
