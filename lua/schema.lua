-- schema: the JSON Schema subset the core enforces before a tool runs.
--
-- One small, exact subset: what a tool declares is what the model is told and
-- what the core checks before handle() runs. Any keyword outside the subset is a
-- load error, so a schema can never promise something that is not enforced.
--
-- Values follow the cljson model: objects carry cljson.object_mt, arrays
-- cljson.array_mt, null is cljson.null, big numbers are boxed (cljson.number_mt).
-- Plain Lua tables are accepted too: a sequence is an array, anything else an
-- object, and an empty plain table may be either.
local M = {}

local has_cljson, cljson = pcall(require, "cljson")
if not has_cljson then
    cljson = nil
end
local catalog = require "catalog"

M.languages = { "zh-CN", "en-US" }

local TYPES = {
    object = true, array = true, string = true, integer = true,
    number = true, boolean = true, null = true,
}

-- keyword -> kind of value it takes (checked in check_node)
local KEYWORDS = {
    type = "type", properties = "schemamap", required = "strings",
    additionalProperties = "boolschema", items = "schema", enum = "array",
    const = "any", minimum = "number", maximum = "number",
    exclusiveMinimum = "number", exclusiveMaximum = "number",
    minLength = "count", maxLength = "count", minItems = "count", maxItems = "count",
    uniqueItems = "boolean", anyOf = "schemas", oneOf = "schemas", ["$ref"] = "ref",
    ["$defs"] = "defs", default = "any", description = "text", title = "text",
    examples = "array", format = "string",
}

-- What to write instead of a JSON Schema keyword the subset refuses (appended to the
-- "unknown keyword" error). pattern is refused because Lua patterns are not ECMA
-- regular expressions: a pattern the model reads one way and the core enforces
-- another would lie.
local REFUSED_HINTS = {
    pattern = "not supported (Lua patterns are not ECMA regular expressions, so the core " ..
        "could not enforce what the model reads): use enum or const for a closed set, " ..
        "maxLength and format (an annotation) with the rule stated in description, and " ..
        "check the text in handle, returning a 400 error (errors.refuse of _lib.errors) when it does not fit",
    patternProperties = "not supported: use additionalProperties with a schema for the values, " ..
        "and check the names in handle",
    allOf = "not supported: merge the schemas into one, or use anyOf/oneOf",
    ["not"] = "not supported: use enum/const for the allowed values, or check in handle",
    ["if"] = "not supported: use oneOf with one schema per case",
    ["then"] = "not supported: use oneOf with one schema per case",
    ["else"] = "not supported: use oneOf with one schema per case",
    prefixItems = "not supported: items takes one schema for every element",
    definitions = "use $defs (at the root) with $ref \"#/$defs/<name>\"",
    minProperties = "not supported: list the needed names in required",
    maxProperties = "not supported: list the names in properties with additionalProperties = false",
    dependentRequired = "not supported: use oneOf, or check in handle",
    nullable = "not JSON Schema: use type = {\"<type>\", \"null\"}",
}

----------------------------------------------------------------------------
-- value model helpers

local function is_null(v)
    return cljson ~= nil and v == cljson.null
end

local function is_boxed(v)
    return cljson ~= nil and type(v) == "table" and getmetatable(v) == cljson.number_mt
end

-- A plain table is a sequence when its keys are exactly 1..n.
local function is_sequence(t)
    local n = 0
    for k in pairs(t) do
        if math.type(k) ~= "integer" or k < 1 then
            return false
        end
        n = n + 1
    end
    for i = 1, n do
        if t[i] == nil then
            return false
        end
    end
    return true
end

-- The kind of a table for the check, from its metatable: "number" (boxed), "array",
-- "object", "both" (empty plain table), or nil (not a JSON value).
local NUMBER_MT = cljson and cljson.number_mt or false
local ARRAY_MT = cljson and cljson.array_mt or false
local OBJECT_MT = cljson and cljson.object_mt or false

local function table_kind(t)
    local mt = getmetatable(t)
    if mt == OBJECT_MT then
        return "object"
    elseif mt == ARRAY_MT then
        return "array"
    elseif mt == NUMBER_MT then
        return "number"
    elseif mt ~= nil then
        return nil
    elseif next(t) == nil then
        return "both"
    end
    return is_sequence(t) and "array" or "object"
end

-- "array", "object", "both" (empty plain table) or nil (not a container)
local function container_kind(v)
    if type(v) ~= "table" then
        return nil
    end
    local k = table_kind(v)
    if k == "number" then
        return nil
    end
    return k
end

local function boxed_text(v)
    return tostring(v)
end

local function boxed_is_integer(v)
    return boxed_text(v):match("^%-?%d+$") ~= nil
end

-- Numeric value for comparisons; boxed numbers are approximated, which is
-- exact enough for range checks (they only exist beyond int64 or double precision).
local function num_value(v)
    if is_boxed(v) then
        return tonumber(boxed_text(v))
    end
    return v
end

local function is_number(v)
    return type(v) == "number" or is_boxed(v)
end

local function is_integer(v)
    if math.type(v) == "integer" then
        return true
    end
    if math.type(v) == "float" then
        return v == v and v ~= math.huge and v ~= -math.huge and v == math.floor(v)
    end
    return is_boxed(v) and boxed_is_integer(v)
end

local function has_type(v, t)
    if t == "null" then
        return is_null(v)
    elseif t == "boolean" then
        return type(v) == "boolean"
    elseif t == "string" then
        return type(v) == "string"
    elseif t == "integer" then
        return is_integer(v)
    elseif t == "number" then
        return is_number(v)
    elseif t == "array" then
        local k = container_kind(v)
        return k == "array" or k == "both"
    elseif t == "object" then
        local k = container_kind(v)
        return k == "object" or k == "both"
    end
    return false
end

local function type_name(v)
    if is_null(v) then
        return "null"
    elseif is_boxed(v) then
        return "number"
    elseif type(v) == "table" then
        local k = container_kind(v)
        if k == "both" then
            return "empty table"
        end
        return k or "table"
    end
    return math.type(v) or type(v)
end

-- Deep equality in the JSON sense (1 == 1.0, boxed numbers by value).
local function json_equal(a, b)
    if is_number(a) and is_number(b) then
        if is_boxed(a) and is_boxed(b) then
            return boxed_text(a) == boxed_text(b) or num_value(a) == num_value(b)
        end
        return num_value(a) == num_value(b)
    end
    local ka, kb = container_kind(a), container_kind(b)
    if ka == nil or kb == nil then
        return a == b
    end
    if ka ~= "both" and kb ~= "both" and ka ~= kb then
        return false
    end
    for k, v in pairs(a) do
        if b[k] == nil or not json_equal(v, b[k]) then
            return false
        end
    end
    for k in pairs(b) do
        if a[k] == nil then
            return false
        end
    end
    return true
end
M.equal = json_equal

-- Whether v equals (JSON equality) an entry of the array enum.
local function in_enum(v, enum)
    for _, e in ipairs(enum) do
        if json_equal(v, e) then
            return true
        end
    end
    return false
end

-- Deep copy keeping metatables (array/object marks); boxed numbers and null are
-- immutable and shared.
local function deep_copy(v)
    if type(v) ~= "table" or is_boxed(v) then
        return v
    end
    local out = {}
    for k, x in pairs(v) do
        out[k] = deep_copy(x)
    end
    return setmetatable(out, getmetatable(v))
end
M.copy = deep_copy

----------------------------------------------------------------------------
-- paths

local function ptr_escape(s)
    return (tostring(s):gsub("~", "~0"):gsub("/", "~1"))
end

local function join(path, key)
    if path == "/" then
        path = ""
    end
    return path .. "/" .. ptr_escape(key)
end

----------------------------------------------------------------------------
-- check_schema

local function is_plain(t)
    return type(t) == "table" and (getmetatable(t) == nil or container_kind(t) ~= nil)
end

local function check_text(v)
    if type(v) == "string" then
        return true
    end
    if type(v) ~= "table" then
        return false
    end
    for k, s in pairs(v) do
        if type(k) ~= "string" or type(s) ~= "string" then
            return false
        end
        local known = false
        for _, l in ipairs(M.languages) do
            known = known or l == k
        end
        if not known then
            return false
        end
    end
    for _, l in ipairs(M.languages) do
        if type(v[l]) ~= "string" or v[l] == "" then
            return false
        end
    end
    return true
end

local check_node

local function check_value(ctx, path, kw, kind, v)
    local function bad(msg)
        ctx.errors[#ctx.errors + 1] = path .. ": '" .. kw .. "' " .. msg
    end
    if kind == "type" then
        local list = type(v) == "string" and { v } or v
        if type(list) ~= "table" or not is_sequence(list) or #list == 0 then
            return bad("must be a type name or a non-empty array of type names")
        end
        for _, t in ipairs(list) do
            if not TYPES[t] then
                bad("has unknown type " .. tostring(t))
            end
        end
    elseif kind == "schemamap" or kind == "defs" then
        if not is_plain(v) or container_kind(v) == "array" then
            return bad("must be a table of name = schema")
        end
        for name, sub in pairs(v) do
            if type(name) ~= "string" then
                bad("has a non-string name")
            else
                check_node(ctx, join(join(path, kw), name), sub)
            end
        end
    elseif kind == "strings" then
        if type(v) ~= "table" or not is_sequence(v) then
            return bad("must be an array of strings")
        end
        local seen = {}
        for _, s in ipairs(v) do
            if type(s) ~= "string" then
                bad("must be an array of strings")
            elseif seen[s] then
                bad("names " .. s .. " twice")
            end
            seen[s] = true
        end
    elseif kind == "boolschema" then
        if type(v) ~= "boolean" then
            check_node(ctx, join(path, kw), v)
        end
    elseif kind == "schema" then
        check_node(ctx, join(path, kw), v)
    elseif kind == "schemas" then
        if type(v) ~= "table" or not is_sequence(v) or #v == 0 then
            return bad("must be a non-empty array of schemas")
        end
        for i, sub in ipairs(v) do
            check_node(ctx, join(join(path, kw), i - 1), sub)
        end
    elseif kind == "array" then
        local k = container_kind(v)
        if k ~= "array" and k ~= "both" then
            return bad("must be an array")
        end
        if kw == "enum" and #v == 0 then
            bad("must not be empty")
        end
    elseif kind == "number" then
        if not is_number(v) then
            bad("must be a number")
        end
    elseif kind == "count" then
        if math.type(v) ~= "integer" or v < 0 then
            bad("must be a non-negative integer")
        end
    elseif kind == "boolean" then
        if type(v) ~= "boolean" then
            bad("must be a boolean")
        end
    elseif kind == "string" then
        if type(v) ~= "string" then
            bad("must be a string")
        end
    elseif kind == "text" then
        if not check_text(v) then
            bad("must be a string or a table with non-empty zh-CN and en-US strings")
        end
    elseif kind == "ref" then
        local name = type(v) == "string" and v:match("^#/%$defs/([%w_%-]+)$")
        if not name then
            return bad("must look like #/$defs/<name>")
        end
        if ctx.defs[name] == nil then
            bad("points at an undefined definition " .. name)
        end
        ctx.refs[#ctx.refs + 1] = { path = path, name = name }
    end
end

check_node = function(ctx, path, s)
    if type(s) ~= "table" or (getmetatable(s) ~= nil and container_kind(s) ~= "object"
            and container_kind(s) ~= "both") then
        ctx.errors[#ctx.errors + 1] = path .. ": schema must be a table"
        return
    end
    local names = {}
    for kw in pairs(s) do
        names[#names + 1] = tostring(kw)
    end
    table.sort(names)
    for _, kw in ipairs(names) do
        local kind = KEYWORDS[kw]
        if kind == nil then
            local hint = REFUSED_HINTS[kw]
            ctx.errors[#ctx.errors + 1] = path .. ": unknown keyword '" .. kw .. "'" ..
                (hint and ": " .. hint or "")
        elseif kind == "defs" and path ~= "/" then
            ctx.errors[#ctx.errors + 1] = path .. ": '$defs' is allowed only at the root"
        else
            check_value(ctx, path, kw, kind, s[kw])
        end
    end
    if type(s.required) == "table" and type(s.properties) == "table" then
        for _, r in ipairs(s.required) do
            if type(r) == "string" and s.properties[r] == nil then
                ctx.errors[#ctx.errors + 1] = path .. ": required property '" .. r ..
                    "' is not declared in properties"
            end
        end
    end
    ctx.nodes[#ctx.nodes + 1] = { path = path, node = s }
end

-- A definition that can reach itself through $ref/anyOf/oneOf alone would make
-- validation loop without consuming any data.
local function find_ref_cycles(ctx)
    local function walk(node, name, seen)
        if type(node) ~= "table" then
            return false
        end
        if type(node["$ref"]) == "string" then
            local target = node["$ref"]:match("^#/%$defs/([%w_%-]+)$")
            if target == name then
                return true
            end
            if target and not seen[target] and ctx.defs[target] ~= nil then
                seen[target] = true
                if walk(ctx.defs[target], name, seen) then
                    return true
                end
            end
        end
        for _, kw in ipairs({ "anyOf", "oneOf" }) do
            if type(node[kw]) == "table" then
                for _, sub in ipairs(node[kw]) do
                    if walk(sub, name, seen) then
                        return true
                    end
                end
            end
        end
        return false
    end
    for name, def in pairs(ctx.defs) do
        if walk(def, name, {}) then
            ctx.errors[#ctx.errors + 1] = "/$defs/" .. name ..
                ": refers to itself without descending into properties or items"
        end
    end
end

-- schema.check_schema(s) -> true | nil, errors (array of "path: message")
function M.check_schema(s)
    local ctx = { errors = {}, refs = {}, nodes = {}, defs = {} }
    if type(s) == "table" and type(s["$defs"]) == "table" then
        ctx.defs = s["$defs"]
    end
    check_node(ctx, "/", s)
    if #ctx.errors == 0 then
        find_ref_cycles(ctx)
    end
    if #ctx.errors == 0 then
        -- A default or example that fails its own schema would be a broken promise.
        for _, n in ipairs(ctx.nodes) do
            if n.node.default ~= nil then
                local _, errs = M.validate_node(s, n.node, n.node.default)
                if errs then
                    ctx.errors[#ctx.errors + 1] = n.path .. ": default is invalid (" ..
                        errs[1].path .. ": " .. errs[1].message .. ")"
                end
            end
            if n.node.const ~= nil then
                local _, errs = M.validate_node(s, n.node, n.node.const)
                if errs then
                    ctx.errors[#ctx.errors + 1] = n.path .. ": const is invalid (" ..
                        errs[1].path .. ": " .. errs[1].message .. ")"
                end
            end
        end
    end
    if #ctx.errors > 0 then
        return nil, ctx.errors
    end
    return true
end

----------------------------------------------------------------------------
-- validate

local function describe(v)
    if type(v) == "string" then
        return string.format("%q", v)
    end
    if is_null(v) then
        return "null"
    end
    return tostring(v)
end

local validate

-- Appends the validation error at path: the catalogue text `key` (src/base/texts.h,
-- "schema_*") in the language of the validation, formatted with the arguments.
local function fail(st, path, key, ...)
    local args = table.pack(...)
    for i = 1, args.n do
        args[i] = tostring(args[i])
    end
    st.errors[#st.errors + 1] = { path = path,
        message = string.format(catalog.text(key, st.lang), table.unpack(args, 1, args.n)) }
end

-- The property names that have a default, sorted: once per properties table (schemas
-- do not change after loading; a reload builds new tables).
local defaults_of = setmetatable({}, { __mode = "k" })
local function names_with_defaults(props)
    local names = defaults_of[props]
    if names == nil then
        names = {}
        for name, p in pairs(props) do
            if type(p) == "table" and p.default ~= nil then
                names[#names + 1] = name
            end
        end
        table.sort(names)
        defaults_of[props] = names
    end
    return names
end

local function tostring_less(a, b)
    return tostring(a) < tostring(b)
end

-- Copy on write: out when it is already a copy of v, else a new copy of v with its
-- mark (the caller's table stays untouched). n: an array's length; nil for an object.
local function writable(out, v, n)
    if out ~= v then
        return out
    end
    out = setmetatable({}, getmetatable(v))
    if n then
        for i = 1, n do
            out[i] = v[i]
        end
    else
        for k, x in pairs(v) do
            out[k] = x
        end
    end
    return out
end

-- The first two equal items of array v (n items): i, j (1-based), or nil.
local function first_duplicate(v, n)
    for i = 1, n do
        for j = i + 1, n do
            if json_equal(v[i], v[j]) then
                return i, j
            end
        end
    end
    return nil
end

-- Returns the (possibly new) value; errors are appended to st.errors.
local function validate_object(st, s, v, path)
    local out = v
    local function set(k, x)
        out = writable(out, v)
        out[k] = x
    end
    local props = s.properties or {}
    if s.required then
        for _, name in ipairs(s.required) do
            if v[name] == nil and (props[name] == nil or props[name].default == nil) then
                fail(st, join(path, name), "schema_required")
            end
        end
    end
    local keys, strings_only = {}, true
    for k in pairs(v) do
        keys[#keys + 1] = k
        strings_only = strings_only and type(k) == "string"
    end
    -- the same order either way (tostring of a string is itself)
    table.sort(keys, not strings_only and tostring_less or nil)
    for _, k in ipairs(keys) do
        local sub = type(k) == "string" and props[k] or nil
        if type(k) ~= "string" then
            fail(st, path, "schema_non_string_key")
        elseif sub ~= nil then
            local nv = validate(st, sub, v[k], join(path, k))
            -- (an integer-valued float made an integer is equal to it, not the same)
            if nv ~= v[k] or math.type(nv) ~= math.type(v[k]) then
                set(k, nv)
            end
        elseif s.additionalProperties == false then
            fail(st, join(path, k), "schema_not_allowed")
        elseif type(s.additionalProperties) == "table" then
            local nv = validate(st, s.additionalProperties, v[k], join(path, k))
            if nv ~= v[k] or math.type(nv) ~= math.type(v[k]) then
                set(k, nv)
            end
        end
    end
    if s.properties ~= nil then
        for _, name in ipairs(names_with_defaults(props)) do
            if v[name] == nil then
                set(name, deep_copy(props[name].default))
            end
        end
    end
    return out
end

local function validate_array(st, s, v, path)
    local out = v
    local n = #v
    if s.minItems and n < s.minItems then
        fail(st, path, "schema_min_items", s.minItems)
    end
    if s.maxItems and n > s.maxItems then
        fail(st, path, "schema_max_items", s.maxItems)
    end
    if s.items then
        for i = 1, n do
            local nv = validate(st, s.items, v[i], join(path, i - 1))
            if nv ~= v[i] or math.type(nv) ~= math.type(v[i]) then
                out = writable(out, v, n)
                out[i] = nv
            end
        end
    end
    if s.uniqueItems then
        local i, j = first_duplicate(v, n)
        if i then
            fail(st, path, "schema_unique", i - 1, j - 1)
        end
    end
    return out
end

-- An empty plain table is an array when the schema can only mean an array.
local function wants_array(s)
    local t = s.type
    if t == nil then
        return s.items ~= nil and s.properties == nil
    end
    if type(t) == "string" then
        t = { t }
    end
    local arr, obj = false, false
    for _, x in ipairs(t) do
        arr = arr or x == "array"
        obj = obj or x == "object"
    end
    return arr and not obj
end

local function try(st, s, v, path)
    local sub = { errors = {}, root = st.root, depth = st.depth, lang = st.lang }
    local out = validate(sub, s, v, path)
    return #sub.errors == 0, out, sub.errors
end

validate = function(st, s, v, path)
    st.depth = st.depth + 1
    if st.depth > 200 then
        fail(st, path, "schema_too_deep")
        st.depth = st.depth - 1
        return v
    end
    local out = v
    if s["$ref"] then
        local name = s["$ref"]:match("^#/%$defs/(.+)$")
        out = validate(st, st.root["$defs"][name], out, path)
    end
    local types = s.type
    if type(types) == "string" then
        types = { types }
    end
    if types then
        local ok = false
        for _, t in ipairs(types) do
            if has_type(out, t) then
                ok = true
                -- integer-valued floats become Lua integers for the tool
                if t == "integer" and math.type(out) == "float" then
                    out = math.tointeger(out) or out
                end
                break
            end
        end
        if not ok then
            fail(st, path, "schema_type", table.concat(types, catalog.text("schema_or", st.lang)),
                type_name(out))
            st.depth = st.depth - 1
            return v
        end
    end
    if s.enum then
        if not in_enum(out, s.enum) then
            local list = {}
            for _, e in ipairs(s.enum) do
                list[#list + 1] = describe(e)
            end
            fail(st, path, "schema_enum", table.concat(list, ", "))
        end
    end
    if s.const ~= nil and not json_equal(out, s.const) then
        fail(st, path, "schema_const", describe(s.const))
    end
    if is_number(out) then
        local x = num_value(out)
        if s.minimum and x < num_value(s.minimum) then
            fail(st, path, "schema_min", s.minimum)
        end
        if s.maximum and x > num_value(s.maximum) then
            fail(st, path, "schema_max", s.maximum)
        end
        if s.exclusiveMinimum and x <= num_value(s.exclusiveMinimum) then
            fail(st, path, "schema_xmin", s.exclusiveMinimum)
        end
        if s.exclusiveMaximum and x >= num_value(s.exclusiveMaximum) then
            fail(st, path, "schema_xmax", s.exclusiveMaximum)
        end
    elseif type(out) == "string" then
        local len = utf8.len(out) or #out
        if s.minLength and len < s.minLength then
            fail(st, path, "schema_min_length", s.minLength)
        end
        if s.maxLength and len > s.maxLength then
            fail(st, path, "schema_max_length", s.maxLength)
        end
    else
        local k = container_kind(out)
        -- An empty plain table takes the shape the schema asks for.
        local as_array = k == "array" or (k == "both" and wants_array(s))
        if as_array then
            if k == "both" and cljson then
                out = setmetatable({}, cljson.array_mt)
            end
            out = validate_array(st, s, out, path)
        elseif k == "object" or k == "both" then
            out = validate_object(st, s, out, path)
        end
    end
    if s.anyOf then
        local matched = false
        local best
        for _, alt in ipairs(s.anyOf) do
            local ok, nv, errs = try(st, alt, out, path)
            if ok then
                out = nv
                matched = true
                break
            end
            if best == nil or #errs < #best then
                best = errs
            end
        end
        if not matched then
            fail(st, path, "schema_any_of", best[1].path, best[1].message)
        end
    end
    if s.oneOf then
        local count, first = 0, nil
        local best
        for _, alt in ipairs(s.oneOf) do
            local ok, nv, errs = try(st, alt, out, path)
            if ok then
                count = count + 1
                first = first or nv
            elseif best == nil or #errs < #best then
                best = errs
            end
        end
        if count == 1 then
            out = first
        elseif count == 0 then
            fail(st, path, "schema_one_of", best[1].path, best[1].message)
        else
            fail(st, path, "schema_many_of")
        end
    end
    st.depth = st.depth - 1
    return out
end

----------------------------------------------------------------------------
-- the compiled check: the same rules as validate, as a tree of closures built once
-- per schema (schemas do not change after loading; a reload builds new tables).
-- It answers only "valid, and with these defaults" or FAIL, without paths or
-- messages; on FAIL validate runs and reports, so every error is worded and
-- ordered as validate words and orders it, and a valid value costs no path strings,
-- key sorts or error tables.

local FAIL = {} -- the check's one answer for "invalid"
local MAX_DEPTH = 200
local math_type = math.type

local function no_type(v)
    return false, v
end

local compile

-- The type test of validate for one type name: (v) -> ok, value (integer-valued
-- floats become integers when the name is "integer").
local TYPE_TESTS = {
    null = function(v)
        return is_null(v), v
    end,
    boolean = function(v)
        return type(v) == "boolean", v
    end,
    string = function(v)
        return type(v) == "string", v
    end,
    integer = function(v)
        if is_integer(v) then
            if math.type(v) == "float" then
                return true, math.tointeger(v) or v
            end
            return true, v
        end
        return false, v
    end,
    number = function(v)
        return is_number(v), v
    end,
    array = function(v)
        local k = container_kind(v)
        return k == "array" or k == "both", v
    end,
    object = function(v)
        local k = container_kind(v)
        return k == "object" or k == "both", v
    end,
}

local function compile_types(types)
    if type(types) == "string" then
        types = { types }
    end
    local tests = {}
    for i, t in ipairs(types) do
        tests[i] = TYPE_TESTS[t] or no_type
    end
    if #tests == 1 then
        return tests[1]
    end
    return function(v)
        for _, test in ipairs(tests) do
            local ok, out = test(v)
            if ok then
                return true, out
            end
        end
        return false, v
    end
end

-- Whether a check of node s may turn an integer-valued float into an integer (equal
-- to what it was, not the same: a write-back must test the number type too).
local function may_convert(s)
    return not (type(s) == "table" and type(s.type) == "string" and s.type ~= "integer" and s["$ref"] == nil and
        s.anyOf == nil and s.oneOf == nil)
end

local function compile_object(cache, root, s)
    local props = s.properties or {}
    local sub, converts = {}, {}
    for name, p in pairs(props) do
        sub[name] = compile(cache, root, p)
        converts[name] = may_convert(p)
    end
    local must = {}
    for _, name in ipairs(s.required or {}) do
        if props[name] == nil or props[name].default == nil then
            must[#must + 1] = name
        end
    end
    local closed = s.additionalProperties == false
    local extra = type(s.additionalProperties) == "table" and compile(cache, root, s.additionalProperties)
    local extra_converts = extra and may_convert(s.additionalProperties)
    local defaults = s.properties ~= nil and names_with_defaults(props) or {}
    -- owned: v is the checked value itself, made for this check alone; its
    -- defaults go in place once every member passed (nothing fails after them)
    return function(v, depth, owned)
        for i = 1, #must do
            if v[must[i]] == nil then
                return FAIL
            end
        end
        local out = v
        for k, x in next, v do
            if type(k) ~= "string" then
                return FAIL
            end
            local f = sub[k] or extra
            if f then
                local nv = f(x, depth)
                if nv == FAIL then
                    return FAIL
                end
                if nv ~= x or ((converts[k] or (extra_converts and sub[k] == nil)) and
                    math_type(nv) ~= math_type(x)) then
                    out = writable(out, v)
                    out[k] = nv
                end
            elseif closed then
                return FAIL
            end
        end
        for i = 1, #defaults do
            local name = defaults[i]
            if v[name] == nil then
                if not (owned and out == v) then
                    out = writable(out, v)
                end
                out[name] = deep_copy(props[name].default)
            end
        end
        return out
    end
end

local function compile_array(cache, root, s)
    local min, max, unique = s.minItems, s.maxItems, s.uniqueItems
    local item = s.items and compile(cache, root, s.items)
    local item_converts = item and may_convert(s.items)
    return function(v, depth)
        local out = v
        local n = #v
        if (min and n < min) or (max and n > max) then
            return FAIL
        end
        if item then
            for i = 1, n do
                local x = v[i]
                local nv = item(x, depth)
                if nv == FAIL then
                    return FAIL
                end
                if nv ~= x or (item_converts and math_type(nv) ~= math_type(x)) then
                    out = writable(out, v, n)
                    out[i] = nv
                end
            end
        end
        if unique and first_duplicate(v, n) then
            return FAIL
        end
        return out
    end
end

local function compile_alts(cache, root, list)
    local fns = {}
    for i, alt in ipairs(list) do
        fns[i] = compile(cache, root, alt)
    end
    return fns
end

-- The string entries of an enum as a set: a string equals an entry exactly when it
-- is that string.
local function string_set(enum)
    local set = {}
    for _, e in ipairs(enum) do
        if type(e) == "string" then
            set[e] = true
        end
    end
    return set
end

-- Whether string v has the length bounds (in characters, as validate counts them).
local function length_fits(v, min_len, max_len)
    local bytes = #v
    -- a character is 1 to 4 bytes: the byte length alone often decides
    if (not max_len or bytes <= max_len) and (not min_len or bytes >= 4 * min_len) then
        return true
    end
    local len = utf8.len(v) or bytes
    return not ((min_len and len < min_len) or (max_len and len > max_len))
end

-- The common nodes (one declared type, nothing that combines or refers) get a check
-- with only their own tests, handing anything unusual to the full check: an
-- integer-valued float, a boxed number, a plain Lua table.
local function specialize(cache, root, s, check)
    if s["$ref"] or s.anyOf or s.oneOf or s.const ~= nil or type(s.type) ~= "string" then
        return nil
    end
    local t = s.type
    if t == "string" then
        local min_len, max_len = s.minLength, s.maxLength
        local enum_strings = s.enum and string_set(s.enum)
        return function(v, depth)
            if depth >= MAX_DEPTH or type(v) ~= "string" or
                (enum_strings and not enum_strings[v]) or
                ((min_len or max_len) and not length_fits(v, min_len, max_len)) then
                return FAIL
            end
            return v
        end
    end
    if s.enum then
        return nil
    end
    if t == "integer" then
        local lo, hi = s.minimum and num_value(s.minimum), s.maximum and num_value(s.maximum)
        local xlo = s.exclusiveMinimum and num_value(s.exclusiveMinimum)
        local xhi = s.exclusiveMaximum and num_value(s.exclusiveMaximum)
        return function(v, depth)
            if depth >= MAX_DEPTH or math_type(v) ~= "integer" then
                return check(v, depth)
            end
            if (lo and v < lo) or (hi and v > hi) or (xlo and v <= xlo) or (xhi and v >= xhi) then
                return FAIL
            end
            return v
        end
    elseif t == "boolean" then
        return function(v, depth)
            if depth >= MAX_DEPTH or type(v) ~= "boolean" then
                return FAIL
            end
            return v
        end
    elseif t == "object" or t == "array" then
        local mark = t == "object" and OBJECT_MT or ARRAY_MT
        local contents -- the object or array part of check
        return function(v, depth, owned)
            if depth >= MAX_DEPTH or not mark or getmetatable(v) ~= mark then
                return check(v, depth)
            end
            if not contents then
                contents = (t == "object" and compile_object or compile_array)(cache, root, s)
            end
            return contents(v, depth + 1, owned)
        end
    end
    return nil
end

-- compile(cache, root, s) -> check(v, depth) -> value | FAIL, once per schema node;
-- $ref targets are looked up at the first call (definitions may refer to each other).
compile = function(cache, root, s)
    local done = cache[s]
    if done then
        return done
    end
    local ref, ref_name = nil, s["$ref"] and s["$ref"]:match("^#/%$defs/(.+)$")
    local test = s.type and compile_types(s.type)
    -- one declared type whose test needs no function call in the common case
    local only = type(s.type) == "string" and s.type or nil
    local enum, const = s.enum, s.const
    local minimum, maximum = s.minimum, s.maximum
    local xmin, xmax = s.exclusiveMinimum, s.exclusiveMaximum
    local ranged = minimum or maximum or xmin or xmax
    local min_len, max_len = s.minLength, s.maxLength
    local as_array_if_empty = wants_array(s)
    local array_check, object_check -- built at the first container
    local any_of, one_of
    local enum_strings = type(enum) == "table" and string_set(enum) or {}
    local function check(v, depth)
        depth = depth + 1
        if depth > MAX_DEPTH then
            return FAIL
        end
        local out = v
        if ref_name then
            if not ref then
                ref = compile(cache, root, root["$defs"][ref_name])
            end
            out = ref(out, depth)
            if out == FAIL then
                return FAIL
            end
        end
        local tv = type(out)
        local kind = tv == "table" and table_kind(out) or nil
        if test then
            local ok
            if only == "string" then
                ok = tv == "string"
            elseif only == "object" then
                ok = kind == "object" or kind == "both"
            elseif only == "array" then
                ok = kind == "array" or kind == "both"
            elseif only == "integer" and math_type(out) == "integer" then
                ok = true
            else
                ok, out = test(out)
                tv = type(out)
            end
            if not ok then
                return FAIL
            end
        end
        if enum then
            if tv == "string" then
                if not enum_strings[out] then
                    return FAIL
                end
            elseif not in_enum(out, enum) then
                return FAIL
            end
        end
        if const ~= nil and not json_equal(out, const) then
            return FAIL
        end
        if tv == "string" then
            if (min_len or max_len) and not length_fits(out, min_len, max_len) then
                return FAIL
            end
        elseif tv == "number" or kind == "number" then
            if ranged then
                local x = num_value(out)
                if (minimum and x < num_value(minimum)) or (maximum and x > num_value(maximum)) or
                    (xmin and x <= num_value(xmin)) or (xmax and x >= num_value(xmax)) then
                    return FAIL
                end
            end
        elseif kind == "array" or (kind == "both" and as_array_if_empty) then
            if kind == "both" and cljson then
                out = setmetatable({}, cljson.array_mt)
            end
            array_check = array_check or compile_array(cache, root, s)
            out = array_check(out, depth)
            if out == FAIL then
                return FAIL
            end
        elseif kind == "object" or kind == "both" then
            object_check = object_check or compile_object(cache, root, s)
            out = object_check(out, depth)
            if out == FAIL then
                return FAIL
            end
        end
        if any_of then
            local matched = false
            for _, alt in ipairs(any_of) do
                local nv = alt(out, depth)
                if nv ~= FAIL then
                    out = nv
                    matched = true
                    break
                end
            end
            if not matched then
                return FAIL
            end
        end
        if one_of then
            local count, first = 0, nil
            for _, alt in ipairs(one_of) do
                local nv = alt(out, depth)
                if nv ~= FAIL then
                    count = count + 1
                    first = first or nv
                end
            end
            if count ~= 1 then
                return FAIL
            end
            out = first
        end
        return out
    end
    cache[s] = specialize(cache, root, s, check) or check
    any_of = s.anyOf and compile_alts(cache, root, s.anyOf)
    one_of = s.oneOf and compile_alts(cache, root, s.oneOf)
    return cache[s]
end

-- root -> { node -> check }
local checks = setmetatable({}, { __mode = "k" })

----------------------------------------------------------------------------
-- the generated check: for a root whose nodes are in the common subset (one declared
-- type among string, integer, boolean, object, array; string enums, lengths, integer
-- ranges, properties, required, closed objects, items, item counts, defaults, a bare
-- $ref), straight-line Lua source is generated once per root and loaded: no closure
-- call per node, no loop over an object's keys to dispatch them. It answers as the
-- closure check does (a value or FAIL) and hands every node outside the subset, and
-- every unusual value (a plain table, a float, a boxed number), to the closure check
-- of that node. Names and texts from the schema enter the source only as %q literals
-- or as constants passed in (K), never spliced.

-- object_size(t) -> its number of members: one C call in the sandbox (clruntime),
-- a loop elsewhere (busted loads this file without the runtime).
local has_runtime, clruntime = pcall(require, "clruntime")
local object_size = has_runtime and type(clruntime) == "table" and clruntime.object_size
if not object_size then
    object_size = function(t)
        local n = 0
        for _ in next, t do
            n = n + 1
        end
        return n
    end
end
M.object_size = object_size

-- metatable_of(v): v's metatable, by one C call in the sandbox (no __metatable
-- look-up: the checks only compare it with cljson's marks), else getmetatable.
local metatable_of = has_runtime and type(clruntime) == "table" and clruntime.metatable or getmetatable

local ANNOTATIONS = { description = true, title = true, examples = true, format = true,
    default = true }
-- per type, the keywords the generator handles (anything else: the closure check)
local GEN_KEYS = {
    string = { enum = true, minLength = true, maxLength = true },
    integer = { minimum = true, maximum = true, exclusiveMinimum = true, exclusiveMaximum = true },
    boolean = {},
    object = { properties = true, required = true, additionalProperties = true, anyOf = true },
    array = { items = true, minItems = true, maxItems = true },
}

-- anyOf whose alternatives only name required members ({required = {...}}, "one of
-- these must be given"): on an object that passed its own check, an alternative
-- matches exactly when those members are present.
local function required_alternatives(list)
    if type(list) ~= "table" or #list == 0 then
        return false
    end
    for _, alt in ipairs(list) do
        if type(alt) ~= "table" or type(alt.required) ~= "table" then
            return false
        end
        for k in pairs(alt) do
            if k ~= "required" and k ~= "description" and k ~= "title" then
                return false
            end
        end
        for _, name in ipairs(alt.required) do
            if type(name) ~= "string" then
                return false
            end
        end
    end
    return true
end

local function plain_number(x)
    return x == nil or (type(x) == "number" and x == x)
end

-- Whether the generator handles node s itself (its children are decided apart).
local function generable(root, s, is_root)
    if type(s) ~= "table" then
        return false
    end
    local ref = s["$ref"]
    if ref ~= nil then
        for k in pairs(s) do
            if k ~= "$ref" and not ANNOTATIONS[k] then
                return false
            end
        end
        local name = type(ref) == "string" and ref:match("^#/%$defs/(.+)$")
        local defs = root["$defs"]
        return name ~= nil and type(defs) == "table" and type(defs[name]) == "table" and
            generable(root, defs[name], false)
    end
    local keys = GEN_KEYS[s.type]
    if keys == nil then
        return false
    end
    for k, x in pairs(s) do
        if k ~= "type" and not ANNOTATIONS[k] and not keys[k] and not (is_root and k == "$defs") then
            return false
        end
        if s.type == "integer" and keys[k] and not plain_number(x) then
            return false
        end
    end
    if s.enum ~= nil then
        for _, e in ipairs(s.enum) do
            if type(e) ~= "string" then
                return false
            end
        end
    end
    if s.additionalProperties ~= nil and type(s.additionalProperties) ~= "boolean" then
        return false
    end
    if s.anyOf ~= nil and not required_alternatives(s.anyOf) then
        return false
    end
    if s.properties ~= nil and type(s.properties) ~= "table" then
        return false
    end
    return true
end

local q = function(x)
    return string.format("%q", x)
end

-- emitter state: lines, constants (K), closure checks (S), def functions, names
local function emitter(cache, root)
    local e = { lines = {}, K = {}, S = {}, defs = {}, n = 0, cache = cache, root = root }
    function e.put(line)
        e.lines[#e.lines + 1] = line
    end
    function e.const(x)
        if math.type(x) == "integer" then
            return string.format("%d", x)
        end
        e.K[#e.K + 1] = x
        return "K[" .. #e.K .. "]"
    end
    function e.slow(s)
        e.S[#e.S + 1] = compile(cache, root, s)
        return "S[" .. #e.S .. "]"
    end
    function e.name(prefix)
        e.n = e.n + 1
        return prefix .. e.n
    end
    return e
end

local emit_node

-- Code that checks local x (node s at static depth d of the function) and leaves the
-- checked value in local y (declared by the caller), or returns FAIL. f: the
-- function's state (max depth reached). Returns whether y may differ from x: false,
-- true, or "num" when y may also be x's integer-valued float made an integer (equal
-- to x: the caller's write-back tests the number type too).
local function emit_slow(e, f, s, x, y, d)
    e.put(y .. " = " .. e.slow(s) .. "(" .. x .. ", depth + " .. (d - 1) .. ")")
    e.put("if " .. y .. " == FAIL then return FAIL end")
    f.max = math.max(f.max, d)
    return may_convert(s) and "num" or true
end

local function emit_string(e, s, x)
    -- an enum's entries are strings: equal to one, x is a string (no type call)
    if not s.enum then
        e.put("if type(" .. x .. ") ~= \"string\" then return FAIL end")
    end
    if s.enum then
        if #s.enum <= 4 then
            local alts = {}
            for i, v in ipairs(s.enum) do
                alts[i] = x .. " ~= " .. q(v)
            end
            if #alts == 0 then
                alts[1] = "true"
            end
            e.put("if " .. table.concat(alts, " and ") .. " then return FAIL end")
        else
            e.put("if not " .. e.const(string_set(s.enum)) .. "[" .. x .. "] then return FAIL end")
        end
    end
    local min_len, max_len = s.minLength, s.maxLength
    if min_len or max_len then
        -- a character is 1 to 4 bytes: the byte length alone often decides
        local decided = {}
        if max_len then
            decided[#decided + 1] = "#" .. x .. " <= " .. e.const(max_len)
        end
        if min_len then
            decided[#decided + 1] = "#" .. x .. " >= " .. e.const(math.tointeger(4 * min_len) or 4 * min_len)
        end
        e.put("if not (" .. table.concat(decided, " and ") .. ") and not length_fits(" .. x .. ", " ..
            (min_len and e.const(min_len) or "nil") .. ", " .. (max_len and e.const(max_len) or "nil") ..
            ") then return FAIL end")
    end
end

-- store: the code putting y in the caller's copy of its container, or nil; only the
-- slow branch can change x (an integer-valued float made an integer), so it alone
-- tests and stores, and the caller has nothing to test.
local function emit_integer(e, f, s, x, y, d, store)
    e.put("if math_type(" .. x .. ") ~= \"integer\" then")
    emit_slow(e, f, s, x, y, d)
    if store then
        e.put("if math_type(" .. y .. ") ~= math_type(" .. x .. ") then " .. store .. " end")
    end
    e.put("else")
    e.put(y .. " = " .. x)
    local tests = {}
    for kw, op in pairs({ minimum = "<", maximum = ">", exclusiveMinimum = "<=", exclusiveMaximum = ">=" }) do
        if s[kw] ~= nil then
            tests[#tests + 1] = x .. " " .. op .. " " .. e.const(s[kw])
        end
    end
    table.sort(tests)
    if #tests > 0 then
        e.put("if " .. table.concat(tests, " or ") .. " then return FAIL end")
    end
    e.put("end")
    return store == nil
end

-- The code putting child value cy in y, the copy of container x (made at the first
-- change).
local function store_code(y, x, slot, cy, n)
    return y .. " = writable(" .. y .. ", " .. x .. (n and (", " .. n) or "") .. ") " .. y .. "[" .. slot ..
        "] = " .. cy
end

-- The write-back of child value cy (checked from cx): changes as emit_node returns.
local function emit_store(e, changes, cx, cy, store)
    if changes == "num" then
        e.put("if " .. cy .. " ~= " .. cx .. " or math_type(" .. cy .. ") ~= math_type(" .. cx .. ") then")
    elseif changes then
        e.put("if " .. cy .. " ~= " .. cx .. " then")
    else
        return
    end
    e.put(store)
    e.put("end")
end

local function emit_object(e, f, s, x, y, d, owned)
    e.put("if getmetatable(" .. x .. ") ~= OBJECT_MT then")
    emit_slow(e, f, s, x, y, d)
    e.put("else")
    e.put(y .. " = " .. x)
    local props = type(s.properties) == "table" and s.properties or {}
    for _, name in ipairs(s.required or {}) do
        if props[name] == nil or props[name].default == nil then
            e.put("if " .. x .. "[" .. q(name) .. "] == nil then return FAIL end")
        end
    end
    local names = {}
    for name in pairs(props) do
        if type(name) == "string" then
            names[#names + 1] = name
        end
    end
    table.sort(names)
    local count = e.name("n")
    e.put("local " .. count .. " = 0")
    for _, name in ipairs(names) do
        local px, py = e.name("x"), e.name("y")
        e.put("do")
        e.put("local " .. px .. " = " .. x .. "[" .. q(name) .. "]")
        e.put("if " .. px .. " ~= nil then")
        e.put(count .. " = " .. count .. " + 1")
        e.put("local " .. py)
        local store = store_code(y, x, q(name), py)
        emit_store(e, emit_node(e, f, props[name], px, py, d + 1, nil, store), px, py, store)
        e.put("end")
        e.put("end")
    end
    -- members beyond the declared ones: none when closed, string names otherwise
    if s.additionalProperties == false then
        e.put("if object_size(" .. x .. ") ~= " .. count .. " then return FAIL end")
    else
        e.put("if object_size(" .. x .. ") ~= " .. count .. " then")
        e.put("for k in next, " .. x .. " do if type(k) ~= \"string\" then return FAIL end end")
        e.put("end")
    end
    if s.properties ~= nil then
        for _, name in ipairs(names_with_defaults(props)) do
            local default = props[name].default
            local value = e.const(default)
            if type(default) == "table" then
                value = "deep_copy(" .. value .. ")"
            end
            e.put("if " .. x .. "[" .. q(name) .. "] == nil then")
            if owned then
                e.put("if not (owned and " .. y .. " == " .. x .. ") then " .. y .. " = writable(" .. y ..
                    ", " .. x .. ") end")
            else
                e.put(y .. " = writable(" .. y .. ", " .. x .. ")")
            end
            e.put(y .. "[" .. q(name) .. "] = " .. value)
            e.put("end")
        end
    end
    if s.anyOf ~= nil then
        local alts = {}
        for i, alt in ipairs(s.anyOf) do
            local present = { "true" }
            for j, name in ipairs(alt.required) do
                present[j] = y .. "[" .. q(name) .. "] ~= nil"
            end
            alts[i] = "(" .. table.concat(present, " and ") .. ")"
        end
        e.put("if not (" .. table.concat(alts, " or ") .. ") then return FAIL end")
    end
    e.put("end")
end

local function emit_array(e, f, s, x, y, d)
    e.put("if getmetatable(" .. x .. ") ~= ARRAY_MT then")
    emit_slow(e, f, s, x, y, d)
    e.put("else")
    e.put(y .. " = " .. x)
    local len = e.name("len")
    e.put("local " .. len .. " = #" .. x)
    if s.minItems then
        e.put("if " .. len .. " < " .. e.const(s.minItems) .. " then return FAIL end")
    end
    if s.maxItems then
        e.put("if " .. len .. " > " .. e.const(s.maxItems) .. " then return FAIL end")
    end
    if s.items ~= nil then
        local i, ix, iy = e.name("i"), e.name("x"), e.name("y")
        e.put("for " .. i .. " = 1, " .. len .. " do")
        e.put("local " .. ix .. " = " .. x .. "[" .. i .. "]")
        e.put("local " .. iy)
        local store = store_code(y, x, i, iy, len)
        emit_store(e, emit_node(e, f, s.items, ix, iy, d + 1, nil, store), ix, iy, store)
        e.put("end")
    end
    e.put("end")
end

-- The function checking $defs entry name: D<i>(v, depth) -> value | FAIL, depth the
-- interpreter's depth at the $ref node.
local function def_function(e, name)
    local fname = e.defs[name]
    if fname then
        return fname
    end
    fname = e.name("D")
    e.defs[name] = fname
    e.defs[#e.defs + 1] = fname
    local saved = e.lines
    e.lines = {}
    local f = { max = 1 }
    e.put(fname .. " = function(v, depth)")
    local guard = #e.lines + 1
    e.put("") -- the depth guard, once the deepest node is known
    e.put("local y")
    emit_node(e, f, e.root["$defs"][name], "v", "y", 1)
    e.put("return y")
    e.put("end")
    e.lines[guard] = "if depth > " .. (MAX_DEPTH - f.max) .. " then return FAIL end"
    e.body = e.body or {}
    table.move(e.lines, 1, #e.lines, #e.body + 1, e.body)
    e.lines = saved
    return fname
end

-- store: see emit_integer.
emit_node = function(e, f, s, x, y, d, owned, store)
    f.max = math.max(f.max, d)
    if not generable(e.root, s, s == e.root) or d > 40 then
        return emit_slow(e, f, s, x, y, d)
    end
    if s["$ref"] ~= nil then
        local fname = def_function(e, s["$ref"]:match("^#/%$defs/(.+)$"))
        e.put(y .. " = " .. fname .. "(" .. x .. ", depth + " .. d .. ")")
        e.put("if " .. y .. " == FAIL then return FAIL end")
        return "num"
    end
    local t = s.type
    if t == "string" then
        emit_string(e, s, x)
        e.put(y .. " = " .. x)
        return false
    elseif t == "boolean" then
        e.put("if type(" .. x .. ") ~= \"boolean\" then return FAIL end")
        e.put(y .. " = " .. x)
        return false
    elseif t == "integer" then
        return emit_integer(e, f, s, x, y, d, store)
    elseif t == "object" then
        emit_object(e, f, s, x, y, d, owned)
    else
        emit_array(e, f, s, x, y, d)
    end
    return true
end

-- generate(cache, root) -> check(v, owned) -> value | FAIL, or nil when root is not
-- in the subset or its source does not load.
local function generate(cache, root)
    if not generable(root, root, true) or root["$ref"] ~= nil then
        return nil
    end
    local e = emitter(cache, root)
    local f = { max = 1 }
    e.put("return function(v, owned)")
    e.put("local depth = 0")
    e.put("local y")
    emit_node(e, f, root, "v", "y", 1, true)
    e.put("return y")
    e.put("end")
    if f.max > MAX_DEPTH then
        return nil
    end
    -- the chunk's environment is empty: what it uses comes in as arguments
    local head = { "local FAIL, OBJECT_MT, ARRAY_MT, K, S, writable, deep_copy, length_fits, object_size,",
        "getmetatable, type, next, math_type = ..." }
    if #e.defs > 0 then
        head[#head + 1] = "local " .. table.concat(e.defs, ", ")
        table.move(e.body, 1, #e.body, #head + 1, head)
    end
    table.move(e.lines, 1, #e.lines, #head + 1, head)
    local chunk = load(table.concat(head, "\n"), "=(schema check)", "t", {})
    if not chunk then
        return nil
    end
    return chunk(FAIL, OBJECT_MT, ARRAY_MT, e.K, e.S, writable, deep_copy, length_fits, object_size,
        metatable_of, type, next, math_type)
end

-- root -> generated check | false (not generated)
local generated = setmetatable({}, { __mode = "k" })

-- The generated check of root (made at the first call), or nil when root is not in
-- the subset: what the specs test against the interpreter.
local function generated_check(root)
    local g = generated[root]
    if g == nil then
        local cache = checks[root]
        if cache == nil then
            cache = {}
            checks[root] = cache
        end
        local ok, c = pcall(generate, cache, root)
        g = ok and c or false
        generated[root] = g
    end
    return g or nil
end
M.generated_check = generated_check

-- fast(root, node, value [, owned, closures_only]) -> true, value | false (invalid, or
-- not decided here). owned: as validate's. The root's generated check when it has one
-- (unless closures_only), else the closure check.
local function fast(root, node, value, owned, closures_only)
    if type(root) ~= "table" or type(node) ~= "table" then
        return false
    end
    local cache = checks[root]
    if cache == nil then
        cache = {}
        checks[root] = cache
    end
    if node == root and OBJECT_MT and not closures_only then
        local g = generated[root]
        if g == nil then
            g = generated_check(root) or false
        end
        if g then
            local ok, out = pcall(g, value, owned)
            if ok and out ~= FAIL then
                return true, out
            end
            return false
        end
    end
    local check = cache[node]
    if check == nil then
        local ok, c = pcall(compile, cache, root, node)
        if not ok then
            return false
        end
        check = c
    end
    local ok, out = pcall(check, value, 0, owned)
    if ok and out ~= FAIL then
        return true, out
    end
    return false
end

-- The interpreter: every error, with its path and message.
local function interpret(root, node, value, lang)
    local st = { errors = {}, root = root, depth = 0, lang = lang or "en-US" }
    local out = validate(st, node, value, "/")
    if #st.errors > 0 then
        return nil, st.errors
    end
    return out
end

-- Validates value against node, a part of root (for $ref resolution). lang: the
-- language of the error messages ("zh-CN" or "en-US"; nil = en-US, the language of
-- the load-time checks operators read).
function M.validate_node(root, node, value, lang, owned)
    local valid, checked = fast(root, node, value, owned)
    if valid then
        return checked
    end
    return interpret(root, node, value, lang)
end

-- schema.validate(s, value, lang [, owned]) -> value_with_defaults | nil, errors
-- ({path=, message=}); path is the JSON pointer of the value, message says what is
-- wrong with it in lang (as validate_node). The input is never mutated: changed
-- tables are copied (copy on write). owned = true: value was made for this check
-- alone (nobody else holds it), so a valid value's top-level object gets its
-- defaults in place instead of in a copy; an invalid value is still left as it was.
function M.validate(s, value, lang, owned)
    if value == nil then
        value = {}
    end
    -- every call of a tool comes here: a root whose check is generated already runs
    -- it straight away (what fast() would do, without its calls and checks)
    local g = OBJECT_MT and generated[s]
    if g then
        local ok, out = pcall(g, value, owned)
        if ok and out ~= FAIL then
            return out
        end
        return interpret(s, s, value, lang)
    end
    return M.validate_node(s, s, value, lang, owned)
end

-- schema.validate_closures(s, value, lang [, owned]): the same without the generated
-- check (the closure check, then the interpreter), for the specs that compare the paths.
function M.validate_closures(s, value, lang, owned)
    local valid, checked = fast(s, s, value == nil and {} or value, owned, true)
    if valid then
        return checked
    end
    return interpret(s, s, value == nil and {} or value, lang)
end

-- What a generated check answers for an invalid value (or one it leaves to the
-- interpreter).
M.FAIL = FAIL

-- schema.validate_reference(s, value, lang): the same without the compiled check, the
-- interpreter alone (the reference the check is tested against).
function M.validate_reference(s, value, lang)
    return interpret(s, s, value == nil and {} or value, lang)
end

----------------------------------------------------------------------------
-- coerce_query: REST query-string values (strings) -> typed values

local function coerce_one(types, text)
    for _, t in ipairs(types) do
        if t == "boolean" then
            if text == "true" then
                return true
            elseif text == "false" then
                return false
            end
        elseif t == "integer" then
            if text:match("^%-?%d+$") then
                local n = math.tointeger(tonumber(text))
                -- beyond int64: keep the text, validation then reports the type
                if n and tostring(n) == text:gsub("^(%-?)0+(%d)", "%1%2") then
                    return n
                end
            end
        elseif t == "number" then
            local n = tonumber(text)
            if n and text:match("^%s*[%-%d]") and n == n and n ~= math.huge and n ~= -math.huge then
                return n
            end
        elseif t == "string" then
            return text
        elseif t == "null" and text == "null" then
            return cljson and cljson.null or nil
        end
    end
    return text
end

-- schema.coerce_query(s, query) -> table: known top-level properties converted
-- by their declared type; unknown names dropped.
function M.coerce_query(s, query)
    local out = {}
    local props = type(s) == "table" and s.properties or nil
    if type(query) ~= "table" or type(props) ~= "table" then
        return out
    end
    for name, v in pairs(query) do
        local p = props[name]
        if p and p["$ref"] and s["$defs"] then
            p = s["$defs"][p["$ref"]:match("^#/%$defs/(.+)$")] or p
        end
        if p and type(v) == "string" then
            local types = p.type
            if type(types) == "string" then
                types = { types }
            end
            if types then
                out[name] = coerce_one(types, v)
            else
                out[name] = v
            end
        elseif p and type(v) == "table" then
            -- a repeated parameter: coerce each element by the items' type
            local items = p.items or {}
            local types = type(items.type) == "string" and { items.type } or items.type
            local arr = {}
            for i, x in ipairs(v) do
                if types and type(x) == "string" then
                    arr[i] = coerce_one(types, x)
                else
                    arr[i] = x
                end
            end
            out[name] = cljson and setmetatable(arr, cljson.array_mt) or arr
        end
    end
    return out
end

----------------------------------------------------------------------------
-- localize: a copy of a schema with description/title resolved for lang

local function pick_text(v, lang)
    if type(v) == "table" then
        return v[lang] or v["zh-CN"] or v["en-US"]
    end
    return v
end

local function mark_array(t)
    if cljson and type(t) == "table" and getmetatable(t) == nil then
        return setmetatable(t, cljson.array_mt)
    end
    return t
end

local localize

local function declares_array(s)
    local t = s.type
    if t == "array" then
        return true
    end
    if type(t) == "table" then
        for _, x in ipairs(t) do
            if x == "array" then
                return true
            end
        end
    end
    return false
end

localize = function(s, lang)
    if type(s) ~= "table" then
        return s
    end
    local out = {}
    for kw, v in pairs(s) do
        if kw == "description" or kw == "title" then
            out[kw] = pick_text(v, lang)
        elseif kw == "properties" or kw == "$defs" then
            local m = {}
            for name, sub in pairs(v) do
                m[name] = localize(sub, lang)
            end
            out[kw] = cljson and setmetatable(m, cljson.object_mt) or m
        elseif kw == "items" or kw == "additionalProperties" then
            out[kw] = localize(v, lang)
        elseif kw == "anyOf" or kw == "oneOf" then
            local a = {}
            for i, sub in ipairs(v) do
                a[i] = localize(sub, lang)
            end
            out[kw] = mark_array(a)
        elseif kw == "required" or kw == "enum" or kw == "examples" then
            out[kw] = mark_array(deep_copy(v))
        elseif kw == "type" and type(v) == "table" then
            out[kw] = mark_array(deep_copy(v))
        elseif (kw == "default" or kw == "const") and type(v) == "table"
                and next(v) == nil and declares_array(s) then
            out[kw] = mark_array({})
        else
            out[kw] = deep_copy(v)
        end
    end
    return out
end

-- schema.localize(s, lang) -> a new schema table; s is not modified.
function M.localize(s, lang)
    return localize(s, lang)
end

M.is_null = is_null
M.container_kind = container_kind

return M
