local cljson = require "cljson"
local helper = require "helper"
local contract = require "contract"
local schema = require "schema"

local tool = helper.load_tool("query_instance_subgraph")

local PATH = [[{"object_types":[{"id":"ot_drug","condition":{"field":"drug_id","operation":"==",
  "value":9007199254740993,"value_from":"const"},"limit":5},{"id":"ot_manufacturer"}],
  "relation_types":[{"relation_type_id":"rt_produced_by","source_object_type_id":"ot_drug",
  "target_object_type_id":"ot_manufacturer"}],"limit":0}]]

local function args_of(json)
    return helper.decode(json)
end

describe("query_instance_subgraph", function()
    describe("schema", function()
        it("accepts a path and defaults include_logic_params", function()
            local v = assert(schema.validate(tool.input_schema,
                args_of('{"kn_id":"kn_medical","relation_type_paths":[' .. PATH .. ']}')))
            assert.is_false(v.include_logic_params)
        end)

        it("rejects malformed paths with their paths", function()
            local cases = {
                { '{"kn_id":"k","relation_type_paths":[]}', "/relation_type_paths" },
                { '{"kn_id":"k"}', "/relation_type_paths" },
                { '{"kn_id":"k","relation_type_paths":[{"object_types":[{"id":"a"}],"relation_types":'
                    .. '[{"relation_type_id":"r","source_object_type_id":"a","target_object_type_id":"b"}]}]}',
                    "/relation_type_paths/0/object_types" },
                { '{"kn_id":"k","relation_type_paths":[{"object_types":[{"id":"a"},{"id":"b"}],'
                    .. '"relation_types":[{"relation_type_id":"r","source_object_type_id":"a"}]}]}',
                    "/relation_type_paths/0/relation_types/0/target_object_type_id" },
                { '{"kn_id":"k","relation_type_paths":[{"object_types":[{"id":"a","limit":10001},{"id":"b"}],'
                    .. '"relation_types":[{"relation_type_id":"r","source_object_type_id":"a",'
                    .. '"target_object_type_id":"b"}]}]}', "/relation_type_paths/0/object_types/0/limit" },
            }
            for _, c in ipairs(cases) do
                local out, errs = schema.validate(tool.input_schema, args_of(c[1]))
                assert.is_nil(out, c[1])
                assert.same({ c[2] }, helper.paths(errs), c[1])
            end
        end)
    end)

    describe("request", function()
        it("is the exact POST-as-GET with the paths passed on untouched", function()
            local _, err, ctx = helper.call(tool, args_of('{"kn_id":"kn a","include_logic_params":true,'
                .. '"relation_type_paths":[' .. PATH .. ']}'),
                { responses = { { status = 200, fixture = "oq_subgraph.json" } } })
            assert.is_nil(err)
            local req = ctx.requests[1]
            assert.equal("ontology_query", req.upstream)
            assert.equal("POST", req.method)
            assert.equal("/in/v1/knowledge-networks/kn%20a/subgraph", req.path)
            assert.same({ query_type = "relation_path", include_logic_params = "true" }, req.query)
            assert.same({ ["x-http-method-override"] = "GET" }, req.headers)
            assert.equal('{"relation_type_paths":[{"object_types":[{"id":"ot_drug","condition":{"field":'
                .. '"drug_id","operation":"==","value":9007199254740993,"value_from":"const"},"limit":5},'
                .. '{"id":"ot_manufacturer"}],"relation_types":[{"relation_type_id":"rt_produced_by",'
                .. '"source_object_type_id":"ot_drug","target_object_type_id":"ot_manufacturer"}],"limit":0}]}',
                cljson.encode(req.json))
            _, _, ctx = helper.call(tool, args_of('{"kn_id":"k","relation_type_paths":[' .. PATH .. ']}'),
                { responses = { { status = 200, fixture = "oq_subgraph.json" } } })
            assert.same({ query_type = "relation_path" }, ctx.requests[1].query)
        end)
    end)

    describe("response", function()
        it("keeps the subgraphs as decoded, without overall_ms", function()
            local res = helper.call(tool, args_of('{"kn_id":"k","relation_type_paths":[' .. PATH .. ']}'),
                { responses = { { status = 200, fixture = "oq_subgraph.json" } } })
            local text = helper.encode(res)
            assert.falsy(text:find("overall_ms", 1, true))
            assert.truthy(text:find('"_instance_identity":{"drug_id":9007199254740993}', 1, true))
            assert.truthy(text:find('"tags":[]', 1, true))
            assert.truthy(text:find('"attrs":{}', 1, true))
            assert.truthy(text:find('^{"entries":%[{"objects":{"ot_drug%-9007199254740993"'))
            res = helper.call(tool, args_of('{"kn_id":"k","relation_type_paths":[' .. PATH .. ']}'),
                { responses = { { status = 200, fixture = "oq_subgraph_empty.json" } } })
            assert.equal('{"entries":[{"objects":{},"relation_paths":[],"current_path_number":0}]}',
                helper.encode(res))
            assert.equal('{"entries":[]}', helper.encode(tool.trim_response(helper.decode('{"x":1}'))))
        end)

        it("passes subgraphs through as raw JSON, byte for byte what decoded tables give", function()
            for _, fixture in ipairs({ "oq_subgraph.json", "oq_subgraph_empty.json" }) do
                local res = helper.call(tool, args_of('{"kn_id":"k","relation_type_paths":[' .. PATH .. ']}'),
                    { responses = { { status = 200, fixture = fixture } } })
                assert.is_true(#res.entries > 0)
                for _, e in ipairs(res.entries) do
                    assert.equal("object", cljson.is_raw(e))
                    assert.is_nil(e.overall_ms)
                end
                local want = tool.trim_response(helper.decode(helper.fixture(fixture)))
                assert.equal(helper.encode(want), helper.encode(res))
            end
            -- other members of the response are dropped (the decoder skips them)
            local text = '{"took":{"ms":[1,2]},"entries":' ..
                helper.fixture("oq_subgraph.json"):match('^{"entries":(.*)}%s*$') .. ',"overall_ms":3}'
            local res = helper.call(tool, args_of('{"kn_id":"k","relation_type_paths":[' .. PATH .. ']}'),
                { responses = { { status = 200, body = text } } })
            assert.equal(helper.encode(tool.trim_response(helper.decode(text))), helper.encode(res))
            assert.equal("object", cljson.is_raw(res.entries[1]))
            assert.are.same({ "entries" }, cljson.keys(res))
            -- raw entries given to trim_response lose overall_ms as well
            local body = helper.decode(helper.fixture("oq_subgraph.json"), { raw = "entries" })
            assert.truthy(tostring(body.entries[1]):find("overall_ms", 1, true))
            assert.falsy(helper.encode(tool.trim_response(body)):find("overall_ms", 1, true))
        end)
    end)

    describe("errors", function()
        local function err_of(answer)
            local res, err = helper.call(tool, args_of('{"kn_id":"k","relation_type_paths":[' .. PATH .. ']}'),
                { lang = "en-US", responses = { answer } })
            assert.is_nil(res)
            return err
        end

        it("maps 4xx, 5xx and transport failures", function()
            local err = err_of({ status = 400, fixture = "oq_error_400.json" })
            assert.equal(400, err.status)
            assert.equal("OntologyQuery.ObjectType.InvalidParameter", err.code) -- the platform's own code
            assert.equal("请检查参数", err.solution)
            assert.equal("table", type(err.details))
            err = err_of({ status = 500, fixture = "oq_error_500.json" })
            assert.equal(502, err.status)
            assert.equal("OntologyQuery.InternalError", err.details.error_code)
            err = err_of({ err = { code = "upstream_timeout", message = "x" } })
            assert.equal(504, err.status)
            assert.same({ reason = "upstream_timeout" }, err.details)
        end)
    end)

    it("has a localized tools/list entry", function()
        local en = contract.list_entry(tool, "en-US")
        assert.equal("Query Subgraph", en.title)
        assert.equal(220, en._meta["openbkn.ai/order"])
        assert.equal("子图查询", contract.list_entry(tool, "zh-CN").title)
        assert.is_true(schema.check_schema(tool.input_schema))
    end)
end)
