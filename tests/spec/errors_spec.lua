-- lua/errors.lua: the next-step rules of each status (the C catalogue's), the one
-- upstream mapping, and the envelope a tool error becomes (docs/errors.md).
local errors = require "errors"
local cljson = require "cljson"

local function res(status, body)
    return { status = status, body = body }
end

local PLATFORM_404 = '{"error_code":"OntologyQuery.ObjectType.NotFound","description":"对象类不存在",' ..
    '"solution":"请联系管理员","error_link":"无","error_details":"object type ot_x not found"}'

describe("errors.next_of", function()
    it("reads the status rules of the C catalogue; unknown statuses as 400 / 500", function()
        assert.same({ false, nil, "fix_arguments" }, { errors.next_of(400) })
        assert.same({ true, 1000, "retry_later" }, { errors.next_of(503) })
        assert.same({ false, nil, "check_ids" }, { errors.next_of(404) })
        assert.same({ false, nil, "fix_arguments" }, { errors.next_of(418) })
        assert.same({ false, nil, "contact_administrator" }, { errors.next_of(599) })
    end)
end)

describe("errors.link", function()
    it("drops the placeholders of 'no link'", function()
        for _, v in ipairs({ "", " ", "无", "None", "none", "null", "-", 5 }) do
            assert.is_nil(errors.link(v), tostring(v))
        end
        assert.equal("https://x/y", errors.link("https://x/y"))
    end)
end)

describe("errors.upstream: the one mapping", function()
    it("keeps a 4xx with the platform's code, description and body", function()
        local e = errors.upstream(res(404, PLATFORM_404), nil, "zh-CN")
        assert.equal(404, e.status)
        assert.equal("OntologyQuery.ObjectType.NotFound", e.code)
        assert.equal("对象类不存在", e.description)
        assert.is_nil(e.solution) -- the envelope names the ids of the call
        assert.is_nil(e.link)
        assert.equal("object type ot_x not found", e.details.error_details)
        e = errors.upstream(res(409, "conflict"), nil, "en-US")
        assert.equal(409, e.status)
        assert.equal("Public.Conflict", e.code)
        assert.equal("conflict", e.details)
    end)

    it("maps 5xx and transport failures by one table", function()
        local cases = {
            { res(500, "x"), nil, 502, "agentRetrieval.BadGateway.CommonExternalServerError" },
            { res(501, "x"), nil, 502, "agentRetrieval.BadGateway.CommonExternalServerError" },
            { res(502, "x"), nil, 502, "agentRetrieval.BadGateway.CommonExternalServerError" },
            { res(503, "x"), nil, 503, "agentRetrieval.ServiceUnavailable.UpstreamUnavailable" },
            { res(504, "x"), nil, 504, "agentRetrieval.GatewayTimeout.UpstreamTimeout" },
            { nil, { code = "upstream_timeout" }, 504, "agentRetrieval.GatewayTimeout.UpstreamTimeout" },
            { nil, { code = "upstream_unreachable" }, 502, "agentRetrieval.BadGateway.CommonExternalServerError" },
        }
        for _, c in ipairs(cases) do
            local e = errors.upstream(c[1], c[2], "en-US")
            assert.equal(c[3], e.status)
            assert.equal(c[4], e.code)
        end
        local e = errors.upstream(nil, { code = "upstream_unreachable", message = "10.0.0.1 refused" }, "en-US")
        assert.equal(true, e.retryable)
        assert.same({ reason = "upstream_unreachable" }, e.details)
        assert.equal(false, errors.upstream(nil, { code = "upstream_response_too_large" }, "en-US").retryable)
    end)

    it("keeps a platform 5xx's code as upstream_code and its description after the gateway's", function()
        local e = errors.upstream(res(500, '{"error_code":"Bkn.Down","description":"db down"}'), nil, "en-US")
        assert.equal(502, e.status)
        assert.equal("Bkn.Down", e.upstream_code)
        assert.equal(500, e.upstream_status)
        assert.equal("Upstream service unavailable (upstream: db down)", e.description)
    end)
end)

describe("errors.envelope", function()
    local function keys(e)
        local out = {}
        for k in pairs(e) do
            out[#out + 1] = k
        end
        table.sort(out)
        return out
    end

    it("writes the members in order, retry fields from the status's rule, no placeholder link", function()
        local e = errors.envelope(503, { code = "X", details = "d", link = "None" }, "en-US")
        assert.equal('{"code":"X","description":"Service unavailable","solution":"Retry later","details":"d",' ..
            '"retryable":true,"retry_after_ms":1000,"required_action":"retry_later"}', cljson.encode(e))
        e = errors.envelope(400, { code = "Public.BadRequest" }, "en-US")
        assert.same({ "code", "description", "details", "required_action", "retryable", "solution" }, keys(e))
        assert.equal(false, e.retryable)
    end)

    it("a retryable error of any status asks for a real wait", function()
        local e = errors.envelope(502, { retryable = true, retry_after_ms = 0 }, "en-US")
        assert.equal(1000, e.retry_after_ms)
        assert.equal("retry_later", e.required_action)
        e = errors.envelope(409, { retryable = true, retry_after_ms = 2500 }, "en-US")
        assert.equal(2500, e.retry_after_ms)
    end)

    it("a 404 without a solution names the ids of the call to check", function()
        local e = errors.envelope(404, { code = "X" }, "en-US", { kn_id = "kn_a", ot_id = "ot_b" })
        assert.truthy(e.solution:find("ot_b", 1, true))
        assert.truthy(e.solution:find("search_schema", 1, true))
        e = errors.envelope(404, { code = "X" }, "zh-CN", { kn_id = "kn_a" })
        assert.truthy(e.solution:find("list_knowledge_networks", 1, true))
        e = errors.envelope(404, { code = "X", solution = "own" }, "en-US", { ot_id = "o" })
        assert.equal("own", e.solution)
    end)
end)

describe("errors.fetch", function()
    -- a ctx whose lang is counted as it is read
    local function ctx_of(answer)
        local reads = 0
        local ctx = setmetatable({
            http = function()
                return answer
            end,
        }, {
            __index = function(_, k)
                if k == "lang" then
                    reads = reads + 1
                    return "en-US"
                end
            end,
        })
        return ctx, function()
            return reads
        end
    end
    local function answer(status, body)
        return { status = status, body = body, json = function(opts)
            return cljson.decode(body, opts)
        end }
    end

    it("gives the decoded 2xx body and the answer, reading no ctx.lang", function()
        local a = answer(200, '{"datas":[1]}')
        local ctx, reads = ctx_of(a)
        local body, err, got = errors.fetch(ctx, {})
        assert.is_nil(err)
        assert.equal(1, body.datas[1])
        assert.equal(a, got)
        assert.equal(0, reads())
    end)

    it("words a 2xx that is not a JSON object or array as a 502 in ctx.lang", function()
        for _, text in ipairs({ "", "nope", "12345678901234567890123", '"s"' }) do
            local a = answer(200, text)
            local ctx, reads = ctx_of(a)
            local body, err, got = errors.fetch(ctx, {})
            assert.is_nil(body)
            assert.equal(502, err.status)
            assert.same({ reason = "invalid_json" }, err.details)
            assert.equal(select(1, require("catalog").error_text(502, "en-US")), err.description)
            assert.equal(a, got)
            assert.equal(1, reads())
        end
    end)
end)
