-- query_instance_subgraph: instances linked along relation-type paths
-- (ontology-query POST-as-GET
-- /in/v1/knowledge-networks/{kn}/subgraph?query_type=relation_path).
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local condition = require "_lib.condition"

local text = util.text

local M = {
    name = "query_instance_subgraph",
    version = "1.0.0",
    kind = "read",
    title = text("子图查询", "Query Subgraph"),
    description = text(
        "沿关系类路径查询相互关联的实例子图。每条路径按顺序列出对象类（object_types，至少 2 个）" ..
            "和连接它们的关系类（relation_types，比对象类少 1 个）：第 i 条边的 source_object_type_id " ..
            "和 target_object_type_id 必须是第 i 与第 i+1 个对象类。关系类 ID 与端点先用 search_schema " ..
            "或 get_kn_detail 确认；每个对象类可加 condition 过滤起点或途经实例。返回 entries：objects" ..
            "（以 <对象类>-<实例> 为键，带 _instance_identity）与 relation_paths。",
        "Queries a subgraph of linked instances along relation-type paths. Each path lists its " ..
            "object types in order (object_types, at least 2) and the relation types joining them " ..
            "(relation_types, one fewer): edge i's source_object_type_id and target_object_type_id " ..
            "must be object type i and i+1. Confirm relation type ids and endpoints with " ..
            "search_schema or get_kn_detail first; each object type may carry a condition that " ..
            "filters the instances on the path. Returns entries: objects (keyed by <type>-<id>, " ..
            "each with _instance_identity) and relation_paths."),
    short_description = text(
        "沿关系类路径查询关联实例：object_types 按顺序（至少 2 个），relation_types 连接相邻对象类" ..
            "（第 i 条边从第 i 个到第 i+1 个）。返回 objects（以 <对象类>-<实例> 为键，带 " ..
            "_instance_identity）与 relation_paths。",
        "Queries linked instances along relation-type paths: object_types in order (at least 2), " ..
            "relation_types joining neighbours (edge i goes from object type i to i+1). Returns " ..
            "objects (keyed <type>-<id>, with _instance_identity) and relation_paths."),
    group = "query",
    order = 220,
    surfaces = { "mcp", "compact", "rest" },
    toon_view = true,
    upstream = "ontology_query",
    input_schema = fields.input {
        required = { "kn_id", "relation_type_paths" },
        ["$defs"] = { condition = condition.def() },
        properties = {
            kn_id = fields.kn_id(),
            include_logic_params = fields.include_logic_params("objects"),
            relation_type_paths = {
                type = "array",
                minItems = 1,
                maxItems = 20,
                description = text("关系类路径列表", "Relation-type paths"),
                items = {
                    type = "object",
                    additionalProperties = false,
                    required = { "object_types", "relation_types" },
                    properties = {
                        object_types = {
                            type = "array",
                            minItems = 2,
                            maxItems = 11,
                            description = text("路径上的对象类，按顺序", "Object types along the path, in order"),
                            items = {
                                type = "object",
                                additionalProperties = false,
                                required = { "id" },
                                properties = {
                                    id = { type = "string", minLength = 1 },
                                    condition = { ["$ref"] = "#/$defs/condition" },
                                    sort = condition.sort_schema(),
                                    limit = fields.integer(0, 10000, text("该对象类最多取多少实例（0 为默认 1000）",
                                        "Instances of this type to take (0 means the default 1000)")),
                                },
                            },
                        },
                        relation_types = {
                            type = "array",
                            minItems = 1,
                            maxItems = 10,
                            description = text("连接相邻对象类的关系类，按顺序",
                                "Relation types joining neighbouring object types, in order"),
                            items = {
                                type = "object",
                                additionalProperties = false,
                                required = { "relation_type_id", "source_object_type_id", "target_object_type_id" },
                                properties = {
                                    relation_type_id = { type = "string", minLength = 1 },
                                    source_object_type_id = { type = "string", minLength = 1 },
                                    target_object_type_id = { type = "string", minLength = 1 },
                                },
                            },
                        },
                        limit = fields.integer(0, 10000, text("最多返回的路径数（0 为默认 2000）",
                            "Paths to return at most (0 means the default 2000)")),
                    },
                },
            },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            entries = {
                type = "array",
                items = { type = "object" },
                description = text("每条路径一个子图：objects 与 relation_paths",
                    "One subgraph per path: objects and relation_paths"),
            },
        },
    },
}

function M.shape_request(args)
    local query = { query_type = "relation_path" }
    if args.include_logic_params then
        query.include_logic_params = "true"
    end
    local body = cljson.object()
    body.relation_type_paths = args.relation_type_paths -- opaque: passed on as decoded
    return {
        upstream = "ontology_query",
        method = "POST",
        path = "/in/v1/knowledge-networks/" .. util.escape(args.kn_id) .. "/subgraph",
        query = query,
        headers = { ["x-http-method-override"] = "GET" },
        json = body,
    }
end

-- The subgraphs are passed through: decoded as raw JSON values (cljson.raw), with
-- their timing noise cut out while decoding, and copied byte for byte into the result;
-- the other members of the response are only validated, never decoded.
M.decode = { raw = "entries", drop = { "overall_ms" }, keep = { "entries" } }

-- Keeps the subgraphs as decoded; drops only the timing noise (args given: called
-- by the default handle, whose decode options cut it out already).
function M.trim_response(body, args)
    if type(body) ~= "table" then
        body = cljson.object()
    end
    util.keep_only(body, { "entries" })
    if type(body.entries) ~= "table" then
        body.entries = util.array()
    end
    if args == nil then
        local entries = body.entries
        for i, e in ipairs(entries) do
            if type(e) == "table" or cljson.is_raw(e) then
                entries[i] = cljson.without(e, "overall_ms")
            end
        end
    end
    return body
end


-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
