-- search_instance (REST and the on-demand gateway): natural-language instance recall
-- across object types. Concept recall picks the object types the question means
-- (bkn-backend: the network's object types, its concept search for their scores),
-- narrowed by concept groups, an allow list and an exclude list, then to those the
-- caller may query (bkn-safe's resource filter) and to the top max_object_types.
-- Each type is searched by ontology-query through two channels, keyword (match) and
-- vector (knn); the channels are fused by reciprocal rank, the result ordered
-- globally, and optionally refined by mf-model-api's reranker (when it fails the
-- fused order stands). The pure steps are _lib.retrieval's.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local retrieval = require "_lib.retrieval"

local text = util.text

local M = {
    name = "search_instance",
    version = "1.0.0",
    kind = "read",
    title = text("实例语义检索", "Instance Semantic Search"),
    description = text(
        "用一句自然语言在知识网络的多个对象类中召回相关实例：先按问题选出相关对象类（可用 " ..
            "concept_groups、object_types、exclude_object_types 限定，排除优先），再在每个对象类里同时做" ..
            "全文与向量检索并按名次融合，结果跨对象类按相关性全局排序。每条 node 带 object_type_id、" ..
            "properties（含 _instance_identity）、rank 与各项分数（score 为融合分，bm25_score、knn_score " ..
            "为两路原始分，reranker_score 仅在精排生效时出现）；请按 rank 使用，分数只是证据。" ..
            "object_types 给出读懂这些实例所需的对象类定义；message 即使有结果也要读。",
        "Recalls the instances relevant to one natural-language question across the object " ..
            "types of a knowledge network: the object types the question means are picked first " ..
            "(narrow them with concept_groups, object_types, exclude_object_types; exclusion wins), " ..
            "then each type is searched by keyword and by vector at once and the two rankings are " ..
            "fused; the result is ordered by relevance across types. Each node has object_type_id, " ..
            "properties (with _instance_identity), rank and every score (score is the fused one, " ..
            "bm25_score and knn_score the channels' raw scores, reranker_score only when reranking " ..
            "ran); use rank, the scores are evidence. object_types has the definitions needed to " ..
            "read the nodes; read message even when there are nodes."),
    short_description = text(
        "一句话跨对象类召回实例（全文 + 向量融合，全局排序）。按 rank 使用；properties 带 " ..
            "_instance_identity；message 有结果也要读。",
        "Recalls instances across object types from one question (keyword + vector, fused, one " ..
            "global order). Use rank; properties carry _instance_identity; read message even with " ..
            "results."),
    group = "query",
    order = 205,
    surfaces = { "rest", "gateway" },
    toon_view = true,
    upstream = { "bkn_backend", "bkn_safe", "ontology_query", "mf_model_api" },
    input_schema = fields.input {
        required = { "query" },
        properties = {
            kn_id = fields.kn_id(text("知识网络 ID（也可用 X-Kn-ID 请求头）",
                "Knowledge network id (or the X-Kn-ID header)")),
            query = fields.string(text("自然语言问题或关键词，整句传入",
                "The question or keywords, as one sentence"), 2000),
            concept_groups = { type = "array", maxItems = 50, items = { type = "string", minLength = 1 },
                description = text("只在这些概念分组的对象类中召回", "Recall only in these concept groups") },
            object_types = { type = "array", maxItems = 200, items = { type = "string", minLength = 1 },
                description = text("只在这些对象类（ID，不接受名称）中召回",
                    "Recall only in these object types (ids, not names)") },
            exclude_object_types = { type = "array", maxItems = 200, items = { type = "string", minLength = 1 },
                description = text("不在这些对象类（ID）中召回；与 object_types 重叠时以排除为准",
                    "Never recall in these object types (ids); wins over object_types") },
            max_object_types = fields.integer(1, 50, text("参与召回的对象类数量上限，默认 10",
                "Object types searched at most, default 10"), 10),
            max_instances_per_type = fields.integer(1, 100, text("每个对象类最多返回的实例数，默认 5",
                "Instances per object type at most, default 5"), 5),
            rerank = { type = "boolean", default = false,
                description = text("用精排模型重排（多一次模型调用；模型不可用时保持融合顺序）",
                    "Rerank with the reranker model (one more model call; the fused order stands " ..
                        "when it is unavailable)") },
            include_object_types = { type = "boolean", default = true,
                description = text("附带命中对象类的精简定义", "Include the brief definitions of the hit object types") },
        },
    },
    output_schema = {
        type = "object",
        required = { "nodes" },
        properties = {
            nodes = {
                type = "array",
                items = { type = "object" },
                description = text(
                    "按相关性全局排序的实例：object_type_id、object_type_name、properties、rank、score、" ..
                        "bm25_score、knn_score、reranker_score",
                    "Instances in one global order of relevance: object_type_id, object_type_name, " ..
                        "properties, rank, score, bm25_score, knn_score, reranker_score"),
            },
            object_types = { type = "array", items = { type = "object" },
                description = text("出现在 nodes 中的对象类定义", "Definitions of the object types in nodes") },
            message = { type = "string" },
        },
    },
}

local MESSAGES = text(
    {
        no_kn = "kn_id is required (pass kn_id or the X-Kn-ID header)",
        unknown_groups = "concept group(s) not found: %s",
        no_types = "没有可检索的对象类：概念分组、object_types 与 exclude_object_types 过滤后为空，或你没有这些对象类的数据查询权限。",
        no_match = "没有与问题匹配的实例。可换一种说法，或放宽对象类范围。",
        not_found = "以下 object_types 不在该知识网络中（只接受对象类 ID）：%s。",
        rerank_down = "精排模型不可用，结果保持融合顺序（没有 reranker_score）。",
        authz_down = "数据查询授权服务不可用，暂时无法确定可检索的对象类",
        authz_solution = "请稍后重试",
    },
    {
        no_kn = "kn_id is required (pass kn_id or the X-Kn-ID header)",
        unknown_groups = "concept group(s) not found: %s",
        no_types = "No object type to search: the concept groups, object_types and " ..
            "exclude_object_types left none, or you may not query the data of any.",
        no_match = "No instance matched the question. Rephrase it, or widen the object types.",
        not_found = "These object_types are not in the knowledge network (ids only): %s.",
        rerank_down = "The reranker is unavailable; the fused order stands (no reranker_score).",
        authz_down = "The query authorization service is unavailable, so the searchable object types are unknown",
        authz_solution = "Retry later",
    })

local function msg(ctx)
    return MESSAGES[ctx.lang] or MESSAGES["zh-CN"]
end

-- Rows each channel asks for per object type: enough to fuse, few enough to be cheap.
local function candidates(per_type)
    return math.max(20, per_type * 4)
end

local FILTER_CHUNK = 200
local RERANK_TIMEOUT_MS = 5000
local INDEX_OPS = { match = true, multi_match = true, knn = true }
local OQ_QUERY = { include_type_info = "false", include_logic_params = "false" }
local OVERRIDE = { ["x-http-method-override"] = "GET" }

local function kn_path(kn_id)
    return "/in/v1/knowledge-networks/" .. util.escape(kn_id)
end

-- The network with its object types (condition_operations included: the channels
-- are chosen by them) | nil, err.
local function network(ctx, kn_id)
    local res, err = ctx.http { upstream = "bkn_backend", method = "GET", path = kn_path(kn_id),
        query = { include_detail = "true" } }
    if res ~= nil and res.status == 404 and (res.body == nil or res.body == "") then
        return nil, errors.refuse(404, ctx.lang, "knowledge network " .. kn_id .. " not found")
    end
    if not util.is_2xx(res) then
        return nil, errors.from_response(res, err, ctx.lang)
    end
    local kn, jerr = errors.json(res, ctx.lang)
    if kn == nil then
        return nil, jerr
    end
    if type(kn.object_types) ~= "table" then
        kn.object_types = {}
    end
    return kn
end

-- The object types of list the caller may query | nil, err (503: the filter is
-- unreachable or broke its contract; nothing unfiltered is ever shown).
local function permitted(ctx, kn_id, list)
    local out = {}
    local accessor = type(ctx.principal) == "table" and ctx.principal.account_id or nil
    for first = 1, #list, FILTER_CHUNK do
        local chunk = table.move(list, first, math.min(first + FILTER_CHUNK - 1, #list), 1, {})
        local res, err = ctx.http { upstream = "bkn_safe", method = "POST", path = "/api/safe/v1/authz/resource-filter",
            json = retrieval.filter_request(kn_id, chunk, accessor) }
        local kept, why
        if util.is_2xx(res) then
            kept, why = retrieval.permitted(kn_id, chunk, util.try_json(res))
        else
            why = res and ("status " .. tostring(res.status)) or
                (type(err) == "table" and tostring(err.code) or "unreachable")
        end
        if kept == nil then
            ctx.log("warn", "resource filter unavailable (" .. tostring(why) .. ")")
            return nil, errors.refuse(503, ctx.lang, { reason = "query_authorization_unavailable" },
                text({ MESSAGES["zh-CN"].authz_down, MESSAGES["zh-CN"].authz_solution },
                    { MESSAGES["en-US"].authz_down, MESSAGES["en-US"].authz_solution }))
        end
        for _, ot in ipairs(kept) do
            out[#out + 1] = ot
        end
    end
    return out
end

-- object type id -> bkn-backend concept search score | nil (search unavailable).
local function concept_scores(ctx, kn_id, args)
    local cond = cljson.decode(cljson.encode({ operation = "or", sub_conditions = {
        { field = "*", operation = "knn", value = args.query, value_from = "const", limit_key = "k",
            limit_value = 2000 },
        { field = "*", operation = "match", value = args.query, value_from = "const" } } }))
    local body = util.object({ condition = cond, sort = cljson.decode('[{"field":"_score","direction":"desc"}]'),
        limit = 2000, need_total = false }, { "concept_groups", "condition", "sort", "limit", "need_total" })
    if type(args.concept_groups) == "table" and #args.concept_groups > 0 then
        body.concept_groups = args.concept_groups
    end
    local entries = util.entries_of(ctx.http { upstream = "bkn_backend", method = "POST",
        path = kn_path(kn_id) .. "/object-types", headers = OVERRIDE, json = body })
    if entries == nil then
        ctx.log("warn", "concept search unavailable: object types kept in network order")
        return nil
    end
    local scores = {}
    for _, e in ipairs(entries) do
        if type(e) == "table" and type(e.id) == "string" then
            scores[e.id] = cljson.tonumber(e._score) or 0
        end
    end
    return scores
end

-- One channel's rows for one object type | nil, status (a failure: the channel is
-- left out; 403: the type is not the caller's to read).
local function channel_rows(ctx, kn_id, ot, cond, limit)
    local res, err = ctx.http { upstream = "ontology_query", method = "POST",
        path = kn_path(kn_id) .. "/object-types/" .. util.escape(ot.id), query = OQ_QUERY, headers = OVERRIDE,
        json = cljson.object({ condition = cond, limit = limit, need_total = false },
            { "condition", "limit", "need_total" }) }
    if not util.is_2xx(res) then
        ctx.log("warn", "instance search of " .. tostring(ot.id) .. " failed (" ..
            (res and tostring(res.status) or (type(err) == "table" and tostring(err.code) or "unreachable")) .. ")")
        return nil, res and res.status
    end
    local body = util.try_json(res)
    if type(body) ~= "table" or type(body.datas) ~= "table" then
        return nil, 502
    end
    return body.datas
end

-- The fused nodes of one object type (at most per_type), or {}.
local function recall(ctx, kn_id, ot, order, args)
    local f = retrieval.fields(ot)
    local channels = {}
    for _, name in ipairs({ "knn", "match" }) do
        local cond = retrieval.condition(name, args.query, f[name], args.max_instances_per_type)
        if cond then
            local rows, status = channel_rows(ctx, kn_id, ot, cond, candidates(args.max_instances_per_type))
            if rows then
                channels[#channels + 1] = { name = name, rows = rows }
            elseif status == 403 then
                return {} -- the data is not the caller's to read: the type takes no part
            end
        end
    end
    local nodes = retrieval.sort(retrieval.fuse(ot, order, channels))
    return retrieval.take(nodes, args.max_instances_per_type), f
end

local function rerank(ctx, query, nodes, fields_of)
    local n = math.min(#nodes, retrieval.RERANK_TOP_N)
    local docs = util.array()
    for i = 1, n do
        local f = fields_of[nodes[i].ot.id] or { match = {}, knn = {} }
        local names = {}
        for _, x in ipairs(f.match) do
            names[#names + 1] = x
        end
        for _, x in ipairs(f.knn) do
            names[#names + 1] = x
        end
        docs[i] = retrieval.document(nodes[i], names)
    end
    local res, err = ctx.http { upstream = "mf_model_api", method = "POST", path = "/v1/small-model/reranker",
        timeout_ms = RERANK_TIMEOUT_MS, json = util.object({ query = query, documents = docs, model = "" },
            { "query", "documents", "model" }) }
    local scores, why
    if util.is_2xx(res) then
        scores, why = retrieval.reranker_scores(util.try_json(res), n)
    else
        why = res and ("status " .. tostring(res.status)) or
            (type(err) == "table" and tostring(err.code) or "unreachable")
    end
    if scores == nil then
        ctx.log("warn", "reranker unavailable (" .. tostring(why) .. "): fused order kept")
        return nodes, false
    end
    return retrieval.rerank(nodes, scores, n), true
end

local NODE_KEYS = { "object_type_id", "object_type_name", "properties", "rank", "score", "bm25_score", "knn_score",
    "reranker_score" }

local function node_out(node, rank)
    local row = node.row
    row._score = nil
    return cljson.object({ object_type_id = node.ot.id, object_type_name = node.ot.name, properties = row,
        rank = rank, score = retrieval.round(node.score), bm25_score = node.bm25, knn_score = node.knn,
        reranker_score = node.reranker }, NODE_KEYS)
end

-- The brief definition of an object type: what reading its nodes needs. index_only:
-- only the index-backed operations (match, multi_match, knn) are listed.
local function type_out(ot, index_only)
    local props = util.array()
    for _, p in ipairs(type(ot.data_properties) == "table" and ot.data_properties or {}) do
        if type(p) == "table" then
            local out = util.object({ name = p.name, type = p.type },
                { "name", "type", "comment", "condition_operations" })
            if type(p.comment) == "string" and p.comment ~= "" then
                out.comment = p.comment
            end
            if type(p.condition_operations) == "table" then
                local ops = util.array()
                for _, op in ipairs(p.condition_operations) do
                    if not index_only or INDEX_OPS[op] then
                        ops[#ops + 1] = op
                    end
                end
                if #ops > 0 then
                    out.condition_operations = ops
                end
            end
            props[#props + 1] = out
        end
    end
    local c = util.object({ concept_id = ot.id, concept_name = ot.name, data_source = ot.data_source,
        data_properties = props }, { "concept_id", "concept_name", "comment", "data_source", "data_properties" })
    if type(ot.comment) == "string" and ot.comment ~= "" then
        c.comment = ot.comment
    end
    return c
end

function M.handle(args, ctx)
    local m = msg(ctx)
    local kn_id = args.kn_id or ctx.kn_id_header
    if type(kn_id) ~= "string" or kn_id == "" then
        return nil, errors.refuse(400, ctx.lang, m.no_kn)
    end
    local dot = errors.dot_ids(ctx.lang, { kn_id = kn_id }, "kn_id")
    if dot then
        return nil, dot
    end
    local kn, err = network(ctx, kn_id)
    if kn == nil then
        return nil, err
    end
    local in_groups, unknown = retrieval.groups(kn, args.concept_groups)
    if #unknown > 0 then
        return nil, errors.refuse(400, ctx.lang, string.format(m.unknown_groups, table.concat(unknown, ", ")))
    end
    local scoped, unmatched = retrieval.scope(kn.object_types, args.object_types, args.exclude_object_types, in_groups)
    local allowed = {}
    if #scoped > 0 then
        allowed, err = permitted(ctx, kn_id, scoped)
        if allowed == nil then
            return nil, err
        end
    end
    local messages = {}
    if #unmatched > 0 then
        messages[#messages + 1] = string.format(m.not_found, table.concat(unmatched, ", "))
    end
    local ranked = {}
    if #allowed > 0 then
        ranked = retrieval.rank_types(allowed, concept_scores(ctx, kn_id, args), args.max_object_types)
    end
    local per_type, fields_of = {}, {}
    for i, ot in ipairs(ranked) do
        local nodes, f = recall(ctx, kn_id, ot, i, args)
        per_type[#per_type + 1] = nodes
        fields_of[ot.id] = f
    end
    local nodes = retrieval.merge(per_type)
    if args.rerank and #nodes >= 2 then
        local ok
        nodes, ok = rerank(ctx, args.query, nodes, fields_of)
        if not ok then
            messages[#messages + 1] = m.rerank_down
        end
    end
    local out = cljson.object({ nodes = util.array() }, { "nodes", "object_types", "message" })
    local hit = {}
    for i, node in ipairs(nodes) do
        out.nodes[i] = node_out(node, i)
        hit[node.ot.id] = true
    end
    if args.include_object_types and #nodes > 0 then
        out.object_types = util.array()
        for _, ot in ipairs(ranked) do
            if hit[ot.id] then
                out.object_types[#out.object_types + 1] = type_out(ot, ctx.surface ~= "rest")
            end
        end
    end
    if #nodes == 0 then
        messages[#messages + 1] = #ranked == 0 and m.no_types or m.no_match
    end
    if #messages > 0 then
        out.message = table.concat(messages, ctx.lang == "en-US" and " " or "")
    end
    return out
end

return M
