-- get_action_info: the executable definition of an action type in function-call
-- form.
-- 1. ontology-query POST-as-GET …/action-types/{at} with _instance_identities (an
--    empty array = the class-level definition; instances = instantiated parameters).
--    It checks view_detail on the action type and query_data on the object type.
-- 2. The bound tool's published definition from the execution factory: a toolbox
--    tool (…/tool-box/{box}/tool/{tool}) or an MCP tool (…/mcp/proxy/{mcp}/tools).
--    When the caller may not read the toolbox tool (403), it is read once more as
--    the network's managed proxy account (ctx.http's managed_proxy = kn_id), which
--    the factory answers with name, description and schemas only. Only those are used
--    here in any case: never source, server_url or path, and no in-cluster URL is
--    handed to the model. A refused read stays a 403 with its reason.
-- No `headers` key: the reference's copy of the gateway's own downstream headers
-- holds identity values, and without them only correlation ids the model cannot use
-- remain (docs/security.md, "get_action_info without headers").
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local action = require "_lib.action"
local errors = require "_lib.errors"

local text = util.text

local MAX_REF_DEPTH = 3

local M = {
    name = "get_action_info",
    version = "1.0.0",
    kind = "read",
    title = text("行动信息", "Action Info"),
    description = text(
        "按行动类 ID 召回行动的可执行定义，返回符合 Function Call 规范的 _dynamic_tools" ..
            "（parameters 中 dynamic_params 为需要填写的参数，工具声明了输出契约时带 output_schema）。" ..
            "不传 _instance_identities 时返回行动类级别的定义；传入（取自 query_object_instance / " ..
            "query_instance_subgraph 结果中的 _instance_identity，不能自己拼）则返回已就这些实例实例化的参数" ..
            "（fixed_params）。之后用 execute_action 执行。",
        "Recalls the executable definition of an action type as function-call tool " ..
            "definitions (_dynamic_tools): parameters.properties.dynamic_params holds the " ..
            "parameters to fill in, and output_schema describes the result when the tool declares " ..
            "one. Without _instance_identities the action-class-level definition is returned; with " ..
            "them (the _instance_identity values of query_object_instance or " ..
            "query_instance_subgraph results, never composed) the parameters come instantiated for " ..
            "those instances (fixed_params). Run it with execute_action."),
    short_description = text(
        "返回行动类的 Function Call 定义（_dynamic_tools，填写其中 dynamic_params）。传入 " ..
            "_instance_identities（取自查询结果，不能自己拼）时参数已就这些实例实例化（fixed_params）。" ..
            "之后用 execute_action 执行。",
        "Returns an action type's function-call definition (_dynamic_tools; fill its " ..
            "dynamic_params). With _instance_identities (from query results, never composed) the " ..
            "parameters come instantiated (fixed_params). Run it with execute_action."),
    group = "action",
    order = 310,
    surfaces = { "mcp", "compact", "rest" },
    toon_view = true,
    upstream = { "ontology_query", "operator_integration" },
    input_schema = fields.input {
        required = { "kn_id", "at_id" },
        properties = {
            kn_id = fields.kn_id(),
            at_id = fields.at_id(text("行动类 ID（取自 Schema 检索结果）", "Action type id (from the schema search results)")),
            _instance_identities = fields.instance_identities(1000,
                "目标对象实例标识列表（取自查询结果的 _instance_identity）；不传则返回行动类级别的定义",
                "Target instances (_instance_identity values from query results); " ..
                    "omit for the class-level definition"),
            _instance_identity = {
                type = "object",
                description = text(
                    "旧版单个实例标识；_instance_identities 为空时使用",
                    "Legacy single instance identity; used when _instance_identities is empty"),
            },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            _dynamic_tools = {
                type = "array",
                items = { type = "object" },
                description = text(
                    "Function Call 形式的工具定义：name、description、parameters、output_schema、fixed_params",
                    "Function-call tool definitions: name, description, parameters, " ..
                        "output_schema, fixed_params"),
            },
        },
    },
}

local TEXT = text(
    {
        dynamic = "动态参数：执行时需要填写的参数（value_from=input），放在 execute_action 的 dynamic_params 中",
        identities = "目标对象实例标识列表，取自查询结果中的 _instance_identity；留空表示按行动类自身的条件扫描",
        identity = "一个对象实例的主键键值对",
        output = "执行结果 result 的结构（get_action_execution 返回的 results[].result）",
    },
    {
        dynamic = "Dynamic parameters to fill in at execution (value_from=input); pass them as " ..
            "execute_action's dynamic_params",
        identities = "Target instances: _instance_identity values from query results; empty means " ..
            "scan by the action's own conditions",
        identity = "The primary-key values of one object instance",
        output = "Shape of each result (results[].result of get_action_execution)",
    })

local function text_of(lang, key)
    return (TEXT[lang] or TEXT["zh-CN"])[key]
end

local function non_empty_map(v)
    return type(v) == "table" and next(v) ~= nil
end

-- _instance_identities as sent: empty maps dropped; the legacy single identity
-- when the list is empty; always an array.
local function identities(args)
    local out = util.array()
    for _, id in ipairs(args._instance_identities or {}) do
        if non_empty_map(id) then
            out[#out + 1] = id
        end
    end
    if #out == 0 and non_empty_map(args._instance_identity) then
        out[1] = args._instance_identity
    end
    return out
end

function M.shape_request(args)
    local body = cljson.object()
    body._instance_identities = identities(args)
    return {
        upstream = "ontology_query",
        method = "POST",
        path = action.kn_path(args.kn_id) .. "/action-types/" .. util.escape(args.at_id),
        headers = { ["x-http-method-override"] = "GET" },
        json = body,
    }
end

-- Deep copy with $ref inlined (#/components/schemas/X or #/$defs/X), at most
-- MAX_REF_DEPTH levels; deeper or cyclic refs become {type, description}.
local function inline(node, defs, depth, seen)
    if type(node) ~= "table" or getmetatable(node) == cljson.number_mt then
        return node
    end
    if cljson.is_array(node) then
        local out = util.array()
        for i, v in ipairs(node) do
            out[i] = inline(v, defs, depth, seen)
        end
        return out
    end
    local ref = node["$ref"]
    if type(ref) == "string" then
        local name = ref:match("^#/components/schemas/(.+)$") or ref:match("^#/%$defs/(.+)$")
        local target = name and defs[name]
        if target == nil or depth >= MAX_REF_DEPTH or seen[name] then
            local stub = cljson.object()
            stub.type = type(target) == "table" and target.type or "object"
            if type(target) == "table" and target.description ~= nil then
                stub.description = target.description
            end
            return stub
        end
        seen[name] = true
        local out = inline(target, defs, depth + 1, seen)
        seen[name] = nil
        return out
    end
    local keys = cljson.keys(node)
    local out = cljson.object({}, keys)
    for _, k in ipairs(keys) do
        if k ~= "$defs" then
            out[k] = inline(node[k], defs, depth, seen)
        end
    end
    return out
end

local function json_schema_of(content)
    local j = type(content) == "table" and content["application/json"]
    return type(j) == "table" and j.schema or nil
end

-- Flattened parameters of an OpenAPI api_spec: path/query/header parameters and
-- the properties of the JSON request body, with their required names.
local function from_api_spec(spec)
    local defs = type(spec.components) == "table" and type(spec.components.schemas) == "table" and
        spec.components.schemas or {}
    local props, names, required = {}, {}, util.array()
    local function put(k, v)
        if props[k] == nil then
            names[#names + 1] = k
        end
        props[k] = v
    end
    for _, p in ipairs(type(spec.parameters) == "table" and spec.parameters or {}) do
        if type(p) == "table" and type(p.name) == "string" then
            local s = inline(p.schema or cljson.object(), defs, 0, {})
            if type(p.description) == "string" and s.description == nil then
                s.description = p.description
            end
            put(p.name, s)
            if p.required == true then
                required[#required + 1] = p.name
            end
        end
    end
    local body = type(spec.request_body) == "table" and json_schema_of(spec.request_body.content)
    if body then
        body = inline(body, defs, 0, {})
        for _, k in ipairs(cljson.keys(type(body.properties) == "table" and body.properties or {})) do
            put(k, body.properties[k])
        end
        for _, k in ipairs(type(body.required) == "table" and body.required or {}) do
            required[#required + 1] = k
        end
    end
    -- the 2xx response schema, 200 first
    local output
    local responses = type(spec.responses) == "table" and spec.responses or {}
    for _, want in ipairs({ "200", "2xx" }) do
        for _, r in ipairs(responses) do
            local code = type(r) == "table" and tostring(r.status_code or "")
            local hit = (want == "200" and code == "200") or (want == "2xx" and code:match("^2%d%d$"))
            if output == nil and hit then
                output = json_schema_of(r.content)
            end
        end
    end
    if output ~= nil then
        output = inline(output, defs, 0, {})
    end
    return cljson.object(props, names), required, output
end

local function from_mcp_tool(t)
    local s = type(t.inputSchema) == "table" and t.inputSchema or cljson.object()
    local defs = type(s["$defs"]) == "table" and s["$defs"] or {}
    s = inline(s, defs, 0, {})
    local props = type(s.properties) == "table" and s.properties or cljson.object()
    local required = util.array()
    for i, k in ipairs(type(s.required) == "table" and s.required or {}) do
        required[i] = k
    end
    local output = type(t.outputSchema) == "table" and inline(t.outputSchema, defs, 0, {}) or nil
    return props, required, output
end

-- Only the parameters the action leaves to the caller (value_from=input, the
-- keys of actions[0].dynamic_params) when ontology-query names them.
local function restrict(props, required, inputs)
    if not non_empty_map(inputs) then
        return props, required
    end
    local keep_props, names = {}, {}
    for _, k in ipairs(cljson.keys(props)) do
        if inputs[k] ~= nil then
            keep_props[k] = props[k]
            names[#names + 1] = k
        end
    end
    for _, k in ipairs(cljson.keys(inputs)) do
        if keep_props[k] == nil then
            names[#names + 1] = k
            -- declared by the action but not by the tool schema: keep what the action says
            local s = cljson.object()
            local d = inputs[k]
            s.type = type(d) == "table" and d.type or "string"
            if type(d) == "table" and type(d.comment) == "string" and d.comment ~= "" then
                s.description = d.comment
            end
            keep_props[k] = s
        end
    end
    keep_props = cljson.object(keep_props, names)
    local keep_req = util.array()
    for _, k in ipairs(required) do
        if keep_props[k] ~= nil then
            keep_req[#keep_req + 1] = k
        end
    end
    return keep_props, keep_req
end

local function has_properties(s)
    return type(s) == "table" and type(s.properties) == "table" and next(s.properties) ~= nil
end

-- build(info, def, lang) -> the _dynamic_tools entry. info: ontology-query body;
-- def: {name, description, props, required, output}.
local function build(info, def, lang)
    local first = info.actions[1]
    local props, required = restrict(def.props, def.required, first.dynamic_params)
    local dyn = cljson.object({}, { "type", "description", "properties", "required" })
    dyn.type = "object"
    dyn.description = text_of(lang, "dynamic")
    dyn.properties = props
    if #required > 0 then
        dyn.required = required
    end
    local ids = cljson.object({}, { "type", "description", "items" })
    ids.type = "array"
    ids.description = text_of(lang, "identities")
    ids.items = cljson.object({}, { "type", "description", "additionalProperties" })
    ids.items.type = "object"
    ids.items.description = text_of(lang, "identity")
    ids.items.additionalProperties = cljson.object()
    local params = cljson.object({}, { "type", "properties" })
    params.type = "object"
    params.properties = cljson.object({}, { "dynamic_params", "_instance_identities" })
    params.properties.dynamic_params = dyn
    params.properties._instance_identities = ids
    local tool = cljson.object({}, { "name", "description", "parameters", "output_schema",
        "fixed_params", "api_call_strategy" })
    tool.name = def.name
    tool.description = def.description
    tool.parameters = params
    if has_properties(def.output) then
        if def.output.description == nil then
            def.output.description = text_of(lang, "output")
        end
        tool.output_schema = def.output
    end
    local fixed = cljson.object({}, { "dynamic_params", "_instance_identities" })
    fixed.dynamic_params = first.parameters or cljson.object()
    -- the identities ontology-query resolved (unknown or filtered-out instances
    -- dropped); empty at class level
    local resolved = util.array()
    for _, a in ipairs(info.actions) do
        if non_empty_map(a._instance_identity) then
            resolved[#resolved + 1] = a._instance_identity
        end
    end
    fixed._instance_identities = resolved
    tool.fixed_params = fixed
    tool.api_call_strategy = "kn_action_recall"
    return tool
end

local SUMMARY = {
    info = text("无法获取行动信息", "Unable to retrieve the action information"),
    tool = text("无法读取行动绑定的工具定义", "Unable to read the tool bound to the action"),
    mcp = text("无法读取行动绑定的 MCP 工具", "Unable to read the MCP tool bound to the action"),
}

local MCP_NOT_FOUND = text(
    { "行动绑定的 MCP 工具不存在", "请联系管理员检查行动类绑定的 MCP 工具" },
    { "The MCP tool bound to the action was not found",
        "Ask an administrator to check the MCP tool bound to the action type" })

local BAD_SOURCE = text(
    { "行动的来源类型不受支持", "行动来源只能是 tool 或 mcp；请联系管理员检查行动类配置" },
    { "The action's source type is not supported",
        "An action source is either tool or mcp; ask an administrator to check the action type" })

local function read_box_tool(ctx, args, src)
    local tail = "/tool-box/" .. util.escape(src.box_id) .. "/tool/" .. util.escape(src.tool_id)
    local res, err = ctx.http({ upstream = "operator_integration", method = "GET", path = "/internal-v1" .. tail })
    if res ~= nil and res.status == 403 then
        -- the caller may not read the tool itself: the network's managed proxy
        -- account reads the published definition (view_detail was checked in step 1).
        -- managed_proxy asks the core to send that account's identity instead of the
        -- caller's; a core that does not know it sends the caller's, and the refusal
        -- below stays a 403.
        res, err = ctx.http({ upstream = "operator_integration", method = "GET",
            path = "/internal-v1" .. tail, managed_proxy = args.kn_id })
    end
    if res == nil or not util.is_2xx(res) then
        return nil, errors.from_response(res, err, ctx.lang, SUMMARY.tool)
    end
    local t, terr = errors.json(res, ctx.lang)
    if t == nil then
        return nil, terr
    end
    local meta = type(t.metadata) == "table" and t.metadata or {}
    local spec = type(meta.api_spec) == "table" and meta.api_spec or {}
    local props, required, output = from_api_spec(spec)
    local desc = t.description
    if (desc == nil or desc == "") and type(meta.description) == "string" then
        desc = meta.description
    end
    return { name = t.name or src.tool_id, description = desc or "", props = props,
             required = required, output = output }
end

local function read_mcp_tool(ctx, src)
    local body, err = errors.fetch(ctx, { upstream = "operator_integration", method = "GET",
        path = "/internal-v1/mcp/proxy/" .. util.escape(src.mcp_id) .. "/tools" }, SUMMARY.mcp)
    if body == nil then
        return nil, err
    end
    for _, t in ipairs(type(body.tools) == "table" and body.tools or {}) do
        if type(t) == "table" and t.name == src.tool_name then
            local props, required, output = from_mcp_tool(t)
            return { name = t.name, description = t.description or "", props = props,
                     required = required, output = output }
        end
    end
    return nil, errors.refuse(404, ctx.lang, { mcp_id = src.mcp_id, tool_name = src.tool_name }, MCP_NOT_FOUND)
end

local function empty_result()
    local out = cljson.object()
    out._dynamic_tools = util.array()
    return out
end

function M.handle(args, ctx)
    local info, err = errors.fetch(ctx, M.shape_request(args), SUMMARY.info)
    if info == nil then
        return nil, err
    end
    local src = info.action_source
    if type(src) ~= "table" or type(info.actions) ~= "table" or #info.actions == 0 then
        return empty_result()
    end
    local def, derr
    if src.type == "tool" then
        def, derr = read_box_tool(ctx, args, src)
    elseif src.type == "mcp" then
        def, derr = read_mcp_tool(ctx, src)
    else
        return nil, errors.refuse(400, ctx.lang, { type = src.type }, BAD_SOURCE)
    end
    if def == nil then
        return nil, derr
    end
    local out = empty_result()
    out._dynamic_tools[1] = build(info, def, ctx.lang)
    return out
end

-- TOON text: the token-saving view (tables, dotted columns, side lists)
return M
