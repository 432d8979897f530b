-- list_action_executions: the action execution history of a knowledge network
-- (ontology-query). Offset paging or the
-- search_after cursor; when search_after is sent, offset is ignored (not an error).
local util = require "_lib.util"
local fields = require "_lib.fields"
local action = require "_lib.action"

local text = util.text

local DEFAULT_LIMIT = 20

local M = {
    name = "list_action_executions",
    version = "1.0.0",
    kind = "read",
    title = text("执行历史", "Action History"),
    description = text(
        "翻阅某个知识网络下的行动执行记录，可按行动类、状态、触发方式与开始时间区间过滤。" ..
            "分页用 offset 或 search_after（见参数）。" ..
            "列表不含逐对象结果，需要时用 get_action_execution 查单次执行。",
        "Pages through the action executions of a knowledge network, filtered by " ..
            "action type, status, trigger type and start-time range. Page by offset or " ..
            "search_after (see the parameters). Entries carry no per-object results; use " ..
            "get_action_execution for one execution."),
    group = "action",
    order = 340,
    surfaces = { "mcp", "rest" },
    toon_view = true,
    upstream = "ontology_query",
    input_schema = fields.input {
        required = { "kn_id" },
        properties = {
            kn_id = fields.kn_id(),
            action_type_id = {
                type = "string",
                description = text("按行动类过滤", "Only this action type"),
            },
            status = {
                enum = { "pending", "running", "completed", "failed", "cancelled" },
                description = text("按状态过滤", "Only this status"),
            },
            trigger_type = {
                enum = { "manual", "scheduled" },
                description = text("按触发方式过滤", "Only this trigger type"),
            },
            start_time_from = {
                type = "integer",
                minimum = 0,
                description = text(
                    "开始时间下界（Unix 毫秒）",
                    "Start time lower bound (Unix ms)"),
            },
            start_time_to = {
                type = "integer",
                minimum = 0,
                description = text(
                    "开始时间上界（Unix 毫秒）",
                    "Start time upper bound (Unix ms)"),
            },
            offset = fields.offset(text("偏移翻页；传了 search_after 时忽略", "Rows to skip; ignored when search_after is sent")),
            limit = fields.limit(DEFAULT_LIMIT, 1000),
            search_after = fields.search_after(16),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            entries = { type = "array", items = { type = "object" } },
            total_count = { type = "integer" },
            search_after = { type = "array" },
        },
    },
}

local function has_cursor(args)
    return type(args.search_after) == "table" and #args.search_after > 0
end

-- ontology-query splits search_after on "," and reads the parts as strings.
local function cursor_text(values)
    local parts = {}
    for i, v in ipairs(values) do
        parts[i] = util.query_value(v) or ""
    end
    return table.concat(parts, ",")
end

function M.shape_request(args)
    local q = { need_total = "true" }
    q.action_type_id = (args.action_type_id ~= nil and args.action_type_id ~= "") and args.action_type_id or nil
    q.status = args.status
    q.trigger_type = args.trigger_type
    if args.start_time_from and args.start_time_from > 0 then
        q.start_time_from = tostring(args.start_time_from)
    end
    if args.start_time_to and args.start_time_to > 0 then
        q.start_time_to = tostring(args.start_time_to)
    end
    local limit = args.limit
    if limit == nil or limit == 0 then
        limit = DEFAULT_LIMIT
    end
    q.limit = tostring(limit)
    if has_cursor(args) then
        q.search_after = cursor_text(args.search_after)
    elseif args.offset and args.offset > 0 then
        q.offset = tostring(args.offset)
    end
    return {
        upstream = "ontology_query",
        method = "GET",
        path = action.kn_path(args.kn_id) .. "/action-logs",
        query = q,
    }
end

function M.trim_response(body)
    util.keep_only(body, { "entries", "total_count", "search_after" })
    if type(body.entries) ~= "table" then
        body.entries = util.array()
    end
    for _, e in ipairs(body.entries) do
        action.trim_execution(e, false)
        if type(e) == "table" then
            -- they describe a page of results that a list entry does not carry
            e.results_offset = nil
            e.results_limit = nil
        end
    end
    if util.is_null(body.total_count) then
        body.total_count = nil
    end
    if util.is_null(body.search_after) then
        body.search_after = nil
    end
    return body
end

-- the failed step an upstream failure names (the default handle)
M.upstream_step = text("无法获取行动执行历史", "Unable to retrieve the action execution history")


-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
