-- Specs of the on-demand gateway (search_capabilities, execute_tool) and of
-- mcp_proxy_call.
local cljson = require "cljson"
local helper = require "helper"
local schema = require "schema"
local contract = require "contract"

local search = helper.load_tool("search_capabilities")
local exec = helper.load_tool("execute_tool")
local proxy = helper.load_tool("mcp_proxy_call")

local LOCAL_TOOLS = {
    { name = "get_relation_types", title = "Relation Type Detail", description = "Relation types of a network",
      surfaces = { "mcp", "rest" }, group = "discovery", kind = "read",
      input_schema = { type = "object", properties = { kn_id = { type = "string" } } } },
    { name = "list_skills", title = "Skill List", description = "Lists published skills",
      surfaces = { "mcp", "rest" }, group = "skill", kind = "read",
      input_schema = { type = "object", properties = { name = { type = "string" } } } },
    { name = "search_schema", title = "Explore Schema", description = "Search the schema",
      surfaces = { "mcp", "compact", "rest" }, group = "discovery", kind = "read",
      input_schema = { type = "object", properties = {} } },
    { name = "search_capabilities", title = "Search Capabilities", description = "x",
      surfaces = { "mcp", "rest" }, group = "capability", kind = "read",
      input_schema = { type = "object", properties = {} } },
}

-- helper.call with the host's ctx.list_tools / ctx.invoke faked
local function run(tool, args, opts)
    opts = opts or {}
    local ctx = helper.ctx(opts)
    ctx.list_tools = function()
        return LOCAL_TOOLS
    end
    ctx.invocations = {}
    ctx.invoke = function(name, a)
        ctx.invocations[#ctx.invocations + 1] = { name = name, args = a }
        if opts.invoke then
            return opts.invoke(name, a)
        end
        return { ok = true }
    end
    if type(args) == "string" then
        args = helper.decode(args)
    end
    local v, errs = schema.validate(tool.input_schema, args)
    if v == nil then
        return nil, { status = 400, errors = errs }, ctx
    end
    local co = coroutine.create(tool.handle)
    local ok, res, err = coroutine.resume(co, v, ctx)
    assert(ok, res)
    return res, err, ctx
end

describe("search_capabilities", function()
    it("has order 610 in the capability group, on every surface", function()
        local e = contract.list_entry(search, "en-US")
        assert.equal(610, e._meta["openbkn.ai/order"])
        assert.equal("capability", e._meta["openbkn.ai/group"])
        assert.same({ "mcp", "compact", "rest" }, search.surfaces)
    end)

    it("lists unlisted local tools and the network's factory capabilities", function()
        local res, err, ctx = run(search, '{"kn_id":"kn_fin"}', {
            surface = "compact",
            responses = {
                { status = 200, fixture = "cap_mounted.json" },
                { status = 200, fixture = "cap_search.json" },
                { status = 200, fixture = "cap_catalogue.json" },
                { status = 200, fixture = "act_mcp_tools.json" },
            },
        })
        assert.is_nil(err)
        local r1 = ctx.requests[1]
        assert.equal("bkn_backend", r1.upstream)
        assert.equal("/in/v1/knowledge-networks/kn_fin/capabilities", r1.path)
        assert.same({ limit = "-1" }, r1.query)
        local r2 = ctx.requests[2]
        assert.equal("/internal-v1/capabilities/search", r2.path)
        -- refs without empty ids, top_k = limit + 1
        assert.equal(4, #r2.json.refs)
        assert.equal(21, r2.json.top_k)
        assert.equal("", r2.json.query)
        assert.equal("/internal-v1/caller/tool-box/box_finance/tools/list", ctx.requests[3].path)
        assert.same({ status = "enabled", page = "1", page_size = "100" }, ctx.requests[3].query)
        local names, kinds = {}, {}
        for i, c in ipairs(res.capabilities) do
            names[i], kinds[i] = c.name, c.kind
        end
        -- compact does not list get_relation_types / list_skills; search_schema is listed;
        -- the gateway never offers itself; the disabled legacy tool is invisible
        assert.same({ "get_relation_types", "list_skills", "fx_convert", "get_pod_logs", "合同审查" }, names)
        assert.same({ "tool", "tool", "function", "mcp_tool", "skill" }, kinds)
        local fx = res.capabilities[3]
        assert.equal("box_finance", fx.toolbox_id)
        assert.equal("tool_fx_convert", fx.tool_id)
        assert.equal("只用于已结算币种", fx.use_rule)
        assert.same({ "parameters", "request_body", "components" }, cljson.keys(fx.input_schema))
        assert.is_nil(cljson.encode(res):find("fx-svc", 1, true))
        assert.equal("object", res.capabilities[4].input_schema.type)
        assert.equal("skill_contract_review", res.capabilities[5].skill_id)
        assert.equal(5, res.total_matched)
    end)

    it("on /mcp lists no local tool (all listed) and filters by types", function()
        local res, err, ctx = run(search, '{"kn_id":"k","query":"汇率","types":["mcp_tool"]}', {
            surface = "mcp",
            responses = {
                { status = 200, fixture = "cap_mounted.json" },
                { status = 200, body = '{"entries":[{"capability_type":"mcp_tool","owner_id":"mcp_ops",'
                    .. '"capability_id":"get_pod_logs","name":"get_pod_logs"}]}' },
                { status = 500, body = "x" },
            },
        })
        assert.is_nil(err)
        assert.same({ "mcp_tool" }, ctx.requests[2].json.types)
        assert.equal(1, #ctx.requests[2].json.refs)
        assert.equal(1, #res.capabilities)
        assert.is_nil(res.capabilities[1].input_schema) -- unreadable MCP list: kept without a schema
    end)

    it("types [tool] makes no downstream call; a query filters local tools", function()
        local res, _, ctx = run(search, '{"kn_id":"k","types":["tool"],"query":"skills"}', { surface = "compact" })
        assert.equal(0, #ctx.requests)
        assert.equal(1, #res.capabilities)
        assert.equal("list_skills", res.capabilities[1].name)
    end)

    it("truncates to limit and explains an empty result", function()
        local res = run(search, '{"kn_id":"k","types":["tool"],"limit":1}', { surface = "compact", lang = "en-US" })
        assert.equal(1, #res.capabilities)
        assert.is_true(res.truncated)
        assert.equal(2, res.total_matched)
        local none = run(search, '{"kn_id":"k"}', { surface = "mcp", lang = "en-US",
            responses = { { status = 200, fixture = "cap_empty.json" } } })
        assert.equal("[]", cljson.encode(none.capabilities))
        assert.truthy(none.message:find("No capability matched", 1, true))
    end)

    it("a failed search with a query is an error; a listing falls back to the bindings", function()
        local _, err = run(search, '{"kn_id":"k","query":"x","types":["skill"]}', { surface = "mcp",
            responses = { { status = 200, fixture = "cap_mounted.json" }, { status = 503, body = "down" } } })
        assert.equal(503, err.status)
        local res = run(search, '{"kn_id":"k","types":["skill"]}', { surface = "mcp",
            responses = { { status = 200, fixture = "cap_mounted.json" }, { status = 503, body = "down" } } })
        assert.equal("skill_contract_review", res.capabilities[1].name)
        local _, err2 = run(search, '{"kn_id":"k"}', { surface = "mcp",
            responses = { { status = 403, fixture = "bkn_error_403.json" } } })
        assert.equal(403, err2.status)
    end)
end)

describe("execute_tool", function()
    it("is an execute tool, order 620", function()
        assert.equal("execute", exec.kind)
        assert.equal(620, exec.order)
        -- tool_id, or the name search_capabilities shows, or a skill's skill_id
        assert.same({ { required = { "tool_id" } }, { required = { "name" } }, { required = { "skill_id" } } },
            exec.input_schema.anyOf)
    end)

    it("runs a Context Loader tool through ctx.invoke, core arguments stripped, kn_id passed on", function()
        local res, err, ctx = run(exec, [[{"kn_id":"k","tool_id":"get_relation_types",
            "arguments":{"ids":["rt1"],"bkn_context":{"conversation_id":"c"},"response_format":"toon"}}]])
        assert.is_nil(err)
        assert.same({ ok = true }, res)
        local inv = ctx.invocations[1]
        assert.equal("get_relation_types", inv.name)
        assert.equal('{"ids":["rt1"],"kn_id":"k"}', cljson.encode_canonical(inv.args))
        assert.equal(0, #ctx.requests)
        -- a tool without kn_id in its schema does not get it
        local _, _, ctx2 = run(exec, '{"kn_id":"k","tool_id":"list_skills"}')
        assert.equal("{}", cljson.encode(ctx2.invocations[1].args))
    end)

    it("passes ctx.invoke's refusal through", function()
        local _, err = run(exec, '{"tool_id":"run_sql","arguments":{"sql":"select 1"}}', {
            invoke = function()
                return nil, { status = 404, code = "Public.NotFound" }
            end })
        assert.equal(404, err.status)
    end)

    it("calls a mounted MCP tool through the MCP proxy", function()
        local res, err, ctx = run(exec, '{"kn_id":"k","toolbox_id":"mcp_ops","tool_id":"get_pod_logs",'
            .. '"arguments":{"pod_name":"api-1","n":9007199254740993}}', {
            responses = { { status = 200, fixture = "cap_mounted.json" },
                          { status = 200, body = '{"content":[{"type":"text","text":"ok"}],"isError":false}' } } })
        assert.is_nil(err)
        local req = ctx.requests[2]
        assert.equal("POST", req.method)
        assert.equal("/internal-v1/mcp/proxy/mcp_ops/tool/call", req.path)
        assert.equal('{"tool_name":"get_pod_logs","parameters":{"pod_name":"api-1","n":9007199254740993}}',
            cljson.encode(req.json))
        assert.equal(false, res.isError)
    end)

    it("calls a visible function tool through the toolbox proxy with the arguments under body", function()
        local res, err, ctx = run(exec, '{"kn_id":"k","toolbox_id":"box_finance","tool_id":"tool_fx_convert",'
            .. '"arguments":{"amount":1}}', {
            responses = { { status = 200, fixture = "cap_mounted.json" },
                          { status = 200, fixture = "cap_catalogue.json" },
                          { status = 200, body = '[1,2]' } } })
        assert.is_nil(err)
        local req = ctx.requests[3]
        assert.equal("/internal-v1/caller/tool-box/box_finance/proxy/tool_fx_convert", req.path)
        assert.equal('{"body":{"amount":1}}', cljson.encode(req.json))
        assert.equal('{"result":[1,2]}', cljson.encode(res))
    end)

    it("refuses unmounted, invisible and kn-less factory calls", function()
        local _, err = run(exec, '{"toolbox_id":"b","tool_id":"t"}')
        assert.equal(400, err.status)
        _, err = run(exec, '{"kn_id":"k","toolbox_id":"b","tool_id":"t"}', {
            responses = { { status = 200, fixture = "cap_mounted.json" } } })
        assert.equal(400, err.status)
        _, err = run(exec, '{"kn_id":"k","toolbox_id":"box_finance","tool_id":"tool_fx_rates_legacy"}', {
            lang = "en-US",
            responses = { { status = 200, fixture = "cap_mounted.json" }, { status = 200,
                fixture = "cap_catalogue.json" } } })
        assert.equal(400, err.status)
        assert.truthy(err.description:find("enabled catalogue", 1, true))
    end)

    it("runs a function tool by the name search_capabilities shows (name, or as tool_id)", function()
        for _, args in ipairs({
            '{"kn_id":"k","name":"fx_convert","arguments":{"amount":1}}',
            '{"kn_id":"k","tool_id":"fx_convert","arguments":{"amount":1}}',
            '{"kn_id":"k","toolbox_id":"box_finance","name":"fx_convert","arguments":{"amount":1}}',
            '{"kn_id":"k","toolbox_id":"box_finance","tool_id":"fx_convert","arguments":{"amount":1}}',
        }) do
            local res, err, ctx = run(exec, args, {
                responses = { { status = 200, fixture = "cap_mounted.json" },
                              { status = 200, fixture = "cap_catalogue.json" },
                              { status = 200, fixture = "cap_catalogue.json" },
                              { status = 200, body = '[1,2]' } } })
            assert.is_nil(err, args)
            local req = ctx.requests[#ctx.requests]
            assert.equal("/internal-v1/caller/tool-box/box_finance/proxy/tool_fx_convert", req.path, args)
            assert.equal('{"body":{"amount":1}}', cljson.encode(req.json))
            assert.equal('{"result":[1,2]}', cljson.encode(res))
            assert.equal(0, #ctx.invocations)
        end
    end)

    it("by name: an MCP tool's name is its id; no such name is an unknown tool", function()
        local _, err, ctx = run(exec, '{"kn_id":"k","name":"get_pod_logs"}', {
            responses = { { status = 200, fixture = "cap_mounted.json" },
                          { status = 200, fixture = "cap_catalogue.json" },
                          { status = 200, body = '{"content":[],"isError":false}' } } })
        assert.is_nil(err)
        assert.equal("/internal-v1/mcp/proxy/mcp_ops/tool/call", ctx.requests[#ctx.requests].path)
        -- not mounted, not local: the same refusal as any unknown tool (ctx.invoke's)
        local _, _, ctx2 = run(exec, '{"kn_id":"k","name":"no_such"}', {
            responses = { { status = 200, fixture = "cap_mounted.json" },
                          { status = 200, fixture = "cap_catalogue.json" } },
            invoke = function()
                return nil, { status = 404, code = "Public.NotFound" }
            end })
        -- the network mounts a skill: its names are looked up first (no match here)
        assert.equal("search_capabilities", ctx2.invocations[1].name)
        assert.equal("no_such", ctx2.invocations[#ctx2.invocations].name)
        -- a Context Loader tool by name runs locally, without a factory lookup
        local _, _, ctx3 = run(exec, '{"kn_id":"k","name":"get_relation_types"}')
        assert.equal("get_relation_types", ctx3.invocations[1].name)
        assert.equal(0, #ctx3.requests)
    end)

    it("keeps a tool's 4xx, maps 5xx to 502", function()
        local _, err = run(exec, '{"kn_id":"k","toolbox_id":"mcp_ops","tool_id":"get_pod_logs"}', {
            responses = { { status = 200, fixture = "cap_mounted.json" }, { status = 422, body = '{"e":1}' } } })
        assert.equal(422, err.status)
        assert.same({ e = 1 }, err.details)
        _, err = run(exec, '{"kn_id":"k","toolbox_id":"mcp_ops","tool_id":"get_pod_logs"}', {
            responses = { { status = 200, fixture = "cap_mounted.json" }, { status = 500, body = 'x' } } })
        assert.equal(502, err.status)
    end)
end)

describe("mcp_proxy_call", function()
    it("is on the proxy surface only", function()
        assert.same({ "proxy" }, proxy.surfaces)
    end)

    it("posts {tool_name, parameters} and returns the object as it is", function()
        local res, err, ctx = helper.call(proxy, helper.decode('{"mcp_id":"mcp ops","tool_name":"get_pod_logs"}'),
            { responses = { { status = 200, body = '{"content":[],"isError":false}' } } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("/internal-v1/mcp/proxy/mcp%20ops/tool/call", req.path)
        assert.equal('{"tool_name":"get_pod_logs","parameters":{}}', cljson.encode(req.json))
        assert.equal('{"content":[],"isError":false}', cljson.encode(res))
    end)

    it("keeps a 4xx's status, turns 5xx, transport and non-object answers into 502", function()
        for _, a in ipairs({ { { status = 404, body = '{"x":1}' }, 404 }, { { status = 403, body = "no" }, 403 },
            { { status = 500, body = "boom" }, 502 },
            { { err = { code = "upstream_unreachable", message = "10.0.0.1 refused" } }, 502 },
            { { status = 200, body = "[1]" }, 502 } }) do
            local _, err = helper.call(proxy, helper.decode('{"mcp_id":"m","tool_name":"t","parameters":{"a":1}}'),
                { responses = { a[1] } })
            assert.equal(a[2], err.status)
            assert.is_nil(cljson.encode(err.details):find("10.0.0.1", 1, true))
        end
    end)
end)
