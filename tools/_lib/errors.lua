-- _lib.errors: the errors a tool returns (`return nil, err`), in the gateway's
-- envelope (docs/errors.md), and the upstream call that maps its own failure. The
-- one place tools reach the runtime's error rules (lua/errors.lua) and text
-- catalogue (lua/catalog.lua).
local errors = require "errors"
local catalog = require "catalog"

local M = {}

-- from_response(res, err, lang [, step]) -> the error of a failed ctx.http call: the
-- gateway's one mapping (a transport failure is 502, 504 on timeout, retryable; a
-- 4xx keeps its status and, for the platform's error body, its code and texts; 503
-- and 504 stay retryable; any other 5xx is 502; the downstream body is `details`).
-- step: text(zh, en) naming the failed step, which then leads the description.
function M.from_response(res, err, lang, step)
    return errors.upstream(res, err, lang, step)
end

-- fetch(ctx, req [, step [, opts]]) -> the decoded 2xx body of ctx.http(req), a JSON
-- object or array (opts: cljson.decode's options, e.g. {raw = "datas"}) | nil, err,
-- res: from_response's error, or a 502 {reason = "invalid_json"} for a 2xx that is
-- not such JSON; res is the upstream's answer when there was one.
M.fetch = errors.fetch

-- json(res, lang [, opts]) -> the decoded 2xx body (object or array) | nil, 502 err.
M.json = errors.json_of

M.is_2xx = errors.is_2xx

-- The downstream body as details: decoded JSON when it is JSON, else the text (cut
-- to a bound, so a huge HTML error page cannot flood the model).
M.body_details = errors.body_of

-- bad_gateway(lang, details) -> 502 for an upstream that broke its contract (a 2xx
-- that is not what was expected; details: what was wrong).
M.bad_gateway = errors.bad_gateway

-- new(status, code, lang, details [, texts]) -> a gateway error with the status's
-- texts (texts: text({description, solution}, {description, solution}) for the
-- tool's own); retryable, retry_after_ms and required_action follow the status's
-- rule when the envelope is written.
function M.new(status, code, lang, details, texts)
    local description, solution
    if texts then
        local t = texts[lang == "en-US" and "en-US" or "zh-CN"]
        description, solution = t[1], t[2]
    else
        description, solution = catalog.error_text(status, lang)
    end
    return { status = status, code = code, description = description, solution = solution, details = details }
end

-- refuse(status, lang, details [, texts]) -> Public.<StatusName>: a check the tool
-- makes itself (400 when the caller must fix the call, 404 for what is not there).
function M.refuse(status, lang, details, texts)
    return M.new(status, "Public." .. catalog.status_name(status), lang, details, texts)
end

-- dot_ids(lang, args, field...) -> a 400 naming the first field whose value is "."
-- or "..", else nil: as a URL path segment either would address another resource
-- (and ctx.http refuses such a path).
function M.dot_ids(lang, args, ...)
    for i = 1, select("#", ...) do
        local field = select(i, ...)
        local v = args[field]
        if v == "." or v == ".." then
            return M.refuse(400, lang, field .. ' must be an id, not "' .. v .. '"')
        end
    end
    return nil
end

return M
