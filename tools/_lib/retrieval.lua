-- _lib.retrieval: the pure steps of natural-language instance recall
-- (search_instance): which object types take part (concept groups, an allow list and
-- an exclude list, the caller's query_data grants, the top-K cut), which fields each
-- channel searches, reciprocal rank fusion of the keyword and vector channels, the
-- one total order of the result, and the reranker's refinement. No step calls an
-- upstream: the tool makes the calls and hands the answers in, so every rule here is
-- tested on recorded answers.
local cljson = require "cljson"

local M = {}

-- Fusion constant and channel weights: with equal weights a row ranked first by one
-- channel scores exactly 1.0 and a row ranked first by both 2.0, in every object type
-- (score = sum of w / (k + rank) over the channels, times 2 (k + 1)).
M.RRF_K = 60
M.KNN_WEIGHT = 0.5

-- The reranker sees the first RERANK_TOP_N rows of the fused order; the rest keep it.
M.RERANK_TOP_N = 50
-- A reranker document: at most FIELD_CHARS characters of one value, DOC_BYTES in all.
M.FIELD_CHARS = 200
M.DOC_BYTES = 3600

local function is_list(v)
    return type(v) == "table"
end

local function set_of(list)
    local s = {}
    for _, v in ipairs(is_list(list) and list or {}) do
        if type(v) == "string" then
            s[v] = true
        end
    end
    return s
end

-- groups(kn, wanted) -> set of object type ids in the wanted concept groups, and the
-- wanted groups the network does not have (in the order given) | nil, {} when no
-- group is wanted (every object type takes part).
function M.groups(kn, wanted)
    if not is_list(wanted) or #wanted == 0 then
        return nil, {}
    end
    local by_id = {}
    for _, g in ipairs(is_list(kn.concept_groups) and kn.concept_groups or {}) do
        if type(g) == "table" and type(g.id) == "string" then
            by_id[g.id] = g
        end
    end
    local ids, unknown, seen = {}, {}, {}
    for _, name in ipairs(wanted) do
        local g = by_id[name]
        if g == nil then
            if not seen[name] then
                unknown[#unknown + 1] = name
            end
        else
            for _, id in ipairs(is_list(g.object_type_ids) and g.object_type_ids or {}) do
                ids[id] = true
            end
        end
        seen[name] = true
    end
    return ids, unknown
end

-- scope(object_types, allow, exclude [, in_groups]) -> the object types that take
-- part, in the given order, and the allowed ids that matched none of them. An id in
-- both lists is excluded: exclusion wins. in_groups (from groups) narrows first.
function M.scope(object_types, allow, exclude, in_groups)
    local allowed = is_list(allow) and #allow > 0 and set_of(allow) or nil
    local excluded = set_of(exclude)
    local kept, found = {}, {}
    for _, ot in ipairs(object_types) do
        local id = type(ot) == "table" and ot.id or nil
        if type(id) == "string" and (in_groups == nil or in_groups[id]) then
            if allowed and allowed[id] then
                found[id] = true
            end
            if (allowed == nil or allowed[id]) and not excluded[id] then
                kept[#kept + 1] = ot
            end
        end
    end
    local unmatched = {}
    if allowed then
        for _, id in ipairs(allow) do
            if not found[id] and not excluded[id] then
                unmatched[#unmatched + 1] = id
                found[id] = true -- listed once
            end
        end
    end
    return kept, unmatched
end

-- filter_request(kn_id, object_types, accessor) -> bkn-safe's resource-filter body:
-- which of these object types the caller may query (query_data).
function M.filter_request(kn_id, object_types, accessor)
    local resources = setmetatable({}, cljson.array_mt)
    for i, ot in ipairs(object_types) do
        resources[i] = cljson.object({ type = "object_type", id = kn_id .. "/" .. ot.id }, { "type", "id" })
    end
    return cljson.object({ accessor_id = accessor, resources = resources,
        visibility_operations = setmetatable({ "query_data" }, cljson.array_mt),
        candidate_operations = setmetatable({ "query_data" }, cljson.array_mt) },
        { "accessor_id", "resources", "visibility_operations", "candidate_operations" })
end

-- permitted(kn_id, object_types, body) -> the object types the answer grants
-- query_data on, in the given order | nil, reason for an answer that breaks the
-- contract (no resources array, a type, id or operation that was not asked about,
-- a resource twice): then nothing can be trusted, and the caller refuses (fail
-- closed), never shows an unfiltered list.
function M.permitted(kn_id, object_types, body)
    if type(body) ~= "table" or type(body.resources) ~= "table" then
        return nil, "the answer has no resources array"
    end
    local asked = {}
    for _, ot in ipairs(object_types) do
        asked[kn_id .. "/" .. ot.id] = ot.id
    end
    local granted, seen = {}, {}
    for _, r in ipairs(body.resources) do
        if type(r) ~= "table" or r.resource_type ~= "object_type" then
            return nil, "unexpected resource type"
        end
        local id = asked[r.resource_id]
        if id == nil then
            return nil, "unexpected resource id " .. tostring(r.resource_id)
        end
        if seen[id] then
            return nil, "resource " .. tostring(r.resource_id) .. " listed twice"
        end
        seen[id] = true
        if type(r.operations) ~= "table" then
            return nil, "resource " .. tostring(r.resource_id) .. " has no operations"
        end
        for _, op in ipairs(r.operations) do
            if op ~= "query_data" then
                return nil, "unexpected operation " .. tostring(op)
            end
            granted[id] = true
        end
    end
    local out = {}
    for _, ot in ipairs(object_types) do
        if granted[ot.id] then
            out[#out + 1] = ot
        end
    end
    return out
end

-- rank_types(object_types, scores, top_k) -> the object types ordered by their
-- concept score (scores[id], absent = 0), ties in the given order, cut to top_k.
-- The given order is the network's, so a recall without scores keeps it.
function M.rank_types(object_types, scores, top_k)
    local list = {}
    for i, ot in ipairs(object_types) do
        list[i] = { ot = ot, s = scores and tonumber(scores[ot.id]) or 0, i = i }
    end
    table.sort(list, function(a, b)
        if a.s ~= b.s then
            return a.s > b.s
        end
        return a.i < b.i
    end)
    local out = {}
    for i = 1, math.min(#list, top_k) do
        out[i] = list[i].ot
    end
    return out
end

local TEXT_TYPES = { text = true, string = true, varchar = true, char = true }

-- fields(ot) -> {knn = {names}, match = {names}}: the text properties whose declared
-- operations let a channel search them (knn: the vector channel; match: the keyword
-- channel), in property order.
function M.fields(ot)
    local out = { knn = {}, match = {} }
    for _, p in ipairs(is_list(ot.data_properties) and ot.data_properties or {}) do
        local t = type(p) == "table" and type(p.type) == "string" and p.type:lower():match("^(%a+)") or nil
        if t and TEXT_TYPES[t] and type(p.name) == "string" and is_list(p.condition_operations) then
            for _, op in ipairs(p.condition_operations) do
                if op == "knn" then
                    out.knn[#out.knn + 1] = p.name
                elseif op == "match" then
                    out.match[#out.match + 1] = p.name
                end
            end
        end
    end
    return out
end

-- condition(channel, query, names, k) -> the condition of one channel: the whole
-- query against each field (an or), knn with k neighbours | nil when the channel has
-- no field.
function M.condition(channel, query, names, k)
    if #names == 0 then
        return nil
    end
    local subs = setmetatable({}, cljson.array_mt)
    for i, name in ipairs(names) do
        if channel == "knn" then
            subs[i] = cljson.object({ field = name, operation = "knn", value = query, value_from = "const",
                limit_key = "k", limit_value = k }, { "field", "operation", "value", "value_from", "limit_key",
                "limit_value" })
        else
            subs[i] = cljson.object({ field = name, operation = "match", value = query, value_from = "const" },
                { "field", "operation", "value", "value_from" })
        end
    end
    return cljson.object({ operation = "or", sub_conditions = subs }, { "operation", "sub_conditions" })
end

-- A row's identity across channels: the object type and the row's _instance_id,
-- else its _instance_identity; nil when it has neither (the row then stands alone).
local function key_of(ot_id, row)
    local id = row._instance_id
    if type(id) == "string" and id ~= "" then
        return ot_id .. "|" .. id
    end
    local ident = row._instance_identity
    if type(ident) == "table" then
        local keys = {}
        for k in pairs(ident) do
            keys[#keys + 1] = tostring(k)
        end
        table.sort(keys)
        local parts = {}
        for i, k in ipairs(keys) do
            parts[i] = k .. "=" .. tostring(ident[k])
        end
        if #parts > 0 then
            return ot_id .. "|" .. table.concat(parts, "&")
        end
    end
    return nil
end

local function number_of(v)
    local n = cljson.tonumber(v)
    if type(n) == "number" and n == n and n ~= math.huge and n ~= -math.huge then
        return n
    end
    return nil
end

local function weight(name, knn_weight)
    local w = knn_weight or M.KNN_WEIGHT
    if w < 0 then
        w = 0
    elseif w > 1 then
        w = 1
    end
    if name == "knn" then
        return w
    elseif name == "match" then
        return 1 - w
    end
    return 0.5
end

-- fuse(ot, order, channels [, k [, knn_weight]]) -> nodes of one object type:
-- channels = { {name = "knn"|"match", rows = {...}}, ... }, the rows of each in the
-- channel's own order (a failed channel is simply absent). A row found by both is one
-- node; it keeps each channel's raw score under its own name (knn_score, bm25_score)
-- and its fused score = sum of w / (k + rank) times 2 (k + 1). order: the object
-- type's concept rank (the tie-breaker across types).
function M.fuse(ot, order, channels, k, knn_weight)
    k = (k and k > 0) and k or M.RRF_K
    local by_key, nodes = {}, {}
    for _, ch in ipairs(channels) do
        for rank, row in ipairs(ch.rows) do
            if type(row) == "table" then
                local key = key_of(ot.id, row)
                local node = key and by_key[key]
                if node == nil then
                    node = { ot = ot, order = order, row = row, sum = 0, seq = #nodes + 1 }
                    nodes[#nodes + 1] = node
                    if key then
                        by_key[key] = node
                    end
                end
                local raw = number_of(row._score)
                if raw then
                    if ch.name == "knn" and (node.knn == nil or raw > node.knn) then
                        node.knn = raw
                    elseif ch.name == "match" and (node.bm25 == nil or raw > node.bm25) then
                        node.bm25 = raw
                    end
                    if node.recall == nil or raw > node.recall then
                        node.recall = raw
                    end
                end
                node.sum = node.sum + weight(ch.name, knn_weight) / (k + rank)
            end
        end
    end
    local norm = 2 * (k + 1)
    for _, node in ipairs(nodes) do
        node.score = node.sum * norm
    end
    return nodes
end

local function display_of(node)
    local d = node.row._display
    return type(d) == "string" and d or ""
end

-- The one total order: fused score, then the object type's concept rank (scores of
-- different object types tie often: a channel's first row is 1.0 in each), then
-- within one type the raw recall score, the display name and the recall order.
local function before(a, b)
    if a.score ~= b.score then
        return a.score > b.score
    end
    if a.order ~= b.order then
        return a.order < b.order
    end
    local ra, rb = a.recall or -math.huge, b.recall or -math.huge
    if ra ~= rb then
        return ra > rb
    end
    local da, db = display_of(a), display_of(b)
    if da ~= db then
        return da < db
    end
    return a.seq < b.seq
end

-- sort(nodes) -> nodes in the one total order (in place).
function M.sort(nodes)
    table.sort(nodes, before)
    return nodes
end

-- take(nodes, n) -> the first n (a new list).
function M.take(nodes, n)
    local out = {}
    for i = 1, math.min(#nodes, n) do
        out[i] = nodes[i]
    end
    return out
end

-- merge(per_type) -> every type's nodes in one list, in the one total order.
function M.merge(per_type)
    local all = {}
    for _, nodes in ipairs(per_type) do
        for _, n in ipairs(nodes) do
            all[#all + 1] = n
        end
    end
    return M.sort(all)
end

local function cut_chars(s, n)
    if utf8.len(s) == nil or utf8.len(s) <= n then
        return s
    end
    return s:sub(1, utf8.offset(s, n + 1) - 1)
end

-- document(node, names) -> the text the reranker judges: the display name, then the
-- searched fields, then the other string properties by name ("name: value" lines; no
-- internal "_" properties), each value cut to FIELD_CHARS characters, the whole to
-- DOC_BYTES bytes at a line boundary.
function M.document(node, names)
    local lines, used, size = {}, {}, 0
    local function add(name, value)
        if type(value) ~= "string" or value:match("^%s*$") then
            return true
        end
        local line = cut_chars(value, M.FIELD_CHARS)
        if name then
            line = name .. ": " .. line
        end
        if size + #line + 1 > M.DOC_BYTES then
            return false
        end
        lines[#lines + 1] = line
        size = size + #line + 1
        return true
    end
    if not add(nil, node.row._display) then
        return table.concat(lines, "\n")
    end
    for _, name in ipairs(names or {}) do
        if not used[name] and name:sub(1, 1) ~= "_" then
            used[name] = true
            if not add(name, node.row[name]) then
                return table.concat(lines, "\n")
            end
        end
    end
    local rest = {}
    for k in pairs(node.row) do
        if type(k) == "string" and k:sub(1, 1) ~= "_" and not used[k] then
            rest[#rest + 1] = k
        end
    end
    table.sort(rest)
    for _, k in ipairs(rest) do
        if not add(k, node.row[k]) then
            break
        end
    end
    return table.concat(lines, "\n")
end

-- reranker_scores(body, n) -> {[1-based document] = relevance} | nil, why: the
-- reranker's answer for n documents; a malformed answer is a failure as a whole
-- (half-trusted scores would mix two orders), and so is one that scores nothing.
function M.reranker_scores(body, n)
    if type(body) ~= "table" or type(body.results) ~= "table" then
        return nil, "no results in the answer"
    end
    local scores, any = {}, false
    for _, r in ipairs(body.results) do
        local idx = type(r) == "table" and r.index or nil
        local s = type(r) == "table" and number_of(r.relevance_score) or nil
        if math.type(idx) ~= "integer" or idx < 0 or idx >= n or s == nil then
            return nil, "malformed result"
        end
        scores[idx + 1] = s
        any = true
    end
    if not any then
        return nil, "no document was scored"
    end
    return scores
end

-- rerank(nodes, scores, n) -> the order after the reranker judged the first n nodes:
-- those n by reranker score (ties: fused order), each with its reranker_score, then
-- the rest in fused order. scores == nil (the reranker failed or is off): the fused
-- order stands and no node gets a reranker_score.
function M.rerank(nodes, scores, n)
    if scores == nil then
        return nodes
    end
    local head = {}
    for i = 1, math.min(n, #nodes) do
        local node = nodes[i]
        node.reranker = scores[i]
        head[i] = { node = node, pos = i }
    end
    table.sort(head, function(a, b)
        local ra, rb = a.node.reranker or -math.huge, b.node.reranker or -math.huge
        if ra ~= rb then
            return ra > rb
        end
        return a.pos < b.pos
    end)
    local out = {}
    for i, h in ipairs(head) do
        out[i] = h.node
    end
    for i = #head + 1, #nodes do
        out[i] = nodes[i]
    end
    return out
end

-- round(x) -> x to 4 decimals (scores are evidence for the order, not more).
function M.round(x)
    if type(x) ~= "number" then
        return x
    end
    return math.floor(x * 10000 + 0.5) / 10000
end

return M
