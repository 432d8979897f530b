-- The catalogue page and its shell (lua/page.lua): every text that comes from the
-- document is escaped wherever it lands (element text, attribute values), labels come
-- from the text catalogue, schema tables keep their order rules, odd shapes render
-- without raising and a missing document raises.
-- Run from the repo root: lua5.4 /usr/bin/busted --lpath='lua/?.lua' --cpath='build/?.so'
-- tests/spec/page_spec.lua (under the lua_busted test the paths are already set).
local cljson = require "cljson"
local cltexts = require "cltexts"
local helper = require "helper"
local page = require "page"

local H = [[<script>alert("x")</script><img src=x onerror='y'>&amp;]]
local H_ESC = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;amp;"

local function count(s, needle)
    local n, i = 0, 1
    while true do
        local at = s:find(needle, i, true)
        if not at then
            return n
        end
        n, i = n + 1, at + #needle
    end
end

-- A document as src/surface/info.c builds it, from JSON text (key order kept).
local function doc(lang, tools, extra)
    local d = cljson.decode(([[{"service":"context-loader","version":"0.1.0","surface":"mcp",
        "endpoint":"http://127.0.0.1:1/api/agent-retrieval/v1/mcp","protocol":"MCP Streamable HTTP",
        "protocol_versions":["2025-11-25","2025-06-18"],
        "auth":{"type":"bearer","description":"Send a token"},
        "language":"%s","supported_languages":["zh-CN","en-US"],
        "tools":%s,
        "client_config":{"generic":{"mcpServers":{"context-loader":{"url":"http://h/mcp",
            "headers":{"Authorization":"Bearer <access-token>","Accept-Language":"%s"}}}},
          "claude_desktop":{"mcpServers":{}}}}]]):format(lang, tools, lang))
    for k, v in pairs(extra or {}) do
        d[k] = v
    end
    return d
end

local HOSTILE_TOOL = cljson.encode(cljson.object({
    name = H,
    title = H,
    description = H,
    group = H,
    group_title = H,
    input_schema = cljson.decode(cljson.encode(cljson.object({
        type = "object",
        required = { H },
        properties = cljson.object({
            [H] = cljson.object({ type = H, description = H, enum = { H, 1 }, default = H }),
            nested = cljson.object({ type = "object", properties = cljson.object({ [H] = { type = "string" } }) }),
            ref = cljson.object({ ["$ref"] = "#/$defs/" .. H }),
        }, { H, "nested", "ref" }),
        ["$defs"] = cljson.object({ [H] = cljson.object({ type = "object", description = H }) }),
    }, { "type", "required", "properties", "$defs" }))),
}, { "name", "title", "description", "group", "group_title", "input_schema" }))

describe("page.catalogue", function()
    it("escapes every text of the document, in element text and in attributes", function()
        local d = doc("en-US", "[" .. HOSTILE_TOOL .. "]", { endpoint = H, version = H, protocol = H })
        d.auth.description = H
        d.supported_languages = cljson.array({ H })
        d.client_config.generic.mcpServers["context-loader"].url = H
        local html = page.catalogue(d, H, "n0nce")
        assert.is_nil(html:find("<script>alert", 1, true))
        assert.is_nil(html:find("<img", 1, true))
        assert.is_nil(html:find("onerror='", 1, true))
        -- one style and one script, both under the nonce
        assert.equal(1, count(html, "<script"))
        assert.equal(1, count(html, "<style"))
        assert.truthy(html:find('<script nonce="n0nce">', 1, true))
        assert.truthy(html:find('<style nonce="n0nce">', 1, true))
        -- the escaped text where each field lands
        assert.truthy(html:find('<article class="tool" id="tool-' .. H_ESC .. '">', 1, true))
        assert.truthy(html:find('<a href="#tool-' .. H_ESC .. '">' .. H_ESC .. "</a>", 1, true))
        assert.truthy(html:find('<section class="group" id="group-' .. H_ESC .. '"><h2>' .. H_ESC, 1, true))
        assert.truthy(html:find('<code id="endpoint">' .. H_ESC .. "</code>", 1, true))
        assert.truthy(html:find("<title>Context Loader · " .. H_ESC, 1, true))
        assert.truthy(html:find('<tr class="d0"><td><code>' .. H_ESC .. '</code></td><td class="ty">' .. H_ESC, 1,
            true))
        assert.truthy(html:find('<tr class="d1"><td><code>nested.' .. H_ESC .. "</code>", 1, true))
        -- a $ref shows its last segment; the $defs key and description are escaped
        assert.truthy(html:find('<td class="ty">→ script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;amp;</td>', 1,
            true))
        assert.truthy(html:find("<h5><code>" .. H_ESC .. '</code> <span class="ty">object</span></h5><p>' .. H_ESC,
            1, true))
        -- enum values and defaults as escaped compact JSON
        local json_h = page.escape(cljson.encode(H))
        assert.truthy(html:find("one of: <code>" .. json_h .. "</code> <code>1</code>", 1, true))
        assert.truthy(html:find("default: <code>" .. json_h .. "</code>", 1, true))
        -- the configs are pretty-printed, then escaped
        assert.truthy(html:find("&quot;url&quot;: " .. page.escape(cljson.encode(H)), 1, true))
        assert.truthy(html:find("<footer>", 1, true))
        assert.truthy(html:find("context-loader " .. H_ESC .. "</footer>", 1, true))
    end)

    it("takes its labels from the text catalogue in the document's language", function()
        for _, lang in ipairs({ "zh-CN", "en-US" }) do
            local html = page.catalogue(doc(lang, "[]"), "/mcp", "n")
            assert.truthy(html:find('<html lang="' .. lang .. '">', 1, true))
            for _, key in ipairs({ "page_heading", "page_copy", "page_copied", "page_connect", "page_contents",
                "page_json_hint" }) do
                assert.truthy(html:find(cltexts.text[key][lang], 1, true), key .. " " .. lang)
            end
            -- the notes are escaped: they hold <access-token>
            assert.truthy(html:find(page.escape(cltexts.text.page_generic_note[lang]), 1, true))
        end
        local en = page.catalogue(doc("en-US", "[]"), "/mcp", "n")
        assert.is_nil(en:find(cltexts.text.page_copy["zh-CN"], 1, true))
    end)

    it("lists required parameters first and bkn_context last, nested rows up to three levels", function()
        local tool = [[{"name":"t","group":"query","group_title":"Q","input_schema":{"type":"object",
            "required":["b"],
            "properties":{"bkn_context":{"type":"object","properties":{"conversation_id":{"type":"string"}}},
              "a":{"type":["string","null"]},"b":{"type":"array","items":{"type":"object",
                "properties":{"c":{"oneOf":[{"type":"integer"},{"type":"array","items":{"type":"string"}}]},
                  "d":{"type":"object","properties":{"e":{"type":"object","properties":{"f":{"type":"object",
                    "properties":{"g":{}}}}}}}}}},
              "z":{"enum":[1,2]}}},
            "output_schema":{"type":"object","properties":{"rows":{"type":"array"}}}}]]
        local html = page.catalogue(doc("en-US", "[" .. tool .. "]"), "/mcp", "n")
        local names = {}
        for n in html:gmatch('<tr class="d%d"><td><code>([^<]*)</code>') do
            names[#names + 1] = n
        end
        assert.same({ "b", "b[].c", "b[].d", "b[].d.e", "b[].d.e.f", "a", "z", "bkn_context",
            "bkn_context.conversation_id", "rows" }, names)
        assert.truthy(html:find('<td class="ty">integer | array&lt;string&gt;</td>', 1, true))
        assert.truthy(html:find('<td class="ty">string | null</td>', 1, true))
        assert.truthy(html:find('<code>z</code></td><td class="ty">enum</td>', 1, true))
        assert.truthy(html:find('<code>b</code></td><td class="ty">array&lt;object&gt;</td><td class="rq">yes</td>',
            1, true))
        assert.truthy(html:find('<tr class="d3"><td><code>b[].d.e.f</code>', 1, true))
        assert.truthy(html:find("<details><summary>Output schema</summary>", 1, true))
    end)

    it("groups tools in the order of their first tool and pretty-prints configs in document order", function()
        local tools = '[{"name":"x","group":"b"},{"name":"y","group":"a"},{"name":"w","group":"b"},{"name":"v"}]'
        local d = doc("zh-CN", tools)
        d.client_config = cljson.decode('{"generic":{"z":1,"a":[true,null,{}],"m":[]}}')
        local html = page.catalogue(d, "/mcp", "n")
        local groups = {}
        for g in html:gmatch('<section class="group" id="group%-([^"]*)"') do
            groups[#groups + 1] = g
        end
        assert.same({ "b", "a", "other" }, groups)
        assert.truthy(html:find(cltexts.text.page_other["zh-CN"] .. '<span class="gid">other</span>', 1, true))
        local tools_order = {}
        for t in html:gmatch('<article class="tool" id="tool%-([^"]*)"') do
            tools_order[#tools_order + 1] = t
        end
        assert.same({ "x", "w", "y", "v" }, tools_order)
        assert.truthy(html:find('<pre id="cfg-generic">{\n  &quot;z&quot;: 1,\n  &quot;a&quot;: [\n    true,\n'
            .. '    null,\n    {}\n  ],\n  &quot;m&quot;: []\n}</pre>', 1, true))
        assert.truthy(html:find('<p class="sub">' .. cltexts.text.page_heading["zh-CN"] .. " · 4 ", 1, true))
    end)

    it("renders odd shapes without raising and raises without a document", function()
        local odd = '[7,{"name":1,"input_schema":[1],"output_schema":"x"},{"name":"p","input_schema":'
            .. '{"properties":{"a":1,"b":{"type":7,"items":[]},"c":{"enum":{"k":1},"default":null}},"required":{}}}]'
        local html = page.catalogue(doc("en-US", odd, { protocol_versions = cljson.null, auth = "x" }), "/mcp", "n")
        assert.truthy(html:find("</html>\n$"))
        assert.truthy(html:find('<code>c</code></td><td class="ty">enum</td>', 1, true))
        assert.truthy(html:find("default: <code>null</code>", 1, true))
        assert.error_matches(function()
            page.catalogue(nil, "/mcp", "n")
        end, "the document is a nil")
        assert.error_matches(function()
            page.catalogue(cljson.array({ 1 }), "/mcp", "n")
        end, "not an object")
    end)
end)

describe("page.shell", function()
    it("is a token form in the language, with no catalogue data, under the nonce", function()
        for _, lang in ipairs({ "zh-CN", "en-US" }) do
            local html = page.shell(lang, "n0nce")
            assert.truthy(html:find('<html lang="' .. lang .. '">', 1, true))
            assert.truthy(html:find('<form id="f">', 1, true))
            assert.truthy(html:find('type="password"', 1, true))
            assert.equal(1, count(html, "<script"))
            assert.truthy(html:find('<script nonce="n0nce">', 1, true))
            assert.truthy(html:find('<style nonce="n0nce">', 1, true))
            assert.truthy(html:find(cltexts.text.shell_intro[lang], 1, true))
            assert.truthy(html:find('data-401="' .. page.escape(cltexts.text.shell_refused[lang]) .. '"', 1, true))
            assert.truthy(html:find('data-403="' .. page.escape(cltexts.text.shell_forbidden[lang]) .. '"', 1, true))
        end
        local hostile = page.shell('"><script>x</script>', '"><b>')
        assert.equal(1, count(hostile, "<script"))
        assert.is_nil(hostile:find("<b>", 1, true))
    end)
end)

describe("page in the server's sandbox", function()
    it("renders there as it does here, and tool code cannot require it", function()
        local sb = helper.sandbox()
        local d = doc("en-US", "[" .. HOSTILE_TOOL .. "]")
        assert.equal(page.catalogue(d, "/mcp", "n"), sb.require("page").catalogue(d, "/mcp", "n"))
        assert.equal(page.shell("zh-CN", "n"), sb.require("page").shell("zh-CN", "n"))
        for _, name in ipairs({ "page", "page_assets" }) do
            local ok, err = pcall(sb.tool_require, name)
            assert.is_false(ok, name)
            assert.truthy(tostring(err):find("module '" .. name .. "' is private to the runtime", 1, true))
        end
    end)
end)

describe("config blocks", function()
    it("never wrap: a break inside a JSON string would read as part of the value", function()
        local assets = require "page_assets"
        local pre = assets.catalogue_css:match("[};]pre{([^}]*)}")
        assert.is_string(pre)
        assert.truthy(pre:find("white-space:pre;", 1, true), pre)
        assert.truthy(pre:find("overflow-x:auto", 1, true), pre)
        assert.is_nil(pre:find("pre-wrap", 1, true))
        assert.is_nil(pre:find("anywhere", 1, true))
        -- and no later rule (the narrow-screen one included) turns wrapping back on
        assert.is_nil(assets.catalogue_css:find("pre{[^}]*white-space:pre%-wrap"))
    end)
end)
