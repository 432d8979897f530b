-- list_resources (REST only): data resources visible to the caller (vega
-- GET /in/v1/resources), or, with kn_id, every resource bound to the network's
-- object types with the unbound, stale and missing bindings named.
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"

local text = util.text

local CATEGORIES = { "table", "file", "fileset", "api", "metric", "topic", "index", "logicview", "dataset" }

local M = {
    name = "list_resources",
    version = "1.0.0",
    kind = "read",
    title = text("数据资源列表", "Data Resources"),
    description = text(
        "列出可访问的数据资源（resource_id 用于 run_sql 的 {{.resource_id}} 占位符）。给出 kn_id 时" ..
            "列出该知识网络对象类绑定的全部资源（此时忽略 catalog_id、offset、limit），并报告未绑定、" ..
            "绑定失效和读取失败的对象类。",
        "Lists the data resources you can access (resource_id goes into run_sql's " ..
            "{{.resource_id}} placeholders). With kn_id, lists every resource bound to the " ..
            "network's object types (catalog_id, offset and limit are then ignored) and reports " ..
            "unbound, stale and missing bindings."),
    group = "query",
    order = 410,
    surfaces = { "rest" },
    upstream = { "vega", "bkn_backend" },
    input_schema = fields.input {
        properties = {
            kn_id = fields.string(text("知识网络 ID（可选）", "Knowledge network id (optional)")),
            catalog_id = { type = "string", minLength = 1, description = text("数据目录 ID", "Catalog id") },
            type = {
                type = "string",
                enum = CATEGORIES,
                description = text("资源类别", "Resource category"),
            },
            offset = { type = "integer", minimum = 0 },
            limit = { type = "integer", minimum = 1, maximum = 1000 },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            entries = { type = "array", items = { type = "object" } },
            total_count = { type = "integer" },
            unbound = { type = "array", items = { type = "object" } },
            stale_binding = { type = "array", items = { type = "object" } },
            missing = { type = "array", items = { type = "object" } },
        },
    },
}

local ENTRY_KEYS = { "resource_id", "name", "type", "status", "catalog_id" }

-- A vega resource as a list entry (vega's id/category are renamed).
local function entry_of(r)
    return util.object({ resource_id = r.id, name = r.name, type = r.category, status = r.status,
        catalog_id = r.catalog_id }, ENTRY_KEYS)
end

function M.shape_request(args)
    return {
        upstream = "vega",
        method = "GET",
        path = "/in/v1/resources",
        query = {
            catalog_id = args.catalog_id,
            category = args.type,
            offset = util.query_value(args.offset),
            limit = util.query_value(args.limit),
        },
    }
end

local function list_all(args, ctx)
    local body, err = errors.fetch(ctx, M.shape_request(args))
    if body == nil then
        return nil, err
    end
    local entries = util.array()
    for _, r in ipairs(type(body.entries) == "table" and body.entries or {}) do
        if type(r) == "table" then
            entries[#entries + 1] = entry_of(r)
        end
    end
    local total = body.total_count
    if util.is_null(total) then
        total = #entries
    end
    return util.object({ entries = entries, total_count = total }, { "entries", "total_count" })
end

local function list_bound(args, ctx)
    local kn, err = errors.fetch(ctx, { upstream = "bkn_backend", method = "GET",
        path = "/in/v1/knowledge-networks/" .. util.escape(args.kn_id),
        query = { include_detail = "true", mode = "export" } })
    if kn == nil then
        return nil, err
    end
    local unbound, stale, missing, entries = util.array(), util.array(), util.array(), util.array()
    local targets, seen = {}, {}
    for _, ot in ipairs(type(kn.object_types) == "table" and kn.object_types or {}) do
        local ds = type(ot) == "table" and ot.data_source or nil
        local id = type(ds) == "table" and ds.id or nil
        if type(id) ~= "string" or id == "" then
            unbound[#unbound + 1] = util.object({ object_type_id = ot.id })
        elseif type(ds.type) == "string" and ds.type ~= "" and ds.type ~= "resource" then
            stale[#stale + 1] = util.object({ object_type_id = ot.id, resource_id = id, source_type = ds.type },
                { "object_type_id", "resource_id", "source_type" })
        elseif not seen[id] then
            seen[id] = true
            targets[#targets + 1] = { ot = ot.id, id = id }
        end
    end
    local want = args.type and args.type:lower()
    local failed, first_failure = 0, nil
    for _, t in ipairs(targets) do
        local r, e = ctx.http { upstream = "vega", method = "GET", path = "/in/v1/resources/" .. util.escape(t.id) }
        local body = util.is_2xx(r) and util.try_json(r) or nil
        local resource = type(body) == "table" and type(body.entries) == "table" and body.entries[1] or nil
        if type(resource) == "table" then
            if want == nil or (type(resource.category) == "string" and resource.category:lower() == want) then
                entries[#entries + 1] = entry_of(resource)
            end
        else
            failed = failed + 1
            local reason = r == nil and "unreachable" or (util.is_2xx(r) and "not_found" or "status_" .. r.status)
            if r ~= nil and (r.status == 404 or r.status == 403) then
                reason = r.status == 404 and "not_found" or "forbidden"
            end
            missing[#missing + 1] = util.object({ object_type_id = t.ot, resource_id = t.id, reason = reason },
                { "object_type_id", "resource_id", "reason" })
            if first_failure == nil then
                first_failure = { res = r, err = e }
            end
        end
    end
    -- every target failed and not for a 404/403: an outage, not an empty network
    if #targets > 0 and failed == #targets then
        local r = first_failure.res
        if r == nil or (r.status ~= 404 and r.status ~= 403 and not util.is_2xx(r)) then
            return nil, errors.from_response(r, first_failure.err, ctx.lang)
        end
    end
    local out = util.object({ entries = entries, total_count = #entries },
        { "entries", "total_count", "unbound", "stale_binding", "missing" })
    if #unbound > 0 then
        out.unbound = unbound
    end
    if #stale > 0 then
        out.stale_binding = stale
    end
    if #missing > 0 then
        out.missing = missing
    end
    return out
end

function M.handle(args, ctx)
    if args.kn_id ~= nil then
        return list_bound(args, ctx)
    end
    return list_all(args, ctx)
end

return M
