local helper = require "helper"
local contract = require "contract"
local schema = require "schema"

local tool = helper.load_tool("list_knowledge_networks")

describe("list_knowledge_networks", function()
    describe("schema", function()
        it("accepts valid arguments and fills the default limit", function()
            local v = assert(schema.validate(tool.input_schema, {}))
            assert.equal(20, v.limit)
            v = assert(schema.validate(tool.input_schema, { name_pattern = "医药", limit = 0, offset = 40,
                sort = "name", direction = "asc" }))
            assert.equal(0, v.limit)
        end)

        it("rejects invalid arguments with paths", function()
            local _, errs = schema.validate(tool.input_schema, { limit = -1, direction = "up", extra = 1,
                offset = "3" })
            table.sort(errs, function(a, b)
                return a.path < b.path
            end)
            assert.same({ "/direction", "/extra", "/limit", "/offset" }, helper.paths(errs))
            _, errs = schema.validate(tool.input_schema, { limit = 1001 })
            assert.same({ "/limit" }, helper.paths(errs))
        end)
    end)

    describe("request", function()
        it("sends only what is set, limit always", function()
            local _, _, ctx = helper.call(tool, {}, { responses = { { status = 200, fixture = "kn_list.json" } } })
            assert.equal(1, #ctx.requests)
            local req = ctx.requests[1]
            assert.equal("bkn_backend", req.upstream)
            assert.equal("GET", req.method)
            assert.equal("/in/v1/knowledge-networks", req.path)
            assert.same({ limit = "20" }, req.query)
            assert.is_nil(req.json)
            assert.is_nil(req.body)
        end)

        it("maps limit 0 to 20 and passes every filter", function()
            local req = tool.shape_request(assert(schema.validate(tool.input_schema, {
                name_pattern = "医药 网络", limit = 0, offset = 40, sort = "update_time", direction = "desc" })))
            assert.same({ name_pattern = "医药 网络", limit = "20", offset = "40", sort = "update_time",
                direction = "desc" }, req.query)
            req = tool.shape_request({ limit = 5, offset = 0, name_pattern = "" })
            assert.same({ limit = "5", offset = "0" }, req.query)
        end)
    end)

    describe("response", function()
        it("keeps id, name, description, module_type, business_domain and total_count", function()
            local res, err = helper.call(tool, {}, { responses = { { status = 200, fixture = "kn_list.json" } } })
            assert.is_nil(err)
            assert.equal(3, res.total_count)
            assert.equal(3, #res.entries)
            -- comment becomes description when bkn-backend gives none
            assert.same({ id = "kn_medical", name = "医药知识网络", description = "药品、疾病与适应症",
                module_type = "knowledge_network", business_domain = "bd_public" }, res.entries[1])
            -- an explicit description wins over an empty comment
            assert.same({ id = "kn_ops", name = "Ops network", description = "Hosts, services and incidents",
                module_type = "knowledge_network", business_domain = "bd_ops" }, res.entries[2])
            assert.is_nil(res.entries[3].description)
            -- decoded entries keep their order; the added description comes after
            local text = helper.encode(res)
            local first = '{"entries":[{"id":"kn_medical","name":"医药知识网络","business_domain":"bd_public",'
                .. '"module_type":"knowledge_network","description":"药品、疾病与适应症"},'
            assert.equal(first, text:sub(1, #first))
        end)

        it("keeps an empty list an array", function()
            local res = helper.call(tool, {}, { responses = { { status = 200, fixture = "kn_list_empty.json" } } })
            assert.equal('{"entries":[],"total_count":0}', helper.encode(res))
        end)

        it("counts the entries when total_count is missing", function()
            local res = tool.trim_response(helper.decode('{"entries":[{"id":"a","name":"A","x":1}]}'))
            assert.equal('{"entries":[{"id":"a","name":"A"}],"total_count":1}', helper.encode(res))
        end)
    end)

    describe("errors", function()
        it("maps a bkn-backend error: a 4xx keeps its status, code and texts; 500 -> 502", function()
            local res, err = helper.call(tool, {}, { responses = { { status = 403, fixture = "bkn_error_403.json" } } })
            assert.is_nil(res)
            assert.equal(403, err.status)
            assert.equal("BknBackend.KnowledgeNetwork.Forbidden", err.code)
            assert.equal("没有查看该知识网络的权限", err.description)
            -- the next step names the missing permission (in zh-CN, not the platform's
            -- English sentence); an empty error_link is no link
            assert.equal("请向管理员申请所缺的权限（「knowledge_network:kn_secret」的 view_detail 权限），获批后重试",
                err.solution)
            assert.is_nil(err.link)
            assert.equal("view_detail was not granted for knowledge_network:kn_secret", err.details.error_details)
            res, err = helper.call(tool, {}, { responses = { { status = 500, fixture = "bkn_error_500.json" } } })
            assert.is_nil(res)
            assert.equal(502, err.status)
            assert.equal("agentRetrieval.BadGateway.CommonExternalServerError", err.code)
            assert.equal("BknBackend.InternalError", err.upstream_code)
            assert.equal("database is unavailable", err.details.error_details)
        end)

        it("maps a body of another shape by its status, the body as details", function()
            local _, err = helper.call(tool, {}, { responses = { { status = 503, body = "<html>down</html>" } } })
            assert.equal(503, err.status)
            assert.equal("agentRetrieval.ServiceUnavailable.UpstreamUnavailable", err.code)
            assert.equal("<html>down</html>", err.details)
        end)

        it("turns a transport failure into 502 without the transport message", function()
            local _, err = helper.call(tool, {}, { lang = "en-US",
                responses = { { err = { code = "timeout", message = "timeout to http://10.0.0.7:13014" } } } })
            assert.equal(502, err.status)
            assert.equal("agentRetrieval.BadGateway.CommonExternalServerError", err.code)
            assert.equal("Upstream service unavailable", err.description)
            assert.same({ reason = "timeout" }, err.details)
            assert.falsy(helper.encode(err):find("10.0.0.7", 1, true))
        end)
    end)

    describe("tools/list entry", function()
        it("is localized for both languages", function()
            local zh = contract.list_entry(tool, "zh-CN")
            assert.equal("list_knowledge_networks", zh.name)
            assert.equal("知识网络列表", zh.title)
            assert.same({ ["openbkn.ai/group"] = "discovery", ["openbkn.ai/group_title"] = "网络与 Schema",
                ["openbkn.ai/order"] = 110 }, zh._meta)
            assert.equal("按名称模糊匹配（包含该片段即可）", zh.inputSchema.properties.name_pattern.description)
            assert.is_true(zh.annotations.readOnlyHint)
            local en = contract.list_entry(tool, "en-US")
            assert.equal("Knowledge Networks", en.title)
            assert.equal("Networks & Schema", en._meta["openbkn.ai/group_title"])
            assert.truthy(en.description:find("kn_id", 1, true))
            assert.equal("Page size, default 20 (0 means the default)", en.inputSchema.properties.limit.description)
            assert.equal("object", en.outputSchema.type)
            -- the core advertises bkn_context on every business tool
            assert.same({ "conversation_id", "interaction_id" }, en.inputSchema.properties.bkn_context.required)
            assert.same({ "bkn_context" }, en.inputSchema.required)
            assert.is_nil(tool.input_schema.properties.bkn_context)
            assert.same({ "json", "toon" }, en.inputSchema.properties.response_format.enum)
            assert.equal("toon", en.inputSchema.properties.response_format.default)
            assert.is_nil(tool.input_schema.properties.response_format)
        end)
    end)
end)
