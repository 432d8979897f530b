-- describe_resource (REST only): the columns and connector of one data resource
-- (vega /in/v1/resources/{id} and /in/v1/catalogs/{id}). The resource is read once.
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"

local text = util.text

local M = {
    name = "describe_resource",
    version = "1.0.0",
    kind = "read",
    title = text("数据资源详情", "Resource Detail"),
    description = text(
        "查看一个数据资源的连接器类型和字段（名称、类型、说明），用于编写 run_sql。",
        "Shows one data resource's connector type and columns (name, type, description), " ..
            "for writing run_sql queries."),
    group = "query",
    order = 420,
    surfaces = { "rest" },
    upstream = "vega",
    input_schema = fields.input {
        required = { "resource_id" },
        properties = {
            resource_id = fields.string(
                text("数据资源 ID（见 list_resources）", "Data resource id (from list_resources)"), 256),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            resource_id = { type = "string" },
            connector_type = { type = "string" },
            columns = { type = "array", items = { type = "object" } },
        },
    },
}

local function first_entry(body)
    if type(body) == "table" and type(body.entries) == "table" and type(body.entries[1]) == "table" then
        return body.entries[1]
    end
    return nil
end

-- GET an envelope {"entries":[…]} -> first entry | nil (absent) | nil, err
local function get_first(ctx, path)
    local body, err = errors.fetch(ctx, { upstream = "vega", method = "GET", path = path })
    if body == nil then
        return nil, err
    end
    return first_entry(body)
end

-- The response for a resource and its catalog (columns are the decoded
-- schema_definition entries, trimmed in place).
local function result_of(resource, catalog)
    local columns = type(resource.schema_definition) == "table" and resource.schema_definition or util.array()
    for _, c in ipairs(columns) do
        util.keep_only(c, { "name", "type", "description" })
        if c.description == "" or util.is_null(c.description) then
            c.description = nil
        end
    end
    return util.object({ resource_id = resource.id, connector_type = catalog.connector_type,
        columns = util.array(columns) }, { "resource_id", "connector_type", "columns" })
end

function M.handle(args, ctx)
    local bad = errors.dot_ids(ctx.lang, args, "resource_id")
    if bad then
        return nil, bad
    end
    local id = args.resource_id
    local resource, err = get_first(ctx, "/in/v1/resources/" .. util.escape(id))
    if err then
        return nil, err
    end
    if resource == nil then
        return nil, errors.refuse(404, ctx.lang, "resource " .. id .. " not found")
    end
    local catalog_id = resource.catalog_id
    if type(catalog_id) ~= "string" or catalog_id == "" then
        return nil, errors.refuse(400, ctx.lang, "resource " .. id .. " has no catalog")
    end
    local catalog
    catalog, err = get_first(ctx, "/in/v1/catalogs/" .. util.escape(catalog_id))
    if err then
        return nil, err
    end
    if catalog == nil or type(catalog.connector_type) ~= "string" or catalog.connector_type == "" then
        return nil, errors.refuse(400, ctx.lang, "catalog " .. catalog_id .. " of resource " .. id ..
            " not found or has no connector type")
    end
    return result_of(resource, catalog)
end

return M
