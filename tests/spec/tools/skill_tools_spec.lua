-- Specs of the skill tools (list_skills, get_skill_content, read_skill_file,
-- execute_skill).
local cljson = require "cljson"
local helper = require "helper"
local schema = require "schema"
local contract = require "contract"

local list = helper.load_tool("list_skills")
local content = helper.load_tool("get_skill_content")
local readf = helper.load_tool("read_skill_file")
local exec = helper.load_tool("execute_skill")

local function call(tool, args, responses, opts)
    opts = opts or {}
    opts.responses = responses
    return helper.call(tool, type(args) == "string" and helper.decode(args) or args, opts)
end

describe("list_skills", function()
    it("has defaults and bounds", function()
        local v = assert(schema.validate(list.input_schema, {}))
        assert.equal(1, v.page)
        assert.equal(20, v.page_size)
        local _, errs = schema.validate(list.input_schema, helper.decode('{"page":0,"page_size":101}'))
        table.sort(errs, function(a, b) return a.path < b.path end)
        assert.same({ "/page", "/page_size" }, helper.paths(errs))
        assert.equal("Skill List", contract.list_entry(list, "en-US").title)
        assert.equal(520, list.order)
    end)

    it("shapes the market request and trims entries", function()
        local res, err, ctx = call(list, '{"name":"合同","category":"legal","page":1,"page_size":2}',
            { { status = 200, fixture = "skill_market.json" } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("operator_integration", req.upstream)
        assert.equal("GET", req.method)
        assert.equal("/internal-v1/skills/market", req.path)
        assert.same({ name = "合同", category = "legal", page = "1", page_size = "2" }, req.query)
        assert.same({ "entries", "total_count", "page", "page_size" }, cljson.keys(res))
        assert.same({ "skill_id", "name", "description", "version", "category" }, cljson.keys(res.entries[1]))
        assert.equal(3, res.total_count)
        assert.is_nil(res.message)
    end)

    it("explains an empty list", function()
        local res = call(list, '{}', { { status = 200, fixture = "skill_market_empty.json" } }, { lang = "en-US" })
        assert.equal("[]", cljson.encode(res.entries))
        assert.truthy(res.message:find("No published skills matched", 1, true))
    end)

    it("keeps 4xx with the body and maps 5xx to 502", function()
        local _, err = call(list, '{}', { { status = 400, body = '{"error_code":"x","error_details":"bd"}' } })
        assert.equal(400, err.status)
        assert.equal("bd", err.details.error_details)
        _, err = call(list, '{}', { { status = 500, body = "x" } })
        assert.equal(502, err.status)
    end)
end)

describe("get_skill_content", function()
    it("reads the content, then downloads SKILL.md from the presigned URL", function()
        local res, err, ctx = call(content, '{"skill_id":"skill_contract_review"}', {
            { status = 200, fixture = "skill_content.json" },
            { status = 200, body = "# 合同审查\n" },
        })
        assert.is_nil(err)
        assert.equal("/internal-v1/skills/skill_contract_review/content", ctx.requests[1].path)
        local dl = ctx.requests[2]
        assert.equal("operator_integration", dl.upstream)
        assert.equal("/presigned/skills/skill_contract_review/SKILL.md", dl.path)
        assert.same({ expires = "1719000000", sig = "a+b=" }, dl.query)
        assert.equal("# 合同审查\n", res.content)
        assert.is_nil(res.truncated)
        assert.same({ "rel_path", "file_type", "size", "mime_type" }, cljson.keys(res.files[1]))
    end)

    it("cuts at 40000 characters (not bytes) and says so", function()
        local big = string.rep("文", 40001)
        local res = call(content, '{"skill_id":"s"}', {
            { status = 200, fixture = "skill_content.json" }, { status = 200, body = big } }, { lang = "en-US" })
        assert.equal(40000, utf8.len(res.content))
        assert.is_true(res.truncated)
        assert.truthy(res.message:find("read_skill_file", 1, true))
    end)

    it("no URL -> 404; over 5 MiB -> 413; download failure -> 502", function()
        local _, err = call(content, '{"skill_id":"s"}', { { status = 200, body = '{"skill_id":"s","url":""}' } })
        assert.equal(404, err.status)
        _, err = call(content, '{"skill_id":"s"}', {
            { status = 200, fixture = "skill_content.json" }, { status = 200, body = string.rep("a",
                5 * 1024 * 1024 + 1) } })
        assert.equal(413, err.status)
        _, err = call(content, '{"skill_id":"s"}', {
            { status = 200, fixture = "skill_content.json" }, { status = 403, body = "AccessDenied" } })
        assert.equal(502, err.status)
        _, err = call(content, '{"skill_id":"s"}', { { status = 200, body = '{"url":"http://evil.example/x"}' } })
        assert.equal(502, err.status)
    end)

    it("escapes the skill id and keeps a 404 from the factory", function()
        local _, err, ctx = call(content, '{"skill_id":"../x"}', { { status = 404, body = '{"error_code":"nf"}' } })
        assert.equal("/internal-v1/skills/..%2Fx/content", ctx.requests[1].path)
        assert.equal(404, err.status)
    end)
end)

describe("read_skill_file", function()
    it("refuses path traversal locally with 400 before any downstream call", function()
        for _, p in ipairs({ "../etc/passwd", "refs/../../x", "/etc/passwd", "\\windows", "C:/x",
            "%2e%2e/secret", "refs/%2E%2E/%2e%2e/x", "a\0b", "..", "refs\\..\\x", "~/x" }) do
            local args = cljson.object()
            args.skill_id = "s"
            args.rel_path = p
            local res, err, ctx = helper.call(readf, args, { lang = "en-US" })
            assert.is_nil(res, p)
            assert.equal(400, err.status, p)
            assert.equal(0, #ctx.requests, p)
            assert.truthy(err.description:find("inside the skill package", 1, true), p)
        end
    end)

    it("allows ordinary relative paths, dots inside names included", function()
        local res, err, ctx = call(readf, '{"skill_id":"skill_contract_review","rel_path":"refs/checklist.md"}', {
            { status = 200, fixture = "skill_file.json" }, { status = 200, body = "# 审查清单\n" } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("POST", req.method)
        assert.equal("/internal-v1/skills/skill_contract_review/files/read", req.path)
        assert.equal('{"rel_path":"refs/checklist.md"}', cljson.encode(req.json))
        assert.equal("# 审查清单\n", res.content)
        assert.equal("text/markdown", res.mime_type)
        local ok = call(readf, '{"skill_id":"s","rel_path":"a..b/.hidden/x.tar.gz"}', {
            { status = 200, fixture = "skill_file.json" }, { status = 200, body = "x" } })
        assert.truthy(ok)
    end)

    it("gives no content for binary files", function()
        local res = call(readf, '{"skill_id":"s","rel_path":"logo.png"}', {
            { status = 200, fixture = "skill_file_image.json" }, { status = 200, body = "\137PNG" } },
                { lang = "en-US" })
        assert.is_nil(res.content)
        assert.truthy(res.message:find("not textual", 1, true))
        local res2 = call(readf, '{"skill_id":"s","rel_path":"x.bin"}', {
            { status = 200, fixture = "skill_file.json" }, { status = 200, body = "a\0b" } })
        assert.is_nil(res2.content)
    end)

    it("keeps the factory's own 400", function()
        local _, err = call(readf, '{"skill_id":"s","rel_path":"x"}', { { status = 400,
            body = '{"error_code":"bad"}' } })
        assert.equal(400, err.status)
        assert.equal("bad", err.details.error_code)
    end)
end)

describe("execute_skill", function()
    it("is gated by EXECUTE_SKILL_ENABLED and is an execute tool", function()
        assert.equal("EXECUTE_SKILL_ENABLED", exec.gate)
        assert.equal("execute", exec.kind)
        assert.equal(550, exec.order)
    end)

    it("sends entry_shell and timeout; a non-zero exit code is a normal answer", function()
        local res, err, ctx = call(exec,
            '{"skill_id":"skill_contract_review","entry_shell":"python main.py","timeout":5}',
            { { status = 200, fixture = "skill_execute.json" } })
        assert.is_nil(err)
        local req = ctx.requests[1]
        assert.equal("/internal-v1/skills/skill_contract_review/execute", req.path)
        assert.equal('{"entry_shell":"python main.py","timeout":5}', cljson.encode(req.json))
        assert.equal(35000, req.timeout_ms)
        assert.equal(2, res.exit_code)
        assert.equal("error: --input is required\n", res.stderr)
        assert.is_nil(res.session_id)
        assert.is_nil(res.uploaded_path)
    end)

    it("cuts stdout at 8000 characters", function()
        local body = '{"skill_id":"s","exit_code":0,"stdout":"' .. string.rep("好", 8001) .. '","stderr":""}'
        local res = call(exec, '{"skill_id":"s","entry_shell":"x"}', { { status = 200, body = body } })
        assert.equal(8000, utf8.len(res.stdout))
        assert.is_true(res.truncated)
        assert.is_nil(res.stderr)
    end)

    it("keeps a 403 body untouched as details", function()
        local _, err = call(exec, '{"skill_id":"s","entry_shell":"x"}', { { status = 403,
            fixture = "skill_error_403.json" } })
        assert.equal(403, err.status)
        assert.equal("skill:skill_contract_review", err.details.detail)
        local _, errs = schema.validate(exec.input_schema,
            helper.decode('{"skill_id":"s","entry_shell":"x","timeout":601}'))
        assert.same({ "/timeout" }, helper.paths(errs))
    end)
end)
