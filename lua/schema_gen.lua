-- schema_gen: the generated check, the third and fastest of the schema checks behind
-- lua/schema.lua. For a root whose nodes are in the common subset (one declared
-- type among string, integer, boolean, object, array; string enums, lengths, integer
-- ranges, properties, required, closed objects, items, item counts, defaults, a bare
-- $ref), straight-line Lua source is generated once per root and loaded: no closure
-- call per node, no loop over an object's keys to dispatch them. It answers as the
-- closure check (lua/schema_closures.lua) does (a value or FAIL) and hands every node
-- outside the subset, and every unusual value (a plain table, a float, a boxed
-- number), to the closure check of that node. Names and texts from the schema enter
-- the source only as %q literals or as constants passed in (K), never spliced.
local M = {}

local V = require "schema_value"
local C = require "schema_closures"

local MAX_DEPTH = V.MAX_DEPTH
local OBJECT_MT, ARRAY_MT = V.OBJECT_MT, V.ARRAY_MT
local deep_copy, names_with_defaults, writable = V.copy, V.names_with_defaults, V.writable
local string_set, length_fits = V.string_set, V.length_fits
local FAIL, compile, cache_of, may_convert = C.FAIL, C.compile, C.cache_of, C.may_convert
local math_type = math.type

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
        local ok, c = pcall(generate, cache_of(root), root)
        g = ok and c or false
        generated[root] = g
    end
    return g or nil
end

-- generated_check(root) -> check(v, owned) -> value | FAIL, made at the first call;
-- nil when root is not in the subset.
M.generated_check = generated_check
-- generated[root]: its generated check, false when not generated, nil before the first
-- generated_check(root) (the face's per-call path reads it without a call).
M.generated = generated

return M
