-- _lib.permission: permission_guidance.
-- The guidance only restates what ontology-query told the caller (a 403, the
-- effective_permissions of the result, row_filter_applied); an empty result is
-- never read as a missing permission. The one extra call is the visibility probe
-- GET …/object-types/{ot}/schema, which decides whether the caller may see the
-- object type's name and a request link.
local cljson = require "cljson"
local util = require "_lib.util"

local M = {}

-- How long a probe's answer is kept in the runtime's authorization cache (ctx.authz,
-- per generation and principal).
local PROBE_TTL_MS = 60000

-- Texts per language: the platform's own texts where known, the missing ones
-- written in the same style.
local TEXTS = {
    ["zh-CN"] = {
        grant = "你暂无「%s」的数据查询权限，无法完成本次查询。",
        property_grants = "你无法获取「%s」中字段 %s 的原始值，结果中这些字段已被遮蔽或只返回名称。",
        row_filter = "你只能访问「%s」的部分数据，查询结果可能不完整。",
        request_hint = "可通过申请权限链接提交申请；提交后请等待管理员完成授权，再重新发起任务。",
        contact_admin = "请联系管理员授权。",
        unnamed = "该对象类",
        separator = "、",
        joiner = "",
        reason_grant = "智能体查询「%s」的数据时缺少数据查询权限",
        reason_property_grants = "智能体需要读取「%s」中字段 %s 的原始值",
        reason_row_filter = "智能体查询「%s」时受行访问范围限制，需要扩大访问范围",
    },
    ["en-US"] = {
        grant = "You do not have permission to query the data of “%s”, so this query cannot be completed.",
        property_grants = "In “%s”, the raw values of %s are not available to you.",
        row_filter = "You can access only part of the data in “%s”, so the result may be incomplete.",
        request_hint = "You can submit a request through the request link; after submitting, wait for " ..
            "an administrator to approve it, then rerun the task.",
        contact_admin = "Contact an administrator to grant access.",
        unnamed = "this object type",
        separator = ", ",
        joiner = " ",
        reason_grant = "The agent lacks permission to query the data of “%s”",
        reason_property_grants = "The agent needs raw values in “%s” for %s",
        reason_row_filter = "The agent's query on “%s” is limited by a row access scope and needs a " ..
            "wider scope",
    },
}

local SCOPE_CODE = { grant = "1", row_filter = "2", property_grants = "3" }

local function texts(lang)
    return TEXTS[lang] or TEXTS["zh-CN"]
end

local function trim(s)
    return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

local function first_value(s)
    if type(s) ~= "string" then
        return nil
    end
    local v = trim((s:match("^[^,]*")))
    if v == "" then
        return nil
    end
    return v
end

-- host[:port] where host is a bracketed IPv6 literal or letters, digits, '.', '-'
-- with an optional port of 1-5 digits: no paths, no userinfo, no spaces.
local function valid_host(h)
    local rest = h:match("^%[[%x:.]+%](.*)$")
    if rest == nil then
        rest = h:match("^[%w.%-]+(.*)$")
    end
    if rest == nil then
        return false
    end
    return rest == "" or rest:match("^:%d%d?%d?%d?%d?$") ~= nil
end

-- The caller's public origin "scheme://host" when the request came through an
-- ingress (X-Forwarded-Host), else "" (a relative link for the Studio host).
function M.origin(request)
    if type(request) ~= "table" then
        return ""
    end
    local host = first_value(request.forwarded_host)
    if host == nil then
        return ""
    end
    local scheme = first_value(request.forwarded_proto)
    scheme = scheme and scheme:lower() or "http"
    if (scheme ~= "http" and scheme ~= "https") or not valid_host(host) then
        return ""
    end
    return scheme .. "://" .. host
end

local function escape_list(items)
    local out = {}
    for i, v in ipairs(items) do
        out[i] = util.escape(v)
    end
    return table.concat(out, ",")
end

local function template_of(ctx)
    local cfg = type(ctx.config) == "table" and ctx.config.permission_request
    if type(cfg) ~= "table" or cfg.disabled == true then
        return nil
    end
    local tpl = type(cfg.path_template) == "string" and trim(cfg.path_template) or ""
    if tpl == "" then
        return nil
    end
    return tpl
end

-- request_permission_url for one shortfall; reason already formatted.
function M.request_url(tpl, origin, kn_id, ot_id, shortfall, reason)
    local url = tpl:gsub("{([%w_]+)}", function(k)
        if k == "kn_id" then
            return util.escape(kn_id)
        elseif k == "ot_id" then
            return util.escape(ot_id)
        elseif k == "scope_code" then
            return SCOPE_CODE[shortfall.scope]
        end
        return nil -- unknown placeholders stay as written
    end)
    local params = {}
    if shortfall.scope == "grant" then
        params[#params + 1] = "operations=" .. escape_list(shortfall.operations)
    elseif shortfall.scope == "property_grants" then
        params[#params + 1] = "properties=" .. escape_list(shortfall.properties)
    end
    params[#params + 1] = "reason=" .. util.escape(reason)
    params[#params + 1] = "source=agent"
    local sep = url:find("?", 1, true) and "&" or "?"
    if url:sub(-1) == "?" or url:sub(-1) == "&" then
        sep = ""
    end
    return origin .. url .. sep .. table.concat(params, "&")
end

-- Visibility probe: -> viewable (bool), name (string|nil). Only for user accounts.
local function probe(ctx, kn_id, ot_id)
    local p = type(ctx.principal) == "table" and ctx.principal or {}
    if p.account_type ~= "user" or type(p.account_id) ~= "string" or p.account_id == "" then
        return false, nil
    end
    local key = "probe\0" .. kn_id .. "\0" .. ot_id
    local hit = ctx.authz.get(key)
    if hit then
        return hit.viewable, hit.name
    end
    local base = "/in/v1/knowledge-networks/" .. util.escape(kn_id) .. "/object-types/" ..
        util.escape(ot_id)
    local res = ctx.http { upstream = "ontology_query", method = "GET", path = base .. "/schema" }
    if res == nil or res.status >= 500 then
        return false, nil -- outage: not cached, no link this time
    end
    local viewable, name = util.is_2xx(res), nil
    if viewable then
        local r = ctx.http { upstream = "bkn_backend", method = "GET", path = base,
            query = { include_detail = "false" } }
        local body = util.is_2xx(r) and util.try_json(r) or nil
        if type(body) == "table" and type(body.entries) == "table" then
            for _, e in ipairs(body.entries) do
                if type(e) == "table" and e.id == ot_id and type(e.name) == "string" and e.name ~= "" then
                    name = e.name
                end
            end
        end
    end
    ctx.authz.put(key, { viewable = viewable, name = name }, PROBE_TTL_MS)
    return viewable, name
end

-- Builds the guidance object for shortfalls (ordered: grant | property_grants,
-- row_filter), each {scope, operations? | properties?}.
function M.build(ctx, kn_id, ot_id, shortfalls)
    local t = texts(ctx.lang)
    local viewable, name = probe(ctx, kn_id, ot_id)
    local tpl = viewable and template_of(ctx) or nil
    local origin = tpl and M.origin(ctx.request) or ""
    local shown = name or t.unnamed
    local clauses, linked = {}, false
    local list = util.array()
    for i, s in ipairs(shortfalls) do
        local props = s.properties and table.concat(s.properties, t.separator)
        local clause = s.scope == "property_grants" and string.format(t.property_grants, shown, props)
            or string.format(t[s.scope], shown)
        clauses[#clauses + 1] = clause
        local out = cljson.object({ scope = s.scope }, { "scope", "operations", "properties",
            "request_permission_url" })
        if s.operations then
            out.operations = util.array(s.operations)
        end
        if s.properties then
            out.properties = util.array(s.properties)
        end
        if tpl then
            local reason = s.scope == "property_grants" and
                string.format(t.reason_property_grants, shown, props) or
                string.format(t["reason_" .. s.scope], shown)
            out.request_permission_url = M.request_url(tpl, origin, kn_id, ot_id, s, reason)
            linked = true
        end
        list[i] = out
    end
    clauses[#clauses + 1] = linked and t.request_hint or t.contact_admin
    local resource = cljson.object({ type = "object_type", id = kn_id .. "/" .. ot_id, kn_id = kn_id,
        ot_id = ot_id }, { "type", "id", "kn_id", "ot_id", "name" })
    if viewable and name then
        resource.name = name
    end
    return cljson.object({ message = table.concat(clauses, t.joiner), resource = resource,
        shortfalls = list }, { "message", "resource", "shortfalls" })
end

-- A 403 on a call that targeted one object type: the caller lacks query_data.
function M.for_refusal(ctx, kn_id, ot_id)
    return M.build(ctx, kn_id, ot_id, { { scope = "grant", operations = { "query_data" } } })
end

-- Does a 403 body name this object type (object_type:<kn>/<ot>)? A 403 about a
-- metric or a tool gives no guidance.
function M.names_object_type(text, kn_id, ot_id)
    if type(text) ~= "string" then
        return false
    end
    return text:find("object_type:" .. kn_id .. "/" .. ot_id, 1, true) ~= nil
end

-- Whether prop is one of the requested properties (a short list: no set built).
local function requested_has(requested, prop)
    for i = 1, #requested do
        if requested[i] == prop then
            return true
        end
    end
    return false
end

-- Guidance for a successful object query, or nil when nothing was withheld.
-- requested: the `properties` argument; only those count when non-empty. It runs
-- on every query: nothing is built unless something was withheld.
function M.for_result(ctx, kn_id, ot_id, body, requested)
    if type(body) ~= "table" then
        return nil
    end
    local perms = body.effective_permissions
    local only = type(requested) == "table" and #requested > 0 and requested or nil
    local withheld
    if type(perms) == "table" then
        for prop, level in pairs(perms) do
            if type(prop) == "string" and level ~= "full" and (only == nil or requested_has(only, prop)) then
                withheld = withheld or {}
                withheld[#withheld + 1] = prop
            end
        end
    end
    local filtered = body.row_filter_applied == true
    if withheld == nil and not filtered then
        return nil
    end
    local shortfalls = {}
    if withheld then
        table.sort(withheld)
        shortfalls[#shortfalls + 1] = { scope = "property_grants", properties = withheld }
    end
    if filtered then
        shortfalls[#shortfalls + 1] = { scope = "row_filter" }
    end
    return M.build(ctx, kn_id, ot_id, shortfalls)
end

return M
