-- Load errors an operator can act on: the offending key's line, every error of a
-- directory in one pass, duplicate orders naming both files, upstream names checked
-- against the configuration (lua/loaderr.lua, lua/host.lua).
local helper = require "helper"
local loaderr = require "loaderr"

local UPSTREAMS = { "ontology_query", "bkn_backend", "vega", "operator_integration", "mf_model_api",
    "bkn_safe" }

-- A tool source in the shape shipped tools have: a local table, functions added to it.
local function tool_source(over)
    over = over or {}
    local lines = {
        'local util = require "_lib.util"', -- 1
        "", -- 2
        "-- a comment that says upstream = \"nowhere\" and order = 1", -- 3
        "local M = {", -- 4
        '    name = "' .. (over.name or "sample_tool") .. '", version = "1.0.0", kind = "read",', -- 5
        '    title = { ["zh-CN"] = "示例", ["en-US"] = "Sample" },', -- 6
        '    description = { ["zh-CN"] = "示例", ["en-US"] = "A sample, {with} [[brackets]]" },', -- 7
        '    group = "discovery",', -- 8
        "    order = " .. (over.order or 900) .. ",", -- 9
        '    surfaces = { "mcp", "rest" },', -- 10
        "    upstream = " .. (over.upstream or '"bkn_backend"') .. ",", -- 11
        "    input_schema = {", -- 12
        '        type = "object",', -- 13
        "        properties = {", -- 14
        '            kn_id = { type = "string" },', -- 15
        "            limit = {", -- 16
        '                type = "integer",', -- 17
        "                " .. (over.limit or "minimum = 1") .. ",", -- 18
        "            },", -- 19
        "        },", -- 20
        "    },", -- 21
        "}", -- 22
        "", -- 23
        "function M.handle(args, ctx)", -- 24
        "    local a, b = 1, 2", -- 25
        "    local res = ctx.http { upstream = " .. (over.call or '"bkn_backend"') ..
            ', method = "GET", path = "/x" }', -- 26
        "    return util.keep_only(res.json(), { \"entries\" }), a + b", -- 27
        "end", -- 28
        "", -- 29
        "return M", -- 30
    }
    return table.concat(lines, "\n") .. "\n"
end

-- A fresh host (one generation) with the configured upstreams; load(name, source,
-- mtime) registers a file the way src/host/tools.c does.
local function generation()
    local sb = helper.sandbox()
    local host = sb.require("host")
    host.configure({ upstreams = UPSTREAMS })
    local g = { host = host }
    function g.load(name, source, mtime)
        local chunk = assert(load(source, "@" .. name .. ".lua", "t", setmetatable({ require = sb.tool_require },
            { __index = _G })))
        local file = { path = "tools/" .. name .. ".lua", source = source, mtime = mtime or 0, line = 30 }
        return host.register(name, chunk(), false, file)
    end
    return g
end

describe("loaderr.key_line", function()
    it("finds a key of the returned table, nested keys, and keys added as M.key", function()
        local toks = loaderr.tokens(tool_source())
        assert.equal(9, (loaderr.key_line(toks, { "order" })))
        assert.equal(16, (loaderr.key_line(toks, { "input_schema", "properties", "limit" })))
        assert.equal(17, (loaderr.key_line(toks, { "input_schema", "properties", "limit", "type" })))
        assert.equal(10, (loaderr.key_line(toks, { "surfaces", "2" })))
        assert.equal(24, (loaderr.key_line(toks, { "handle" })))
        -- the deepest key found; a first key the source does not show: nil
        assert.equal(16, (loaderr.key_line(toks, { "input_schema", "properties", "limit", "nope" })))
        local line, ret = loaderr.key_line(toks, { "render" })
        assert.is_nil(line)
        assert.equal(30, ret)
    end)

    it("follows `return {`, [\"key\"] fields and values that name a local table", function()
        local src = table.concat({
            "local LIMIT = {",
            "    type = \"integer\",",
            "    maximum = 5,",
            "}",
            "return {",
            "    [\"name\"] = \"x\",",
            "    input_schema = { type = \"object\", properties = {",
            "        limit = LIMIT,",
            "    } },",
            "    handle = function(a, b) local c, d = a, b return c, d end,",
            "    order = 7,",
            "}",
        }, "\n")
        local toks = loaderr.tokens(src)
        assert.equal(6, (loaderr.key_line(toks, { "name" })))
        assert.equal(8, (loaderr.key_line(toks, { "input_schema", "properties", "limit" })))
        assert.equal(3, (loaderr.key_line(toks, { "input_schema", "properties", "limit", "maximum" })))
        assert.equal(11, (loaderr.key_line(toks, { "order" })))
    end)

    it("follows a builder called with one constructor (fields.input { … })", function()
        local src = table.concat({
            "local fields = require \"_lib.fields\"",
            "local M = {",
            "    input_schema = fields.input {",
            "        required = { \"kn_id\" },",
            "        properties = {",
            "            kn_id = fields.kn_id(),",
            "            limit = { type = \"integer\", pattern = \"x\" },",
            "        },",
            "    },",
            "}",
            "return M",
        }, "\n")
        local toks = loaderr.tokens(src)
        assert.equal(7, (loaderr.key_line(toks, { "input_schema", "properties", "limit" })))
        assert.equal(6, (loaderr.key_line(toks, { "input_schema", "properties", "kn_id", "minLength" })))
        assert.equal(4, (loaderr.key_line(toks, { "input_schema", "required" })))
    end)

    it("has no key lines for a table built by a call", function()
        local toks = loaderr.tokens('local fx = require "_lib.fx"\nreturn fx.tool("x", 1)\n')
        local line, ret = loaderr.key_line(toks, { "name" })
        assert.is_nil(line)
        assert.equal(2, ret)
    end)
end)

describe("loaderr.path_of", function()
    local keys = { input_schema = true, annotations = true, upstream = true, title = true }
    it("reads the key path of a contract error", function()
        assert.same({ "input_schema", "properties", "a", "pattern" },
            loaderr.path_of("input_schema/properties/a: unknown keyword 'pattern'", keys))
        assert.same({ "input_schema", "properties", "a/b", "type" },
            loaderr.path_of("input_schema/properties/a~1b: 'type' has unknown type x", keys))
        assert.same({ "annotations", "readOnlyHint" },
            loaderr.path_of("annotations.readOnlyHint must be a boolean", keys))
        assert.same({ "bogus" }, loaderr.path_of("unknown key 'bogus'", keys))
        assert.same({ "title" }, loaderr.path_of("title is missing the en-US text", keys))
        assert.is_nil(loaderr.path_of("a tool file must return a table, got nil", keys))
    end)
end)

describe("loaderr.suggest", function()
    it("names the nearest candidate when it is near enough", function()
        assert.equal(" (did you mean bkn_backend?)", loaderr.suggest("bkn_backnd", UPSTREAMS))
        assert.equal(" (did you mean vega?)", loaderr.suggest("vgea", UPSTREAMS))
        assert.equal("", loaderr.suggest("elasticsearch", UPSTREAMS))
    end)
end)

describe("host.register: errors point at the offending key's line", function()
    it("points a schema error at the key inside input_schema", function()
        local g = generation()
        local tool, errs = g.load("sample_tool", tool_source({ limit = 'pattern = "^[0-9]+$"' }))
        assert.is_nil(tool)
        assert.equal(1, #errs)
        assert.truthy(errs[1]:find("^tools/sample_tool%.lua:18: input_schema/properties/limit: " ..
            "unknown keyword 'pattern': not supported"), errs[1])
    end)

    it("checks the declared upstream and every upstream a request names against the configuration", function()
        local g = generation()
        local tool, errs = g.load("sample_tool", tool_source({ upstream = '"bkn_backnd"', call = '"bkn_backnd"' }))
        assert.is_nil(tool)
        local tail = "is not a configured upstream (did you mean bkn_backend?); configured: " ..
            table.concat(UPSTREAMS, ", ")
        assert.same({
            "tools/sample_tool.lua:11: upstream: 'bkn_backnd' " .. tail,
            "tools/sample_tool.lua:26: upstream: 'bkn_backnd' " .. tail,
        }, errs)
    end)

    it("refuses a request to an upstream the tool does not declare", function()
        local g = generation()
        local tool, errs = g.load("sample_tool", tool_source({ call = '"vega"' }))
        assert.is_nil(tool)
        assert.same({ "tools/sample_tool.lua:26: upstream 'vega' is called but not declared: add it to " ..
            "the tool's upstream key (bkn_backend)" }, errs)
        assert.truthy(generation().load("sample_tool",
            tool_source({ upstream = '{ "bkn_backend", "vega" }', call = '"vega"' })))
    end)
end)

describe("host.check_set: one pass, duplicate orders naming both files", function()
    it("reports a duplicate order alongside another file's contract errors", function()
        local g = generation()
        assert.truthy(g.load("list_knowledge_networks",
            tool_source({ name = "list_knowledge_networks", order = 110 }), 100))
        -- the newer file: its own error and the duplicate order, in the same pass
        local tool, errs = g.load("get_kn_name", tool_source({ name = "get_kn_name", order = 110,
            limit = "minimum = 'one'" }), 200)
        assert.is_nil(tool)
        assert.equal(1, #errs)
        assert.truthy(errs[1]:find("^tools/get_kn_name%.lua:18: input_schema/properties/limit: 'minimum'"), errs[1])
        local ok, set_errs = g.host.check_set()
        assert.is_nil(ok)
        assert.same({ "tools/get_kn_name.lua:9: order 110 is already used by list_knowledge_networks " ..
            "(tools/list_knowledge_networks.lua:9)" }, set_errs)
    end)

    it("names the file modified last first, whatever the name order", function()
        local g = generation()
        assert.truthy(g.load("a_tool", tool_source({ name = "a_tool", order = 5 }), 300))
        assert.truthy(g.load("b_tool", tool_source({ name = "b_tool", order = 5 }), 100))
        local ok, errs = g.host.check_set()
        assert.is_nil(ok)
        assert.same({ "tools/a_tool.lua:9: order 5 is already used by b_tool (tools/b_tool.lua:9)" }, errs)
    end)
end)
