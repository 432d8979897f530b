-- host: the bridge between the C core (src/host/tools.c, src/host/call.c) and the tools of
-- one generation. Loaded once per generation, inside the sandbox like any module.
--
-- C calls: configure{upstreams=} once, register(file_name, value, unchanged, file)
-- while loading, check_set() once every file is in, info(name) / list_entry(name,
-- lang, compact) to precompute tools/list, set_gate(name, open) with the gate the core
-- resolved for the tool, invoke(name, args, ctx, query) as the body of each call's
-- coroutine, error_text(status, lang) for the envelopes C builds itself (raised tools,
-- budget kills).
local contract = require "contract"
local schema = require "schema"
local catalog = require "catalog"
local cljson = require "cljson"
local errors = require "errors"
local loaderr = require "loaderr"
local authz = require "authz"
local clruntime = require "clruntime"

local M = {}

-- a value's metatable for the comparisons below, without getmetatable's
-- __metatable look-up (clruntime.metatable; getmetatable where the runtime lacks it)
local metatable_of = clruntime.metatable or getmetatable

-- name -> normalized tool; per generation (this module is loaded once per state)
local tools = {}
local order = {}
-- what check_set needs of the files that failed the contract (name, order, rest_alias
-- when valid), so that a directory's errors come in one pass
local rejected = {}
-- file name -> the file as register got it, until check_set (error lines)
local files = {}
-- the configured upstream names (configure), nil: not checked
local upstreams = nil
-- name -> true for a gated tool whose gate the core found open (set_gate)
local gate_open = {}

-- configure{upstreams = {names…}}: what the load checks tools against
function M.configure(opts)
    upstreams = opts.upstreams
end

-- loaderr.tokens of a file, computed once and only for a file with errors
local function tokens_of(file)
    file.tokens = file.tokens or loaderr.tokens(file.source)
    return file.tokens
end

-- "<path>:<line>: msg" for the line of key path (array) in file, else msg as it is
-- (the C side then points at the tool table's `return`)
local function at(file, path, msg)
    local line = path and loaderr.key_line(tokens_of(file), path)
    if not line then
        return msg
    end
    return file.path .. ":" .. line .. ": " .. msg
end

-- The upstream names the file's code passes to ctx.http (`upstream = "<name>"`) must
-- be configured, and declared when the tool declares its upstreams. The token scan
-- runs only when a plain search finds a name that fails either rule.
local function check_literals(file, value, errs)
    local declared = value.upstream
    if type(declared) == "string" then
        declared = { declared }
    end
    for _, d in ipairs(type(declared) == "table" and declared or {}) do
        if type(d) ~= "string" then
            declared = nil -- the contract reports the key itself
            break
        end
    end
    if type(declared) ~= "table" or #declared == 0 then
        declared = nil
    end
    local function bad(name)
        return (upstreams and not contract.has_upstream(upstreams, name)) or
            (declared and not contract.has_upstream(declared, name))
    end
    local suspect = false
    for name in file.source:gmatch("upstream%s*=%s*[\"']([^\"'\n]*)[\"']") do
        suspect = suspect or bad(name)
    end
    if not suspect then
        return
    end
    for _, lit in ipairs(loaderr.upstream_literals(tokens_of(file))) do
        local where = file.path .. ":" .. lit.line .. ": "
        if upstreams and not contract.has_upstream(upstreams, lit.name) then
            errs[#errs + 1] = contract.unknown_upstream(where .. "upstream", lit.name, upstreams)
        elseif declared and not contract.has_upstream(declared, lit.name) then
            errs[#errs + 1] = where .. "upstream '" .. lit.name .. "' is called but not declared: " ..
                "add it to the tool's upstream key (" .. table.concat(declared, ", ") .. ")"
        end
    end
end

-- register(file_name, value [, unchanged, file]) -> normalized tool | nil, errors
-- (array of strings). unchanged: the same file bytes and runtime as in the previous
-- generation, which validated its schemas already (the C side decides). file: {path =
-- the path errors name, source = the file's text, mtime = seconds, line = the line of
-- its tool table}: errors then point at the offending key's line.
function M.register(file_name, value, unchanged, file)
    if type(value) ~= "table" then
        return nil, { "a tool file must return a table, got " .. type(value) }
    end
    if file then
        file.unchanged = unchanged
        files[file_name] = file
    end
    local tool, errs = contract.check(value, file_name,
        { schemas_known_valid = unchanged == true, upstreams = upstreams })
    errs = errs or {}
    if file then
        for i, e in ipairs(errs) do
            errs[i] = at(file, loaderr.path_of(e, contract.keys), e)
        end
        check_literals(file, value, errs)
    end
    if #errs > 0 then
        local o, alias = value.order, value.rest_alias
        rejected[#rejected + 1] = {
            name = file_name,
            order = math.type(o) == "integer" and o > 0 and o or nil,
            rest_alias = type(alias) == "string" and alias or nil,
        }
        return nil, errs
    end
    -- the input check is generated now, with the generation, not at the first call
    if type(tool.input_schema) == "table" then
        schema.generated_check(tool.input_schema)
    end
    tools[file_name] = tool
    order[#order + 1] = tool
    return tool
end

-- Of two files, the one an operator more likely just added or changed: the one that
-- changed since the previous generation, else the one modified last.
local function newer(a, b)
    local fa, fb = files[a.name], files[b.name]
    if not fa or not fb then
        return false
    end
    if fa.unchanged ~= fb.unchanged then
        return not fa.unchanged
    end
    return (fa.mtime or 0) > (fb.mtime or 0)
end

-- check_set() -> true | nil, errors: rules across tools (unique orders, aliases),
-- over every registered file, the rejected ones included. Releases the files.
function M.check_set()
    local all = {}
    for _, t in ipairs(order) do
        all[#all + 1] = t
    end
    for _, t in ipairs(rejected) do
        all[#all + 1] = t
    end
    table.sort(all, function(a, b)
        return a.name < b.name
    end)
    local ok, errs, refs = contract.check_set(all, newer)
    if not ok then
        for i, r in ipairs(refs) do
            local f, o = files[r.name], r.other and files[r.other]
            if f then
                local msg = r.message
                if o then
                    local other_line = loaderr.key_line(tokens_of(o), { r.key }) or o.line or 1
                    msg = msg .. " (" .. o.path .. ":" .. other_line .. ")"
                end
                local line = loaderr.key_line(tokens_of(f), { r.key }) or f.line or 1
                errs[i] = f.path .. ":" .. line .. ": " .. msg
            end
        end
    end
    files = {}
    return ok, errs
end

-- info(name) -> flat fields the C side copies into tools_info
function M.info(name)
    local t = tools[name]
    local surfaces, toon = {}, false
    for _, s in ipairs(t.surfaces or {}) do
        surfaces[#surfaces + 1] = s
    end
    for _, f in ipairs(t.formats or {}) do
        if f == "toon" then
            toon = true
        end
    end
    return {
        name = t.name, version = t.version, kind = t.kind, group = t.group,
        order = t.order, gate = t.gate, rest_alias = t.rest_alias,
        surfaces = surfaces, toon = toon, routes = t.routes,
    }
end

function M.list_entry(name, lang, compact)
    return contract.list_entry(tools[name], lang, compact)
end

-- set_gate(name, open): the core's one evaluation of a gated tool's switch, made
-- when the generation loads; direct calls (C) and ctx.invoke / ctx.list_tools
-- (below) both go by it.
function M.set_gate(name, open)
    gate_open[name] = open == true or nil
end

-- error_text(status_or_code, lang) -> description, solution (the text catalogue's)
function M.error_text(key, lang)
    return catalog.error_text(key, lang)
end

local function invalid_arguments(errs, lang)
    local details = cljson.array()
    for i, x in ipairs(errs or {}) do
        local d = cljson.decode('{"path":"","message":""}')
        if type(x) == "table" then
            d.path, d.message = tostring(x.path or ""), tostring(x.message or "")
        else
            d.path, d.message = "", tostring(x)
        end
        details[i] = d
    end
    return errors.envelope(400, { code = "Public.BadRequest", solution = catalog.text("err_input_schema", lang),
                                  details = details }, lang)
end

-- Longest excerpt of an upstream's non-JSON error text kept in a 5xx envelope.
local MAX_EXCERPT = 200

-- Stack frames and trace headers (Java, JS, Python, Go, PHP, C) are found token by
-- token, so that one written inline with other text goes as well as one on its own
-- line.

-- A source position: Pool.java:88, server.js:10:5, (x.c:3).
local function is_location(t)
    return t:find("%.%a%w*:%d+") ~= nil
end

-- A qualified call: com.corp.Pool.take(..., Object.<anonymous>, App->run(), A::b(),
-- and a bare foo().
local function is_call(t)
    return t:find("^%(?[%w_$<>]+%.[%w_$.<>]*%(") ~= nil or t:find("^[%w_$\\]+%->[%w_$]+%(") ~= nil
        or t:find("^[%w_$\\]+::[%w_$]+%(") ~= nil or t:find("^[%w_$]+%(%)[:,]?$") ~= nil
        or t:find("^%(?[%w_$]+%.[%w_$.]*<[%w_$]+>$") ~= nil
end

-- How many tokens from i a frame that starts at i spans: up to the one that closes
-- the parenthesis it opens ("run(Native Method)"), at most 4.
local function call_len(tokens, i)
    local depth, n = 0, 0
    repeat
        local t = tokens[i + n]
        if not t then
            break
        end
        depth = depth + select(2, t:gsub("%(", "")) - select(2, t:gsub("%)", ""))
        n = n + 1
    until depth <= 0 or n >= 4
    return n
end

-- The number of tokens from i that make a stack frame or trace header (0: none).
local function frame_len(tokens, i)
    local t, nxt = tokens[i], tokens[i + 1]
    if (t == "at" or t:find("^#%d+$")) and nxt and (is_location(nxt) or is_call(nxt) or nxt:find("/")) then
        return 1 + call_len(tokens, i + 1) -- "at a.B.c(B.java:3)", "#0 /x.php(12): f()"
    end
    if t == "File" and nxt and nxt:sub(1, 1) == '"' then -- File "/app/x.py", line 12, in f
        local n = 2
        if tokens[i + 2] == "line" and (tokens[i + 3] or ""):find("^%d+,?$") then
            n = 4
        end
        if tokens[i + n] == "in" and tokens[i + n + 1] then
            n = n + 2
        end
        return n
    end
    if t == "Traceback" then -- Traceback (most recent call last):
        for n = 1, 5 do
            if (tokens[i + n - 1] or ""):find("%):$") then
                return n
            end
        end
        return 1
    end
    if t == "goroutine" and nxt and nxt:find("^%d+$") then -- goroutine 7 [running]:
        return (tokens[i + 2] or ""):find("^%[.*%]:?$") and 3 or 2
    end
    if (t == "Caused" and nxt == "by:") or (t == "Stack" and nxt == "trace:") then
        return 2
    end
    if t:find("^%.%.%.$") and nxt and nxt:find("^%d+$") and tokens[i + 2] == "more" then
        return 3 -- ... 12 more
    end
    if t == "on" and nxt == "line" and (tokens[i + 2] or ""):find("^%d+") then
        return 3 -- PHP: in /x.php on line 12
    end
    if is_location(t) or is_call(t) then
        return call_len(tokens, i)
    end
    if t:find("^%+?0x%x+$") then -- an address in a native frame
        return 1
    end
    return 0
end

-- text without its stack frames, tokens joined by single spaces
local function drop_frames(text)
    local tokens = {}
    for t in text:gmatch("%S+") do
        tokens[#tokens + 1] = t
    end
    local kept, i = {}, 1
    while i <= #tokens do
        local n = frame_len(tokens, i)
        if n > 0 then
            i = i + n
        else
            kept[#kept + 1] = tokens[i]
            i = i + 1
        end
    end
    return table.concat(kept, " ")
end

-- scrub(text) -> a short excerpt of an upstream's error text fit for a caller: no
-- scripts, styles or comments, no stack frames, no URLs, addresses or file paths, at
-- most MAX_EXCERPT bytes (cut on a UTF-8 boundary). Other markup stays (it tells the
-- reader that an HTML page came back).
function M.scrub(text)
    text = text:sub(1, 8192)
    text = text:gsub("<[sS][cC][rR][iI][pP][tT].-</[sS][cC][rR][iI][pP][tT]%s*>", "\n")
        :gsub("<[sS][tT][yY][lL][eE].-</[sS][tT][yY][lL][eE]%s*>", "\n"):gsub("<!%-%-.-%-%->", "\n")
        :gsub("<[bB][rR]%s*/?>", "\n"):gsub("</?[pP][rR][eE][^>]*>", "\n")
    text = drop_frames(text)
        :gsub("%a[%w+.-]*://%S*", "[url]")
        :gsub("%d+%.%d+%.%d+%.%d+[:%d]*", "[address]")
        :gsub("%S*/[%w_.-]+/%S*", "[path]")
        :gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
    if #text > MAX_EXCERPT then
        local cut = MAX_EXCERPT
        while cut > 0 and (text:byte(cut + 1) or 0) >= 0x80 and (text:byte(cut + 1) or 0) < 0xC0 do
            cut = cut - 1 -- back to the start of a UTF-8 sequence
        end
        text = text:sub(1, cut) .. "..."
    end
    return text
end

-- The error a tool returned with `nil, err` -> status, body (the error object), code.
-- A downstream body the tool handed over as `raw` is mapped like any upstream answer
-- (errors.from_status): its status, the platform's code and texts, the body as details.
local function tool_error(err, lang, args)
    if type(err) == "string" then
        err = { code = "tool_error", details = err }
    elseif type(err) ~= "table" then
        error("handle returned nil without an error table", 0)
    end
    local code = err.code
    local status = math.tointeger(err.status)
    if type(err.raw) == "string" then
        local mapped = errors.from_status(status or 502, errors.body_of({ body = err.raw }), lang)
        for k, v in pairs(err) do
            if k ~= "raw" and k ~= "status" and mapped[k] == nil then
                mapped[k] = v
            end
        end
        err, status = mapped, mapped.status
    end
    if status == nil and type(code) == "string" and code:sub(1, 9) == "upstream_" then
        local mapped = errors.transport(err, lang) -- ctx.http's failure handed on as it is
        err, status = mapped, mapped.status
    end
    if status == nil or status < 400 or status > 599 then
        status = 500
    end
    local error_code = type(code) == "string" and code or "tool_error"
    local e = errors.envelope(status, err, lang, args)
    if status >= 500 and type(e.details) == "string" then
        e.details = M.scrub(e.details) -- an upstream's error page: excerpt only
    end
    return status, e, error_code
end

local function is_object(v)
    if type(v) ~= "table" then
        return cljson.is_raw(v) == "object"
    end
    local mt = metatable_of(v)
    if mt == cljson.array_mt or mt == cljson.number_mt then
        return false
    end
    return mt == cljson.object_mt or next(v) == nil or rawlen(v) == 0
end

local function has_surface(tool, surface)
    for _, s in ipairs(tool.surfaces or {}) do
        if s == surface then
            return true
        end
    end
    return false
end

-- Gated-off tools do not exist for this generation (indistinguishable from never
-- built), by the core's evaluation of the gate (set_gate).
local function gated_off(tool)
    return tool.gate ~= nil and not gate_open[tool.name]
end

-- What ctx.invoke may run: tools an agent may call by name (listed on /mcp or
-- /mcp-compact, or gateway tools, which no tools/list shows and execute_tool runs).
-- REST-only and proxy-only tools answer by other rules.
local function invocable(tool)
    return tool ~= nil and (has_surface(tool, "mcp") or has_surface(tool, "compact") or
        has_surface(tool, "gateway")) and not gated_off(tool)
end

-- The one error for unknown, REST-only, proxy-only and gated-off names, so that a
-- caller cannot tell them apart.
local function unknown_tool_error(name, lang)
    return {
        status = 404,
        code = "Public.NotFound",
        description = string.format(catalog.text("err_no_such_tool", lang), tostring(name)),
        solution = catalog.text("err_no_such_tool_solution", lang),
        details = { tool = tostring(name) },
    }
end

-- Depth guard: a tool invoked through ctx.invoke may itself invoke (execute_tool
-- of execute_tool), but not without bound.
local MAX_INVOKE_DEPTH = 3

local run -- forward: validates and runs one tool (defined below)

-- The outermost tool a call ran through ctx.invoke, by the call's real ctx:
-- {tool, args, res}. When the call answers with that result as it is (execute_tool of a
-- Context Loader tool), its text is laid out by that tool's view or render.
local invoked = setmetatable({}, { __mode = "k" })

-- ctx.invoke(name, args) -> result | nil, err. Runs another tool of this generation
-- with the same ctx: the same kn_id fallback, schema validation and defaults as a
-- direct call. err is a tool error table (what `handle` would return).
local function make_invoke(ctx, real)
    local depth = 0
    return function(name, args)
        local tool = tools[name]
        if type(name) ~= "string" or not invocable(tool) then
            return nil, unknown_tool_error(name, ctx.lang)
        end
        if depth >= MAX_INVOKE_DEPTH then
            return nil, { status = 400, code = "Public.BadRequest",
                          details = { reason = "nested tool invocations are limited to " .. MAX_INVOKE_DEPTH } }
        end
        -- no pcall: a raise in the inner tool is a bug and ends the whole call
        -- through the incident path, like a raise in the outer one
        depth = depth + 1
        local res, err, bad = run(tool, args, ctx, nil)
        depth = depth - 1
        if depth == 0 and real ~= nil and res ~= nil then
            invoked[real] = { tool = tool, args = args, res = res }
        end
        if bad then
            local e = invalid_arguments(bad, ctx.lang)
            return nil, { status = 400, code = e.code, description = e.description,
                          solution = e.solution, details = e.details }
        end
        if res == nil and err == nil then
            err = { code = "tool_error", details = "the tool returned nothing" }
        end
        if type(err) == "table" and err.status == 404 and (err.solution == nil or err.solution == "") then
            -- the next step names the ids of this inner call, not of the outer one
            err.solution = errors.not_found_solution(args, ctx.lang, err.code)
        end
        return res, err
    end
end

-- ctx.list_tools() -> array (by order, then name) of {name, title, description,
-- input_schema, surfaces, group, kind}, texts resolved for ctx.lang; gated-off
-- tools left out.
local function make_list_tools(ctx)
    return function()
        local lang = ctx.lang
        if lang ~= "zh-CN" and lang ~= "en-US" then
            lang = catalog.default_language
        end
        local out = {}
        for _, t in ipairs(order) do
            if not gated_off(t) then
                local surfaces = {}
                for i, s in ipairs(t.surfaces) do
                    surfaces[i] = s
                end
                out[#out + 1] = {
                    name = t.name, title = t.title[lang], description = t.description[lang],
                    input_schema = schema.localize(t.input_schema, lang),
                    surfaces = surfaces, group = t.group, kind = t.kind, order = t.order,
                }
            end
        end
        table.sort(out, function(a, b)
            if a.order ~= b.order then
                return a.order < b.order
            end
            return a.name < b.name
        end)
        return out
    end
end

-- The maker of field i of clruntime.ctx_fields, a C function bound to the call (its
-- ctx.http's) or a value of the call; M.ctx_fn is set by the C side (a ctx made
-- elsewhere, without ctx.http, has its values set and none of these).
local function call_bound(i)
    return function(real)
        local http = rawget(real, "http")
        return M.ctx_fn and http and M.ctx_fn(http, i) or nil
    end
end

-- The fields the runtime adds to every call's ctx, made on the first read (most
-- calls read none of them): name -> maker(real ctx, its read-only view). Those the
-- runtime makes itself are named here; those the C side makes, once in its list
-- (clruntime.ctx_fields).
local LAZY = {
    invoke = function(real, view)
        return make_invoke(view, real)
    end,
    list_tools = function(_, view)
        return make_list_tools(view)
    end,
    authz = function(real)
        return authz.handle(real.principal, real.now_ms)
    end,
}
for i, name in ipairs(clruntime.ctx_fields) do
    assert(LAZY[name] == nil, "ctx field made on both sides: " .. name)
    LAZY[name] = call_bound(i)
end

-- lazy_names() -> the names of LAZY, sorted
local function lazy_names()
    local names = {}
    for name in pairs(LAZY) do
        names[#names + 1] = name
    end
    table.sort(names)
    return names
end

-- The metatable of a call's ctx (the C side sets it; invoke sets it on a ctx
-- without one): a read of a missing field makes the LAZY one; the read-only view
-- makes the __lazy ones (every LAZY field) before pairs lists the fields.
M.ctx_mt = {
    __index = function(real, key)
        local make = LAZY[key]
        if make == nil then
            return nil
        end
        local v = make(real, clruntime.readonly(real))
        rawset(real, key, v)
        return v
    end,
    __lazy = lazy_names(),
}

-- id_prefix(rule, args) -> the text a toon_view omit_id rule's id column starts with
-- for this call: the arguments rule.prefix names, each followed by rule.separator ("-"
-- unless declared); nil when one of them is not a string or an integer.
local function id_prefix(rule, args)
    if type(args) ~= "table" then
        return nil
    end
    local sep = rule.separator or "-"
    local parts = {}
    for i, name in ipairs(rule.prefix) do
        local v = args[name]
        if type(v) ~= "string" and math.type(v) ~= "integer" then
            return nil
        end
        parts[i] = v .. sep
    end
    return table.concat(parts)
end

-- invoke(name, args, ctx, query) -> status, body, error_code
-- Runs as the call's coroutine; a raise propagates to C (incident, traceback logged).
-- The tool gets a read-only view of ctx (clruntime.readonly): it reads every
-- field, nested tables included, and writes none.
function M.invoke(name, args, ctx, query)
    local tool = tools[name]
    if not tool then
        error("unknown tool '" .. tostring(name) .. "'", 0)
    end
    local real = ctx
    if metatable_of(real) == nil then
        setmetatable(real, M.ctx_mt)
    end
    ctx = clruntime.readonly(real)
    -- the runtime reads its own fields from the real table (no view in between)
    local lang, format = real.lang, real.response_format
    local res, err, bad = run(tool, args, ctx, query, true, lang)
    if bad then
        return 400, invalid_arguments(bad, lang), "invalid_arguments"
    end
    if res == nil then
        return tool_error(err, lang, args)
    end
    if not is_object(res) then
        error("tool '" .. name .. "' returned a " .. type(res) ..
            " that is not a JSON object (return a table, or nil, err)", 0)
    end
    local inner = invoked[real]
    if inner ~= nil then
        invoked[real] = nil
        if inner.res == res then
            -- the answer is another tool's result as it is: its own layout applies
            tool, args = inner.tool, inner.args
        end
    end
    -- A tool that declares toon_view gets the token-saving view, laid out by the core
    -- from the result (src/codec/toonview.c); the fifth value asks for it: true, or the
    -- tool's omit_id rule, with the prefix this call's arguments make as the sixth.
    if format == "toon" and tool.toon_view then
        local omit = type(tool.toon_view) == "table" and tool.toon_view.omit_id
        if omit then
            return 200, res, nil, nil, omit, id_prefix(omit, args)
        end
        return 200, res, nil, nil, true
    end
    -- A tool may choose its own TOON layout (columns, which fields): render(result, ctx, args)
    -- returns the value to encode for the text (args: the call's arguments), or nil on
    -- MCP when the compact JSON result is the cheaper text; structuredContent stays the result.
    if format == "toon" and type(tool.render) == "function" then
        local v = tool.render(res, ctx, args)
        local text, terr
        if v == nil and real.surface ~= "rest" then
            text = cljson.encode(res)
        else
            text, terr = require("cltoon").encode(v)
        end
        if not text then
            error("tool '" .. name .. "' render: " .. tostring(terr), 0)
        end
        return 200, res, nil, text
    end
    return 200, res, nil
end

-- run(tool, args, ctx, query [, owned, lang]) -> result | nil, err | nil, nil,
-- validation errors. owned: args were made for this call alone (the core's), not a
-- tool's table. lang: ctx.lang, when the caller has it at hand.
run = function(tool, args, ctx, query, owned, lang)
    if args == nil then
        args = cljson.object()
    end
    local input = tool.input_schema
    if query ~= nil and type(query) == "table" and schema.coerce_query then
        for k, v in pairs(schema.coerce_query(input, query)) do
            if args[k] == nil then
                args[k] = v
            end
        end
    end
    -- the kn_id fallback only when the call lacks one (most calls name it)
    if args.kn_id == nil then
        local props = type(input) == "table" and input.properties
        if type(props) == "table" and props.kn_id ~= nil and type(ctx.kn_id_header) == "string"
            and ctx.kn_id_header ~= "" then
            args.kn_id = ctx.kn_id_header
        end
    end
    if input then
        local v, errs = schema.validate(input, args, lang or ctx.lang, owned)
        if v == nil then
            return nil, nil, errs or {}
        end
        args = v
    end
    return tool.handle(args, ctx)
end

return M
