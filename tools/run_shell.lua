-- run_shell: one shell command in the PTC sandbox (docs/ptc.md), in the
-- same work directory as run_code for the same conversation, so that it sees the
-- files a script wrote. Runs with the caller's own token; stdout, stderr and
-- exit_code return.
local cljson = require "cljson"
local ptc = require "ptc"
local util = require "_lib.util"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "run_shell",
    version = "1.0.0",
    kind = "execute",
    title = text("运行命令", "Run Command"),
    description = text(
        "在沙箱中用 sh -c 运行一条 shell 命令，工作目录与 run_code 相同（按 conversation_id 划分），" ..
            "可查看脚本写下的文件。返回 stdout、stderr、exit_code。",
        "Runs one shell command (sh -c) in the sandbox, in the same working directory as " ..
            "run_code (one per conversation_id), so it sees the files a script wrote. Returns stdout, " ..
            "stderr and exit_code."),
    group = "execution",
    order = 720,
    surfaces = { "ptc" },
    formats = { "json" },
    upstream = "operator_integration",
    annotations = { destructiveHint = true, openWorldHint = true },
    input_schema = fields.input {
        required = { "command" },
        properties = {
            command = fields.string(text("要运行的 shell 命令", "The shell command to run"), 20000),
            timeout = ptc.timeout_schema(),
        },
    },
    output_schema = ptc.output_schema(),
}

function M.handle(args, ctx)
    local command = args.command:match("^%s*(.-)%s*$")
    if command == "" then
        return nil, ptc.blank_error("command", ctx.lang)
    end
    local out, err = ptc.execute(ctx, { code = command, language = "shell", timeout = args.timeout }, cljson)
    if out == nil then
        return nil, err
    end
    return ptc.result(out, ctx.lang)
end

return M
