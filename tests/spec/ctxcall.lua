-- Spec support: helper.call with the ctx fields the core adds beside the basic
-- fake ctx (ctx.config, ctx.request, ctx.now_ms), for tools that read them.
local helper = require "helper"
local schema = require "schema"

local M = {}

M.TEMPLATE = "/studio/knowledge-network/workspace/{kn_id}/object-types/{ot_id}/detail" ..
    "?requestPermission={scope_code}"

function M.config(over)
    over = over or {}
    return {
        permission_request = {
            path_template = over.path_template or M.TEMPLATE,
            disabled = over.disabled == true,
        },
        gates = { EXECUTE_SKILL_ENABLED = false },
        language = "zh-CN",
    }
end

-- opts: helper.ctx options plus config=, request=, now=
function M.call(tool, args, opts)
    opts = opts or {}
    local ctx = helper.ctx(opts)
    ctx.config = opts.config or M.config()
    ctx.request = opts.request or { host = "context-loader:8080" }
    ctx.now_ms = function()
        return opts.now or 1000
    end
    local v, errs = schema.validate(tool.input_schema, args or {})
    if v == nil then
        return nil, { status = 400, code = "invalid_arguments", errors = errs }, ctx
    end
    local co = coroutine.create(tool.handle)
    local ok, res, err = coroutine.resume(co, v, helper.readonly(ctx))
    if not ok then
        error(debug.traceback(co, res), 2)
    end
    assert(coroutine.status(co) == "dead", "fake ctx never yields")
    return res, err, ctx
end

return M
