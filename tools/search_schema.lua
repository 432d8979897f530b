-- search_schema: the object, relation, action and metric types of a network that
-- match a question: the export view,
-- object types ranked by bkn-backend's own search (knn + match) with a lexical
-- fallback, relation and action types ranked lexically and by their ranked
-- endpoints, metrics by bkn-backend's metric search. With enable_rerank (default)
-- the top object candidates and the relations are reranked by mf-model-api's
-- reranker; when it is off or fails, the simple ranking stands.
local cljson = require "cljson"
local util = require "_lib.util"
local errors = require "_lib.errors"
local knschema = require "_lib.knschema"
local fields = require "_lib.fields"

local text = util.text

local M = {
    name = "search_schema",
    version = "1.0.0",
    kind = "read",
    title = text("Schema 探索", "Explore Schema"),
    description = text(
        "用自然语言问题检索知识网络中相关的对象类、关系类、行动类和指标，返回最相关的若干个" ..
            "（max_concepts，默认 10；返回关系的两端对象类总会带上）。用于确定后续查询要用的 ot_id、" ..
            "属性名和关系路径。search_scope 可限定概念分组或类型。",
        "Finds the object, relation, action and metric types of a knowledge network that are " ..
            "relevant to a natural-language question and returns the best few (max_concepts, " ..
            "default 10; both endpoints of a returned relation are always included). Use it to " ..
            "pick the ot_id, property names and relation paths for later queries. search_scope " ..
            "limits the concept groups or kinds."),
    short_description = text(
        "用自然语言问题检索知识网络中相关的对象类、关系类、行动类和指标，用于确定后续查询的 " ..
            "ot_id、属性名和关系路径。",
        "Finds the object, relation, action and metric types of a knowledge network relevant to " ..
            "a natural-language question, to pick the ot_id, property names and relation paths for " ..
            "later queries."),
    group = "discovery",
    order = 130,
    surfaces = { "mcp", "compact", "rest" },
    upstream = { "bkn_backend", "mf_model_api" },
    input_schema = fields.input {
        required = { "kn_id", "query" },
        properties = {
            kn_id = fields.kn_id(),
            query = { type = "string", minLength = 1, maxLength = 2000,
                description = text("自然语言问题", "The question, in natural language") },
            search_scope = {
                type = "object",
                additionalProperties = false,
                properties = {
                    concept_groups = { type = "array", maxItems = 50, items = { type = "string", minLength = 1 },
                        description = text("只在这些概念分组内检索", "Search only these concept groups") },
                    include_object_types = { type = "boolean", default = true },
                    include_relation_types = { type = "boolean", default = true },
                    include_action_types = { type = "boolean", default = true },
                    include_metric_types = { type = "boolean", default = true },
                },
            },
            max_concepts = { type = "integer", minimum = 1, maximum = 100, default = 10,
                description = text("每类最多返回的概念数", "Concepts to return per kind at most") },
            schema_brief = { type = "boolean",
                description = text("精简输出（MCP 默认 true，REST 默认 false）",
                    "Brief output (default true on MCP, false on REST)") },
            enable_rerank = { type = "boolean", default = true,
                description = text("用重排模型对对象类和关系类重新排序（失败时用简单匹配）",
                    "Rerank object and relation types with the reranker model (simple matching if it fails)") },
            include_columns = { type = "boolean", default = false,
                description = text("属性带上映射的列名", "Include the mapped column of each property") },
        },
    },
    output_schema = {
        type = "object",
        properties = {
            object_types = { type = "array", items = { type = "object" } },
            relation_types = { type = "array", items = { type = "object" } },
            action_types = { type = "array", items = { type = "object" } },
            metric_types = { type = "array", items = { type = "object" } },
        },
    },
}

local function scope_of(args)
    local s = args.search_scope or {}
    local function on(k)
        return s[k] ~= false
    end
    return { groups = s.concept_groups, objects = on("include_object_types"),
        relations = on("include_relation_types"), actions = on("include_action_types"),
        metrics = on("include_metric_types") }
end

-- knn + match over every field, as bkn-backend's concept search takes it
local function search_condition(query, limit)
    return cljson.decode(cljson.encode({ operation = "or", sub_conditions = {
        { field = "*", operation = "knn", value = query, value_from = "const", limit_key = "k",
            limit_value = limit },
        { field = "*", operation = "match", value = query, value_from = "const" } } }))
end

-- Lexical relevance: the whole question, its words, and its CJK characters.
local function lexical(query, ...)
    local hay = {}
    for _, v in ipairs({ ... }) do
        if type(v) == "string" then
            hay[#hay + 1] = v:lower()
        end
    end
    local textv = table.concat(hay, " ")
    local q = query:lower()
    local score = textv:find(q, 1, true) and 10 or 0
    for w in q:gmatch("[%w_]+") do
        if #w > 1 and textv:find(w, 1, true) then
            score = score + 2
        end
    end
    for _, cp in utf8.codes(q) do
        if cp >= 0x3400 and textv:find(utf8.char(cp), 1, true) then
            score = score + 1
        end
    end
    return score
end

-- list -> { {it, score, i}, ... } best first, ties in list order (all kept)
local function scored(list, score_of)
    local out = {}
    for i, it in ipairs(list) do
        out[#out + 1] = { it = it, score = score_of(it), i = i }
    end
    table.sort(out, function(a, b)
        if a.score ~= b.score then
            return a.score > b.score
        end
        return a.i < b.i
    end)
    return out
end

-- The simple ranking: the items that match at all, best first.
local function ranked(list, score_of)
    local out = {}
    for _, s in ipairs(scored(list, score_of)) do
        if s.score > 0 then
            out[#out + 1] = s.it
        end
    end
    return out
end

-- Reranking bounds: at most 200 object candidates are reranked; the
-- relation cap and the short timeout keep one slow or huge call from holding the
-- tool (the simple ranking is always there to fall back on).
local RERANK_OBJECTS = 200
local RERANK_RELATIONS = 800
local RERANK_TIMEOUT_MS = 5000
local DOC_MAX_BYTES = 1000

-- One reranker document: the non-empty parts, cut at a character boundary.
local function document(...)
    local parts = {}
    for _, v in ipairs({ ... }) do
        if type(v) == "string" and v ~= "" then
            parts[#parts + 1] = v
        end
    end
    local d = table.concat(parts, " ")
    if #d > DOC_MAX_BYTES then
        local cut = utf8.offset(d, 0, DOC_MAX_BYTES + 1) -- start of the character holding that byte
        d = d:sub(1, cut - 1)
    end
    return d
end

local function object_document(ot)
    return document(ot.name or ot.id, ot.comment)
end

-- The endpoints' names say what a relation links, which its own name often does not.
local function relation_document(rt, by_id)
    local src, dst = by_id[rt.source_object_type_id], by_id[rt.target_object_type_id]
    return document(rt.name or rt.id, "(" .. tostring(src and src.name or rt.source_object_type_id) .. " -> " ..
        tostring(dst and dst.name or rt.target_object_type_id) .. ")", rt.comment)
end

-- mf-model-api reranker: docs -> { [1-based doc index] = relevance score } | nil, why.
-- A malformed answer is a failure as a whole: half-trusted scores would mix two rankings.
local function rerank(ctx, query, docs)
    local res, err = ctx.http { upstream = "mf_model_api", method = "POST", path = "/v1/small-model/reranker",
        timeout_ms = RERANK_TIMEOUT_MS, json = util.object({ query = query, documents = util.array(docs),
            model = "" }, { "query", "documents", "model" }) }
    if not util.is_2xx(res) then
        return nil, res and ("status " .. tostring(res.status))
            or (type(err) == "table" and tostring(err.code) or "unreachable")
    end
    local body = util.try_json(res)
    if type(body) ~= "table" or type(body.results) ~= "table" then
        return nil, "no results in the answer"
    end
    local scores = {}
    for _, r in ipairs(body.results) do
        local idx = type(r) == "table" and r.index or nil
        local s = type(r) == "table" and cljson.tonumber(r.relevance_score) or nil
        if math.type(idx) ~= "integer" or idx < 0 or idx >= #docs or type(s) ~= "number" or s ~= s
            or s == math.huge or s == -math.huge then
            return nil, "malformed result"
        end
        scores[idx + 1] = s
    end
    return scores
end

-- Reranked order of scored entries whose first `n` were sent as documents from
-- position `first`: items the reranker scored above 0 lead, best first; the rest
-- keep the simple order and are kept only if they match simply.
local function reordered(entries, scores, first, n)
    local lead, rest = {}, {}
    for pos, e in ipairs(entries) do
        local r = pos <= n and scores[first + pos - 1] or nil
        if r and r > 0 then
            lead[#lead + 1] = { it = e.it, r = r, pos = pos }
        elseif e.score > 0 then
            rest[#rest + 1] = e.it
        end
    end
    table.sort(lead, function(a, b)
        if a.r ~= b.r then
            return a.r > b.r
        end
        return a.pos < b.pos
    end)
    local out = {}
    for _, l in ipairs(lead) do
        out[#out + 1] = l.it
    end
    for _, it in ipairs(rest) do
        out[#out + 1] = it
    end
    return out
end

-- bkn-backend's search of the network's what ("object-types", "metrics") for the
-- query, best score first -> entries | nil (search unavailable)
local function scored_search(ctx, args, what, limit, need_total)
    return util.entries_of(ctx.http { upstream = "bkn_backend", method = "POST",
        path = knschema.kn_path(args.kn_id) .. "/" .. what, headers = { ["x-http-method-override"] = "GET" },
        json = util.object({ condition = search_condition(args.query, limit),
            sort = cljson.decode('[{"field":"_score","direction":"desc"}]'), limit = limit, need_total = need_total },
            { "condition", "sort", "limit", "need_total" }) })
end

-- object type id -> bkn-backend search score | nil (search unavailable)
local function searched_scores(ctx, args)
    local entries = scored_search(ctx, args, "object-types", 2000, false)
    if entries == nil then
        return nil
    end
    local scores = {}
    for _, e in ipairs(entries) do
        if type(e) == "table" and e.id ~= nil then
            scores[e.id] = cljson.tonumber(e._score) or 0
        end
    end
    return scores
end

local function object_concept(ot, brief, columns)
    local props = util.array()
    for _, p in ipairs(type(ot.data_properties) == "table" and ot.data_properties or {}) do
        local out = util.object({ name = p.name, type = p.type }, { "name", "type", "column", "comment",
            "condition_operations" })
        if columns and type(p.mapped_field) == "table" then
            out.column = p.mapped_field.name
        end
        if not brief then
            out.comment = p.comment ~= "" and p.comment or nil
            out.condition_operations = p.condition_operations
        end
        props[#props + 1] = out
    end
    local c = util.object({ concept_id = ot.id, concept_name = ot.name, data_source = ot.data_source,
        data_properties = props }, { "concept_type", "concept_id", "concept_name", "comment", "tags",
        "data_source", "data_properties", "logic_properties", "primary_keys" })
    if ot.comment ~= "" then
        c.comment = ot.comment
    end
    if type(ot.logic_properties) == "table" and #ot.logic_properties > 0 then
        for _, lp in ipairs(ot.logic_properties) do
            util.keep_only(lp, { "name", "type", "comment", "data_source", "parameters" })
        end
        c.logic_properties = ot.logic_properties
    end
    if not brief then
        c.concept_type, c.tags, c.primary_keys = "object_type", ot.tags, ot.primary_keys
    end
    return c
end

local function relation_concept(rt, brief)
    local c = util.object({ concept_id = rt.id, concept_name = rt.name,
        source_object_type_id = rt.source_object_type_id, target_object_type_id = rt.target_object_type_id },
        { "concept_type", "concept_id", "concept_name", "comment", "source_object_type_id",
            "target_object_type_id" })
    if not brief then
        c.concept_type = "relation_type"
    end
    if type(rt.comment) == "string" and rt.comment ~= "" then
        c.comment = rt.comment
    end
    return c
end

local function metrics(ctx, args)
    local entries = scored_search(ctx, args, "metrics", args.max_concepts)
    local out = util.array()
    for _, m in ipairs(entries or {}) do
        if #out < args.max_concepts then
            out[#out + 1] = m
        end
    end
    if entries == nil then
        ctx.log("warn", "metric search unavailable: metric_types left empty")
    end
    return out
end

function M.handle(args, ctx)
    local scope = scope_of(args)
    if not (scope.objects or scope.relations or scope.actions or scope.metrics) then
        return nil, errors.refuse(400, ctx.lang, "search_scope must enable at least one concept type")
    end
    local brief = args.schema_brief
    if brief == nil then
        brief = ctx.surface ~= "rest"
    end
    local kn, err = knschema.export(ctx, args.kn_id)
    if not kn then
        return nil, err
    end
    local max = args.max_concepts
    local ots = type(kn.object_types) == "table" and kn.object_types or {}
    local in_groups
    if type(scope.groups) == "table" and #scope.groups > 0 then
        in_groups = {}
        local wanted = {}
        for _, g in ipairs(scope.groups) do
            wanted[g] = true
        end
        for _, g in ipairs(type(kn.concept_groups) == "table" and kn.concept_groups or {}) do
            if type(g) == "table" and wanted[g.id] then
                for _, id in ipairs(type(g.object_type_ids) == "table" and g.object_type_ids or {}) do
                    in_groups[id] = true
                end
            end
        end
    end
    local by_id, candidates = {}, {}
    for _, ot in ipairs(ots) do
        if type(ot) == "table" and (in_groups == nil or in_groups[ot.id]) then
            by_id[ot.id] = ot
            candidates[#candidates + 1] = ot
        end
    end
    local scores = (scope.objects or scope.relations) and searched_scores(ctx, args) or nil
    local ot_entries = scored(candidates, function(ot)
        local s = lexical(args.query, ot.id, ot.name, ot.comment)
        return scores and (scores[ot.id] or 0) * 100 + s or s
    end)
    local ranked_ots = {}
    for _, e in ipairs(ot_entries) do
        if e.score > 0 then
            ranked_ots[#ranked_ots + 1] = e.it
        end
    end
    local ot_rank = {}
    for i, ot in ipairs(ranked_ots) do
        ot_rank[ot.id] = i
    end
    local rt_entries = {}
    if scope.relations then
        local rts = {}
        for _, rt in ipairs(type(kn.relation_types) == "table" and kn.relation_types or {}) do
            if type(rt) == "table" and by_id[rt.source_object_type_id] and by_id[rt.target_object_type_id] then
                rts[#rts + 1] = rt
            end
        end
        local function endpoint_bonus(id)
            local r = ot_rank[id]
            return r and math.max(0, 6 - r) or 0
        end
        rt_entries = scored(rts, function(rt)
            return lexical(args.query, rt.id, rt.name, rt.comment) + endpoint_bonus(rt.source_object_type_id) +
                endpoint_bonus(rt.target_object_type_id)
        end)
    end
    local ranked_rts = {}
    for _, e in ipairs(rt_entries) do
        if e.score > 0 then
            ranked_rts[#ranked_rts + 1] = e.it
        end
    end
    if args.enable_rerank then
        -- one reranker call: the top object candidates (they also order the action
        -- types), then the relations
        local docs = {}
        local n_ot = (scope.objects or scope.actions) and math.min(#ot_entries, RERANK_OBJECTS) or 0
        local n_rt = math.min(#rt_entries, RERANK_RELATIONS)
        for i = 1, n_ot do
            docs[#docs + 1] = object_document(ot_entries[i].it)
        end
        for i = 1, n_rt do
            docs[#docs + 1] = relation_document(rt_entries[i].it, by_id)
        end
        if #docs > 0 then
            local rs, why = rerank(ctx, args.query, docs)
            if rs then
                if n_ot > 0 then
                    ranked_ots = reordered(ot_entries, rs, 1, n_ot)
                    ot_rank = {}
                    for i, ot in ipairs(ranked_ots) do
                        ot_rank[ot.id] = i
                    end
                end
                ranked_rts = reordered(rt_entries, rs, n_ot + 1, n_rt)
            else
                ctx.log("warn", "reranker unavailable (" .. why .. "): simple ranking kept")
            end
        end
    end
    local out = util.object({ object_types = util.array(), relation_types = util.array(),
        action_types = util.array(), metric_types = util.array() },
        { "object_types", "relation_types", "action_types", "metric_types" })
    local picked = {}
    for _, rt in ipairs(ranked_rts) do
        if #out.relation_types >= max then
            break
        end
        out.relation_types[#out.relation_types + 1] = relation_concept(rt, brief)
        picked[#picked + 1] = rt
    end
    if scope.objects then
        local seen = {}
        local function add(ot)
            if ot and not seen[ot.id] then
                seen[ot.id] = true
                out.object_types[#out.object_types + 1] = object_concept(ot, brief, args.include_columns)
            end
        end
        for i = 1, math.min(max, #ranked_ots) do
            add(ranked_ots[i])
        end
        for _, rt in ipairs(picked) do -- endpoints of returned relations, beyond the limit
            add(by_id[rt.source_object_type_id])
            add(by_id[rt.target_object_type_id])
        end
    end
    if scope.actions then
        local ats = {}
        for _, at in ipairs(type(kn.action_types) == "table" and kn.action_types or {}) do
            if type(at) == "table" and (in_groups == nil or in_groups[at.object_type_id]) then
                ats[#ats + 1] = at
            end
        end
        for _, at in ipairs(ranked(ats, function(at)
            local r = ot_rank[at.object_type_id]
            return lexical(args.query, at.id, at.name, at.comment) + (r and r <= max and 1 or 0)
        end)) do
            if #out.action_types >= max then
                break
            end
            local ot = by_id[at.object_type_id]
            local a = util.object({ id = at.id, name = at.name, object_type_id = at.object_type_id,
                object_type_name = ot and ot.name or nil, kn_id = args.kn_id },
                { "id", "name", "object_type_id", "object_type_name", "comment", "tags", "kn_id" })
            if type(at.comment) == "string" and at.comment ~= "" then
                a.comment = at.comment
            end
            if not brief then
                a.tags = at.tags
            end
            out.action_types[#out.action_types + 1] = a
        end
    end
    if scope.metrics then
        out.metric_types = metrics(ctx, args)
    end
    return out
end

return M
