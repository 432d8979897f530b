-- PTC: lua/ptc.lua (work directory, stub, digest, toolkit) and the run_code /
-- run_shell tools (request to the execution factory, result mapping).
local helper = require "helper"
local cljson = require "cljson"
local ptc = require "ptc"

local function entry(name, order, group, props, required, extra)
    local e = {
        name = name, title = name .. " title", description = name .. " description",
        group = group, order = order, surfaces = { "mcp" }, kind = "read",
        input_schema = { type = "object", properties = props or {}, required = required },
    }
    for k, v in pairs(extra or {}) do
        e[k] = v
    end
    return e
end

local CATALOG = {
    entry("query_object_instance", 210, "query", {
        kn_id = { type = "string", description = "Network" },
        ot_id = { type = "string" },
        limit = { type = "integer", default = 10 },
        condition = { description = "A condition" },
    }, { "kn_id", "ot_id" }),
    entry("list_knowledge_networks", 110, "discovery", { name_pattern = { type = "string" } }),
    entry("odd", 900, "capability", {
        ["from"] = { type = "string", description = 'has """quotes""" and a \\ backslash' },
        ["with-dash"] = { type = { "string", "null" }, default = "it's" },
    }, nil, { description = 'ends with a quote "' }),
    entry("rest_only", 400, "query", {}, nil, { surfaces = { "rest" } }),
    entry("run_code", 710, "execution", {}, nil, { surfaces = { "ptc" } }),
}

local function ctx_for(opts)
    local ctx = helper.ctx(opts)
    ctx.list_tools = function()
        return CATALOG
    end
    ctx.config = { gates = {}, ptc = { sandbox_mcp_url = "http://cl.internal:9/api/agent-retrieval/v1/mcp/" } }
    ctx.bkn_context = opts and opts.bkn_context
    ctx.operation_id = opts and opts.operation_id
    return ctx
end

local function run(tool, args, opts)
    local ctx = ctx_for(opts)
    local schema = require "schema"
    local v = assert(schema.validate(tool.input_schema, args))
    local co = coroutine.create(tool.handle)
    local ok, res, err = coroutine.resume(co, v, ctx)
    assert(ok, res)
    return res, err, ctx
end

local function python_ok(src)
    local check = io.popen("command -v python3")
    local has = check and check:read("a") or ""
    if check then
        check:close()
    end
    if has == "" then
        return true -- no interpreter here: the integration tests run the stub for real
    end
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(src)
    f:close()
    local p = io.popen("python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' " .. path .. " 2>&1")
    local out = p:read("a")
    local ok = p:close()
    os.remove(path)
    return ok, out
end

describe("ptc.work_dir", function()
    it("derives one directory name per conversation", function()
        assert.equal("conv-c_1-ab", ptc.work_dir("c_1-ab"))
        assert.equal("conv-a-b-c", ptc.work_dir(" a/b.c "))
        assert.equal("conv----x", ptc.work_dir("会话/x"))
        assert.equal("shared", ptc.work_dir(nil))
        assert.equal("shared", ptc.work_dir("   "))
        assert.equal(5 + 64, #ptc.work_dir(string.rep("x", 100)))
        assert.equal("conv-" .. string.rep("-", 64), ptc.work_dir(string.rep("数", 70)))
    end)
end)

describe("ptc.digest and ptc.stub", function()
    local entries = ptc.from_list_tools(CATALOG, "en-US")

    it("keeps only the tools listed on /mcp", function()
        local names = {}
        for _, e in ipairs(entries) do
            names[#names + 1] = e.name
        end
        assert.same({ "query_object_instance", "list_knowledge_networks", "odd" }, names)
    end)

    it("lists signatures grouped by the smallest order, required parameters first", function()
        local d = ptc.digest(entries, "en-US")
        local head = "### Networks & Schema\n```python\nlist_knowledge_networks(name_pattern: str = None) -> dict"
        assert.truthy(d:find(head, 1, true))
        assert.truthy(d:find("query_object_instance(kn_id: str, ot_id: str, condition: object = None, " ..
            "limit: int = 10) -> dict\n    # query_object_instance title", 1, true))
        assert.truthy(d:find("odd(from_: str = None, with_dash_: str = 'it\\'s')", 1, true))
        assert.truthy(d:find("Networks & Schema", 1, true) < d:find("Instance Queries", 1, true))
        assert.falsy(d:find("rest_only", 1, true))
        assert.falsy(d:find("run_code(", 1, true))
        assert.falsy(d:find("bkn_context: dict", 1, true))
    end)

    it("renders a valid Python module whose functions map parameters to argument names", function()
        local s = ptc.stub(entries, "zh-CN")
        assert.truthy(s:find("return _call('odd', {'from': from_, 'with-dash': with_dash_})", 1, true))
        assert.truthy(s:find("__all__ = ['list_knowledge_networks', 'query_object_instance', 'odd', 'ToolError']", 1,
            true))
        assert.falsy(s:find("def rest_only", 1, true))
        local ok, out = python_ok(ptc.wrap_code(s, "print(1)\n\nx = 2"))
        assert.is_true(ok, out)
    end)

    it("is the same from tools/list entries (the toolkit) as from ctx.list_tools (run_code)", function()
        local list = {}
        for _, t in ipairs(CATALOG) do
            if t.surfaces[1] == "mcp" then
                local schema = {}
                for k, v in pairs(t.input_schema) do
                    schema[k] = v
                end
                local props = { bkn_context = { type = "object" }, response_format = { type = "string" } }
                for k, v in pairs(t.input_schema.properties) do
                    props[k] = v
                end
                schema.properties = props
                local req = { "bkn_context" }
                for _, r in ipairs(t.input_schema.required or {}) do
                    req[#req + 1] = r
                end
                schema.required = req
                list[#list + 1] = {
                    name = t.name, title = t.title, description = t.description, inputSchema = schema,
                    _meta = { ["openbkn.ai/group"] = t.group, ["openbkn.ai/order"] = t.order },
                }
            end
        end
        local ptc_tools = { {
            name = "run_code", description = "short",
            inputSchema = { type = "object", required = { "code", "bkn_context" },
                properties = { code = { type = "string" }, bkn_context = { type = "object" } } },
        } }
        local digest, stub, tools = ptc.toolkit(list, ptc_tools, "en-US", cljson)
        assert.equal(ptc.stub(entries, "en-US"), stub)
        assert.equal(ptc.digest(entries, "en-US"), digest)
        assert.equal(digest, tools[1].description)
        assert.equal("python", tools[1].language)
        assert.is_nil(tools[1].input_schema.properties.bkn_context)
        assert.same({ "code" }, tools[1].input_schema.required)
        assert.truthy(cljson.encode(tools):find('"name":"run_code","description":', 1, true))
    end)
end)

describe("run_code", function()
    local tool = helper.load_tool("run_code")
    local BKN = { conversation_id = "conv_1", interaction_id = "int_1" }

    it("posts the wrapped script to the factory with the caller's token and the turn's context", function()
        local res, err, ctx = run(tool, { code = "print(1)\n\n" }, {
            bkn_context = BKN, operation_id = "op_9", lang = "en-US",
            responses = { { status = 200, body = '{"stdout":"1\\n","stderr":"","exit_code":0}' } },
        })
        assert.is_nil(err)
        assert.same({ stdout = "1\n", stderr = "", exit_code = 0 }, res)
        local req = ctx.requests[1]
        assert.equal("operator_integration", req.upstream)
        assert.equal("POST", req.method)
        assert.equal("/v1/function/execute", req.path)
        assert.is_true(req.caller_token)
        assert.equal("python", req.json.language)
        assert.equal(60, req.json.timeout)
        assert.equal("conv-conv_1", req.json.work_dir)
        assert.equal("conv_1", req.json.event.bkn.conversation_id)
        assert.equal("op_9", req.json.event.bkn.parent_operation_id)
        assert.equal("http://cl.internal:9/api/agent-retrieval/v1/mcp/", req.json.event.mcp)
        assert.equal("en-US", req.json.event.locale)
        assert.is_nil(req.json.event.token)
        local tail = "\n\ndef handler(event):\n    _configure(event)\n    print(1)\n"
        assert.equal(tail, req.json.code:sub(-#tail))
        assert.truthy(req.json.code:find("def query_object_instance(", 1, true))
    end)

    it("a non-zero exit is an error that keeps stdout, stderr and exit_code", function()
        local res, err = run(tool, { code = "raise X" }, {
            bkn_context = BKN,
            responses = { { status = 200, body = '{"stdout":"a","stderr":"Traceback","exit_code":1}' } },
        })
        assert.is_nil(res)
        assert.equal("nonzero_exit", err.code)
        assert.equal(1, err.exit_code)
        assert.equal("a", err.stdout)
        assert.equal("Traceback", err.stderr)
    end)

    it("refuses blank code and maps factory refusals", function()
        local _, err, ctx = run(tool, { code = "  \n\n" }, { bkn_context = BKN })
        assert.equal(400, err.status)
        assert.equal(0, #ctx.requests)
        local _, e403 = run(tool, { code = "x" }, {
            bkn_context = BKN, responses = { { status = 403, body = '{"error_code":"Public.Forbidden"}' } },
        })
        assert.equal(403, e403.status)
        local _, e502 = run(tool, { code = "x" },
            { bkn_context = BKN, responses = { { err = { code = "upstream_timeout" } } } })
        assert.equal(502, e502.status)
        local _, e401 = run(tool, { code = "x" },
            { bkn_context = BKN, responses = { { err = { code = "caller_token_missing" } } } })
        assert.equal(401, e401.status)
    end)
end)

describe("run_shell", function()
    local tool = helper.load_tool("run_shell")

    it("runs in the same work directory as run_code for the conversation", function()
        local res, _, ctx = run(tool, { command = "  ls  ", timeout = 5 }, {
            bkn_context = { conversation_id = "conv_1", interaction_id = "int_1" },
            responses = { { status = 200, body = '{"stdout":"x\\n","stderr":"","exit_code":0}' } },
        })
        assert.equal("x\n", res.stdout)
        local req = ctx.requests[1]
        assert.equal("shell", req.json.language)
        assert.equal("ls", req.json.code)
        assert.equal(5, req.json.timeout)
        assert.equal("conv-conv_1", req.json.work_dir)
        assert.is_true(req.caller_token)
    end)
end)
