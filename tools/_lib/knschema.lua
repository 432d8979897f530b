-- _lib.knschema: the bkn-backend reads shared by the discovery tools: the export
-- view of a network, object-type details, related metrics, and id/name matching
-- (shared by get_kn_detail, get_object_types and get_relation_types).
local util = require "_lib.util"
local errors = require "_lib.errors"

local M = {}

local METRIC_PAGE = 1000
local METRIC_MAX = 10000
local METRIC_IDS_PER_CALL = 100

local function kn_path(kn_id)
    return "/in/v1/knowledge-networks/" .. util.escape(kn_id)
end
M.kn_path = kn_path

-- GET the export view of a network -> decoded kn | nil, err (bkn-backend errors
-- re-wrapped with their status).
function M.export(ctx, kn_id)
    local res, err = ctx.http { upstream = "bkn_backend", method = "GET", path = kn_path(kn_id),
        query = { include_detail = "true", mode = "export" } }
    if res ~= nil and res.status == 404 and (res.body == nil or res.body == "") then
        return nil, errors.refuse(404, ctx.lang, "knowledge network " .. kn_id .. " not found")
    end
    if not util.is_2xx(res) then
        return nil, errors.from_response(res, err, ctx.lang)
    end
    return errors.json(res, ctx.lang)
end

-- GET object-type details by ids -> entries | nil (any failure: the caller falls back)
function M.object_types(ctx, kn_id, ids)
    local parts = {}
    for i, id in ipairs(ids) do
        parts[i] = util.escape(id)
    end
    return util.entries_of(ctx.http { upstream = "bkn_backend", method = "GET",
        path = kn_path(kn_id) .. "/object-types/" .. table.concat(parts, ","),
        query = { include_detail = "true" }, headers = { ["x-http-method-override"] = "GET" } })
end

-- Metrics scoped to the given object types -> { [ot_id] = {metric…} } | nil.
-- A failure only logs a warning: counts are then omitted.
function M.metrics_by_type(ctx, kn_id, ot_ids)
    local wanted, by_type = {}, {}
    for _, id in ipairs(ot_ids) do
        wanted[id] = true
    end
    for first = 1, #ot_ids, METRIC_IDS_PER_CALL do
        local chunk = table.move(ot_ids, first, math.min(first + METRIC_IDS_PER_CALL - 1, #ot_ids), 1, {})
        local offset = 0
        while offset < METRIC_MAX do
            local res = ctx.http { upstream = "bkn_backend", method = "GET", path = kn_path(kn_id) .. "/metrics",
                query = { scope_type = "object_type", scope_ref = table.concat(chunk, ","),
                    limit = tostring(METRIC_PAGE), offset = tostring(offset) } }
            local body = util.is_2xx(res) and util.try_json(res) or nil
            if type(body) ~= "table" or type(body.entries) ~= "table" then
                ctx.log("warn", "metrics of " .. kn_id .. " unavailable: related metrics omitted")
                return nil
            end
            for _, m in ipairs(body.entries) do
                if type(m) == "table" and wanted[m.scope_ref] then
                    local list = by_type[m.scope_ref] or {}
                    list[#list + 1] = m
                    by_type[m.scope_ref] = list
                end
            end
            offset = offset + #body.entries
            local total = math.tointeger(body.total_count)
            if #body.entries < METRIC_PAGE or (total and offset >= total) then
                break
            end
        end
    end
    return by_type
end

-- Picks items by id first, then by name; deduplicated, in request order.
-- -> matched (array), missing (array of requested strings)
function M.match(items, ids)
    local by_id, by_name = {}, {}
    for _, it in ipairs(type(items) == "table" and items or {}) do
        if type(it) == "table" then
            if it.id ~= nil and by_id[it.id] == nil then
                by_id[it.id] = it
            end
            if it.name ~= nil and by_name[it.name] == nil then
                by_name[it.name] = it
            end
        end
    end
    local matched, missing, seen = util.array(), util.array(), {}
    for _, want in ipairs(ids) do
        local it = by_id[want] or by_name[want]
        if it == nil then
            missing[#missing + 1] = want
        elseif not seen[it] then
            seen[it] = true
            matched[#matched + 1] = it
        end
    end
    return matched, missing
end

-- by_ids_output(key) -> the output schema of a lookup by ids: kn_id, what was found
-- under key, the ids not found as missing.
function M.by_ids_output(key)
    return {
        type = "object",
        properties = {
            kn_id = { type = "string" },
            [key] = { type = "array", items = { type = "object" } },
            missing = { type = "array", items = { type = "string" } },
        },
    }
end

-- by_ids_result(kn_id, key, found, missing) -> {kn_id, <key> = found, missing} (missing
-- only when an id was not found).
function M.by_ids_result(kn_id, key, found, missing)
    local out = util.object({ kn_id = kn_id, [key] = util.array(found) }, { "kn_id", key, "missing" })
    if #missing > 0 then
        out.missing = missing
    end
    return out
end

-- Compact related-metric entry for get_object_types (field order stated).
function M.metric_brief(m)
    local out = util.object({ id = m.id, name = m.name }, { "id", "name", "comment", "metric_type", "unit",
        "unit_type", "scope_ref", "analysis_dimensions", "time_dimension" })
    for _, k in ipairs({ "comment", "metric_type", "unit", "unit_type", "scope_ref" }) do
        if type(m[k]) == "string" and m[k] ~= "" then
            out[k] = m[k]
        end
    end
    if type(m.analysis_dimensions) == "table" and #m.analysis_dimensions > 0 then
        local names = util.array()
        for _, d in ipairs(m.analysis_dimensions) do
            names[#names + 1] = type(d) == "table" and d.name or d
        end
        out.analysis_dimensions = names
    end
    if type(m.time_dimension) == "table" and type(m.time_dimension.property) == "string" then
        out.time_dimension = m.time_dimension.property
    end
    return out
end

return M
