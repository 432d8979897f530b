-- An example tool for the installed kit: the names of the knowledge networks the
-- caller can see. Copy it with its spec to start a tool of your own
-- (docs/writing-tools.md, "Testing a tool outside the repository"). It has no
-- handle: the default handle sends shape_request's request, maps a failure and
-- hands the decoded answer to trim_response.
local util = require "_lib.util"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "kn_names",
    version = "1.0.0",
    kind = "read",
    title = text("知识网络名称", "Knowledge network names"),
    description = text("列出当前用户可访问的知识网络的 id 与名称。",
        "Lists the ids and names of the knowledge networks the caller can access."),
    group = "discovery",
    order = 990,
    surfaces = { "mcp", "rest" },
    upstream = "bkn_backend",
    input_schema = fields.input {
        properties = {
            limit = fields.integer(1, 100, text("最多返回的条数", "At most this many"), 20),
        },
    },
}

function M.shape_request(args)
    return { upstream = "bkn_backend", method = "GET", path = "/in/v1/knowledge-networks",
             query = { limit = tostring(args.limit) } }
end

function M.trim_response(body)
    local names = util.array()
    for _, e in ipairs(type(body.entries) == "table" and body.entries or {}) do
        names[#names + 1] = { id = e.id, name = e.name }
    end
    return { names = names }
end

return M
