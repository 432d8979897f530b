-- ptc: programmatic tool calling (docs/ptc.md). Renders, from the tools a
-- generation actually serves, the sandbox's Python module (stub), the signature list
-- (digest, which is run_code's description on /mcp/ptc) and the toolkit's tools; and
-- the small rules run_code / run_shell share (work directory, script wrapping).
--
-- Entries come from two places that must render the same stub: the tools/list
-- entries the C core precomputed (GET /mcp/ptc/toolkit, src/surface/ptc.c) and ctx.list_tools()
-- inside a call (run_code). normalize_* bring both to one shape.
local catalog = require "catalog"
local stub_runtime = require "ptc_stub"

local M = {}

local function lang_of(lang)
    return lang == "en-US" and "en-US" or "zh-CN"
end

-- ---------------------------------------------------------------- work directory

-- The directory name both tools share for one conversation: every code point outside
-- [A-Za-z0-9_-] becomes '-', at most 64 code points; "shared" without a conversation.
function M.work_dir(conversation_id)
    if type(conversation_id) ~= "string" then
        return "shared"
    end
    local id = conversation_id:match("^%s*(.-)%s*$")
    if id == "" then
        return "shared"
    end
    local out, n = {}, 0
    local function add(ch)
        if n < 64 then
            n = n + 1
            out[n] = ch:match("^[A-Za-z0-9_%-]$") and ch or "-"
        end
    end
    if utf8.len(id) then
        for _, cp in utf8.codes(id) do
            add(utf8.char(cp))
        end
    else
        for i = 1, #id do -- not UTF-8: byte by byte
            add(id:sub(i, i))
        end
    end
    return "conv-" .. table.concat(out)
end

-- ---------------------------------------------------------------- entries

local OWNED = { bkn_context = true, response_format = true }

-- A copy of an input schema without the arguments the core owns (bkn_context,
-- response_format): a self-built client manages the session, the stub asks for JSON.
function M.strip_owned(schema, mark_object, mark_array)
    local out = {}
    local keys = {}
    for k in pairs(schema or {}) do
        keys[#keys + 1] = k
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
        local v = schema[k]
        if k == "properties" and type(v) == "table" then
            local props, pkeys = {}, {}
            for name in pairs(v) do
                if not OWNED[name] then
                    pkeys[#pkeys + 1] = name
                end
            end
            table.sort(pkeys)
            for _, name in ipairs(pkeys) do
                props[name] = v[name]
            end
            v = mark_object and mark_object(props, pkeys) or props
        elseif k == "required" and type(v) == "table" then
            local req = {}
            for _, name in ipairs(v) do
                if not OWNED[name] then
                    req[#req + 1] = name
                end
            end
            v = mark_array and mark_array(req) or req
        end
        out[k] = v
    end
    return mark_object and mark_object(out, keys) or out
end

-- From a tools/list entry (decoded JSON).
function M.normalize_list_entry(e, lang)
    local meta = type(e._meta) == "table" and e._meta or {}
    local group = meta["openbkn.ai/group"]
    return {
        name = e.name, title = e.title or e.name, description = e.description or "",
        group = group, order = math.tointeger(meta["openbkn.ai/order"]),
        group_title = meta["openbkn.ai/group_title"] or catalog.group_title(group, lang),
        input_schema = M.strip_owned(e.inputSchema), output_schema = e.outputSchema,
    }
end

-- From ctx.list_tools(): only the tools an agent may call on /mcp (the stub calls
-- back there), never the REST-only, proxy or PTC tools themselves.
function M.from_list_tools(list, lang)
    local out = {}
    for _, t in ipairs(list or {}) do
        local on_mcp = false
        for _, s in ipairs(t.surfaces or {}) do
            on_mcp = on_mcp or s == "mcp"
        end
        if on_mcp then
            out[#out + 1] = {
                name = t.name, title = t.title or t.name, description = t.description or "",
                group = t.group, order = math.tointeger(t.order),
                group_title = catalog.group_title(t.group, lang),
                input_schema = M.strip_owned(t.input_schema), output_schema = t.output_schema,
            }
        end
    end
    return out
end

-- Groups ranked by their smallest order, tools by order then name (deterministic).
local function grouped(entries)
    local groups, by = {}, {}
    for _, e in ipairs(entries) do
        local g = e.group or "other"
        if not by[g] then
            by[g] = { id = g, title = e.group_title or g, tools = {}, min = math.huge }
            groups[#groups + 1] = by[g]
        end
        local grp = by[g]
        grp.tools[#grp.tools + 1] = e
        grp.min = math.min(grp.min, e.order or math.huge)
    end
    local function by_order(a, b)
        local x, y = a.order or math.huge, b.order or math.huge
        if x ~= y then
            return x < y
        end
        return a.name < b.name
    end
    for _, g in ipairs(groups) do
        table.sort(g.tools, by_order)
    end
    table.sort(groups, function(a, b)
        if a.min ~= b.min then
            return a.min < b.min
        end
        return a.id < b.id
    end)
    return groups
end

-- ---------------------------------------------------------------- Python rendering

local PY_TYPES = {
    string = "str", array = "list", object = "dict", boolean = "bool", integer = "int",
    number = "float",
}

local PY_KEYWORDS = {}
for w in ([[False None True and as assert async await break class continue def del elif else
    except finally for from global if import in is lambda nonlocal not or pass raise return try
    while with yield]]):gmatch("%S+") do
    PY_KEYWORDS[w] = true
end

local function py_type(s)
    local t = type(s) == "table" and s.type or nil
    if type(t) == "table" then -- ["string", "null"]: the first non-null type
        local first
        for _, x in ipairs(t) do
            if x ~= "null" and not first then
                first = x
            end
        end
        t = first
    end
    return PY_TYPES[t] or "object"
end

local function py_str(s)
    local esc = s:gsub("[\\'%c]", function(c)
        if c == "\\" then
            return "\\\\"
        elseif c == "'" then
            return "\\'"
        elseif c == "\n" then
            return "\\n"
        elseif c == "\t" then
            return "\\t"
        end
        return string.format("\\x%02x", c:byte())
    end)
    return "'" .. esc .. "'"
end

-- A Python literal for a scalar default; anything else -> None (the server applies
-- the schema default when the argument is left out).
local function py_default(v)
    if v == true then
        return "True"
    elseif v == false then
        return "False"
    elseif math.type(v) == "integer" then
        return tostring(v)
    elseif math.type(v) == "float" then
        return string.format("%.17g", v)
    elseif type(v) == "string" then
        return py_str(v)
    end
    return "None"
end

-- Python parameter name for a property (keywords and non-identifiers get a '_').
local function py_name(name)
    if PY_KEYWORDS[name] or not name:match("^[A-Za-z_][A-Za-z0-9_]*$") then
        local s = name:gsub("[^A-Za-z0-9_]", "_")
        if s:match("^%d") then
            s = "_" .. s
        end
        return s .. "_"
    end
    return name
end

-- Parameters: sorted by name, the required ones first.
local function params_of(e)
    local s = e.input_schema or {}
    local props = type(s.properties) == "table" and s.properties or {}
    local req = {}
    for _, r in ipairs(type(s.required) == "table" and s.required or {}) do
        req[r] = true
    end
    local names = {}
    for name in pairs(props) do
        names[#names + 1] = name
    end
    table.sort(names, function(a, b)
        if (req[a] or false) ~= (req[b] or false) then
            return req[a] == true
        end
        return a < b
    end)
    local out = {}
    for i, name in ipairs(names) do
        local p = props[name]
        out[i] = {
            key = name, py = py_name(name), type = py_type(p), required = req[name] == true,
            default = type(p) == "table" and p.default or nil,
            description = type(p) == "table" and type(p.description) == "string" and p.description or nil,
        }
    end
    return out
end

local function signature(e, params)
    local parts = {}
    for i, p in ipairs(params) do
        if p.required then
            parts[i] = p.py .. ": " .. p.type
        else
            parts[i] = p.py .. ": " .. p.type .. " = " .. py_default(p.default)
        end
    end
    return e.name .. "(" .. table.concat(parts, ", ") .. ")"
end

-- "{a, b[x y], c}" from an output schema; "dict" without one.
local function return_keys(e)
    local s = e.output_schema
    if type(s) ~= "table" or type(s.properties) ~= "table" then
        return "dict"
    end
    local keys = {}
    for k in pairs(s.properties) do
        keys[#keys + 1] = k
    end
    table.sort(keys)
    if #keys == 0 then
        return "dict"
    end
    for i, k in ipairs(keys) do
        local p = s.properties[k]
        local items = type(p) == "table" and p.items
        if type(items) == "table" and type(items.properties) == "table" then
            local sub = {}
            for ik in pairs(items.properties) do
                sub[#sub + 1] = ik
            end
            table.sort(sub)
            if #sub > 0 then
                keys[i] = k .. "[" .. table.concat(sub, " ") .. "]"
            end
        end
    end
    return "{" .. table.concat(keys, ", ") .. "}"
end

local function one_line(s)
    return (tostring(s or ""):gsub("%s+", " "):match("^%s*(.-)%s*$"))
end

local DIGEST_HEAD = {
    ["zh-CN"] = "在沙箱里写一段 Python 脚本完成任务：下列函数已导入，直接调用；每个返回 dict，" ..
        "失败时抛出 ToolError。中间结果留在沙箱，只有 print 的内容回到你的上下文——只打印需要的部分。" ..
        "不要传 bkn_context，本轮上下文由运行环境自动带上。",
    ["en-US"] = "Write one Python script for the task: the functions below are already imported; call " ..
        "them directly. Each returns a dict and raises ToolError on failure. Intermediate results stay " ..
        "in the sandbox; only what you print returns to your context, so print only what you need. " ..
        "Do not pass bkn_context: the turn's context is added for you.",
}

local DIGEST_TAIL = {
    ["zh-CN"] = "run_code 与 run_shell 共用同一个工作目录（按 conversation_id 划分）：脚本写下的文件，" ..
        "run_shell 可以直接 ls / wc / head / grep。",
    ["en-US"] = "run_code and run_shell share one working directory per conversation_id: files a script " ..
        "writes can be inspected with run_shell (ls, wc, head, grep).",
}

-- digest(entries, lang) -> the signature list (markdown)
function M.digest(entries, lang)
    lang = lang_of(lang)
    local out = { DIGEST_HEAD[lang], "" }
    for _, g in ipairs(grouped(entries)) do
        out[#out + 1] = "### " .. g.title
        out[#out + 1] = "```python"
        for _, e in ipairs(g.tools) do
            out[#out + 1] = signature(e, params_of(e)) .. " -> " .. return_keys(e)
            out[#out + 1] = "    # " .. one_line(e.title)
        end
        out[#out + 1] = "```"
        out[#out + 1] = ""
    end
    out[#out + 1] = DIGEST_TAIL[lang]
    return table.concat(out, "\n")
end

local function docstring(text)
    local s = tostring(text):gsub("\\", "\\\\"):gsub('"""', '\\"\\"\\"')
    if s:sub(-1) == '"' then
        s = s .. " " -- a closing quote would merge with the delimiter
    end
    return '"""' .. s .. '"""'
end

local ARGS = { ["zh-CN"] = "参数：", ["en-US"] = "Args:" }

-- stub(entries, lang) -> the sandbox Python module
function M.stub(entries, lang)
    lang = lang_of(lang)
    local out = { stub_runtime }
    local names = {}
    for _, g in ipairs(grouped(entries)) do
        for _, e in ipairs(g.tools) do
            local params = params_of(e)
            names[#names + 1] = e.name
            local doc = { one_line(e.title) .. "\n\n" .. tostring(e.description) }
            if #params > 0 then
                doc[#doc + 1] = "\n\n" .. ARGS[lang]
                for _, p in ipairs(params) do
                    doc[#doc + 1] = "\n    " .. p.py .. ": " .. one_line(p.description or p.type)
                end
            end
            local body = {}
            for i, p in ipairs(params) do
                body[i] = py_str(p.key) .. ": " .. p.py
            end
            out[#out + 1] = "\ndef " .. signature(e, params) .. " -> dict:\n    " ..
                docstring(table.concat(doc)):gsub("\n", "\n    ") .. "\n    return _call(" ..
                py_str(e.name) .. ", {" .. table.concat(body, ", ") .. "})\n"
        end
    end
    local all = {}
    for i, n in ipairs(names) do
        all[i] = py_str(n)
    end
    all[#all + 1] = "'ToolError'"
    out[#out + 1] = "\n__all__ = [" .. table.concat(all, ", ") .. "]\n"
    return table.concat(out)
end

-- ---------------------------------------------------------------- scripts

-- The code a run_code call submits: the stub, then the model's code as the body of
-- handler(event), which the factory calls with the event.
function M.wrap_code(stub, code)
    local out = { stub, "\n\ndef handler(event):\n    _configure(event)\n" }
    for line in (code .. "\n"):gmatch("(.-)\r?\n") do
        if line:match("^%s*$") then
            out[#out + 1] = "\n"
        else
            out[#out + 1] = "    " .. line .. "\n"
        end
    end
    return table.concat(out)
end

-- ---------------------------------------------------------------- the toolkit

-- How a self-built client runs each PTC tool (the factory's language, and how the
-- code is wrapped: "handler" = stub + handler(event); "cd_workdir" = run in the
-- conversation's work directory).
M.RUNNERS = {
    run_code = { language = "python", wrap = "handler" },
    run_shell = { language = "shell", wrap = "cd_workdir" },
}

-- toolkit(catalog, ptc_tools, lang, cljson) -> digest, stub, tools
-- catalog: tools/list entries of the usable business tools (listed on /mcp, gates
-- applied, REST-only never among them); ptc_tools: the tools/list entries of the
-- /mcp/ptc tools other than the lifecycle ones. tools: what a self-built client
-- exposes to its model, schemas without bkn_context; a python tool's description is
-- the digest.
function M.toolkit(list, ptc_tools, lang, cljson)
    lang = lang_of(lang)
    local entries = {}
    for i, e in ipairs(list or {}) do
        entries[i] = M.normalize_list_entry(e, lang)
    end
    local digest = M.digest(entries, lang)
    local stub = M.stub(entries, lang)
    local tools = {}
    local obj = cljson and cljson.object or nil
    local arr = cljson and cljson.array or nil
    for _, t in ipairs(ptc_tools or {}) do
        local run = M.RUNNERS[t.name] or {}
        local entry = {
            name = t.name,
            description = run.language == "python" and digest or t.description,
            input_schema = M.strip_owned(t.inputSchema, obj, arr),
            language = run.language,
            wrap = run.wrap,
        }
        if obj then
            entry = obj(entry, { "name", "description", "input_schema", "language", "wrap" })
        end
        tools[#tools + 1] = entry
    end
    if arr then
        tools = arr(tools)
    end
    return digest, stub, tools
end

-- ---------------------------------------------------------------- execution

local MAX_TIMEOUT = 600

-- timeout argument -> seconds (absent or <= 0 -> 60, at most 600).
function M.timeout_of(t)
    t = math.tointeger(t)
    if t == nil or t <= 0 then
        return 60
    end
    return math.min(t, MAX_TIMEOUT)
end

local EXEC_FAILED = {
    ["zh-CN"] = "沙箱执行失败", ["en-US"] = "The sandbox could not run the code",
}

local function gateway(status, code, lang, details, summary)
    local d, s = catalog.error_text(status, lang)
    return {
        status = status, code = code or ("Public." .. catalog.status_name(status)),
        description = summary and (summary[lang_of(lang)] .. " (" .. d .. ")") or d,
        solution = s, details = details,
    }
end

-- A blank code / command: 400 with a text naming the argument.
function M.blank_error(arg, lang)
    local e = gateway(400, nil, lang, { argument = arg })
    e.description = lang_of(lang) == "en-US" and (arg .. " is required and must not be blank")
        or (arg .. " 参数必填，且不能为空")
    return e
end

-- execute(ctx, {code, language, timeout}) -> {stdout, stderr, exit_code} | nil, err
-- POST {operator_integration}/v1/function/execute with the caller's own token (the
-- factory checks the execute permission); the work directory is picked by the
-- factory from work_dir, one per conversation; event carries the turn's context,
-- the callback URL and the language for the stub (never the token).
function M.execute(ctx, job, cljson)
    local bkn = type(ctx.bkn_context) == "table" and ctx.bkn_context or {}
    local cfg = type(ctx.config) == "table" and ctx.config or {}
    local url = type(cfg.ptc) == "table" and cfg.ptc.sandbox_mcp_url or ""
    local context = cljson.object({}, { "conversation_id", "interaction_id", "parent_operation_id" })
    context.conversation_id = bkn.conversation_id
    context.interaction_id = bkn.interaction_id
    -- the run's own Operation is the parent of every call the script makes
    context.parent_operation_id = ctx.operation_id or bkn.parent_operation_id
    local event = cljson.object({}, { "bkn", "mcp", "locale" })
    if context.conversation_id then
        event.bkn = context
    end
    event.mcp = url
    event.locale = lang_of(ctx.lang)
    local timeout = M.timeout_of(job.timeout)
    local body = cljson.object({}, { "code", "language", "event", "timeout", "work_dir" })
    body.code = job.code
    body.language = job.language
    body.event = event
    body.timeout = timeout
    body.work_dir = M.work_dir(bkn.conversation_id)
    local res, err = ctx.http{
        upstream = "operator_integration", method = "POST", path = "/v1/function/execute",
        json = body, caller_token = true, timeout_ms = (timeout + 15) * 1000,
    }
    if res == nil then
        if type(err) == "table" and err.code == "caller_token_missing" then
            return nil, gateway(401, nil, ctx.lang, { reason = "caller_token_missing" }, EXEC_FAILED)
        end
        return nil, gateway(502, "agentRetrieval.BadGateway.CommonExternalServerError", ctx.lang,
            { reason = type(err) == "table" and err.code or "transport_error" }, EXEC_FAILED)
    end
    local decoded = res.json()
    if res.status < 200 or res.status > 299 then
        local status = (res.status >= 400 and res.status < 500) and res.status or 502
        local code = status == 502 and "agentRetrieval.BadGateway.CommonExternalServerError" or nil
        return nil, gateway(status, code, ctx.lang, decoded or res.body:sub(1, 2048), EXEC_FAILED)
    end
    if type(decoded) ~= "table" or math.tointeger(decoded.exit_code) == nil then
        return nil, gateway(502, "agentRetrieval.BadGateway.CommonExternalServerError", ctx.lang,
            { reason = "invalid_response" }, EXEC_FAILED)
    end
    local out = cljson.object({}, { "stdout", "stderr", "exit_code" })
    out.stdout = type(decoded.stdout) == "string" and decoded.stdout or ""
    out.stderr = type(decoded.stderr) == "string" and decoded.stderr or ""
    out.exit_code = math.tointeger(decoded.exit_code)
    if decoded.truncated == true then
        out.truncated = true
    end
    return out
end

local NONZERO = {
    ["zh-CN"] = { "脚本以非 0 状态退出：%d", "查看 stderr，修正后重试。" },
    ["en-US"] = { "The script exited with status %d", "Read stderr, fix the code and run it again." },
}

-- The result of a run: the output object, or (non-zero exit) an error that still
-- carries stdout, stderr and exit_code at its top level.
function M.result(out, lang)
    if out.exit_code == 0 then
        return out
    end
    local t = NONZERO[lang_of(lang)]
    return nil, {
        status = 422, code = "nonzero_exit", description = string.format(t[1], out.exit_code),
        solution = t[2], stdout = out.stdout, stderr = out.stderr, exit_code = out.exit_code,
        details = { exit_code = out.exit_code },
    }
end

-- Per generation (this module lives in one generation's state): the stub for a
-- language and gate set, rendered once.
local stub_cache = {}

-- clruntime (the sandbox's, absent outside it): is_view(ctx) tells a ctx the runtime
-- made from a table a tool built, whose list_tools must not fill the shared cache.
local has_runtime, clruntime = pcall(require, "clruntime")

-- stub_for(ctx) -> the stub rendered from the tools this call may see.
function M.stub_for(ctx)
    if not (has_runtime and clruntime.is_view(ctx)) then
        return M.stub(M.from_list_tools(ctx.list_tools(), lang_of(ctx.lang)), lang_of(ctx.lang))
    end
    local lang = lang_of(ctx.lang)
    local gates = {}
    local cfg = type(ctx.config) == "table" and ctx.config.gates
    for k, v in pairs(type(cfg) == "table" and cfg or {}) do
        if v == true then
            gates[#gates + 1] = k
        end
    end
    table.sort(gates)
    local key = lang .. "|" .. table.concat(gates, ",")
    if not stub_cache[key] then
        stub_cache[key] = M.stub(M.from_list_tools(ctx.list_tools(), lang), lang)
    end
    return stub_cache[key]
end


-- The parts of run_code's and run_shell's schemas that are the same.
function M.timeout_schema()
    return {
        type = "integer",
        minimum = 1,
        maximum = 600,
        default = 60,
        description = { ["zh-CN"] = "超时秒数，1-600", ["en-US"] = "Timeout in seconds, 1-600" },
    }
end

function M.output_schema()
    return {
        type = "object",
        properties = {
            stdout = { type = "string" },
            stderr = { type = "string" },
            exit_code = { type = "integer" },
            truncated = { type = "boolean" },
        },
    }
end

return M
