-- get_kn_detail: the structure of one knowledge network (concept groups, object,
-- relation and action types) from the bkn-backend export view, with related
-- metric counts.
local util = require "_lib.util"
local knschema = require "_lib.knschema"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "get_kn_detail",
    version = "1.0.0",
    kind = "read",
    title = text("网络结构", "Network Structure"),
    description = text(
        "获取一个知识网络的整体结构：概念分组、对象类（数据来源、属性、主键、关联指标数）、关系类" ..
            "（起止对象类）与行动类。detail_level=summary（默认）时属性只含名称与类型；需要映射字段和" ..
            "可用操作时用 full 或 get_object_types。",
        "Gets the structure of one knowledge network: concept groups, object types (data " ..
            "source, properties, primary keys, related metric count), relation types (source " ..
            "and target object types) and action types. With detail_level=summary (default) " ..
            "properties carry only name and type; use full or get_object_types for mapped " ..
            "fields and operations."),
    short_description = text(
        "获取一个知识网络的结构：概念分组、对象类、关系类与行动类。映射字段和可用操作用 " ..
            "detail_level=full 或 get_object_types。",
        "Gets the structure of one knowledge network: concept groups, object, relation and " ..
            "action types. For mapped fields and operations use detail_level=full or get_object_types."),
    group = "discovery",
    order = 120,
    surfaces = { "mcp", "compact", "rest" },
    toon_view = true,
    upstream = "bkn_backend",
    input_schema = fields.input {
        required = { "kn_id" },
        properties = {
            kn_id = fields.kn_id(),
            detail_level = {
                type = "string",
                enum = { "summary", "full" },
                default = "summary",
                description = text("summary：属性只含名称与类型；full：完整定义",
                    "summary: properties with name and type only; full: complete definitions"),
            },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            id = { type = "string" },
            name = { type = "string" },
            comment = { type = "string" },
            concept_groups = { type = "array", items = { type = "object" } },
            object_types = { type = "array", items = { type = "object" } },
            relation_types = { type = "array", items = { type = "object" } },
            action_types = { type = "array", items = { type = "object" } },
        },
    },
}

local function array_field(obj, key)
    if type(obj[key]) ~= "table" then
        obj[key] = util.array()
    end
    return obj[key]
end

-- Trims the export view in place. metrics: { [ot_id] = {…} } or nil.
local function result_of(kn, detail_level, metrics)
    util.keep_only(kn, { "id", "name", "comment", "concept_groups", "object_types", "relation_types",
        "action_types" })
    for _, g in ipairs(array_field(kn, "concept_groups")) do
        util.keep_only(g, { "id", "name", "object_type_ids" })
    end
    local summary = detail_level ~= "full"
    for _, ot in ipairs(array_field(kn, "object_types")) do
        if type(ot) == "table" then
            ot._score = nil
            if summary then
                for _, key in ipairs({ "data_properties", "logic_properties" }) do
                    for _, p in ipairs(type(ot[key]) == "table" and ot[key] or {}) do
                        util.keep_only(p, { "name", "type" })
                    end
                end
            end
            local n = metrics and metrics[ot.id] and #metrics[ot.id] or 0
            if n > 0 then
                ot.related_metric_count = n
            end
        end
    end
    for _, rt in ipairs(array_field(kn, "relation_types")) do
        if type(rt) == "table" then
            rt._score = nil
            if summary then
                rt.mapping_rules, rt.source_object_type, rt.target_object_type = nil, nil, nil
            end
        end
    end
    for _, at in ipairs(array_field(kn, "action_types")) do
        if type(at) == "table" then
            at._score = nil
        end
    end
    return kn
end

function M.handle(args, ctx)
    local kn, err = knschema.export(ctx, args.kn_id)
    if not kn then
        return nil, err
    end
    local ids = {}
    for _, ot in ipairs(type(kn.object_types) == "table" and kn.object_types or {}) do
        if type(ot) == "table" and type(ot.id) == "string" then
            ids[#ids + 1] = ot.id
        end
    end
    local metrics = #ids > 0 and knschema.metrics_by_type(ctx, args.kn_id, ids) or nil
    return result_of(kn, args.detail_level, metrics)
end

-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
