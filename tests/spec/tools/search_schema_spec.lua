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
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = "药品的生产企业", enable_rerank = false },
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
            include_columns = true, enable_rerank = false }, { surface = "rest", respond = router(ROUTES) })
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
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = "药品", enable_rerank = false,
            search_scope = { concept_groups = { "cg_drug_safety" }, include_metric_types = false } },
            { respond = router(routes) })
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

-- Reranking: mf-model-api's reranker reorders the candidates. Fixtures recorded from the
-- platform simulator: ss_export.json (kn_medical export view), ss_ot_search.json
-- (bkn-backend's object search for Q), ss_rerank.json (mf-model-api's answer to the
-- documents below), ss_rerank_500.json (an injected fault); ss_rerank_reorder.json
-- and ss_rerank_bad_*.json are hand-made answers to the same documents.
describe("search_schema reranking", function()
    local Q = "药品由哪家企业生产"
    local RERANK = "POST /v1/small-model/reranker"
    local DOCS = '["生产企业 药品生产企业。Drug manufacturers.","药品 已批准上市或曾上市的药品。Approved drugs.",'
        .. '"药企 医药集团与上市公司。Pharmaceutical companies.","不良反应上报 药品不良反应上报记录。Adverse event reports.",'
        .. '"疾病 疾病与适应症。Diseases.","患者 患者信息（受权限控制：手机号脱敏、按地区行过滤）。Patients (restricted).",'
        .. '"生产于 (药品 -> 生产企业) 药品由生产企业生产","上报药品 (不良反应上报 -> 药品) 不良反应上报关联药品",'
        .. '"患者患病 (患者 -> 疾病) 患者所患疾病。Patient has disease."]'

    -- routes for the recorded export and search, plus `rerank` for the reranker:
    -- {status, fixture} | {status, nil, body} | {err = {...}} | nil (must not be called)
    local function routes(rerank)
        local map = {
            ["GET " .. BASE] = { 200, "ss_export.json" },
            ["POST " .. BASE .. "/object-types"] = { 200, "ss_ot_search.json" },
        }
        return function(req)
            local key = req.method .. " " .. req.path
            if key == RERANK then
                assert.equal("mf_model_api", req.upstream)
                assert.is_not_nil(rerank, "the reranker must not be called")
                if rerank.err then
                    return nil, rerank.err
                end
                return helper.response(rerank[1], rerank[2] and helper.fixture(rerank[2]) or rerank[3])
            end
            assert.equal("bkn_backend", req.upstream)
            local a = map[key]
            if a == nil then
                error("unexpected request " .. key)
            end
            return helper.response(a[1], helper.fixture(a[2]))
        end
    end

    local function ids(list, field)
        local out = {}
        for i, c in ipairs(list) do
            out[i] = c[field or "concept_id"]
        end
        return out
    end

    local function call(rerank, extra)
        local args = { kn_id = "kn_medical", query = Q, search_scope = { include_metric_types = false } }
        for k, v in pairs(extra or {}) do
            args[k] = v
        end
        return helper.call(tool, args, { respond = routes(rerank) })
    end

    local function rerank_requests(ctx)
        local out = {}
        for _, r in ipairs(ctx.requests) do
            if r.upstream == "mf_model_api" then
                out[#out + 1] = r
            end
        end
        return out
    end

    -- the simple ranking of these fixtures, as enable_rerank=false gives it
    local SIMPLE_OTS = { "ot_manufacturer", "ot_drug", "ot_company", "ot_adverse_event" }
    local SIMPLE_RTS = { "rt_produced_by", "rt_reported_for" }

    it("enable_rerank=false sends no reranker request and keeps the simple ranking", function()
        local res, err, ctx = call(nil, { enable_rerank = false })
        assert.is_nil(err)
        assert.equal(2, #ctx.requests)
        assert.same({}, rerank_requests(ctx))
        assert.same(SIMPLE_OTS, ids(res.object_types))
        assert.same(SIMPLE_RTS, ids(res.relation_types))
        assert.same({ "at_generate_treatment_plan" }, ids(res.action_types, "id"))
    end)

    it("sends one reranker request (objects, then relations) and orders by its scores", function()
        local res, err, ctx = call({ 200, "ss_rerank.json" })
        assert.is_nil(err)
        local rr = rerank_requests(ctx)
        assert.equal(1, #rr)
        assert.equal(3, #ctx.requests)
        assert.equal(ctx.requests[3], rr[1]) -- after the export and the coarse search
        assert.equal("POST", rr[1].method)
        assert.equal('{"query":"' .. Q .. '","documents":' .. DOCS .. ',"model":""}', helper.encode(rr[1].json))
        assert.is_true(math.type(rr[1].timeout_ms) == "integer" and rr[1].timeout_ms <= 10000)
        -- recorded scores: 不良反应上报 0.125 beats 药企 0 (kept only as a simple match, after)
        assert.same({ "ot_manufacturer", "ot_drug", "ot_adverse_event", "ot_company" }, ids(res.object_types))
        assert.same(SIMPLE_RTS, ids(res.relation_types))
        assert.same({}, ctx.logs)
    end)

    it("the reranker's scores change the order, surface what simple matching missed, cut at max_concepts",
        function()
            -- 上报药品 0.9, 药企 0.8, 疾病 0.5, 生产于 0.4, 生产企业 0.3; 药品 and 不良反应上报 0;
            -- 患者 and 患者患病 not scored
            local res, err = call({ 200, "ss_rerank_reorder.json" })
            assert.is_nil(err)
            assert.same({ "ot_company", "ot_disease", "ot_manufacturer", "ot_drug", "ot_adverse_event" },
                ids(res.object_types))
            assert.same({ "rt_reported_for", "rt_produced_by" }, ids(res.relation_types))
            res = call({ 200, "ss_rerank_reorder.json" }, { max_concepts = 1 })
            assert.same({ "rt_reported_for" }, ids(res.relation_types))
            -- the top object, then the endpoints of the returned relation
            assert.same({ "ot_company", "ot_adverse_event", "ot_drug" }, ids(res.object_types))
            assert.same({ "at_generate_treatment_plan" }, ids(res.action_types, "id"))
        end)

    it("falls back to the simple ranking when the reranker fails or answers badly", function()
        local simple = helper.encode((call(nil, { enable_rerank = false })))
        local cases = {
            { 500, "ss_rerank_500.json" },
            { err = { code = "upstream_timeout", message = "timed out" } },
            { 200, "ss_rerank_bad_index.json" },
            { 200, "ss_rerank_bad_score.json" },
            { 200, "ss_rerank_no_results.json" },
            { 200, nil, "<html>bad gateway</html>" },
        }
        for i, c in ipairs(cases) do
            local res, err, ctx = call(c)
            assert.is_nil(err, "case " .. i)
            assert.equal(1, #rerank_requests(ctx), "case " .. i)
            assert.equal(simple, helper.encode(res), "case " .. i)
            assert.equal(1, #ctx.logs, "case " .. i)
            assert.equal("warn", ctx.logs[1].level)
            assert.truthy(ctx.logs[1].msg:find("reranker unavailable", 1, true), "case " .. i)
        end
        local _, _, ctx = call({ 500, "ss_rerank_500.json" })
        assert.truthy(ctx.logs[1].msg:find("status 500", 1, true))
    end)

    it("reranks only the kinds in scope", function()
        local _, err, ctx = call({ 200, "ss_rerank.json" }, { search_scope = { include_object_types = false,
            include_action_types = false, include_metric_types = false } })
        assert.is_nil(err)
        local docs = rerank_requests(ctx)[1].json.documents
        assert.same({ "生产于 (药品 -> 生产企业) 药品由生产企业生产", "上报药品 (不良反应上报 -> 药品) 不良反应上报关联药品",
            "患者患病 (患者 -> 疾病) 患者所患疾病。Patient has disease." }, docs)
        -- ss_rerank.json names indexes up to 8 for 3 documents: rejected, simple ranking kept
        assert.equal(1, #ctx.logs)
        local res
        res, err, ctx = call({ 200, "ss_rerank.json" }, { search_scope = { include_relation_types = false,
            include_metric_types = false } })
        assert.is_nil(err)
        assert.equal(6, #rerank_requests(ctx)[1].json.documents)
        assert.same({}, res.relation_types)
        -- only metrics: neither the coarse search nor the reranker
        res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = Q, search_scope = {
            include_object_types = false, include_relation_types = false, include_action_types = false } },
            { respond = function(req)
                if req.method == "GET" then
                    return helper.response(200, helper.fixture("ss_export.json"))
                end
                assert.equal(BASE .. "/metrics", req.path)
                return helper.response(200, helper.fixture("bkn_metric_search.json"))
            end })
        assert.is_nil(err)
        assert.equal(2, #ctx.requests)
        assert.equal(1, #res.metric_types)
    end)

    it("bounds the request: 200 object candidates, documents cut at a character boundary", function()
        local ots = {}
        for i = 1, 250 do
            ots[i] = { id = "ot_" .. i, name = "对象" .. i, comment = i == 1 and string.rep("药", 500) or "" }
        end
        local export = helper.encode({ id = "kn_medical", object_types = ots })
        local _, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = "对象",
            search_scope = { include_metric_types = false } }, { respond = function(req)
                if req.method == "GET" then
                    return helper.response(200, export)
                end
                if req.upstream == "mf_model_api" then
                    return helper.response(200, '{"results":[]}')
                end
                return helper.response(500, "")
            end })
        assert.is_nil(err)
        local docs = rerank_requests(ctx)[1].json.documents
        assert.equal(200, #docs)
        assert.equal("对象2", docs[2])
        assert.is_true(#docs[1] <= 1000)
        assert.is_not_nil(utf8.len(docs[1]))
        -- 8 + 330 * 3 = 998 bytes; one more character would make 1001
        assert.equal("对象1 " .. string.rep("药", 330), docs[1])
    end)
end)
