local cljson = require "cljson"
local helper = require "helper"
local contract = require "contract"
local schema = require "schema"

local tool = helper.load_tool("query_object_instance")

local function ok_call(args, fixture, opts)
    opts = opts or {}
    opts.responses = { { status = 200, fixture = fixture } }
    local res, err, ctx = helper.call(tool, args, opts)
    assert.is_nil(err)
    return res, ctx
end

-- args decoded from JSON, as the host hands them over
local function args_of(json)
    return helper.decode(json)
end

describe("query_object_instance", function()
    describe("schema", function()
        it("accepts a nested condition and fills defaults", function()
            local v = assert(schema.validate(tool.input_schema, args_of([[{"kn_id":"kn_medical","ot_id":"drug",
                "condition":{"operation":"and","sub_conditions":[{"field":"name","operation":"match","value":"阿司"},
                {"operation":"or","sub_conditions":[{"field":"price","operation":"range","value":[1,20]},
                {"field":"tags","operation":"exist"}]}]},
                "sort":[{"field":"price","direction":"desc"}],"search_after":[9007199254740993,"x"],
                "properties":["name"]}]])))
            assert.equal(10, v.limit)
            assert.is_false(v.include_logic_params)
        end)

        it("requires kn_id and ot_id and rejects bad values with paths", function()
            local _, errs = schema.validate(tool.input_schema, {})
            table.sort(errs, function(a, b)
                return a.path < b.path
            end)
            assert.same({ "/kn_id", "/ot_id" }, helper.paths(errs))
            local base = '"kn_id":"k","ot_id":"o",'
            local cases = {
                { '{' .. base .. '"limit":10001}', "/limit" },
                { '{' .. base .. '"limit":-1}', "/limit" },
                { '{' .. base .. '"sort":[{"field":"a","direction":"up"}]}', "/sort/0/direction" },
                { '{' .. base .. '"sort":[null]}', "/sort/0" },
                { '{' .. base .. '"condition":{"operation":"and","sub_conditions":[{"operation":"~="}]}}',
                    "/condition/sub_conditions/0/operation" },
                { '{' .. base .. '"condition":{"field":"a","operation":"knn","limit_key":"n"}}',
                    "/condition/limit_key" },
                { '{' .. base .. '"filters":[{"field":"a","op":"knn","value":1}]}', "/filters/0/op" },
                { '{' .. base .. '"filters":[{"field":"a","op":"=="}]}', "/filters/0/value" },
                { '{' .. base .. '"bkn":1}', "/bkn" },
                { '{"kn_id":"","ot_id":"o"}', "/kn_id" },
            }
            for _, c in ipairs(cases) do
                local out, e = schema.validate(tool.input_schema, args_of(c[1]))
                assert.is_nil(out, c[1])
                assert.same({ c[2] }, helper.paths(e), c[1])
            end
        end)
    end)

    describe("request", function()
        it("is the exact ontology-query POST-as-GET", function()
            local _, ctx = ok_call(args_of([[{"kn_id":"kn/../x","ot_id":"o t","include_logic_params":true,
                "condition":{"field":"id","operation":"==","value":9007199254740993,"value_from":"const"},
                "limit":0,"properties":["name","tags"],"sort":[{"field":"price","direction":"asc"}],
                "search_after":[12345678901234567890123,"k"],"offset":5}]]), "oq_objects.json")
            local req = ctx.requests[1]
            assert.equal("ontology_query", req.upstream)
            assert.equal("POST", req.method)
            assert.equal("/in/v1/knowledge-networks/kn%2F..%2Fx/object-types/o%20t", req.path)
            assert.same({ include_type_info = "false", include_logic_params = "true" }, req.query)
            assert.same({ ["x-http-method-override"] = "GET" }, req.headers)
            assert.is_nil(req.body)
            -- bytes are the point here: big numbers must reach the upstream exactly
            assert.equal('{"condition":{"field":"id","operation":"==","value":9007199254740993,'
                .. '"value_from":"const"},"limit":10,"need_total":true,"offset":5,'
                .. '"properties":["name","tags"],"search_after":[12345678901234567890123,"k"],'
                .. '"sort":[{"direction":"asc","field":"price"}]}', cljson.encode_canonical(req.json))
        end)

        it("sends the minimal body by default", function()
            local _, ctx = ok_call({ kn_id = "kn_medical", ot_id = "drug" }, "oq_objects.json")
            local req = ctx.requests[1]
            assert.same({ include_type_info = "false", include_logic_params = "false" }, req.query)
            assert.equal('{"limit":10,"need_total":true}', cljson.encode_canonical(req.json))
        end)

        it("turns filters into an AND condition, and condition wins over filters", function()
            local _, ctx = ok_call(args_of([=[{"kn_id":"k","ot_id":"o","filters":[
                {"field":"price","op":">","value":10},{"field":"tags","op":"in","value":["a",[]]}]}]=]),
                "oq_objects.json")
            assert.equal('{"condition":{"operation":"and","sub_conditions":['
                .. '{"field":"price","operation":">","value":10,"value_from":"const"},'
                .. '{"field":"tags","operation":"in","value":["a",[]],"value_from":"const"}]},'
                .. '"limit":10,"need_total":true}', cljson.encode_canonical(ctx.requests[1].json))
            _, ctx = ok_call(args_of([[{"kn_id":"k","ot_id":"o","filters":[{"field":"a","op":"==","value":1}],
                "condition":{"field":"b","operation":"exist"}}]]), "oq_objects.json")
            assert.equal('{"condition":{"field":"b","operation":"exist"},"limit":10,"need_total":true}',
                cljson.encode_canonical(ctx.requests[1].json))
        end)

        it("leaves out an empty search_after and an empty sort", function()
            local _, ctx = ok_call(args_of('{"kn_id":"k","ot_id":"o","search_after":[],"sort":[]}'),
                "oq_objects.json")
            assert.equal('{"limit":10,"need_total":true}', cljson.encode_canonical(ctx.requests[1].json))
        end)
    end)

    describe("response", function()
        it("keeps rows untouched except _score, big numbers byte-exact", function()
            local res = ok_call({ kn_id = "kn_medical", ot_id = "drug" }, "oq_objects.json")
            assert.equal('{"datas":[{"drug_id":9007199254740993,"name":"阿司匹林","price":12.5,"ratio":0.1,'
                .. '"serial":12345678901234567890123,"tags":[],"attrs":{},"nested":{"list":[[],{}],"n":null},'
                .. '"_instance_id":"drug-9007199254740993","_instance_identity":{"drug_id":9007199254740993},'
                .. '"_display":"阿司匹林"},{"drug_id":2,"name":"布洛芬","price":8,"ratio":1.0,'
                .. '"serial":-98765432109876543210,"tags":["解热","镇痛"],"attrs":{"form":"tablet"},'
                .. '"nested":{"list":[],"n":1},"_instance_id":"drug-2","_instance_identity":{"drug_id":2},'
                .. '"_display":"布洛芬"}],"total_count":2,"search_after":[9007199254740993,'
                .. '"drug-9007199254740993"]}', helper.encode(res))
        end)

        it("passes rows through as raw JSON, byte for byte what decoded tables give", function()
            local scored = args_of('{"kn_id":"k","ot_id":"o","filters":[{"field":"name","op":"match","value":"a"}]}')
            for _, fixture in ipairs({ "oq_objects.json", "oq_objects_cursor.json", "oq_objects_empty.json" }) do
                for _, args in ipairs({ { kn_id = "k", ot_id = "o" }, scored }) do
                    local res = ok_call(args, fixture)
                    for _, row in ipairs(res.datas) do
                        assert.are.equal("object", cljson.is_raw(row))
                    end
                    -- the same response decoded into tables and trimmed
                    local want = tool.trim_response(helper.decode(helper.fixture(fixture)), args)
                    assert.are.equal(helper.encode(want), helper.encode(res))
                end
            end
            local res = ok_call({ kn_id = "k", ot_id = "o" }, "oq_objects.json")
            assert.are.equal(2, #res.datas)
            assert.is_nil(res.datas[1]._score)
        end)

        it("keeps _score when the condition or filters rank by relevance", function()
            local res = ok_call(args_of([[{"kn_id":"k","ot_id":"o","condition":{"operation":"and",
                "sub_conditions":[{"field":"*","operation":"knn","value":"x","limit_key":"k","limit_value":5}]}}]]),
                "oq_objects.json")
            assert.equal(1.75, res.datas[1]._score)
            res = ok_call(args_of('{"kn_id":"k","ot_id":"o","filters":[{"field":"name","op":"match","value":"a"}]}'),
                "oq_objects.json")
            assert.equal(0.5, res.datas[2]._score)
            res = ok_call(args_of('{"kn_id":"k","ot_id":"o",'
                .. '"condition":{"field":"name","operation":"like","value":"a"}}'),
                "oq_objects.json")
            assert.is_nil(res.datas[1]._score)
        end)

        it("gives total_count 0 when omitted, and none on cursor pages", function()
            local res = ok_call({ kn_id = "k", ot_id = "o" }, "oq_objects_empty.json")
            assert.equal('{"datas":[],"total_count":0}', helper.encode(res))
            res = ok_call(args_of('{"kn_id":"k","ot_id":"o","search_after":[2,"drug-2"]}'), "oq_objects_cursor.json")
            assert.is_nil(res.total_count)
            assert.equal('{"datas":[{"drug_id":3,"name":"对乙酰氨基酚","_instance_id":"drug-3",'
                .. '"_instance_identity":{"drug_id":3},"_display":"对乙酰氨基酚"}],"search_after":[3,"drug-3"]}',
                helper.encode(res))
        end)

        it("keeps the permission signals for later guidance", function()
            local res = tool.trim_response(helper.decode('{"datas":[],"total_count":0,'
                .. '"effective_permissions":{"phone":"masked"},"row_filter_applied":true,"overall_ms":1}'), {})
            assert.equal('{"datas":[],"total_count":0,"effective_permissions":{"phone":"masked"},'
                .. '"row_filter_applied":true}', helper.encode(res))
        end)

        it("makes the effective condition from the args (shape_request and trim_response)", function()
            local args = args_of('{"kn_id":"k","ot_id":"o","filters":[{"field":"name","op":"match","value":"a"}]}')
            -- made from the filters: an AND of the leaves
            assert.equal("and", tool.shape_request(args).json.condition.operation)
            local rows = '{"datas":[{"a":1,"_score":2}]}'
            -- the filters rank (match): _score stays
            assert.equal('{"datas":[{"a":1,"_score":2}],"total_count":0}',
                helper.encode(tool.trim_response(helper.decode(rows), args)))
            -- a condition that does not rank: _score goes
            local plain = args_of('{"kn_id":"k","ot_id":"o","condition":{"operation":"==","field":"a","value":1}}')
            assert.equal('{"datas":[{"a":1}],"total_count":0}',
                helper.encode(tool.trim_response(helper.decode(rows), plain)))
            -- a ranking condition keeps it
            local ranked = args_of('{"kn_id":"k","ot_id":"o","condition":{"operation":"knn","field":"v","value":"x"}}')
            assert.equal('{"datas":[{"a":1,"_score":2}],"total_count":0}',
                helper.encode(tool.trim_response(helper.decode(rows), ranked)))
        end)

        it("trims a body decoded without its options: members not kept and _score", function()
            local args = args_of('{"kn_id":"k","ot_id":"o"}')
            local text = '{"datas":[{"a":1,"_score":2}],"overall_ms":1,"total_count":null,"search_after":null}'
            assert.equal('{"datas":[{"a":1}],"total_count":0}',
                helper.encode(tool.trim_response(helper.decode(text), args)))
        end)

        it("addresses the object type by its escaped ids, the same path for ids seen before", function()
            local fresh = helper.load_tool("query_object_instance")
            local function path(kn, ot)
                return fresh.shape_request({ kn_id = kn, ot_id = ot }).path
            end
            assert.equal("/in/v1/knowledge-networks/kn/object-types/ot", path("kn", "ot"))
            assert.equal("/in/v1/knowledge-networks/kn/object-types/ot", path("kn", "ot"))
            assert.equal("/in/v1/knowledge-networks/kn/object-types/o%2Ft", path("kn", "o/t"))
            assert.equal("/in/v1/knowledge-networks/k%20n/object-types/ot", path("k n", "ot"))
            assert.equal("/in/v1/knowledge-networks/nil/object-types/ot", path(nil, "ot"))
            assert.equal("/in/v1/knowledge-networks/kn/object-types/nil", path("kn", nil))
            -- past the bound the memory starts over; every answer stays right
            for i = 1, 600 do
                assert.equal("/in/v1/knowledge-networks/kn" .. i % 7 .. "/object-types/ot%20" .. i,
                    path("kn" .. i % 7, "ot " .. i))
            end
            assert.equal("/in/v1/knowledge-networks/kn/object-types/ot", path("kn", "ot"))
            assert.equal("/in/v1/knowledge-networks/kn/object-types/o%2Ft", path("kn", "o/t"))
        end)

        it("gives an empty datas array when the upstream sends none", function()
            local res = tool.trim_response(helper.decode('{"datas":null}'), {})
            assert.equal('{"datas":[],"total_count":0}', helper.encode(res))
        end)
    end)

    describe("errors", function()
        local function err_call(status, fixture, lang, body)
            -- a 403 also runs the visibility probe of permission_guidance (refused here)
            local res, err = helper.call(tool, { kn_id = "kn_medical", ot_id = "drug" },
                { lang = lang, responses = { { status = status, fixture = fixture, body = body },
                    { status = 403, fixture = "oq_error_403.json" } } })
            assert.is_nil(res)
            return err
        end

        it("keeps a 4xx status and the platform's code and description, the body as details", function()
            local err = err_call(404, "oq_error_404.json")
            assert.equal(404, err.status)
            assert.equal("OntologyQuery.ObjectType.NotFound", err.code)
            assert.equal("对象类不存在", err.description)
            assert.is_nil(err.solution) -- the envelope names the ids to check
            assert.is_nil(err.link) -- no link: the member is absent, never "无" / "None"
            assert.equal("OntologyQuery.ObjectType.NotFound", err.details.error_code)
            err = err_call(403, "oq_error_403.json", "en-US")
            assert.equal(403, err.status)
            assert.equal("Public.Forbidden", err.code)
            assert.equal("权限错误", err.description)
            assert.truthy(err.solution:find("query_data was not granted for object_type:kn_medical/drug", 1, true))
            assert.is_nil(err.link)
            assert.truthy(err.details.error_details:find("object_type:kn_medical/drug", 1, true))
            err = err_call(400, "oq_error_400.json", "en-US")
            assert.equal("OntologyQuery.ObjectType.InvalidParameter", err.code)
            assert.equal("参数错误", err.description)
            assert.equal("请检查参数", err.solution)
            err = err_call(406, nil, nil, "Content-Type must be application/json")
            assert.equal(406, err.status)
            assert.equal("Public.NotAcceptable", err.code)
            assert.equal("Content-Type must be application/json", err.details)
        end)

        it("turns 500 into 502 CommonExternalServerError, 503 into a retryable 503", function()
            local err = err_call(500, "oq_error_500.json")
            assert.equal(502, err.status)
            assert.equal("agentRetrieval.BadGateway.CommonExternalServerError", err.code)
            assert.equal("依赖服务不可用（依赖服务：内部错误）", err.description)
            assert.equal("OntologyQuery.InternalError", err.upstream_code)
            assert.equal("OntologyQuery.InternalError", err.details.error_code)
            err = err_call(503, nil, "en-US", "upstream connect error")
            assert.equal(503, err.status)
            assert.equal("agentRetrieval.ServiceUnavailable.UpstreamUnavailable", err.code)
            assert.equal("upstream connect error", err.details)
        end)

        it("turns a transport failure into 502", function()
            local _, err = helper.call(tool, { kn_id = "k", ot_id = "o" },
                { responses = { { err = { code = "connect", message = "connect to 10.1.2.3 refused" } } } })
            assert.equal(502, err.status)
            assert.same({ reason = "connect" }, err.details)
        end)

        it("turns an unreadable 2xx body into 502", function()
            local _, err = helper.call(tool, { kn_id = "k", ot_id = "o" },
                { responses = { { status = 200, body = "not json" } } })
            assert.equal(502, err.status)
        end)
    end)

    describe("tools/list entry", function()
        it("is localized for both languages and carries the recursive condition", function()
            local zh = contract.list_entry(tool, "zh-CN")
            assert.equal("query_object_instance", zh.name)
            assert.equal("实例查询", zh.title)
            assert.same({ ["openbkn.ai/group"] = "query", ["openbkn.ai/group_title"] = "实例查询",
                ["openbkn.ai/order"] = 210 }, zh._meta)
            assert.equal("#/$defs/condition", zh.inputSchema.properties.condition["$ref"])
            assert.equal("比较值；in/not_in/range/out_range 用数组",
                zh.inputSchema["$defs"].condition.properties.value.description)
            local en = contract.list_entry(tool, "en-US")
            assert.equal("Query Instances", en.title)
            assert.equal("Instance Queries", en._meta["openbkn.ai/group_title"])
            assert.equal("Knowledge network id", en.inputSchema.properties.kn_id.description)
            assert.truthy(en.description:find("search_after", 1, true))
            local text = cljson.encode_canonical(en.inputSchema)
            assert.truthy(text:find('"required":["kn_id","ot_id","bkn_context"]', 1, true))
            assert.truthy(text:find('"$ref":"#/$defs/condition"', 1, true))
            assert.is_true(schema.check_schema(tool.input_schema))
        end)

        it("states the TOON view's _instance_id omission from its declared rule", function()
            local en = contract.list_entry(tool, "en-US")
            assert.truthy(en.description:find("The TOON table leaves out _instance_id when it is " ..
                "<kn_id>-<ot_id>-<the single value of _instance_identity>.", 1, true))
            local zh = contract.list_entry(tool, "zh-CN")
            assert.truthy(zh.description:find("_instance_id 等于 <kn_id>-<ot_id>-<_instance_identity 的唯一值>" ..
                " 时不写入 TOON 表格。", 1, true))
        end)
    end)
end)
