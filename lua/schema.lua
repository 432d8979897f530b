-- schema: the JSON Schema subset the core enforces before a tool runs.
--
-- One small, exact subset: what a tool declares is what the model is told and
-- what the core checks before handle() runs. Any keyword outside the subset is a
-- load error, so a schema can never promise something that is not enforced.
--
-- This file is the face: the load-time check of a schema (check_schema), validation,
-- the REST query's coercion and localization. Validation has three tiers, each in its
-- own file and each answering as the one below it does: the generated check
-- (schema_gen.lua, straight-line source per root, for the common subset), the closure
-- check (schema_closures.lua, any schema) and the interpreter (schema_interp.lua,
-- which words and orders every error). The value model they share is schema_value.lua.
local M = {}

local V = require "schema_value"
local I = require "schema_interp"
local C = require "schema_closures"
local G = require "schema_gen"

local cljson = V.cljson
local OBJECT_MT = V.OBJECT_MT
local is_sequence, container_kind, is_number = V.is_sequence, V.container_kind, V.is_number
local deep_copy, join = V.copy, V.join
local interpret = I.interpret
local FAIL, compile, cache_of = C.FAIL, C.compile, C.cache_of
local generated, generated_check = G.generated, G.generated_check

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

-- fast(root, node, value [, owned, closures_only]) -> true, value | false (invalid, or
-- not decided here). owned: as validate's. The root's generated check when it has one
-- (unless closures_only), else the closure check.
local function fast(root, node, value, owned, closures_only)
    if type(root) ~= "table" or type(node) ~= "table" then
        return false
    end
    local cache = cache_of(root)
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

M.equal = V.equal
M.copy = deep_copy
M.is_null = V.is_null
M.container_kind = container_kind
M.object_size = G.object_size
M.generated_check = generated_check

return M