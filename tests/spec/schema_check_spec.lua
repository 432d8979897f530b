-- The compiled check of schema.validate against the interpreter
-- (schema.validate_reference): for every shipped tool's input schema and generated
-- values, mostly shaped by the schema and partly not, both give the same value (with
-- the same marks) or the same errors.
local cljson = require "cljson"
local schema = require "schema"
local helper = require "helper"

-- A small deterministic generator (xorshift), independent of math.random.
local function rng(seed)
    local x = seed
    return function(n)
        x = x ~ (x << 13) & 0xffffffff
        x = x ~ (x >> 17)
        x = x ~ (x << 5) & 0xffffffff
        return x % n + 1
    end
end

local STRINGS = { "", "a", "kn_medical", "desc", "asc", "and", "==", "中文", "x/y~z" }

local function junk(r, depth)
    local k = r(depth > 2 and 9 or 11)
    if k == 1 then
        return cljson.null
    elseif k == 2 then
        return r(2) == 1
    elseif k == 3 then
        return r(21) - 11
    elseif k == 4 then
        return (r(41) - 21) / 2
    elseif k == 5 then
        return cljson.decode("12345678901234567890123")
    elseif k <= 9 then
        return STRINGS[r(#STRINGS)]
    elseif k == 10 then
        local a = cljson.array()
        for i = 1, r(3) - 1 do
            a[i] = junk(r, depth + 1)
        end
        return a
    end
    local o = cljson.object()
    for _ = 1, r(3) - 1 do
        o[STRINGS[r(#STRINGS)]] = junk(r, depth + 1)
    end
    return o
end

-- A value for s: shaped by s most of the time (its types, enum, properties, items).
local function gen(r, root, s, depth)
    if type(s) ~= "table" or depth > 6 or r(10) == 1 then
        return junk(r, depth)
    end
    if s["$ref"] then
        return gen(r, root, root["$defs"][s["$ref"]:match("^#/%$defs/(.+)$")], depth + 1)
    end
    if s.enum and r(4) > 1 then
        return s.enum[r(#s.enum)]
    end
    local alts = s.anyOf or s.oneOf
    if alts and r(2) == 1 then
        return gen(r, root, alts[r(#alts)], depth + 1)
    end
    local t = s.type
    if type(t) == "table" then
        t = t[r(#t)]
    end
    if t == "object" or (t == nil and s.properties) then
        local o = cljson.object()
        local names = {}
        for name in pairs(s.properties or {}) do
            names[#names + 1] = name
        end
        table.sort(names)
        for _, name in ipairs(names) do
            if r(3) > 1 then
                o[name] = gen(r, root, s.properties[name], depth + 1)
            end
        end
        if r(8) == 1 then
            o.unexpected = junk(r, depth + 1)
        end
        return o
    elseif t == "array" then
        local a = cljson.array()
        for i = 1, r(4) - 1 do
            a[i] = gen(r, root, s.items, depth + 1)
        end
        return a
    elseif t == "string" then
        return STRINGS[r(#STRINGS)]
    elseif t == "integer" then
        return r(3) == 1 and (r(200) - 50) + 0.0 or r(20000) - 100
    elseif t == "number" then
        return (r(2001) - 1001) / 4
    elseif t == "boolean" then
        return r(2) == 1
    elseif t == "null" then
        return cljson.null
    end
    return junk(r, depth)
end

local function shape(v)
    if type(v) ~= "table" then
        return v
    end
    return { mt = getmetatable(v), json = cljson.encode(v) }
end

describe("the compiled check of schema.validate", function()
    local names = {}
    for file in io.popen("ls " .. helper.root .. "/tools"):lines() do
        local name = file:match("^(.-)%.lua$")
        if name then
            names[#names + 1] = name
        end
    end
    assert.is_true(#names > 10)

    it("agrees with the interpreter on every tool's input schema", function()
        local r = rng(20261203)
        local valid, invalid = 0, 0
        for _, name in ipairs(names) do
            local tool = helper.load_tool(name)
            local s = tool.input_schema
            if s then
                for _ = 1, 300 do
                    local v = gen(r, s, s, 0)
                    local out, errs = schema.validate(s, v, "en-US")
                    local ref, ref_errs = schema.validate_reference(s, v, "en-US")
                    assert.same(shape(ref), shape(out), name .. ": " .. cljson.encode(v))
                    assert.same(ref_errs, errs, name .. ": " .. cljson.encode(v))
                    if out ~= nil then
                        valid = valid + 1
                    else
                        invalid = invalid + 1
                    end
                end
            end
        end
        -- both paths exercised
        assert.is_true(valid > 1000, "valid " .. valid)
        assert.is_true(invalid > 1000, "invalid " .. invalid)
    end)

    it("agrees on string lengths in characters (multi-byte and invalid UTF-8)", function()
        local s = { type = "object", properties = { a = { type = "string", minLength = 2, maxLength = 3 },
                                                      b = { type = "string", minLength = 1 } } }
        for _, text in ipairs({ "", "a", "ab", "abc", "abcd", "网", "网网", "网网网", "网网网网", "ab网",
                                "\xff", "\xff\xff", "\xff\xff\xff\xff", "a\xe7\xbd" }) do
            for _, v in ipairs({ { a = text }, { b = text } }) do
                local out, errs = schema.validate(s, v, "en-US")
                local ref, ref_errs = schema.validate_reference(s, v, "en-US")
                assert.same(ref_errs, errs, text)
                assert.same(ref, out, text)
            end
        end
    end)

    it("agrees on plain Lua tables, empty tables and deep nesting", function()
        local s = { type = "object", properties = {
            list = { type = "array", items = { type = "integer" }, default = {} },
            any = {}, deep = { ["$ref"] = "#/$defs/node" } },
            ["$defs"] = { node = { type = { "object", "null" }, properties = {
                next = { ["$ref"] = "#/$defs/node" } } } } }
        local deep = {}
        local at = deep
        for _ = 1, 250 do
            at.next = {}
            at = at.next
        end
        for _, v in ipairs({ {}, { list = {} }, { list = { 1, 2.0, 3 } }, { list = { 1, "x" } },
                             { any = { 1, nil, 3 } }, { [1] = "a", b = 1 }, { deep = deep },
                             { deep = { next = cljson.null } } }) do
            local out, errs = schema.validate(s, v)
            local ref, ref_errs = schema.validate_reference(s, v)
            assert.same(ref_errs, errs)
            assert.same(ref, out)
            if ref ~= nil then
                assert.equal(getmetatable(ref), getmetatable(out))
                assert.equal(getmetatable(ref.list), getmetatable(out.list))
            end
        end
    end)
end)
