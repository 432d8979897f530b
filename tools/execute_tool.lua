-- execute_tool: the on-demand gateway's execution half. Runs one capability found by
-- search_capabilities:
--   * without toolbox_id, tool_id names a Context Loader tool, run through
--     ctx.invoke with the same validation and ctx as a direct call. REST-only,
--     proxy-only and gated-off tools are refused exactly like unknown ones;
--   * with toolbox_id, a capability the network mounts in the execution factory:
--     an MCP tool (toolbox_id = MCP server id) through the MCP proxy, or a
--     function tool of a toolbox through the toolbox proxy;
--   * by the name search_capabilities shows (`name`, or that name given as
--     tool_id): a Context Loader tool of that name, else (with kn_id) the one
--     mounted capability of that name, in toolbox_id when given. Two capabilities
--     of one name in different toolboxes need toolbox_id (the refusal lists them);
--   * a skill (skill_id, or with kn_id the skill's id or name): its entry command
--     arguments.entry_shell runs through ctx.invoke("execute_skill"), the same gate
--     and sandbox call as a direct execute_skill; where skill execution is off, or
--     without entry_shell, the refusal names the call that reads the skill.
-- The core applies the same auth, lifecycle and idempotency as to any call.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local capability = require "_lib.capability"
local errors = require "_lib.errors"

local text = util.text

local M = {
    name = "execute_tool",
    version = "1.0.0",
    kind = "execute",
    title = text("执行能力", "Execute Tool"),
    description = text(
        "按 search_capabilities 返回的标识调用一个能力，arguments 按该能力的 input_schema 填写。" ..
            "kind=tool 的能力只传 tool_id；执行工厂的能力（function、mcp_tool）同时传 toolbox_id 与 kn_id。" ..
            "也可以用返回的 name 代替 tool_id（执行工厂能力需同时传 kn_id）。技能（skill）传 skill_id，" ..
            "arguments.entry_shell 为 SKILL.md 中声明的入口。返回该能力的原始结果。",
        "Runs one capability by the ids search_capabilities returned; fill arguments " ..
            "per its input_schema. For kind=tool pass only tool_id; for execution-factory " ..
            "capabilities (function, mcp_tool) also pass toolbox_id and kn_id. The returned name " ..
            "works in place of tool_id (with kn_id for factory capabilities). A skill takes " ..
            "skill_id and arguments.entry_shell (an entry SKILL.md declares). Returns the " ..
            "capability's own result."),
    short_description = text(
        "调用 search_capabilities 找到的一个能力，arguments 按其 input_schema 填写。kind=tool " ..
            "只传 tool_id；function、mcp_tool 另传 toolbox_id 与 kn_id；skill 传 skill_id 与 " ..
            "arguments.entry_shell。",
        "Runs one capability search_capabilities found; fill arguments per its input_schema. " ..
            "kind=tool: tool_id only; function, mcp_tool: also toolbox_id and kn_id; skill: " ..
            "skill_id and arguments.entry_shell."),
    group = "capability",
    order = 620,
    surfaces = { "mcp", "compact", "rest" },
    -- the token-saving view of whatever the capability returned: on MCP the text is
    -- the compact JSON unless the view is smaller (never more tokens than the JSON)
    toon_view = true,
    upstream = { "operator_integration", "bkn_backend" },
    annotations = { destructiveHint = true, idempotentHint = false, openWorldHint = true },
    input_schema = fields.input {
        anyOf = { { required = { "tool_id" } }, { required = { "name" } }, { required = { "skill_id" } } },
        properties = {
            kn_id = fields.kn_id(text("知识网络 ID（执行工厂能力必填）",
                "Knowledge network id (required for execution-factory capabilities)")),
            tool_id = fields.string(text(
                "search_capabilities 返回的 tool_id",
                "The tool_id returned by search_capabilities"), 256),
            name = fields.string(text(
                "search_capabilities 返回的 name（不传 tool_id 时使用）",
                "The name search_capabilities returned (instead of tool_id)"), 256),
            skill_id = fields.skill_id(text(
                "search_capabilities 返回的 skill_id（kind=skill）",
                "The skill_id search_capabilities returned (kind=skill)")),
            toolbox_id = fields.string(text(
                "search_capabilities 返回的 toolbox_id（仅执行工厂能力）",
                "The toolbox_id returned by search_capabilities (factory capabilities only)"), 256),
            arguments = {
                type = "object",
                default = {},
                description = text(
                    "调用参数，按该能力的 input_schema 填写",
                    "Arguments, per the capability's input_schema"),
            },
        },
    },
    output_schema = {
        type = "object",
        description = text(
            "该能力自己的结果：JSON 对象原样返回，其他值放在 result 中",
            "The capability's own result: a JSON object as it is, any other value under result"),
    },
}

local KN_REQUIRED = text(
    { "缺少 kn_id：执行工厂能力的范围是知识网络挂载的能力",
                  "请传入 kn_id（或 X-Kn-ID 请求头）后重试" },
    { "kn_id is required: tool scope is what the knowledge network has mounted",
                  "Pass kn_id (or the X-Kn-ID header) and retry" })
local NOT_MOUNTED = text({ "该工具未挂载到此知识网络", "请用 search_capabilities 查找该知识网络可用的能力" },
    { "This tool is not mounted on the knowledge network", "Find the network's capabilities with search_capabilities" })
local AMBIGUOUS = text(
    { "有多个同名能力，无法确定调用哪一个", "请从 details 的候选中选一个，传入它的 toolbox_id 与 tool_id" },
    { "More than one capability has this name",
        "Pick one of the candidates in details and pass its toolbox_id and tool_id" })
local NOT_EXECUTABLE = text(
    { "该工具不在你可调用的已启用目录中：可能已停用、所属工具箱未发布，或当前账号无权访问",
                  "请用 search_capabilities 重新查找可用能力，或联系管理员" },
    { "This tool is not in the enabled catalogue you can call: it may be disabled, " ..
                      "its toolbox may be unpublished, or this account may not have access",
                  "Search again with search_capabilities, or contact an administrator" })

local SKILL_ENTRY = text(
    { "运行技能需要 arguments.entry_shell（SKILL.md 中声明的入口命令）",
      "先用 get_skill_content（见 details.next_call）读取技能与其入口，再带 arguments.entry_shell 调用 execute_tool" },
    { "Running a skill needs arguments.entry_shell (an entry command SKILL.md declares)",
      "Read the skill and its entries with get_skill_content (details.next_call), then call " ..
          "execute_tool again with arguments.entry_shell" })
local SKILL_OFF = text(
    { "此部署未开放技能执行：技能只能读取",
      "用 get_skill_content（见 details.next_call）读取技能内容，按其说明完成任务" },
    { "Skill execution is not enabled in this deployment: skills can only be read",
      "Read the skill with get_skill_content (details.next_call) and follow it" })

-- The capability's answer as an object: JSON objects as they are, anything else
-- under "result" (the envelope must be an object).
local function as_object(res)
    local v = util.try_json(res)
    if type(v) == "table" and not cljson.is_array(v) and getmetatable(v) ~= cljson.number_mt then
        return v
    end
    local out = cljson.object()
    if v == nil then
        out.result = res.body or ""
    else
        out.result = v
    end
    return out
end

-- Does the named tool take kn_id? (execute_tool's own kn_id is passed on only then,
-- because a schema without it would refuse the field.)
local function declares_kn_id(ctx, name)
    if type(ctx.list_tools) ~= "function" then
        return false
    end
    for _, t in ipairs(ctx.list_tools()) do
        if t.name == name then
            local props = type(t.input_schema) == "table" and t.input_schema.properties
            return type(props) == "table" and props.kn_id ~= nil
        end
    end
    return false
end

local function lists_tool(ctx, name)
    if type(ctx.list_tools) ~= "function" then
        return false
    end
    for _, t in ipairs(ctx.list_tools()) do
        if t.name == name then
            return true
        end
    end
    return false
end

local function run_local(args, ctx, name)
    local inner = args.arguments or cljson.object()
    -- the core's own arguments never reach the inner tool's schema
    inner.bkn_context = nil
    inner.response_format = nil
    if inner.kn_id == nil and args.kn_id ~= nil and declares_kn_id(ctx, name) then
        inner.kn_id = args.kn_id
    end
    return ctx.invoke(name, inner)
end

local function call_factory(ctx, req, summary)
    local res, err = ctx.http(req)
    if res == nil or not util.is_2xx(res) then
        return nil, errors.from_response(res, err, ctx.lang, summary)
    end
    return as_object(res)
end

local function runnable(m, box)
    return (box == nil or m.box_id == box) and (m.capability_type == "mcp_tool" or m.capability_type == "function")
end

-- The mounted capabilities (in toolbox box when given) whose name is `name`: an MCP
-- tool's name is its id; a function tool's comes from its toolbox's catalogue.
-- -> array of {box_id, capability_id, capability_type} | nil, err
local function by_name(ctx, mounted, box, name)
    local found, catalogues = {}, {}
    for _, m in ipairs(mounted) do
        if runnable(m, box) then
            local match = m.capability_id == name
            if not match and m.capability_type == "function" then
                if catalogues[m.box_id] == nil then
                    local cat, cerr = capability.catalogue(ctx, m.box_id)
                    if cat == nil then
                        return nil, cerr
                    end
                    catalogues[m.box_id] = cat
                end
                local t = catalogues[m.box_id][m.capability_id]
                match = t ~= nil and t.name == name
            end
            if match then
                found[#found + 1] = m
            end
        end
    end
    return found
end

local function ambiguous(ctx, found)
    local list = util.array()
    for i, m in ipairs(found) do
        local c = cljson.object({}, { "toolbox_id", "tool_id", "kind" })
        c.toolbox_id, c.tool_id, c.kind = m.box_id, m.capability_id, m.capability_type
        list[i] = c
    end
    return errors.refuse(400, ctx.lang, { candidates = list }, AMBIGUOUS)
end

-- key: tool_id or name. Without toolbox_id, nil, nil, mounted when nothing runnable
-- mounted has that name (the caller then looks for a skill, else a Context Loader
-- tool of that name).
local function run_factory(args, ctx, key)
    if args.kn_id == nil then
        return nil, errors.refuse(400, ctx.lang, nil, KN_REQUIRED)
    end
    local mounted, merr = capability.mounted(ctx, args.kn_id)
    if mounted == nil then
        return nil, merr
    end
    local kind, box, id
    -- toolbox_id and tool_id: exactly that capability
    for _, m in ipairs(mounted) do
        if args.toolbox_id ~= nil and runnable(m, args.toolbox_id) and m.capability_id == args.tool_id then
            kind, box, id = m.capability_type, m.box_id, m.capability_id
        end
    end
    if kind == nil then
        local found, ferr = by_name(ctx, mounted, args.toolbox_id, key)
        if found == nil then
            return nil, ferr
        end
        if #found > 1 then
            return nil, ambiguous(ctx, found)
        end
        if #found == 1 then
            kind, box, id = found[1].capability_type, found[1].box_id, found[1].capability_id
        elseif args.toolbox_id == nil then
            return nil, nil, mounted
        end
    end
    local ids = { toolbox_id = args.toolbox_id, tool_id = key }
    if kind == nil then
        return nil, errors.refuse(400, ctx.lang, ids, NOT_MOUNTED)
    end
    args = { toolbox_id = box, tool_id = id, arguments = args.arguments }
    ids = { toolbox_id = box, tool_id = id }
    local params = args.arguments or cljson.object()
    if kind == "mcp_tool" then
        local body = cljson.object({}, { "tool_name", "parameters" })
        body.tool_name = args.tool_id
        body.parameters = params
        return call_factory(ctx, { upstream = "operator_integration", method = "POST",
            path = "/internal-v1/mcp/proxy/" .. util.escape(args.toolbox_id) .. "/tool/call", json = body },
            text("MCP 工具调用失败", "The MCP tool call failed"))
    end
    local cat, cerr = capability.catalogue(ctx, args.toolbox_id)
    if cat == nil then
        return nil, cerr
    end
    if cat[args.tool_id] == nil then
        return nil, errors.refuse(400, ctx.lang, ids, NOT_EXECUTABLE)
    end
    local body = cljson.object()
    body.body = params -- the toolbox proxy takes the arguments under "body"
    -- a managed call names its Operation as the parent of what the function records
    local headers = ctx.operation_id and { ["bkn-parent-operation-id"] = ctx.operation_id } or nil
    return call_factory(ctx, { upstream = "operator_integration", method = "POST",
        path = "/internal-v1/caller/tool-box/" .. util.escape(args.toolbox_id) .. "/proxy/" ..
            util.escape(args.tool_id), json = body, headers = headers },
        text("工具调用失败", "The tool call failed"))
end

-- A refusal whose next step is another call: details {skill_id, next_call}.
local function skill_refusal(ctx, skill_id, texts, action)
    local call = cljson.object({}, { "name", "arguments" })
    call.name = "get_skill_content"
    call.arguments = cljson.object({ skill_id = skill_id })
    local details = cljson.object({}, { "skill_id", "next_call" })
    details.skill_id, details.next_call = skill_id, call
    local err = errors.refuse(400, ctx.lang, details, texts)
    err.required_action = action
    return err
end

-- Runs a skill's entry command the way execute_skill does (ctx.invoke: the same
-- gate, validation and sandbox call).
local function run_skill(args, ctx, skill_id)
    if not lists_tool(ctx, "execute_skill") then
        return nil, skill_refusal(ctx, skill_id, SKILL_OFF, "use_next_call")
    end
    local a = args.arguments or {}
    if type(a.entry_shell) ~= "string" or a.entry_shell == "" then
        return nil, skill_refusal(ctx, skill_id, SKILL_ENTRY, "fix_arguments")
    end
    local inner = cljson.object({}, { "skill_id", "entry_shell", "timeout" })
    inner.skill_id, inner.entry_shell, inner.timeout = skill_id, a.entry_shell, a.timeout
    return ctx.invoke("execute_skill", inner)
end

-- The id of the skill the network mounts whose id or name (as search_capabilities
-- shows it) is key, or nil.
local function skill_named(ctx, kn_id, mounted, key)
    local any = false
    for _, m in ipairs(mounted or {}) do
        if m.capability_type == "skill" then
            if m.capability_id == key then
                return key
            end
            any = true
        end
    end
    if not any then
        return nil
    end
    local found = ctx.invoke("search_capabilities", { kn_id = kn_id, types = { "skill" }, limit = 50 })
    for _, e in ipairs(type(found) == "table" and found.capabilities or {}) do
        if e.kind == "skill" and e.name == key then
            return e.skill_id
        end
    end
    return nil
end

function M.handle(args, ctx)
    if args.skill_id ~= nil then
        return run_skill(args, ctx, args.skill_id)
    end
    local key = args.tool_id or args.name
    if args.toolbox_id == nil and (args.kn_id == nil or lists_tool(ctx, key)) then
        return run_local(args, ctx, key)
    end
    local res, err, mounted = run_factory(args, ctx, key)
    if res == nil and err == nil then
        local skill_id = skill_named(ctx, args.kn_id, mounted, key)
        if skill_id ~= nil then
            return run_skill(args, ctx, skill_id)
        end
        -- no capability of that name is mounted: refused like any unknown tool name
        return run_local(args, ctx, key)
    end
    return res, err
end

return M
