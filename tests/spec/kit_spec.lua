-- The tool author's kit: tools/_lib/fields.lua (shared input fields),
-- tools/_lib/errors.lua (the one error mapper) and the default handle of a tool that
-- defines shape_request (lua/contract.lua), on recorded upstream answers.
local helper = require "helper"
local contract = require "contract"
local schema = require "schema"
local catalog = require "catalog"
local cljson = require "cljson"

local sb = helper.sandbox()
local fields = sb.require("_lib.fields")
local errors = sb.require("_lib.errors")
local util = sb.require("_lib.util")

local text = util.text

describe("_lib.fields", function()
    it("gives the shared ids with one description each, a new table per call", function()
        local a, b = fields.kn_id(), fields.kn_id()
        assert.are_not.equal(a, b)
        assert.same({ type = "string", minLength = 1, description = text("知识网络 ID", "Knowledge network id") }, a)
        assert.same(text("对象类 ID", "Object type id"), fields.ot_id().description)
        assert.same(text("行动类 ID", "Action type id"), fields.at_id().description)
        assert.same({ type = "string", minLength = 1, maxLength = 256, description = text("技能 ID", "Skill id") },
            fields.skill_id())
        local own = text("知识网络 ID（可选）", "Knowledge network id (optional)")
        assert.equal(own, fields.kn_id(own).description)
    end)

    it("limit(default, max [, min]): 0 means the default only where 0 is allowed", function()
        local l = fields.limit(20, 1000)
        assert.same({ type = "integer", minimum = 0, maximum = 1000, default = 20,
            description = text("每页条数，默认 20（0 表示默认值）", "Page size, default 20 (0 means the default)") }, l)
        local p = fields.limit(20, 100, 1)
        assert.equal(1, p.minimum)
        assert.equal("Page size, default 20", p.description["en-US"])
    end)

    it("input { required, properties, … } is a valid closed object schema", function()
        local s = fields.input {
            required = { "kn_id" },
            ["$defs"] = { x = { type = "string" } },
            properties = { kn_id = fields.kn_id(), limit = fields.limit(10, 100),
                offset = fields.offset(), page = fields.page(), after = fields.search_after(16),
                ids = fields.ids("ID", "Ids"), logic = fields.include_logic_params("rows"),
                who = fields.instance_identities(10, "实例", "Instances", 1), n = fields.integer(1, 9, text("数", "N")),
                s = fields.string(text("串", "S"), 8) },
        }
        assert.equal("object", s.type)
        assert.is_true(schema.check_schema(s))
        assert.is_false(s.additionalProperties)
        assert.same({ type = "string" }, s["$defs"].x)
        local v = assert(schema.validate(s, { kn_id = "kn_a" }))
        assert.equal(10, v.limit)
        assert.equal(1, v.page)
        assert.is_false(v.logic)
        local _, errs = schema.validate(s, { kn_id = "", limit = 101, extra = 1 })
        assert.same({ "/extra", "/kn_id", "/limit" }, (function()
            local p = helper.paths(errs)
            table.sort(p)
            return p
        end)())
    end)
end)

local function res(status, body)
    return helper.response(status, body)
end

describe("_lib.errors", function()
    local STEP = text("无法获取技能列表", "Unable to retrieve the skill list")

    it("from_response is the runtime's one upstream mapping (lua/errors.lua)", function()
        local runtime = require "errors"
        for _, r in ipairs({ res(403, helper.fixture("bkn_error_403.json")),
            res(500, helper.fixture("bkn_error_500.json")), res(503, "busy"), res(404, "") }) do
            for _, lang in ipairs({ "zh-CN", "en-US" }) do
                assert.same(runtime.upstream(r, nil, lang), errors.from_response(r, nil, lang))
            end
        end
        local t = errors.from_response(nil, { code = "upstream_timeout", message = "host x" }, "en-US")
        assert.equal(504, t.status)
        assert.is_true(t.retryable)
        assert.same({ reason = "upstream_timeout" }, t.details)
    end)

    it("keeps a platform 4xx and leads the description with the failed step", function()
        local e = errors.from_response(res(403, helper.fixture("bkn_error_403.json")), nil, "zh-CN", STEP)
        assert.equal(403, e.status)
        assert.equal("BknBackend.KnowledgeNetwork.Forbidden", e.code)
        assert.equal("无法获取技能列表（没有查看该知识网络的权限）", e.description)
        local en = errors.from_response(res(500, helper.fixture("bkn_error_500.json")), nil, "en-US", STEP)
        assert.equal(502, en.status)
        assert.equal(500, en.upstream_status)
        assert.equal("BknBackend.InternalError", en.upstream_code)
        assert.truthy(en.description:find("^Unable to retrieve the skill list %(.+%)$"))
    end)

    it("fetch: the decoded 2xx object or array, else the mapped failure and the answer", function()
        local ctx = helper.ctx({ responses = { { status = 200, fixture = "kn_list.json" } } })
        local body = assert(errors.fetch(ctx, { upstream = "bkn_backend", method = "GET", path = "/x" }))
        assert.equal("kn_medical", body.entries[1].id)
        for _, text_body in ipairs({ "<html>", "5", "" }) do
            ctx = helper.ctx({ responses = { { status = 200, body = text_body } } })
            local b, err, r = errors.fetch(ctx, { upstream = "bkn_backend", method = "GET", path = "/x" })
            assert.is_nil(b)
            assert.equal(502, err.status)
            assert.equal("agentRetrieval.BadGateway.CommonExternalServerError", err.code)
            assert.same({ reason = "invalid_json" }, err.details)
            assert.equal(200, r.status)
        end
        ctx = helper.ctx({ responses = { { status = 403, fixture = "bkn_error_403.json" } } })
        local b, err, r = errors.fetch(ctx, { upstream = "bkn_backend", method = "GET", path = "/x" }, STEP)
        assert.is_nil(b)
        assert.equal(403, r.status)
        assert.equal("无法获取技能列表（没有查看该知识网络的权限）", err.description)
    end)

    it("refuse: Public.<StatusName> with the catalogue's texts or the tool's own", function()
        local d, s = catalog.error_text(400, "en-US")
        assert.same({ status = 400, code = "Public.BadRequest", description = d, solution = s, details = "why" },
            errors.refuse(400, "en-US", "why"))
        local own = text({ "描述", "办法" }, { "What", "How" })
        assert.same({ status = 404, code = "Public.NotFound", description = "What", solution = "How",
            details = { a = 1 } }, errors.refuse(404, "en-US", { a = 1 }, own))
        assert.equal("描述", errors.refuse(404, "fr-FR", nil, own).description)
        assert.equal('skill_id must be an id, not ".."',
            errors.dot_ids("zh-CN", { skill_id = ".." }, "x", "skill_id").details)
        assert.is_nil(errors.dot_ids("zh-CN", { skill_id = "a.b" }, "skill_id"))
    end)
end)

-- A tool that defines only shape_request (and trim_response): the contract gives it
-- the default handle.
local function tool(over)
    local t = {
        name = "sample_tool", version = "1.0.0", kind = "read",
        title = text("样例", "Sample"), description = text("样例工具", "A sample tool"),
        group = "discovery", order = 900, surfaces = { "mcp", "rest" }, upstream = "bkn_backend",
        input_schema = fields.input { properties = { name = fields.string(text("名称", "Name"), 8) } },
        shape_request = function(args)
            return { upstream = "bkn_backend", method = "GET", path = "/in/v1/knowledge-networks",
                query = { name_pattern = args.name } }
        end,
    }
    for k, v in pairs(over or {}) do
        t[k] = v
    end
    return assert(contract.check(t, "sample_tool"))
end

describe("the default handle", function()
    it("is given to a tool with shape_request and no handle; one without either is refused", function()
        assert.is_function(tool().handle)
        local own = function() end
        assert.equal(own, tool({ handle = own }).handle)
        local _, errs = contract.check({ name = "sample_tool", version = "1.0.0", kind = "read",
            title = text("样例", "Sample"), description = text("样例工具", "A sample tool"), group = "discovery",
            order = 900, surfaces = { "mcp" }, input_schema = fields.input { properties = {} } }, "sample_tool")
        assert.truthy(table.concat(errs, "\n"):find("handle is required", 1, true))
        _, errs = contract.check({ name = "sample_tool", version = "1.0.0", kind = "read",
            title = text("样例", "Sample"), description = text("样例工具", "A sample tool"), group = "discovery",
            order = 900, surfaces = { "mcp" }, input_schema = fields.input { properties = {} },
            shape_request = function() end,
            upstream_step = "x", decode = "raw" }, "sample_tool")
        local joined = table.concat(errs, "\n")
        assert.truthy(joined:find("upstream_step must be a table", 1, true))
        assert.truthy(joined:find("decode must be a table", 1, true))
    end)

    it("sends shape_request's request and trims the decoded body with (body, args, ctx)", function()
        local seen
        local t = tool({ trim_response = function(body, args, ctx)
            seen = { args = args, lang = ctx.lang }
            return util.keep_only(body, { "total_count" })
        end })
        local out, err, ctx = helper.call(t, { name = "医药" },
            { lang = "en-US", responses = { { status = 200, fixture = "kn_list.json" } } })
        assert.is_nil(err)
        assert.same({ name_pattern = "医药" }, ctx.requests[1].query)
        assert.equal("/in/v1/knowledge-networks", ctx.requests[1].path)
        assert.equal("医药", seen.args.name)
        assert.equal("en-US", seen.lang)
        assert.same({ "total_count" }, (function()
            local keys = {}
            for k in pairs(out) do
                keys[#keys + 1] = k
            end
            return keys
        end)())
        -- without trim_response the decoded body is the result
        local whole = helper.call(tool(), {}, { responses = { { status = 200, fixture = "kn_list.json" } } })
        assert.equal(helper.encode(helper.decode(helper.fixture("kn_list.json"))), helper.encode(whole))
    end)

    it("maps a failure by the one mapping, led by upstream_step; a 2xx that is not JSON is 502", function()
        local t = tool({ upstream_step = text("无法列出网络", "Unable to list the networks") })
        local _, err = helper.call(t, {}, { responses = { { status = 403, fixture = "bkn_error_403.json" } } })
        assert.same(errors.from_response(res(403, helper.fixture("bkn_error_403.json")), nil, "zh-CN",
            text("无法列出网络", "Unable to list the networks")), err)
        assert.equal("无法列出网络（没有查看该知识网络的权限）", err.description)
        _, err = helper.call(t, {}, { lang = "en-US", responses = { { err = { code = "upstream_timeout" } } } })
        assert.equal(504, err.status)
        assert.equal("Unable to list the networks (" .. catalog.error_text(504, "en-US") .. ")", err.description)
        _, err = helper.call(tool(), {}, { responses = { { status = 200, body = "not json" } } })
        assert.same(errors.bad_gateway("zh-CN", { reason = "invalid_json" }), err)
    end)

    it("returns shape_request's error without calling upstream", function()
        local refusal = errors.refuse(400, "zh-CN", "no")
        local t = tool({ shape_request = function()
            return nil, refusal
        end })
        local out, err, ctx = helper.call(t, {}, { responses = {} })
        assert.is_nil(out)
        assert.equal(refusal, err)
        assert.same({}, ctx.requests)
    end)

    it("decodes with the tool's decode options (raw rows copied byte for byte)", function()
        local t = tool({ decode = { raw = "entries", drop = { "x" } } })
        local body = '{"entries":[{"a":1.5,"x":2}],"n":1}'
        local out = helper.call(t, {}, { responses = { { status = 200, body = body } } })
        assert.equal("object", cljson.is_raw(out.entries[1]))
        assert.equal('{"entries":[{"a":1.5}],"n":1}', helper.encode(out))
    end)
end)
