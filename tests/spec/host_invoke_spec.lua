-- ctx.invoke and ctx.list_tools, as lua/host.lua adds them to every call's ctx
-- (used by execute_tool and search_capabilities, the on-demand gateway).
local cljson = require "cljson"
local helper = require "helper"

local function tool(name, order, surfaces, extra)
    local t = {
        name = name, version = "1.0.0", kind = "read",
        title = { ["zh-CN"] = name .. "标题", ["en-US"] = name .. " title" },
        description = { ["zh-CN"] = name .. "说明", ["en-US"] = name .. " description" },
        group = "query", order = order, surfaces = surfaces,
        input_schema = {
            type = "object", additionalProperties = false,
            properties = {
                kn_id = { type = "string", description = { ["zh-CN"] = "网络", ["en-US"] = "network" } },
                n = { type = "integer", default = 7 },
            },
        },
        handle = function(args, ctx)
            return { echo = args, surface = ctx.surface }
        end,
    }
    for k, v in pairs(extra or {}) do
        t[k] = v
    end
    return t
end

local function new_host(gate_on)
    local host = helper.sandbox().require("host")
    local results = {}
    local caller = tool("caller", 1, { "mcp", "compact", "rest" }, {
        input_schema = { type = "object", properties = { target = { type = "string" }, args = { type = "object" } } },
        handle = function(args, ctx)
            local res, err = ctx.invoke(args.target, args.args)
            results[#results + 1] = { res = res, err = err }
            if res == nil then
                return nil, err
            end
            return res
        end,
    })
    assert(host.register("caller", caller))
    assert(host.register("listed", tool("listed", 10, { "mcp", "compact", "rest" })))
    assert(host.register("mcp_only", tool("mcp_only", 20, { "mcp", "rest" })))
    assert(host.register("rest_only", tool("rest_only", 30, { "rest" })))
    assert(host.register("proxy_only", tool("proxy_only", 40, { "proxy" })))
    assert(host.register("gated", tool("gated", 50, { "mcp", "rest" }, { gate = "EXECUTE_SKILL_ENABLED" })))
    assert(host.register("lister", tool("lister", 60, { "mcp" }, {
        handle = function(_, ctx)
            local names = {}
            for _, t in ipairs(ctx.list_tools()) do
                names[#names + 1] = t.name
            end
            return { names = names, first = ctx.list_tools()[2] }
        end,
    })))
    assert(host.check_set())
    host.set_gate("gated", gate_on == true) -- the core's evaluation of the tool's gate
    return host, results
end

local function ctx_of(gate_on, lang)
    return {
        lang = lang or "en-US", surface = "compact", kn_id_header = "kn_hdr",
        config = { gates = { EXECUTE_SKILL_ENABLED = gate_on } },
    }
end

local function args(target, a)
    local t = cljson.object()
    t.target = target
    t.args = a
    return t
end

describe("ctx.invoke", function()
    it("runs another tool with validation, defaults, the kn_id header and the same ctx", function()
        local host = new_host()
        local status, body = host.invoke("caller", args("mcp_only", cljson.object()), ctx_of(false))
        assert.equal(200, status)
        assert.equal(7, body.echo.n)
        assert.equal("kn_hdr", body.echo.kn_id)
        assert.equal("compact", body.surface)
    end)

    it("reports invalid arguments as a 400 error for the calling tool", function()
        local host = new_host()
        local status, body = host.invoke("caller", args("listed", helper.decode('{"n":"x","zz":1}')), ctx_of(false))
        assert.equal(400, status)
        assert.equal("Public.BadRequest", body.code)
        local paths = {}
        for _, d in ipairs(body.details) do
            paths[#paths + 1] = d.path
        end
        table.sort(paths)
        assert.same({ "/n", "/zz" }, paths)
    end)

    it("refuses REST-only, proxy-only, gated-off and unknown tools with one identical error", function()
        local bodies = {}
        for _, name in ipairs({ "rest_only", "proxy_only", "gated", "nope" }) do
            local host = new_host()
            local status, body = host.invoke("caller", args(name, cljson.object()), ctx_of(false))
            assert.equal(404, status, name)
            -- the name itself is the only difference
            bodies[#bodies + 1] = cljson.encode(body):gsub(name, "NAME")
        end
        for i = 2, #bodies do
            assert.equal(bodies[1], bodies[i])
        end
    end)

    it("runs a gated tool when its gate is on", function()
        local host = new_host(true)
        local status = host.invoke("caller", args("gated", cljson.object()), ctx_of(true))
        assert.equal(200, status)
    end)

    it("bounds nested invocations", function()
        local host = new_host()
        local inner = args("caller", args("caller", args("caller", args("listed", cljson.object()))))
        local status, body = host.invoke("caller", inner, ctx_of(false))
        assert.equal(400, status)
        assert.truthy(cljson.encode(body):find("nested", 1, true))
    end)
end)

describe("ctx.list_tools", function()
    it("lists every tool by order, localized, gated-off ones left out", function()
        local host = new_host()
        local _, body = host.invoke("lister", nil, ctx_of(false, "zh-CN"))
        assert.same({ "caller", "listed", "mcp_only", "rest_only", "proxy_only", "lister" }, body.names)
        local first = body.first
        assert.equal("listed", first.name)
        assert.equal("listed标题", first.title)
        assert.equal("listed说明", first.description)
        assert.equal("网络", first.input_schema.properties.kn_id.description)
        assert.same({ "mcp", "compact", "rest" }, first.surfaces)
        assert.equal("query", first.group)
        assert.equal("read", first.kind)
        local _, on = new_host(true).invoke("lister", nil, ctx_of(true))
        assert.equal("gated", on.names[6])
    end)
end)

describe("upstream error pages in 5xx envelopes", function()
    local PAGE = table.concat({
        "<html><head><title>500 Internal Server Error</title><style>body{color:red}</style></head><body>",
        "<h1>Whitelabel Error Page</h1><p>Service vega-backend failed; see http://10.0.3.7:13014/actuator/health",
        "or https://grafana.internal.corp/d/abc?x=1 for details</p><pre>",
        "java.lang.IllegalStateException: pool exhausted",
        "\tat com.corp.vega.Pool.take(Pool.java:88)",
        "\tat com.corp.vega.QueryService.run(QueryService.java:41)",
        "Caused by: java.net.ConnectException: 10.0.3.9:5432",
        "\t... 12 more",
        "  File \"/srv/app/handlers.py\", line 12, in handle",
        "</pre>", string.rep("<p>padding text</p>", 40), "</body></html>",
    }, "\n")

    local function host_with(err)
        local host = helper.sandbox().require("host")
        assert(host.register("fails", tool("fails", 1, { "mcp", "rest" }, {
            handle = function()
                return nil, err
            end,
        })))
        assert(host.check_set())
        return host
    end

    it("keeps the status and a short excerpt without URLs, addresses or stack frames", function()
        for _, err in ipairs({ { status = 503, raw = PAGE }, { status = 502, code = "x", details = PAGE } }) do
            local status, body = host_with(err).invoke("fails", nil, ctx_of(false))
            assert.equal(err.status, status)
            local d = body.details
            assert.is_string(d)
            assert.truthy(#d <= 203, d)
            assert.truthy(d:find("Whitelabel Error Page", 1, true), d)
            for _, leak in ipairs({ "http", "10.0.3", "grafana", "Pool.java", "QueryService", "at com.",
                "handlers.py", "color:red", "more" }) do
                assert.falsy(d:find(leak, 1, true), leak .. " in " .. d)
            end
        end
    end)

    it("leaves a short plain text and 4xx details alone", function()
        local _, body = host_with({ status = 503, raw = "busy" }).invoke("fails", nil, ctx_of(false))
        assert.equal("busy", body.details)
        _, body = host_with({ status = 400, details = "see http://x/y" }).invoke("fails", nil, ctx_of(false))
        assert.equal("see http://x/y", body.details)
    end)
end)

describe("the first-read ctx fields", function()
    it("are one list: the runtime's own and the C side's (clruntime.ctx_fields), each once", function()
        local sb = helper.sandbox()
        local host = sb.require("host")
        local c_side = sb.require("clruntime").ctx_fields
        assert.truthy(#c_side > 0)
        local want = { invoke = true, list_tools = true, authz = true }
        for _, name in ipairs(c_side) do
            assert.is_nil(want[name], name .. " listed twice")
            want[name] = true
        end
        local got = {}
        for _, name in ipairs(host.ctx_mt.__lazy) do
            assert.is_nil(got[name], name .. " listed twice")
            got[name] = true
        end
        assert.same(want, got)
    end)

    it("made by the C side are nil on a ctx without ctx.http, never an error", function()
        local host = helper.sandbox().require("host")
        local real = setmetatable({}, host.ctx_mt)
        for _, name in ipairs(host.ctx_mt.__lazy) do
            if name ~= "invoke" and name ~= "list_tools" and name ~= "authz" then
                assert.is_nil(real[name], name)
            end
        end
    end)
end)
