-- catalog: localized texts shared by every tool: group titles and the gateway's
-- error texts per HTTP status.
local cltexts = require "cltexts"

local M = {}

M.languages = { "zh-CN", "en-US" }
M.default_language = "zh-CN"

local GROUPS = {
    lifecycle = cltexts.text.lc_group_title, -- the C core lists the lifecycle tools too
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

-- Status names and texts come from the gateway's one text catalogue (src/base/texts.h),
-- the same entries the C core answers with.
local STATUS = cltexts.status

local STATUS_NAMES = {}
local TEXTS = {}
for status, e in pairs(STATUS) do
    STATUS_NAMES[status] = e.name
    TEXTS[e.name] = e
end

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
-- Accepts 404, "NotFound", "Public.NotFound" or an "agentRetrieval.<Status>.<Name>" code.
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
    local pair = t[lang_of(lang)]
    return pair[1], pair[2]
end

-- catalog.text(key, lang) -> the catalogue text `key` (a lower-case id of
-- src/base/texts.h, e.g. "retry_later") in lang; nil for an unknown key.
function M.text(key, lang)
    local t = cltexts.text[key]
    return t and t[lang_of(lang)] or nil
end

-- catalog.texts(key) -> {["zh-CN"] = ..., ["en-US"] = ...} (a new table: a localized
-- text for a declaration such as a schema description), or nil (unknown key)
function M.texts(key)
    local t = cltexts.text[key]
    if t == nil then
        return nil
    end
    local out = {}
    for _, lang in ipairs(M.languages) do
        out[lang] = t[lang]
    end
    return out
end

return M
