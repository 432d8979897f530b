local helper = require "helper"
local contract = require "contract"

local tool = helper.load_tool("search_schema")

local function router(map)
    return function(req)
        local key = req.method .. " " .. req.path
        local a = map[key]
        if a == nil then
            error("unexpected request " .. key)
        end
        return helper.response(a[1], a[2] and helper.fixture(a[2]) or "")
    end
end

local BASE = "/in/v1/knowledge-networks/kn_medical"
local ROUTES = {
    ["GET " .. BASE] = { 200, "bkn_kn_export.json" },
    ["POST " .. BASE .. "/object-types"] = { 200, "bkn_ot_search.json" },
    ["POST " .. BASE .. "/metrics"] = { 200, "bkn_metric_search.json" },
}

describe("search_schema", function()
    it("ranks by bkn-backend's search and projects brief concepts on MCP", function()
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = "药品的生产企业" },
            { respond = router(ROUTES) })
        assert.is_nil(err)
        local search = ctx.requests[2]
        assert.same({ ["x-http-method-override"] = "GET" }, search.headers)
        assert.equal('{"condition":{"operation":"or","sub_conditions":[{"field":"*","limit_key":"k",'
            .. '"limit_value":2000,"operation":"knn","value":"药品的生产企业","value_from":"const"},{"field":"*",'
            .. '"operation":"match","value":"药品的生产企业","value_from":"const"}]},"sort":[{"field":"_score",'
            .. '"direction":"desc"}],"limit":2000,"need_total":false}', helper.encode(search.json))
        assert.equal("ot_manufacturer", res.object_types[1].concept_id)
        assert.equal("ot_drug", res.object_types[2].concept_id)
        assert.is_nil(res.object_types[1].concept_type)
        assert.is_nil(res.object_types[1].primary_keys)
        assert.equal('{"name":"manufacturer_id","type":"string"}',
            helper.encode(res.object_types[1].data_properties[1]))
        assert.equal('[{"concept_id":"rt_produced_by","concept_name":"生产","source_object_type_id":"ot_drug",'
            .. '"target_object_type_id":"ot_manufacturer"}]', helper.encode(res.relation_types))
        assert.equal('[{"id":"at_recall","name":"召回药品","object_type_id":"ot_drug","object_type_name":"药品",'
            .. '"kn_id":"kn_medical"}]', helper.encode(res.action_types))
        assert.equal("metric_sales", res.metric_types[1].id)
        assert.equal('[]', helper.encode(res.metric_types[1].analysis_dimensions))
    end)

    it("appends the endpoints of returned relations beyond max_concepts; full on REST", function()
        local res = helper.call(tool, { kn_id = "kn_medical", query = "生产", max_concepts = 1,
            include_columns = true }, { surface = "rest", respond = router(ROUTES) })
        assert.equal(2, #res.object_types)
        assert.equal("object_type", res.object_types[1].concept_type)
        assert.equal("relation_type", res.relation_types[1].concept_type)
        assert.equal("drug_id", res.object_types[2].data_properties[1].column)
        assert.same({ "drug_id" }, res.object_types[2].primary_keys)
    end)

    it("falls back to lexical ranking and honours the scope", function()
        local routes = {
            ["GET " .. BASE] = { 200, "bkn_kn_export.json" },
            ["POST " .. BASE .. "/object-types"] = { 500, "bkn_error_500.json" },
        }
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = "药品", search_scope = {
            concept_groups = { "cg_drug_safety" }, include_metric_types = false } }, { respond = router(routes) })
        assert.is_nil(err)
        assert.equal(2, #ctx.requests)
        assert.equal(1, #res.object_types)
        assert.equal("ot_drug", res.object_types[1].concept_id)
        assert.equal(0, #res.relation_types) -- its other endpoint is outside the group
        assert.equal('[]', helper.encode(res.metric_types))
        local _, e = helper.call(tool, { kn_id = "kn_medical", query = "x", search_scope = {
            include_object_types = false, include_relation_types = false, include_action_types = false,
            include_metric_types = false } }, { lang = "en-US", responses = {} })
        assert.equal(400, e.status)
        assert.equal("search_scope must enable at least one concept type", e.details)
        _, e = helper.call(tool, { kn_id = "kn_x", query = "x" },
            { responses = { { status = 403, fixture = "bkn_error_403.json" } } })
        assert.equal(403, e.status)
        assert.equal("Explore Schema", contract.list_entry(tool, "en-US").title)
    end)
end)
