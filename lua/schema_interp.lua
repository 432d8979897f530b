-- schema_interp: the interpreter, the first of the schema checks behind lua/schema.lua
-- and the reference the two faster ones are tested against. It walks the schema and
-- the value together and reports every error with its JSON pointer path and a message
-- in the caller's language, in a fixed order (an object's members sorted by name). The
-- faster checks answer only "valid" or not; on "not" the interpreter runs, so every
-- error the caller sees is worded and ordered here.
local M = {}

local catalog = require "catalog"
local V = require "schema_value"

local cljson = V.cljson
local MAX_DEPTH = V.MAX_DEPTH
local is_null, is_number, num_value = V.is_null, V.is_number, V.num_value
local has_type, type_name, container_kind = V.has_type, V.type_name, V.container_kind
local json_equal, in_enum, deep_copy = V.equal, V.in_enum, V.copy
local join, names_with_defaults, writable = V.join, V.names_with_defaults, V.writable
local first_duplicate, wants_array = V.first_duplicate, V.wants_array

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

local function tostring_less(a, b)
    return tostring(a) < tostring(b)
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

local function try(st, s, v, path)
    local sub = { errors = {}, root = st.root, depth = st.depth, lang = st.lang }
    local out = validate(sub, s, v, path)
    return #sub.errors == 0, out, sub.errors
end

validate = function(st, s, v, path)
    st.depth = st.depth + 1
    if st.depth > MAX_DEPTH then
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


-- The interpreter: every error, with its path and message.
local function interpret(root, node, value, lang)
    local st = { errors = {}, root = root, depth = 0, lang = lang or "en-US" }
    local out = validate(st, node, value, "/")
    if #st.errors > 0 then
        return nil, st.errors
    end
    return out
end
-- interpret(root, node, value, lang) -> value_with_defaults | nil, errors: node is a
-- part of root (for $ref resolution); lang the language of the messages (nil: en-US).
M.interpret = interpret

return M
