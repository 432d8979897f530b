local helper = require "helper"

-- _lib.retrieval: scope, permission filter, channel fields, reciprocal rank fusion,
-- the one total order and the reranker's refinement, over answers recorded from the
-- platform simulator (tests/spec/fixtures/si_*.json).
describe("_lib.retrieval", function()
    local retrieval = helper.sandbox().tool_require("_lib.retrieval")
    local cljson = require "cljson"

    local function fixture(name)
        return helper.decode(helper.fixture(name))
    end

    local kn = fixture("si_kn_medical.json")
    local function ot(id)
        for _, t in ipairs(kn.object_types) do
            if t.id == id then
                return t
            end
        end
        error("no object type " .. id)
    end
    local function ids(list)
        local out = {}
        for i, t in ipairs(list) do
            out[i] = t.id
        end
        return out
    end
    local function displays(nodes)
        local out = {}
        for i, n in ipairs(nodes) do
            out[i] = n.row._display
        end
        return out
    end

    describe("scope", function()
        it("keeps every object type without lists, in the network's order", function()
            local kept, unmatched = retrieval.scope(kn.object_types, nil, nil)
            assert.same({ "ot_drug", "ot_manufacturer", "ot_company", "ot_disease", "ot_adverse_event", "ot_patient",
                "skills" }, ids(kept))
            assert.same({}, unmatched)
        end)

        it("lets exclusion win over inclusion, and names allowed ids the network does not have", function()
            local kept, unmatched = retrieval.scope(kn.object_types, { "ot_drug", "skills", "ot_nope" },
                { "ot_drug" })
            assert.same({ "skills" }, ids(kept))
            assert.same({ "ot_nope" }, unmatched) -- the excluded ot_drug is not "unmatched"
        end)

        it("narrows to concept groups first; an unknown group is reported", function()
            local in_groups, unknown = retrieval.groups(kn, { "cg_drug_safety", "cg_nope" })
            assert.same({ "cg_nope" }, unknown)
            local kept = retrieval.scope(kn.object_types, nil, { "ot_adverse_event" }, in_groups)
            assert.same({ "ot_drug" }, ids(kept))
            local none, no_unknown = retrieval.groups(kn, {})
            assert.is_nil(none)
            assert.same({}, no_unknown)
        end)
    end)

    describe("permission filter", function()
        local three = { ot("ot_company"), ot("ot_patient"), ot("ot_drug") }

        it("asks bkn-safe for query_data on <kn>/<ot> resources", function()
            local body = retrieval.filter_request("kn_medical", three, "u_other")
            assert.equal('{"accessor_id":"u_other","resources":[{"type":"object_type","id":"kn_medical/ot_company"},' ..
                '{"type":"object_type","id":"kn_medical/ot_patient"},' ..
                '{"type":"object_type","id":"kn_medical/ot_drug"}],' ..
                '"visibility_operations":["query_data"],"candidate_operations":["query_data"]}', cljson.encode(body))
        end)

        it("keeps only the object types the answer grants, in the asked order", function()
            local kept = retrieval.permitted("kn_medical", three, fixture("si_filter_u_other.json"))
            assert.same({ "ot_company", "ot_drug" }, ids(kept)) -- ot_patient: u_other may not query it
        end)

        it("refuses an answer that breaks the contract (fail closed)", function()
            local cases = {
                { '{}', "no resources array" },
                { '{"resources":[{"resource_type":"knowledge_network","resource_id":"kn_medical/ot_drug",' ..
                    '"operations":["query_data"]}]}', "unexpected resource type" },
                { '{"resources":[{"resource_type":"object_type","resource_id":"kn_medical/ot_secret",' ..
                    '"operations":["query_data"]}]}', "unexpected resource id" },
                { '{"resources":[{"resource_type":"object_type","resource_id":"kn_medical/ot_drug",' ..
                    '"operations":["query_data"]},{"resource_type":"object_type","resource_id":"kn_medical/ot_drug",' ..
                    '"operations":["query_data"]}]}', "listed twice" },
                { '{"resources":[{"resource_type":"object_type","resource_id":"kn_medical/ot_drug",' ..
                    '"operations":["delete"]}]}', "unexpected operation" },
            }
            for _, c in ipairs(cases) do
                local kept, why = retrieval.permitted("kn_medical", three, helper.decode(c[1]))
                assert.is_nil(kept)
                assert.truthy(why:find(c[2], 1, true), why)
            end
        end)
    end)

    describe("concept ranking", function()
        it("orders by concept score, ties in network order, cut to top-K", function()
            local list = kn.object_types
            assert.same({ "ot_disease", "ot_drug", "ot_company" },
                ids(retrieval.rank_types(list, { ot_disease = 0.9, ot_company = 0.4, ot_drug = 0.4 }, 3)))
            -- no scores (the concept search failed): the network's order
            assert.same({ "ot_drug", "ot_manufacturer" }, ids(retrieval.rank_types(list, nil, 2)))
        end)
    end)

    describe("channels", function()
        it("searches text fields by their declared operations", function()
            assert.same({ knn = { "name" }, match = { "name", "status", "manufacturer_id", "tags" } },
                retrieval.fields(ot("ot_drug")))
            assert.same({ knn = { "name", "description" }, match = { "skill_id", "name", "description",
                "drug_status" } }, retrieval.fields(ot("skills")))
        end)

        it("sends the whole query to each field, knn with k neighbours; no field, no channel", function()
            assert.equal('{"operation":"or","sub_conditions":[{"field":"name","operation":"knn","value":"布洛芬",' ..
                '"value_from":"const","limit_key":"k","limit_value":5}]}',
                cljson.encode(retrieval.condition("knn", "布洛芬", { "name" }, 5)))
            assert.equal('{"operation":"or","sub_conditions":[{"field":"name","operation":"match","value":"q",' ..
                '"value_from":"const"},{"field":"status","operation":"match","value":"q","value_from":"const"}]}',
                cljson.encode(retrieval.condition("match", "q", { "name", "status" }, 5)))
            assert.is_nil(retrieval.condition("knn", "q", {}, 5))
        end)
    end)

    describe("fusion", function()
        local drug = ot("ot_drug")
        local function channels(...)
            local out = {}
            for i, spec in ipairs({ ... }) do
                out[i] = { name = spec[1], rows = fixture(spec[2]).datas }
            end
            return out
        end

        it("merges a row found by both channels, keeping each raw score under its own name", function()
            -- the knn answer with its two equally similar rows the other way round, so that
            -- one row is first in both channels
            local knn = fixture("si_drug_knn.json").datas
            knn[1], knn[2] = knn[2], knn[1]
            local nodes = retrieval.sort(retrieval.fuse(drug, 1, { { name = "knn", rows = knn },
                { name = "match", rows = fixture("si_drug_match.json").datas } }))
            local first = nodes[1]
            assert.equal("阿司匹林肠溶片", first.row._display)
            -- rank 1 in knn and rank 1 in match: 2.0 exactly with equal weights
            assert.equal(2.0, retrieval.round(first.score))
            assert.equal(8.3775, first.bm25)
            assert.equal(0.5, first.knn)
            -- the big id survives (boxed, exact text)
            assert.equal('{"drug_id":9007199254740993}', cljson.encode(first.row._instance_identity))
        end)

        it("breaks a tie of fused scores by the raw recall score", function()
            -- as recorded: knn ranks 布洛芬 first (equal similarity, then the key order), match
            -- ranks 阿司匹林 first; the ranks cross, the fused scores tie (1.9839), and the
            -- higher raw score (BM25 8.3775 vs 7.2071) leads
            local nodes = retrieval.sort(retrieval.fuse(drug, 1,
                channels({ "knn", "si_drug_knn.json" }, { "match", "si_drug_match.json" })))
            assert.equal("布洛芬缓释胶囊", fixture("si_drug_knn.json").datas[1]._display)
            assert.equal(nodes[1].score, nodes[2].score)
            assert.equal(1.9839, retrieval.round(nodes[1].score))
            assert.same({ "阿司匹林肠溶片", "布洛芬缓释胶囊" }, { nodes[1].row._display, nodes[2].row._display })
        end)

        it("fuses what is there when a channel is missing: no knn_score, first place 1.0", function()
            local nodes = retrieval.sort(retrieval.fuse(drug, 1, channels({ "match", "si_drug_match.json" })))
            assert.equal(1.0, retrieval.round(nodes[1].score))
            assert.equal(0.9839, retrieval.round(nodes[2].score))
            for _, n in ipairs(nodes) do
                assert.is_nil(n.knn)
                assert.is_number(n.bm25)
            end
            assert.same({}, retrieval.fuse(drug, 1, {}))
        end)

        it("weights the channels (knn weight clamped to [0, 1])", function()
            local rows = fixture("si_drug_knn.json").datas
            local heavy = retrieval.fuse(drug, 1, { { name = "knn", rows = rows } }, 60, 2)
            assert.equal(2.0, retrieval.round(heavy[1].score)) -- weight 1: 1/(61) * 122
            local none = retrieval.fuse(drug, 1, { { name = "knn", rows = rows } }, 60, -1)
            assert.equal(0, none[1].score)
        end)

        it("orders ties across object types by the types' concept rank", function()
            local company = retrieval.fuse(ot("ot_company"), 1, channels({ "knn", "si_company_knn.json" },
                { "match", "si_company_match.json" }))
            local patient = retrieval.fuse(ot("ot_patient"), 2, channels({ "knn", "si_patient_knn.json" },
                { "match", "si_patient_match.json" }))
            local all = retrieval.merge({ patient, company })
            assert.equal(all[1].score, all[2].score) -- both first in both channels: 2.0
            assert.same({ "华东医药集团", "张伟" }, { all[1].row._display, all[2].row._display })
            -- the other concept order gives the other order
            for _, n in ipairs(company) do
                n.order = 3
            end
            assert.equal("张伟", retrieval.merge({ patient, company })[1].row._display)
        end)

        it("takes the first n per type", function()
            local nodes = retrieval.sort(retrieval.fuse(drug, 1, channels({ "match", "si_drug_match.json" })))
            assert.equal(2, #retrieval.take(nodes, 2))
            assert.equal(#nodes, #retrieval.take(nodes, 100))
        end)
    end)

    describe("reranker", function()
        local drug = ot("ot_drug")
        local function two()
            local rows = fixture("si_drug_match.json").datas
            return retrieval.sort(retrieval.fuse(drug, 1, { { name = "match", rows = { rows[1], rows[2], rows[3] } } }))
        end

        it("reorders the judged head by relevance and names the score", function()
            local nodes = two()
            local scores = retrieval.reranker_scores(fixture("si_rerank.json"), 2)
            assert.same({ 0.25, 0.5 }, scores)
            local out = retrieval.rerank(nodes, scores, 2)
            assert.same({ "布洛芬缓释胶囊", "阿司匹林肠溶片", "缬沙坦胶囊" }, displays(out))
            assert.equal(0.5, out[1].reranker)
            assert.is_nil(out[3].reranker) -- outside the judged window: fused order, no score
        end)

        it("keeps the fused order when the reranker is down or answers nonsense", function()
            local nodes = two()
            local before = displays(nodes)
            assert.equal(nodes, retrieval.rerank(nodes, nil, 2))
            assert.same(before, displays(nodes))
            for _, n in ipairs(nodes) do
                assert.is_nil(n.reranker)
            end
            for _, bad in ipairs({ '{}', '{"results":[]}', '{"results":[{"index":5,"relevance_score":1}]}',
                '{"results":[{"index":0,"relevance_score":"high"}]}',
                '{"results":[{"index":0.5,"relevance_score":1}]}' }) do
                assert.is_nil(retrieval.reranker_scores(helper.decode(bad), 2), bad)
            end
        end)

        it("ties on reranker score keep the fused order", function()
            local nodes = two()
            local out = retrieval.rerank(nodes, { 0.3, 0.3, 0.3 }, 3)
            assert.same({ "阿司匹林肠溶片", "布洛芬缓释胶囊", "缬沙坦胶囊" }, displays(out))
        end)

        it("builds the document from the display name, the searched fields, then the rest", function()
            local node = two()[2]
            assert.equal("布洛芬缓释胶囊\nname: 布洛芬缓释胶囊\nstatus: on_market\napproval_date: 2010-01-01\n" ..
                "manufacturer_id: mfr_000001", retrieval.document(node, { "name", "status" }))
            local long = { row = { _display = "x", text = string.rep("药", 300) } }
            local doc = retrieval.document(long, {})
            assert.equal("x\ntext: " .. string.rep("药", retrieval.FIELD_CHARS), doc)
        end)
    end)

    it("rounds scores to 4 decimals", function()
        assert.equal(0.9839, retrieval.round(0.98387096774))
        assert.equal(2.0, retrieval.round(1.99999999))
    end)
end)
