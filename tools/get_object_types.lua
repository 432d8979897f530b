-- get_object_types: object types by id or name with their full property
-- definitions and related metrics: the bkn-backend
-- detail endpoint first, the export view (id, then name) when it fails or misses.
local util = require "_lib.util"
local knschema = require "_lib.knschema"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "get_object_types",
    version = "1.0.0",
    kind = "read",
    title = text("对象类详情", "Object Type Detail"),
    description = text(
        "按 ID（或名称）获取对象类的完整定义：数据属性（类型、映射字段、可用检索操作）、逻辑属性、" ..
            "主键与关联指标。写 query_object_instance 的 condition 前用它确认属性名。找不到的放在 missing。",
        "Gets object types by id (or name) with full definitions: data properties (type, " ..
            "mapped field, search operations), logic properties, primary keys and related " ..
            "metrics. Use it to confirm property names before writing a query_object_instance " ..
            "condition. Ids not found are listed in missing."),
    short_description = text(
        "按 ID 或名称获取对象类的完整定义（数据属性、逻辑属性、主键、关联指标）；写 condition " ..
            "前用它确认属性名。找不到的放在 missing。",
        "Gets full object type definitions by id or name (data and logic properties, primary " ..
            "keys, metrics); confirm property names with it before writing a condition. Ids not " ..
            "found are in missing."),
    group = "discovery",
    order = 140,
    surfaces = { "mcp", "compact", "rest" },
    toon_view = true,
    upstream = "bkn_backend",
    input_schema = fields.input {
        required = { "kn_id", "ids" },
        properties = {
            kn_id = fields.kn_id(),
            ids = fields.ids("对象类 ID 或名称（来自 get_kn_detail 或 search_schema）",
                "Object type ids or names (from get_kn_detail or search_schema)"),
        },
    },
    output_schema = knschema.by_ids_output("object_types"),
}

-- the search operations a model needs spelled out; the comparisons are implied
local SEARCH_OPS = { match = true, multi_match = true, knn = true }

local function unique(ids)
    local out, seen = {}, {}
    for _, id in ipairs(ids) do
        if not seen[id] then
            seen[id] = true
            out[#out + 1] = id
        end
    end
    return out
end

-- Trims one object type in place; mcp: keep only the search operations.
local function trim_object_type(ot, mcp, metrics)
    ot._score = nil
    for _, key in ipairs({ "data_properties", "logic_properties" }) do
        for _, p in ipairs(type(ot[key]) == "table" and ot[key] or {}) do
            if type(p) == "table" then
                p.display_name = nil
                if mcp and key == "data_properties" and type(p.condition_operations) == "table" then
                    local ops = p.condition_operations
                    for i = #ops, 1, -1 do
                        if not SEARCH_OPS[ops[i]] then
                            table.remove(ops, i)
                        end
                    end
                end
            end
        end
    end
    if metrics then
        local list = util.array()
        for _, m in ipairs(metrics[ot.id] or {}) do
            list[#list + 1] = knschema.metric_brief(m)
        end
        ot.related_metrics = list
        if #list > 0 then
            ot.related_metric_count = #list
        end
    end
    return ot
end

function M.handle(args, ctx)
    local ids = unique(args.ids)
    local found, missing = knschema.object_types(ctx, args.kn_id, ids), util.array()
    if found == nil or #found < #ids then
        local kn, err = knschema.export(ctx, args.kn_id)
        if not kn then
            return nil, err
        end
        found, missing = knschema.match(kn.object_types, ids)
    end
    local ot_ids = {}
    for _, ot in ipairs(found) do
        ot_ids[#ot_ids + 1] = ot.id
    end
    local metrics = #ot_ids > 0 and knschema.metrics_by_type(ctx, args.kn_id, ot_ids) or nil
    local mcp = ctx.surface ~= "rest"
    for _, ot in ipairs(found) do
        trim_object_type(ot, mcp, metrics)
    end
    return knschema.by_ids_result(args.kn_id, "object_types", found, missing)
end

-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
