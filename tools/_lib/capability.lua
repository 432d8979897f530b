-- _lib.capability: the network's capabilities in the execution factory
-- (the on-demand gateway's data): the mounted list from bkn-backend and the
-- caller-visible toolbox catalogue.
local util = require "_lib.util"
local errors = require "_lib.errors"

local text = util.text

local M = {}

local SUMMARY = {
    mounted = text("无法获取知识网络挂载的能力", "Unable to list the network's capabilities"),
    catalogue = text("无法读取工具箱目录", "Unable to read the toolbox catalogue"),
}
M.SUMMARY = SUMMARY

-- mounted(ctx, kn_id) -> array of {capability_type, box_id, capability_id} | nil, err
-- limit=-1 turns bkn-backend's default paging (10) off.
function M.mounted(ctx, kn_id)
    local body, err = errors.fetch(ctx, { upstream = "bkn_backend", method = "GET",
        path = "/in/v1/knowledge-networks/" .. util.escape(kn_id) .. "/capabilities",
        query = { limit = "-1" } }, SUMMARY.mounted)
    if body == nil then
        return nil, err
    end
    local out = {}
    for _, e in ipairs(type(body.entries) == "table" and body.entries or {}) do
        if type(e) == "table" and type(e.capability_id) == "string" and e.capability_id ~= "" and
            type(e.capability_type) == "string" then
            local box = type(e.box_id) == "string" and e.box_id or ""
            if box ~= "" or e.capability_type == "skill" then
                out[#out + 1] = { capability_type = e.capability_type, box_id = box,
                                  capability_id = e.capability_id }
            end
        end
    end
    return out
end

-- catalogue(ctx, box_id) -> {tool_id = tool} of the enabled tools the caller may
-- see | nil, err. Bounded walk: at most 50 pages of 100.
function M.catalogue(ctx, box_id)
    local tools = {}
    for page = 1, 50 do
        local body, err = errors.fetch(ctx, { upstream = "operator_integration", method = "GET",
            path = "/internal-v1/caller/tool-box/" .. util.escape(box_id) .. "/tools/list",
            query = { status = "enabled", page = tostring(page), page_size = "100" } }, SUMMARY.catalogue)
        if body == nil then
            return nil, err
        end
        local list = type(body.tools) == "table" and body.tools or {}
        for _, t in ipairs(list) do
            if type(t) == "table" and type(t.tool_id) == "string" then
                tools[t.tool_id] = t
            end
        end
        if #list < 100 or body.has_next == false then
            break
        end
    end
    return tools
end

return M
