-- Specs of the four action tools (seed 002, SPEC §9.1).
local cljson = require "cljson"
local helper = require "helper"
local schema = require "schema"
local contract = require "contract"

local info = helper.load_tool("get_action_info")
local execute = helper.load_tool("execute_action")
local get_exec = helper.load_tool("get_action_execution")
local list_exec = helper.load_tool("list_action_executions")

local function decode(s)
    return helper.decode(s)
end

local function call(tool, args, responses, opts)
    opts = opts or {}
    opts.responses = responses
    return helper.call(tool, type(args) == "string" and decode(args) or args, opts)
end

describe("get_action_info", function()
    it("has the display metadata of mcp-surface §4.2 and is on the compact surface", function()
        local e = contract.list_entry(info, "en-US")
        assert.equal("Action Info", e.title)
        assert.equal(310, e._meta["openbkn.ai/order"])
        assert.equal("action", e._meta["openbkn.ai/group"])
        assert.same({ "mcp", "compact", "rest" }, info.surfaces)
        assert.equal("行动信息", contract.list_entry(info, "zh-CN").title)
    end)

    it("requires kn_id and at_id", function()
        local _, errs = schema.validate(info.input_schema, {})
        table.sort(errs, function(a, b) return a.path < b.path end)
        assert.same({ "/at_id", "/kn_id" }, helper.paths(errs))
        local _, e2 = schema.validate(info.input_schema, decode('{"kn_id":"k","at_id":"a","_instance_identities":[1]}'))
        assert.same({ "/_instance_identities/0" }, helper.paths(e2))
    end)

    it("class level: sends an empty _instance_identities and builds the function-call form", function()
        local res, err, ctx = call(info, '{"kn_id":"kn_medical","at_id":"at_generate_treatment_plan"}', {
            { status = 200, fixture = "act_info_class.json" },
            { status = 200, fixture = "act_tool_detail.json" },
        }, { lang = "en-US" })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("ontology_query", req.upstream)
        assert.equal("POST", req.method)
        assert.equal("/in/v1/knowledge-networks/kn_medical/action-types/at_generate_treatment_plan", req.path)
        assert.same({ ["x-http-method-override"] = "GET" }, req.headers)
        assert.equal('{"_instance_identities":[]}', cljson.encode(req.json))
        local req2 = ctx.requests[2]
        assert.equal("operator_integration", req2.upstream)
        assert.equal("/internal-v1/tool-box/box_medical/tool/tool_treatment_plan", req2.path)
        local t = res._dynamic_tools[1]
        assert.equal("generate_treatment_plan", t.name)
        local dyn = t.parameters.properties.dynamic_params
        -- only what the action leaves to the caller (value_from=input)
        assert.same({ "severity" }, cljson.keys(dyn.properties))
        assert.same({ "mild", "moderate", "severe" }, dyn.properties.severity.enum)
        assert.same({ "severity" }, dyn.required)
        assert.equal("array", t.parameters.properties._instance_identities.type)
        assert.equal('[]', cljson.encode(t.fixed_params._instance_identities))
        assert.equal('{"lang":"zh"}', cljson.encode(t.fixed_params.dynamic_params))
        -- output_schema from the 200 response, $ref inlined, cycles cut
        assert.equal("object", t.output_schema.type)
        assert.truthy(t.output_schema.description)
        local step = t.output_schema.properties.steps.items
        assert.equal("string", step.properties.text.type)
        assert.same({ type = "object", description = "一步" }, step.properties.next)
        -- never source code, service address or in-cluster URL
        local text = cljson.encode(res)
        for _, bad in ipairs({ "server_url", "treatment-svc", "source_code", "api_url", "/v1/diseases", "headers" }) do
            assert.is_nil(text:find(bad, 1, true), bad)
        end
    end)

    it("instance level: forwards identities (empty maps dropped) and returns instantiated parameters", function()
        local res, err, ctx = call(info, [[{"kn_id":"kn_medical","at_id":"at_generate_treatment_plan",
            "_instance_identities":[{},{"disease_id":9007199254740993}]}]], {
            { status = 200, fixture = "act_info_tool.json" },
            { status = 200, fixture = "act_tool_detail.json" },
        })
        assert.is_nil(err)
        assert.equal('{"_instance_identities":[{"disease_id":9007199254740993}]}', cljson.encode(ctx.requests[1].json))
        local t = res._dynamic_tools[1]
        assert.equal('[{"disease_id":9007199254740993}]', cljson.encode(t.fixed_params._instance_identities))
        assert.equal('{"disease_id":9007199254740993,"lang":"zh"}', cljson.encode(t.fixed_params.dynamic_params))
        assert.same({ "severity", "patient_age" }, cljson.keys(t.parameters.properties.dynamic_params.properties))
    end)

    it("uses the legacy _instance_identity when the list is empty", function()
        local _, _, ctx = call(info, '{"kn_id":"k","at_id":"a","_instance_identity":{"id":1}}', {
            { status = 200, fixture = "act_info_empty.json" },
        })
        assert.equal('{"_instance_identities":[{"id":1}]}', cljson.encode(ctx.requests[1].json))
    end)

    it("returns an empty _dynamic_tools when there is no source or no action", function()
        local res, err, ctx = call(info, '{"kn_id":"k","at_id":"a"}', { { status = 200,
            fixture = "act_info_empty.json" } })
        assert.is_nil(err)
        assert.equal('{"_dynamic_tools":[]}', cljson.encode(res))
        assert.equal(1, #ctx.requests)
    end)

    it("reads an MCP-bound tool from the MCP tool list", function()
        local res, err, ctx = call(info, '{"kn_id":"kn_ops","at_id":"at_scale"}', {
            { status = 200, fixture = "act_info_mcp.json" },
            { status = 200, fixture = "act_mcp_tools.json" },
        })
        assert.is_nil(err)
        assert.equal("/internal-v1/mcp/proxy/mcp_ops/tools", ctx.requests[2].path)
        local t = res._dynamic_tools[1]
        assert.equal("scale_deployment", t.name)
        -- no input params declared by the action: the whole schema, $defs inlined
        assert.same({ type = "integer", minimum = 0 }, t.parameters.properties.dynamic_params.properties.replicas)
        assert.same({ "name", "replicas" }, t.parameters.properties.dynamic_params.required)
        assert.is_nil(t.output_schema)
    end)

    it("an unknown MCP tool is a 404", function()
        local _, err = call(info, '{"kn_id":"kn_ops","at_id":"at_scale"}', {
            { status = 200, body = '{"action_source":{"type":"mcp","mcp_id":"m","tool_name":"nope"},"actions":[{}]}' },
            { status = 200, fixture = "act_mcp_tools.json" },
        })
        assert.equal(404, err.status)
    end)

    it("a caller who may not read the tool gets the managed proxy account's read", function()
        local res, err, ctx = call(info, '{"kn_id":"kn_medical","at_id":"at_generate_treatment_plan"}', {
            { status = 200, fixture = "act_info_class.json" },
            { status = 403, fixture = "act_forbidden_tool.json" },
            { status = 200, fixture = "act_tool_detail.json" },
        })
        assert.is_nil(err)
        assert.equal("/internal-v1/tool-box/box_medical/tool/tool_treatment_plan", ctx.requests[3].path)
        assert.equal("kn_medical", ctx.requests[3].managed_proxy)
        assert.is_nil(ctx.requests[2].managed_proxy)
        assert.equal("generate_treatment_plan", res._dynamic_tools[1].name)
    end)

    it("a refused read of the bound tool is a 403 with its reason, never 502/503", function()
        local _, err = call(info, '{"kn_id":"kn_medical","at_id":"at_generate_treatment_plan"}', {
            { status = 200, fixture = "act_info_class.json" },
            { status = 403, fixture = "act_forbidden_tool.json" },
            { status = 403, fixture = "act_forbidden_tool.json" },
        }, { lang = "en-US" })
        assert.equal(403, err.status)
        assert.equal("OperatorIntegration.Forbidden.ToolRead", err.code) -- the platform's own code
        assert.equal("view was not granted for tool_box:box_medical", err.details.error_details)
        assert.truthy(err.description:find("Unable to read the tool bound to the action", 1, true))
    end)

    it("maps ontology-query failures: 403 kept with the body, 5xx -> 502, a timeout -> 504", function()
        local _, err = call(info, '{"kn_id":"k","at_id":"a"}', { { status = 403, fixture = "act_oq_403.json" } })
        assert.equal(403, err.status)
        assert.equal("Public.Forbidden: query_data was not granted for object_type:kn_ops/ot_pod",
            err.details.error_details)
        _, err = call(info, '{"kn_id":"k","at_id":"a"}', { { status = 500, body = "boom" } })
        assert.equal(502, err.status)
        assert.equal("boom", err.details)
        assert.equal(500, err.upstream_status)
        _, err = call(info, '{"kn_id":"k","at_id":"a"}', { { err = { code = "upstream_timeout", message = "x" } } })
        assert.equal(504, err.status)
        assert.equal(true, err.retryable)
        assert.same({ reason = "upstream_timeout" }, err.details)
    end)

    it("refuses an unknown source type with 400", function()
        local _, err = call(info, '{"kn_id":"k","at_id":"a"}', {
            { status = 200, body = '{"action_source":{"type":"ftp"},"actions":[{}]}' } })
        assert.equal(400, err.status)
    end)
end)

describe("execute_action", function()
    it("is an execute tool on the compact surface", function()
        assert.equal("execute", execute.kind)
        assert.is_false(execute.annotations.readOnlyHint)
        assert.equal(320, execute.order)
        assert.equal("Execute Action", contract.list_entry(execute, "en-US").title)
    end)

    it("passes an empty _instance_identities on and forwards dynamic_params unvalidated", function()
        local res, err, ctx = call(execute, [[{"kn_id":"kn_ops","at_id":"at_restart_pod",
            "_instance_identities":[],"dynamic_params":{"reason":null,"n":12345678901234567890,"x":{}}}]],
            { { status = 202, fixture = "act_execute.json" } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("POST", req.method)
        assert.is_nil(req.headers)
        assert.equal("/in/v1/knowledge-networks/kn_ops/action-types/at_restart_pod/execute", req.path)
        assert.equal('{"_instance_identities":[],"dynamic_params":{"reason":null,"n":12345678901234567890,"x":{}}}',
            cljson.encode(req.json))
        assert.equal('{"execution_id":"cqq2g8h4d2fg00fvm8dg","status":"pending","message":"accepted",'
            .. '"created_at":1719000000000}', cljson.encode(res))
    end)

    it("sends an empty list when _instance_identities is absent", function()
        local _, _, ctx = call(execute, '{"kn_id":"k","at_id":"a"}', { { status = 200, fixture = "act_execute.json" } })
        assert.equal('{"_instance_identities":[]}', cljson.encode(ctx.requests[1].json))
    end)

    it("rejects a dynamic_params that is not an object", function()
        local out, errs = schema.validate(execute.input_schema,
            decode('{"kn_id":"k","at_id":"a","dynamic_params":[1]}'))
        assert.is_nil(out)
        assert.same({ "/dynamic_params" }, helper.paths(errs))
    end)

    it("keeps downstream 4xx with their body, 503 stays a retryable 503", function()
        local _, err = call(execute, '{"kn_id":"k","at_id":"a"}', { { status = 400, fixture = "act_oq_400.json" } })
        assert.equal(400, err.status)
        assert.equal("missing dynamic params: severity", err.details.error_details)
        _, err = call(execute, '{"kn_id":"k","at_id":"a"}', { { status = 409, body = '{"error_code":"dup"}' } })
        assert.equal(409, err.status)
        assert.equal("dup", err.code)
        _, err = call(execute, '{"kn_id":"k","at_id":"a"}', { { status = 503, body = "down" } })
        assert.equal(503, err.status)
        assert.equal("agentRetrieval.ServiceUnavailable.UpstreamUnavailable", err.code)
        _, err = call(execute, '{"kn_id":"k","at_id":"a"}', { { status = 500, body = "down" } })
        assert.equal(502, err.status)
    end)
end)

describe("get_action_execution", function()
    local function paged(args, fixture)
        local res, err, ctx = call(get_exec, args, { { status = 200, fixture = fixture or "act_execution.json" } })
        return res, err, ctx.requests[1]
    end

    it("declares no default for the paging fields (absent and 0 differ)", function()
        local v = assert(schema.validate(get_exec.input_schema, decode('{"kn_id":"k","execution_id":"e"}')))
        assert.is_nil(v.results_limit)
        assert.is_nil(v.results_offset)
        local _, errs = schema.validate(get_exec.input_schema,
            decode('{"kn_id":"k","execution_id":"e","results_limit":-1}'))
        assert.same({ "/results_limit" }, helper.paths(errs))
    end)

    it("tells the model that completed is not all succeeded", function()
        assert.truthy(get_exec.description["en-US"]:find("NOT that every", 1, true))
        assert.truthy(get_exec.description["zh-CN"]:find("不代表全部成功", 1, true))
    end)

    it("no paging fields: the legacy path, trimmed", function()
        local res, err, req = paged('{"kn_id":"kn_ops","execution_id":"cqq2g8h4d2fg00fvm8dg"}')
        assert.is_nil(err)
        assert.equal("GET", req.method)
        assert.equal("/in/v1/knowledge-networks/kn_ops/action-executions/cqq2g8h4d2fg00fvm8dg", req.path)
        assert.is_nil(req.query)
        assert.same({ "id", "kn_id", "action_type_id", "action_type_name", "trigger_type", "status",
            "execution_mode", "target_count", "total_count", "success_count", "failed_count", "results",
            "results_total", "results_offset", "results_limit", "dynamic_params", "start_time", "end_time",
            "duration_ms" }, cljson.keys(res))
        local r1 = res.results[1]
        assert.same({ "_instance_id", "_instance_identity", "_display", "targets", "status", "parameters",
            "result", "duration_ms", "targets_total", "targets_truncated" }, cljson.keys(r1))
        assert.equal(20, #r1.targets)
        assert.equal(22, r1.targets_total)
        assert.equal('{"pod_id":9007199254740993}', cljson.encode(r1._instance_identity))
        assert.equal('{"ok":true,"items":[]}', cljson.encode(r1.result))
        assert.equal("{}", cljson.encode(res.dynamic_params))
        assert.equal("timeout", res.results[2].error_message)
    end)

    it("results_offset 0 alone switches to paging with the default page", function()
        local _, _, req = paged('{"kn_id":"k","execution_id":"e","results_offset":0}')
        assert.equal("/in/v1/knowledge-networks/k/action-logs/e", req.path)
        assert.same({ results_limit = "100", results_offset = "0" }, req.query)
    end)

    it("limit 0 -> 100, 1000 stays, 1001 -> 1000", function()
        for _, c in ipairs({ { 0, "100" }, { 1000, "1000" }, { 1001, "1000" }, { 7, "7" } }) do
            local _, _, req = paged('{"kn_id":"k","execution_id":"e","results_limit":' .. c[1] .. '}')
            assert.same({ results_limit = c[2], results_offset = "0" }, req.query, tostring(c[1]))
        end
    end)

    it("offset 9950 with limit 100 asks for 50 results", function()
        local _, _, req = paged('{"kn_id":"k","execution_id":"e","results_offset":9950,"results_limit":100}')
        assert.same({ results_limit = "50", results_offset = "9950" }, req.query)
    end)

    it("offset 10000 is a clear 400 before any downstream call", function()
        for _, lang in ipairs({ "en-US", "zh-CN" }) do
            local res, err, ctx = helper.call(get_exec,
                decode('{"kn_id":"k","execution_id":"e","results_offset":10000}'),
                { lang = lang })
            assert.is_nil(res)
            assert.equal(400, err.status)
            assert.equal(0, #ctx.requests)
            assert.truthy(err.description:find("10000", 1, true))
        end
    end)

    it("an empty page without total gets results_total 0; a non-empty one is an error", function()
        local res, err = paged('{"kn_id":"k","execution_id":"ex_big","results_offset":0}',
            "act_execution_page_empty.json")
        assert.is_nil(err)
        assert.equal(0, res.results_total)
        assert.equal("[]", cljson.encode(res.results))
        local _, err2 = paged('{"kn_id":"k","execution_id":"ex_big","results_limit":100}',
            "act_execution_page_nototal.json")
        assert.equal(502, err2.status)
    end)

    it("a downstream 404 stays a 404 with its body; 5xx -> 502", function()
        local _, err = call(get_exec, '{"kn_id":"k","execution_id":"nope"}', { { status = 404,
            fixture = "act_oq_404.json" } })
        assert.equal(404, err.status)
        assert.equal("action execution nope not found", err.details.error_details)
        _, err = call(get_exec, '{"kn_id":"k","execution_id":"e"}', { { status = 500, body = "{}" } })
        assert.equal(502, err.status)
    end)
end)

describe("list_action_executions", function()
    it("is listed on /mcp but not /mcp-compact", function()
        assert.same({ "mcp", "rest" }, list_exec.surfaces)
    end)

    it("sends filters, need_total and the default limit", function()
        local res, err, ctx = call(list_exec, [[{"kn_id":"kn_ops","action_type_id":"at_restart_pod",
            "status":"failed","trigger_type":"manual","start_time_from":1704067200000,"start_time_to":1804067200000,
            "offset":40}]], { { status = 200, fixture = "act_logs.json" } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("/in/v1/knowledge-networks/kn_ops/action-logs", req.path)
        assert.same({ action_type_id = "at_restart_pod", status = "failed", trigger_type = "manual",
            start_time_from = "1704067200000", start_time_to = "1804067200000", offset = "40", limit = "20",
            need_total = "true" }, req.query)
        local e = res.entries[1]
        assert.same({ "id", "kn_id", "action_type_id", "status", "trigger_type", "total_count", "success_count",
            "failed_count", "results_total", "start_time" }, cljson.keys(e))
        assert.equal(31, res.total_count)
    end)

    it("limit 0 -> 20, limit above 1000 refused", function()
        local _, _, ctx = call(list_exec, '{"kn_id":"k","limit":0}', { { status = 200,
            fixture = "act_logs_empty.json" } })
        assert.equal("20", ctx.requests[1].query.limit)
        local _, errs = schema.validate(list_exec.input_schema, decode('{"kn_id":"k","limit":1001}'))
        assert.same({ "/limit" }, helper.paths(errs))
        local _, errs2 = schema.validate(list_exec.input_schema, decode('{"kn_id":"k","status":"done"}'))
        assert.same({ "/status" }, helper.paths(errs2))
    end)

    it("search_after round trip, and offset ignored beside it", function()
        local res = call(list_exec, '{"kn_id":"k","limit":1}', { { status = 200, fixture = "act_logs.json" } })
        local again = cljson.object()
        again.kn_id = "k"
        again.limit = 1
        again.offset = 500
        again.search_after = res.search_after
        local _, err, ctx = call(list_exec, again, { { status = 200, fixture = "act_logs_empty.json" } })
        assert.is_nil(err)
        local q = ctx.requests[1].query
        assert.equal("1719000000000,ex1", q.search_after)
        assert.is_nil(q.offset)
    end)

    it("an empty page has entries [] and no search_after", function()
        local res = call(list_exec, '{"kn_id":"k"}', { { status = 200, fixture = "act_logs_empty.json" } })
        assert.equal('{"entries":[]}', cljson.encode(res))
    end)

    it("maps errors", function()
        local _, err = call(list_exec, '{"kn_id":"k"}', { { status = 403, fixture = "act_oq_403.json" } })
        assert.equal(403, err.status)
        _, err = call(list_exec, '{"kn_id":"k"}', { { status = 502, body = "<html>" } })
        assert.equal(502, err.status)
        assert.equal("<html>", err.details)
    end)
end)
