-- respqueue: Lua side of the scripting runtime (written for respqueue).
-- Executed once per LuaRuntime with the full standard library; receives the
-- Python bridge functions and returns the functions the Python side needs.
-- Scripts never see this chunk's locals: they run with the environment E.

local py_call, py_pcall, py_tick, py_unwrap, py_lib = ...

local INTERNAL = "=[respqueue]"
local debug_getinfo = debug.getinfo
local debug_sethook = debug.sethook
local orig_pcall, orig_xpcall, orig_error = pcall, xpcall, error
local orig_loadstring, orig_load, orig_setfenv = loadstring, load, setfenv
local orig_rawset, orig_rawget, orig_next = rawset, rawget, next
local orig_setmetatable, orig_getmetatable = setmetatable, getmetatable
local orig_type, orig_tostring, orig_select = type, tostring, select
local co_create = coroutine.create

-- ---------------------------------------------------------------- readonly
local backing = orig_setmetatable({}, { __mode = "k" }) -- proxy -> real table
local RO = "Attempt to modify a readonly table"

local function ro_newindex()
  orig_error(RO, 2)
end

-- what getmetatable() shows for protected tables: an empty readonly table
local EMPTY_VIEW = {}
orig_setmetatable(EMPTY_VIEW, { __newindex = ro_newindex, __metatable = EMPTY_VIEW })
backing[EMPTY_VIEW] = {}

local function protect(t)
  local proxy = orig_setmetatable({}, { __index = t, __newindex = ro_newindex, __metatable = EMPTY_VIEW })
  backing[proxy] = t
  return proxy
end

-- ------------------------------------------------------------------ globals
local G = {} -- what scripts read as globals
orig_setmetatable(G, {
  __index = function(_, k)
    orig_error("Script attempted to access nonexistent global variable '" .. orig_tostring(k) .. "'", 2)
  end,
})
local E = protect(G) -- the environment of every script

local function setenv(f)
  orig_setfenv(f, E)
  return f
end

local function safe_loadstring(s, name)
  if orig_type(s) == "string" and s:byte(1) == 27 then
    return nil, "bytecode prohibited"
  end
  local f, e = orig_loadstring(s, name)
  if f then
    setenv(f)
  end
  return f, e
end

local function safe_load(fn, name)
  local first = true
  local f, e = orig_load(function()
    local piece = fn()
    if first and orig_type(piece) == "string" and piece:byte(1) == 27 then
      orig_error("bytecode prohibited", 0)
    end
    first = false
    return piece
  end, name)
  if f then
    setenv(f)
  end
  return f, e
end

local function safe_rawset(t, k, v)
  if backing[t] then
    orig_error(RO, 0)
  end
  return orig_rawset(t, k, v)
end

local function safe_rawget(t, k)
  local b = backing[t]
  if b then
    return orig_rawget(b, k)
  end
  return orig_rawget(t, k)
end

local function safe_setmetatable(t, mt)
  if backing[t] or backing[mt] then
    orig_error(RO, 0)
  end
  return orig_setmetatable(t, mt)
end

local string_mt_view -- set once the protected string library exists
local function safe_getmetatable(v)
  local t = orig_type(v)
  if t == "string" then
    return string_mt_view
  end
  if t == "userdata" then
    return nil -- Python callables (C functions in Redis) and cjson.null
  end
  return orig_getmetatable(v)
end

local NULL -- cjson.null, set below
local function safe_type(v)
  local t = orig_type(v)
  if t == "userdata" and v ~= NULL then
    return "function" -- library functions implemented in Python
  end
  return t
end

local function safe_tostring(v)
  if orig_type(v) == "userdata" then
    if v == NULL then
      return "userdata: (nil)"
    end
    local addr = orig_tostring(v):match("0x%x+")
    return "function: " .. (addr or "0x0")
  end
  return orig_tostring(v)
end

-- Errors raised by Python functions arrive as userdata wrapping the Python
-- exception; py_unwrap gives back the Lua error value it carries. Library
-- errors (luaL_error style) get the position of their caller, when it is Lua.
local function unwrap(e, lvl)
  if orig_type(e) ~= "userdata" then
    return e
  end
  local v, positioned = py_unwrap(e)
  if positioned and lvl > 0 then
    local i = debug_getinfo(lvl, "Sl")
    if i and i.what ~= "C" and i.currentline and i.currentline > 0 then
      v = i.short_src .. ":" .. i.currentline .. ": " .. v
    end
  end
  return v
end

-- Redis 7: pcall hands back the message of an error table, not the table
local function pcall_result(ok, ...)
  if ok then
    return ok, ...
  end
  local e = unwrap((...), 0)
  if orig_type(e) == "table" then
    local s = e.err
    local ts = orig_type(s)
    if ts == "string" or ts == "number" then
      return false, s
    end
  end
  return false, e
end

local function redis_pcall_lua(f, ...)
  return pcall_result(orig_pcall(f, ...))
end

-- ------------------------------------------------------------ time limit
local HOOK_COUNT = 100000
local killed = false

local function kill_hook()
  local i = debug_getinfo(2, "S")
  if i and i.what ~= "C" and i.source ~= INTERNAL then
    orig_error({ err = "ERR Script killed by user with SCRIPT KILL..." })
  end
end

local function count_hook()
  if py_tick() then
    killed = true
    debug_sethook(kill_hook, "", 1)
    kill_hook()
  end
end

local function install_hook(co)
  if co then
    debug_sethook(co, killed and kill_hook or count_hook, "", killed and 1 or HOOK_COUNT)
  else
    debug_sethook(count_hook, "", HOOK_COUNT)
  end
end

local coroutine_lib = {}
for k, v in orig_next, coroutine do
  coroutine_lib[k] = v
end
coroutine_lib.create = function(f)
  local co = co_create(f)
  install_hook(co)
  return co
end
coroutine_lib.wrap = function(f)
  local co = co_create(f)
  install_hook(co)
  return function(...)
    local res = { coroutine.resume(co, ...) }
    if not res[1] then
      orig_error(res[2], 2)
    end
    return unpack(res, 2, table.maxn(res))
  end
end

-- ---------------------------------------------------------------- redis lib
local function wrap_lib(src)
  local out = {}
  for k, v in orig_next, src do
    out[k] = v
  end
  return out
end

NULL = newproxy(false)

local redis = wrap_lib(py_lib.redis)
redis.call = py_call
redis.pcall = py_pcall
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3

local function err_table(msg)
  -- a "-CODE msg" or "msg" text as an error table, the way Redis builds them
  if orig_type(msg) ~= "string" and orig_type(msg) ~= "number" then
    return { err = "ERR wrong number or type of arguments" }, true
  end
  msg = orig_tostring(msg)
  local code, rest
  if msg:sub(1, 1) == "-" then
    local sp = msg:find(" ", 1, true)
    if sp then
      code, rest = msg:sub(2, sp - 1), msg:sub(sp + 1)
    else
      code, rest = "ERR", msg:sub(2)
    end
  else
    code, rest = "ERR", msg
  end
  rest = rest:gsub("[\r\n]+$", "")
  return { err = code .. " " .. rest }
end

redis.error_reply = function(...)
  if orig_select("#", ...) ~= 1 then
    return { err = "ERR wrong number or type of arguments" }
  end
  local msg = ...
  if orig_type(msg) ~= "string" and orig_type(msg) ~= "number" then
    return { err = "ERR wrong number or type of arguments" }
  end
  msg = orig_tostring(msg)
  if msg:sub(1, 1) ~= "-" then
    msg = "-" .. msg
  end
  return (err_table(msg))
end

redis.status_reply = function(...)
  if orig_select("#", ...) ~= 1 then
    return { err = "ERR wrong number or type of arguments" }
  end
  local msg = ...
  if orig_type(msg) ~= "string" and orig_type(msg) ~= "number" then
    return { err = "ERR wrong number or type of arguments" }
  end
  return { ok = orig_tostring(msg) }
end

-- ------------------------------------------------------------- the globals
local function lib(t)
  return protect(t)
end

local string_lib = {}
for k, v in orig_next, string do
  string_lib[k] = v
end
string.rep = py_lib.rep -- also reached through the string metatable
string_lib.rep = py_lib.rep

local function copy(t)
  local c = {}
  for k, v in orig_next, t do
    c[k] = v
  end
  return c
end

G.assert = assert
G.error = orig_error
G.ipairs = ipairs
G.next = orig_next
G.pairs = pairs
G.pcall = redis_pcall_lua
G.xpcall = orig_xpcall
G.rawequal = rawequal
G.rawget = safe_rawget
G.rawset = safe_rawset
G.select = orig_select
G.setmetatable = safe_setmetatable
G.getmetatable = safe_getmetatable
G.tonumber = tonumber
G.tostring = safe_tostring
G.type = safe_type
G.unpack = unpack
G.loadstring = safe_loadstring
G.load = safe_load
G.collectgarbage = collectgarbage
G.gcinfo = gcinfo
G._VERSION = _VERSION
G.coroutine = lib(coroutine_lib)
G.string = lib(string_lib)
string_mt_view = protect({ __index = G.string })
G.math = lib(copy(math))
G.table = lib(copy(table))
G.bit = lib(wrap_lib(py_lib.bit))
G.struct = lib(wrap_lib(py_lib.struct))
local cjson = wrap_lib(py_lib.cjson)
cjson.null = NULL
G.cjson = lib(cjson)
G.cmsgpack = lib(wrap_lib(py_lib.cmsgpack))
G.redis = lib(redis)
G._G = E
G.KEYS = {}
G.ARGV = {}

-- ----------------------------------------------------------- error handler
local function err_handler(err)
  local lvl = 2
  local i = debug_getinfo(lvl, "nSl")
  err = unwrap(err, 4)
  while i and (i.what == "C" or i.source == INTERNAL) and lvl < 50 do
    lvl = lvl + 1
    i = debug_getinfo(lvl, "nSl")
  end
  if orig_type(err) ~= "table" or backing[err] then
    err = { err = "ERR " .. orig_tostring(err) }
  end
  if i then
    err.source = i.source
    err.line = i.currentline
  end
  return err
end
G.__redis__err__handler = err_handler

-- ---------------------------------------------------------------- runner
local function compile(body)
  local f, e = orig_loadstring(body, "@user_script")
  if not f then
    return nil, e
  end
  return setenv(f)
end

local function run(f, keys, argv)
  orig_rawset(G, "KEYS", keys)
  orig_rawset(G, "ARGV", argv)
  if killed then
    killed = false
    install_hook()
  end
  return orig_xpcall(f, err_handler)
end

-- the same, with KEYS and ARGV passed flat (numkeys, keys..., args...): one
-- crossing instead of two table_from calls; the tables are filled in order,
-- as table_from fills them
local function run_flat(f, nk, ...)
  local all = { ... }
  local keys, argv = {}, {}
  for i = 1, nk do
    keys[i] = all[i]
  end
  for i = nk + 1, orig_select("#", ...) do
    argv[i - nk] = all[i]
  end
  return run(f, keys, argv)
end

local function reset_hook()
  killed = false
  install_hook()
end
install_hook()

-- Classify a script's return value for the Python side in one crossing.
-- kinds: 0 array (elements follow, cut at the first nil), 1 err, 2 ok,
-- 3 double, 4 big_number, 5 map, 6 set, 7 verbatim, 8 long array (length follows)
local classify_raw

local function classify(t)
  if orig_getmetatable(t) ~= nil then
    return classify_raw(t)
  end
  -- no metatable: plain indexing is rawget, and is done by the VM
  local v = t.err
  if v ~= nil and orig_type(v) == "string" then
    return 1, v
  end
  v = t.ok
  if v ~= nil and orig_type(v) == "string" then
    return 2, v
  end
  v = t.double
  if v ~= nil and orig_type(v) == "number" then
    return 3, v
  end
  v = t.big_number
  if v ~= nil and orig_type(v) == "string" then
    return 4, v
  end
  if t.map ~= nil or t.set ~= nil or t.verbatim_string ~= nil then
    return classify_raw(t)
  end
  local n = 0
  while t[n + 1] ~= nil do
    n = n + 1
  end
  if n <= 2000 then
    return 0, unpack(t, 1, n)
  end
  return 8, n
end

classify_raw = function(t)
  local v = orig_rawget(t, "err")
  if orig_type(v) == "string" then
    return 1, v
  end
  v = orig_rawget(t, "ok")
  if orig_type(v) == "string" then
    return 2, v
  end
  v = orig_rawget(t, "double")
  if orig_type(v) == "number" then
    return 3, v
  end
  v = orig_rawget(t, "big_number")
  if orig_type(v) == "string" then
    return 4, v
  end
  v = orig_rawget(t, "map")
  if orig_type(v) == "table" then
    local out, n = {}, 0
    for k, x in orig_next, v do
      out[n + 1] = k
      out[n + 2] = x
      n = n + 2
    end
    return 5, out, n
  end
  v = orig_rawget(t, "set")
  if orig_type(v) == "table" then
    local out, n = {}, 0
    for k in orig_next, v do
      n = n + 1
      out[n] = k
    end
    return 6, out, n
  end
  v = orig_rawget(t, "verbatim_string")
  if orig_type(v) == "table" then
    local s = orig_rawget(v, "string")
    if orig_type(s) == "string" then
      return 7, s
    end
  end
  local n = 0
  while orig_rawget(t, n + 1) ~= nil do
    n = n + 1
  end
  if n <= 2000 then
    return 0, unpack(t, 1, n)
  end
  return 8, n
end

-- an array table with its array part sized for every slot, nils included
-- (as lua_createtable + rawseti build it in the C libraries)
local function mk_array(...)
  return { ... }
end

local function mk_ok(s)
  return { ok = s }
end

local function mk_err(s)
  return { err = s, ignore_error_stats_update = true }
end

local function mk_double(d)
  return { double = d }
end

local function mk_verbatim(s)
  return { verbatim_string = { format = "txt", string = s } }
end

local function mk_map(t)
  return { map = t }
end

local function mk_set(t)
  return { set = t }
end

local function mk_big(s)
  return { big_number = s }
end

local function err_info(e)
  if orig_type(e) ~= "table" then
    return orig_tostring(e), nil, nil
  end
  return e.err, e.source, e.line
end

return {
  compile = compile,
  run = run,
  run_flat = run_flat,
  reset_hook = reset_hook,
  classify = classify,
  mk_ok = mk_ok,
  mk_array = mk_array,
  mk_err = mk_err,
  mk_double = mk_double,
  mk_verbatim = mk_verbatim,
  mk_map = mk_map,
  mk_set = mk_set,
  mk_big = mk_big,
  err_info = err_info,
  env = E,
  G = G,
  null = NULL,
}
