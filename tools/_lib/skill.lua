-- _lib.skill: shared pieces of the skill tools (list_skills, get_skill_content,
-- read_skill_file, execute_skill): execution-factory paths, the presigned download
-- of skill files, rune-based truncation and the text/binary decision.
local util = require "_lib.util"
local errors = require "_lib.errors"

local text = util.text

local M = {}

M.MAX_DOWNLOAD = 5 * 1024 * 1024 -- a skill file larger than this is refused (413)
M.MAX_RUNES = 40000              -- content handed to the model, in characters

function M.path(skill_id, tail)
    return "/internal-v1/skills/" .. util.escape(skill_id) .. (tail or "")
end

-- request(args, ctx, method, tail [, json]) -> the factory request for args.skill_id
-- | nil, the 400 of a skill_id that is "." or "..".
function M.request(args, ctx, method, tail, json)
    local bad = errors.dot_ids(ctx.lang, args, "skill_id")
    if bad then
        return nil, bad
    end
    return { upstream = "operator_integration", method = method, path = M.path(args.skill_id, tail), json = json }
end

-- truncate(s, n) -> s cut to n UTF-8 characters, cut? (bytes when not UTF-8)
function M.truncate(s, n)
    if type(s) ~= "string" then
        return s, false
    end
    local len = utf8.len(s)
    if len == nil then
        if #s > n then
            return s:sub(1, n), true
        end
        return s, false
    end
    if len <= n then
        return s, false
    end
    return s:sub(1, utf8.offset(s, n + 1) - 1), true
end

local BINARY_MIME = { "^image/", "^audio/", "^video/", "^application/zip", "^application/x%-tar",
    "^application/gzip", "^application/pdf" }

-- is_text(body, mime) -> boolean
function M.is_text(body, mime)
    if type(mime) == "string" then
        for _, p in ipairs(BINARY_MIME) do
            if mime:lower():match(p) then
                return false
            end
        end
    end
    return utf8.len(body) ~= nil and not body:find("\0", 1, true)
end

local function unescape(s)
    s = s:gsub("%+", " ")
    return (s:gsub("%%(%x%x)", function(h)
        return string.char(tonumber(h, 16))
    end))
end

-- The presigned URL as a request on the operator_integration upstream: ctx.http
-- takes upstream names, never URLs, so only URLs served under the factory's own
-- prefix are followed. nil when the URL is not one of those.
function M.presigned_request(url)
    if type(url) ~= "string" then
        return nil
    end
    local path, query = url:match("^https?://[^/?#]+(/[^?#]*)%??([^#]*)")
    if path == nil then
        return nil
    end
    local rest = path:match("^/api/agent%-operator%-integration(/.*)$")
    if rest == nil then
        return nil
    end
    local q = {}
    for pair in query:gmatch("[^&]+") do
        local k, v = pair:match("^([^=]*)=?(.*)$")
        if k ~= "" then
            q[unescape(k)] = unescape(v)
        end
    end
    return { upstream = "operator_integration", method = "GET", path = rest, query = q }
end

local TOO_LARGE = text(
    { "技能文件过大（超过 5 MiB）", "请用 read_skill_file 读取技能包中的单个较小文件" },
    { "The skill file is too large (over 5 MiB)",
        "Read individual, smaller files of the skill package with read_skill_file" })

local NO_URL = text({ "技能文件的下载地址不可用", "请稍后重试；如持续出现，请联系管理员" },
    { "The skill file download URL is unavailable", "Retry later; if it persists, contact an administrator" })

local DOWNLOAD = text("无法下载技能文件", "Unable to download the skill file")

-- read(ctx, args, tool, step, result) -> result(meta, content, args, ctx.lang) for the
-- factory's answer (meta) to tool.shape_request(args, ctx) and the file its url names
-- (content) | nil, err (step: what an upstream failure's description names).
function M.read(ctx, args, tool, step, result)
    local req, err = tool.shape_request(args, ctx)
    if req == nil then
        return nil, err
    end
    local meta
    meta, err = errors.fetch(ctx, req, step)
    if meta == nil then
        return nil, err
    end
    local content
    content, err = M.download(ctx, meta.url)
    if content == nil then
        return nil, err
    end
    return result(meta, content, args, ctx.lang)
end

-- put_content(out, content, message) -> out with content cut to MAX_RUNES characters;
-- when cut, also truncated = true and message.
function M.put_content(out, content, message)
    local cut
    out.content, cut = M.truncate(content, M.MAX_RUNES)
    if cut then
        out.truncated = true
        out.message = message
    end
    return out
end

-- download(ctx, url) -> body text | nil, err
function M.download(ctx, url)
    if type(url) ~= "string" or url == "" then
        return nil, errors.refuse(404, ctx.lang, nil, NO_URL)
    end
    local req = M.presigned_request(url)
    if req == nil then
        return nil, errors.bad_gateway(ctx.lang, { reason = "unsupported_download_url" })
    end
    local res, err = ctx.http(req)
    if res == nil or not util.is_2xx(res) then
        -- the download is the factory's own presigned URL: any failure is a bad gateway
        local e = errors.from_response(res, err, ctx.lang, DOWNLOAD)
        if e.status ~= 502 then
            e = errors.bad_gateway(ctx.lang, e.details)
            e.description = errors.from_response(nil, nil, ctx.lang, DOWNLOAD).description
        end
        return nil, e
    end
    local body = res.body or ""
    if #body > M.MAX_DOWNLOAD then
        return nil, errors.refuse(413, ctx.lang, { size = #body }, TOO_LARGE)
    end
    return body
end

return M
