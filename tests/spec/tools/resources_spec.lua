-- list_resources and describe_resource (REST only, vega).
local helper = require "helper"
local contract = require "contract"
local schema = require "schema"

local list = helper.load_tool("list_resources")
local describe_tool = helper.load_tool("describe_resource")

describe("list_resources", function()
    it("is REST-only with a localized entry", function()
        assert.same({ "rest" }, list.surfaces)
        assert.equal("Data Resources", contract.list_entry(list, "en-US").title)
        assert.equal("数据资源列表", contract.list_entry(list, "zh-CN").title)
        local _, errs = schema.validate(list.input_schema, { type = "sheet", limit = 0, offset = -1 })
        assert.equal(3, #errs)
    end)

    it("lists the caller's resources with only the filters that are set", function()
        local res, err, ctx = helper.call(list, { catalog_id = "cat_prod_mysql", type = "table", offset = 0,
            limit = 50 }, { responses = { { status = 200, fixture = "vega_resources.json" } } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("vega", req.upstream)
        assert.equal("GET", req.method)
        assert.equal("/in/v1/resources", req.path)
        assert.same({ catalog_id = "cat_prod_mysql", category = "table", offset = "0", limit = "50" }, req.query)
        assert.equal('{"entries":[{"resource_id":"res_orders","name":"orders","type":"table","status":"active",'
            .. '"catalog_id":"cat_prod_mysql"},{"resource_id":"res_logs","name":"logs","type":"index",'
            .. '"status":"active","catalog_id":"cat_os"}],"total_count":12}', helper.encode(res))
        res, err, ctx = helper.call(list, {}, { responses = { { status = 200, fixture = "vega_empty.json" } } })
        assert.is_nil(err)
        assert.same({}, ctx.requests[1].query)
        assert.equal('{"entries":[],"total_count":0}', helper.encode(res))
    end)

    it("with kn_id lists bound resources and names unbound, stale and missing bindings", function()
        local answers = {
            ["/in/v1/resources/res_orders"] = { 200, "vega_resource_orders.json" },
            ["/in/v1/resources/res_customers"] = { 200, "vega_resource_customers.json" },
            ["/in/v1/resources/res_gone"] = { 404, "vega_error_404.json" },
        }
        local function respond(req)
            if req.upstream == "bkn_backend" then
                return helper.response(200, helper.fixture("bkn_kn_resources.json"))
            end
            local a = assert(answers[req.path], req.path)
            return helper.response(a[1], helper.fixture(a[2]))
        end
        local res, err, ctx = helper.call(list, { kn_id = "kn_medical", limit = 1 }, { respond = respond })
        assert.is_nil(err)
        assert.equal("/in/v1/knowledge-networks/kn_medical", ctx.requests[1].path)
        assert.same({ include_detail = "true", mode = "export" }, ctx.requests[1].query)
        assert.equal(4, #ctx.requests) -- res_orders once although two types bind it
        assert.equal('{"entries":[{"resource_id":"res_orders","name":"orders","type":"table","status":"active",'
            .. '"catalog_id":"cat_prod_mysql"},{"resource_id":"res_customers","name":"customers","type":"table",'
            .. '"status":"active","catalog_id":"cat_prod_mysql"}],"total_count":2,'
            .. '"unbound":[{"object_type_id":"ot_free"},{"object_type_id":"ot_empty"}],'
            .. '"stale_binding":[{"object_type_id":"ot_view","resource_id":"dv_1","source_type":"data_view"}],'
            .. '"missing":[{"object_type_id":"ot_gone","resource_id":"res_gone","reason":"not_found"}]}',
            helper.encode(res))
        res = helper.call(list, { kn_id = "kn_medical", type = "index" },
            { respond = respond })
        assert.equal(0, res.total_count)
    end)

    it("reports an outage when every bound resource failed with 5xx", function()
        local function respond(req)
            if req.upstream == "bkn_backend" then
                return helper.response(200, helper.fixture("bkn_kn_resources.json"))
            end
            return helper.response(503, "vega down")
        end
        local res, err = helper.call(list, { kn_id = "kn_medical" }, { respond = respond })
        assert.is_nil(res)
        assert.equal(503, err.status) -- the gateway's upstream mapping: 503 stays a retryable 503
        assert.equal("vega down", err.details)
    end)

    it("re-wraps a bkn-backend error and maps vega errors", function()
        local _, err = helper.call(list, { kn_id = "kn_x" },
            { responses = { { status = 403, fixture = "bkn_error_403.json" } } })
        assert.equal(403, err.status)
        _, err = helper.call(list, {}, { responses = { { status = 401, body = '{"error_code":"x"}' } } })
        assert.equal(401, err.status)
        assert.equal("x", err.code) -- the platform's own code
        _, err = helper.call(list, {}, { responses = { { status = 401, body = '{"message":"x"}' } } })
        assert.equal(401, err.status)
        assert.equal("Public.Unauthorized", err.code)
    end)
end)

describe("describe_resource", function()
    it("reads the resource and its catalog and keeps name, type, description", function()
        local res, err, ctx = helper.call(describe_tool, { resource_id = "res_orders" }, { responses = {
            { status = 200, fixture = "vega_resource_orders.json" },
            { status = 200, fixture = "vega_catalog.json" } } })
        assert.is_nil(err)
        assert.equal(2, #ctx.requests)
        assert.equal("/in/v1/resources/res_orders", ctx.requests[1].path)
        assert.equal("/in/v1/catalogs/cat_prod_mysql", ctx.requests[2].path)
        assert.equal("vega", ctx.requests[2].upstream)
        assert.equal('{"resource_id":"res_orders","connector_type":"mysql","columns":[{"name":"id","type":"bigint",'
            .. '"description":"主键"},{"name":"customer_id","type":"bigint"},{"name":"status","type":"varchar"},'
            .. '{"name":"created_at","type":"datetime","description":"下单时间"}]}', helper.encode(res))
        assert.same({ "rest" }, describe_tool.surfaces)
    end)

    it("maps missing resources, catalogs and errors", function()
        local _, err = helper.call(describe_tool, { resource_id = "res_x" },
            { lang = "en-US", responses = { { status = 200, fixture = "vega_empty.json" } } })
        assert.equal(404, err.status)
        assert.equal("Public.NotFound", err.code)
        _, err = helper.call(describe_tool, { resource_id = "res_x" },
            { responses = { { status = 200, fixture = "vega_resource_nocatalog.json" } } })
        assert.equal(400, err.status)
        assert.truthy(err.details:find("has no catalog", 1, true))
        _, err = helper.call(describe_tool, { resource_id = "res_orders" }, { responses = {
            { status = 200, fixture = "vega_resource_orders.json" }, { status = 200, fixture = "vega_empty.json" } } })
        assert.equal(400, err.status)
        _, err = helper.call(describe_tool, { resource_id = "res_gone" },
            { responses = { { status = 404, fixture = "vega_error_404.json" } } })
        assert.equal(404, err.status)
        assert.equal("VegaBackend.Resource.NotFound", err.details.error_code)
        _, err = helper.call(describe_tool, { resource_id = "a/b" },
            { responses = { { err = { code = "upstream_timeout" } } } })
        assert.equal(504, err.status)
        local _, _, ctx = helper.call(describe_tool, { resource_id = "a/b" },
            { responses = { { status = 500, body = "x" } } })
        assert.equal("/in/v1/resources/a%2Fb", ctx.requests[1].path)
        _, err = helper.call(describe_tool, {}, { responses = {} })
        assert.equal("invalid_arguments", err.code)
    end)
end)
