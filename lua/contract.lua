-- contract: validates a tool table (docs/writing-tools.md) and builds its tools/list entry.
-- One source of truth for the server loader, --check-tools and the busted specs.
local schema = require "schema"
local catalog = require "catalog"
local loaderr = require "loaderr"

local M = {}

local has_cljson, cljson = pcall(require, "cljson")
if not has_cljson then
    cljson = nil
end

M.kinds = { read = true, execute = true }
-- proxy: reached only through the routes the tool declares (routes), never listed
M.surfaces = { mcp = true, compact = true, rest = true, ptc = true, proxy = true, gateway = true }

local GROUPS = {}
for _, g in ipairs(catalog.groups) do
    GROUPS[g] = true
end

local ANNOTATIONS = {
    readOnlyHint = true, destructiveHint = true, idempotentHint = true, openWorldHint = true,
}

-- key -> checker(value, tool, add_error); nil value means "absent"
local KEYS = {}

local function is_array_of_strings(v)
    if type(v) ~= "table" then
        return false
    end
    local n = 0
    for _ in pairs(v) do
        n = n + 1
    end
    for i = 1, n do
        if type(v[i]) ~= "string" then
            return false
        end
    end
    return true
end

local function check_locale_text(v, key, add)
    if type(v) ~= "table" then
        return add(key .. " must be a table {[\"zh-CN\"]=..., [\"en-US\"]=...}")
    end
    for _, lang in ipairs(catalog.languages) do
        if type(v[lang]) ~= "string" or v[lang] == "" then
            add(key .. " is missing the " .. lang .. " text")
        end
    end
    for k in pairs(v) do
        local known = false
        for _, lang in ipairs(catalog.languages) do
            known = known or k == lang
        end
        if not known then
            add(key .. " has an unsupported language " .. tostring(k))
        end
    end
end

KEYS.name = function(v, _, add, file_name)
    if type(v) ~= "string" or not v:match("^[a-z][a-z0-9_]*$") or #v > 64 then
        return add("name must be a lower-case identifier ([a-z][a-z0-9_]*, at most 64)")
    end
    if file_name ~= nil and v ~= file_name then
        add("name '" .. v .. "' differs from the file name '" .. tostring(file_name) .. "'")
    end
end

KEYS.version = function(v, _, add)
    if type(v) ~= "string" or not (v:match("^%d+%.%d+%.%d+$") or
            v:match("^%d+%.%d+%.%d+[%-+][%w%.%-+]+$")) then
        add("version must be a semantic version such as \"1.0.0\"")
    end
end

KEYS.kind = function(v, _, add)
    if not M.kinds[v] then
        add("kind must be \"read\" or \"execute\"")
    end
end

KEYS.title = function(v, _, add)
    check_locale_text(v, "title", add)
end

KEYS.description = function(v, _, add)
    check_locale_text(v, "description", add)
end

-- The description /mcp-compact lists (optional; the full description otherwise).
KEYS.short_description = function(v, _, add)
    check_locale_text(v, "short_description", add)
end

KEYS.group = function(v, _, add)
    if not GROUPS[v] then
        add("group must be one of " .. table.concat(catalog.groups, ", "))
    end
end

KEYS.order = function(v, _, add)
    if math.type(v) ~= "integer" or v < 1 then
        add("order must be a positive integer")
    end
end

KEYS.surfaces = function(v, _, add)
    if not is_array_of_strings(v) or #v == 0 then
        return add("surfaces must be a non-empty array of mcp, compact, rest, ptc, proxy, gateway")
    end
    local seen = {}
    for _, s in ipairs(v) do
        if not M.surfaces[s] then
            add("surfaces has an unknown surface " .. s)
        elseif seen[s] then
            add("surfaces lists " .. s .. " twice")
        end
        seen[s] = true
    end
end

KEYS.rest_alias = function(v, tool, add)
    if v == nil then
        return
    end
    if type(v) ~= "string" or not v:match("^[a-z][a-z0-9_%-]*$") then
        return add("rest_alias must be a path segment ([a-z][a-z0-9_-]*)")
    end
    local rest = false
    for _, s in ipairs(type(tool.surfaces) == "table" and tool.surfaces or {}) do
        rest = rest or s == "rest"
    end
    if not rest then
        add("rest_alias needs \"rest\" among the surfaces")
    end
end

KEYS.gate = function(v, _, add)
    if v ~= nil and (type(v) ~= "string" or not v:match("^[A-Z][A-Z0-9_]*$")) then
        add("gate must be a feature switch name such as EXECUTE_SKILL_ENABLED")
    end
end

KEYS.formats = function(v, _, add)
    if v == nil then
        return
    end
    local ok = is_array_of_strings(v) and ((#v == 1 and v[1] == "json") or
        (#v == 2 and ((v[1] == "json" and v[2] == "toon") or (v[1] == "toon" and v[2] == "json"))))
    if not ok then
        add("formats must be {\"json\", \"toon\"} or {\"json\"}")
    end
end

-- Set by check() from opts.upstreams: the configured upstream names (array), or nil
-- when the caller knows no configuration (then names are checked for form only).
local configured_upstreams = nil

-- upstream: the configured upstream a tool calls through ctx.http, or an array of
-- every one it calls.
KEYS.upstream = function(v, _, add)
    local list = type(v) == "string" and { v } or v
    if not is_array_of_strings(list) or #list == 0 then
        return add("upstream must be a configured upstream name such as \"ontology_query\", " ..
            "or a non-empty array of them")
    end
    local seen = {}
    for i, name in ipairs(list) do
        local key = type(v) == "string" and "upstream" or "upstream/" .. i
        if not name:match("^[a-z][a-z0-9_]*$") then
            add("upstream must be a configured upstream name such as \"ontology_query\" (" ..
                key .. " is '" .. name .. "')")
        elseif seen[name] then
            add(key .. ": '" .. name .. "' is listed twice")
        elseif configured_upstreams and not M.has_upstream(configured_upstreams, name) then
            add(M.unknown_upstream(key, name, configured_upstreams))
        end
        seen[name] = true
    end
end

-- has_upstream(names, name) -> whether name is among the configured names
function M.has_upstream(names, name)
    for _, n in ipairs(names) do
        if n == name then
            return true
        end
    end
    return false
end

-- The error for an upstream name that is not configured, with the nearest configured
-- name as a hint.
function M.unknown_upstream(where, name, names)
    return where .. ": '" .. name .. "' is not a configured upstream" .. loaderr.suggest(name, names) ..
        "; configured: " .. table.concat(names, ", ")
end

-- Set by check() for a file whose bytes and runtime are unchanged since the generation
-- that validated its schemas: the (pure, comparatively costly) schema walk is skipped.
local schemas_known_valid = false

local function check_schema_key(key, v, add, required)
    if v == nil then
        if required then
            add(key .. " is required")
        end
        return
    end
    local ok, errs = true, nil
    if not schemas_known_valid then
        ok, errs = schema.check_schema(v)
    end
    if not ok then
        for _, e in ipairs(errs) do
            add(key .. e)
        end
        return
    end
    if v.type ~= "object" then
        add(key .. ": type must be \"object\"")
    end
end

KEYS.input_schema = function(v, _, add)
    check_schema_key("input_schema", v, add, true)
    if type(v) == "table" and type(v.properties) == "table" then
        -- the core owns these two arguments and adds them itself
        for _, owned in ipairs({ "bkn_context", "response_format" }) do
            if v.properties[owned] ~= nil then
                add("input_schema must not declare " .. owned .. " (the core adds it)")
            end
        end
    end
end

KEYS.output_schema = function(v, _, add)
    check_schema_key("output_schema", v, add, false)
end

KEYS.annotations = function(v, tool, add)
    if v == nil then
        return
    end
    if type(v) ~= "table" then
        return add("annotations must be a table")
    end
    for k, x in pairs(v) do
        if not ANNOTATIONS[k] then
            add("annotations has an unknown hint " .. tostring(k))
        elseif type(x) ~= "boolean" then
            add("annotations." .. k .. " must be a boolean")
        end
    end
    if v.readOnlyHint == true and tool.kind == "execute" then
        add("annotations.readOnlyHint contradicts kind \"execute\"")
    end
    if v.readOnlyHint == false and tool.kind == "read" then
        add("annotations.readOnlyHint contradicts kind \"read\"")
    end
end

local function optional_function(key)
    return function(v, _, add)
        if v ~= nil and type(v) ~= "function" then
            add(key .. " must be a function")
        end
    end
end

KEYS.handle = function(v, tool, add)
    if v == nil then
        if type(tool.shape_request) ~= "function" then
            add("handle is required (or shape_request, for the default handle)")
        end
    elseif type(v) ~= "function" then
        add("handle must be a function (args, ctx)")
    end
end
KEYS.shape_request = optional_function("shape_request")
KEYS.trim_response = optional_function("trim_response")
KEYS.render = optional_function("render")

-- The failed step an upstream failure's description names (default handle).
KEYS.upstream_step = function(v, _, add)
    check_locale_text(v, "upstream_step", add)
end

-- cljson.decode's options for the 2xx body (default handle), e.g. {raw = "datas"}.
KEYS.decode = function(v, _, add)
    if type(v) ~= "table" then
        add("decode must be a table of cljson.decode options")
    end
end

-- default_handle(tool) -> the handle of a tool that defines shape_request and no
-- handle: shape_request(args, ctx) -> request (or nil, err), one ctx.http call whose
-- failure is the gateway's one upstream mapping (led by upstream_step), the 2xx body
-- decoded with the tool's decode options (502 when it is not a JSON object or array)
-- and, when the tool has trim_response, trim_response(body, args, ctx) -> result.
function M.default_handle(tool)
    local shape, trim, step, decode = tool.shape_request, tool.trim_response, tool.upstream_step, tool.decode
    return function(args, ctx)
        local req, err = shape(args, ctx)
        if req == nil then
            return nil, err
        end
        local body
        body, err = require("errors").fetch(ctx, req, step, decode)
        if body == nil or trim == nil then
            return body, err
        end
        return trim(body, args, ctx)
    end
end

-- The token-saving TOON view, applied by the core to the result (src/codec/toonview.c):
-- true, or { omit_id = rule } to also leave a row id column out of the tables when
-- every row implies it. The rule is data the tool declares (the core knows no field):
--   rows = the result's array of rows (a member of its root),
--   id = the primitive column left out,
--   identity = the record (of one member) or list (of one value) in each row whose
--     single value ends the id,
--   prefix = the arguments the id starts with, each followed by separator ("-"
--     unless given): the column is left out when every row's id is that prefix and
--     then the text of its identity value.
local OMIT_KEYS = { rows = "name", id = "name", identity = "name", prefix = "names", separator = "text" }
local TOON_VIEW_FORM = "toon_view must be true or { omit_id = { rows = <name>, id = <name>, " ..
    "identity = <name>, prefix = { <argument>, ... } [, separator = <text>] } }"

local function check_omit_rule(rule, tool, add)
    if type(rule) ~= "table" then
        return add(TOON_VIEW_FORM)
    end
    for k, x in pairs(rule) do
        local kind = OMIT_KEYS[k]
        local ok = (kind == "name" and type(x) == "string" and x ~= "") or
            (kind == "text" and type(x) == "string") or
            (kind == "names" and type(x) == "table" and #x > 0)
        if ok and kind == "names" then
            for i, name in pairs(x) do
                ok = ok and math.type(i) == "integer" and type(name) == "string" and name ~= ""
            end
        end
        if not ok then
            return add(TOON_VIEW_FORM)
        end
    end
    for k, kind in pairs(OMIT_KEYS) do
        if kind ~= "text" and rule[k] == nil then
            return add(TOON_VIEW_FORM)
        end
    end
    local props = type(tool.input_schema) == "table" and tool.input_schema.properties
    for _, name in ipairs(rule.prefix) do
        if type(props) ~= "table" or props[name] == nil then
            add("toon_view.omit_id.prefix names '" .. name .. "', which input_schema does not declare")
        end
    end
end

KEYS.toon_view = function(v, tool, add)
    if type(v) == "table" then
        for k in pairs(v) do
            if k ~= "omit_id" then
                return add(TOON_VIEW_FORM)
            end
        end
        if v.omit_id == nil then
            return add(TOON_VIEW_FORM)
        end
        check_omit_rule(v.omit_id, tool, add)
    elseif v ~= true then
        return add(TOON_VIEW_FORM)
    end
    if tool.render ~= nil then
        add("toon_view and render cannot both be set (the view is the TOON layout)")
    end
    if tool.formats ~= nil and tool.formats[2] == nil then
        add("toon_view needs the toon format")
    end
end

----------------------------------------------------------------------------
-- routes: extra HTTP routes a tool declares, below the public prefix, registered
-- by the core (src/surface/route.c) next to its own: { {method = "POST", path =
-- "/a/{id}/b", body = "parameters"}, ... }. A path is literal segments and {name}
-- segments; each {name} is a string parameter of the input schema, filled from the
-- percent-decoded segment (a plain id). body (optional) names an object parameter
-- the request body becomes (its bkn_context stays the call's); without it the body
-- is the arguments, as on /kn/<tool>. A call through a declared route may go ad hoc.

-- The core's own routes below the prefix (src/surface/route.c): exact paths, and prefixes
-- (ending in "/") under which every path is the core's. A tool's route may not
-- shadow any of them, whatever its method.
M.builtin_routes = {
    "/mcp", "/mcp-compact", "/mcp/ptc", "/mcp/info", "/mcp-compact/info", "/mcp/ptc/info",
    "/mcp/toolkit", "/mcp/ptc/toolkit", "/kn/", "/.well-known/",
}

local ROUTE_KEYS = { method = true, path = true, body = true }

local function route_segments(path)
    local out = {}
    for seg in (path:sub(2) .. "/"):gmatch("([^/]*)/") do
        out[#out + 1] = seg
    end
    return out
end

-- Whether two segment lists can match one path ({name} matches any segment).
local function segments_meet(a, b)
    if #a ~= #b then
        return false
    end
    for i = 1, #a do
        local pa, pb = a[i]:match("^{.*}$"), b[i]:match("^{.*}$")
        if not pa and not pb and a[i] ~= b[i] then
            return false
        end
    end
    return true
end

-- The core route that template (segments) would shadow, or nil.
local function builtin_clash(segs)
    for _, r in ipairs(M.builtin_routes) do
        if r:sub(-1) == "/" then
            local first = r:sub(2, -2)
            if segs[1] == first or segs[1]:match("^{.*}$") then
                return r .. "…"
            end
        elseif segments_meet(segs, route_segments(r)) then
            return r
        end
    end
    return nil
end

local function check_route(r, i, tool, add, seen)
    local where = "routes[" .. i .. "]"
    if type(r) ~= "table" then
        return add(where .. " must be a table {method, path, body?}")
    end
    for k in pairs(r) do
        if not ROUTE_KEYS[k] then
            add(where .. " has an unknown key '" .. tostring(k) .. "'")
        end
    end
    if r.method ~= "POST" then
        add(where .. ".method must be \"POST\" (a route runs the tool like POST /kn/<tool>)")
    end
    local path = r.path
    if type(path) ~= "string" or path:sub(1, 1) ~= "/" or #path > 200 then
        return add(where .. ".path must be a string starting with / (at most 200 bytes)")
    end
    local props = type(tool.input_schema) == "table" and tool.input_schema.properties or {}
    local segs, params = route_segments(path), {}
    for j, seg in ipairs(segs) do
        local name = seg:match("^{([%a_][%w_]*)}$")
        if name then
            local p = props[name]
            if j == 1 then
                add(where .. ".path must start with a literal segment")
            elseif type(p) ~= "table" or p.type ~= "string" then
                add(where .. ".path: {" .. name .. "} must name a string parameter of input_schema")
            elseif params[name] then
                add(where .. ".path names {" .. name .. "} twice")
            end
            params[name] = true
        elseif not seg:match("^[%w%-._~]+$") or seg == "." or seg == ".." then
            add(where .. ".path has a segment '" .. seg .. "' that is neither a plain literal " ..
                "([A-Za-z0-9-._~], not . or ..) nor {parameter}")
        end
    end
    if r.body ~= nil then
        local p = type(r.body) == "string" and props[r.body]
        if type(p) ~= "table" or p.type ~= "object" or params[r.body] then
            add(where .. ".body must name an object parameter of input_schema (not a path parameter)")
        end
    end
    local clash = builtin_clash(segs)
    if clash then
        add(where .. ": POST " .. path .. " clashes with the core's route " .. clash)
    end
    for _, other in ipairs(seen) do
        if segments_meet(segs, route_segments(other)) then
            add(where .. ": POST " .. path .. " clashes with the tool's route POST " .. other)
        end
    end
    seen[#seen + 1] = path
end

KEYS.routes = function(v, tool, add)
    if type(v) ~= "table" or v[1] == nil then
        return add("routes must be a non-empty array of {method, path, body?}")
    end
    local seen = {}
    for i, r in ipairs(v) do
        check_route(r, i, tool, add, seen)
    end
end

-- route_clashes(tools) -> errors: routes of different tools that can match one path.
function M.route_clashes(tools)
    local errors, taken = {}, {}
    for _, t in ipairs(tools) do
        for _, r in ipairs(t.routes or {}) do
            local segs = route_segments(r.path)
            for _, o in ipairs(taken) do
                if o.tool ~= t.name and segments_meet(segs, o.segs) then
                    errors[#errors + 1] = t.name .. ": route POST " .. r.path ..
                        " clashes with route POST " .. o.path .. " of " .. o.tool
                end
            end
            taken[#taken + 1] = { tool = t.name, path = r.path, segs = segs }
        end
    end
    return errors
end

-- The sentences a tool with toon_view adds to its description and short_description
-- (each language).
M.TOON_VIEW_DESCRIPTION = {
    ["zh-CN"] = "TOON 视图：记录数组为表格，各行同键的嵌套记录为点号列（a.b），" ..
        "其余嵌套字段按行序列在表格后的 <数组>_<字段>；MCP 文本取 TOON 与紧凑 JSON 中 token 更少者。",
    ["en-US"] = "TOON view: record arrays are tables, nested records with the same keys in " ..
        "every row are dotted columns (a.b), other nested fields follow the table as " ..
        "<array>_<field>, one entry per row; MCP sends whichever of this and compact JSON costs fewer tokens.",
}
-- The omission's sentence, with {id}, {prefix} (each argument as <name>, then the
-- separator) and {identity} from the tool's rule (omit_description).
M.TOON_VIEW_OMIT_DESCRIPTION = {
    ["zh-CN"] = "{id} 等于 {prefix}<{identity} 的唯一值> 时不写入 TOON 表格。",
    ["en-US"] = "The TOON table leaves out {id} when it is {prefix}<the single value of {identity}>.",
}

-- The same two statements in the terser form /mcp-compact lists (the short
-- description's): the layout only; a text that is JSON shows itself.
M.TOON_VIEW_SHORT_DESCRIPTION = {
    ["zh-CN"] = "TOON 视图：记录数组为表格，嵌套字段为 a.b 列或表后的 <数组>_<字段>。",
    ["en-US"] = "TOON view: record arrays are tables; nested fields are a.b columns or " ..
        "<array>_<field> lists after the table.",
}
M.TOON_VIEW_SHORT_OMIT_DESCRIPTION = {
    ["zh-CN"] = "{id} 为 {prefix}<标识值> 时省略。",
    ["en-US"] = "{id} is left out when it is {prefix}<identity value>.",
}

-- omit_description(rule [, short]) -> the omission's sentence of a toon_view omit_id
-- rule in each language (short: the terser form).
function M.omit_description(rule, short)
    local parts = {}
    for i, name in ipairs(rule.prefix) do
        parts[i] = "<" .. name .. ">" .. (rule.separator or "-")
    end
    local fill = { id = rule.id, identity = rule.identity, prefix = table.concat(parts) }
    local out = {}
    for lang, template in pairs(short and M.TOON_VIEW_SHORT_OMIT_DESCRIPTION or M.TOON_VIEW_OMIT_DESCRIPTION) do
        out[lang] = template:gsub("{(%a+)}", function(k)
            return fill[k]
        end)
    end
    return out
end

-- view_description(description, toon_view [, short]) -> a new description table with
-- the view's sentences (short: their terser form) appended in each language it has.
function M.view_description(description, toon_view, short)
    local out = {}
    local omit = type(toon_view) == "table" and toon_view.omit_id
    local view = short and M.TOON_VIEW_SHORT_DESCRIPTION or M.TOON_VIEW_DESCRIPTION
    local omitted = omit and M.omit_description(omit, short)
    for lang, text in pairs(description) do
        local sep = lang == "zh-CN" and "" or " "
        if view[lang] then
            text = text .. sep .. view[lang]
            if omit then
                text = text .. sep .. omitted[lang]
            end
        end
        out[lang] = text
    end
    return out
end

local REQUIRED = {
    "name", "version", "kind", "title", "description", "group", "order", "surfaces",
    "input_schema", "handle",
}

-- The top-level keys of a tool table (a set).
M.keys = {}
for k in pairs(KEYS) do
    M.keys[k] = true
end

-- Checks in a fixed order so the error list is stable.
local ORDER = {
    "name", "version", "kind", "title", "description", "short_description", "group", "order", "surfaces",
    "rest_alias", "gate", "formats", "upstream", "input_schema", "output_schema",
    "annotations", "handle", "shape_request", "trim_response", "upstream_step", "decode", "render",
    "toon_view", "routes",
}

local function copy_array(t)
    local out = {}
    for i, v in ipairs(t) do
        out[i] = v
    end
    return out
end

-- contract.check(tool, name) -> normalized tool | nil, errors (array of strings)
-- The returned table is a new one; the tool's own table is not modified.
-- opts: schemas_known_valid (skip the schema walk), upstreams (the configured upstream
-- names: upstream must name one of them).
function M.check(tool, file_name, opts)
    schemas_known_valid = type(opts) == "table" and opts.schemas_known_valid == true
    configured_upstreams = type(opts) == "table" and opts.upstreams or nil
    local errors = {}
    local function add(msg)
        errors[#errors + 1] = msg
    end
    if type(tool) ~= "table" then
        return nil, { "a tool file must return a table, got " .. type(tool) }
    end
    local unknown = {}
    for k in pairs(tool) do
        if type(k) ~= "string" or KEYS[k] == nil then
            unknown[#unknown + 1] = tostring(k)
        end
    end
    table.sort(unknown)
    for _, k in ipairs(unknown) do
        add("unknown key '" .. k .. "'")
    end
    for _, k in ipairs(REQUIRED) do
        if tool[k] == nil and k ~= "input_schema" and k ~= "handle" then
            add(k .. " is required")
        end
    end
    for _, k in ipairs(ORDER) do
        if tool[k] ~= nil or k == "input_schema" or k == "handle" then
            KEYS[k](tool[k], tool, add, file_name)
        end
    end
    if #errors > 0 then
        return nil, errors
    end
    local out = {}
    for k, v in pairs(tool) do
        out[k] = v
    end
    out.handle = tool.handle or M.default_handle(tool)
    out.surfaces = copy_array(tool.surfaces)
    if tool.toon_view then
        -- /mcp-compact lists the short description, or the description, with the
        -- terser view sentences
        out.description = M.view_description(tool.description, tool.toon_view)
        out.short_description = M.view_description(tool.short_description or tool.description,
            tool.toon_view, true)
    end
    out.formats = tool.formats and copy_array(tool.formats) or { "json", "toon" }
    local ann = {}
    -- defaults first, the tool's own hints win
    if tool.kind == "read" then
        ann.readOnlyHint = true
        ann.idempotentHint = true
        ann.openWorldHint = false
    else
        ann.readOnlyHint = false
    end
    for k, v in pairs(tool.annotations or {}) do
        ann[k] = v
    end
    out.annotations = ann
    return out
end

-- contract.check_set(tools [, newer]) -> true | nil, errors, refs: rules across tools
-- (unique names, orders and REST names). tools: array of normalized tools. Of two
-- tools with the same order the later one in the array is reported, naming the
-- earlier; newer(a, b) -> true when a is the newer of the two (the one an operator
-- just added or changed), which is then reported instead. refs[i] says what
-- errors[i] is about: { name = the tool reported, key = its offending key, other =
-- the tool it collides with, or nil }, and refs[i].message is errors[i] without the
-- "<name>: " prefix.
function M.check_set(tools, newer)
    local errors, refs = {}, {}
    local function add(name, key, message, other)
        errors[#errors + 1] = name .. ": " .. message
        refs[#refs + 1] = { name = name, key = key, message = message, other = other }
    end
    local names, orders, rest = {}, {}, {}
    for _, t in ipairs(tools) do
        if names[t.name] then
            add(t.name, "name", "the name is used twice")
        end
        names[t.name] = true
        if t.order then
            local old, new = orders[t.order], t
            if old then
                if newer and newer(old, new) then
                    old, new = new, old
                end
                add(new.name, "order", "order " .. t.order .. " is already used by " .. old.name, old.name)
            end
            orders[t.order] = orders[t.order] or t
        end
    end
    for _, e in ipairs(M.route_clashes(tools)) do
        errors[#errors + 1] = e
    end
    for _, t in ipairs(tools) do
        if t.rest_alias then
            if names[t.rest_alias] or rest[t.rest_alias] then
                add(t.name, "rest_alias", "rest_alias " .. t.rest_alias .. " collides with another tool",
                    names[t.rest_alias] and t.rest_alias or rest[t.rest_alias])
            end
            rest[t.rest_alias] = rest[t.rest_alias] or t.name
        end
    end
    if #errors > 0 then
        return nil, errors, refs
    end
    return true
end

-- contract.list_entry(tool, lang) -> the tools/list entry (name, title, schemas, annotations, group _meta) with
-- every localized text resolved for lang. tool: a normalized tool.
-- bkn_context as every business tool advertises it on the MCP surfaces.
-- The core reads and strips it before the tool's own schema is checked.
local REF_TYPES = {
    "knowledge_network", "object_type", "object_instance", "property", "relation_type",
    "data_resource", "metric", "logic", "function", "action_type", "action_instance",
}

local function bkn_context_schema(lang)
    local function d(key)
        return catalog.text(key, lang)
    end
    return {
        type = "object",
        additionalProperties = false,
        required = { "conversation_id", "interaction_id" },
        description = d("ctx_desc"),
        properties = {
            conversation_id = { type = "string", minLength = 1, description = d("ctx_conversation_id") },
            interaction_id = { type = "string", minLength = 1, description = d("ctx_interaction_id") },
            parent_operation_id = { type = "string", minLength = 1,
                description = d("ctx_parent_operation_id") },
            causation_event_ids = { type = "array", maxItems = 64, items = { type = "string" },
                description = d("ctx_causation_event_ids") },
            business_refs = {
                type = "array",
                maxItems = 64,
                description = d("ctx_business_refs"),
                items = {
                    type = "object",
                    additionalProperties = false,
                    required = { "ref_type", "ref_id" },
                    properties = {
                        ref_type = { enum = REF_TYPES, description = d("ctx_ref_type") },
                        ref_id = { type = "string", minLength = 1, maxLength = 512,
                            description = d("ctx_ref_id") },
                        version = { type = "string", maxLength = 128, description = d("ctx_ref_version") },
                    },
                },
            },
        },
    }
end

-- response_format as every business tool advertises it on MCP: the core
-- reads and strips it; MCP defaults to toon when the tool can render it.
local function response_format_schema(formats, lang)
    local en = lang == "en-US"
    local has_toon = false
    for _, f in ipairs(formats) do
        has_toon = has_toon or f == "toon"
    end
    return {
        type = "string",
        enum = formats,
        default = has_toon and "toon" or "json",
        description = en
            and "Rendering of the text result: toon (compact, for reading) or json (exact)"
            or "文本结果的格式：toon（紧凑，便于阅读）或 json（原样）",
    }
end

local function with_bkn_context(input, lang, formats)
    local props = {}
    for k, v in pairs(input.properties or {}) do
        props[k] = v
    end
    props.bkn_context = bkn_context_schema(lang)
    props.response_format = response_format_schema(formats, lang)
    local required = {}
    for i, v in ipairs(input.required or {}) do
        required[i] = v
    end
    required[#required + 1] = "bkn_context"
    local out = {}
    for k, v in pairs(input) do
        out[k] = v
    end
    out.properties = props
    out.required = required
    return out
end

-- The /mcp-compact view of the schemas (docs/writing-tools.md states each rule). The
-- core validates every call against the tool's full schema and the full bkn_context
-- contract on every surface; the view only tells the model less.
local object_mt = cljson and cljson.object_mt or nil

-- Size and closedness guards: the core enforces them and a call that breaks one gets a
-- tool error naming the bound, so the model still learns them when it matters.
local GUARDS = {
    minLength = true, maxLength = true, minItems = true, maxItems = true, uniqueItems = true,
}

-- guardless(s) -> a copy of schema s without the GUARDS and without
-- additionalProperties = false, in s and every sub-schema; everything else (prose,
-- types, required, enums, defaults, numeric ranges, $defs and $ref) stays.
local function guardless(s)
    if type(s) ~= "table" then
        return s
    end
    local out = {}
    for k, v in pairs(s) do
        if GUARDS[k] or (k == "additionalProperties" and v == false) then
            v = nil -- left out
        elseif k == "properties" or k == "$defs" then
            local m = {}
            for name, sub in pairs(v) do
                m[name] = guardless(sub)
            end
            v = setmetatable(m, getmetatable(v) or object_mt)
        elseif k == "items" or k == "additionalProperties" then
            v = guardless(v)
        elseif k == "anyOf" or k == "oneOf" then
            local a = {}
            for i, sub in ipairs(v) do
                a[i] = guardless(sub)
            end
            v = setmetatable(a, getmetatable(v))
        end
        out[k] = v
    end
    return setmetatable(out, getmetatable(s) or object_mt)
end

-- shallow(s [, required_only]) -> the top level of object schema s: its type, required
-- and each property (required_only: each required one) with its type only (nested
-- objects and arrays become {"type":"object"} and {"type":"array"}; a property without
-- a type becomes {}). No additionalProperties: a value valid against s is valid
-- against the view.
local function shallow(s, required_only)
    local out = { type = s.type, required = s.required }
    local keep
    if required_only then
        keep = {}
        for _, name in ipairs(s.required or {}) do
            keep[name] = true
        end
    end
    if s.properties then
        local props = {}
        for name, sub in pairs(s.properties) do
            if not keep or keep[name] then
                props[name] = setmetatable({ type = type(sub) == "table" and sub.type or nil }, object_mt)
            end
        end
        out.properties = setmetatable(props, object_mt)
    end
    return setmetatable(out, object_mt)
end

-- The one sentence bkn_context carries on /mcp-compact.
local BKN_CONTEXT_SHORT = {
    ["zh-CN"] = "bkn_start_interaction 返回的 id，原样传入",
    ["en-US"] = "The ids bkn_start_interaction returned, unchanged",
}

-- compact: the /mcp-compact view of the same entry: the tool's short_description when
-- it declares one; its own input schema guardless (its parameter descriptions stay);
-- bkn_context its required ids (shallow) with one short sentence; response_format
-- without its description; outputSchema shallow. Names, titles, _meta and annotations
-- are those of the /mcp entry.
function M.list_entry(tool, lang, compact)
    if lang ~= "zh-CN" and lang ~= "en-US" then
        lang = catalog.default_language
    end
    local meta = {
        ["openbkn.ai/group"] = tool.group,
        ["openbkn.ai/group_title"] = catalog.group_title(tool.group, lang),
        ["openbkn.ai/order"] = tool.order,
    }
    local ann = {}
    for k, v in pairs(tool.annotations or {}) do
        ann[k] = v
    end
    local entry = {
        name = tool.name,
        title = tool.title[lang],
        description = tool.description[lang],
        inputSchema = with_bkn_context(schema.localize(tool.input_schema, lang), lang,
            tool.formats or { "json", "toon" }),
        annotations = ann,
        _meta = meta,
    }
    if tool.output_schema then
        entry.outputSchema = schema.localize(tool.output_schema, lang)
    end
    if compact then
        if tool.short_description then
            entry.description = tool.short_description[lang]
        end
        local input = entry.inputSchema
        local bkn, format = input.properties.bkn_context, input.properties.response_format
        input = guardless(input)
        input.properties.bkn_context = shallow(bkn, true)
        input.properties.bkn_context.description = BKN_CONTEXT_SHORT[lang]
        format.description = nil
        input.properties.response_format = format
        entry.inputSchema = input
        entry.outputSchema = entry.outputSchema and shallow(entry.outputSchema)
    end
    if cljson then
        setmetatable(entry.annotations, cljson.object_mt)
    end
    return entry
end

return M
