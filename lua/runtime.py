"""The Lua scripting runtime: one Lua 5.1 state per server, a SHA1-keyed cache
of compiled scripts, the sandbox, the redis.call bridge and the time limit.

Engine: lupa's ``lua51`` (PUC Lua 5.1.5, what Redis embeds). LuaJIT 2.1 was
measured too (interop/bench/lua_engines.py); BullMQ's scripts spend their time
in the redis.call bridge, where both engines are within a few percent, and
Lua 5.1 gives Redis's exact semantics (error texts, no ``\\x`` escapes, table
iteration order, the 8000-slot C stack behind ``unpack``, count hooks that fire
in every loop and a memory cap).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from typing import Any

from respqueue import keyspace
from respqueue.call import Block, call
from respqueue.client import Client
from respqueue.commands.registry import COMMANDS as _COMMANDS
from respqueue.commands.registry import Command
from respqueue.commands.scripting import register_runtime
from respqueue.commands.util import parse_int
from respqueue.dispatch import resolve
from respqueue.errors import NOSCRIPT
from respqueue.resp import NO_REPLY, RedisError, Status

from .convert import Converter, error_text, format_number_arg
from .libs import LuaRaise

log = logging.getLogger("respqueue.lua")

ENGINE = os.environ.get("RESPQUEUE_LUA_ENGINE", "lua51")
MAX_MEMORY = 1024 * 1024 * 1024  # Lua heap cap (lua51 only)
MAX_STRING = 512 * 1024 * 1024  # string.rep results above this fail

_SANDBOX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox.lua")

ERR_ARGS = b"ERR Lua redis lib command arguments must be strings or integers"
ERR_NOARGS = b"ERR Please specify at least one argument for this redis lib call"
ERR_UNKNOWN = b"ERR Unknown Redis command called from script"
ERR_ARITY = b"ERR Wrong number of args calling Redis command from script"
ERR_NOSCRIPT_CMD = b"ERR This Redis command is not allowed from script"
ERR_RO = b"ERR Write commands are not allowed from read-only scripts."
OOM_MSG = b"OOM command not allowed when used memory > 'maxmemory'."

FLAT_ARGS = 12  # up to this many keys + args go to Lua as call arguments; more: two table_from calls (cheaper then)

SHEBANG_FLAGS = {b"no-writes", b"allow-oom", b"allow-stale", b"no-cluster", b"allow-cross-slot-keys"}


def _deny_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    raise AttributeError("attempt to index a function value")


def _load_engine() -> Any:
    if ENGINE == "luajit21":
        from lupa import luajit21 as mod
    else:
        from lupa import lua51 as mod
    return mod


class ScriptClient(Client):
    """The client that runs a script's redis.call()s: never blocks."""

    is_script = True

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.authenticated = True
        self.addr = b"lua"
        self.laddr = b""
        self.fd = -1
        self.blocked = None
        self.monitor = False


class Script:
    __slots__ = ("sha", "body", "func", "no_writes")

    def __init__(self, sha: bytes, body: bytes, func: Any, no_writes: bool) -> None:
        self.sha = sha
        self.body = body
        self.func = func
        self.no_writes = no_writes


class Scripting:
    """Hangs on ``server.scripting``; shared by every connection."""

    def __init__(self, server: Any) -> None:
        from . import libs

        self.server = server
        mod = _load_engine()
        self.engine = mod
        kwargs: dict[str, Any] = dict(
            encoding=None,
            unpack_returned_tuples=True,
            register_eval=False,
            register_builtins=False,
            attribute_filter=_deny_attributes,  # scripts must not reach Python objects' attributes
        )
        if ENGINE != "luajit21":
            kwargs["max_memory"] = MAX_MEMORY
        self.lua = lua = mod.LuaRuntime(**kwargs)
        self.cache: dict[bytes, Script] = {}
        self.client = ScriptClient(server)
        self.resp = 2
        # state of the running script
        self.running = False
        self.readonly = False
        self.wrote = False
        self.kill_requested = False
        self.start = 0.0
        self.last_poll = 0.0
        self.sha = b""
        self.caller: Any = None
        self.busy = False
        # cluster mode: redis.call may only reach this node's keys (respqueue/cluster/topology.py)
        self.cluster: Any = getattr(server, "cluster", None)

        self.libs = libs.Libs(self)
        with open(_SANDBOX, "rb") as fh:
            src = fh.read()
        loadstring = lua.globals()[b"loadstring"]
        chunk = loadstring(src, b"=[respqueue]")
        if not callable(chunk):
            raise RuntimeError(f"cannot load the Lua sandbox: {chunk!r}")
        h = chunk(self._bridge_call, self._bridge_pcall, self._tick, self._unwrap, self.libs.table())
        self.helpers = h
        self._compile = h[b"compile"]
        self._run = h[b"run"]
        self._run_flat = h[b"run_flat"]
        self._err_info = h[b"err_info"]
        self.table_from = lua.table_from
        self.conv = Converter(lua, h, mod.lua_type)
        self.libs.bind(h)
        self.mk_err = self.conv.mk_err
        self.mk_ok = self.conv.mk_ok

    # ---- cache ----------------------------------------------------------
    def compile(self, body: bytes, sha: bytes | None = None) -> Script:
        """Compile ``body`` (or fetch it from the cache); raises the compile error."""
        if sha is None:
            sha = hashlib.sha1(body).hexdigest().encode()
        s = self.cache.get(sha)
        if s is not None:
            return s
        code = body
        no_writes = False
        if body.startswith(b"#!"):
            code, no_writes = self._shebang(body)
        res = self._compile(code)
        if type(res) is tuple:
            err = res[1]
            if isinstance(err, bytes):
                raise RedisError(b"ERR Error compiling script (new function): " + err)
            raise RedisError(b"ERR Error compiling script (new function): unknown error")
        s = Script(sha, body, res, no_writes)
        self.cache[sha] = s
        return s

    @staticmethod
    def _shebang(body: bytes) -> tuple[bytes, bool]:
        nl = body.find(b"\n")
        if nl < 0:
            raise RedisError("ERR Invalid script shebang")
        line = body[2:nl]
        parts = line.split(b" ")
        if parts[0] != b"lua":
            raise RedisError(b"ERR Unexpected engine in script shebang: #!" + parts[0])
        no_writes = False
        for p in parts[1:]:
            if not p:
                continue
            if p.startswith(b"flags="):
                for f in p[6:].split(b","):
                    if not f:
                        continue
                    if f not in SHEBANG_FLAGS:
                        raise RedisError(b"ERR Unexpected flag in script shebang: " + f)
                    if f == b"no-writes":
                        no_writes = True
            else:
                raise RedisError(b"ERR Unknown lua shebang option: " + p)
        # keep line numbers: the shebang line becomes an empty line
        return body[nl:], no_writes

    def lookup(self, sha: bytes) -> Script | None:
        s = self.cache.get(sha)
        if s is None and len(sha) == 40:
            s = self.cache.get(sha.lower())
        return s

    def flush(self) -> None:
        self.cache.clear()
        self.lua.execute(b"collectgarbage()")

    def memory(self) -> int:
        try:
            return int(self.lua.execute(b"return collectgarbage('count')") * 1024)
        except Exception:
            return 0

    # ---- EVAL -----------------------------------------------------------
    def eval(self, c: Any, argv: list[bytes], by_sha: bool, ro: bool) -> Any:
        if by_sha and len(argv[1]) != 40:
            raise NOSCRIPT
        numkeys = parse_int(argv[2])
        if numkeys > len(argv) - 3:
            raise RedisError(b"ERR Number of keys can't be greater than number of args")
        if numkeys < 0:
            raise RedisError(b"ERR Number of keys can't be negative")
        if by_sha:
            script = self.lookup(argv[1])
            if script is None:
                raise NOSCRIPT
        else:
            script = self.compile(argv[1])
        if self.server.write_refused is not None and not ro and not script.no_writes and script.body[:2] == b"#!":
            # Redis 7: a script with a shebang and without the no-writes flag counts as a write
            # command, refused before it runs while writes are refused (MISCONF); one without a
            # shebang runs, and its first write (redis.call) gets the error
            raise self.server.write_refused
        if self.cluster is not None and script.body.startswith(b"#!") and b"no-cluster" in script.body.split(b"\n", 1)[0]:
            raise RedisError(b"ERR Can not run script on cluster, 'no-cluster' flag is set.")
        return self.run(c, script, argv[3 : 3 + numkeys], argv[3 + numkeys :], ro or script.no_writes)

    def run(self, c: Any, script: Script, keys: list[bytes], args: list[bytes], readonly: bool) -> Any:
        if self.running:  # e.g. an EXEC let through while a script is busy
            raise self.server.busy_error()
        sc = self.client
        sc.db = c.db
        sc.resp = 2
        self.resp = 2
        self.readonly = readonly
        self.wrote = False
        self.kill_requested = False
        self.sha = script.sha
        self.caller = c
        self.busy = False
        prev_frozen = keyspace._frozen_ms
        if prev_frozen is None:
            keyspace.freeze_time(int(time.time() * 1000))
        self.start = time.monotonic()
        self.running = True
        try:
            if len(keys) + len(args) <= FLAT_ARGS:
                res = self._run_flat(script.func, len(keys), *keys, *args)
            else:
                tf = self.table_from
                res = self._run(script.func, tf(keys), tf(args))
        except Exception as e:  # lupa.LuaError, LuaMemoryError
            res = (False, str(e).encode())
        finally:
            self.running = False
            if prev_frozen is None:
                keyspace.freeze_time(None)
            if self.busy:
                self._end_busy()
        if type(res) is not tuple:
            return self.conv.to_reply(None, self.resp) if res else RedisError(b"ERR Error running script")
        if res[0]:
            return self.conv.to_reply(res[1] if len(res) > 1 else None, self.resp)
        return self._script_error(res[1] if len(res) > 1 else None)

    def _script_error(self, err: Any) -> RedisError:
        info = self._err_info(err)
        msg, source, line = info if type(info) is tuple else (info, None, None)
        if not isinstance(msg, bytes):
            if isinstance(msg, (int, float)):
                msg = format_number_arg(msg)
            else:
                msg = b"ERR unknown error"
        if isinstance(err, bytes):
            # not an error table: the handler never ran (out of memory)
            return RedisError(b"ERR Error running script (call to f_" + self.sha + b"): @user_script: " + msg)
        if source is not None and line is not None:
            if isinstance(line, float):
                line = int(line)
            msg += b" script: " + self.sha + b", on " + bytes(source) + b":" + str(line).encode() + b"."
        return RedisError(msg)

    # ---- the redis.call bridge -------------------------------------------
    def _bridge_call(self, *args: Any) -> Any:
        """redis.call: the hot path.

        A call naming a plain command (no subcommands) with the right arity and
        string or number arguments is run here directly; anything else (errors
        included) takes the general path, :meth:`_call`, which gives the same
        result for these calls.
        """
        if args:
            cmd = _COMMANDS.get(args[0]) if type(args[0]) is bytes else None
            if cmd is not None and cmd.subcommands is None and not cmd.noscript and self.caller.acl_unrestricted and self.cluster is None:
                n = len(args)
                ar = cmd.arity
                if (n == ar if ar > 0 else n >= -ar) and not (
                    cmd.is_write and (self.readonly or self.server.oom_state or self.server.write_refused is not None)
                ):
                    argv: list[bytes] | None = list(args)
                    for a in args:
                        if type(a) is not bytes:
                            # numbers are formatted as Redis passes them (%.17g)
                            for i, x in enumerate(args):
                                t = type(x)
                                if t is not bytes:
                                    if t is int or t is float:
                                        argv[i] = format_number_arg(x)  # type: ignore[index]
                                    else:
                                        argv = None
                                        break
                            break
                    if argv is not None:
                        if cmd.is_write:
                            self.wrote = True
                        r = call(self.client, cmd, argv)
                        t = type(r)
                        if t is bytes or t is int:
                            return r
                        if t is list:
                            return self.conv.list_to_lua(r, self.resp)
                        if r is None:
                            return None if self.resp == 3 else False
                        if t is Status:
                            return self.mk_ok(bytes(r))
                        return self._convert_reply(r, True)
        try:
            r = self._call(args)
        except Exception:
            log.exception("error in redis.call bridge")
            raise LuaRaise(self.mk_err(b"ERR internal error in redis.call"), False) from None
        if type(r) is tuple:
            raise LuaRaise(r[1], False)
        return r

    def _convert_reply(self, r: Any, raise_errors: bool) -> Any:
        t = type(r)
        if t is RedisError or isinstance(r, RedisError):
            err = self.mk_err(error_text(r.msg))
            if raise_errors:
                raise LuaRaise(err, False)
            return None, err
        if t is Block:
            r = r.timeout_reply
        elif r is NO_REPLY:
            r = None
        return self.conv.to_lua(r, self.resp)

    def _bridge_pcall(self, *args: Any) -> Any:
        try:
            r = self._call(args)
        except Exception:
            log.exception("error in redis.pcall bridge")
            return self.mk_err(b"ERR internal error in redis.call")
        if type(r) is tuple:
            return r[1]
        return r

    @staticmethod
    def _unwrap(e: Any) -> Any:
        if isinstance(e, LuaRaise):
            return e.value, e.positioned
        if isinstance(e, AttributeError):
            return str(e).encode(), True
        if isinstance(e, BaseException):
            log.error("Python error inside a script: %r", e)
            return b"internal error: " + str(e).encode("utf-8", "replace"), False
        return e, False

    def _call(self, args: tuple[Any, ...]) -> Any:
        argv: list[bytes] = []
        for a in args:
            t = type(a)
            if t is bytes:
                argv.append(a)
            elif t is int or t is float:
                argv.append(format_number_arg(a))
            else:
                return None, self.mk_err(ERR_ARGS)
        if not argv:
            return None, self.mk_err(ERR_NOARGS)
        cmd = resolve(argv)
        if type(cmd) is not Command:
            if cmd.msg.startswith(b"ERR wrong number"):
                return None, self.mk_err(ERR_ARITY)
            return None, self.mk_err(ERR_UNKNOWN)
        if cmd.noscript:
            return None, self.mk_err(ERR_NOSCRIPT_CMD)
        if not self.caller.acl_unrestricted:  # the caller's ACL user (respqueue/acl.py)
            from respqueue.acl import check_script

            denied = check_script(self.caller, cmd, argv)
            if denied is not None:
                return None, self.mk_err(denied)
        if self.cluster is not None and self.caller is not None:
            cerr = self.cluster.script_check(self.caller, cmd, argv)
            if cerr is not None:
                return None, self.mk_err(cerr)
        if cmd.is_write:
            if self.readonly:
                return None, self.mk_err(ERR_RO)
            refused = self.server.write_refused
            if refused is not None:
                # the store cannot be written (MISCONF): the write is not applied (Redis's
                # scriptVerifyWriteCommandAllow; the state cannot change while a script runs)
                return None, self.mk_err(error_text(refused.msg))
            if cmd.is_denyoom and not self.wrote and self.server.oom_state:
                # over maxmemory: a script's first write that needs memory fails, as Redis's scriptVerifyOOM
                return None, self.mk_err(OOM_MSG)
            self.wrote = True
        r = call(self.client, cmd, argv)
        t = type(r)
        if t is bytes or t is int:
            return r
        return self._convert_reply(r, False)

    # ---- redis.setresp ---------------------------------------------------
    def set_resp(self, n: int) -> None:
        self.resp = n
        self.client.resp = n

    # ---- time limit ------------------------------------------------------
    def _tick(self) -> bool:
        if not self.running:
            return False
        if self.kill_requested:
            return True
        now = time.monotonic()
        limit = self.server.config.lua_time_limit
        if limit > 0 and (now - self.start) * 1000 >= limit:
            if not self.busy:
                self._begin_busy()
            if now - self.last_poll >= 0.1:
                self.last_poll = now
                from .busy import poll_clients

                poll_clients(self)
            return self.kill_requested
        return False

    def _begin_busy(self) -> None:
        self.busy = True
        self.server.busy_script = self
        log.warning(
            "Slow script detected: still in execution after %d milliseconds. "
            "You can try killing the script using the SCRIPT KILL command. Script SHA1 is: %s",
            int((time.monotonic() - self.start) * 1000),
            self.sha.decode(),
        )

    def _end_busy(self) -> None:
        self.busy = False
        if self.server.busy_script is self:
            self.server.busy_script = None
        from .busy import after_busy

        after_busy(self)

    def kill(self) -> Any:
        """SCRIPT KILL."""
        if not self.running or not self.busy:
            raise RedisError(b"NOTBUSY No scripts in execution right now.")
        if self.wrote:
            raise RedisError(
                b"UNKILLABLE Sorry the script already executed write commands against the dataset. "
                b"You can either wait the script termination or kill the server in a hard way using "
                b"the SHUTDOWN NOSAVE command."
            )
        self.kill_requested = True
        return True


def get_scripting(server: Any) -> Scripting:
    s = server.scripting
    if s is None:
        s = server.scripting = Scripting(server)
    return s


register_runtime(get_scripting)
