-- explore_subgraph (REST and the on-demand gateway): traversal from one object type
-- when the topology is unknown (ontology-query POST-as-GET
-- /in/v1/knowledge-networks/{kn}/subgraph with an empty query_type): paths of
-- path_length relation edges from a page of the source type's instances.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local condition = require "_lib.condition"

local text = util.text

local DEFAULT_LIMIT = 10

local M = {
    name = "explore_subgraph",
    version = "1.0.0",
    kind = "read",
    title = text("子图探索", "Explore Subgraph"),
    description = text(
        "不知道关系路径时，从一个对象类的实例出发探索关联实例：沿所有关系类按 direction（forward " ..
            "沿关系方向、backward 逆向、bidirectional 双向）走 path_length 步（1–3）。condition 只筛选起点" ..
            "实例，limit 为起点实例数（默认 10），翻页用 offset 或 search_after（二选一）。返回 objects（以 " ..
            "<知识网络>-<对象类>-<实例> 为键）、relation_paths、没有任何路径的起点 isolated_objects、total_count。" ..
            "路径已知时用 query_instance_subgraph。",
        "Explores the instances linked to one object type's instances when the relation paths " ..
            "are unknown: along every relation type in the direction given (forward along the " ..
            "relation, backward against it, bidirectional both), path_length steps (1-3). " ..
            "condition filters the source instances only; limit is the number of source " ..
            "instances (default 10); page with offset or search_after (one of them). Returns " ..
            "objects (keyed <network>-<type>-<instance>), relation_paths, the source instances " ..
            "without any path as isolated_objects, and total_count. Use query_instance_subgraph " ..
            "when the path is known."),
    short_description = text(
        "路径未知时从一个对象类的实例出发探索关联实例（direction、path_length 1–3）。返回 objects、" ..
            "relation_paths、isolated_objects、total_count。",
        "Explores the instances linked to one object type's instances when the path is unknown " ..
            "(direction, path_length 1-3). Returns objects, relation_paths, isolated_objects, " ..
            "total_count."),
    group = "query",
    order = 225,
    surfaces = { "rest", "gateway" },
    toon_view = true,
    upstream = "ontology_query",
    input_schema = fields.input {
        required = { "kn_id", "source_object_type_id", "direction", "path_length" },
        ["$defs"] = { condition = condition.def() },
        properties = {
            kn_id = fields.kn_id(),
            source_object_type_id = fields.ot_id(text("起点对象类 ID", "The source object type id")),
            direction = { type = "string", enum = { "forward", "backward", "bidirectional" },
                description = text("forward 沿关系方向，backward 逆向，bidirectional 双向",
                    "forward along the relations, backward against them, bidirectional both") },
            path_length = fields.integer(1, 3, text("路径长度（关系边数）1–3", "Path length in relation edges, 1-3")),
            condition = { ["$ref"] = "#/$defs/condition" },
            concept_groups = { type = "array", maxItems = 50, items = { type = "string", minLength = 1 },
                description = text("只走两端都在这些概念分组中的关系类",
                    "Only relation types with both ends in these concept groups") },
            include_incomplete_path = { type = "boolean", default = false,
                description = text("也返回不足 path_length 步就走不下去的路径",
                    "Also return paths that end before path_length steps") },
            limit = fields.limit(DEFAULT_LIMIT, 10000),
            sort = condition.sort_schema(),
            offset = fields.offset(text("跳过的起点实例数（不能与 search_after 同用）",
                "Source instances to skip (not with search_after)")),
            search_after = fields.search_after(64),
            include_logic_params = fields.include_logic_params("objects"),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            objects = { type = "object", description = text("路径上的实例，以实例 ID 为键",
                "The instances on the paths, by instance id") },
            isolated_objects = { type = "object", description = text("没有任何路径的起点实例",
                "Source instances without any path") },
            relation_paths = { type = "array", items = { type = "object" },
                description = text("relations（relation_type_id、source_object_id、target_object_id）与 length",
                    "relations (relation_type_id, source_object_id, target_object_id) and length") },
            total_count = { type = "integer" },
            search_after = { type = "array" },
        },
    },
}

local function has_cursor(args)
    return type(args.search_after) == "table" and #args.search_after > 0
end

function M.shape_request(args, ctx)
    if args.offset ~= nil and has_cursor(args) then
        return nil, errors.refuse(400, ctx.lang,
            "offset and search_after cannot be used together: page with one of them")
    end
    local bad = errors.dot_ids(ctx.lang, args, "kn_id")
    if bad then
        return nil, bad
    end
    local limit = args.limit
    if limit == nil or limit == 0 then
        limit = DEFAULT_LIMIT
    end
    local body = cljson.object({ source_object_type_id = args.source_object_type_id, direction = args.direction,
        path_length = args.path_length, limit = limit, need_total = true },
        { "source_object_type_id", "direction", "path_length", "concept_groups", "condition",
            "include_incomplete_path", "sort", "limit", "offset", "search_after", "need_total" })
    if type(args.concept_groups) == "table" and #args.concept_groups > 0 then
        body.concept_groups = args.concept_groups
    end
    body.condition = args.condition
    if args.include_incomplete_path then
        body.include_incomplete_path = true
    end
    if type(args.sort) == "table" and #args.sort > 0 then
        body.sort = args.sort
    end
    body.offset = args.offset
    if has_cursor(args) then
        body.search_after = args.search_after
    end
    local query = { query_type = "" }
    if args.include_logic_params then
        query.include_logic_params = "true"
    end
    return {
        upstream = "ontology_query",
        method = "POST",
        path = "/in/v1/knowledge-networks/" .. util.escape(args.kn_id) .. "/subgraph",
        query = query,
        headers = { ["x-http-method-override"] = "GET" },
        json = body,
    }
end

local KEEP = { "objects", "isolated_objects", "relation_paths", "total_count", "search_after" }
M.decode = { keep = KEEP }

-- The one subgraph as ontology-query answered it, without the timing noise;
-- total_count is a number (0 when ontology-query left out a zero), absent on cursor
-- pages.
function M.trim_response(body, args)
    if type(body) ~= "table" then
        body = cljson.object()
    end
    util.keep_only(body, KEEP)
    if type(body.objects) ~= "table" then
        body.objects = cljson.object()
    end
    if type(body.relation_paths) ~= "table" then
        body.relation_paths = util.array()
    end
    if util.is_null(body.isolated_objects) then
        body.isolated_objects = nil
    end
    if util.is_null(body.total_count) then
        body.total_count = nil
        if not has_cursor(args or {}) then
            body.total_count = 0
        end
    end
    if body.search_after == cljson.null then
        body.search_after = nil
    end
    return body
end

return M
