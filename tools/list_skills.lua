-- list_skills: published skills of the execution factory's skill market.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "list_skills",
    version = "1.0.0",
    kind = "read",
    title = text("技能列表", "Skill List"),
    description = text(
        "列出执行工厂中已发布的技能，可按名称（模糊）和分类过滤，按页返回。" ..
            "用 get_skill_content 读取某个技能的 SKILL.md 与文件清单。",
        "Lists the published skills of the execution factory, filtered by name " ..
            "(fuzzy) and category, page by page. Read a skill's SKILL.md and file list with " ..
            "get_skill_content."),
    group = "skill",
    order = 520,
    surfaces = { "mcp", "rest" },
    upstream = "operator_integration",
    input_schema = fields.input {
        properties = {
            name = {
                type = "string",
                maxLength = 256,
                description = text("技能名称（模糊匹配）", "Skill name (fuzzy match)"),
            },
            category = {
                type = "string",
                maxLength = 128,
                description = text("技能分类", "Skill category"),
            },
            page = fields.page(),
            page_size = fields.limit(20, 100, 1),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            entries = { type = "array", items = { type = "object" } },
            total_count = { type = "integer" },
            page = { type = "integer" },
            page_size = { type = "integer" },
            message = { type = "string" },
        },
    },
}

function M.shape_request(args)
    local q = { page = tostring(args.page or 1), page_size = tostring(args.page_size or 20) }
    if args.name ~= nil and args.name ~= "" then
        q.name = args.name
    end
    if args.category ~= nil and args.category ~= "" then
        q.category = args.category
    end
    return { upstream = "operator_integration", method = "GET", path = "/internal-v1/skills/market", query = q }
end

local EMPTY = text(
    "没有匹配的已发布技能。请在执行工厂中注册并发布技能，或放宽名称、分类过滤条件。",
    "No published skills matched. Register and publish a skill in Execution Factory, " ..
        "or broaden the name or category filter.")

function M.trim_response(body, _, ctx)
    local entries = type(body.data) == "table" and body.data or util.array()
    for _, e in ipairs(entries) do
        util.keep_only(e, { "skill_id", "name", "description", "version", "category" })
    end
    local out = cljson.object({}, { "entries", "total_count", "page", "page_size", "message" })
    out.entries = setmetatable(entries, cljson.array_mt)
    out.total_count = util.is_null(body.total) and #entries or body.total
    if not util.is_null(body.page) then
        out.page = body.page
    end
    if not util.is_null(body.page_size) then
        out.page_size = body.page_size
    end
    if #entries == 0 then
        out.message = EMPTY[ctx and ctx.lang] or EMPTY["zh-CN"]
    end
    return out
end

-- the failed step an upstream failure names (the default handle)
M.upstream_step = text("无法获取技能列表", "Unable to retrieve the skill list")


return M
