-- get_kn_detail, get_object_types, get_relation_types (bkn-backend).
local helper = require "helper"
local contract = require "contract"
local schema = require "schema"

local kn_detail = helper.load_tool("get_kn_detail")
local object_types = helper.load_tool("get_object_types")
local relation_types = helper.load_tool("get_relation_types")

-- answers by path suffix, so the order of calls does not matter
local function router(map)
    return function(req)
        for suffix, a in pairs(map) do
            if req.path:sub(-#suffix) == suffix then
                if a.err then
                    return nil, a.err
                end
                return helper.response(a[1], a[2] and helper.fixture(a[2]) or "")
            end
        end
        error("unexpected request " .. req.path)
    end
end

local EXPORT = { 200, "bkn_kn_export.json" }
local METRICS = { 200, "bkn_metrics.json" }

describe("get_kn_detail", function()
    it("reads the export view and the metrics, and trims to a summary", function()
        local res, err, ctx = helper.call(kn_detail, { kn_id = "kn_medical" },
            { respond = router({ ["/kn_medical"] = EXPORT, ["/metrics"] = METRICS }) })
        assert.is_nil(err)
        assert.equal("/in/v1/knowledge-networks/kn_medical", ctx.requests[1].path)
        assert.same({ include_detail = "true", mode = "export" }, ctx.requests[1].query)
        assert.equal("/in/v1/knowledge-networks/kn_medical/metrics", ctx.requests[2].path)
        assert.same({ scope_type = "object_type", scope_ref = "ot_drug,ot_manufacturer", limit = "1000",
            offset = "0" }, ctx.requests[2].query)
        assert.equal('{"id":"kn_medical","name":"医药知识网络","comment":"药品与企业","concept_groups":[{"id":'
            .. '"cg_drug_safety","name":"药品安全","object_type_ids":["ot_drug"]}],"object_types":[{"module_type":'
            .. '"object_type","id":"ot_drug","name":"药品","tags":[],"comment":"药品","data_source":{"type":'
            .. '"resource","id":"res_drugs","name":"drugs"},"data_properties":[{"name":"drug_id","type":"integer"},'
            .. '{"name":"name","type":"string"}],"logic_properties":[],"primary_keys":["drug_id"],'
            .. '"related_metric_count":1},{"module_type":"object_type","id":"ot_manufacturer","name":"生产企业",'
            .. '"tags":[],"comment":"","data_source":{"type":"resource","id":"res_mfr","name":"mfr"},'
            .. '"data_properties":[{"name":"manufacturer_id","type":"string"}],"logic_properties":[{"name":'
            .. '"approved_drug_count","type":"metric"}],"primary_keys":["manufacturer_id"]}],"relation_types":'
            .. '[{"module_type":"relation_type","id":"rt_produced_by","name":"生产","tags":[],"comment":"",'
            .. '"source_object_type_id":"ot_drug","target_object_type_id":"ot_manufacturer","type":"direct"}],'
            .. '"action_types":[{"module_type":"action_type","id":"at_recall","name":"召回药品","tags":[],'
            .. '"comment":"","object_type_id":"ot_drug"}]}', helper.encode(res))
    end)

    it("keeps full definitions with detail_level full, and survives a metrics failure", function()
        local res, err, ctx = helper.call(kn_detail, { kn_id = "kn_medical", detail_level = "full" },
            { respond = router({ ["/kn_medical"] = EXPORT, ["/metrics"] = { 500, "bkn_error_500.json" } }) })
        assert.is_nil(err)
        assert.equal("药品ID", res.object_types[1].data_properties[1].display_name)
        assert.is_nil(res.object_types[1].related_metric_count)
        assert.equal(1, #res.relation_types[1].mapping_rules)
        assert.equal("warn", ctx.logs[1].level)
    end)

    it("re-wraps bkn-backend errors and validates its input", function()
        local _, err = helper.call(kn_detail, { kn_id = "kn_x" },
            { lang = "en-US", respond = router({ ["/kn_x"] = { 403, "bkn_error_403.json" } }) })
        assert.equal(403, err.status)
        _, err = helper.call(kn_detail, { kn_id = "kn_x" },
            { lang = "en-US", respond = router({ ["/kn_x"] = { 404 } }) })
        assert.equal(404, err.status)
        assert.equal("Public.NotFound", err.code)
        _, err = helper.call(kn_detail, { kn_id = "kn_x" },
            { respond = router({ ["/kn_x"] = { err = { code = "x" } } }) })
        assert.equal(502, err.status)
        local _, errs = schema.validate(kn_detail.input_schema, { detail_level = "all" })
        assert.equal(2, #errs)
        assert.equal("Network Structure", contract.list_entry(kn_detail, "en-US").title)
    end)
end)

describe("get_object_types", function()
    it("uses the detail endpoint and keeps only search operations on MCP", function()
        local res, err, ctx = helper.call(object_types, { kn_id = "kn_medical", ids = { "ot_drug", "ot_drug" } },
            { respond = router({ ["/object-types/ot_drug"] = { 200, "bkn_ot_detail.json" }, ["/metrics"] = METRICS }) })
        assert.is_nil(err)
        assert.equal("/in/v1/knowledge-networks/kn_medical/object-types/ot_drug", ctx.requests[1].path)
        assert.same({ include_detail = "true" }, ctx.requests[1].query)
        assert.same({ ["x-http-method-override"] = "GET" }, ctx.requests[1].headers)
        local ot = res.object_types[1]
        assert.equal('[]', helper.encode(ot.data_properties[1].condition_operations))
        assert.equal('["match","knn"]', helper.encode(ot.data_properties[2].condition_operations))
        assert.is_nil(ot.data_properties[1].display_name)
        assert.equal('[{"id":"metric_sales","name":"销量","comment":"月销量","metric_type":"atomic","unit":"盒",'
            .. '"unit_type":"count","scope_ref":"ot_drug","analysis_dimensions":["region","channel"],'
            .. '"time_dimension":"sale_date"}]', helper.encode(ot.related_metrics))
        assert.equal(1, ot.related_metric_count)
        assert.is_nil(res.missing)
        assert.equal("kn_medical", res.kn_id)
    end)

    it("keeps every operation on REST", function()
        local res = helper.call(object_types, { kn_id = "kn_medical", ids = { "ot_drug" } }, { surface = "rest",
            respond = router({ ["/object-types/ot_drug"] = { 200, "bkn_ot_detail.json" }, ["/metrics"] = METRICS }) })
        assert.equal('["==","in","range"]', helper.encode(res.object_types[1].data_properties[1].condition_operations))
    end)

    it("falls back to the export view, matching ids then names, and lists the missing", function()
        local res, err, ctx = helper.call(object_types,
            { kn_id = "kn_medical", ids = { "生产企业", "ot_nope", "ot_drug" } },
            { respond = router({ ["/object-types/%E7%94%9F%E4%BA%A7%E4%BC%81%E4%B8%9A,ot_nope,ot_drug"] =
                { 404, "bkn_error_404.json" }, ["/kn_medical"] = EXPORT, ["/metrics"] = METRICS }) })
        assert.is_nil(err)
        assert.equal(3, #ctx.requests)
        assert.equal("ot_manufacturer", res.object_types[1].id)
        assert.equal("ot_drug", res.object_types[2].id)
        assert.same({ "ot_nope" }, res.missing)
        assert.equal('[]', helper.encode(res.object_types[1].related_metrics))
    end)

    it("requires at least one id", function()
        local _, err = helper.call(object_types, { kn_id = "k", ids = {} }, {})
        assert.same({ "/ids" }, helper.paths(err.errors))
    end)
end)

describe("get_relation_types", function()
    it("matches relation types of the export view", function()
        local res, err = helper.call(relation_types, { kn_id = "kn_medical", ids = { "生产", "rt_nope" } },
            { respond = router({ ["/kn_medical"] = EXPORT }) })
        assert.is_nil(err)
        assert.equal("rt_produced_by", res.relation_types[1].id)
        assert.equal(1, #res.relation_types[1].mapping_rules)
        assert.same({ "rt_nope" }, res.missing)
        assert.same({ "mcp", "rest" }, relation_types.surfaces)
        local _, e = helper.call(relation_types, { kn_id = "kn_x", ids = { "a" } },
            { respond = router({ ["/kn_x"] = { 500, "bkn_error_500.json" } }) })
        assert.equal(502, e.status) -- an upstream 500 is a bad gateway
        assert.equal(500, e.upstream_status)
        assert.equal("BknBackend.InternalError", e.upstream_code)
    end)
end)
