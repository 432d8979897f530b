local helper = require "helper"

-- An id of "." or ".." would be a dot segment in the upstream path: refused with a 400
-- that names the field, before any request.
describe("ids that are dot segments", function()
    local cases = {
        { "describe_resource", { resource_id = ".." }, "resource_id" },
        { "get_skill_content", { skill_id = ".." }, "skill_id" },
        { "read_skill_file", { skill_id = ".", rel_path = "SKILL.md" }, "skill_id" },
        { "execute_skill", { skill_id = "..", entry_shell = "run.sh" }, "skill_id" },
        { "mcp_proxy_call", { mcp_id = "..", tool_name = "t", parameters = {} }, "mcp_id" },
        { "mcp_proxy_call", { mcp_id = "m", tool_name = ".", parameters = {} }, "tool_name" },
    }
    for _, c in ipairs(cases) do
        it(c[1] .. " refuses " .. c[3] .. " = " .. tostring(c[2][c[3]]), function()
            local tool = helper.load_tool(c[1])
            local args = {}
            for k, v in pairs(c[2]) do
                if tool.input_schema.properties[k] then
                    args[k] = v
                end
            end
            local res, err, ctx = helper.call(tool, args, { lang = "en-US", responses = {} })
            assert.is_nil(res)
            assert.equal(400, err.status, c[1])
            assert.equal("Public.BadRequest", err.code)
            assert.truthy(tostring(err.details):find(c[3] .. " must be an id", 1, true), tostring(err.details))
            assert.equal(0, #ctx.requests)
        end)
    end
end)
