local cljson = require "cljson"
local schema = require "schema"

local function errs_of(s, v)
    local out, errs = schema.validate(s, v)
    assert.is_nil(out)
    assert.is_table(errs)
    return errs
end

local function has_error(errs, path, fragment)
    for _, e in ipairs(errs) do
        if e.path == path and (fragment == nil or e.message:find(fragment, 1, true)) then
            return true
        end
    end
    return false
end

local function check_fails(s, fragment)
    local ok, errs = schema.check_schema(s)
    assert.is_nil(ok)
    local joined = table.concat(errs, "\n")
    assert.truthy(joined:find(fragment, 1, true), "expected '" .. fragment .. "' in:\n" .. joined)
end

describe("schema.check_schema", function()
    it("accepts every keyword of the subset", function()
        local s = {
            type = "object", title = "t", description = { ["zh-CN"] = "中", ["en-US"] = "en" },
            additionalProperties = false, required = { "a" },
            ["$defs"] = { node = { type = "object", properties = {
                kids = { type = "array", items = { ["$ref"] = "#/$defs/node" } } } } },
            properties = {
                a = { type = "string", minLength = 1, maxLength = 5, format = "uuid",
                      examples = { "x" }, default = "abc" },
                b = { type = { "integer", "null" }, minimum = 0, maximum = 9,
                      exclusiveMinimum = -1, exclusiveMaximum = 10 },
                c = { type = "array", items = { type = "number" }, minItems = 1, maxItems = 3,
                      uniqueItems = true },
                d = { enum = { "x", "y" } }, e = { const = 3 },
                f = { anyOf = { { type = "string" }, { type = "boolean" } } },
                g = { oneOf = { { type = "string" }, { type = "integer" } } },
                h = { ["$ref"] = "#/$defs/node" },
                i = { type = "object", additionalProperties = { type = "string" } },
            },
        }
        assert.is_true(schema.check_schema(s))
    end)

    it("rejects unknown keywords with their path", function()
        check_fails({ type = "object", properties = { a = { type = "string", pattern = "^x" } } },
            "/properties/a: unknown keyword 'pattern'")
        check_fails({ type = "object", patternProperties = {} }, "/: unknown keyword 'patternProperties'")
    end)

    it("rejects bad keyword values", function()
        check_fails({ type = "strnig" }, "unknown type strnig")
        check_fails({ type = {} }, "'type' must be")
        check_fails({ minLength = -1 }, "'minLength' must be a non-negative integer")
        check_fails({ minItems = 1.5 }, "'minItems' must be a non-negative integer")
        check_fails({ minimum = "1" }, "'minimum' must be a number")
        check_fails({ uniqueItems = 1 }, "'uniqueItems' must be a boolean")
        check_fails({ enum = {} }, "'enum' must not be empty")
        check_fails({ required = { 1 } }, "'required' must be an array of strings")
        check_fails({ required = { "a", "a" } }, "names a twice")
        check_fails({ anyOf = {} }, "'anyOf' must be a non-empty array of schemas")
        check_fails({ items = "string" }, "/items: schema must be a table")
        check_fails({ format = 1 }, "'format' must be a string")
        check_fails({ description = { ["zh-CN"] = "只有中文" } }, "'description' must be a string or")
        check_fails({ title = { ["zh-CN"] = "a", ["en-US"] = "b", fr = "c" } }, "'title' must be")
    end)

    it("checks required names against properties", function()
        check_fails({ type = "object", required = { "b" }, properties = { a = {} } },
            "required property 'b' is not declared")
    end)

    it("checks $ref and $defs", function()
        check_fails({ properties = { a = { ["$ref"] = "#/definitions/x" } } }, "must look like #/$defs/")
        check_fails({ properties = { a = { ["$ref"] = "#/$defs/missing" } } }, "undefined definition missing")
        check_fails({ properties = { a = { ["$defs"] = { x = {} } } } }, "'$defs' is allowed only at the root")
        check_fails({ ["$defs"] = { a = { ["$ref"] = "#/$defs/b" }, b = { anyOf = { { ["$ref"] = "#/$defs/a" } } } } },
            "refers to itself")
    end)

    it("checks that defaults and consts satisfy their schema", function()
        check_fails({ type = "object", properties = { n = { type = "integer", minimum = 1, default = 0 } } },
            "/properties/n: default is invalid (/: must be >= 1)")
        check_fails({ const = "x", type = "integer" }, "const is invalid")
    end)
end)

describe("schema.validate", function()
    it("checks types, including integer-valued floats and boxed numbers", function()
        local s = { type = "integer" }
        assert.equal(3, schema.validate(s, 3))
        local v = schema.validate(s, 3.0)
        assert.equal("integer", math.type(v))
        assert.equal(3, v)
        assert.truthy(has_error(errs_of(s, 3.5), "/", "must be of type integer, got float"))
        assert.truthy(has_error(errs_of(s, "3"), "/", "got string"))
        local big = cljson.number("123456789012345678901234567890")
        assert.equal(big, schema.validate(s, big))
        assert.truthy(has_error(errs_of(s, cljson.number("1.5e400")), "/", "must be of type integer"))
        assert.equal(big, schema.validate({ type = "number" }, big))
        assert.truthy(errs_of({ type = "number", maximum = 10 }, big))
        assert.equal(cljson.null, schema.validate({ type = "null" }, cljson.null))
        assert.truthy(has_error(errs_of({ type = "string" }, cljson.null), "/", "got null"))
        assert.is_true(schema.validate({ type = { "string", "boolean" } }, true))
    end)

    it("tells arrays from objects, marked or plain", function()
        local arr, obj = { type = "array" }, { type = "object" }
        assert.truthy(schema.validate(arr, { 1, 2 }))
        assert.truthy(schema.validate(arr, cljson.array()))
        assert.truthy(errs_of(obj, cljson.array()))
        assert.truthy(schema.validate(obj, cljson.object()))
        assert.truthy(errs_of(arr, cljson.object()))
        assert.truthy(errs_of(arr, { a = 1 }))
        assert.truthy(errs_of(obj, { 1, 2 }))
        -- an empty plain table fits either, and becomes a real array when one is asked for
        local out = schema.validate(arr, {})
        assert.equal(cljson.array_mt, getmetatable(out))
        assert.truthy(schema.validate(obj, {}))
    end)

    it("checks numbers and strings", function()
        local s = { type = "number", minimum = 1, maximum = 5, exclusiveMinimum = 0, exclusiveMaximum = 5 }
        assert.equal(2, schema.validate(s, 2))
        assert.truthy(has_error(errs_of(s, 0.5), "/", "must be >= 1"))
        assert.truthy(has_error(errs_of(s, 5), "/", "must be < 5"))
        assert.truthy(has_error(errs_of({ exclusiveMinimum = 0 }, 0), "/", "must be > 0"))
        assert.truthy(has_error(errs_of({ maximum = 5 }, 6), "/", "must be <= 5"))
        local str = { type = "string", minLength = 2, maxLength = 3 }
        assert.equal("中文", schema.validate(str, "中文")) -- counts characters, not bytes
        assert.truthy(has_error(errs_of(str, "a"), "/", "at least 2 characters"))
        assert.truthy(has_error(errs_of(str, "abcd"), "/", "at most 3 characters"))
    end)

    it("checks enum and const with JSON equality", function()
        assert.equal("asc", schema.validate({ enum = { "asc", "desc" } }, "asc"))
        assert.truthy(has_error(errs_of({ enum = { "asc", "desc" } }, "up"), "/", 'must be one of "asc", "desc"'))
        assert.equal(1.0, schema.validate({ const = 1 }, 1.0))
        assert.truthy(schema.validate({ enum = { { a = 1 } } }, cljson.decode('{"a":1}')))
        assert.truthy(has_error(errs_of({ const = "k" }, "x"), "/", 'must be "k"'))
        assert.truthy(schema.validate({ enum = { cljson.number("99999999999999999999") } },
            cljson.decode("99999999999999999999")))
    end)

    it("checks arrays", function()
        local s = { type = "array", minItems = 1, maxItems = 2, uniqueItems = true, items = { type = "integer" } }
        assert.truthy(schema.validate(s, { 1, 2 }))
        assert.truthy(has_error(errs_of(s, cljson.array()), "/", "at least 1 items"))
        assert.truthy(has_error(errs_of(s, { 1, 2, 3 }), "/", "at most 2 items"))
        assert.truthy(has_error(errs_of(s, { 1, 1 }), "/", "must be unique"))
        assert.truthy(has_error(errs_of(s, { 1, "x" }), "/1", "must be of type integer"))
        assert.truthy(has_error(errs_of({ uniqueItems = true }, { { a = 1 }, { a = 1 } }), "/", "unique"))
    end)

    it("checks objects: required, additionalProperties, nested paths", function()
        local s = {
            type = "object", required = { "id" }, additionalProperties = false,
            properties = { id = { type = "string" }, sub = { type = "object",
                properties = { ["a/b"] = { type = "integer" } } } },
        }
        local errs = errs_of(s, { extra = 1, sub = { ["a/b"] = "x" } })
        assert.truthy(has_error(errs, "/id", "is required"))
        assert.truthy(has_error(errs, "/extra", "is not allowed"))
        assert.truthy(has_error(errs, "/sub/a~1b", "must be of type integer"))
        local m = { type = "object", additionalProperties = { type = "string" } }
        assert.truthy(schema.validate(m, { a = "x" }))
        assert.truthy(has_error(errs_of(m, { a = 1 }), "/a"))
        -- additionalProperties absent: anything goes
        assert.truthy(schema.validate({ type = "object", properties = {} }, { z = 1 }))
    end)

    it("applies defaults as deep copies and never mutates the input", function()
        local s = {
            type = "object",
            properties = {
                limit = { type = "integer", default = 10 },
                opts = { type = "object", default = { deep = { 1 } },
                         properties = { deep = { type = "array" } } },
                inner = { type = "object", properties = { flag = { type = "boolean", default = false } } },
                list = { type = "array", items = { type = "object",
                         properties = { d = { type = "string", default = "asc" } } } },
            },
        }
        local input = { inner = {}, list = { { x = 1 } } }
        local out = assert(schema.validate(s, input))
        assert.equal(10, out.limit)
        assert.same({ deep = { 1 } }, out.opts)
        assert.are_not.equal(s.properties.opts.default, out.opts)
        assert.is_false(out.inner.flag)
        assert.equal("asc", out.list[1].d)
        assert.same({ inner = {}, list = { { x = 1 } } }, input)
        out.opts.deep[1] = 99
        assert.equal(1, s.properties.opts.default.deep[1])
        -- a required property with a default is not missing
        local r = { type = "object", required = { "n" }, properties = { n = { type = "integer", default = 1 } } }
        assert.same({ n = 1 }, schema.validate(r, {}))
        -- an untouched table comes back as the same table (no copy)
        local same = { a = 1 }
        assert.equal(same, schema.validate({ type = "object" }, same))
    end)

    it("keeps the marks of decoded tables when it copies", function()
        local s = { type = "object", properties = { rows = { type = "array", items = { type = "object",
            properties = { n = { type = "integer", default = 0 } } } } } }
        local v = cljson.decode('{"rows":[{"a":[]}]}')
        local out = assert(schema.validate(s, v))
        assert.equal(cljson.object_mt, getmetatable(out))
        assert.equal(cljson.array_mt, getmetatable(out.rows))
        assert.equal(0, out.rows[1].n)
        assert.is_nil(v.rows[1].n)
        assert.equal(cljson.array_mt, getmetatable(out.rows[1].a))
    end)

    it("handles anyOf and oneOf", function()
        local any = { anyOf = { { type = "string" }, { type = "integer", minimum = 5 } } }
        assert.equal("x", schema.validate(any, "x"))
        assert.equal(7, schema.validate(any, 7))
        assert.truthy(has_error(errs_of(any, 3), "/", "must match one of the allowed forms"))
        local one = { oneOf = { { type = "integer" }, { type = "number" } } }
        assert.truthy(has_error(errs_of(one, 3), "/", "more than one"))
        assert.equal(2.5, schema.validate(one, 2.5))
        assert.truthy(has_error(errs_of(one, "x"), "/", "exactly one"))
    end)

    it("follows recursive $ref through $defs", function()
        local s = {
            type = "object",
            ["$defs"] = { node = { type = "object", required = { "op" }, additionalProperties = false,
                properties = { op = { enum = { "and", "==" } },
                    subs = { type = "array", items = { ["$ref"] = "#/$defs/node" } } } } },
            properties = { cond = { ["$ref"] = "#/$defs/node" } },
        }
        assert.is_true(schema.check_schema(s))
        assert.truthy(schema.validate(s, { cond = { op = "and", subs = { { op = "==" },
            { op = "and", subs = { { op = "==" } } } } } }))
        local errs = errs_of(s, { cond = { op = "and", subs = { { op = "and", subs = { { op = "xx" } } } } } })
        assert.truthy(has_error(errs, "/cond/subs/0/subs/0/op", "must be one of"))
        errs = errs_of(s, { cond = { op = "and", subs = { { bad = 1 } } } })
        assert.truthy(has_error(errs, "/cond/subs/0/op", "is required"))
        assert.truthy(has_error(errs, "/cond/subs/0/bad", "is not allowed"))
    end)

    it("treats nil as an empty argument object", function()
        assert.same({ a = 1 }, schema.validate({ type = "object", properties = { a = { default = 1 } } }, nil))
    end)
end)

-- Counts the calls of the given functions while f runs.
local function calls_during(fns, f)
    local counted = {}
    for name, fn in pairs(fns) do
        counted[fn] = name
    end
    local n = {}
    debug.sethook(function()
        local name = counted[debug.getinfo(2, "f").func]
        if name then
            n[name] = (n[name] or 0) + 1
        end
    end, "c")
    local ok, err = pcall(f)
    debug.sethook()
    assert(ok, err)
    return n
end

describe("schema.validate of a valid value", function()
    local s = {
        type = "object",
        additionalProperties = false,
        required = { "kn_id" },
        properties = {
            kn_id = { type = "string", minLength = 1 },
            limit = { type = "integer", minimum = 0, default = 10 },
            sort = { type = "array", maxItems = 20, items = {
                type = "object", additionalProperties = false, required = { "field", "direction" },
                properties = { field = { type = "string", minLength = 1 },
                               direction = { type = "string", enum = { "asc", "desc" } } } } },
        },
    }
    local text = '{"kn_id":"kn_1","sort":[{"field":"a","direction":"desc"},{"field":"b","direction":"asc"}]}'

    it("builds no paths and sorts no keys (the check is compiled once per schema)", function()
        schema.validate(s, cljson.decode(text))
        local v = cljson.decode(text)
        local out
        local n = calls_during({ gsub = string.gsub, sort = table.sort, format = string.format,
                                 concat = table.concat, tostring = tostring },
            function() out = schema.validate(s, v) end)
        assert.same({}, n)
        assert.equal(10, out.limit)
        assert.equal("desc", out.sort[1].direction)
        assert.is_nil(v.limit) -- the input untouched
    end)

    it("fills the defaults of a value it owns in place; an invalid one stays as it was", function()
        local v = cljson.decode(text)
        local out = schema.validate(s, v, "en-US", true)
        assert.is_true(rawequal(v, out)) -- no copy of the top-level object
        assert.equal(10, v.limit)
        assert.equal("desc", v.sort[1].direction)
        local w = cljson.decode(text) -- not owned: copied, the input untouched
        assert.is_false(rawequal(w, schema.validate(s, w, "en-US")))
        assert.is_nil(w.limit)
        local bad = cljson.decode('{"kn_id":"kn_1","sort":[{"field":"","direction":"up"}]}')
        local none, errs = schema.validate(s, bad, "en-US", true)
        assert.is_nil(none)
        assert.is_table(errs)
        assert.is_nil(bad.limit)
        local nested = { type = "object", properties = { o = { type = "object",
            properties = { n = { type = "integer", default = 1 } } } } }
        local n = cljson.decode('{"o":{}}')
        local inner = n.o
        out = schema.validate(nested, n, "en-US", true)
        assert.is_nil(inner.n) -- owned is the top-level object only: a nested one is copied
        assert.equal(1, out.o.n)
    end)

    it("gives the same value and errors on every call", function()
        local valid, invalid = cljson.decode(text), cljson.decode('{"sort":[{"field":"","direction":"up"}],"x":1}')
        local first_out = schema.validate(s, valid)
        local _, first_errs = schema.validate(s, invalid)
        for _ = 1, 3 do
            assert.same(cljson.encode(first_out), cljson.encode(schema.validate(s, valid)))
            assert.equal(getmetatable(first_out), getmetatable(schema.validate(s, valid)))
            assert.same(first_errs, select(2, schema.validate(s, invalid)))
        end
        assert.same({ "/kn_id", "/sort/0/direction", "/sort/0/field", "/x" },
            (function()
                local paths = {}
                for i, e in ipairs(first_errs) do
                    paths[i] = e.path
                end
                return paths
            end)())
    end)
end)

describe("schema.coerce_query", function()
    local s = {
        type = "object",
        properties = {
            n = { type = "integer" }, x = { type = "number" }, b = { type = "boolean" },
            s = { type = "string" }, u = { type = { "integer", "string" } },
            list = { type = "array", items = { type = "integer" } },
        },
    }
    it("converts by the declared top-level type and drops unknown names", function()
        local out = schema.coerce_query(s, { n = "42", x = "2.5", b = "true", s = "007", u = "abc",
            unknown = "1", list = { "1", "2" } })
        assert.equal(42, out.n)
        assert.equal("integer", math.type(out.n))
        assert.equal(2.5, out.x)
        assert.is_true(out.b)
        assert.equal("007", out.s)
        assert.equal("abc", out.u)
        assert.same({ 1, 2 }, out.list)
        assert.is_nil(out.unknown)
        assert.is_false(schema.coerce_query(s, { b = "false" }).b)
    end)
    it("leaves unconvertible text for validation to report", function()
        local out = schema.coerce_query(s, { n = "4x", b = "yes", x = "abc",
            u = "99999999999999999999" })
        assert.equal("4x", out.n)
        assert.equal("yes", out.b)
        assert.equal("abc", out.x)
        assert.equal("99999999999999999999", out.u)
        assert.truthy(schema.validate(s, { n = "4x" }) == nil)
    end)
end)

describe("schema.localize", function()
    it("resolves texts by language without touching the source", function()
        local s = {
            type = "object", description = { ["zh-CN"] = "中", ["en-US"] = "en" },
            required = { "a" },
            properties = {
                a = { type = "string", title = { ["zh-CN"] = "甲", ["en-US"] = "A" } },
                description = { type = "string", description = "a property named description" },
                list = { type = "array", default = {} },
            },
        }
        local en = schema.localize(s, "en-US")
        assert.equal("en", en.description)
        assert.equal("A", en.properties.a.title)
        assert.equal("a property named description", en.properties.description.description)
        assert.equal("中", schema.localize(s, "zh-CN").description)
        assert.is_table(s.description)
        assert.equal('[]', cljson.encode(en.properties.list.default))
        assert.equal('["a"]', cljson.encode(en.required))
    end)
end)

describe("schema defaults that are false", function()
    it("are valid defaults and are applied", function()
        local s = { type = "object", properties = { f = { type = "boolean", default = false } } }
        assert.is_true(schema.check_schema(s))
        local out, errs = schema.validate(s, {})
        assert.is_nil(errs)
        assert.is_false(out.f)
    end)
end)

describe("schema validation details in the caller's language", function()
    local s = { type = "object", additionalProperties = false, required = { "kn_id" },
        properties = { kn_id = { type = "string", minLength = 1 }, limit = { type = "integer", minimum = 0 },
            mode = { enum = { "a", "b" } } } }
    local function messages(lang)
        local _, errs = schema.validate(s, { limit = -1, mode = "c", extra = true }, lang)
        local by = {}
        for _, e in ipairs(errs) do
            by[e.path] = e.message
        end
        return by
    end

    it("are zh-CN or en-US; the path (JSON pointer) stays machine-readable", function()
        local zh, en = messages("zh-CN"), messages("en-US")
        assert.equal("必须 >= 0", zh["/limit"])
        assert.equal("must be >= 0", en["/limit"])
        assert.equal("为必填项", zh["/kn_id"])
        assert.equal("is required", en["/kn_id"])
        assert.equal("不是允许的字段", zh["/extra"])
        assert.equal('必须是以下之一："a", "b"', zh["/mode"])
        local _, errs = schema.validate({ type = "integer" }, "x", "zh-CN")
        assert.equal("类型必须是 integer，实际是 string", errs[1].message)
    end)

    it("read as en-US without a language (the load-time checks)", function()
        assert.same(messages("en-US"), messages(nil))
    end)

    it("nested alternatives are localized too", function()
        local _, errs = schema.validate({ oneOf = { { type = "string" }, { type = "integer" } } }, true, "zh-CN")
        assert.truthy(errs[1].message:find("必须恰好符合一种允许的形式", 1, true))
        assert.truthy(errs[1].message:find("类型必须是", 1, true))
    end)
end)
