-- list_knowledge_networks: the knowledge networks the caller can see
-- (bkn-backend GET /in/v1/knowledge-networks).
local util = require "_lib.util"
local fields = require "_lib.fields"

local text = util.text

local DEFAULT_LIMIT = 20

local ENTRY_KEYS = { "id", "name", "description", "module_type", "business_domain" }

local M = {
    name = "list_knowledge_networks",
    version = "1.0.0",
    kind = "read",
    title = text("知识网络列表", "Knowledge Networks"),
    description = text(
        "列出当前用户可访问的业务知识网络（id、名称、说明）。不知道该用哪个 kn_id 时先调用它，" ..
            "再用 get_kn_detail 或 search_schema 查看所选网络的结构。可按名称模糊过滤，" ..
            "用 limit/offset 翻页，total_count 为符合条件的网络总数。",
        "Lists the business knowledge networks the caller can access (id, name, " ..
            "description). Call it first when you do not know which kn_id to use, then " ..
            "inspect the chosen network with get_kn_detail or search_schema. Filter by a " ..
            "name fragment and page with limit/offset; total_count is the number of matching " ..
            "networks."),
    short_description = text(
        "列出当前用户可访问的业务知识网络（id、名称、说明）。不知道用哪个 kn_id 时先调用，" ..
            "再用 get_kn_detail 或 search_schema 查看结构。",
        "Lists the knowledge networks the caller can access (id, name, description). Call it " ..
            "first when you do not know the kn_id, then get_kn_detail or search_schema."),
    group = "discovery",
    order = 110,
    surfaces = { "mcp", "compact", "rest" },
    upstream = "bkn_backend",
    input_schema = fields.input {
        properties = {
            name_pattern = {
                type = "string",
                maxLength = 256,
                description = text(
                    "按名称模糊匹配（包含该片段即可）",
                    "Matches networks whose name contains this fragment"),
            },
            limit = fields.limit(DEFAULT_LIMIT, 1000),
            offset = fields.offset(),
            sort = {
                type = "string",
                maxLength = 64,
                description = text(
                    "排序字段，例如 update_time（默认）、name",
                    "Sort field, e.g. update_time (the default) or name"),
            },
            direction = {
                type = "string",
                enum = { "asc", "desc" },
                description = text("排序方向", "Sort direction"),
            },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            entries = {
                type = "array",
                items = {
                    type = "object",
                    properties = {
                        id = { type = "string" },
                        name = { type = "string" },
                        description = { type = "string" },
                        module_type = { type = "string" },
                        business_domain = { type = "string" },
                    },
                },
            },
            total_count = { type = "integer" },
        },
    },
}

-- The exact bkn-backend request for validated args.
function M.shape_request(args)
    local query = {}
    local limit = args.limit
    if limit == nil or limit == 0 then
        limit = DEFAULT_LIMIT
    end
    query.limit = util.query_value(limit)
    for _, k in ipairs({ "name_pattern", "offset", "sort", "direction" }) do
        local v = util.query_value(args[k])
        if v ~= nil and v ~= "" then
            query[k] = v
        end
    end
    return {
        upstream = "bkn_backend",
        method = "GET",
        path = "/in/v1/knowledge-networks",
        query = query,
    }
end

-- Keeps per entry only what helps choose a network. bkn-backend names the
-- human text `comment`; it is given to the model as `description` (a
-- `description` field is normally absent on real data).
function M.trim_response(body)
    if type(body) ~= "table" then
        return { entries = util.array(), total_count = 0 }
    end
    local entries = body.entries
    if type(entries) ~= "table" then
        entries = util.array()
        body.entries = entries
    end
    for _, e in ipairs(entries) do
        if type(e) == "table" then
            if util.is_null(e.description) or e.description == "" then
                local comment = e.comment
                e.description = (type(comment) == "string" and comment ~= "") and comment or nil
            end
            util.keep_only(e, ENTRY_KEYS)
        end
    end
    util.keep_only(body, { "entries", "total_count" })
    if util.is_null(body.total_count) then
        body.total_count = #entries
    end
    return body
end


return M
