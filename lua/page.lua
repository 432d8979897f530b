-- page: the catalogue page for people and its public shell (docs/info.md).
--
-- The C core (src/surface/info.c) gathers the self-description document of a surface (the
-- same document it answers as JSON), authenticates, picks the language and a fresh
-- CSP nonce, calls catalogue() or shell() in the current generation's Lua state and
-- writes the result with the security headers. Everything the page says comes from
-- the document or from the gateway's text catalogue (src/base/texts.h through catalog);
-- every text that comes from a tool file is HTML-escaped here. The inline styles and
-- scripts are in lua/page_assets.lua. Both files are read with the generation, so a
-- reload picks up a changed page.
local catalog = require "catalog"
local cljson = require "cljson"
local assets = require "page_assets"

local M = {}

local ENTITIES = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

-- esc(s) -> s with & < > " ' as entities; "" for anything but a string.
local function esc(s)
    if type(s) ~= "string" then
        return ""
    end
    if not s:find("[&<>\"']") then
        return s
    end
    return (s:gsub("[&<>\"']", ENTITIES))
end
M.escape = esc

-- ---------------------------------------------------------------- JSON values

-- The codec's metatables, compared directly (the page asks for every value it reads).
local ARRAY_MT = getmetatable(cljson.array())
local NUMBER_MT = getmetatable(cljson.number(0))

local function is_array(v)
    return type(v) == "table" and getmetatable(v) == ARRAY_MT
end

-- An object: a table that is neither an array nor a boxed number.
local function is_object(v)
    if type(v) ~= "table" then
        return false
    end
    local mt = getmetatable(v)
    return mt ~= ARRAY_MT and mt ~= NUMBER_MT
end

-- get(v, k) -> member k of an object, nil for any other value.
local function get(v, k)
    if is_object(v) then
        return v[k]
    end
    return nil
end

local function get_string(v, k)
    local s = get(v, k)
    return type(s) == "string" and s or nil
end

-- Members of an object in document order: an array of keys.
local function keys(v)
    return is_object(v) and cljson.keys(v) or {}
end

-- How many members or elements v has (0 for a scalar).
local function count(v)
    if is_array(v) then
        return #v
    end
    return #keys(v)
end

-- Indented JSON for display (the wire form has no whitespace).
local function pretty(out, v, depth)
    local n = count(v)
    if n == 0 or not (is_array(v) or is_object(v)) then
        out[#out + 1] = cljson.encode(v)
        return
    end
    local arr = is_array(v)
    local names = arr and nil or keys(v)
    local pad = string.rep(" ", 2 * (depth + 1))
    out[#out + 1] = arr and "[" or "{"
    for i = 1, n do
        out[#out + 1] = (i > 1 and "," or "") .. "\n" .. pad
        if arr then
            pretty(out, v[i], depth + 1)
        else
            out[#out + 1] = cljson.encode(names[i]) .. ": "
            pretty(out, v[names[i]], depth + 1)
        end
    end
    out[#out + 1] = "\n" .. string.rep(" ", 2 * depth) .. (arr and "]" or "}")
end

-- ---------------------------------------------------------------- labels

local LABELS = {
    "heading", "endpoint", "protocol", "auth", "language", "tools", "connect", "generic", "generic_note",
    "claude", "claude_note", "stateless", "stateless_note", "eras", "era_session", "era_stateless",
    "copy", "copied", "parameters", "param", "type", "required", "description",
    "no_params", "output", "definitions", "other", "default", "values", "json_hint", "yes", "contents",
    "gateway", "gateway_note", "confirm",
}

-- The page's labels in lang, from the text catalogue (PAGE_* entries).
local function labels(lang)
    local L = {}
    for _, k in ipairs(LABELS) do
        L[k] = catalog.text("page_" .. k, lang) or k
    end
    return L
end

-- ---------------------------------------------------------------- schemas

-- "a | b | c": label(x) of each element x of list.
local function alternatives(list, label)
    local parts = {}
    for i = 1, #list do
        parts[i] = label(list[i])
    end
    return table.concat(parts, " | ")
end

-- A short type label (escaped): string, integer, array<string>, a | b, → def, enum, any.
local function type_label(s)
    local ref = get_string(s, "$ref")
    if ref then
        return "→ " .. esc(ref:match("/([^/]*)$") or ref)
    end
    local t = get(s, "type")
    if type(t) == "string" then
        local items = get(s, "items")
        if t == "array" and is_object(items) then
            return esc(t) .. "&lt;" .. type_label(items) .. "&gt;"
        end
        return esc(t)
    end
    if is_array(t) then
        return alternatives(t, esc)
    end
    for _, alt in ipairs({ "oneOf", "anyOf" }) do
        local l = get(s, alt)
        if is_array(l) then
            return alternatives(l, type_label)
        end
    end
    return get(s, "enum") ~= nil and "enum" or "any"
end

local function is_required(schema, name)
    local r = get(schema, "required")
    if is_array(r) then
        for i = 1, #r do
            if r[i] == name then
                return true
            end
        end
    end
    return false
end

-- A value shown inline (enum members, defaults): compact JSON, escaped.
local function inline_json(v)
    return "<code>" .. esc(cljson.encode(v)) .. "</code>"
end

-- Rows of a property table: required properties first, nested objects (and arrays of
-- objects) as indented rows named parent.child / parent[].child, three levels deep.
local function prop_rows(out, L, schema, prefix, depth)
    local props = get(schema, "properties")
    if not is_object(props) then
        return
    end
    -- Required, then optional; the turn context, the same on every business tool,
    -- comes last so that each table opens with what is particular to the tool.
    local rows = {}
    for _, k in ipairs(keys(props)) do
        local p = props[k]
        if is_object(p) then
            local req = is_required(schema, k)
            rows[#rows + 1] = { k = k, p = p, req = req, pass = (depth == 0 and k == "bkn_context") and 2
                or req and 0 or 1 }
        end
    end
    for pass = 0, 2 do
        for _, row in ipairs(rows) do
            local k, p, req = row.k, row.p, row.req
            if row.pass == pass then
                out[#out + 1] = ('<tr class="d%d"><td><code>'):format(math.min(depth, 3))
                out[#out + 1] = esc(prefix) .. esc(k) .. '</code></td><td class="ty">' .. type_label(p)
                out[#out + 1] = '</td><td class="rq">' .. (req and L.yes or "") .. "</td><td>"
                out[#out + 1] = esc(get_string(p, "description"))
                local enum = get(p, "enum")
                if is_array(enum) then
                    local vals = {}
                    for j = 1, #enum do
                        vals[j] = inline_json(enum[j])
                    end
                    out[#out + 1] = '<div class="meta">' .. L.values .. ": " .. table.concat(vals, " ") .. "</div>"
                end
                local dv = get(p, "default")
                if dv ~= nil then
                    out[#out + 1] = '<div class="meta">' .. L.default .. ": " .. inline_json(dv) .. "</div>"
                end
                out[#out + 1] = "</td></tr>\n"
                if depth < 3 then -- deeper levels stay in the JSON
                    local items = get(p, "items")
                    if get(p, "properties") ~= nil then
                        prop_rows(out, L, p, prefix .. k .. ".", depth + 1)
                    elseif is_object(items) and get(items, "properties") ~= nil then
                        prop_rows(out, L, items, prefix .. k .. "[].", depth + 1)
                    end
                end
            end
        end
    end
end

local function table_head(L)
    return ('<div class="tw"><table><thead><tr><th>%s</th><th>%s</th><th>%s</th><th>%s</th></tr>'
        .. "</thead><tbody>\n"):format(L.param, L.type, L.required, L.description)
end

local function schema_table(out, L, schema)
    local props = get(schema, "properties")
    if props == nil or count(props) == 0 then
        out[#out + 1] = '<p class="none">' .. L.no_params .. "</p>\n"
        return
    end
    out[#out + 1] = table_head(L)
    prop_rows(out, L, schema, "", 0)
    out[#out + 1] = "</tbody></table></div>\n"
    local defs = get(schema, "$defs")
    if is_object(defs) and count(defs) > 0 then
        out[#out + 1] = '<details class="defs"><summary>' .. L.definitions .. "</summary>\n"
        for _, k in ipairs(keys(defs)) do
            local d = defs[k]
            out[#out + 1] = "<h5><code>" .. esc(k) .. '</code> <span class="ty">' .. type_label(d) .. "</span></h5>"
            local dd = get_string(d, "description")
            if dd then
                out[#out + 1] = "<p>" .. esc(dd) .. "</p>"
            end
            if get(d, "properties") ~= nil then
                out[#out + 1] = table_head(L)
                prop_rows(out, L, d, "", 1)
                out[#out + 1] = "</tbody></table></div>\n"
            end
        end
        out[#out + 1] = "</details>\n"
    end
end

-- A box with a title, a copy button and a pretty-printed JSON value.
local function copy_block(out, L, id, title, note, v)
    local body = {}
    if v ~= nil then
        pretty(body, v, 0)
    end
    out[#out + 1] = '<div class="cfg"><div class="cfgh"><span>' .. esc(title)
    out[#out + 1] = ('</span><button type="button" data-copy="%s" data-label="%s" data-done="%s">%s</button></div>')
        :format(id, L.copy, L.copied, L.copy)
    out[#out + 1] = ('<pre id="%s">'):format(id) .. esc(table.concat(body)) .. "</pre>"
    if note then
        out[#out + 1] = '<p class="note">' .. esc(note) .. "</p>"
    end
    out[#out + 1] = "</div>\n"
end

-- ---------------------------------------------------------------- the page

local function group_id(t)
    return get_string(t, "group") or "other"
end

local function group_label(t, L)
    return get_string(t, "group_title") or get_string(t, "group") or L.other
end

-- The tools of each group, groups in the order of their first tool (the listing is
-- sorted by order, so groups follow their smallest order).
local function grouped(tools)
    local groups, by_id = {}, {}
    for i = 1, #tools do
        local t = tools[i]
        local id = group_id(t)
        local g = by_id[id]
        if not g then
            g = { id = id, tools = {} }
            by_id[id] = g
            groups[#groups + 1] = g
        end
        g.tools[#g.tools + 1] = t
    end
    return groups
end

local function list_of(v)
    return is_array(v) and v or {}
end

-- confirm: the doc's confirmation member (which tools a person confirms), or nil.
local function tool_article(out, L, t, confirm)
    local name = get_string(t, "name")
    local title = get_string(t, "title") or name
    out[#out + 1] = '<article class="tool" id="tool-' .. esc(name) .. '"><h3>' .. esc(title)
    out[#out + 1] = '<code class="name">' .. esc(name) .. '</code></h3>\n'
    for _, n in ipairs(list_of(get(confirm, "tools"))) do
        if n == name then
            out[#out + 1] = '<p class="confirm"><strong>' .. esc(L.confirm) .. "</strong> "
                .. esc(get_string(confirm, "description") or "") .. "</p>\n"
            break
        end
    end
    out[#out + 1] = '<div class="desc">'
    out[#out + 1] = esc(get_string(t, "description")) .. "</div>\n<h4>" .. L.parameters .. "</h4>\n"
    local input = get(t, "input_schema")
    if input ~= nil then
        schema_table(out, L, input)
    else
        out[#out + 1] = '<p class="none">' .. L.no_params .. "</p>\n"
    end
    local output = get(t, "output_schema")
    if output ~= nil then
        out[#out + 1] = "<details><summary>" .. L.output .. "</summary>\n"
        schema_table(out, L, output)
        out[#out + 1] = "</details>\n"
    end
    out[#out + 1] = "</article>\n"
end

-- page.catalogue(doc, path, nonce) -> html
-- doc: the self-description document (docs/info.md) in its language; path: the
-- surface's path ("/mcp", "/mcp-compact", "/mcp/ptc"); nonce: the response's CSP
-- nonce for the inline style and script.
function M.catalogue(doc, path, nonce)
    if not is_object(doc) then
        error("page.catalogue: the document is a " .. type(doc) .. ", not an object", 2)
    end
    local lang = get_string(doc, "language")
    local L = labels(lang)
    local tools = list_of(get(doc, "tools"))
    local cfg = get(doc, "client_config")
    local auth = get(doc, "auth")
    local groups = grouped(tools)
    local out = {}
    out[#out + 1] = '<!DOCTYPE html>\n<html lang="' .. esc(lang) .. '"><head><meta charset="utf-8">\n'
    out[#out + 1] = '<meta name="viewport" content="width=device-width,initial-scale=1">\n'
        .. '<meta name="robots" content="noindex">\n<title>Context Loader · '
    out[#out + 1] = esc(path) .. " · " .. L.heading .. "</title>\n"
    out[#out + 1] = '<style nonce="' .. esc(nonce) .. '">' .. assets.catalogue_css .. "</style></head>\n<body><main>\n"

    out[#out + 1] = '<header><h1>Context Loader<span class="badge">' .. esc(path) .. "</span></h1>"
    out[#out + 1] = ('<p class="sub">%s · %d %s</p>\n'):format(L.heading, #tools, L.tools)
    out[#out + 1] = '<dl class="facts"><dt>' .. L.endpoint .. '</dt><dd><code id="endpoint">'
    out[#out + 1] = esc(get_string(doc, "endpoint"))
    out[#out + 1] = ('</code> <button type="button" data-copy="endpoint" data-label="%s" data-done="%s">%s</button>'
        .. "</dd>"):format(L.copy, L.copied, L.copy)
    out[#out + 1] = "<dt>" .. L.protocol .. "</dt><dd>" .. esc(get_string(doc, "protocol"))
    local versions = list_of(get(doc, "protocol_versions"))
    for i = 1, #versions do
        out[#out + 1] = (i > 1 and ", " or " (") .. esc(versions[i])
    end
    out[#out + 1] = #versions > 0 and ")</dd>" or "</dd>"
    local eras = list_of(get(doc, "eras"))
    if #eras > 0 then
        out[#out + 1] = "<dt>" .. L.eras .. "</dt><dd>"
        for i = 1, #eras do
            local e = eras[i]
            local label = L["era_" .. (get_string(e, "era") or "")] or get_string(e, "era") or ""
            out[#out + 1] = (i > 1 and "<br>" or "") .. esc(label) .. ":"
            local vs = list_of(get(e, "protocol_versions"))
            for k = 1, #vs do
                out[#out + 1] = (k > 1 and ", " or " ") .. esc(vs[k])
            end
        end
        out[#out + 1] = "</dd>"
    end
    out[#out + 1] = "<dt>" .. L.auth .. "</dt><dd>" .. esc(get_string(auth, "description"))
    out[#out + 1] = "</dd><dt>" .. L.language .. "</dt><dd>" .. esc(lang) .. " ("
    local langs = list_of(get(doc, "supported_languages"))
    for i = 1, #langs do
        out[#out + 1] = (i > 1 and ", " or "") .. esc(langs[i])
    end
    out[#out + 1] = ")</dd></dl></header>\n"

    out[#out + 1] = "<section><h2>" .. L.connect .. '</h2><div class="cfgs">\n'
    if cfg ~= nil then
        copy_block(out, L, "cfg-generic", L.generic, L.generic_note, get(cfg, "generic"))
        copy_block(out, L, "cfg-claude", L.claude, L.claude_note, get(cfg, "claude_desktop"))
        if get(cfg, "stateless_sdk") ~= nil then
            copy_block(out, L, "cfg-stateless", L.stateless, L.stateless_note, get(cfg, "stateless_sdk"))
        end
    end
    out[#out + 1] = "</div></section>\n"

    out[#out + 1] = '<nav class="toc"><div class="g">' .. L.contents .. '</div><div class="cols">\n'
    for _, g in ipairs(groups) do
        out[#out + 1] = '<div class="grp"><div class="g">' .. esc(group_label(g.tools[1], L)) .. "</div><ul>"
        for _, t in ipairs(g.tools) do
            local name = get_string(t, "name")
            out[#out + 1] = '<li><a href="#tool-' .. esc(name) .. '">' .. esc(get_string(t, "title") or name)
                .. "</a></li>"
        end
        out[#out + 1] = "</ul></div>\n"
    end
    out[#out + 1] = "</div></nav>\n"

    for _, g in ipairs(groups) do
        out[#out + 1] = '<section class="group" id="group-' .. esc(g.id) .. '"><h2>' .. esc(group_label(g.tools[1], L))
        out[#out + 1] = '<span class="gid">' .. esc(g.id) .. "</span></h2>\n"
        for _, t in ipairs(g.tools) do
            tool_article(out, L, t, get(doc, "confirmation"))
        end
        out[#out + 1] = "</section>\n"
    end
    -- the REST and gateway tools: listed by no tools/list, run through execute_tool
    local gateway = list_of(get(doc, "gateway_tools"))
    if #gateway > 0 then
        out[#out + 1] = '<section class="group" id="group-gateway"><h2>' .. L.gateway
        out[#out + 1] = '<span class="gid">gateway</span></h2>\n<p class="none">' .. esc(L.gateway_note) .. "</p>\n"
        for _, t in ipairs(gateway) do
            tool_article(out, L, t, get(doc, "confirmation"))
        end
        out[#out + 1] = "</section>\n"
    end
    out[#out + 1] = "<footer>" .. L.json_hint .. " · context-loader " .. esc(get_string(doc, "version"))
    out[#out + 1] = '</footer>\n</main>\n<script nonce="' .. esc(nonce) .. '">' .. assets.catalogue_js
        .. "</script>\n</body></html>\n"
    return table.concat(out)
end

-- page.shell(lang, nonce) -> html
-- The page a browser gets without a token: a form for one (the script in
-- page_assets.shell_js). The texts for a refused token ride on the error element as
-- data-401 / data-403. It holds no catalogue data.
function M.shell(lang, nonce)
    local function text(k)
        return esc(catalog.text(k, lang))
    end
    return table.concat({
        '<!doctype html>\n<html lang="', esc(lang), '"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<title>Context Loader</title><style nonce="', esc(nonce), '">', assets.shell_css, "</style></head>\n",
        "<body><main><h1>Context Loader</h1><p>", text("shell_intro"), "</p>",
        '<form id="f"><label for="t">', text("shell_token"), "</label>",
        '<input id="t" type="password" autocomplete="off" spellcheck="false" required>',
        '<button type="submit">', text("shell_open"), "</button>",
        '<p id="err" role="alert" data-401="', text("shell_refused"), '" data-403="', text("shell_forbidden"),
        '"></p></form></main>\n',
        '<script nonce="', esc(nonce), '">', assets.shell_js, "</script>\n</body></html>\n",
    })
end

return M
