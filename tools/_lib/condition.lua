-- _lib.condition: the ontology-query condition tree shared by the instance query
-- tools: its schema (recursive, through $defs), the legacy flat filters, and the
-- helpers that read a condition.
local util = require "_lib.util"

local text = util.text

local M = {}

M.operations = {
    "and", "or", "==", "!=", ">", ">=", "<", "<=", "in", "not_in", "like", "not_like",
    "range", "out_range", "regex", "exist", "not_exist", "match", "knn",
}

-- filters take the comparison operators only (no and/or/exist/not_exist/knn)
M.filter_operations = {
    "==", "!=", ">", ">=", "<", "<=", "in", "not_in", "like", "not_like", "range",
    "out_range", "regex", "match",
}

local VALUE_TYPES = { "string", "number", "boolean", "array", "null" }

-- The condition definition; put it under input_schema["$defs"].condition and
-- point at it with { ["$ref"] = "#/$defs/condition" }.
function M.def()
    return {
        type = "object",
        additionalProperties = false,
        required = { "operation" },
        description = text(
            "查询条件树。叶子节点比较一个属性：{field, operation, value}；" ..
                "and/or 节点用 sub_conditions 组合子条件。match 为全文检索，knn 为语义检索" ..
                "（需 limit_key=\"k\" 与 limit_value）。",
            "A condition tree. A leaf compares one property: {field, operation, " ..
                "value}; an and/or node combines sub_conditions. match is full-text search, " ..
                "knn is semantic search (with limit_key=\"k\" and limit_value)."),
        properties = {
            field = {
                type = "string",
                description = text(
                    "属性名（叶子节点必填；and/or 节点不填）",
                    "Property name (leaves only; omit on and/or nodes)"),
            },
            operation = { type = "string", enum = M.operations },
            sub_conditions = {
                type = "array",
                maxItems = 100,
                items = { ["$ref"] = "#/$defs/condition" },
                description = text(
                    "and/or 节点的子条件",
                    "Children of an and/or node"),
            },
            value_from = { type = "string", enum = { "const" } },
            value = {
                type = VALUE_TYPES,
                description = text(
                    "比较值；in/not_in/range/out_range 用数组",
                    "Value to compare; an array for in/not_in/range/out_range"),
            },
            limit_key = { type = "string", enum = { "k" } },
            limit_value = { type = "integer", minimum = 1 },
        },
    }
end

function M.filters_schema()
    return {
        type = "array",
        maxItems = 100,
        description = text(
            "旧版扁平过滤条件，全部以 AND 组合；同时给出 condition 时忽略 filters。",
            "Legacy flat filters, all ANDed; ignored when condition is given."),
        items = {
            type = "object",
            additionalProperties = false,
            required = { "field", "op", "value" },
            properties = {
                field = { type = "string", minLength = 1 },
                op = { type = "string", enum = M.filter_operations },
                value = { type = VALUE_TYPES },
            },
        },
    }
end

function M.sort_schema()
    return {
        type = "array",
        maxItems = 20,
        description = text(
            "排序：[{field, direction}]，direction 为 asc 或 desc",
            "Sort order: [{field, direction}], direction asc or desc"),
        items = {
            type = "object",
            additionalProperties = false,
            required = { "field", "direction" },
            properties = {
                field = { type = "string", minLength = 1 },
                direction = { type = "string", enum = { "asc", "desc" } },
            },
        },
    }
end

-- The condition sent downstream: the caller's condition as decoded (it wins),
-- else the filters ANDed, else nil.
function M.effective(condition, filters, new_object, new_array)
    if condition ~= nil then
        return condition
    end
    if type(filters) ~= "table" or #filters == 0 then
        return nil
    end
    local subs = new_array()
    for i, f in ipairs(filters) do
        local node = new_object()
        node.field = f.field
        node.operation = f.op
        node.value = f.value
        node.value_from = "const"
        subs[i] = node
    end
    local root = new_object()
    root.operation = "and"
    root.sub_conditions = subs
    return root
end

local SCORED = { knn = true, match = true, multi_match = true }

-- True when the condition tree (or a filter) ranks by relevance, which is when
-- _score means something to the caller.
function M.uses_scoring(node, depth)
    depth = depth or 0
    if type(node) ~= "table" or depth > 64 then
        return false
    end
    if SCORED[node.operation] then
        return true
    end
    if type(node.sub_conditions) == "table" then
        for _, sub in ipairs(node.sub_conditions) do
            if M.uses_scoring(sub, depth + 1) then
                return true
            end
        end
    end
    return false
end

return M
