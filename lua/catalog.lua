-- catalog: localized texts shared by every tool: group titles (SPEC §9.4) and the
-- gateway error texts per HTTP status (reference/downstream.md §1.0).
local M = {}

M.languages = { "zh-CN", "en-US" }
M.default_language = "zh-CN"

local GROUPS = {
    lifecycle = { ["zh-CN"] = "会话生命周期", ["en-US"] = "Session Lifecycle" },
    discovery = { ["zh-CN"] = "网络与 Schema", ["en-US"] = "Networks & Schema" },
    query = { ["zh-CN"] = "实例查询", ["en-US"] = "Instance Queries" },
    action = { ["zh-CN"] = "行动", ["en-US"] = "Actions" },
    skill = { ["zh-CN"] = "技能", ["en-US"] = "Skills" },
    capability = { ["zh-CN"] = "能力", ["en-US"] = "Capabilities" },
    execution = { ["zh-CN"] = "代码执行", ["en-US"] = "Code Execution" },
}

-- The group ids a tool may use, in display order.
M.groups = { "lifecycle", "discovery", "query", "action", "skill", "capability", "execution" }

local function lang_of(lang)
    if lang == "en-US" then
        return "en-US"
    end
    return "zh-CN"
end

-- catalog.group_title(group, lang) -> string | nil (unknown group)
function M.group_title(group, lang)
    local g = GROUPS[group]
    return g and g[lang_of(lang)] or nil
end

local STATUS_NAMES = {
    [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound",
    [405] = "MethodNotAllowed", [406] = "NotAcceptable", [408] = "RequestTimeout",
    [409] = "Conflict", [413] = "RequestEntityTooLarge", [415] = "UnsupportedMediaType",
    [422] = "UnprocessableEntity", [429] = "TooManyRequests",
    [500] = "InternalServerError", [501] = "NotImplemented", [502] = "BadGateway",
    [503] = "ServiceUnavailable", [504] = "GatewayTimeout",
}

local CONTACT = { ["zh-CN"] = "请联系管理员", ["en-US"] = "Contact administrator" }
local RETRY = { ["zh-CN"] = "请稍后重试", ["en-US"] = "Retry later" }

-- name -> { description, solution } per language
local TEXTS = {
    BadRequest = {
        { ["zh-CN"] = "参数错误", ["en-US"] = "Invalid parameters" },
        { ["zh-CN"] = "请检查参数是否正确", ["en-US"] = "Please check if the parameters are correct" },
    },
    Unauthorized = { { ["zh-CN"] = "认证失败", ["en-US"] = "Authentication failed" }, CONTACT },
    Forbidden = { { ["zh-CN"] = "权限错误", ["en-US"] = "Permission denied" }, CONTACT },
    NotFound = { { ["zh-CN"] = "对象不存在", ["en-US"] = "Resource not found" }, CONTACT },
    MethodNotAllowed = {
        { ["zh-CN"] = "请求方法不被允许", ["en-US"] = "Method not allowed" }, CONTACT,
    },
    Conflict = {
        { ["zh-CN"] = "资源冲突", ["en-US"] = "Conflict with the current state" },
        { ["zh-CN"] = "请检查请求是否与已有数据冲突", ["en-US"] =
            "Check whether the request conflicts with existing data" },
    },
    RequestEntityTooLarge = {
        { ["zh-CN"] = "请求体过大", ["en-US"] = "Request entity too large" },
        { ["zh-CN"] = "请减小请求内容后重试", ["en-US"] = "Reduce the size of the request and retry" },
    },
    TooManyRequests = { { ["zh-CN"] = "请求过于频繁", ["en-US"] = "Too many requests" }, RETRY },
    InternalServerError = {
        { ["zh-CN"] = "内部错误", ["en-US"] = "Internal server error" }, CONTACT,
    },
    NotImplemented = { { ["zh-CN"] = "功能未实现", ["en-US"] = "Not implemented" }, CONTACT },
    BadGateway = {
        { ["zh-CN"] = "依赖服务不可用", ["en-US"] = "Upstream service unavailable" },
        { ["zh-CN"] = "请检查依赖服务是否可用", ["en-US"] =
            "Check whether the upstream service is reachable" },
    },
    ServiceUnavailable = {
        { ["zh-CN"] = "服务暂不可用", ["en-US"] = "Service unavailable" }, RETRY,
    },
    GatewayTimeout = {
        { ["zh-CN"] = "依赖服务响应超时", ["en-US"] = "Upstream service timed out" }, RETRY,
    },
}

local NAME_STATUS = {}
for status, name in pairs(STATUS_NAMES) do
    NAME_STATUS[name] = status
end

-- catalog.status_name(status) -> "BadRequest", ...; unknown 4xx -> "BadRequest",
-- anything else unknown -> "InternalServerError".
function M.status_name(status)
    local n = STATUS_NAMES[status]
    if n then
        return n
    end
    if math.type(status) == "integer" and status >= 400 and status < 500 then
        return "BadRequest"
    end
    return "InternalServerError"
end

-- catalog.status_of(name) -> status number or nil
function M.status_of(name)
    return NAME_STATUS[name]
end

-- catalog.error_text(status_or_code, lang) -> description, solution
-- Accepts 404, "NotFound", "Public.NotFound" or "agentRetrieval.NotFound.X".
function M.error_text(key, lang)
    local name
    if type(key) == "number" then
        name = M.status_name(key)
    elseif type(key) == "string" then
        name = key:match("^Public%.(%a+)$") or key:match("^agentRetrieval%.(%a+)%.") or key
    end
    local t = TEXTS[name]
    if t == nil then
        local status = NAME_STATUS[name]
        -- other 4xx read as a bad request, everything else as an internal error
        t = (status and status < 500) and TEXTS.BadRequest or TEXTS.InternalServerError
    end
    local l = lang_of(lang)
    return t[1][l], t[2][l]
end

-- catalog.link_none(lang) -> the "no link" placeholder of the envelope
function M.link_none(lang)
    return lang_of(lang) == "en-US" and "None" or "无"
end

return M
