local cljson = require "cljson"
local contract = require "contract"

-- A minimal valid tool; each test breaks one rule of it.
local function valid_tool(over)
    local t = {
        name = "sample_tool",
        version = "1.2.3",
        kind = "read",
        title = { ["zh-CN"] = "示例", ["en-US"] = "Sample" },
        description = { ["zh-CN"] = "示例工具", ["en-US"] = "A sample tool" },
        group = "discovery",
        order = 999,
        surfaces = { "mcp", "rest" },
        formats = { "json", "toon" },
        upstream = "bkn_backend",
        input_schema = {
            type = "object",
            additionalProperties = false,
            required = { "kn_id" },
            properties = {
                kn_id = { type = "string", description = { ["zh-CN"] = "网络", ["en-US"] = "Network" } },
                limit = { type = "integer", minimum = 1, default = 5 },
            },
        },
        handle = function()
            return {}
        end,
    }
    for k, v in pairs(over or {}) do
        t[k] = v
    end
    return t
end

local function fails_with(tool, fragment, name)
    local out, errs = contract.check(tool, name or "sample_tool")
    assert.is_nil(out)
    local joined = table.concat(errs, "\n")
    assert.truthy(joined:find(fragment, 1, true), "expected '" .. fragment .. "' in:\n" .. joined)
    return errs
end

describe("contract.check", function()
    it("accepts a valid tool and fills defaults in a new table", function()
        local src = valid_tool()
        src.formats = nil
        local t = assert(contract.check(src, "sample_tool"))
        assert.are_not.equal(src, t)
        assert.same({ "json", "toon" }, t.formats) -- every business tool renders TOON by default
        assert.is_nil(src.formats)
        assert.same({ readOnlyHint = true, idempotentHint = true, openWorldHint = false }, t.annotations)
        assert.equal(src.handle, t.handle)
    end)

    it("lets the tool's own annotations win", function()
        local t = assert(contract.check(valid_tool({ annotations = { openWorldHint = true } }), "sample_tool"))
        assert.is_true(t.annotations.openWorldHint)
        local e = assert(contract.check(valid_tool({ kind = "execute",
            annotations = { destructiveHint = true } }), "sample_tool"))
        assert.same({ readOnlyHint = false, destructiveHint = true }, e.annotations)
    end)

    it("rejects a non-table", function()
        local out, errs = contract.check("x", "x")
        assert.is_nil(out)
        assert.truthy(errs[1]:find("must return a table", 1, true))
    end)

    it("rejects unknown keys", function()
        fails_with(valid_tool({ handler = function() end }), "unknown key 'handler'")
        fails_with(valid_tool({ [1] = true }), "unknown key '1'")
    end)

    it("requires every mandatory key", function()
        for _, k in ipairs({ "name", "version", "kind", "title", "description", "group", "order",
            "surfaces", "input_schema", "handle" }) do
            local t = valid_tool()
            t[k] = nil
            fails_with(t, k .. " is required")
        end
    end)

    it("requires name == file name and a valid identifier", function()
        fails_with(valid_tool(), "differs from the file name 'other'", "other")
        fails_with(valid_tool({ name = "Bad-Name" }), "name must be a lower-case identifier", "Bad-Name")
    end)

    it("checks version, kind, group and order", function()
        fails_with(valid_tool({ version = "1.0" }), "semantic version")
        assert.truthy(contract.check(valid_tool({ version = "1.0.0-beta.1" }), "sample_tool"))
        fails_with(valid_tool({ kind = "write" }), "kind must be")
        fails_with(valid_tool({ group = "misc" }), "group must be one of")
        fails_with(valid_tool({ order = 0 }), "order must be a positive integer")
        fails_with(valid_tool({ order = 1.5 }), "order must be a positive integer")
        fails_with(valid_tool({ order = "1" }), "order must be a positive integer")
    end)

    it("requires both locales in title and description", function()
        fails_with(valid_tool({ title = { ["zh-CN"] = "只有中文" } }), "title is missing the en-US text")
        fails_with(valid_tool({ description = { ["en-US"] = "only English" } }),
            "description is missing the zh-CN text")
        fails_with(valid_tool({ title = "plain" }), "title must be a table")
        fails_with(valid_tool({ title = { ["zh-CN"] = "a", ["en-US"] = "b", ["fr-FR"] = "c" } }),
            "unsupported language fr-FR")
        fails_with(valid_tool({ description = { ["zh-CN"] = "", ["en-US"] = "x" } }), "missing the zh-CN text")
    end)

    it("checks surfaces, rest_alias, gate, formats and upstream", function()
        fails_with(valid_tool({ surfaces = {} }), "surfaces must be a non-empty array")
        fails_with(valid_tool({ surfaces = { "mcp", "web" } }), "unknown surface web")
        fails_with(valid_tool({ surfaces = { "mcp", "mcp" } }), "lists mcp twice")
        fails_with(valid_tool({ rest_alias = "Bad Alias" }), "rest_alias must be")
        fails_with(valid_tool({ surfaces = { "mcp" }, rest_alias = "alias" }), "needs \"rest\"")
        assert.truthy(contract.check(valid_tool({ rest_alias = "logic-property-resolver" }), "sample_tool"))
        fails_with(valid_tool({ gate = "lower" }), "gate must be")
        assert.truthy(contract.check(valid_tool({ gate = "EXECUTE_SKILL_ENABLED" }), "sample_tool"))
        fails_with(valid_tool({ formats = { "toon" } }), "formats must be")
        fails_with(valid_tool({ formats = { "json", "xml" } }), "formats must be")
        assert.truthy(contract.check(valid_tool({ formats = { "toon", "json" } }), "sample_tool"))
        fails_with(valid_tool({ upstream = "http://x" }), "upstream must be")
    end)

    it("accepts the proxy surface (the MCP proxy route's tool, never listed)", function()
        local t = contract.check(valid_tool({ surfaces = { "proxy" } }), "sample_tool")
        assert.truthy(t)
        assert.same({ "proxy" }, t.surfaces)
        fails_with(valid_tool({ surfaces = { "proxy", "proxy" } }), "lists proxy twice")
    end)

    it("checks the schemas", function()
        fails_with(valid_tool({ input_schema = { type = "object", properties = { a = { typo = 1 } } } }),
            "input_schema/properties/a: unknown keyword 'typo'")
        fails_with(valid_tool({ input_schema = { type = "array" } }), "input_schema: type must be \"object\"")
        fails_with(valid_tool({ output_schema = { type = "object", nope = true } }),
            "output_schema/: unknown keyword 'nope'")
        fails_with(valid_tool({ input_schema = { type = "object", properties = {
            bkn_context = { type = "object" } } } }), "must not declare bkn_context")
        fails_with(valid_tool({ input_schema = { type = "object", properties = {
            response_format = { type = "string" } } } }), "must not declare response_format")
    end)

    it("checks annotations and functions", function()
        fails_with(valid_tool({ annotations = { fastHint = true } }), "unknown hint fastHint")
        fails_with(valid_tool({ annotations = { openWorldHint = "yes" } }), "must be a boolean")
        fails_with(valid_tool({ annotations = { readOnlyHint = false } }), "contradicts kind \"read\"")
        fails_with(valid_tool({ kind = "execute", annotations = { readOnlyHint = true } }),
            "contradicts kind \"execute\"")
        fails_with(valid_tool({ handle = "x" }), "handle must be a function")
        fails_with(valid_tool({ render = 1 }), "render must be a function")
        fails_with(valid_tool({ shape_request = {} }), "shape_request must be a function")
        fails_with(valid_tool({ trim_response = true }), "trim_response must be a function")
    end)

    it("checks toon_view and adds the view sentences to the description", function()
        fails_with(valid_tool({ toon_view = 1 }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = { omit = true } }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = true, render = function() end }),
            "toon_view and render cannot both be set")
        fails_with(valid_tool({ toon_view = true, formats = { "json" } }), "toon_view needs the toon format")
        local t = assert(contract.check(valid_tool({ toon_view = true }), "sample_tool"))
        assert.equal("A sample tool " .. contract.TOON_VIEW_DESCRIPTION["en-US"], t.description["en-US"])
        assert.equal("示例工具" .. contract.TOON_VIEW_DESCRIPTION["zh-CN"], t.description["zh-CN"])
        t = assert(contract.check(valid_tool({ toon_view = true,
            short_description = { ["zh-CN"] = "示例", ["en-US"] = "A sample" } }), "sample_tool"))
        -- the compact text (short_description, else the description) gets the terser form
        assert.equal("A sample " .. contract.TOON_VIEW_SHORT_DESCRIPTION["en-US"], t.short_description["en-US"])
        assert.equal("A sample tool " .. contract.TOON_VIEW_DESCRIPTION["en-US"], t.description["en-US"])
        -- the omission rule is data the tool declares; its sentence names the rule's fields
        local rule = { rows = "rows", id = "row_id", identity = "key", prefix = { "kn_id" } }
        t = assert(contract.check(valid_tool({ toon_view = { omit_id = rule } }), "sample_tool"))
        assert.equal("示例工具" .. contract.TOON_VIEW_SHORT_DESCRIPTION["zh-CN"] ..
            contract.omit_description(rule, true)["zh-CN"], t.short_description["zh-CN"])
        t = assert(contract.check(valid_tool({ toon_view = { omit_id = rule } }), "sample_tool"))
        assert.equal("A sample tool " .. contract.TOON_VIEW_DESCRIPTION["en-US"] .. " " ..
            contract.omit_description(rule)["en-US"], t.description["en-US"])
        assert.equal("示例工具" .. contract.TOON_VIEW_DESCRIPTION["zh-CN"] ..
            contract.omit_description(rule)["zh-CN"], t.description["zh-CN"])
        assert.equal("The TOON table leaves out row_id when it is <kn_id>-<the single value of key>.",
            contract.omit_description(rule)["en-US"])
        assert.equal("row_id 为 <kn_id>/<标识值> 时省略。", contract.omit_description(
            { rows = "rows", id = "row_id", identity = "key", prefix = { "kn_id" }, separator = "/" }, true)["zh-CN"])
    end)

    it("checks toon_view's omit_id rule", function()
        local function rule(over)
            local r = { rows = "rows", id = "row_id", identity = "key", prefix = { "kn_id" } }
            for k, v in pairs(over) do
                r[k] = v
            end
            return { omit_id = r }
        end
        fails_with(valid_tool({ toon_view = { omit_instance_id = true } }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = { omit_id = true } }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = rule({ rows = "" }) }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = rule({ identity = 1 }) }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = rule({ prefix = {} }) }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = rule({ prefix = "kn_id" }) }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = rule({ extra = 1 }) }), "toon_view must be true or")
        fails_with(valid_tool({ toon_view = rule({ prefix = { "ot_id" } }) }),
            "toon_view.omit_id.prefix names 'ot_id', which input_schema does not declare")
        assert(contract.check(valid_tool({ toon_view = rule({ separator = "" }) }), "sample_tool"))
    end)

    it("collects every error at once", function()
        local errs = fails_with(valid_tool({ kind = "x", order = -1, bogus = 1 }), "unknown key 'bogus'")
        assert.is_true(#errs >= 3)
    end)
end)

describe("contract.check_set", function()
    it("rejects duplicate orders, names and REST names", function()
        local a = assert(contract.check(valid_tool(), "sample_tool"))
        local b = assert(contract.check(valid_tool({ name = "other_tool" }), "other_tool"))
        local ok, errs = contract.check_set({ a, b })
        assert.is_nil(ok)
        assert.equal("other_tool: order 999 is already used by sample_tool", errs[1])
        b.order = 1000
        assert.is_true(contract.check_set({ a, b }))
        b.rest_alias = "sample_tool"
        assert.is_nil(contract.check_set({ a, b }))
        assert.is_nil(contract.check_set({ a, a }))
    end)
end)

describe("contract.check_set: which of two tools is reported", function()
    it("names the newer tool first and the one it collides with", function()
        local a = { name = "list_knowledge_networks", order = 110 }
        local b = { name = "get_kn_name", order = 110 }
        local ok, errs, refs = contract.check_set({ b, a })
        assert.is_nil(ok)
        assert.same({ "list_knowledge_networks: order 110 is already used by get_kn_name" }, errs)
        assert.same({ { name = "list_knowledge_networks", key = "order", other = "get_kn_name",
            message = "order 110 is already used by get_kn_name" } }, refs)
        local function newer(x)
            return x.name == "get_kn_name"
        end
        ok, errs = contract.check_set({ b, a }, newer)
        assert.is_nil(ok)
        assert.same({ "get_kn_name: order 110 is already used by list_knowledge_networks" }, errs)
    end)
end)

describe("contract.check: upstream", function()
    local UPS = { "ontology_query", "bkn_backend", "vega" }

    it("takes one name or an array of names", function()
        assert.truthy(contract.check(valid_tool({ upstream = { "bkn_backend", "vega" } }), "sample_tool",
            { upstreams = UPS }))
        fails_with(valid_tool({ upstream = {} }), "upstream must be")
        fails_with(valid_tool({ upstream = { "vega", 3 } }), "upstream must be")
        fails_with(valid_tool({ upstream = { "vega", "vega" } }), "upstream/2: 'vega' is listed twice")
    end)

    it("refuses a name that is not configured, with the nearest one as a hint", function()
        local out, errs = contract.check(valid_tool({ upstream = "bkn_backnd" }), "sample_tool", { upstreams = UPS })
        assert.is_nil(out)
        assert.same({ "upstream: 'bkn_backnd' is not a configured upstream (did you mean bkn_backend?); " ..
            "configured: ontology_query, bkn_backend, vega" }, errs)
        out, errs = contract.check(valid_tool({ upstream = { "vega", "elastic" } }), "sample_tool", { upstreams = UPS })
        assert.is_nil(out)
        assert.same({ "upstream/2: 'elastic' is not a configured upstream; configured: ontology_query, " ..
            "bkn_backend, vega" }, errs)
        -- without a configuration (the specs, a tool tested alone) only the form is checked
        assert.truthy(contract.check(valid_tool({ upstream = "bkn_backnd" }), "sample_tool"))
    end)

    it("says what to use instead of pattern", function()
        fails_with(valid_tool({ input_schema = { type = "object", properties = {
            code = { type = "string", pattern = "^[a-z]+$" } } } }),
            "input_schema/properties/code: unknown keyword 'pattern': not supported (Lua patterns are " ..
            "not ECMA regular expressions")
        fails_with(valid_tool({ input_schema = { type = "object", properties = {
            code = { type = "string", pattern = "^[a-z]+$" } } } }),
            "use enum or const for a closed set, maxLength and format (an annotation) with the rule " ..
            "stated in description, and check the text in handle")
    end)
end)

describe("contract.list_entry", function()
    local tool = assert(contract.check(valid_tool({
        output_schema = { type = "object", properties = { n = { type = "integer",
            description = { ["zh-CN"] = "数量", ["en-US"] = "Count" } } } },
    }), "sample_tool"))

    it("resolves every text for the language", function()
        local zh = contract.list_entry(tool, "zh-CN")
        assert.equal("sample_tool", zh.name)
        assert.equal("示例", zh.title)
        assert.equal("示例工具", zh.description)
        assert.equal("网络", zh.inputSchema.properties.kn_id.description)
        assert.equal("数量", zh.outputSchema.properties.n.description)
        assert.same({ ["openbkn.ai/group"] = "discovery", ["openbkn.ai/group_title"] = "网络与 Schema",
            ["openbkn.ai/order"] = 999 }, zh._meta)
        assert.is_true(zh.annotations.readOnlyHint)
        local en = contract.list_entry(tool, "en-US")
        assert.equal("Sample", en.title)
        assert.equal("Network", en.inputSchema.properties.kn_id.description)
        assert.equal("Networks & Schema", en._meta["openbkn.ai/group_title"])
        assert.equal(999, en._meta["openbkn.ai/order"])
        -- the tool's own schema keeps its tables
        assert.is_table(tool.input_schema.properties.kn_id.description)
    end)

    it("falls back to the default language and omits an undeclared outputSchema", function()
        local t = assert(contract.check(valid_tool(), "sample_tool"))
        local e = contract.list_entry(t, "fr-FR")
        assert.equal("示例", e.title)
        assert.is_nil(e.outputSchema)
    end)

    it("bkn_context: every sub-field described in the listing language", function()
        for _, lang in ipairs({ "zh-CN", "en-US" }) do
            local bc = contract.list_entry(tool, lang).inputSchema.properties.bkn_context
            local props = bc.properties
            for _, k in ipairs({ "conversation_id", "interaction_id", "parent_operation_id",
                "causation_event_ids", "business_refs" }) do
                assert.is_string(props[k].description, k)
                assert.equal(lang == "zh-CN", props[k].description:find("[\228-\233]") ~= nil, k)
            end
            for _, k in ipairs({ "ref_type", "ref_id", "version" }) do
                assert.is_string(props.business_refs.items.properties[k].description, k)
            end
        end
    end)

    it("compact: the short description, shared sub-schemas and outputSchema without prose", function()
        local t = assert(contract.check(valid_tool({
            short_description = { ["zh-CN"] = "短", ["en-US"] = "Short" },
            output_schema = { type = "object", properties = {
                n = { type = "integer", description = { ["zh-CN"] = "数量", ["en-US"] = "Count" } },
                description = { type = "string" } } },
        }), "sample_tool"))
        for _, lang in ipairs({ "zh-CN", "en-US" }) do
            local full, c = contract.list_entry(t, lang), contract.list_entry(t, lang, true)
            assert.equal(lang == "en-US" and "Short" or "短", c.description)
            assert.equal(full.inputSchema.properties.kn_id.description, c.inputSchema.properties.kn_id.description)
            assert.is_string(full.inputSchema.properties.bkn_context.description)
            -- bkn_context: one short sentence that names where the ids come from
            assert.truthy(c.inputSchema.properties.bkn_context.description:find("bkn_start_interaction", 1, true))
            assert.is_true(#c.inputSchema.properties.bkn_context.description <
                #full.inputSchema.properties.bkn_context.description)
            assert.is_nil(c.inputSchema.properties.response_format.description)
            assert.is_nil(c.outputSchema.properties.n.description)
            assert.same({ type = "string" }, c.outputSchema.properties.description)
            local fp, cp = full.inputSchema.properties, c.inputSchema.properties
            -- bkn_context: its required properties with their types
            assert.same({ conversation_id = { type = "string" }, interaction_id = { type = "string" } },
                cp.bkn_context.properties)
            assert.same(fp.bkn_context.required, cp.bkn_context.required)
            assert.equal("object", cp.bkn_context.type)
            assert.is_nil(cp.bkn_context.additionalProperties)
            assert.is_string(fp.bkn_context.properties.business_refs.description)
            assert.same(full._meta, c._meta)
            assert.equal(full.title, c.title)
        end
        -- without a short form the compact entry keeps the full description
        assert.equal("A sample tool", contract.list_entry(tool, "en-US", true).description)
        fails_with(valid_tool({ short_description = { ["zh-CN"] = "短" } }),
            "short_description is missing the en-US text")
    end)

    it("compact: the input schema without its guards, outputSchema its top level", function()
        local t = assert(contract.check(valid_tool({
            input_schema = {
                type = "object",
                additionalProperties = false,
                required = { "kn_id" },
                ["$defs"] = { leaf = { type = "object", additionalProperties = false,
                    properties = { f = { type = "string", maxLength = 9 } } } },
                properties = {
                    kn_id = { type = "string", minLength = 1, maxLength = 64,
                        description = { ["zh-CN"] = "网络", ["en-US"] = "Network" } },
                    ids = { type = "array", minItems = 1, maxItems = 9, uniqueItems = true,
                        items = { type = "string", minLength = 1 } },
                    limit = { type = "integer", minimum = 1, maximum = 100, default = 5 },
                    mode = { type = "string", enum = { "a", "b" } },
                    leaf = { ["$ref"] = "#/$defs/leaf" },
                    any = { anyOf = { { type = "string", maxLength = 3 }, { type = "integer" } } },
                    open = { type = "object", additionalProperties = { type = "string", minLength = 1 } },
                },
            },
            output_schema = { type = "object", additionalProperties = false, required = { "rows" },
                properties = {
                    rows = { type = "array", maxItems = 10, items = { type = "object",
                        properties = { id = { type = "string" } } } },
                    meta = { type = "object", properties = { n = { type = "integer" } } },
                    kind = { enum = { "x", "y" } },
                    total = { type = { "integer", "null" } },
                } },
        }), "sample_tool"))
        local c = contract.list_entry(t, "en-US", true)
        local p = c.inputSchema.properties
        assert.is_nil(c.inputSchema.additionalProperties)
        assert.same({ "kn_id", "bkn_context" }, c.inputSchema.required)
        assert.same({ type = "string", description = "Network" }, p.kn_id)
        assert.same({ type = "array", items = { type = "string" } }, p.ids)
        assert.same({ type = "integer", minimum = 1, maximum = 100, default = 5 }, p.limit)
        assert.same({ type = "string", enum = { "a", "b" } }, p.mode)
        assert.same({ ["$ref"] = "#/$defs/leaf" }, p.leaf)
        assert.same({ type = "object", properties = { f = { type = "string" } } }, c.inputSchema["$defs"].leaf)
        assert.same({ anyOf = { { type = "string" }, { type = "integer" } } }, p.any)
        assert.same({ type = "object", additionalProperties = { type = "string" } }, p.open)
        assert.same({ type = "object", required = { "rows" }, properties = {
            rows = { type = "array" }, meta = { type = "object" }, kind = {},
            total = { type = { "integer", "null" } } } }, c.outputSchema)
        -- /mcp keeps every guard, and the tool's own tables are untouched
        local full = contract.list_entry(t, "en-US")
        assert.equal(64, full.inputSchema.properties.kn_id.maxLength)
        assert.is_false(full.inputSchema.additionalProperties)
        assert.equal(10, full.outputSchema.properties.rows.maxItems)
        assert.equal(1, t.input_schema.properties.kn_id.minLength)
        -- the view encodes: empty schemas as objects, arrays as arrays
        local text = cljson.encode_canonical(c)
        assert.truthy(text:find('"kind":{}', 1, true))
        assert.truthy(text:find('"required":["kn_id","bkn_context"]', 1, true))
    end)

    it("encodes to JSON with arrays kept as arrays", function()
        local e = contract.list_entry(tool, "en-US")
        local text = cljson.encode_canonical(e)
        assert.truthy(text:find('"required":["kn_id","bkn_context"]', 1, true))
        assert.truthy(text:find('"name":"sample_tool"', 1, true))
    end)
end)

describe("loading through the sandbox (tests/spec/helper.lua)", function()
    local helper = require "helper"
    local sb = helper.sandbox(helper.root .. "/tests/spec/fixtures/tools_bad")

    local function load_fails(name, fragment)
        local tool, errs = sb.load(name)
        assert.is_nil(tool)
        local joined = table.concat(errs, "\n")
        assert.truthy(joined:find(fragment, 1, true), "expected '" .. fragment .. "' in:\n" .. joined)
    end

    it("refuses globals, io, library patches and foreign modules", function()
        load_fails("writes_global", "assignment to global 'counter'")
        load_fails("reads_io", "unknown global 'io'")
        load_fails("patches_string", "read-only table (field 'upper')")
        load_fails("requires_outside", "module '../../etc/x' not found")
    end)

    it("runs _lib modules and reports contract errors", function()
        load_fails("wrong_name", "differs from the file name 'wrong_name'")
    end)

    it("loads every shipped tool", function()
        local real = helper.sandbox()
        local tools = {}
        for _, name in ipairs({ "list_knowledge_networks", "query_object_instance" }) do
            local t, errs = real.load(name)
            assert.is_table(t, name .. ": " .. table.concat(errs or {}, "; "))
            tools[#tools + 1] = t
        end
        assert.is_true(contract.check_set(tools))
    end)
end)

describe("contract routes", function()
    local function with_routes(routes, over)
        local t = valid_tool(over)
        t.input_schema = {
            type = "object",
            additionalProperties = false,
            required = { "id" },
            properties = {
                id = { type = "string", minLength = 1 },
                n = { type = "integer" },
                payload = { type = "object", default = {} },
            },
        }
        t.routes = routes
        return t
    end

    it("accepts POST routes with {parameter} segments and a body parameter", function()
        local t = assert(contract.check(with_routes({ { method = "POST", path = "/things/{id}/run", body = "payload" },
            { method = "POST", path = "/things/{id}" } }), "sample_tool"))
        assert.equal("/things/{id}/run", t.routes[1].path)
        assert.is_true(contract.check_set({ t }))
    end)

    it("refuses malformed routes naming the rule", function()
        fails_with(with_routes({}), "routes must be a non-empty array")
        fails_with(with_routes({ { method = "GET", path = "/x" } }), "routes[1].method must be \"POST\"")
        fails_with(with_routes({ { method = "POST", path = "x" } }), "routes[1].path must be a string starting with /")
        fails_with(with_routes({ { method = "POST", path = "/{id}/x" } }), "must start with a literal segment")
        fails_with(with_routes({ { method = "POST", path = "/x/{n}" } }), "{n} must name a string parameter")
        fails_with(with_routes({ { method = "POST", path = "/x/{nope}" } }), "{nope} must name a string parameter")
        fails_with(with_routes({ { method = "POST", path = "/x/{id}/{id}" } }), "names {id} twice")
        fails_with(with_routes({ { method = "POST", path = "/x/../y" } }), "segment '..'")
        fails_with(with_routes({ { method = "POST", path = "/x//y" } }), "segment ''")
        fails_with(with_routes({ { method = "POST", path = "/x/{id}", body = "n" } }),
            "body must name an object parameter")
        fails_with(with_routes({ { method = "POST", path = "/x/{id}", verb = "y" } }), "unknown key 'verb'")
    end)

    it("refuses a route that shadows one of the core's, whatever the method", function()
        fails_with(with_routes({ { method = "POST", path = "/mcp/info" } }),
            "POST /mcp/info clashes with the core's route /mcp/info")
        fails_with(with_routes({ { method = "POST", path = "/mcp/{id}" } }), "clashes with the core's route /mcp/ptc")
        fails_with(with_routes({ { method = "POST", path = "/mcp-compact" } }),
            "clashes with the core's route /mcp-compact")
        fails_with(with_routes({ { method = "POST", path = "/kn/{id}/x" } }), "clashes with the core's route /kn/…")
        fails_with(with_routes({ { method = "POST", path = "/.well-known/x" } }),
            "clashes with the core's route /.well-known/…")
        fails_with(with_routes({ { method = "POST", path = "/x/{id}" }, { method = "POST", path = "/x/y" } }),
            "routes[2]: POST /x/y clashes with the tool's route POST /x/{id}")
        assert(contract.check(with_routes({ { method = "POST", path = "/mcp/proxy/{id}/call" } }), "sample_tool"))
    end)

    it("knows every route the core matches itself (src/surface/route.c)", function()
        local f = assert(io.open("src/surface/route.c"))
        local src = f:read("a")
        f:close()
        local known = {}
        for _, r in ipairs(contract.builtin_routes) do
            known[r] = true
        end
        local n = 0
        for fn, lit in src:gmatch("(strn?cmp)%(rest, \"(/[^\"]*)\"") do
            n = n + 1
            local want = (fn == "strcmp" and lit ~= "/") and lit:gsub("/$", "") or lit
            assert.is_true(known[want] == true,
                "src/surface/route.c matches " .. lit .. "; contract.builtin_routes lacks " .. want)
        end
        assert.is_true(n >= 10)
    end)

    it("refuses two tools whose routes can match one path", function()
        local a = assert(contract.check(with_routes({ { method = "POST", path = "/x/{id}/run" } }), "sample_tool"))
        local b = assert(contract.check(with_routes({ { method = "POST", path = "/x/y/{id}" } },
            { name = "other_tool", order = 998 }), "other_tool"))
        local ok, errs = contract.check_set({ a, b })
        assert.is_nil(ok)
        assert.truthy(table.concat(errs, "\n"):find(
            "other_tool: route POST /x/y/{id} clashes with route POST /x/{id}/run of sample_tool", 1, true))
        local c = assert(contract.check(with_routes({ { method = "POST", path = "/x/{id}/other" } },
            { name = "third_tool", order = 997 }), "third_tool"))
        assert.is_true(contract.check_set({ a, c }))
    end)
end)
