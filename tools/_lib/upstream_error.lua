-- _lib.upstream_error: maps a failed ctx.http call to the gateway error envelope
-- for the action, skill and capability tools (the one mapping of lua/errors.lua).
-- The downstream body always reaches the caller untouched as `details`;
-- `description` says in one sentence what failed, in the request language.
local util = require "_lib.util"

local M = {}

local function lang_of(lang)
    return lang == "en-US" and "en-US" or "zh-CN"
end

-- summary: {["zh-CN"]=..., ["en-US"]=...} naming the failed step, or nil
local function describe(summary, base, lang)
    if type(summary) ~= "table" then
        return base
    end
    local s = summary[lang_of(lang)]
    if lang_of(lang) == "en-US" then
        return s .. " (" .. base .. ")"
    end
    return s .. "（" .. base .. "）"
end

-- map(res, err, lang, summary) -> err table for `return nil, err`: the gateway's one
-- mapping of a failed upstream call (util.upstream_failure), its description led by
-- the failed step.
function M.map(res, err, lang, summary)
    local e = util.upstream_failure(res, err, lang)
    e.description = describe(summary, e.description, lang)
    return e
end

-- A local refusal (400 unless told) with our own texts.
-- texts: {["zh-CN"]={description, solution}, ["en-US"]={...}}
function M.local_error(status, lang, texts, details)
    local t = texts[lang_of(lang)]
    local e = util.public_error(status, lang, details)
    e.description, e.solution = t[1], t[2]
    return e
end

-- The decoded 2xx body, or nil, a 502 error when it is not a JSON object.
function M.json_object(res, lang)
    local body = util.try_json(res)
    if type(body) ~= "table" then
        return nil, util.bad_gateway(lang, { reason = "invalid_json" })
    end
    return body
end

return M
