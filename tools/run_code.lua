-- run_code: PTC code mode (docs/ptc.md). The model's Python runs in the
-- execution factory's sandbox with the caller's own token, inside handler(event)
-- after the stub: the BKN capabilities are the stub's functions, which call back
-- into /mcp as the caller with this turn's bkn_context. Only stdout (and stderr,
-- exit_code) returns. On /mcp/ptc the listed description is the signature list of
-- those functions, rendered by the core from the tools actually registered.
local cljson = require "cljson"
local ptc = require "ptc"
local util = require "_lib.util"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "run_code",
    version = "1.0.0",
    kind = "execute",
    title = text("运行代码", "Run Code"),
    description = text(
        "在沙箱中运行一段 Python 脚本；BKN 的能力是脚本里可直接调用的函数，只有 stdout 返回。",
        "Runs a Python script in the sandbox; the BKN capabilities are functions the " ..
            "script calls directly, and only stdout returns."),
    group = "execution",
    order = 710,
    surfaces = { "ptc" },
    formats = { "json" },
    upstream = "operator_integration",
    annotations = { destructiveHint = false, openWorldHint = true },
    input_schema = fields.input {
        required = { "code" },
        properties = {
            code = fields.string(text(
                "Python 代码（函数体即可，无需 import 这些函数）；只有 print 的内容会返回",
                "Python code (no need to import the functions); only printed output returns"), 200000),
            timeout = ptc.timeout_schema(),
        },
    },
    output_schema = ptc.output_schema(),
}

function M.handle(args, ctx)
    local code = args.code:gsub("[\r\n]+$", "")
    if code:match("^%s*$") then
        return nil, ptc.blank_error("code", ctx.lang)
    end
    local script = ptc.wrap_code(ptc.stub_for(ctx), code)
    local out, err = ptc.execute(ctx, { code = script, language = "python", timeout = args.timeout }, cljson)
    if out == nil then
        return nil, err
    end
    return ptc.result(out, ctx.lang)
end

return M
