"""The Lua scripting runtime behind EVAL/EVALSHA (see :mod:`lua.runtime`).

Modules: ``runtime`` (Lua state, script cache, redis.call bridge, time limit),
``sandbox.lua`` (the script environment, written in Lua), ``convert`` (reply <->
Lua value rules), ``libs`` (redis.* helpers, bit, string.rep cap), ``cjson``,
``cmsgpack``, ``lstruct`` (struct) and ``busy`` (serving clients while a slow
script blocks the loop).
"""
