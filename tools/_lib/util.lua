-- _lib.util: helpers shared by tools: path escaping, query building, field
-- trimming that keeps decoded tables (key order, big numbers, [] and {}), localized
-- texts. The errors a tool returns are _lib.errors'.
local cljson = require "cljson"
local errors = require "_lib.errors"
local memo = require "_lib.memo"

local M = {}

-- Percent-encodes everything but RFC 3986 unreserved characters, so an id can
-- never add a path segment ("a/../b" -> "a%2F..%2Fb").
local function pct(c)
    return string.format("%%%02X", c:byte())
end

-- percent(s) -> s with every byte but the unreserved ones percent-encoded (s
-- through tostring first).
function M.percent(s)
    if type(s) ~= "string" then
        s = tostring(s)
    end
    if s:find("^[%w%-%._~]*$") then
        return s -- nothing to escape (ids usually): no copy
    end
    return (s:gsub("[^%w%-%._~]", pct))
end

-- escape(s): percent(s), remembered for ids seen before (those that needed no
-- escaping included): the same ids come back call after call, and one table read
-- costs less than the pattern scan. At most 256 ids of at most 256 bytes (_lib.memo);
-- only strings are kept, so a number or boolean is escaped each time.
local function short_string(s)
    return type(s) == "string" and #s <= 256
end
M.escape = memo.one(M.percent, 256, short_string)

function M.is_null(v)
    return v == nil or v == cljson.null
end

-- A new JSON array (encodes as [] even when empty).
function M.array(t)
    return setmetatable(t or {}, cljson.array_mt)
end

-- Keeps only the listed keys of a decoded object, in place: the object keeps its
-- remembered key order and every value stays the decoded one. No table is made
-- (it runs on every call, often on a body the decoder already trimmed: option
-- keep): the lists are short, and clearing a key while traversing is allowed.
function M.keep_only(obj, keys)
    if type(obj) ~= "table" then
        return obj
    end
    local n = #keys
    for k in next, obj do
        local i = 1
        while i <= n and keys[i] ~= k do
            i = i + 1
        end
        if i > n then
            obj[k] = nil
        end
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

-- Decodes a response body; nil when it is not JSON. opts: cljson.decode's options
-- ({raw = "datas"} keeps the rows of that array as raw JSON values).
function M.try_json(res, opts)
    if res == nil or res.body == nil or res.body == "" then
        return nil
    end
    local ok, v = pcall(res.json, opts)
    if ok then
        return v
    end
    return nil
end

-- entries_of(res) -> the entries array of a 2xx JSON answer | nil: for the
-- best-effort reads whose failure a tool leaves out (or only logs).
function M.entries_of(res)
    local body = M.is_2xx(res) and M.try_json(res) or nil
    if type(body) ~= "table" or type(body.entries) ~= "table" then
        return nil
    end
    return body.entries
end

-- res is a 2xx answer of ctx.http (the rule lua/errors.lua maps failures by).
M.is_2xx = errors.is_2xx

-- A new JSON object with an explicit member order (keys set later go after).
function M.object(t, keys)
    return cljson.object(t or {}, keys)
end

-- text(zh, en) -> the per-locale table tool titles and descriptions use
function M.text(zh, en)
    return { ["zh-CN"] = zh, ["en-US"] = en }
end

return M
