-- query_object_instance: instances of one object type by condition
-- (ontology-query POST-as-GET
-- /in/v1/knowledge-networks/{kn}/object-types/{ot}).
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local condition = require "_lib.condition"
local permission = require "_lib.permission"
local memo = require "_lib.memo"

local text = util.text

local DEFAULT_LIMIT = 10

local M = {
    name = "query_object_instance",
    version = "1.0.0",
    kind = "read",
    title = text("实例查询", "Query Instances"),
    description = text(
        "按条件查询某个对象类的实例数据。先用 search_schema 或 get_object_types 确认 " ..
            "ot_id 与可用属性，再用 condition 描述筛选（叶子 {field, operation, value}，" ..
            "and/or 组合 sub_conditions；全文检索用 match，语义检索用 knn）。" ..
            "每行带 _instance_identity（后续行动、逻辑属性调用原样使用）与 _display。" ..
            "翻页用 limit 与 search_after（见参数）；total_count 为总数，翻页时不返回。",
        "Queries instances of one object type by condition. First confirm the " ..
            "ot_id and its properties with search_schema or get_object_types, then describe " ..
            "the filter with condition (a leaf is {field, operation, value}; and/or nodes " ..
            "combine sub_conditions; match is full-text search, knn semantic search). Each " ..
            "row carries _instance_identity (pass it unchanged to action and logic-property " ..
            "tools) and _display. Page with limit and search_after (see the parameters); " ..
            "total_count is the number of matches and is absent on search_after pages."),
    short_description = text(
        "查询某对象类的实例。先用 search_schema / get_object_types 确认 ot_id 与属性，用 " ..
            "condition 筛选。每行带 _instance_identity（行动、逻辑属性工具原样使用）。翻页见参数。",
        "Queries instances of one object type. Confirm ot_id and properties first " ..
            "(search_schema / get_object_types); filter with condition. Each row carries " ..
            "_instance_identity (pass it unchanged to action and logic-property tools). Paging: " ..
            "see the parameters."),
    group = "query",
    order = 210,
    surfaces = { "mcp", "compact", "rest" },
    -- the token-saving view; its description sentences are added by the contract.
    -- The _instance_id column is left out of the table when every row's is
    -- <kn_id>-<ot_id>-<the single value of its _instance_identity> (a model rebuilds it).
    toon_view = {
        omit_id = { rows = "datas", id = "_instance_id", identity = "_instance_identity",
            prefix = { "kn_id", "ot_id" } },
    },
    upstream = "ontology_query",
    input_schema = fields.input {
        required = { "kn_id", "ot_id" },
        ["$defs"] = { condition = condition.def() },
        properties = {
            kn_id = fields.kn_id(),
            ot_id = fields.ot_id(),
            include_logic_params = fields.include_logic_params("rows"),
            condition = { ["$ref"] = "#/$defs/condition" },
            filters = condition.filters_schema(),
            limit = fields.limit(DEFAULT_LIMIT, 10000),
            properties = {
                type = "array",
                maxItems = 1000,
                items = { type = "string", minLength = 1 },
                description = text(
                    "只返回这些属性；不填返回全部",
                    "Return only these properties; all when omitted"),
            },
            sort = condition.sort_schema(),
            search_after = fields.search_after(64),
            offset = fields.offset(text("跳过的条数（仅数据资源类对象类有效；给出 search_after 时忽略）",
                "Rows to skip (resource-backed object types only; ignored with search_after)")),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            datas = {
                type = "array",
                items = { type = "object" },
                description = text(
                    "实例行：属性值加 _instance_id、_instance_identity、_display",
                    "Rows: property values plus _instance_id, _instance_identity, " ..
                        "_display"),
            },
            total_count = { type = "integer" },
            search_after = { type = "array" },
        },
    },
}

local function has_cursor(args)
    local after = args.search_after
    return after ~= nil and type(after) == "table" and #after > 0
end

-- The request's query and headers: the same few values every call, so made once
-- (ctx.http only reads them; nothing changes them).
local QUERY = {
    [true] = { include_type_info = "false", include_logic_params = "true" },
    [false] = { include_type_info = "false", include_logic_params = "false" },
}
local HEADERS = { ["x-http-method-override"] = "GET" }

local function effective(args)
    local cond, filters = args.condition, args.filters
    if cond == nil and filters == nil then
        return nil -- most calls: no call into condition
    end
    return condition.effective(cond, filters, cljson.object, util.array)
end

-- The request path of (kn_id, ot_id): the same pairs come back call after call, so
-- it is remembered (_lib.memo: at most 256 pairs, for one generation). The ids are
-- escaped here, not through util.escape's own memo: one memo per answer.
local path_of = memo.two(function(kn_id, ot_id)
    return "/in/v1/knowledge-networks/" .. util.percent(kn_id) .. "/object-types/" .. util.percent(ot_id)
end, 256)

-- The exact ontology-query request for validated args whose effective condition is
-- cond.
local function request(args, cond)
    local limit = args.limit
    if limit == nil or limit == 0 then
        limit = DEFAULT_LIMIT
    end
    local sort = args.sort
    if type(sort) ~= "table" or #sort == 0 then
        sort = nil
    end
    -- one constructor: the table is made at its size, not grown member by member
    -- (a nil member is left out); ontology-query turns the total off by itself on
    -- cursor pages
    local body = cljson.object({ condition = cond, limit = limit, properties = args.properties,
        sort = sort, need_total = true })
    if has_cursor(args) then
        body.search_after = args.search_after
    end
    if args.offset ~= nil then
        body.offset = args.offset
    end
    return {
        upstream = "ontology_query",
        method = "POST",
        path = path_of(args.kn_id, args.ot_id),
        query = QUERY[args.include_logic_params and true or false],
        headers = HEADERS,
        json = body,
    }
end

function M.shape_request(args)
    return request(args, effective(args))
end

local KEEP = { "datas", "total_count", "search_after", "effective_permissions",
    "row_filter_applied" }

-- The rows are passed through: decoded as raw JSON values (cljson.raw), copied
-- byte for byte into the result instead of becoming Lua tables; _score is cut out
-- while decoding unless the condition ranks by relevance. Members not in KEEP are
-- only validated, never decoded.
local DECODE = { raw = "datas", keep = KEEP }
local DECODE_UNSCORED = { raw = "datas", drop = { "_score" }, keep = KEEP }

-- The result's last step, on a body holding the KEEP members only and rows without
-- _score unless ranked: total_count is tri-state, a number; 0 when ontology-query
-- omitted it (omitempty drops a zero); absent on cursor pages, where no total is
-- computed.
local function finish(body, args)
    if type(body.datas) ~= "table" then
        body.datas = util.array()
    end
    local null = cljson.null
    if body.total_count == nil or body.total_count == null then
        body.total_count = nil
        if not has_cursor(args) then
            body.total_count = 0
        end
    end
    if body.search_after == null then
        body.search_after = nil
    end
    return body
end

-- Trims the decoded response in place: rows (raw values, or tables: key order, big
-- numbers, [] and {} untouched either way); only keys are removed: the members not in
-- KEEP, and _score unless the args' condition ranks by relevance. (handle decodes
-- with options that do both already, and finishes the body itself.)
function M.trim_response(body, args)
    if type(body) ~= "table" then
        body = cljson.object()
    else
        util.keep_only(body, KEEP)
    end
    if type(body.datas) == "table" and not condition.uses_scoring(effective(args)) then
        local rows = body.datas
        for i, row in ipairs(rows) do
            if type(row) == "table" or cljson.is_raw(row) then
                rows[i] = cljson.without(row, "_score")
            end
        end
    end
    return finish(body, args)
end

function M.handle(args, ctx)
    -- the effective condition is made once per call (filters become a new tree)
    local cond = effective(args)
    local scoring = cond ~= nil and condition.uses_scoring(cond)
    -- a failure follows the gateway's one mapping (a 4xx keeps its status, 5xx and
    -- transport failures become 502/503/504); a 403 targets this one object type: it
    -- carries permission_guidance
    local body, err, res = errors.fetch(ctx, request(args, cond), nil, scoring and DECODE or DECODE_UNSCORED)
    if body == nil then
        if res ~= nil and res.status == 403 then
            err.permission_guidance = permission.for_refusal(ctx, args.kn_id, args.ot_id)
        end
        return nil, err
    end
    -- decoded with the options that keep the KEEP members and cut _score unless ranked
    body = finish(type(body) == "table" and body or cljson.object(), args)
    -- masked fields, names only or a narrowed row scope (only requested properties
    -- count); a body with neither signal (most) has nothing to look at
    if body.effective_permissions ~= nil or body.row_filter_applied ~= nil then
        local guidance = permission.for_result(ctx, args.kn_id, args.ot_id, body, args.properties)
        if guidance ~= nil then
            body.permission_guidance = guidance
        end
    end
    return body
end

return M
