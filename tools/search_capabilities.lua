-- search_capabilities: the on-demand gateway's discovery half. It finds
--   * Context Loader tools that the caller's surface does not list (on
--     /mcp-compact: get_relation_types, list_skills, ...; on every MCP surface the
--     gateway tools, which no tools/list shows: search_instance, explore_subgraph,
--     query_metric, find_skills), never REST-only or gated-off ones (ctx.list_tools
--     already leaves gated-off tools out);
--   * capabilities the knowledge network mounts in the execution factory: function
--     tools of toolboxes, MCP tools, skills.
-- Each comes with name, kind, description and input schema, and the ids that
-- execute_tool takes.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local capability = require "_lib.capability"
local errors = require "_lib.errors"

local text = util.text

local DEFAULT_LIMIT = 20

local M = {
    name = "search_capabilities",
    version = "1.0.0",
    kind = "read",
    title = text("能力检索", "Search Capabilities"),
    description = text(
        "按需发现可调用的能力：本服务中未直接列出的工具（kind=tool），以及知识网络在执行工厂挂载的" ..
            "函数工具（function）、MCP 工具（mcp_tool）和技能（skill）。每项带 name、kind、description、" ..
            "input_schema，以及调用所需的 tool_id / toolbox_id。找到后用 execute_tool 调用（技能用 " ..
            "get_skill_content 等技能工具读取）。",
        "Discovers callable capabilities on demand: tools of this service that your " ..
            "surface does not list (kind=tool), and the function tools (function), MCP tools " ..
            "(mcp_tool) and skills (skill) the knowledge network mounts in the execution factory. " ..
            "Each has name, kind, description, input_schema and the tool_id / toolbox_id that " ..
            "execute_tool takes. Run one with execute_tool (read skills with the skill tools such " ..
            "as get_skill_content)."),
    short_description = text(
        "发现此处未列出的可调用能力：本服务的其他工具（kind=tool）及知识网络挂载的 function、" ..
            "mcp_tool、skill。用 execute_tool 调用（tool_id / toolbox_id）。",
        "Finds callable capabilities not listed here: this service's other tools (kind=tool) " ..
            "and the knowledge network's function, mcp_tool and skill capabilities. Run one with " ..
            "execute_tool (tool_id / toolbox_id)."),
    group = "capability",
    order = 610,
    surfaces = { "mcp", "compact", "rest" },
    toon_view = true,
    upstream = { "operator_integration", "bkn_backend" },
    input_schema = fields.input {
        required = { "kn_id" },
        properties = {
            kn_id = fields.kn_id(),
            query = {
                type = "string",
                maxLength = 512,
                description = text(
                    "要做的事或能力名称；为空时列出全部",
                    "What you want to do, or a capability name; empty lists everything"),
            },
            types = {
                type = "array",
                uniqueItems = true,
                items = { enum = { "tool", "function", "mcp_tool", "skill" } },
                description = text(
                    "只要这些类型：tool（本服务工具）、function、mcp_tool、skill",
                    "Only these kinds: tool (this service's tools), function, mcp_tool, skill"),
            },
            limit = fields.integer(1, 100, text("最多返回条数，默认 20", "At most this many, default 20"), DEFAULT_LIMIT),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            capabilities = {
                type = "array",
                items = { type = "object" },
                description = text(
                    "kind、name、tool_id、toolbox_id（工厂能力）、description、input_schema",
                    "kind, name, tool_id, toolbox_id (factory capabilities), description, input_schema"),
            },
            total_matched = { type = "integer" },
            truncated = { type = "boolean" },
            message = { type = "string" },
        },
    },
}

local MESSAGES = text(
    {
        none = "没有匹配的能力。可放宽 query 或 types；执行工厂的能力需先挂载到该知识网络并发布。",
        truncated = "匹配结果多于 limit，只返回了前面的部分；可细化 query 或增大 limit。",
    },
    {
        none = "No capability matched. Broaden query or types; factory capabilities must be " ..
            "mounted on the knowledge network and published first.",
        truncated = "More capabilities matched than limit; only the first ones are returned. " ..
            "Refine query or raise limit.",
    })

local function wanted(args, kind)
    if type(args.types) ~= "table" or #args.types == 0 then
        return true
    end
    for _, t in ipairs(args.types) do
        if t == kind then
            return true
        end
    end
    return false
end

local function has(list, v)
    for _, x in ipairs(list or {}) do
        if x == v then
            return true
        end
    end
    return false
end

-- A tool matches when the query is empty, or any of its words occurs in the name,
-- title or description (case-insensitive, plain find: Chinese has no spaces).
local function matches(query, ...)
    if query == nil or query:match("^%s*$") then
        return true
    end
    local hay = table.concat({ ... }, "\n"):lower()
    if hay:find(query:lower(), 1, true) then
        return true
    end
    for word in query:lower():gmatch("[^%s,，、]+") do
        if hay:find(word, 1, true) then
            return true
        end
    end
    return false
end

local ENTRY_KEYS = { "kind", "name", "tool_id", "toolbox_id", "skill_id", "title", "description", "use_rule",
    "input_schema" }

local function entry()
    return cljson.object({}, ENTRY_KEYS)
end

-- Context Loader tools not listed on the caller's surface.
local function local_tools(args, ctx)
    local out = {}
    if not wanted(args, "tool") or type(ctx.list_tools) ~= "function" then
        return out
    end
    for _, t in ipairs(ctx.list_tools()) do
        if (has(t.surfaces, "gateway") or has(t.surfaces, "mcp")) and not has(t.surfaces, ctx.surface) and
            t.name ~= M.name and
            matches(args.query, t.name, t.title or "", t.description or "") then
            local e = entry()
            e.kind = "tool"
            e.name = t.name
            e.tool_id = t.name
            e.title = t.title
            e.description = t.description
            e.input_schema = t.input_schema
            out[#out + 1] = e
        end
    end
    return out
end

local function reduced_api_spec(tool)
    local spec = type(tool.metadata) == "table" and tool.metadata.api_spec
    if type(spec) ~= "table" then
        return nil
    end
    local s = cljson.object({}, { "parameters", "request_body", "components" })
    s.parameters = spec.parameters
    s.request_body = spec.request_body
    if type(spec.components) == "table" and spec.components.schemas ~= nil then
        s.components = cljson.object()
        s.components.schemas = spec.components.schemas
    end
    return s
end

-- The search over the mounted refs; nil, err when the search itself fails.
local function search(ctx, args, refs, limit)
    local body = cljson.object({}, { "query", "refs", "top_k", "types" })
    body.query = args.query or ""
    body.refs = refs
    body.top_k = limit + 1
    local types = util.array()
    for _, t in ipairs(args.types or {}) do
        if t ~= "tool" then
            types[#types + 1] = t
        end
    end
    if #types > 0 then
        body.types = types
    end
    local out, err = errors.fetch(ctx, { upstream = "operator_integration", method = "POST",
        path = "/internal-v1/capabilities/search", json = body }, text("能力检索失败", "The capability search failed"))
    if out == nil then
        return nil, err
    end
    return type(out.entries) == "table" and out.entries or {}
end

-- Factory capabilities mounted on the network, ranked by the factory's search.
local function factory(ctx, args, limit)
    local kinds = { "function", "mcp_tool", "skill" }
    local any = false
    for _, k in ipairs(kinds) do
        any = any or wanted(args, k)
    end
    if not any then
        return {}, 0
    end
    local mounted, merr = capability.mounted(ctx, args.kn_id)
    if mounted == nil then
        return nil, merr
    end
    local refs = util.array()
    for _, m in ipairs(mounted) do
        if wanted(args, m.capability_type) then
            local r = cljson.object({}, { "capability_type", "owner_id", "capability_id" })
            r.capability_type, r.owner_id, r.capability_id = m.capability_type, m.box_id, m.capability_id
            refs[#refs + 1] = r
        end
    end
    if #refs == 0 then
        return {}, 0 -- fail closed: nothing mounted, nothing searched
    end
    local listing = args.query == nil or args.query:match("^%s*$")
    local hits, serr = search(ctx, args, refs, limit)
    if hits == nil then
        if not listing then
            return nil, serr
        end
        -- a plain listing can be built from the bindings alone
        hits = {}
        for _, r in ipairs(refs) do
            hits[#hits + 1] = { capability_type = r.capability_type, owner_id = r.owner_id,
                                capability_id = r.capability_id, name = r.capability_id }
        end
    end
    local catalogues, mcp_tools, out, hidden = {}, {}, {}, 0
    for _, h in ipairs(hits) do
        local kind, owner, id = h.capability_type, h.owner_id, h.capability_id
        local e = entry()
        e.kind, e.name, e.tool_id, e.description = kind, h.name or id, id, h.description
        if kind ~= "skill" then
            e.toolbox_id = owner
        end
        local keep = true
        if kind == "function" then
            if catalogues[owner] == nil then
                catalogues[owner] = capability.catalogue(ctx, owner) or false
            end
            local cat = catalogues[owner]
            if cat then
                local t = cat[id]
                if t == nil then
                    keep = false -- the caller cannot see (or run) it
                    hidden = hidden + 1
                else
                    e.name = t.name or e.name
                    e.description = t.description or e.description
                    if type(t.use_rule) == "string" and t.use_rule ~= "" then
                        e.use_rule = t.use_rule
                    end
                    e.input_schema = reduced_api_spec(t)
                end
            end
        elseif kind == "mcp_tool" then
            if mcp_tools[owner] == nil then
                local res = ctx.http({ upstream = "operator_integration", method = "GET",
                    path = "/internal-v1/mcp/proxy/" .. util.escape(owner) .. "/tools" })
                local body = util.is_2xx(res) and util.try_json(res) or nil
                mcp_tools[owner] = type(body) == "table" and type(body.tools) == "table" and body.tools or false
            end
            for _, t in ipairs(mcp_tools[owner] or {}) do
                if type(t) == "table" and t.name == id then
                    e.description = t.description or e.description
                    e.input_schema = t.inputSchema
                end
            end
        elseif kind == "skill" then
            e.tool_id = nil
            e.skill_id = id
        end
        if keep and wanted(args, kind) then
            out[#out + 1] = e
        end
    end
    return out, hidden
end

function M.handle(args, ctx)
    local limit = args.limit or DEFAULT_LIMIT
    local all = local_tools(args, ctx)
    local found, ferr = factory(ctx, args, limit)
    if found == nil then
        return nil, ferr
    end
    for _, e in ipairs(found) do
        all[#all + 1] = e
    end
    local texts = MESSAGES[ctx.lang] or MESSAGES["zh-CN"]
    local out = cljson.object({}, { "capabilities", "total_matched", "truncated", "message" })
    out.capabilities = util.array()
    for i = 1, math.min(limit, #all) do
        out.capabilities[i] = all[i]
    end
    out.total_matched = #all
    if #all > limit then
        out.truncated = true
        out.message = texts.truncated
    elseif #all == 0 then
        out.message = texts.none
    end
    return out
end

-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
