local helper = require "helper"
local cljson = require "cljson"

-- search_instance, explore_subgraph, query_metric, find_skills: schema, the exact
-- requests, trimming and refusals, on answers recorded from the platform simulator.

local EMPTY = '{"datas":[]}'

-- A fake platform for search_instance: kn detail, bkn-safe, concept search, the
-- channels of ot_drug (the other types find nothing), the reranker.
local function platform(over)
    over = over or {}
    return function(req)
        local p = req.path
        local function answer(key, default)
            local a = over[key]
            if a == nil then
                a = default
            end
            if type(a) == "table" and a.err then
                return nil, a.err
            end
            if type(a) == "table" then
                return helper.response(a.status, a.body or helper.fixture(a.fixture))
            end
            return helper.response(200, a)
        end
        if req.upstream == "bkn_backend" and req.method == "GET" then
            return answer("kn", { status = 200, fixture = "si_kn_medical.json" })
        elseif req.upstream == "bkn_safe" then
            -- as bkn-safe answers for u_other: every asked object type but ot_patient
            local granted = {}
            for _, r in ipairs(req.json.resources) do
                if r.id ~= "kn_medical/ot_patient" then
                    granted[#granted + 1] = { resource_type = "object_type", resource_id = r.id,
                        operations = { "query_data" } }
                end
            end
            return answer("filter", { status = 200, body = cljson.encode({ resources = granted }) })
        elseif req.upstream == "bkn_backend" then
            return answer("concepts", { status = 500, body = "" })
        elseif req.upstream == "mf_model_api" then
            return answer("rerank", { status = 200, fixture = "si_rerank.json" })
        end
        local ot = p:match("/object%-types/([%w_]+)$")
        local channel = req.json.condition.sub_conditions[1].operation
        local rec = ({ ot_drug = "si_drug_" })[ot]
        if rec then
            return answer(ot .. "_" .. channel, { status = 200, fixture = rec .. channel .. ".json" })
        end
        return helper.response(200, EMPTY)
    end
end

local function searched(ctx)
    local out = {}
    for _, r in ipairs(ctx.requests) do
        local ot = r.upstream == "ontology_query" and r.path:match("/object%-types/([%w_]+)$")
        if ot and out[#out] ~= ot then
            out[#out + 1] = ot
        end
    end
    return out
end

describe("search_instance", function()
    local tool = helper.load_tool("search_instance")
    local Q = "阿司匹林 布洛芬 胶囊"

    it("is a REST and gateway tool, listed on no MCP surface", function()
        assert.same({ "rest", "gateway" }, tool.surfaces)
        assert.equal("query", tool.group)
    end)

    it("fuses both channels per type and orders globally, every score named", function()
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = Q },
            { respond = platform(), principal = { account_id = "u_other", account_type = "user" } })
        assert.is_nil(err)
        local first = res.nodes[1]
        assert.equal("ot_drug", first.object_type_id)
        assert.equal("药品", first.object_type_name)
        assert.equal(1, first.rank)
        assert.equal(1.9839, first.score)
        assert.equal(8.3775, first.bm25_score)
        assert.equal(0.5, first.knn_score)
        assert.is_nil(first.reranker_score)
        assert.is_nil(first.properties._score)
        assert.equal('{"drug_id":9007199254740993}', cljson.encode(first.properties._instance_identity))
        assert.equal("布洛芬缓释胶囊", res.nodes[2].properties._display)
        assert.equal(5, #res.nodes) -- max_instances_per_type 5; the other types find nothing
        for i, n in ipairs(res.nodes) do
            assert.equal(i, n.rank)
        end
        assert.same({ "ot_drug" }, { res.object_types[1].concept_id })
        -- MCP: only the index-backed operations of each property
        assert.same({ "match", "knn" }, res.object_types[1].data_properties[2].condition_operations)
        -- the resource filter asked about every object type, as the caller
        local f = ctx.requests[2]
        assert.equal("bkn_safe", f.upstream)
        assert.equal("/api/safe/v1/authz/resource-filter", f.path)
        assert.equal("u_other", f.json.accessor_id)
        assert.equal(7, #f.json.resources)
        -- ot_patient is not the caller's to query: never searched; the concept search failed,
        -- so the network order stands
        assert.same({ "ot_drug", "ot_manufacturer", "ot_company", "ot_disease", "ot_adverse_event", "skills" },
            searched(ctx))
        local knn = ctx.requests[4].json
        assert.equal('{"operation":"or","sub_conditions":[{"field":"name","operation":"knn","value":"' .. Q ..
            '","value_from":"const","limit_key":"k","limit_value":5}]}', cljson.encode(knn.condition))
        assert.equal(20, knn.limit)
        assert.is_false(knn.need_total)
    end)

    it("lets exclusion win over inclusion: an excluded type is never searched", function()
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = Q,
            object_types = { "ot_drug", "ot_company", "ot_nope" }, exclude_object_types = { "ot_drug" } },
            { respond = platform() })
        assert.is_nil(err)
        assert.same({ "ot_company" }, searched(ctx))
        assert.equal(0, #res.nodes)
        assert.truthy(res.message:find("ot_nope", 1, true))
        assert.equal(1, #ctx.requests[2].json.resources) -- only the scoped type is asked about
    end)

    it("reranks when asked, and keeps the fused order with a message when the reranker fails", function()
        local res = helper.call(tool, { kn_id = "kn_medical", query = Q, rerank = true },
            { respond = platform({ rerank = { status = 200, body = '{"results":[{"index":0,"relevance_score":0.1},' ..
                '{"index":1,"relevance_score":0.9}]}' } }) })
        assert.equal("布洛芬缓释胶囊", res.nodes[1].properties._display)
        assert.equal(0.9, res.nodes[1].reranker_score)
        assert.equal(1, res.nodes[1].rank)
        assert.is_nil(res.nodes[3].reranker_score)
        for _, down in ipairs({ { status = 503, body = "" }, { err = { code = "timeout", message = "t" } },
            { status = 200, body = '{"results":"x"}' } }) do
            local r2, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = Q, rerank = true },
                { respond = platform({ rerank = down }), lang = "en-US" })
            assert.is_nil(err)
            assert.equal("阿司匹林肠溶片", r2.nodes[1].properties._display)
            assert.is_nil(r2.nodes[1].reranker_score)
            assert.truthy(r2.message:find("reranker is unavailable", 1, true))
            assert.equal("warn", ctx.logs[#ctx.logs].level)
        end
    end)

    it("refuses (503) when the resource filter is down or breaks its contract", function()
        for _, bad in ipairs({ { status = 500, body = "" }, { err = { code = "connect", message = "x" } },
            { status = 200, body = '{"resources":[{"resource_type":"object_type","resource_id":"kn_x/ot_drug",' ..
                '"operations":["query_data"]}]}' } }) do
            local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", query = Q },
                { respond = platform({ filter = bad }) })
            assert.is_nil(res)
            assert.equal(503, err.status)
            assert.equal("Public.ServiceUnavailable", err.code)
            assert.same({}, searched(ctx))
        end
    end)

    it("takes kn_id from X-Kn-ID, refuses without one and for unknown concept groups", function()
        local res = helper.call(tool, { query = Q }, { respond = platform(), kn_id_header = "kn_medical" })
        assert.equal("ot_drug", res.nodes[1].object_type_id)
        local _, err = helper.call(tool, { query = Q }, { respond = platform() })
        assert.equal(400, err.status)
        assert.truthy(err.details:find("kn_id", 1, true))
        _, err = helper.call(tool, { kn_id = "kn_medical", query = Q, concept_groups = { "cg_nope" } },
            { respond = platform() })
        assert.equal(400, err.status)
        assert.truthy(err.details:find("cg_nope", 1, true))
        _, err = helper.call(tool, { kn_id = "kn_medical" }, { respond = platform() })
        assert.same({ "/query" }, helper.paths(err.errors))
        _, err = helper.call(tool, { kn_id = "kn_medical", query = Q, max_object_types = 0 }, { respond = platform() })
        assert.same({ "/max_object_types" }, helper.paths(err.errors))
    end)

    it("passes a network that is not there on as 404", function()
        local _, err = helper.call(tool, { kn_id = "kn_nope", query = Q },
            { respond = platform({ kn = { status = 404, body = "" } }) })
        assert.equal(404, err.status)
    end)
end)

describe("explore_subgraph", function()
    local tool = helper.load_tool("explore_subgraph")

    it("asks ontology-query's exploration (empty query_type) with the total", function()
        local req = tool.shape_request({ kn_id = "kn_medical", source_object_type_id = "ot_drug", direction = "forward",
            path_length = 2, limit = 0, include_incomplete_path = true }, helper.ctx())
        assert.equal("/in/v1/knowledge-networks/kn_medical/subgraph", req.path)
        assert.same({ query_type = "" }, req.query)
        assert.equal("GET", req.headers["x-http-method-override"])
        assert.equal('{"source_object_type_id":"ot_drug","direction":"forward","path_length":2,' ..
            '"include_incomplete_path":true,"limit":10,"need_total":true}', cljson.encode(req.json))
    end)

    it("refuses bad input naming the field", function()
        local _, err = helper.call(tool,
            { kn_id = "k", source_object_type_id = "ot", direction = "up", path_length = 4 })
        assert.same({ "/direction", "/path_length" }, helper.paths(err.errors))
        _, err = helper.call(tool, { kn_id = "k", direction = "forward", path_length = 1 })
        assert.same({ "/source_object_type_id" }, helper.paths(err.errors))
        _, err = helper.call(tool,
            { kn_id = "k", source_object_type_id = "ot", direction = "forward", path_length = 0 })
        assert.same({ "/path_length" }, helper.paths(err.errors))
        local _, e2 = tool.shape_request({ kn_id = "k", source_object_type_id = "ot", direction = "forward",
            path_length = 1, offset = 2, search_after = { 1 } }, helper.ctx())
        assert.equal(400, e2.status)
        assert.truthy(e2.details:find("offset", 1, true) and e2.details:find("search_after", 1, true))
    end)

    it("keeps the subgraph, drops the timing, and makes total_count tri-state", function()
        local body = helper.decode('{"objects":{"a":{"x":1}},"relation_paths":[{"relations":[],"length":1}],' ..
            '"search_after":[1],"overall_ms":3}')
        local out = tool.trim_response(body, {})
        assert.equal('{"objects":{"a":{"x":1}},"relation_paths":[{"relations":[],"length":1}],"search_after":[1],' ..
            '"total_count":0}', cljson.encode(out))
        out = tool.trim_response(helper.decode('{"objects":{},"relation_paths":[]}'), { search_after = { 5 } })
        assert.is_nil(out.total_count)
    end)
end)

describe("query_metric", function()
    local tool = helper.load_tool("query_metric")

    it("posts the metric query with fill_null in the query string", function()
        local req = tool.shape_request({ kn_id = "kn_medical", metric_id = "metric_x", fill_null = true,
            time = { start = 1735660800, ["end"] = 1743436800, step = "month", instant = false },
            analysis_dimensions = { "severity" } }, helper.ctx())
        assert.equal("POST", req.method)
        assert.equal("/in/v1/knowledge-networks/kn_medical/metrics/metric_x/data", req.path)
        assert.same({ fill_null = "true" }, req.query)
        assert.is_nil(req.headers)
        assert.equal('{"time":{"start":1735660800,"end":1743436800,"instant":false,"step":"month"},' ..
            '"analysis_dimensions":["severity"]}', cljson.encode(req.json))
    end)

    it("refuses a range without both ends, or backwards, naming the fields", function()
        local _, err = tool.shape_request({ kn_id = "k", metric_id = "m", time = { start = 5 } }, helper.ctx())
        assert.equal(400, err.status)
        assert.truthy(err.details:find("time.end", 1, true))
        _, err = tool.shape_request({ kn_id = "k", metric_id = "m", time = { start = 5, ["end"] = 1 } }, helper.ctx())
        assert.truthy(err.details:find("time.end", 1, true))
        local _, verr = helper.call(tool, { kn_id = "k", metric_id = "m", time = { step = "hour" } })
        assert.same({ "/time/step" }, helper.paths(verr.errors))
        _, verr = helper.call(tool, { kn_id = "k" })
        assert.same({ "/metric_id" }, helper.paths(verr.errors))
    end)

    it("answers kn_id, metric_id and the series", function()
        local out = tool.trim_response(helper.decode('{"datas":[{"labels":{},"values":[1]}],"overall_ms":4}'),
            { kn_id = "k", metric_id = "m" })
        assert.equal('{"kn_id":"k","metric_id":"m","datas":[{"labels":{},"values":[1]}],"overall_ms":4}',
            cljson.encode(out))
    end)
end)

describe("find_skills", function()
    local tool = helper.load_tool("find_skills")
    local SUBGRAPH = '{"entries":[{"objects":{' ..
        '"d":{"object_type_id":"ot_drug","properties":{"drug_id":1005}},' ..
        '"s1":{"object_type_id":"skills","properties":{"skill_id":"skill_recall_assessment","name":"药品召回评估",' ..
        '"description":"评估召回","drug_status":"withdrawn"}}},' ..
        '"relation_paths":[{"relations":[{"relation_type_id":"rt_drug_skill","source_object_id":"d",' ..
        '"target_object_id":"s1"}],"length":1},{"relations":[{"relation_type_id":"rt_drug_skill",' ..
        '"source_object_id":"d","target_object_id":"s1"}],"length":1}]}]}'

    local function respond(sub)
        return function(req)
            if req.upstream == "bkn_backend" then
                return helper.response(200, helper.fixture("si_kn_medical.json"))
            end
            return helper.response(200, sub or SUBGRAPH)
        end
    end

    it("follows the relation to the skills object type, filtered by the instances", function()
        local res, err, ctx = helper.call(tool, { kn_id = "kn_medical", object_type_id = "ot_drug",
            instance_identities = { { drug_id = 1005 } } }, { respond = respond() })
        assert.is_nil(err)
        assert.equal('{"entries":[{"skill_id":"skill_recall_assessment","name":"药品召回评估",' ..
            '"description":"评估召回"}]}', cljson.encode(res))
        local sg = ctx.requests[2]
        assert.equal("/in/v1/knowledge-networks/kn_medical/subgraph", sg.path)
        assert.same({ query_type = "relation_path" }, sg.query)
        assert.equal('{"relation_type_paths":[{"object_types":[{"id":"ot_drug","condition":{"operation":"or",' ..
            '"sub_conditions":[{"operation":"and","sub_conditions":[{"field":"drug_id","operation":"==",' ..
            '"value":1005,"value_from":"const"}]}]}},{"id":"skills"}],"relation_types":[{"relation_type_id":' ..
            '"rt_drug_skill","source_object_type_id":"ot_drug","target_object_type_id":"skills"}]}]}',
            cljson.encode(sg.json))
    end)

    it("says why when nothing is bound", function()
        local res = helper.call(tool, { kn_id = "kn_medical", object_type_id = "ot_company" }, { respond = respond() })
        assert.equal(0, #res.entries)
        assert.truthy(res.message:find("skills", 1, true))
        res = helper.call(tool, { kn_id = "kn_medical", object_type_id = "ot_drug", skill_query = "x" },
            { respond = respond('{"entries":[{"objects":{},"relation_paths":[]}]}'), lang = "en-US" })
        assert.equal("No skill matches skill_query; widen or drop it.", res.message)
    end)

    it("refuses bad input naming the field", function()
        local _, err = helper.call(tool, { kn_id = "kn_medical" }, { respond = respond() })
        assert.same({ "/object_type_id" }, helper.paths(err.errors))
        _, err = helper.call(tool, { kn_id = "kn_medical", object_type_id = "ot_drug", top_k = 21 },
            { respond = respond() })
        assert.same({ "/top_k" }, helper.paths(err.errors))
        _, err = helper.call(tool, { kn_id = "kn_medical", object_type_id = "ot_nope" }, { respond = respond() })
        assert.equal(404, err.status)
        assert.equal("ot_nope", err.details.object_type_id)
        _, err = helper.call(tool, { object_type_id = "ot_drug" }, { respond = respond() })
        assert.equal(400, err.status)
        assert.truthy(err.details:find("X-Kn-ID", 1, true))
    end)
end)

describe("the four entries", function()
    local contract = require "contract"
    local schema = require "schema"
    local TITLES = {
        search_instance = { 205, "实例语义检索", "Instance Semantic Search", "query" },
        explore_subgraph = { 225, "子图探索", "Explore Subgraph", "query" },
        query_metric = { 250, "指标查询", "Query Metrics", "query" },
        find_skills = { 510, "技能召回", "Find Skills", "skill" },
    }
    for name, want in pairs(TITLES) do
        it(name .. ": listed entry in both languages, the TOON view stated, a gateway tool", function()
            local tool = helper.load_tool(name)
            assert.same({ "rest", "gateway" }, tool.surfaces)
            assert.equal("read", tool.kind)
            assert.is_true(tool.toon_view)
            assert.is_true(schema.check_schema(tool.input_schema))
            local zh, en = contract.list_entry(tool, "zh-CN"), contract.list_entry(tool, "en-US")
            assert.equal(want[1], en._meta["openbkn.ai/order"])
            assert.equal(want[4], en._meta["openbkn.ai/group"])
            assert.equal(want[2], zh.title)
            assert.equal(want[3], en.title)
            assert.truthy(en.description:find(contract.TOON_VIEW_DESCRIPTION["en-US"], 1, true))
            assert.truthy(zh.description:find(contract.TOON_VIEW_DESCRIPTION["zh-CN"], 1, true))
            assert.is_true(en.annotations.readOnlyHint)
            local compact = contract.list_entry(tool, "en-US", true)
            assert.truthy(#compact.description < #en.description)
        end)
    end
end)
