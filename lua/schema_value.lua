-- schema_value: the JSON value model the three schema checks share (lua/schema.lua is
-- their face): what a value is (null, boxed number, array, object, an empty plain
-- table that may be either), JSON equality and copies, JSON pointer paths, and the
-- small pieces every tier uses alike (copy on write, duplicate items, defaults,
-- string enums and lengths).
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

-- Nesting depth past which every tier answers "too deep".
local MAX_DEPTH = 200

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
-- shared by the three checks

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

-- Whether string v has the length bounds (in characters, as the interpreter counts them).
local function length_fits(v, min_len, max_len)
    local bytes = #v
    -- a character is 1 to 4 bytes: the byte length alone often decides
    if (not max_len or bytes <= max_len) and (not min_len or bytes >= 4 * min_len) then
        return true
    end
    local len = utf8.len(v) or bytes
    return not ((min_len and len < min_len) or (max_len and len > max_len))
end

M.cljson = cljson
M.MAX_DEPTH = MAX_DEPTH
M.NUMBER_MT, M.ARRAY_MT, M.OBJECT_MT = NUMBER_MT, ARRAY_MT, OBJECT_MT
M.is_null = is_null
M.is_boxed = is_boxed
M.is_sequence = is_sequence
M.table_kind = table_kind
M.container_kind = container_kind
M.num_value = num_value
M.is_number = is_number
M.is_integer = is_integer
M.has_type = has_type
M.type_name = type_name
M.equal = json_equal
M.in_enum = in_enum
M.copy = deep_copy
M.join = join
M.names_with_defaults = names_with_defaults
M.writable = writable
M.first_duplicate = first_duplicate
M.wants_array = wants_array
M.string_set = string_set
M.length_fits = length_fits

return M
