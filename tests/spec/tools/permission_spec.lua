-- permission_guidance: through query_object_instance, whose 403 and
-- masked / row-filtered successes carry it, and the _lib itself.
local helper = require "helper"
local ctxcall = require "ctxcall"

local sb = helper.sandbox()
local contract = require "contract"
local tool = assert(contract.check(assert(sb.load("query_object_instance")), "query_object_instance"))
local permission = sb.require("_lib.permission")

local KN, OT = "kn_crm", "ot_customer"
local USER = { account_id = "u_alice", account_type = "user" }
local APP = { account_id = "app_bot", account_type = "app" }

local function unescape(s)
    return (s:gsub("%%(%x%x)", function(h)
        return string.char(tonumber(h, 16))
    end))
end

local function query_params(url)
    local q = url:match("%?(.*)$")
    local out = {}
    for k, v in q:gmatch("([^&=]+)=([^&]*)") do
        out[k] = v
    end
    return out
end

local PROBE_OK = { { status = 200, fixture = "oq_schema_ok.json" }, { status = 200, fixture = "bkn_ot_brief.json" } }
local PROBE_DENIED = { { status = 403, fixture = "oq_error_403_customer.json" } }

local function answers(first, probe)
    local out = { first }
    for _, a in ipairs(probe or {}) do
        out[#out + 1] = a
    end
    return out
end

local function refused(opts, probe)
    helper.authz().clear()
    opts.responses = answers({ status = 403, fixture = "oq_error_403_customer.json" }, probe)
    local res, err, ctx = ctxcall.call(tool, { kn_id = KN, ot_id = OT }, opts)
    assert.is_nil(res)
    assert.equal(403, err.status)
    return err, ctx
end

describe("permission_guidance", function()
    describe("on a 403 of query_object_instance", function()
        it("gives a user who may view the type its name and a relative link (zh-CN)", function()
            local err, ctx = refused({ principal = USER }, PROBE_OK)
            assert.equal("Public.Forbidden", err.code)
            assert.truthy(err.details.error_details:find("object_type:kn_crm/ot_customer", 1, true))
            local g = err.permission_guidance
            assert.equal("你暂无「客户信息」的数据查询权限，无法完成本次查询。" ..
                "可通过申请权限链接提交申请；提交后请等待管理员完成授权，再重新发起任务。", g.message)
            assert.equal('{"type":"object_type","id":"kn_crm/ot_customer","kn_id":"kn_crm",'
                .. '"ot_id":"ot_customer","name":"客户信息"}', helper.encode(g.resource))
            assert.equal(1, #g.shortfalls)
            local s = g.shortfalls[1]
            assert.equal("grant", s.scope)
            assert.same({ "query_data" }, s.operations)
            local url = s.request_permission_url
            assert.equal("/studio/knowledge-network/workspace/kn_crm/object-types/ot_customer/detail"
                .. "?requestPermission=1&operations=query_data&reason=", url:match("^(.-reason=)"))
            assert.truthy(url:find("&source=agent$"))
            assert.equal("智能体查询「客户信息」的数据时缺少数据查询权限", unescape(query_params(url).reason))
            -- probe: the schema of the type, then its name from bkn-backend
            assert.equal(3, #ctx.requests)
            assert.equal("ontology_query", ctx.requests[2].upstream)
            assert.equal("GET", ctx.requests[2].method)
            assert.equal("/in/v1/knowledge-networks/kn_crm/object-types/ot_customer/schema", ctx.requests[2].path)
            assert.equal("bkn_backend", ctx.requests[3].upstream)
            assert.equal("/in/v1/knowledge-networks/kn_crm/object-types/ot_customer", ctx.requests[3].path)
            assert.same({ include_detail = "false" }, ctx.requests[3].query)
            -- key order: message, resource, shortfalls; scope first in a shortfall
            assert.truthy(helper.encode(g):find('^{"message":'))
            assert.truthy(helper.encode(s):find('^{"scope":"grant","operations":%["query_data"%],'
                .. '"request_permission_url":'))
        end)

        it("builds an absolute link behind an ingress, in English, with %20 for spaces", function()
            local err = refused({ principal = USER, lang = "en-US",
                request = { host = "cl:8080", forwarded_host = " bkn.example.com , proxy.local",
                    forwarded_proto = "HTTPS,http" } }, PROBE_OK)
            local g = err.permission_guidance
            assert.equal("You do not have permission to query the data of “客户信息”, so this query cannot "
                .. "be completed. You can submit a request through the request link; after submitting, wait "
                .. "for an administrator to approve it, then rerun the task.", g.message)
            local url = g.shortfalls[1].request_permission_url
            assert.truthy(url:find("^https://bkn%.example%.com/studio/knowledge%-network/workspace/kn_crm/"))
            local reason = query_params(url).reason
            assert.truthy(reason:find("%20", 1, true))
            assert.falsy(reason:find("+", 1, true))
            assert.equal("The agent lacks permission to query the data of “客户信息”", unescape(reason))
        end)

        it("gives an app account neither link nor name, and does not probe", function()
            local err, ctx = refused({ principal = APP })
            local g = err.permission_guidance
            assert.equal(1, #ctx.requests)
            assert.is_nil(g.resource.name)
            assert.is_nil(g.shortfalls[1].request_permission_url)
            assert.equal("你暂无「该对象类」的数据查询权限，无法完成本次查询。请联系管理员授权。", g.message)
            err = refused({ principal = APP, lang = "en-US" })
            assert.equal("You do not have permission to query the data of “this object type”, so this query "
                .. "cannot be completed. Contact an administrator to grant access.", err.permission_guidance.message)
        end)

        it("gives a user who may not view the type neither link nor name", function()
            local err, ctx = refused({ principal = USER }, PROBE_DENIED)
            local g = err.permission_guidance
            assert.equal(2, #ctx.requests)
            assert.is_nil(g.resource.name)
            assert.is_nil(g.shortfalls[1].request_permission_url)
            assert.truthy(g.message:find("请联系管理员授权。$"))
        end)

        it("removes links when disabled or when the template is empty", function()
            local err = refused({ principal = USER, config = ctxcall.config({ disabled = true }) }, PROBE_OK)
            local g = err.permission_guidance
            assert.is_nil(g.shortfalls[1].request_permission_url)
            assert.equal("客户信息", g.resource.name)
            assert.truthy(g.message:find("请联系管理员授权。$"))
            err = refused({ principal = USER, config = ctxcall.config({ path_template = "  " }) }, PROBE_OK)
            assert.is_nil(err.permission_guidance.shortfalls[1].request_permission_url)
        end)

        it("caches the probe per account, but not a probe that failed with 5xx", function()
            helper.authz().clear()
            local args = { kn_id = KN, ot_id = OT }
            local first = { status = 403, fixture = "oq_error_403_customer.json" }
            local _, err, ctx = ctxcall.call(tool, args, { principal = USER,
                responses = { first, { status = 503, body = "down" } } })
            assert.equal(2, #ctx.requests)
            assert.is_nil(err.permission_guidance.shortfalls[1].request_permission_url)
            _, err, ctx = ctxcall.call(tool, args, { principal = USER, responses = answers(first, PROBE_OK) })
            assert.equal(3, #ctx.requests)
            assert.equal("客户信息", err.permission_guidance.resource.name)
            _, err, ctx = ctxcall.call(tool, args, { principal = USER, now = 50000, responses = { first } })
            assert.equal(1, #ctx.requests)
            assert.equal("客户信息", err.permission_guidance.resource.name)
            -- expired after 60 s
            _, _, ctx = ctxcall.call(tool, args, { principal = USER, now = 70000,
                responses = answers(first, PROBE_DENIED) })
            assert.equal(2, #ctx.requests)
        end)

        it("gives no guidance for other statuses", function()
            helper.authz().clear()
            local _, err = ctxcall.call(tool, { kn_id = KN, ot_id = OT }, { principal = USER,
                responses = { { status = 404, fixture = "oq_error_404.json" } } })
            assert.equal(404, err.status)
            assert.is_nil(err.permission_guidance)
        end)
    end)

    describe("on a successful query_object_instance", function()
        local function ok(args, fixture, opts, probe)
            helper.authz().clear()
            opts = opts or {}
            opts.principal = opts.principal or USER
            opts.responses = answers({ status = 200, fixture = fixture }, probe)
            local res, err, ctx = ctxcall.call(tool, args, opts)
            assert.is_nil(err)
            return res, ctx
        end

        it("reports masked fields and the row filter, property_grants first", function()
            local res = ok({ kn_id = KN, ot_id = OT }, "oq_objects_masked.json", {}, PROBE_OK)
            local g = res.permission_guidance
            assert.equal(2, #g.shortfalls)
            assert.equal("property_grants", g.shortfalls[1].scope)
            assert.same({ "id_card", "phone", "salary" }, g.shortfalls[1].properties)
            assert.equal("row_filter", g.shortfalls[2].scope)
            assert.is_nil(g.shortfalls[2].properties)
            assert.equal("你无法获取「客户信息」中字段 id_card、phone、salary 的原始值，结果中这些字段已被遮蔽或只返回名称。"
                .. "你只能访问「客户信息」的部分数据，查询结果可能不完整。"
                .. "可通过申请权限链接提交申请；提交后请等待管理员完成授权，再重新发起任务。", g.message)
            local u1 = g.shortfalls[1].request_permission_url
            assert.truthy(u1:find("?requestPermission=3&properties=id_card,phone,salary&reason=", 1, true))
            assert.equal("智能体需要读取「客户信息」中字段 id_card、phone、salary 的原始值",
                unescape(query_params(u1).reason))
            local u2 = g.shortfalls[2].request_permission_url
            assert.truthy(u2:find("?requestPermission=2&reason=", 1, true))
            assert.equal("智能体查询「客户信息」时受行访问范围限制，需要扩大访问范围", unescape(query_params(u2).reason))
            -- the rows stay untouched, big numbers exact
            assert.truthy(helper.encode(res):find('"customer_id":9007199254740993', 1, true))
        end)

        it("reads each signal alone: masked fields without a row filter, and neither", function()
            helper.authz().clear()
            local masked = '{"datas":[],"total_count":0,"effective_permissions":{"phone":"masked","name":"full"}}'
            local res = ctxcall.call(tool, { kn_id = KN, ot_id = OT }, { principal = USER,
                responses = answers({ status = 200, body = masked }, PROBE_OK) })
            local g = res.permission_guidance
            assert.equal(1, #g.shortfalls)
            assert.equal("property_grants", g.shortfalls[1].scope)
            assert.same({ "phone" }, g.shortfalls[1].properties)
            res = ctxcall.call(tool, { kn_id = KN, ot_id = OT }, { principal = USER,
                responses = { { status = 200, body = '{"datas":[],"total_count":0}' } } })
            assert.equal('{"datas":[],"total_count":0}', helper.encode(res))
        end)

        it("counts only the requested properties", function()
            local res = ok(helper.decode('{"kn_id":"kn_crm","ot_id":"ot_customer","properties":["name","phone"]}'),
                "oq_objects_masked.json", { lang = "en-US" }, PROBE_OK)
            local g = res.permission_guidance
            assert.same({ "phone" }, g.shortfalls[1].properties)
            assert.equal("In “客户信息”, the raw values of phone are not available to you. You can access only "
                .. "part of the data in “客户信息”, so the result may be incomplete. You can submit a request "
                .. "through the request link; after submitting, wait for an administrator to approve it, then "
                .. "rerun the task.", g.message)
            assert.equal("The agent needs raw values in “客户信息” for phone",
                unescape(query_params(g.shortfalls[1].request_permission_url).reason))
        end)

        it("gives a row filter on an empty page, without property grants", function()
            local res = ok({ kn_id = KN, ot_id = OT }, "oq_objects_rowfilter_empty.json", { principal = APP })
            local g = res.permission_guidance
            assert.equal(1, #g.shortfalls)
            assert.equal("row_filter", g.shortfalls[1].scope)
            assert.equal("你只能访问「该对象类」的部分数据，查询结果可能不完整。请联系管理员授权。", g.message)
        end)

        it("gives nothing when every property is full, or for an empty result alone", function()
            local res, ctx = ok({ kn_id = KN, ot_id = OT }, "oq_objects_full.json")
            assert.is_nil(res.permission_guidance)
            assert.equal(1, #ctx.requests)
            res, ctx = ok({ kn_id = KN, ot_id = OT }, "oq_objects_empty.json")
            assert.is_nil(res.permission_guidance)
            assert.equal(1, #ctx.requests)
            res = ok(helper.decode('{"kn_id":"kn_crm","ot_id":"ot_customer","properties":["name"]}'),
                "oq_objects_full.json")
            assert.is_nil(res.permission_guidance)
        end)
    end)

    describe("for_result", function()
        it("builds nothing when nothing was withheld", function()
            local cljson = require "cljson"
            local bodies = {
                cljson.decode('{"datas":[],"effective_permissions":{"name":"full","phone":"full"}}'),
                cljson.decode('{"datas":[],"effective_permissions":{"name":"full","phone":"mask"},' ..
                    '"row_filter_applied":false}'),
                cljson.decode('{"datas":[]}'),
            }
            local requested, ctx = { "name" }, {}
            for i, body in ipairs(bodies) do
                local want = i == 2 and requested or nil
                collectgarbage("stop")
                local before = collectgarbage("count")
                local g = permission.for_result(ctx, KN, OT, body, want)
                local used = collectgarbage("count") - before
                collectgarbage("restart")
                assert.is_nil(g)
                assert.equal(0, used, "body " .. i)
            end
        end)
    end)

    describe("origin and URL", function()
        it("accepts only http(s) with a plain host[:port]", function()
            assert.equal("", permission.origin({ host = "x" }))
            assert.equal("http://bkn.example.com", permission.origin({ forwarded_host = "bkn.example.com" }))
            assert.equal("https://[::1]:8443", permission.origin({ forwarded_host = "[::1]:8443",
                forwarded_proto = "https" }))
            assert.equal("", permission.origin({ forwarded_host = "bkn.example.com", forwarded_proto = "ftp" }))
            assert.equal("", permission.origin({ forwarded_host = "evil.com/path" }))
            assert.equal("", permission.origin({ forwarded_host = "user@evil.com" }))
            assert.equal("", permission.origin({ forwarded_host = "a b" }))
            assert.equal("", permission.origin({ forwarded_host = "h:123456" }))
            assert.equal("", permission.origin({ forwarded_host = "" }))
        end)

        it("escapes ids in the path and items in the query", function()
            local url = permission.request_url("/s/{kn_id}/{ot_id}", "", "kn/../x", "o t",
                { scope = "property_grants", properties = { "a b", "c,d" } }, "why not")
            assert.equal("/s/kn%2F..%2Fx/o%20t?properties=a%20b,c%2Cd&reason=why%20not&source=agent", url)
            url = permission.request_url("/s?x=1&", "https://h", "k", "o", { scope = "row_filter" }, "r")
            assert.equal("https://h/s?x=1&reason=r&source=agent", url)
        end)

        it("names an object type only in a 403 that says object_type:<kn>/<ot>", function()
            local body = helper.fixture("oq_error_403_customer.json")
            assert.is_true(permission.names_object_type(body, KN, OT))
            assert.is_false(permission.names_object_type(body, KN, "ot_other"))
            assert.is_false(permission.names_object_type(helper.fixture("oq_error_403_metric.json"), KN, OT))
        end)
    end)
end)
