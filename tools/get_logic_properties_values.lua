-- get_logic_properties_values (REST also /kn/logic-property-resolver): values of
-- logic properties (metrics, tools) for given instances. The parameters each
-- property needs are generated from the question by mf-model-api, checked, then
-- ontology-query computes the values. A 403 naming the object type carries
-- permission_guidance.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local permission = require "_lib.permission"

local text = util.text

local TIMEZONE = "Asia/Shanghai"
local MIN_MS, MAX_MS = 946684800000, 4102444800000
local STEPS = { day = true, week = true, month = true, quarter = true, year = true }

local SYSTEM_PROMPT = "You fill in the parameters of one logic property of a business object. " ..
    "Input: JSON with logic_property (name, type, parameters, and for tools the api_spec), query " ..
    "(the user's question), unique_identities (the instances), additional_context, now_ms (current " ..
    "time, Unix ms) and timezone. Output exactly one JSON object and nothing else: " ..
    "{\"<property name>\": {<parameter>: <value>, ...}}. For metric properties give start and end " ..
    "as Unix ms, instant (true for one point in time) and, when instant is false, step (day, " ..
    "week, month, quarter or year). If a required parameter cannot be derived from the input, " ..
    "output {\"_error\": \"missing <parameter>: <what the user should provide>\"}."

local M = {
    name = "get_logic_properties_values",
    version = "1.0.0",
    kind = "read",
    title = text("逻辑属性计算", "Compute Logic Properties"),
    description = text(
        "计算实例的逻辑属性（指标或工具型属性）的值。_instance_identities 取自 query_object_instance " ..
            "或 query_instance_subgraph 结果中的 _instance_identity，原样传入；properties 为逻辑属性名" ..
            "（见 get_object_types）；query 写明用户的问题（含时间范围等），参数由服务据此生成。" ..
            "缺少参数时返回 400 并说明缺什么。",
        "Computes logic property values (metrics or tool-backed properties) of instances. Take " ..
            "_instance_identities unchanged from the _instance_identity of query_object_instance or " ..
            "query_instance_subgraph results; properties are logic property names (see " ..
            "get_object_types); query states the user's question (time range and so on), from " ..
            "which the parameters are generated. A missing parameter gives a 400 saying what is " ..
            "missing."),
    short_description = text(
        "计算实例的逻辑属性（指标或工具型属性）的值。_instance_identities 原样取自查询结果；" ..
            "properties 见 get_object_types；query 写明用户的问题（含时间范围），参数据此生成。",
        "Computes logic property values (metrics or tool-backed properties) of instances. " ..
            "_instance_identities: unchanged from query results; properties: see get_object_types; " ..
            "query: the user's question (time range included), from which parameters are generated."),
    group = "query",
    order = 230,
    surfaces = { "mcp", "compact", "rest" },
    rest_alias = "logic-property-resolver",
    upstream = { "ontology_query", "bkn_backend", "operator_integration", "mf_model_api" },
    input_schema = fields.input {
        required = { "kn_id", "ot_id", "query", "_instance_identities", "properties" },
        properties = {
            kn_id = fields.kn_id(),
            ot_id = fields.ot_id(),
            query = fields.string(text("用户的问题，用于生成属性参数", "The user's question, used to derive parameters"), 4000),
            _instance_identities = fields.instance_identities(1000, "实例标识，取自结果中的 _instance_identity",
                "Instance identities, from _instance_identity in results", 1),
            properties = {
                type = "array",
                minItems = 1,
                maxItems = 50,
                items = { type = "string", minLength = 1 },
                description = text("逻辑属性名", "Logic property names"),
            },
            additional_context = {
                type = "string",
                maxLength = 8000,
                description = text("补充上下文", "Additional context"),
            },
            llm_model = { type = "string", maxLength = 256, description = text("参数生成模型", "Model for parameters") },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            datas = { type = "array", items = { type = "object" } },
        },
    },
}

local function ot_path(args)
    return "/in/v1/knowledge-networks/" .. util.escape(args.kn_id) .. "/object-types/" .. util.escape(args.ot_id)
end

local function quoted_list(names)
    return "[" .. table.concat(names, " ") .. "]"
end

-- The object type's logic properties by requested name -> list | nil, err
local function logic_properties(args, ctx)
    local res, err = ctx.http { upstream = "bkn_backend", method = "GET", path = ot_path(args),
        query = { include_detail = "true" }, headers = { ["x-http-method-override"] = "GET" } }
    if not util.is_2xx(res) then
        return nil, errors.from_response(res, err, ctx.lang)
    end
    local body = util.try_json(res)
    local ot = type(body) == "table" and type(body.entries) == "table" and body.entries[1] or nil
    if type(ot) ~= "table" then
        return nil, errors.refuse(404, ctx.lang, "object type " .. args.ot_id ..
            " not found in knowledge network " .. args.kn_id)
    end
    local by_name, available = {}, {}
    for _, p in ipairs(type(ot.logic_properties) == "table" and ot.logic_properties or {}) do
        if type(p) == "table" and type(p.name) == "string" then
            by_name[p.name] = p
            available[#available + 1] = p.name
        end
    end
    if #available == 0 then
        return nil, errors.refuse(400, ctx.lang, "object type " .. args.ot_id .. " has no logic properties")
    end
    local list, unknown = {}, {}
    for _, name in ipairs(args.properties) do
        if by_name[name] then
            list[#list + 1] = by_name[name]
        else
            unknown[#unknown + 1] = name
        end
    end
    if #unknown > 0 then
        return nil, errors.refuse(400, ctx.lang, "properties not found or not logic properties: " ..
            quoted_list(unknown) .. " (available logic properties: " .. quoted_list(available) .. ")")
    end
    return list
end

local function needs_input(prop)
    for _, p in ipairs(type(prop.parameters) == "table" and prop.parameters or {}) do
        if type(p) == "table" and p.value_from == "input" then
            return true
        end
    end
    return false
end

-- Checks generated metric parameters -> true | nil, message
local function check_metric_params(p)
    if type(p) ~= "table" then
        return nil, "parameters must be an object"
    end
    if p.instant == nil then
        p.instant = p.step == nil
    end
    if type(p.instant) ~= "boolean" then
        return nil, "instant must be a boolean"
    end
    for _, k in ipairs({ "start", "end" }) do
        local v = p[k]
        if math.type(v) ~= "integer" or v < MIN_MS or v > MAX_MS then
            return nil, k .. " must be a Unix timestamp in ms between 2000 and 2100"
        end
    end
    if p.instant and p.step ~= nil then
        return nil, "an instant query must not carry step"
    end
    if not p.instant and not STEPS[p.step] then
        return nil, "step must be one of day, week, month, quarter, year"
    end
    return true
end

local function generation_failed(ctx, name, why)
    return errors.new(500, "agentRetrieval.InternalServerError.DynamicParamsGenerationFailed", ctx.lang,
        "DYNAMIC_PARAMS_GENERATION_FAILED: " .. name .. ": " .. why)
end

-- The first {...} of the model's answer, decoded.
local function first_object(content)
    if type(content) ~= "string" then
        return nil
    end
    local s = content:find("{", 1, true)
    local e = s and content:match(".*()}")
    if not s or not e or e < s then
        return nil
    end
    local v = cljson.pdecode(content:sub(s, e))
    return type(v) == "table" and v or nil
end

-- Generates the dynamic parameters of one property -> params | nil, err
local function generate(prop, args, ctx)
    local ask = util.object({ name = prop.name, type = prop.type, comment = prop.comment,
        parameters = prop.parameters }, { "name", "type", "comment", "parameters", "api_spec" })
    local ds = type(prop.data_source) == "table" and prop.data_source or {}
    if prop.type == "tool" and ds.box_id and ds.tool_id then
        local r, e = ctx.http { upstream = "operator_integration", method = "GET",
            path = "/internal-v1/tool-box/" .. util.escape(ds.box_id) .. "/tool/" .. util.escape(ds.tool_id) }
        if r == nil or not util.is_2xx(r) then
            return nil, errors.from_response(r, e, ctx.lang)
        end
        local tool = util.try_json(r)
        ask.api_spec = type(tool) == "table" and type(tool.metadata) == "table" and tool.metadata.api_spec or nil
    end
    local user = util.object({ logic_property = ask, query = args.query,
        unique_identities = args._instance_identities, additional_context = args.additional_context or "",
        now_ms = ctx.now_ms and ctx.now_ms() or os.time() * 1000, timezone = TIMEZONE },
        { "logic_property", "query", "unique_identities", "additional_context", "now_ms", "timezone" })
    local res, err = ctx.http { upstream = "mf_model_api", method = "POST", path = "/v1/chat/completions",
        json = util.object({ model = args.llm_model or "", messages = util.array({
            util.object({ role = "system", content = SYSTEM_PROMPT }, { "role", "content" }),
            util.object({ role = "user", content = cljson.encode(user) }, { "role", "content" }) }),
            stream = false, temperature = 0, top_p = 0.5, max_tokens = 2000 },
            { "model", "messages", "stream", "temperature", "top_p", "max_tokens" }) }
    if res == nil or not util.is_2xx(res) then
        return nil, generation_failed(ctx, prop.name, res and ("model service status " .. res.status)
            or ("model service " .. (type(err) == "table" and tostring(err.code) or "unreachable")))
    end
    local body = util.try_json(res)
    local choice = type(body) == "table" and type(body.choices) == "table" and body.choices[1] or nil
    local msg = type(choice) == "table" and choice.message or nil
    local answer = first_object(type(msg) == "table" and msg.content or nil)
    if answer == nil then
        return nil, generation_failed(ctx, prop.name, "the model gave no JSON object")
    end
    if answer._error ~= nil then
        return nil, errors.refuse(400, ctx.lang, util.object({ error_code = "MISSING_INPUT_PARAMS",
            property = prop.name, message = tostring(answer._error) }, { "error_code", "property", "message" }))
    end
    local params = answer[prop.name]
    if type(params) ~= "table" then
        params = answer
    end
    if prop.type == "metric" then
        local ok, why = check_metric_params(params)
        if not ok then
            return nil, errors.refuse(400, ctx.lang, "invalid parameters for " .. prop.name .. ": " .. why)
        end
    end
    return params
end

function M.handle(args, ctx)
    local props, err = logic_properties(args, ctx)
    if not props then
        return nil, err
    end
    local dynamic = cljson.object()
    for _, prop in ipairs(props) do
        if needs_input(prop) then
            local params, gerr = generate(prop, args, ctx)
            if not params then
                return nil, gerr
            end
            dynamic[prop.name] = params
        end
    end
    local names = util.array()
    for i, p in ipairs(props) do
        names[i] = p.name
    end
    local body, res
    body, err, res = errors.fetch(ctx, { upstream = "ontology_query", method = "POST",
        path = ot_path(args) .. "/properties", headers = { ["x-http-method-override"] = "GET" },
        json = util.object({ _instance_identities = args._instance_identities, properties = names,
            dynamic_params = dynamic }, { "_instance_identities", "properties", "dynamic_params" }) })
    if body == nil then
        if res and res.status == 403 and permission.names_object_type(res.body, args.kn_id, args.ot_id) then
            err.permission_guidance = permission.for_refusal(ctx, args.kn_id, args.ot_id)
        end
        return nil, err
    end
    util.keep_only(body, { "datas" })
    if type(body.datas) ~= "table" then
        body.datas = util.array()
    end
    return body
end

return M
