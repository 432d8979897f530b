-- Busted harness: loads tool files through the server's own sandbox (src/host/lvm.c,
-- built as the Lua C module clsandbox.so): the same allow-listed globals, unknown
-- globals raising, the same `require` rules (tool code reaches only the public
-- modules, the runtime's are private), the result checked by contract.check. It
-- also provides a fake ctx - read-only to the tool, as on the server - whose http()
-- records requests and answers with recorded fixtures.
--
-- Paths: CL_LUA_DIR and CL_TOOLS_DIR (the runtime's lua/ and tools/ directories)
-- and CL_SPEC_FIXTURES (the recorded answers) when set; else found from this file's
-- own path. In the repository (tests/spec/helper.lua): its lua/, tools/ and
-- tests/spec/fixtures/. In the installed kit (<prefix>/share/context-loader/kit/
-- helper.lua, run as busted --helper from an operator's directory): the runtime in
-- ../lua, the C modules next to this file, the operator's tools/ and spec/fixtures/
-- in the working directory, and the installed tools/_lib/ when tools/ has no _lib/.
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
    paths.lua_dir = os.getenv("CL_LUA_DIR") or REPO .. "/lua"
    paths.tools_dir = os.getenv("CL_TOOLS_DIR") or REPO .. "/tools"
    paths.fixtures_dir = os.getenv("CL_SPEC_FIXTURES") or REPO .. "/tests/spec/fixtures"
else
    paths.root = "."
    paths.lua_dir = os.getenv("CL_LUA_DIR") or HERE .. "/../lua"
    paths.tools_dir = os.getenv("CL_TOOLS_DIR") or "tools"
    paths.fixtures_dir = os.getenv("CL_SPEC_FIXTURES") or "spec/fixtures"
    paths.shared_lib_dir = HERE .. "/../tools/_lib"
    package.path = paths.lua_dir .. "/?.lua;" .. HERE .. "/?.lua;" .. package.path
    package.cpath = HERE .. "/?.so;" .. package.cpath
end

local cljson = require "cljson"
local clsandbox = require "clsandbox"
local contract = require "contract"
local schema = require "schema"

local M = {}

-- The configured upstream names a tool may name (upstream = ..., ctx.http{upstream =
-- ...}), checked as the service checks them at load: the upstream.<name>.url keys of
-- the configuration file CL_SPEC_CONFIG names, else of the shipped one (in the
-- repository etc/context-loader.conf; next to the installed kit
-- <prefix>/etc/context-loader/context-loader.conf). nil when no file is found: no check.
local function configured_upstreams()
    local conf = os.getenv("CL_SPEC_CONFIG")
    if not conf then
        conf = REPO and file_exists(REPO .. "/etc/context-loader.conf") and REPO .. "/etc/context-loader.conf"
            or HERE .. "/../../../etc/context-loader/context-loader.conf"
    end
    local f = io.open(conf, "rb")
    if not f then
        return nil
    end
    local names = {}
    for line in f:lines() do
        local name = line:match("^%s*upstream%.([%w_]+)%.url%s*=")
        if name then
            names[#names + 1] = name
        end
    end
    f:close()
    return names
end

M.upstreams = configured_upstreams()
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

-- The read-only view the server gives a tool as ctx.
M.readonly = clsandbox.readonly

local current -- the latest sandbox: its runtime serves the fake ctx (ctx.authz)

-- A sandbox generation: its own snapshot of lua_dir and tools_dir/_lib and its own
-- module caches, like one server generation.
--   sb.require(name)      the runtime's require (lua/ modules, private ones too)
--   sb.tool_require(name) the require tool code gets
--   sb.load(name)         tools_dir/<name>.lua -> normalized tool | nil, errors
function M.sandbox(tools_dir, lua_dir)
    tools_dir = tools_dir or M.tools_dir
    lua_dir = lua_dir or M.lua_dir
    local lib_dir = tools_dir .. "/_lib"
    if paths.shared_lib_dir and not file_exists(lib_dir) then
        lib_dir = paths.shared_lib_dir -- a kit user's tools/ without _lib/
    end
    local gen = clsandbox.new(lua_dir, lib_dir)
    local sb = { require = gen.require, tool_require = gen.tool_require }
    function sb.load(name)
        local f, ferr = io.open(tools_dir .. "/" .. name .. ".lua", "rb")
        if not f then
            return nil, { ferr }
        end
        local text = f:read("a")
        f:close()
        local chunk, err = gen.load(text, "@" .. name .. ".lua")
        if not chunk then
            return nil, { err }
        end
        local ok, tool = pcall(chunk)
        if not ok then
            return nil, { tostring(tool) }
        end
        return contract.check(tool, name, { upstreams = M.upstreams })
    end
    current = sb
    return sb
end

-- The runtime's authorization cache of the latest sandbox (ctx.authz's store).
function M.authz()
    return (current or M.sandbox()).require("authz")
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
        if M.upstreams and not contract.has_upstream(M.upstreams, req.upstream) then
            error("ctx.http " .. contract.unknown_upstream("upstream", req.upstream, M.upstreams), 2)
        end
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
    ctx.authz = M.authz().handle(ctx.principal, function()
        if type(ctx.now_ms) == "function" then
            return ctx.now_ms()
        end
        return os.time() * 1000
    end)
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
    local ok, res, err = coroutine.resume(co, v, M.readonly(ctx))
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
