-- read_skill_file: one file of a skill package by its relative path
-- (execution factory). Paths that leave the package are refused here with a 400
-- before any downstream call (hostile input), whatever the factory would do.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local skill = require "_lib.skill"
local errors = require "_lib.errors"

local text = util.text

local M = {
    name = "read_skill_file",
    version = "1.0.0",
    kind = "read",
    title = text("读技能文件", "Read Skill File"),
    description = text(
        "按相对路径读取技能包中的一个文件（rel_path 取自 get_skill_content 的 files）。" ..
            "路径必须位于技能包内：绝对路径与 .. 一律拒绝。文本文件返回 content（超过 40000 字符截断）；" ..
            "二进制文件不返回 content。",
        "Reads one file of a skill package by its relative path (rel_path from the " ..
            "files of get_skill_content). The path must stay inside the package: absolute paths " ..
            "and .. are refused. Text files come with content (cut at 40000 characters); binary " ..
            "files come without it."),
    group = "skill",
    order = 540,
    surfaces = { "mcp", "rest" },
    upstream = "operator_integration",
    input_schema = fields.input {
        required = { "skill_id", "rel_path" },
        properties = {
            skill_id = fields.skill_id(),
            rel_path = fields.string(text(
                "技能包内的相对路径，如 refs/checklist.md",
                "Path relative to the package root, e.g. refs/checklist.md"), 1024),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            skill_id = { type = "string" },
            rel_path = { type = "string" },
            mime_type = { type = "string" },
            file_type = { type = "string" },
            content = { type = "string" },
            truncated = { type = "boolean" },
            message = { type = "string" },
        },
    },
}

local TRAVERSAL = text(
    { "rel_path 无效：路径必须位于技能包内（不能是绝对路径，也不能包含 ..）",
                  "请使用 get_skill_content 返回的 files[].rel_path" },
    { "Invalid rel_path: the path must stay inside the skill package (no absolute " ..
                      "path, no ..)",
                  "Use a files[].rel_path returned by get_skill_content" })

-- rel_path_ok(p) -> boolean: relative, no "..", no control characters; checked
-- after percent-decoding so that %2e%2e cannot slip through.
local function rel_path_ok(p)
    local decoded = p:gsub("%%(%x%x)", function(h)
        return string.char(tonumber(h, 16))
    end)
    for _, s in ipairs({ p, decoded }) do
        if s:find("[%z\1-\31\127]") or s:match("^[/\\]") or s:match("^%a:") or s:find("~", 1, true) == 1 then
            return false
        end
        for seg in s:gmatch("[^/\\]+") do
            if seg == ".." then
                return false
            end
        end
    end
    return true
end

-- shape_request(args, ctx) -> request | nil, a 400 for a path that leaves the package
function M.shape_request(args, ctx)
    local body = cljson.object()
    body.rel_path = args.rel_path
    local req, err = skill.request(args, ctx, "POST", "/files/read", body)
    if req ~= nil and not rel_path_ok(args.rel_path) then
        return nil, errors.refuse(400, ctx.lang, { rel_path = args.rel_path }, TRAVERSAL)
    end
    return req, err
end

local BINARY = text("该技能文件不是文本文件，未返回内容。", "The skill file is not textual; its content is not returned.")
local TRUNCATED = text("技能文件过大已截断。", "The skill file was truncated because it is too large.")

local function result_of(meta, content, args, lang)
    local l = lang == "en-US" and "en-US" or "zh-CN"
    local out = cljson.object({}, { "skill_id", "rel_path", "mime_type", "file_type", "content",
        "truncated", "message" })
    out.skill_id = util.is_null(meta.skill_id) and args.skill_id or meta.skill_id
    out.rel_path = util.is_null(meta.rel_path) and args.rel_path or meta.rel_path
    if not util.is_null(meta.mime_type) then
        out.mime_type = meta.mime_type
    end
    if not util.is_null(meta.file_type) then
        out.file_type = meta.file_type
    end
    if not skill.is_text(content, meta.mime_type) then
        out.message = BINARY[l]
        return out
    end
    return skill.put_content(out, content, TRUNCATED[l])
end

local SUMMARY = text("无法读取技能文件", "Unable to read the skill file")

function M.handle(args, ctx)
    return skill.read(ctx, args, M, SUMMARY, result_of)
end

return M
