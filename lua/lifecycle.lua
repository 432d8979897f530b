-- lifecycle: the two lifecycle tools, bkn_start_interaction and
-- bkn_finish_interaction, declared like every tool. Their handlers are the core's
-- (src/surface/lifecycle.c: they speak to Trace Core); what is declared here is what tools/list
-- shows (list_entry) and what check() enforces with lua/schema.lua before a handler
-- runs, so the schema a model is shown is the one its arguments meet.
--
-- A refusal is {code, message, retryable, required_action, details}, which the core
-- writes as the one error object (message is its description). code is invalid_params
-- (closure_manifest_invalid for a completed finish without an answer), required_action
-- fix_arguments; message names the field and the rule in the caller's language;
-- details lists every {path, message} schema.lua found, as for any other tool.
--
-- C calls (src/host/tools.c): list_entry(name, lang) once per generation and language,
-- check(name, args, lang, host_key) for every lifecycle call.
local catalog = require "catalog"
local schema = require "schema"
local cljson = require "cljson"

local M = {}

local function texts(key)
    return assert(catalog.texts(key), key)
end

local function string_field(key, extra)
    local p = { type = "string", minLength = 1, description = texts(key) }
    for k, v in pairs(extra or {}) do
        p[k] = v
    end
    return p
end

local OUTCOMES = { "completed", "failed", "cancelled", "handed_off" }

-- Besides the schema: invalid names the catalogue text that explains a wrong value
-- (an enum) or a field that is not a parameter, where a specific sentence says more
-- than the generic rule.
local TOOLS = {
    bkn_start_interaction = {
        title = texts("lc_start_title"),
        description = texts("lc_start_desc"),
        order = 10,
        -- each "new" start opens another conversation unless a retry hint or host key
        -- pins it
        idempotent = false,
        input_schema = {
            type = "object",
            additionalProperties = false,
            required = { "question", "agent_name", "conversation_mode" },
            properties = {
                question = string_field("lc_p_question"),
                agent_name = string_field("lc_p_agent_name", { maxLength = 128 }),
                conversation_mode = { type = "string", enum = { "new", "continue" },
                                      description = texts("lc_p_mode") },
                conversation_id = string_field("lc_p_conversation_id"),
            },
        },
        output_schema = {
            type = "object",
            additionalProperties = false,
            required = { "conversation_id", "interaction_id", "execution_status" },
            properties = {
                conversation_id = { type = "string" },
                interaction_id = { type = "string" },
                execution_status = { type = "string", enum = { "active" } },
            },
        },
        invalid = { conversation_mode = "lc_mode_invalid" },
    },
    bkn_finish_interaction = {
        title = texts("lc_finish_title"),
        description = texts("lc_finish_desc"),
        order = 20,
        idempotent = true, -- a repeated finish replays its outcome
        input_schema = {
            type = "object",
            additionalProperties = false,
            required = { "interaction_id", "outcome" },
            -- the closure of a completed interaction is its answer
            oneOf = {
                { properties = { outcome = { const = "completed" }, answer = { type = "string" } },
                  required = { "answer" } },
                { properties = { outcome = { enum = { "failed", "cancelled", "handed_off" } } } },
            },
            properties = {
                interaction_id = string_field("lc_p_interaction_id"),
                outcome = { type = "string", enum = OUTCOMES, description = texts("lc_p_outcome") },
                answer = string_field("lc_p_answer"),
                reason = { type = "string", description = texts("lc_p_reason") },
            },
        },
        output_schema = {
            type = "object",
            required = { "interaction_id", "execution_status" },
            properties = {
                conversation_id = { type = "string" },
                interaction_id = { type = "string" },
                execution_status = { type = "string" },
                evidence_status = { type = "string" },
            },
        },
        invalid = { outcome = "lc_outcome_invalid", bkn_context = "lc_finish_nested_context" },
    },
}

-- The parameters in the order refusals list them: the required ones, then the others
-- by name.
local function fields_of(s)
    local out, seen = {}, {}
    for _, name in ipairs(s.required or {}) do
        out[#out + 1], seen[name] = name, true
    end
    local rest = {}
    for name in pairs(s.properties) do
        if not seen[name] then
            rest[#rest + 1] = name
        end
    end
    table.sort(rest)
    for _, name in ipairs(rest) do
        out[#out + 1] = name
    end
    return out
end

for name, t in pairs(TOOLS) do
    t.name = name
    t.fields = fields_of(t.input_schema)
    t.rank = {}
    for i, f in ipairs(t.fields) do
        t.rank[f] = i
    end
    for _, s in ipairs({ t.input_schema, t.output_schema }) do
        local ok, errs = schema.check_schema(s)
        if not ok then
            error("lifecycle." .. name .. ": " .. table.concat(errs, "; "), 0)
        end
    end
end

-- lifecycle.names: the tool names in listing order
M.names = { "bkn_start_interaction", "bkn_finish_interaction" }

-- lifecycle.list_entry(name, lang) -> the tools/list entry of a lifecycle tool
function M.list_entry(name, lang)
    if lang ~= "zh-CN" and lang ~= "en-US" then
        lang = catalog.default_language
    end
    local t = assert(TOOLS[name], name)
    return {
        name = name,
        title = t.title[lang],
        description = t.description[lang],
        inputSchema = schema.localize(t.input_schema, lang),
        outputSchema = schema.localize(t.output_schema, lang),
        annotations = { destructiveHint = false, idempotentHint = t.idempotent,
                        openWorldHint = false, readOnlyHint = false },
        _meta = {
            ["openbkn.ai/group"] = "lifecycle",
            ["openbkn.ai/group_title"] = catalog.group_title("lifecycle", lang),
            ["openbkn.ai/order"] = t.order,
        },
    }
end

-- The top-level field a JSON pointer names, or nil (the arguments as a whole).
local function field_of(path)
    local f = path:match("^/([^/]+)")
    return f and (f:gsub("~1", "/"):gsub("~0", "~")) or nil
end

-- The sentence that names the field of one schema error and its rule, in lang.
local function explain(t, args, e, lang)
    local function text(key, ...)
        return string.format(catalog.text(key, lang), ...)
    end
    local field = field_of(e.path)
    if field == nil then
        return e.message
    end
    local p = t.input_schema.properties[field]
    if p == nil then
        if t.invalid[field] then
            return text(t.invalid[field])
        end
        return text("lc_unknown_field", field, t.name, table.concat(t.fields, ", "))
    end
    local v = args[field]
    if v == nil then
        return text("lc_field_required", field, p.description[lang] or p.description["zh-CN"])
    end
    if type(v) ~= "string" then
        return text(p.minLength and "lc_not_string" or "lc_not_text", field)
    end
    if p.enum and t.invalid[field] then
        return text(t.invalid[field])
    end
    if p.maxLength and (utf8.len(v) or #v) > p.maxLength then
        return text("lc_too_long", field, p.maxLength)
    end
    if p.minLength then
        return text("lc_not_string", field)
    end
    return e.message
end

local function refusal(code, action, message, errs)
    local details = cljson.array()
    for i, x in ipairs(errs) do
        local d = cljson.object({}, { "path", "message" })
        d.path, d.message = x.path, x.message
        details[i] = d
    end
    local r = cljson.object({}, { "code", "message", "retryable", "required_action", "details" })
    r.code, r.message, r.retryable, r.required_action = code, message, false, action
    r.details = details
    return r
end

local function invalid_params(message, errs)
    return refusal("invalid_params", "fix_arguments", message, errs)
end

-- The errors in the order their sentences are chosen: fields that are not parameters
-- first, then the parameters in their listing order, the arguments as a whole last.
local function by_field(t, errs)
    local function rank(e)
        local f = field_of(e.path)
        if f == nil then
            return math.maxinteger
        end
        return t.rank[f] or 0
    end
    local keyed = {}
    for i, e in ipairs(errs) do
        keyed[i] = { e = e, r = rank(e), i = i }
    end
    table.sort(keyed, function(a, b)
        if a.r ~= b.r then
            return a.r < b.r
        end
        return a.i < b.i
    end)
    local out = {}
    for i, k in ipairs(keyed) do
        out[i] = k.e
    end
    return out
end

-- What schema cannot say about start: without a host conversation key, "new" takes no
-- conversation_id and "continue" needs one (with a key the host's mapping decides).
local function start_rules(args, lang, host_key)
    if host_key then
        return nil
    end
    local key
    if args.conversation_mode == "new" and args.conversation_id ~= nil then
        key = "lc_new_with_id"
    elseif args.conversation_mode == "continue" and args.conversation_id == nil then
        key = "lc_continue_without_id"
    end
    if key then
        local message = catalog.text(key, lang)
        return invalid_params(message, { { path = "/conversation_id", message = message } })
    end
    return nil
end

-- A completed finish whose only faults are its answer: the closure is missing.
local function missing_answer(args, errs)
    if args.outcome ~= "completed" then
        return false
    end
    for _, e in ipairs(errs) do
        if e.path ~= "/" and field_of(e.path) ~= "answer" then
            return false
        end
    end
    return true
end

-- lifecycle.check(name, args, lang, host_key) -> nil (the arguments pass) | the
-- refusal (an error object, see the top of this file). host_key: the call carries a
-- host conversation key.
function M.check(name, args, lang, host_key)
    if lang ~= "zh-CN" and lang ~= "en-US" then
        lang = catalog.default_language
    end
    local t = assert(TOOLS[name], name)
    local _, errs = schema.validate(t.input_schema, args, lang)
    if errs then
        errs = by_field(t, errs)
        if name == "bkn_finish_interaction" and missing_answer(args, errs) then
            return refusal("closure_manifest_invalid", "fix_arguments",
                catalog.text("lc_answer_required", lang), errs)
        end
        return invalid_params(explain(t, args, errs[1], lang), errs)
    end
    if name == "bkn_start_interaction" then
        return start_rules(args, lang, host_key)
    end
    return nil
end

return M
