-- get_skill_content: a skill's SKILL.md and file list: the factory returns a
-- presigned URL, which is then downloaded.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local skill = require "_lib.skill"

local text = util.text

local M = {
    name = "get_skill_content",
    version = "1.0.0",
    kind = "read",
    title = text("技能内容", "Skill Content"),
    description = text(
        "读取一个技能的 SKILL.md 正文与技能包文件清单（files[].rel_path）。" ..
            "正文超过 40000 字符时截断（truncated=true），此时用 read_skill_file 按 rel_path 读取单个文件。",
        "Reads a skill's SKILL.md and the file list of its package (files[].rel_path). " ..
            "Content over 40000 characters is cut (truncated=true); then read single files by " ..
            "rel_path with read_skill_file."),
    group = "skill",
    order = 530,
    surfaces = { "mcp", "rest" },
    upstream = "operator_integration",
    input_schema = fields.input {
        required = { "skill_id" },
        properties = {
            skill_id = fields.skill_id(text("技能 ID（取自 list_skills）", "Skill id (from list_skills)")),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            skill_id = { type = "string" },
            status = { type = "string" },
            content = { type = "string" },
            truncated = { type = "boolean" },
            files = { type = "array", items = { type = "object" } },
            message = { type = "string" },
        },
    },
}

function M.shape_request(args, ctx)
    return skill.request(args, ctx, "GET", "/content")
end

local TRUNCATED = text(
    "SKILL.md 过大已截断。请用 read_skill_file 读取单个文件。",
    "SKILL.md was truncated because it is too large. Use read_skill_file to read " ..
        "individual files.")

-- result_of(meta, content, args, lang): meta is the factory's answer, content the
-- downloaded SKILL.md.
local function result_of(meta, content, args, lang)
    local out = cljson.object({}, { "skill_id", "status", "content", "truncated", "files", "message" })
    out.skill_id = util.is_null(meta.skill_id) and args.skill_id or meta.skill_id
    if not util.is_null(meta.status) then
        out.status = meta.status
    end
    local files = type(meta.files) == "table" and meta.files or util.array()
    for _, f in ipairs(files) do
        util.keep_only(f, { "rel_path", "file_type", "size", "mime_type" })
    end
    out.files = setmetatable(files, cljson.array_mt)
    return skill.put_content(out, content, TRUNCATED[lang] or TRUNCATED["zh-CN"])
end

local SUMMARY = text("无法获取技能内容", "Unable to retrieve the skill content")

function M.handle(args, ctx)
    return skill.read(ctx, args, M, SUMMARY, result_of)
end

return M
