-- errors: the gateway's error rules for tools and the tool host (docs/errors.md).
--
-- * next_of(status): retryable, the wait and the required_action token of a status
--   (the same rules, CL_STATUS_NEXT in src/base/texts.h, the C core answers with).
-- * upstream(res, err, lang [, step]): the one mapping of a failed upstream call to a tool
--   error, used by every tool (through tools/_lib/errors.lua) and by a tool's
--   default handle (lua/contract.lua):
--     transport failure           -> 502, retryable (upstream_timeout -> 504, retryable;
--                                    upstream_response_too_large -> 502, not retryable)
--     4xx                         -> the same status (a 4xx keeps its meaning)
--     503                         -> 503, retryable
--     504                         -> 504, retryable
--     any other 5xx / non-2xx     -> 502, not retryable
--   A platform body {error_code, description, solution, error_link, error_details}
--   keeps its code (a 4xx's `code`, a 5xx's `upstream_code`) and its description;
--   the downstream body itself is `details` (decoded JSON, else its text).
-- * envelope(err, lang, args): the error object a tool error becomes on both surfaces.
local cljson = require "cljson"
local cltexts = require "cltexts"
local catalog = require "catalog"

local M = {}

local NEXT = cltexts.next

-- next_of(status) -> retryable, retry_after_ms (nil when not retryable), required_action
function M.next_of(status)
    local n = NEXT[status]
    if n == nil then
        n = (math.type(status) == "integer" and status >= 400 and status < 500) and NEXT[400] or NEXT[500]
    end
    return n.retryable, n.retry_after_ms, n.required_action
end

-- The wait of a retryable error whose rule names none.
M.RETRY_AFTER_MS = NEXT[503].retry_after_ms

-- The codes of the upstream mapping, by the gateway status they answer with.
M.UPSTREAM_CODES = {
    [502] = "agentRetrieval.BadGateway.CommonExternalServerError",
    [503] = "agentRetrieval.ServiceUnavailable.UpstreamUnavailable",
    [504] = "agentRetrieval.GatewayTimeout.UpstreamTimeout",
}

local function nonempty(s)
    if type(s) == "string" and s:find("%S") then
        return s
    end
    return nil
end

-- link(v) -> v when it is a link worth following, else nil ("", "无", "None", ... are
-- placeholders for "no link": the envelope then has no link member).
function M.link(v)
    v = nonempty(v)
    if v == nil then
        return nil
    end
    local t = v:gsub("^%s+", ""):gsub("%s+$", ""):lower()
    if t == "无" or t == "none" or t == "null" or t == "n/a" or t == "-" then
        return nil
    end
    return v
end

local MAX_DETAIL = 4096

-- body_of(res) -> the downstream body as details: decoded JSON when it is JSON, else
-- its text (cut to a bound, so a huge HTML error page cannot flood the model).
function M.body_of(res)
    local body = res and res.body or ""
    if body ~= "" then
        local v = cljson.pdecode(body)
        if v ~= nil then
            return v
        end
    end
    if #body > MAX_DETAIL then
        body = body:sub(1, MAX_DETAIL) .. "..."
    end
    return body
end

-- platform(v) -> v when it is the platform's error body, else nil
function M.platform(v)
    if type(v) == "table" and nonempty(v.error_code) then
        return v
    end
    return nil
end

local function text(key, lang)
    return catalog.text(key, lang)
end

-- "<what the gateway says> (upstream: <what the upstream said>)"
local function with_upstream(description, said, lang)
    said = nonempty(said)
    if said == nil or said == description then
        return description
    end
    return string.format(text("err_upstream_says", lang), description, said)
end

-- The solution of a 403: names the missing permission when the platform did.
local function permission_solution(body, lang)
    local what = body and (nonempty(body.error_details) or nonempty(body.description))
    if what and #what <= 300 and lang ~= "en-US" then
        -- the platform's English sentence is not shown: the permission it names is
        local op, res = what:match("([%w_]+) was not granted for (%S+)")
        if op then
            what = string.format(text("err_permission_on", lang), res, op)
        elseif not what:find("[\128-\255]") then
            what = nil
        end
    end
    if what and #what <= 300 then
        return string.format(text("err_permission_named", lang), what)
    end
    local _, s = catalog.error_text(403, lang)
    return s
end

-- from_status(status, body, lang) -> err table for a downstream answer of status
-- (not 2xx) whose decoded body (or text) is body.
function M.from_status(status, body, lang)
    local p = M.platform(body)
    if status >= 400 and status < 500 then
        local d, s = catalog.error_text(status, lang)
        local e = {
            status = status,
            code = p and p.error_code or "Public." .. catalog.status_name(status),
            description = p and nonempty(p.description) or d,
            solution = s,
            link = p and M.link(p.error_link) or nil,
            details = body,
        }
        if status == 403 then
            e.solution = permission_solution(p, lang)
        elseif status == 404 then
            e.solution = nil -- the envelope names the ids of the call to check
        elseif p and nonempty(p.solution) then
            e.solution = p.solution
        end
        return e
    end
    local mapped = (status == 503 or status == 504) and status or 502
    local d, s = catalog.error_text(mapped, lang)
    local retryable = M.next_of(mapped)
    return {
        status = mapped,
        code = M.UPSTREAM_CODES[mapped],
        description = with_upstream(d, p and p.description, lang),
        solution = retryable and text("err_upstream_busy", lang) or s,
        details = body,
        upstream_status = status,
        upstream_code = p and p.error_code or nil,
    }
end

-- transport(err, lang) -> err table for a ctx.http failure (no response). Only the
-- failure's code is kept: transport messages may name internal hosts.
function M.transport(err, lang)
    local reason = type(err) == "table" and type(err.code) == "string" and err.code or "transport_error"
    local status = reason == "upstream_timeout" and 504 or 502
    local retryable = reason ~= "upstream_response_too_large"
    local d, s = catalog.error_text(status, lang)
    return {
        status = status,
        code = M.UPSTREAM_CODES[status],
        description = d,
        solution = retryable and text("err_upstream_retry", lang) or s,
        details = { reason = reason },
        retryable = retryable,
    }
end

-- "<step> (<description>)": the failed step, in lang, leads the description.
local function led_by(step, description, lang)
    local s = step[lang == "en-US" and "en-US" or "zh-CN"]
    if lang == "en-US" then
        return s .. " (" .. description .. ")"
    end
    return s .. "（" .. description .. "）"
end

-- upstream(res, err, lang [, step]) -> err table for `return nil, err` (res: ctx.http's
-- answer when there is one, err: its failure otherwise). step: {["zh-CN"]=…,
-- ["en-US"]=…} naming the failed step, which then leads the description.
function M.upstream(res, err, lang, step)
    local e
    if res == nil then
        e = M.transport(err, lang)
    else
        e = M.from_status(res.status, M.body_of(res), lang)
    end
    if type(step) == "table" then
        e.description = led_by(step, e.description, lang)
    end
    return e
end

function M.is_2xx(res)
    return res ~= nil and math.type(res.status) == "integer" and res.status >= 200 and res.status < 300
end

-- bad_gateway(lang, details) -> 502 for an upstream that broke its contract (a 2xx
-- that is not the JSON expected; details: what was wrong).
function M.bad_gateway(lang, details)
    local d, s = catalog.error_text(502, lang)
    return { status = 502, code = M.UPSTREAM_CODES[502], description = d, solution = s, details = details }
end

-- fetch(ctx, req [, step [, opts]]) -> the decoded 2xx body of ctx.http(req) (a JSON
-- object or array) | nil, err, res: err is upstream()'s mapping of a failure (led by
-- step), or json_of()'s 502; res is the answer, when there was one.
-- The decoded body when it is a JSON object or array, else nil.
local has_runtime, clruntime = pcall(require, "clruntime")
local metatable_of = has_runtime and type(clruntime) == "table" and clruntime.metatable or getmetatable

local function json_body(res, opts)
    local body = res.body
    if body ~= nil and body ~= "" then
        local ok, v = pcall(res.json, opts)
        if ok and type(v) == "table" and metatable_of(v) ~= cljson.number_mt then
            return v
        end
    end
    return nil
end

function M.fetch(ctx, req, step, opts)
    local res, err = ctx.http(req)
    if not M.is_2xx(res) then
        return nil, M.upstream(res, err, ctx.lang, step), res
    end
    -- ctx.lang (a read through the ctx view) only when there is an error to word
    local body = json_body(res, opts)
    if body == nil then
        return nil, M.bad_gateway(ctx.lang, { reason = "invalid_json" }), res
    end
    return body, nil, res
end

-- json_of(res, lang [, opts]) -> the decoded 2xx body when it is a JSON object or
-- array, else nil, a 502 {reason = "invalid_json"}. opts: cljson.decode's options.
function M.json_of(res, lang, opts)
    local body = json_body(res, opts)
    if body == nil then
        return nil, M.bad_gateway(lang, { reason = "invalid_json" })
    end
    return body
end

-- The fields an envelope writes itself, in this order; any other field of a tool's
-- error table follows them (permission_guidance, upstream_status, ...).
local ORDER = { "code", "description", "solution", "link", "details", "retryable", "retry_after_ms",
                "required_action" }
local OWN = { status = true, raw = true, message = true }
for _, k in ipairs(ORDER) do
    OWN[k] = true
end

local ID_KINDS = {
    { "ot_id", { ["zh-CN"] = "对象类", ["en-US"] = "object type" } },
    { "rt_id", { ["zh-CN"] = "关系类", ["en-US"] = "relation type" } },
    { "at_id", { ["zh-CN"] = "行动类", ["en-US"] = "action type" } },
}

local function id_text(v)
    if type(v) == "string" or math.type(v) == "integer" then
        return tostring(v)
    end
    return nil
end

-- The kind of object a platform not-found code names ("X.<Kind>.NotFound",
-- "X.Skill.FileNotFound"), or nil.
local function code_kind(code)
    if type(code) ~= "string" then
        return nil
    end
    if code:find("%.Skill%.FileNotFound$") then
        return "skill_file"
    end
    return code:match("%.([%w]+)%.NotFound$")
end

-- The concrete next step of a 404 from the kind of id the platform did not find (its
-- code), else from the ids of the call: each kind names the tool that lists it.
local function not_found_solution(args, lang, code)
    if type(args) ~= "table" then
        return nil
    end
    local kind = code_kind(code)
    local kn = id_text(args.kn_id)
    local skill = id_text(args.skill_id)
    local exec = id_text(args.execution_id)
    local resource = id_text(args.resource_id)
    if kind == "KnowledgeNetwork" and kn then
        return string.format(text("err_check_kn_id", lang), kn)
    end
    if exec and (kind == "ActionExecution" or not kind) then
        return string.format(text("err_check_execution_id", lang), kn or "", exec)
    end
    if kind == "RelationType" and kn and not args.rt_id then
        return string.format(text("err_check_relation_type", lang), kn)
    end
    if skill and kind == "skill_file" and id_text(args.rel_path) then
        return string.format(text("err_check_skill_file", lang), skill, id_text(args.rel_path))
    end
    if skill and (kind == "Skill" or not kind or kind == "skill_file") then
        return string.format(text("err_check_skill_id", lang), skill)
    end
    if resource and (kind == "Resource" or not kind) then
        return string.format(text("err_check_resource_id", lang), resource)
    end
    if kind == "Resource" then
        return text("err_list_resources", lang)
    end
    for _, k in ipairs(ID_KINDS) do
        local v = id_text(args[k[1]])
        if v then
            local what = k[2][lang == "en-US" and "en-US" or "zh-CN"]
            return string.format(text("err_check_schema_id", lang), what, v)
        end
    end
    if kn then
        return string.format(text("err_check_kn_id", lang), kn)
    end
    return nil
end

M.not_found_solution = not_found_solution

-- envelope(status, err, lang, args) -> the error object of a tool error table:
-- {code, description, solution, link?, details, retryable, retry_after_ms?,
-- required_action?, ...the table's other fields}. Missing texts come from the
-- status's catalogue entry, missing retry fields from its rule; a link that is a
-- placeholder is left out; retry_after_ms is only there when retryable, never 0.
function M.envelope(status, err, lang, args)
    local e = cljson.object({}, ORDER)
    local d, s = catalog.error_text(status, lang)
    local retryable, wait, action = M.next_of(status)
    e.code = type(err.code) == "string" and err.code or "Public." .. catalog.status_name(status)
    e.description = nonempty(err.description) or d
    e.solution = nonempty(err.solution) or (status == 404 and not_found_solution(args, lang, e.code)) or s
    e.link = M.link(err.link)
    if err.details ~= nil then
        e.details = err.details
    elseif type(err.message) == "string" then
        e.details = err.message
    else
        e.details = cljson.null
    end
    if type(err.retryable) == "boolean" then
        retryable = err.retryable
    end
    e.retryable = retryable
    if retryable then
        local w = math.tointeger(err.retry_after_ms)
        e.retry_after_ms = (w and w > 0) and w or wait or M.RETRY_AFTER_MS
        action = "retry_later"
    end
    e.required_action = nonempty(err.required_action) or action
    for k, v in pairs(err) do
        if not OWN[k] then
            e[k] = v
        end
    end
    return e
end

return M
