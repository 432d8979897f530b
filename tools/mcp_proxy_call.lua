-- mcp_proxy_call: the tool behind POST /mcp/proxy/{mcp_id}/tools/{tool_name}/call:
-- one call to a tool of an MCP server registered in the execution factory. Listed
-- on no surface ("proxy" only); the route it declares fills mcp_id and tool_name from
-- the path and parameters from the body.
-- A failure follows the gateway's one mapping (errors.from_response): a 4xx keeps
-- its status (an unknown MCP server stays 404, a missing execute right 403), 5xx
-- and transport failures become 502/503/504; the factory's body is the details.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"

local text = util.text

local M = {
    name = "mcp_proxy_call",
    version = "1.0.0",
    kind = "execute",
    title = text("MCP 代理调用", "MCP Proxy Call"),
    description = text(
        "调用执行工厂中注册的某个 MCP 服务器的一个工具，原样返回其结果。",
        "Calls one tool of an MCP server registered in the execution factory and " ..
            "returns its result as it is."),
    group = "capability",
    order = 630,
    surfaces = { "proxy" },
    routes = { { method = "POST", path = "/mcp/proxy/{mcp_id}/tools/{tool_name}/call", body = "parameters" } },
    formats = { "json" },
    upstream = "operator_integration",
    annotations = { openWorldHint = true },
    input_schema = fields.input {
        required = { "mcp_id", "tool_name" },
        properties = {
            mcp_id = { type = "string", minLength = 1, maxLength = 256 },
            tool_name = { type = "string", minLength = 1, maxLength = 256 },
            parameters = { type = "object", default = {} },
        },
    },
}

function M.shape_request(args)
    local body = cljson.object({}, { "tool_name", "parameters" })
    body.tool_name = args.tool_name
    body.parameters = args.parameters or cljson.object()
    return { upstream = "operator_integration", method = "POST",
             path = "/internal-v1/mcp/proxy/" .. util.escape(args.mcp_id) .. "/tool/call", json = body }
end

local NOT_FOUND = text(
    "请确认 MCP 服务「%s」存在、已发布并提供工具「%s」（可用 search_capabilities 或 get_action_info 查看），再重试",
    "Check that MCP server '%s' exists, is published and offers tool '%s' (search_capabilities or " ..
        "get_action_info list them), then call again")

function M.handle(args, ctx)
    local bad = errors.dot_ids(ctx.lang, args, "mcp_id", "tool_name")
    if bad then
        return nil, bad
    end
    local res, err = ctx.http(M.shape_request(args))
    if not util.is_2xx(res) then
        local e = errors.from_response(res, err, ctx.lang)
        if e.status == 404 then
            e.solution = string.format(NOT_FOUND[ctx.lang == "en-US" and "en-US" or "zh-CN"], args.mcp_id,
                args.tool_name)
        end
        return nil, e
    end
    local v = util.try_json(res)
    if type(v) ~= "table" or cljson.is_array(v) or getmetatable(v) == cljson.number_mt then
        return nil, errors.bad_gateway(ctx.lang, { reason = "not_a_json_object" })
    end
    return v
end

return M
