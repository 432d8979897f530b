-- query_metric (REST and the on-demand gateway): the data of one modelled metric
-- (ontology-query POST /in/v1/knowledge-networks/{kn}/metrics/{metric_id}/data):
-- an instant value or a range series by step, per combination of the analysis
-- dimensions asked for.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local condition = require "_lib.condition"

local text = util.text

local M = {
    name = "query_metric",
    version = "1.0.0",
    kind = "read",
    title = text("指标查询", "Query Metrics"),
    description = text(
        "查询知识网络中一个已建模指标的数据（指标 ID 见 search_schema 的 metric_types 或 get_kn_detail）。" ..
            "time.instant=true 取一个时点的值；否则 time.start/time.end（Unix 秒）按 step（day、week、month、" ..
            "quarter、year）取序列。analysis_dimensions 按维度拆分，condition 筛选维度值，order_by、having、" ..
            "limit 排序和筛选分组，fill_null 把缺失点补 0。返回 datas：每个维度组合一条（labels、times、" ..
            "time_strs、values、growth_values、growth_rates、proportions）。",
        "Queries the data of one modelled metric of a knowledge network (metric ids: " ..
            "search_schema's metric_types or get_kn_detail). time.instant=true gives the value at " ..
            "one time; otherwise time.start/time.end (Unix seconds) give a series by step (day, " ..
            "week, month, quarter, year). analysis_dimensions splits by dimension, condition " ..
            "filters dimension values, order_by, having and limit order and filter the groups, " ..
            "fill_null makes missing points 0. Returns datas: one per combination of dimension " ..
            "values (labels, times, time_strs, values, growth_values, growth_rates, proportions)."),
    short_description = text(
        "查询一个指标的数据：instant 取时点值，或 start/end（Unix 秒）按 step 取序列；可按维度拆分。" ..
            "返回 datas（labels、times、values 等）。",
        "Queries one metric's data: an instant value, or a series from start to end (Unix " ..
            "seconds) by step; split by dimensions. Returns datas (labels, times, values, ...)."),
    group = "query",
    order = 250,
    surfaces = { "rest", "gateway" },
    toon_view = true,
    upstream = "ontology_query",
    input_schema = fields.input {
        required = { "kn_id", "metric_id" },
        ["$defs"] = { condition = condition.def() },
        properties = {
            kn_id = fields.kn_id(),
            metric_id = fields.string(text("指标 ID", "Metric id"), 256),
            time = {
                type = "object",
                additionalProperties = false,
                description = text("时间范围：instant 取时点值，否则 start、end 必填",
                    "The time: instant for one value, else start and end are required"),
                properties = {
                    instant = { type = "boolean", default = false },
                    start = fields.integer(0, nil, text("开始时间（Unix 秒）", "Start (Unix seconds)")),
                    ["end"] = fields.integer(0, nil, text("结束时间（Unix 秒）", "End (Unix seconds)")),
                    step = { type = "string", enum = { "day", "week", "month", "quarter", "year" },
                        description = text("序列步长，默认 month", "Series step, default month") },
                },
            },
            condition = { ["$ref"] = "#/$defs/condition" },
            analysis_dimensions = { type = "array", maxItems = 10, items = { type = "string", minLength = 1 },
                description = text("按这些维度拆分", "Split by these dimensions") },
            order_by = {
                type = "array",
                maxItems = 10,
                items = {
                    type = "object",
                    additionalProperties = false,
                    required = { "property" },
                    properties = {
                        property = { type = "string", minLength = 1,
                            description = text("维度名，或 value（按合计）", "A dimension, or value (the total)") },
                        direction = { type = "string", enum = { "asc", "desc" } },
                    },
                },
            },
            having = {
                type = "object",
                additionalProperties = false,
                required = { "field", "operation", "value" },
                description = text("按合计筛选分组", "Filter the groups by their total"),
                properties = {
                    field = { type = "string", minLength = 1 },
                    operation = { type = "string", enum = { "==", "!=", ">", ">=", "<", "<=" } },
                    value = { type = "number" },
                },
            },
            limit = fields.integer(1, 10000, text("最多返回的分组数", "Groups to return at most")),
            fill_null = { type = "boolean", default = false,
                description = text("缺失的点补 0", "Make missing points 0") },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            kn_id = { type = "string" },
            metric_id = { type = "string" },
            datas = { type = "array", items = { type = "object" },
                description = text("每个维度组合一条：labels、times、time_strs、values、growth_values、" ..
                    "growth_rates、proportions", "One per combination of dimension values: labels, times, " ..
                    "time_strs, values, growth_values, growth_rates, proportions") },
            overall_ms = { type = "integer" },
        },
    },
}

local TIME_KEYS = { "start", "end", "instant", "step" }

function M.shape_request(args, ctx)
    local bad = errors.dot_ids(ctx.lang, args, "kn_id", "metric_id")
    if bad then
        return nil, bad
    end
    local t = args.time
    local time
    if type(t) == "table" then
        if not t.instant and (t.start == nil or t["end"] == nil) then
            return nil, errors.refuse(400, ctx.lang, "time.start and time.end are required unless time.instant is true")
        end
        if t.start ~= nil and t["end"] ~= nil and t["end"] < t.start then
            return nil, errors.refuse(400, ctx.lang, "time.end must not be before time.start")
        end
        time = cljson.object({ start = t.start, ["end"] = t["end"], instant = t.instant, step = t.step }, TIME_KEYS)
    end
    local body = cljson.object({ time = time, condition = args.condition,
        analysis_dimensions = args.analysis_dimensions,
        order_by = args.order_by, having = args.having, limit = args.limit },
        { "time", "condition", "analysis_dimensions", "order_by", "having", "limit" })
    return {
        upstream = "ontology_query",
        method = "POST",
        path = "/in/v1/knowledge-networks/" .. util.escape(args.kn_id) .. "/metrics/" .. util.escape(args.metric_id) ..
            "/data",
        query = { fill_null = args.fill_null and "true" or "false" },
        json = body,
    }
end

M.decode = { keep = { "datas", "overall_ms" } }

function M.trim_response(body, args)
    if type(body) ~= "table" then
        body = cljson.object()
    end
    local out = cljson.object({ kn_id = args.kn_id, metric_id = args.metric_id, datas = body.datas,
        overall_ms = body.overall_ms }, { "kn_id", "metric_id", "datas", "overall_ms" })
    if type(out.datas) ~= "table" then
        out.datas = util.array()
    end
    if util.is_null(out.overall_ms) then
        out.overall_ms = nil
    end
    return out
end

return M
