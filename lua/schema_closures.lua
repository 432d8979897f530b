-- schema_closures: the compiled check, the second of the schema checks behind
-- lua/schema.lua: the same rules as the interpreter (lua/schema_interp.lua), as a tree
-- of closures built once per schema node (schemas do not change after loading; a
-- reload builds new tables). It answers only "valid, and with these defaults" or FAIL,
-- without paths or messages; on FAIL the interpreter runs and reports, so every error
-- is worded and ordered as the interpreter words and orders it, and a valid value
-- costs no path strings, key sorts or error tables.
local M = {}

local V = require "schema_value"

local cljson = V.cljson
local MAX_DEPTH = V.MAX_DEPTH
local OBJECT_MT, ARRAY_MT = V.OBJECT_MT, V.ARRAY_MT
local is_null, is_number, is_integer, num_value = V.is_null, V.is_number, V.is_integer, V.num_value
local table_kind, container_kind = V.table_kind, V.container_kind
local json_equal, in_enum, deep_copy = V.equal, V.in_enum, V.copy
local names_with_defaults, writable = V.names_with_defaults, V.writable
local first_duplicate, wants_array = V.first_duplicate, V.wants_array
local string_set, length_fits = V.string_set, V.length_fits

local FAIL = {} -- the check's one answer for "invalid"
local math_type = math.type

local function no_type(v)
    return false, v
end

local compile

-- The type test of the interpreter for one type name: (v) -> ok, value (integer-valued
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
-- The closure cache of root (node -> check), made at the first call.
local function cache_of(root)
    local cache = checks[root]
    if cache == nil then
        cache = {}
        checks[root] = cache
    end
    return cache
end

-- What a check answers for an invalid value (or one it leaves to the interpreter).
M.FAIL = FAIL
-- compile(cache, root, s) -> check(v, depth [, owned]) -> value | FAIL; cache is
-- cache_of(root).
M.compile = compile
M.cache_of = cache_of
-- may_convert(s): whether a check of node s may turn an integer-valued float into an
-- integer (the write-back then tests the number type too).
M.may_convert = may_convert

return M
