-- execute_action: starts an action on a batch of instances, asynchronously
-- (ontology-query). Returns execution_id at
-- once. Parameter completeness is checked downstream: dynamic_params is forwarded
-- as given, and an empty _instance_identities is passed on (ontology-query then
-- scans the targets by the action's own conditions).
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local action = require "_lib.action"

local text = util.text

local M = {
    name = "execute_action",
    version = "1.0.0",
    kind = "execute",
    title = text("执行行动", "Execute Action"),
    description = text(
        "对一批对象实例触发某个行动类的执行（异步）。立刻返回 execution_id 即表示已受理，" ..
            "结果用 get_action_execution 轮询。dynamic_params 填 get_action_info 返回的 " ..
            "_dynamic_tools 里 dynamic_params 的参数；完整性由下游校验。_instance_identities 必须取自 " ..
            "query_object_instance / query_instance_subgraph 结果中的 _instance_identity，不能自己拼；" ..
            "留空表示按行动类自身的条件扫描目标实例，不是「不执行」。",
        "Starts an action type on a batch of object instances, asynchronously. It " ..
            "returns execution_id at once (the run is accepted); poll get_action_execution for " ..
            "the outcome. Fill dynamic_params with the dynamic_params of the _dynamic_tools that " ..
            "get_action_info returned; completeness is checked downstream. _instance_identities " ..
            "must be _instance_identity values taken from query_object_instance or " ..
            "query_instance_subgraph results, never composed; an empty list means \"scan the " ..
            "targets by the action's own conditions\", not \"do nothing\"."),
    short_description = text(
        "对一批实例异步执行行动类，返回 execution_id，用 get_action_execution 轮询。" ..
            "dynamic_params 按 get_action_info 返回的 _dynamic_tools 填写。_instance_identities " ..
            "原样取自查询结果，不能自己拼；留空表示按行动类自身条件扫描目标。",
        "Starts an action type on instances, asynchronously; returns execution_id, poll " ..
            "get_action_execution. Fill dynamic_params per get_action_info's _dynamic_tools. " ..
            "_instance_identities: taken unchanged from query results, never composed; empty " ..
            "means scan by the action's own conditions."),
    group = "action",
    order = 320,
    surfaces = { "mcp", "compact", "rest" },
    upstream = "ontology_query",
    annotations = { destructiveHint = true, idempotentHint = false, openWorldHint = true },
    input_schema = fields.input {
        required = { "kn_id", "at_id" },
        properties = {
            kn_id = fields.kn_id(),
            at_id = fields.at_id(),
            _instance_identities = fields.instance_identities(10000,
                "目标对象实例（取自查询结果的 _instance_identity）；留空表示按行动类自身的条件扫描",
                "Target instances (_instance_identity values from query results); " ..
                    "empty means scan by the action's own conditions"),
            dynamic_params = {
                type = "object",
                description = text(
                    "动态参数取值（get_action_info 中 value_from=input 的参数），由下游校验",
                    "Values of the dynamic parameters (value_from=input in get_action_info); " ..
                        "checked downstream"),
            },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            execution_id = { type = "string" },
            status = { type = "string" },
            message = { type = "string" },
            created_at = { type = "integer" },
        },
    },
}

function M.shape_request(args)
    local body = cljson.object()
    -- always an array: empty is meaningful downstream (scan by the action's conditions)
    body._instance_identities = args._instance_identities or util.array()
    if args._instance_identities ~= nil and #args._instance_identities == 0 then
        body._instance_identities = util.array()
    end
    if args.dynamic_params ~= nil then
        body.dynamic_params = args.dynamic_params
    end
    return {
        upstream = "ontology_query",
        method = "POST",
        path = action.kn_path(args.kn_id) .. "/action-types/" .. util.escape(args.at_id) .. "/execute",
        json = body,
    }
end

function M.trim_response(body)
    return util.keep_only(body, { "execution_id", "status", "message", "created_at" })
end

-- the failed step an upstream failure names (the default handle)
M.upstream_step = text("行动执行未被受理", "The action execution was not accepted")


return M
