-- execute_skill: runs an entry command of a skill in the execution factory's
-- sandbox. Gated by EXECUTE_SKILL_ENABLED: when the switch is off the tool does not
-- exist on any surface.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local skill = require "_lib.skill"

local text = util.text

local MAX_OUTPUT = 8000 -- characters of stdout and of stderr

local M = {
    name = "execute_skill",
    version = "1.0.0",
    kind = "execute",
    gate = "EXECUTE_SKILL_ENABLED",
    title = text("执行技能", "Execute Skill"),
    description = text(
        "在执行工厂的沙箱中运行技能的入口命令（entry_shell 必须是 SKILL.md 中声明的入口）。" ..
            "返回 exit_code、stdout、stderr；exit_code 非 0 也是正常返回，请据此判断成败。" ..
            "stdout / stderr 各超过 8000 字符时截断（truncated=true）。",
        "Runs an entry command of a skill in the execution factory's sandbox " ..
            "(entry_shell must be an entry declared in SKILL.md). Returns exit_code, stdout and " ..
            "stderr; a non-zero exit_code is still a normal answer, judge success by it. stdout " ..
            "and stderr are each cut at 8000 characters (truncated=true)."),
    group = "skill",
    order = 550,
    surfaces = { "mcp", "rest" },
    upstream = "operator_integration",
    annotations = { destructiveHint = false, openWorldHint = true },
    input_schema = fields.input {
        required = { "skill_id", "entry_shell" },
        properties = {
            skill_id = fields.skill_id(),
            entry_shell = fields.string(text(
                "要运行的入口命令（SKILL.md 中声明的入口）",
                "The entry command to run (an entry declared in SKILL.md)"), 4096),
            timeout = fields.integer(1, 600, text("超时秒数，1-600", "Timeout in seconds, 1-600")),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            skill_id = { type = "string" },
            exit_code = { type = "integer" },
            stdout = { type = "string" },
            stderr = { type = "string" },
            truncated = { type = "boolean" },
            execution_time = { type = "integer" },
        },
    },
}

function M.shape_request(args, ctx)
    local body = cljson.object({}, { "entry_shell", "timeout" })
    body.entry_shell = args.entry_shell
    body.timeout = args.timeout
    local req, err = skill.request(args, ctx, "POST", "/execute", body)
    if req ~= nil and args.timeout then
        -- leave the sandbox its whole timeout plus a margin for the round trip
        req.timeout_ms = (args.timeout + 30) * 1000
    end
    return req, err
end

function M.trim_response(body)
    util.keep_only(body, { "skill_id", "exit_code", "stdout", "stderr", "execution_time", "work_dir",
        "command", "mocked" })
    local cut1, cut2
    body.stdout, cut1 = skill.truncate(body.stdout, MAX_OUTPUT)
    body.stderr, cut2 = skill.truncate(body.stderr, MAX_OUTPUT)
    if body.stderr == "" then
        body.stderr = nil
    end
    if cut1 or cut2 then
        body.truncated = true
    end
    return body
end

-- the failed step an upstream failure names (the default handle)
M.upstream_step = text("技能执行失败", "The skill could not be executed")


return M
