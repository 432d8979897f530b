-- get_relation_types: relation types of a network by id or name, from the
-- bkn-backend export view.
local util = require "_lib.util"
local knschema = require "_lib.knschema"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "get_relation_types",
    version = "1.0.0",
    kind = "read",
    title = text("关系类详情", "Relation Type Detail"),
    description = text(
        "按 ID（或名称）获取关系类详情：起止对象类与映射规则（mapping_rules）。ID 来自 get_kn_detail " ..
            "或 search_schema；找不到的放在 missing。",
        "Gets relation types by id (or name): their source and target object types and " ..
            "mapping_rules. Ids come from get_kn_detail or search_schema; ids not found are " ..
            "listed in missing."),
    group = "discovery",
    order = 150,
    surfaces = { "mcp", "rest" },
    toon_view = true,
    upstream = "bkn_backend",
    input_schema = fields.input {
        required = { "kn_id", "ids" },
        properties = {
            kn_id = fields.kn_id(),
            ids = fields.ids("关系类 ID 或名称（来自 get_kn_detail）",
                "Relation type ids or names (from get_kn_detail)"),
        },
    },
    output_schema = knschema.by_ids_output("relation_types"),
}

function M.handle(args, ctx)
    local kn, err = knschema.export(ctx, args.kn_id)
    if not kn then
        return nil, err
    end
    local matched, missing = knschema.match(kn.relation_types, args.ids)
    return knschema.by_ids_result(args.kn_id, "relation_types", matched, missing)
end

-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
