-- get_action_execution: status and per-object results of one action execution
-- (ontology-query).
-- "Absent" and "0" differ: with neither results_limit nor results_offset the
-- legacy path (at most 1000 results); either present switches to paging. So the
-- schema declares no default for them.
local util = require "_lib.util"
local fields = require "_lib.fields"
local action = require "_lib.action"
local errors = require "_lib.errors"

local text = util.text

local DEFAULT_PAGE = 100
local MAX_PAGE = 1000
local MAX_WINDOW = 10000 -- results_offset + page size never exceeds this

local M = {
    name = "get_action_execution",
    version = "1.0.0",
    kind = "read",
    title = text("执行结果", "Action Result"),
    description = text(
        "按 execute_action 返回的 execution_id 查询这次执行的状态与逐对象结果。" ..
            "status 为 pending / running 时结果尚未齐全，请稍后再查；completed 表示执行流程结束，" ..
            "不代表全部成功——逐对象成败看 success_count / failed_count 与 results[].status。" ..
            "不传分页参数时沿用原有查询（最多 1000 条结果）；传入 results_limit 或 results_offset " ..
            "（哪怕是 0）即按结果分页（页大小见参数），且 results_offset 加页大小不超过 10000。" ..
            "比较 results_offset + len(results) 与 results_total 判断是否还有下一页；" ..
            "超过 10000 条的结果无法通过本接口继续翻页。",
        "Status and per-object results of one action execution, by the execution_id " ..
            "that execute_action returned. While status is pending or running the results are " ..
            "incomplete; poll again later. completed means the run has ended, NOT that every " ..
            "object succeeded: check success_count / failed_count and results[].status. Without " ..
            "paging arguments the legacy view is returned (at most 1000 results). Passing " ..
            "results_limit or results_offset (even 0) pages the results (page size: see the " ..
            "parameters), and results_offset plus the page size never exceeds 10000. There is " ..
            "another page while results_offset + len(results) < results_total; results beyond " ..
            "the first 10000 cannot be paged through this tool."),
    short_description = text(
        "按 execution_id 查询 execute_action 的状态与逐对象结果。pending / running 时稍后再查；" ..
            "completed 只表示结束，不代表全部成功（看 success_count / failed_count）。分页见参数。",
        "Status and per-object results of an execute_action run, by execution_id. " ..
            "pending / running: poll again later; completed means ended, not all succeeded " ..
            "(check success_count / failed_count). Paging: see the parameters."),
    group = "action",
    order = 330,
    surfaces = { "mcp", "compact", "rest" },
    upstream = "ontology_query",
    input_schema = fields.input {
        required = { "kn_id", "execution_id" },
        properties = {
            kn_id = fields.kn_id(),
            execution_id = fields.string(text(
                "execute_action 返回的执行 ID",
                "The execution_id returned by execute_action")),
            results_limit = {
                type = "integer",
                minimum = 0,
                description = text(
                    "逐条结果每页条数；传 0 时为 100，超过 1000 时按 1000。传入即启用分页",
                    "Results per page; 0 means 100, above 1000 means 1000. Passing it " ..
                        "turns paging on"),
            },
            results_offset = {
                type = "integer",
                minimum = 0,
                description = text(
                    "逐条结果偏移量（小于 10000）。传入即启用分页",
                    "Offset into the results (below 10000). Passing it turns paging on"),
            },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            id = { type = "string" },
            status = {
                type = "string",
                description = text(
                    "pending | running | completed | failed | cancelled；completed 不代表全部成功",
                    "pending | running | completed | failed | cancelled; completed does " ..
                        "not mean every object succeeded"),
            },
            total_count = { type = "integer" },
            success_count = { type = "integer" },
            failed_count = { type = "integer" },
            results_total = { type = "integer" },
            results_offset = { type = "integer" },
            results_limit = { type = "integer" },
            results = { type = "array", items = { type = "object" } },
        },
    },
}

local WINDOW_ERROR = text(
    {
        "results_offset 超出范围：本接口只能翻阅前 10000 条逐对象结果",
        "请使用小于 10000 的 results_offset；更多结果请按 success_count / failed_count 汇总判断，" ..
            "或直接查询 ontology-query 的 action-logs 端点",
    },
    {
        "results_offset is out of range: this interface cannot page past the first 10000 results",
        "Use a results_offset below 10000; for the rest rely on success_count / failed_count, or " ..
            "query ontology-query's action-logs endpoint directly",
    })

local INCOMPLETE = text(
    "下游返回了非空的结果页却没有 results_total，无法判断是否还有下一页",
    "The downstream returned a non-empty page without results_total, so whether " ..
        "another page exists cannot be told")

local function paged(args)
    return args.results_limit ~= nil or args.results_offset ~= nil
end

-- The page actually asked for: limit 0 -> 100, > 1000 -> 1000, shortened so that
-- offset + page <= 10000. nil, err when the offset is past the window.
local function page(args)
    local offset = args.results_offset or 0
    if offset >= MAX_WINDOW then
        return nil
    end
    local limit = args.results_limit
    if limit == nil or limit == 0 then
        limit = DEFAULT_PAGE
    end
    if limit > MAX_PAGE then
        limit = MAX_PAGE
    end
    if offset + limit > MAX_WINDOW then
        limit = MAX_WINDOW - offset
    end
    return limit, offset
end

-- shape_request(args, ctx) -> request | nil, err
function M.shape_request(args, ctx)
    local base = action.kn_path(args.kn_id)
    if not paged(args) then
        return {
            upstream = "ontology_query",
            method = "GET",
            path = base .. "/action-executions/" .. util.escape(args.execution_id),
        }
    end
    local limit, offset = page(args)
    if limit == nil then
        return nil, errors.refuse(400, ctx.lang, { results_offset = args.results_offset, max_window = MAX_WINDOW },
            WINDOW_ERROR)
    end
    return {
        upstream = "ontology_query",
        method = "GET",
        path = base .. "/action-logs/" .. util.escape(args.execution_id),
        query = { results_limit = tostring(limit), results_offset = tostring(offset) },
    }
end

-- trim_response(body, args, ctx) -> execution | nil, err
function M.trim_response(body, args, ctx)
    local e = action.trim_execution(body, true)
    if type(e.results) ~= "table" then
        e.results = util.array()
    end
    if paged(args) and util.is_null(e.results_total) then
        if #e.results > 0 then
            local lang = ctx.lang == "en-US" and "en-US" or "zh-CN"
            return nil, errors.bad_gateway(ctx.lang, { reason = INCOMPLETE[lang] })
        end
        e.results_total = 0 -- an empty page whose total the downstream omitted
    end
    return e
end

-- the failed step an upstream failure names (the default handle)
M.upstream_step = text("无法获取行动执行详情", "Unable to retrieve the action execution")


return M
