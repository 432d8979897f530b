-- An example tool for the installed kit: the names of the knowledge networks the
-- caller can see. Copy it with its spec to start a tool of your own
-- (docs/writing-tools.md, "Testing a tool outside the repository").
local util = require "_lib.util"

local M = {
    name = "kn_names",
    version = "1.0.0",
    kind = "read",
    title = { ["zh-CN"] = "知识网络名称", ["en-US"] = "Knowledge network names" },
    description = {
        ["zh-CN"] = "列出当前用户可访问的知识网络的 id 与名称。",
        ["en-US"] = "Lists the ids and names of the knowledge networks the caller can access.",
    },
    group = "discovery",
    order = 990,
    surfaces = { "mcp", "rest" },
    upstream = "bkn_backend",
    input_schema = {
        type = "object",
        additionalProperties = false,
        properties = {
            limit = { type = "integer", minimum = 1, maximum = 100, default = 20,
                      description = { ["zh-CN"] = "最多返回的条数", ["en-US"] = "At most this many" } },
        },
    },
}

function M.handle(args, ctx)
    local res, err = ctx.http { upstream = "bkn_backend", method = "GET", path = "/in/v1/knowledge-networks",
                                query = { limit = tostring(args.limit) } }
    if res == nil or not util.is_2xx(res) then
        return nil, util.upstream_failure(res, err, ctx.lang)
    end
    local names = util.array()
    for _, e in ipairs(res.json().entries or {}) do
        names[#names + 1] = { id = e.id, name = e.name }
    end
    return { names = names }
end

return M
