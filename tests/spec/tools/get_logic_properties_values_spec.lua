local cljson = require "cljson"
local helper = require "helper"
local ctxcall = require "ctxcall"
local contract = require "contract"
local schema = require "schema"

local sb = helper.sandbox()
local tool = assert(contract.check(assert(sb.load("get_logic_properties_values")), "get_logic_properties_values"))

local function args(props)
    return helper.decode('{"kn_id":"kn_medical","ot_id":"ot_company","query":"2024 下半年每月获批药品数",'
        .. '"_instance_identities":[{"company_id":"company_000001"},{"company_id":"company_000002"}],'
        .. '"properties":' .. helper.encode(props) .. '}')
end

local function call(a, answers, opts)
    opts = opts or {}
    opts.responses = answers
    return ctxcall.call(tool, a, opts)
end

local DETAIL = { status = 200, fixture = "bkn_ot_logic.json" }

describe("get_logic_properties_values", function()
    it("has the legacy REST alias and validates its input", function()
        assert.equal("logic-property-resolver", tool.rest_alias)
        assert.equal("Compute Logic Properties", contract.list_entry(tool, "en-US").title)
        local _, errs = schema.validate(tool.input_schema, helper.decode(
            '{"kn_id":"k","ot_id":"o","query":"q","_instance_identities":[],"properties":[]}'))
        table.sort(errs, function(a, b)
            return a.path < b.path
        end)
        assert.same({ "/_instance_identities", "/properties" }, helper.paths(errs))
    end)

    it("generates metric and tool parameters, then asks ontology-query for the values", function()
        local res, err, ctx = call(args({ "approved_drug_count", "business_health_score", "static_rank" }), {
            DETAIL,
            { status = 200, fixture = "mf_chat_metric.json" },
            { status = 200, fixture = "oi_tool_health.json" },
            { status = 200, fixture = "mf_chat_tool.json" },
            { status = 200, fixture = "oq_logic_values.json" },
        }, { now = 1735000000000 })
        assert.is_nil(err)
        local r = ctx.requests
        assert.equal(5, #r)
        assert.equal("bkn_backend", r[1].upstream)
        assert.equal("/in/v1/knowledge-networks/kn_medical/object-types/ot_company", r[1].path)
        assert.same({ include_detail = "true" }, r[1].query)
        assert.equal("mf_model_api", r[2].upstream)
        assert.equal("/v1/chat/completions", r[2].path)
        assert.equal("", r[2].json.model)
        assert.equal("system", r[2].json.messages[1].role)
        local user = cljson.decode(r[2].json.messages[2].content)
        assert.equal("approved_drug_count", user.logic_property.name)
        assert.equal("2024 下半年每月获批药品数", user.query)
        assert.equal(1735000000000, user.now_ms)
        assert.equal("company_000001", user.unique_identities[1].company_id)
        assert.equal("operator_integration", r[3].upstream)
        assert.equal("/internal-v1/tool-box/box_fin/tool/tool_health", r[3].path)
        user = cljson.decode(r[4].json.messages[2].content)
        assert.equal("year", user.logic_property.api_spec.parameters[1].name)
        assert.equal("ontology_query", r[5].upstream)
        assert.equal("POST", r[5].method)
        assert.equal("/in/v1/knowledge-networks/kn_medical/object-types/ot_company/properties", r[5].path)
        assert.same({ ["x-http-method-override"] = "GET" }, r[5].headers)
        assert.equal('{"_instance_identities":[{"company_id":"company_000001"},{"company_id":"company_000002"}],'
            .. '"properties":["approved_drug_count","business_health_score","static_rank"],"dynamic_params":'
            .. '{"approved_drug_count":{"start":1719792000000,"end":1735660800000,"instant":false,"step":"month"},'
            .. '"business_health_score":{"year":2024}}}', helper.encode(r[5].json))
        assert.equal('{"datas":[{"company_id":"company_000001","approved_drug_count":12,"business_health_score":'
            .. '{"score":88.5,"tags":[]}},{"company_id":"company_000002","approved_drug_count":0,'
            .. '"business_health_score":null}]}', helper.encode(res))
    end)

    it("refuses unknown properties and types without logic properties, before any model call", function()
        local _, err, ctx = call(args({ "approved_drug_count", "nope" }), { DETAIL }, { lang = "en-US" })
        assert.equal(400, err.status)
        assert.equal("properties not found or not logic properties: [nope] (available logic properties: "
            .. "[approved_drug_count business_health_score static_rank])", err.details)
        assert.equal(1, #ctx.requests)
        _, err = call(args({ "x" }), { { status = 200, fixture = "bkn_ot_nologic.json" } })
        assert.equal(400, err.status)
        _, err = call(args({ "x" }), { { status = 200, fixture = "vega_empty.json" } })
        assert.equal(404, err.status)
        _, err = call(args({ "x" }), { { status = 404, fixture = "bkn_error_404.json" } })
        assert.equal(404, err.status)
        assert.equal("BknBackend.ObjectType.NotFound", err.code)
    end)

    it("says which parameter is missing, and checks metric parameters", function()
        local _, err = call(args({ "approved_drug_count" }),
            { DETAIL, { status = 200, fixture = "mf_chat_missing.json" } })
        assert.equal(400, err.status)
        assert.equal('{"error_code":"MISSING_INPUT_PARAMS","property":"approved_drug_count",'
            .. '"message":"missing start: 请给出统计的起始时间"}', helper.encode(err.details))
        _, err = call(args({ "approved_drug_count" }), { DETAIL, { status = 200, fixture = "mf_chat_badstep.json" } })
        assert.equal(400, err.status)
        assert.truthy(err.details:find("step must be one of", 1, true))
        _, err = call(args({ "approved_drug_count" }), { DETAIL, { status = 200, fixture = "mf_chat_nojson.json" } })
        assert.equal(500, err.status)
        assert.truthy(err.details:find("DYNAMIC_PARAMS_GENERATION_FAILED", 1, true))
        _, err = call(args({ "approved_drug_count" }), { DETAIL, { status = 503, body = "busy" } })
        assert.equal(500, err.status)
    end)

    it("attaches permission_guidance to a 403 naming the object type", function()
        helper.authz().clear()
        local _, err = call(args({ "static_rank" }), {
            DETAIL,
            { status = 403, body = '{"error_code":"Public.Forbidden","error_details":'
                .. '"Public.Forbidden: query_data was not granted for object_type:kn_medical/ot_company"}' },
            { status = 200, fixture = "oq_schema_ok.json" },
            { status = 200, body = '{"entries":[{"id":"ot_company","name":"药企"}]}' },
        }, { principal = { account_id = "u_bob", account_type = "user" },
            request = { forwarded_host = "bkn.example.com", forwarded_proto = "https" } })
        assert.equal(403, err.status)
        assert.equal("Public.Forbidden", err.code)
        local g = err.permission_guidance
        assert.equal("药企", g.resource.name)
        assert.equal("kn_medical/ot_company", g.resource.id)
        assert.truthy(g.shortfalls[1].request_permission_url:find(
            "^https://bkn%.example%.com/studio/knowledge%-network/workspace/kn_medical/object%-types/ot_company/"))
        -- a 403 about a metric gives none
        _, err = call(args({ "static_rank" }), { DETAIL, { status = 403, fixture = "oq_error_403_metric.json" } })
        assert.equal(403, err.status)
        assert.is_nil(err.permission_guidance)
        _, err = call(args({ "static_rank" }), { DETAIL, { status = 500, fixture = "oq_error_500.json" } })
        assert.equal(502, err.status)
    end)
end)
