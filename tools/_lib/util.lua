-- _lib.util: helpers shared by tools: path escaping, query building, field
-- trimming that keeps decoded tables (key order, big numbers, [] and {}), and the
-- mapping of upstream failures to the gateway error envelope (SPEC §16).
local cljson = require "cljson"
local catalog = require "catalog"
local errors = require "errors"

local M = {}

-- Percent-encodes everything but RFC 3986 unreserved characters, so an id can
-- never add a path segment ("a/../b" -> "a%2F..%2Fb").
function M.escape(s)
    return (tostring(s):gsub("[^%w%-%._~]", function(c)
        return string.format("%%%02X", c:byte())
    end))
end

function M.is_null(v)
    return v == nil or v == cljson.null
end

-- A new JSON array (encodes as [] even when empty).
function M.array(t)
    return setmetatable(t or {}, cljson.array_mt)
end

-- Keeps only the listed keys of a decoded object, in place: the object keeps its
-- remembered key order and every value stays the decoded one.
function M.keep_only(obj, keys)
    if type(obj) ~= "table" then
        return obj
    end
    local keep = {}
    for _, k in ipairs(keys) do
        keep[k] = true
    end
    local drop = {}
    for k in pairs(obj) do
        if not keep[k] then
            drop[#drop + 1] = k
        end
    end
    for _, k in ipairs(drop) do
        obj[k] = nil
    end
    return obj
end

-- Query-string value text for a Lua value (nil when the value is not set).
function M.query_value(v)
    if M.is_null(v) then
        return nil
    end
    if type(v) == "boolean" then
        return v and "true" or "false"
    end
    if math.type(v) == "float" and v == math.floor(v) then
        local i = math.tointeger(v)
        if i then
            return tostring(i)
        end
    end
    return tostring(v)
end

-- Decodes a response body; nil when it is not JSON.
function M.try_json(res)
    if res == nil or res.body == nil or res.body == "" then
        return nil
    end
    local ok, v = pcall(res.json)
    if ok then
        return v
    end
    return nil
end

-- The downstream body as details: decoded JSON when it is JSON, else the text
-- (cut to a bound, so a huge HTML error page cannot flood the model).
M.body_details = errors.body_of

-- Gateway error {status, code, description, solution, details} with the localized
-- texts of the status; retryable, retry_after_ms and required_action follow the
-- status's rule when the envelope is written (lua/errors.lua).
function M.gateway_error(status, code, lang, details)
    local description, solution = catalog.error_text(status, lang)
    return {
        status = status,
        code = code,
        description = description,
        solution = solution,
        details = details,
    }
end

-- Public.<StatusName> envelope for a check the tool makes itself.
function M.public_error(status, lang, details)
    return M.gateway_error(status, "Public." .. catalog.status_name(status), lang, details)
end

-- 502 for an upstream that broke its contract (details: what was wrong).
function M.bad_gateway(lang, details)
    return M.gateway_error(502, errors.UPSTREAM_CODES[502], lang, details)
end

function M.is_2xx(res)
    return res ~= nil and math.type(res.status) == "integer" and res.status >= 200 and
        res.status < 300
end

-- A failed upstream call -> the error to return: the gateway's one mapping
-- (lua/errors.lua): a transport failure is 502 (504 on timeout), retryable; a 4xx
-- keeps its status and, for the platform's error body, its code and texts; 503 and
-- 504 stay retryable; any other 5xx is 502. The downstream body is the details.
function M.upstream_failure(res, err, lang)
    return errors.upstream(res, err, lang)
end

-- A 2xx body that is not JSON: 502 (the upstream broke its contract).
function M.invalid_json(lang)
    return M.bad_gateway(lang, { reason = "invalid_json" })
end

-- A gateway 400 for a check the tool makes itself (details: what to fix).
function M.bad_request(lang, details)
    return M.public_error(400, lang, details)
end

-- dot_id_error(lang, args, field...) -> a 400 naming the first field whose value is
-- "." or "..", else nil. escape() keeps both as they are, and as a URL path segment
-- they would address another resource (and ctx.http refuses such a path).
function M.dot_id_error(lang, args, ...)
    for i = 1, select("#", ...) do
        local field = select(i, ...)
        local v = args[field]
        if v == "." or v == ".." then
            return M.bad_request(lang, field .. ' must be an id, not "' .. v .. '"')
        end
    end
    return nil
end

-- A new JSON object with an explicit member order (keys set later go after).
function M.object(t, keys)
    return cljson.object(t or {}, keys)
end


-- text(zh, en) -> the per-locale table tool titles and descriptions use
function M.text(zh, en)
    return { ["zh-CN"] = zh, ["en-US"] = en }
end

return M
