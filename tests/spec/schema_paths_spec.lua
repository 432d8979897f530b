-- schema.validate has three paths: the generated check (straight-line source per
-- root), the closure check, and the interpreter (the only one that words errors).
-- Every case of schema_spec runs here again with schema.validate comparing all three
-- on its value; then the cases the generated check has of its own.
local cljson = require "cljson"
local helper = require "helper"
local real = require "schema"

-- Deep equality of two checked values, metatables (array and object marks) included.
local function same_value(a, b, where)
    where = where or "value"
    assert.equal(type(a), type(b), where)
    if type(a) ~= "table" or real.container_kind(a) == nil then
        assert.is_true(a == b or (a ~= a and b ~= b), where)
        assert.equal(math.type(a), math.type(b), where .. " number type")
        return
    end
    assert.equal(getmetatable(a), getmetatable(b), where .. " mark")
    for k, x in pairs(a) do
        same_value(x, b[k], where .. "/" .. tostring(k))
    end
    for k in pairs(b) do
        assert.is_not_nil(a[k], where .. "/" .. tostring(k))
    end
end

-- The generated check's answer for v: a value, or nil when it fails or leaves v to
-- the interpreter.
local function generated(s, v, owned)
    local check = type(s) == "table" and real.generated_check(s)
    if not check then
        return nil, false
    end
    local ok, out = pcall(check, v == nil and {} or v, owned)
    if not ok or out == real.FAIL then
        return nil, true
    end
    return out, true
end

-- Runs value v through every path and compares; returns what schema.validate returns.
local function compare(s, v, lang, owned)
    local ref, ref_errs = real.validate_reference(s, real.copy(v), lang)
    local closure, closure_errs = real.validate_closures(s, real.copy(v), lang, owned)
    same_value(ref, closure, "closure check")
    assert.same(ref_errs, closure_errs)
    local gen, has_gen = generated(s, real.copy(v), owned)
    if gen ~= nil then
        assert.is_not_nil(ref, "the generated check accepted what the interpreter refuses")
        same_value(ref, gen, "generated check")
    elseif has_gen and type(v) == "table" and getmetatable(v) == cljson.object_mt then
        -- a decoded object it refuses is invalid, unless it is nested too deep
        assert.is_true(ref == nil or real.validate_closures(s, real.copy(v)) ~= nil)
    end
    local out, errs = real.validate(s, v, lang, owned)
    assert.same(ref_errs, errs)
    if ref ~= nil then
        same_value(ref, out, "schema.validate")
    end
    return out, errs
end

describe("every path of schema.validate on schema_spec's cases", function()
    local proxy = setmetatable({}, { __index = real })
    function proxy.validate(s, v, lang, owned)
        if debug.gethook() then -- a case counting calls: the comparison would add some
            return real.validate(s, v, lang, owned)
        end
        return compare(s, v, lang, owned)
    end
    package.loaded.schema = proxy
    local ok, err = pcall(assert(loadfile(helper.root .. "/tests/spec/schema_spec.lua", "t", _ENV)))
    package.loaded.schema = real
    assert(ok, err)
end)

describe("the generated check", function()
    local function obj(text)
        return cljson.decode(text)
    end

    it("is made for every shipped tool's input schema", function()
        for file in io.popen("ls " .. helper.root .. "/tools"):lines() do
            local name = file:match("^(.-)%.lua$")
            if name then
                local s = helper.load_tool(name).input_schema
                if s then
                    assert.is_function(real.generated_check(s), name)
                end
            end
        end
    end)

    it("agrees on closed and open objects, extra and non-string keys", function()
        local closed = { type = "object", additionalProperties = false, required = { "a" },
            properties = { a = { type = "string" }, b = { type = "boolean" } } }
        local open = { type = "object", properties = { a = { type = "string" } } }
        local with_int_key = obj('{"a":"x"}')
        with_int_key[1] = "y"
        for _, s in ipairs({ closed, open }) do
            for _, v in ipairs({ obj('{"a":"x"}'), obj('{"a":"x","b":true}'), obj('{"a":"x","c":1}'),
                                 obj('{"b":true}'), obj('{"a":1}'), obj('{}'), with_int_key }) do
                compare(s, v, "en-US")
            end
        end
    end)

    it("agrees on defaults: in place when owned, copied when nested, tables never shared", function()
        local s = { type = "object", required = { "a" }, properties = {
            a = { type = "integer", default = 1 },
            list = { type = "array", items = { type = "string" }, default = { "x" } },
            o = { type = "object", properties = { flag = { type = "boolean", default = false } } } } }
        for _, owned in ipairs({ false, true }) do
            for _, text in ipairs({ '{}', '{"a":2}', '{"o":{}}', '{"o":{"flag":true}}', '{"list":[]}' }) do
                compare(s, obj(text), "en-US", owned)
            end
        end
        local v = obj('{}')
        local out = real.validate(s, v, "en-US", true)
        assert.is_true(rawequal(v, out))
        out.list[1] = "changed"
        assert.equal("x", real.validate(s, obj('{}')).list[1])
        local n = obj('{"o":{}}')
        local inner = n.o
        out = real.validate(s, n, "en-US", true)
        assert.is_nil(inner.flag)
        assert.is_false(out.o.flag)
    end)

    it("agrees on integers, floats, big numbers and ranges", function()
        local s = { type = "object", properties = {
            i = { type = "integer", minimum = 0, maximum = 10 },
            x = { type = "integer", exclusiveMinimum = 0, exclusiveMaximum = 10 } } }
        for _, text in ipairs({ '{"i":0}', '{"i":10}', '{"i":11}', '{"i":-1}', '{"i":2.0}', '{"i":2.5}',
                                '{"i":12345678901234567890123}', '{"x":0}', '{"x":1}', '{"x":9}',
                                '{"x":10}', '{"x":5.0}', '{"i":"1"}', '{"i":null}' }) do
            compare(s, obj(text), "en-US")
        end
    end)

    it("agrees on strings: enums short and long, lengths in characters", function()
        local s = { type = "object", properties = {
            short = { type = "string", enum = { "asc", "desc" } },
            long = { type = "string", enum = { "a", "b", "c", "d", "e", "f" } },
            none = { type = "string", enum = {} },
            len = { type = "string", minLength = 2, maxLength = 3 } } }
        for _, text in ipairs({ '{"short":"asc"}', '{"short":"up"}', '{"short":1}', '{"long":"f"}',
                                '{"long":"g"}', '{"none":"a"}', '{"len":"a"}', '{"len":"ab"}',
                                '{"len":"abcd"}', '{"len":"网网网"}', '{"len":"网网网网"}',
                                '{"len":"\\u00e9"}' }) do
            compare(s, obj(text), "en-US")
        end
        local invalid_utf8 = obj('{}')
        invalid_utf8.len = "\xff\xff"
        compare(s, invalid_utf8, "en-US")
    end)

    it("agrees on arrays: counts, items changed in a copy, empty plain tables", function()
        local s = { type = "object", properties = {
            a = { type = "array", minItems = 1, maxItems = 3, items = { type = "integer" } },
            o = { type = "array", items = { type = "object", properties = {
                n = { type = "integer", default = 0 } } } } } }
        for _, text in ipairs({ '{"a":[1]}', '{"a":[]}', '{"a":[1,2,3,4]}', '{"a":[1,2.0]}',
                                '{"a":[1,"x"]}', '{"a":{}}', '{"o":[{},{"n":1}]}', '{"o":[1]}' }) do
            compare(s, obj(text), "en-US")
        end
        local plain = obj('{}')
        plain.a = {}
        compare(s, plain, "en-US")
        local input = obj('{"a":[1,2.0]}')
        local arr = input.a
        real.validate(s, input, "en-US", true)
        assert.equal("float", math.type(arr[2])) -- the input array is never changed
    end)

    it("gives an integer-valued float of an integer node as an integer, the input unchanged", function()
        local int = { type = "integer" }
        local closed = { type = "object", additionalProperties = false, properties = { n = int } }
        local schemas = {
            { type = "object", properties = { limit = int, a = { type = "array", items = int }, o = closed } },
            { type = "object", properties = { limit = { type = "integer", minimum = 1, maximum = 100 } } },
            -- outside the generated subset: the closure check decides
            { type = "object", additionalProperties = int,
              properties = { limit = { type = "integer", enum = { 10 } } } },
            { type = "object", properties = { limit = { anyOf = { int, { type = "string" } } } } },
            { type = "object", ["$defs"] = { n = int }, properties = { limit = { ["$ref"] = "#/$defs/n" } } },
        }
        local paths = {
            reference = function(s, v) return real.validate_reference(s, v, "en-US") end,
            closures = function(s, v) return real.validate_closures(s, v, "en-US") end,
            closures_owned = function(s, v) return real.validate_closures(s, v, "en-US", true) end,
            generated = function(s, v) return (generated(s, v)) end,
            generated_owned = function(s, v) return (generated(s, v, true)) end,
            validate = function(s, v) return real.validate(s, v, "en-US", true) end,
        }
        for i, s in ipairs(schemas) do
            for name, run in pairs(paths) do
                -- a root outside the generated subset has no generated path
                if real.generated_check(s) or not name:match("^generated") then
                    local where = name .. " #" .. i
                    local text = i == 3 and '{"limit":10.0,"x":7.0}' or
                        '{"limit":10.0,"a":[1,4.0],"o":{"n":3.0},"x":7.0}'
                    local v = obj(text)
                    local a, o = v.a, v.o
                    local out = run(s, v)
                    assert.is_table(out, where)
                    assert.equal("integer", math.type(out.limit), where)
                    assert.equal(10, out.limit, where)
                    if i == 1 then
                        assert.equal("integer", math.type(out.a[2]), where)
                        assert.equal("integer", math.type(out.o.n), where)
                        assert.equal("float", math.type(a[2]), where .. ": the input array is never changed")
                        assert.equal("float", math.type(o.n), where .. ": the input object is never changed")
                        assert.equal(getmetatable(a), getmetatable(out.a), where)
                    elseif i == 3 then
                        assert.equal("integer", math.type(out.x), where)
                    end
                    compare(s, obj(text), "en-US")
                end
            end
        end
        -- a float that is not an integer stays refused
        assert.is_nil(real.validate(schemas[1], obj('{"limit":10.5}'), "en-US"))
    end)

    it("agrees on recursive $defs, nesting past the depth limit included", function()
        local s = { type = "object", ["$defs"] = { node = { type = "object", additionalProperties = false,
            properties = { next = { ["$ref"] = "#/$defs/node" }, v = { type = "integer" } } } },
            properties = { root = { ["$ref"] = "#/$defs/node" } } }
        for _, depth in ipairs({ 1, 5, 98, 99, 100, 150 }) do
            local text = '{"root":' .. string.rep('{"next":', depth) .. '{"v":1}' .. string.rep("}", depth) .. "}"
            compare(s, obj(text), "en-US")
            local bad = '{"root":' .. string.rep('{"next":', depth) .. '{"v":"x"}' .. string.rep("}", depth) .. "}"
            compare(s, obj(bad), "en-US")
        end
    end)

    it("agrees on schemas too big for straight-line source (deep nesting, many $defs)", function()
        local deep = { type = "object", properties = {} }
        local at = deep
        for _ = 1, 60 do
            local n = { type = "object", properties = {} }
            at.properties.a = n
            at = n
        end
        at.properties.v = { type = "integer", default = 1 }
        assert.is_function(real.generated_check(deep)) -- the deepest nodes go to the closures
        for _, inner in ipairs({ "{}", '{"v":2}', '{"v":"x"}' }) do
            compare(deep, obj(string.rep('{"a":', 60) .. inner .. string.rep("}", 60)), "en-US")
        end
        local defs, props = {}, {}
        for i = 1, 300 do
            defs["d" .. i] = { type = "object", properties = { x = { type = "integer" } } }
            props["p" .. i] = { ["$ref"] = "#/$defs/d" .. i }
        end
        local many = { type = "object", ["$defs"] = defs, properties = props }
        for _, text in ipairs({ '{"p1":{"x":1},"p300":{"x":2.0}}', '{"p1":{"x":"no"}}', '{"p2":1}' }) do
            compare(many, obj(text), "en-US")
        end
    end)

    it("takes names and texts from the schema as data, never as code", function()
        local name = 'a"] = 1 error("injected") --[['
        local s = { type = "object", additionalProperties = false, required = { name, "b\nc" },
            properties = { [name] = { type = "string", enum = { ']] error("x") --', "\0\r\n\\" } },
                           ["b\nc"] = { type = "integer", default = 1 } } }
        local check = real.generated_check(s)
        assert.is_function(check)
        local v = cljson.object()
        v[name] = "\0\r\n\\"
        compare(s, v, "en-US")
        v[name] = ']] error("x") --'
        compare(s, v, "en-US")
        v[name] = "other"
        compare(s, v, "en-US")
        v[name] = nil
        compare(s, v, "en-US")
    end)

    it("leaves what is outside the subset to the closure check", function()
        local s = { type = "object", properties = {
            any = { anyOf = { { type = "string" }, { type = "integer" } } },
            nul = { type = { "string", "null" } }, c = { const = 3 },
            extra = { type = "object", additionalProperties = { type = "integer" } },
            u = { type = "array", uniqueItems = true } } }
        assert.is_function(real.generated_check(s))
        for _, text in ipairs({ '{"any":"x"}', '{"any":true}', '{"nul":null}', '{"nul":1}', '{"c":3}',
                                '{"c":3.0}', '{"c":4}', '{"extra":{"a":1}}', '{"extra":{"a":"x"}}',
                                '{"u":[1,2]}', '{"u":[1,1]}' }) do
            compare(s, obj(text), "en-US")
        end
        assert.is_nil(real.generated_check({ anyOf = { { type = "object" } } }))
    end)

    it("agrees on anyOf alternatives that name required members", function()
        local s = { type = "object", additionalProperties = false,
            anyOf = { { required = { "id" } }, { required = { "name", "kind" } } },
            properties = { id = { type = "string" }, name = { type = "string" },
                           kind = { type = "string", default = "x" } } }
        assert.is_function(real.generated_check(s))
        for _, text in ipairs({ '{"id":"a"}', '{"name":"n"}', '{"name":"n","kind":"k"}', '{}',
                                '{"kind":"k"}', '{"id":1}', '{"id":"a","z":1}' }) do
            compare(s, obj(text), "en-US")
            compare(s, obj(text), "zh-CN", true)
        end
    end)
end)

describe("clsandbox.object_size (clruntime.object_size in the server)", function()
    local clsandbox = require "clsandbox"
    it("counts every member, array part and hash part", function()
        assert.equal(0, clsandbox.object_size({}))
        assert.equal(2, clsandbox.object_size(cljson.decode('{"a":1,"b":null}')))
        local t = { 1, 2, 3, x = 1, [true] = 2 }
        t[2] = nil
        assert.equal(4, clsandbox.object_size(t))
        assert.has_error(function() clsandbox.object_size("x") end)
    end)
    it("is what the sandboxed schema module counts with", function()
        local schema = helper.sandbox().require("schema")
        assert.equal(debug.getinfo(clsandbox.object_size, "S").what, debug.getinfo(schema.object_size, "S").what)
        assert.equal("C", debug.getinfo(schema.object_size, "S").what)
    end)
end)

describe("clsandbox.metatable (clruntime.metatable in the server)", function()
    local clsandbox = require "clsandbox"
    it("gives the metatable itself, a protected one too, or nil", function()
        assert.is_nil(clsandbox.metatable({}))
        assert.is_nil(clsandbox.metatable(1))
        assert.equal(cljson.object_mt, clsandbox.metatable(cljson.decode("{}")))
        assert.equal(cljson.array_mt, clsandbox.metatable(cljson.decode("[]")))
        local mt = { __metatable = "locked" }
        local t = setmetatable({}, mt)
        assert.equal("locked", getmetatable(t))
        assert.equal(mt, clsandbox.metatable(t))
        assert.has_error(function() clsandbox.metatable() end)
    end)
    it("is not among what tool code may require", function()
        local sb = helper.sandbox()
        assert.has_error(function() sb.tool_require("clruntime") end)
    end)
end)
