-- Busted harness: loads tool files the way the server does (a fresh _ENV with an
-- allow-listed set of globals, unknown globals raising, `require` limited to lua/
-- and tools/_lib/, the result checked by contract.check) and provides a fake ctx
-- whose http() records requests and answers with recorded fixtures.
--
-- Two homes, found from this file's own path: the repository (tests/spec/helper.lua:
-- lua/, tools/ and tests/spec/fixtures/ of the repository) and the installed kit
-- (<prefix>/share/context-loader/kit/helper.lua, run as busted --helper from an
-- operator's directory: the runtime in ../lua, the C modules next to this file, the
-- operator's tools/ and spec/fixtures/ in the working directory; CL_TOOLS_DIR and
-- CL_LUA_DIR override the two directories, and a tool's `_lib.*` not found in its
-- own tools/_lib/ comes from the installed tools/_lib/).
local function file_exists(path)
    local f = io.open(path, "rb")
    if f then
        f:close()
    end
    return f ~= nil
end

local HERE = debug.getinfo(1, "S").source:gsub("^@", ""):match("^(.*)/[^/]*$") or "."
local REPO = HERE == "tests/spec" and "." or HERE:match("^(.*)/tests/spec$")
local paths = {}
if REPO and file_exists(REPO .. "/lua/contract.lua") then
    paths.root = REPO
    paths.lua_dir = REPO .. "/lua"
    paths.tools_dir = REPO .. "/tools"
    paths.fixtures_dir = REPO .. "/tests/spec/fixtures"
else
    paths.root = "."
    paths.lua_dir = os.getenv("CL_LUA_DIR") or HERE .. "/../lua"
    paths.tools_dir = os.getenv("CL_TOOLS_DIR") or "tools"
    paths.fixtures_dir = "spec/fixtures"
    paths.shared_lib_dir = HERE .. "/../tools/_lib"
    package.path = paths.lua_dir .. "/?.lua;" .. HERE .. "/?.lua;" .. package.path
    package.cpath = HERE .. "/?.so;" .. package.cpath
end

local cljson = require "cljson"
local contract = require "contract"
local schema = require "schema"

local M = {}

M.root = paths.root
M.lua_dir = paths.lua_dir
M.tools_dir = paths.tools_dir
M.fixtures_dir = paths.fixtures_dir

local function read_file(path)
    local f, err = io.open(path, "rb")
    if not f then
        error(err, 2)
    end
    local text = f:read("a")
    f:close()
    return text
end
M.read_file = read_file

local function readonly(t, name)
    return setmetatable({}, {
        __index = t,
        __newindex = function(_, k)
            error("attempt to modify read-only library " .. name .. " (" .. tostring(k) .. ")", 2)
        end,
        __metatable = false,
    })
end

local SAFE_OS = { time = os.time, clock = os.clock, date = os.date }

-- Globals a tool may read (base, string, table, math, utf8, coroutine,
-- and os.time/clock/date). No io, package, debug, load, dofile, loadfile.
local BASE = {
    "assert", "error", "ipairs", "next", "pairs", "pcall", "xpcall", "select", "tonumber",
    "tostring", "type", "rawequal", "rawlen", "rawget", "rawset", "setmetatable",
    "getmetatable", "_VERSION",
}

local function new_env(require_fn)
    local g = {}
    for _, k in ipairs(BASE) do
        g[k] = _G[k]
    end
    g.string = readonly(string, "string")
    g.table = readonly(table, "table")
    g.math = readonly(math, "math")
    g.utf8 = readonly(utf8, "utf8")
    g.coroutine = readonly(coroutine, "coroutine")
    g.os = readonly(SAFE_OS, "os")
    g.require = require_fn
    local env = setmetatable({}, {
        __index = function(_, k)
            local v = g[k]
            if v == nil then
                error("unknown global '" .. tostring(k) .. "'", 2)
            end
            return v
        end,
        __newindex = function(_, k)
            error("assignment to undeclared global '" .. tostring(k) .. "'", 2)
        end,
    })
    return env
end

-- A sandbox generation: its own module cache, like one server generation.
function M.sandbox(tools_dir, lua_dir)
    tools_dir = tools_dir or M.tools_dir
    lua_dir = lua_dir or M.lua_dir
    local loaded = {}
    local sb = {}
    local function sandbox_require(name)
        if type(name) ~= "string" then
            error("module name must be a string", 2)
        end
        if loaded[name] ~= nil then
            return loaded[name]
        end
        if name == "cljson" then
            loaded[name] = cljson
            return cljson
        end
        if name == "cltexts" then
            loaded[name] = require "cltexts"
            return loaded[name]
        end
        local path
        local lib = name:match("^_lib%.([%w_]+)$")
        if lib then
            path = tools_dir .. "/_lib/" .. lib .. ".lua"
            if paths.shared_lib_dir and not file_exists(path) then
                path = paths.shared_lib_dir .. "/" .. lib .. ".lua"
            end
        elseif name:match("^[%w_]+$") then
            path = lua_dir .. "/" .. name .. ".lua"
        else
            error("module '" .. name .. "' not allowed", 2)
        end
        local f = io.open(path, "rb")
        if not f then
            error("module '" .. name .. "' not found", 2)
        end
        f:close()
        local chunk, err = loadfile(path, "t", new_env(sandbox_require))
        if not chunk then
            error(err, 2)
        end
        local v = chunk(name)
        loaded[name] = v == nil and true or v
        return loaded[name]
    end
    sb.require = sandbox_require
    -- Loads tools_dir/<name>.lua -> normalized tool | nil, errors
    function sb.load(name)
        local path = tools_dir .. "/" .. name .. ".lua"
        local chunk, err = loadfile(path, "t", new_env(sandbox_require))
        if not chunk then
            return nil, { err }
        end
        local ok, tool = pcall(chunk)
        if not ok then
            return nil, { tostring(tool) }
        end
        return contract.check(tool, name)
    end
    return sb
end

-- Loads a tool of tools/ through the sandbox and the contract; raises with every
-- contract error when it does not load.
function M.load_tool(name)
    local tool, errs = M.sandbox().load(name)
    if not tool then
        error(name .. ": " .. table.concat(errs, "; "), 2)
    end
    return tool
end

function M.fixture(name)
    return read_file(M.fixtures_dir .. "/" .. name)
end

function M.decode(text, opts)
    return cljson.decode(text, opts)
end

function M.encode(v)
    return cljson.encode(v)
end

-- A response as ctx.http returns it.
function M.response(status, body, headers)
    local res = { status = status, headers = headers or {}, body = body or "" }
    -- opts as the server's response.json takes them ({raw = "datas"}: raw rows)
    res.json = function(opts)
        return cljson.decode(res.body, opts)
    end
    return res
end

-- fake ctx. opts.responses: array of answers used in turn, each
--   { status = 200, fixture = "kn_list.json" } | { status =, body = "text" } |
--   { err = { code = "timeout", message = "..." } };
-- or opts.respond = function(req) -> res | nil, err. ctx.requests records calls.
function M.ctx(opts)
    opts = opts or {}
    local ctx = {
        lang = opts.lang or "zh-CN",
        request_id = opts.request_id or "req_spec0000001",
        surface = opts.surface or "mcp",
        kn_id_header = opts.kn_id_header,
        principal = opts.principal or { account_id = "u1", account_type = "user" },
        requests = {},
        logs = {},
    }
    local next_answer = 1
    ctx.http = function(req)
        assert(type(req) == "table", "ctx.http takes a table")
        assert(type(req.upstream) == "string", "ctx.http: upstream is required")
        assert(type(req.method) == "string", "ctx.http: method is required")
        assert(type(req.path) == "string" and req.path:sub(1, 1) == "/",
            "ctx.http: path must start with /")
        assert(not (req.json ~= nil and req.body ~= nil), "ctx.http: json and body exclude each other")
        ctx.requests[#ctx.requests + 1] = req
        if opts.respond then
            return opts.respond(req)
        end
        local a = (opts.responses or {})[next_answer]
        next_answer = next_answer + 1
        if a == nil then
            error("fake ctx: no recorded answer for request " .. #ctx.requests)
        end
        if a.err then
            return nil, a.err
        end
        local body = a.body
        if a.fixture then
            body = M.fixture(a.fixture)
        end
        return M.response(a.status or 200, body, a.headers)
    end
    ctx.log = function(level, msg)
        ctx.logs[#ctx.logs + 1] = { level = level, msg = msg }
    end
    return ctx
end

-- Runs a call as the host does: validate and default args, then handle inside a
-- coroutine. Returns result, err, ctx; invalid args give
-- nil, { status = 400, code = "invalid_arguments", errors = ... }.
function M.call(tool, args, opts)
    local ctx = M.ctx(opts)
    local v, errs = schema.validate(tool.input_schema, args or {})
    if v == nil then
        return nil, { status = 400, code = "invalid_arguments", errors = errs }, ctx
    end
    local co = coroutine.create(tool.handle)
    local ok, res, err = coroutine.resume(co, v, ctx)
    if not ok then
        error(debug.traceback(co, res), 2)
    end
    assert(coroutine.status(co) == "dead", "fake ctx never yields")
    return res, err, ctx
end

-- Paths of a validation error list, for compact assertions.
function M.paths(errs)
    local out = {}
    for i, e in ipairs(errs or {}) do
        out[i] = e.path
    end
    return out
end

-- run as busted --helper (a dofile): specs still `require "helper"`
package.loaded.helper = package.loaded.helper or M
return M
