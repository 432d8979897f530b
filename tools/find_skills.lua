-- find_skills (REST and the on-demand gateway): the skills bound to an object type,
-- optionally to some of its instances. Skills are instances of the network's
-- reserved object type `skills` (skill_id, name, description); a relation type
-- between an object type and `skills` binds them. The network's export view
-- (bkn-backend) gives the binding; ontology-query's relation-path subgraph gives the
-- skills along it (or, for `skills` itself, an instance search).
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local knschema = require "_lib.knschema"

local text = util.text

local SKILLS = "skills"
local REQUIRED_PROPS = { "skill_id", "name" }
local DEFAULT_TOP_K = 10

local M = {
    name = "find_skills",
    version = "1.0.0",
    kind = "read",
    title = text("技能召回", "Find Skills"),
    description = text(
        "召回绑定到某个对象类（可再限定到其中几个实例）的技能。object_type_id 必填；instance_identities " ..
            "取自查询结果的 _instance_identity；skill_query 按技能名称与说明筛选；top_k 默认 10（1–20）。" ..
            "返回 entries（skill_id、name、description）；为空时 message 说明原因。技能内容用 " ..
            "get_skill_content 读取。",
        "Recalls the skills bound to an object type (optionally to some of its instances). " ..
            "object_type_id is required; instance_identities are _instance_identity values of " ..
            "query results; skill_query filters by skill name and description; top_k defaults to " ..
            "10 (1-20). Returns entries (skill_id, name, description); when empty, message says " ..
            "why. Read a skill with get_skill_content."),
    short_description = text(
        "召回绑定到对象类（或其实例）的技能：entries（skill_id、name、description）；为空时读 message。",
        "Recalls the skills bound to an object type (or its instances): entries (skill_id, name, " ..
            "description); read message when empty."),
    group = "skill",
    order = 510,
    surfaces = { "rest", "gateway" },
    toon_view = true,
    upstream = { "bkn_backend", "ontology_query" },
    input_schema = fields.input {
        required = { "object_type_id" },
        properties = {
            kn_id = fields.kn_id(text("知识网络 ID（也可用 X-Kn-ID 请求头）",
                "Knowledge network id (or the X-Kn-ID header)")),
            object_type_id = fields.ot_id(text("对象类 ID", "Object type id")),
            instance_identities = fields.instance_identities(100,
                "只召回绑定到这些实例的技能（查询结果的 _instance_identity）",
                "Only skills bound to these instances (_instance_identity of query results)"),
            skill_query = fields.string(text("按技能名称与说明筛选", "Filter by skill name and description"), 512),
            top_k = fields.integer(1, 20, text("最多返回的技能数，默认 10", "Skills to return at most, default 10"),
                DEFAULT_TOP_K),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            entries = { type = "array", items = { type = "object" },
                description = text("skill_id、name、description", "skill_id, name, description") },
            message = { type = "string" },
        },
    },
}

local MESSAGES = text(
    {
        no_kn = "kn_id is required (pass kn_id or the X-Kn-ID header)",
        no_binding = "该对象类没有绑定技能（没有与 skills 对象类相连的关系类）。",
        no_instance_match = "这些实例没有绑定技能。",
        no_type_match = "该对象类的实例没有绑定技能。",
        no_query_match = "没有与 skill_query 匹配的技能；可放宽或去掉 skill_query。",
    },
    {
        no_kn = "kn_id is required (pass kn_id or the X-Kn-ID header)",
        no_binding = "No skill is bound to this object type (no relation type links it to the skills object type).",
        no_instance_match = "No skill is bound to these instances.",
        no_type_match = "No skill is bound to the instances of this object type.",
        no_query_match = "No skill matches skill_query; widen or drop it.",
    })

local function kn_path(kn_id)
    return "/in/v1/knowledge-networks/" .. util.escape(kn_id)
end

local function find(list, pred)
    for _, v in ipairs(type(list) == "table" and list or {}) do
        if type(v) == "table" and pred(v) then
            return v
        end
    end
    return nil
end

-- The skill_query condition over the skills type's searchable fields (name,
-- description): match, and knn where the field declares it | nil.
local function query_condition(skills, q)
    if type(q) ~= "string" or q:match("^%s*$") then
        return nil
    end
    local subs = util.array()
    for _, p in ipairs(type(skills.data_properties) == "table" and skills.data_properties or {}) do
        if type(p) == "table" and (p.name == "name" or p.name == "description") then
            subs[#subs + 1] = cljson.object({ field = p.name, operation = "match", value = q, value_from = "const" },
                { "field", "operation", "value", "value_from" })
        end
    end
    if #subs == 0 then
        return nil
    end
    return cljson.object({ operation = "or", sub_conditions = subs }, { "operation", "sub_conditions" })
end

-- The instances given, as a condition: any of them (each: all of its keys equal).
local function identities_condition(list)
    if type(list) ~= "table" or #list == 0 then
        return nil
    end
    local any = util.array()
    for _, ident in ipairs(list) do
        local all = util.array()
        local keys = cljson.is_object(ident) and cljson.keys(ident) or nil
        if keys == nil then
            keys = {}
            for k in pairs(ident) do
                keys[#keys + 1] = k
            end
            table.sort(keys)
        end
        for _, k in ipairs(keys) do
            all[#all + 1] = cljson.object({ field = k, operation = "==", value = ident[k], value_from = "const" },
                { "field", "operation", "value", "value_from" })
        end
        if #all > 0 then
            any[#any + 1] = cljson.object({ operation = "and", sub_conditions = all },
                { "operation", "sub_conditions" })
        end
    end
    if #any == 0 then
        return nil
    end
    return cljson.object({ operation = "or", sub_conditions = any }, { "operation", "sub_conditions" })
end

local function both(a, b)
    if a == nil or b == nil then
        return a or b
    end
    return cljson.object({ operation = "and", sub_conditions = util.array({ a, b }) },
        { "operation", "sub_conditions" })
end

local function entry(props)
    return cljson.object({ skill_id = props.skill_id, name = props.name, description = props.description },
        { "skill_id", "name", "description" })
end

-- Skills from instance rows (skills queried directly), at most top_k.
local function from_rows(rows, top_k)
    local out, seen = util.array(), {}
    for _, r in ipairs(type(rows) == "table" and rows or {}) do
        if #out >= top_k then
            break
        end
        if type(r) == "table" and r.skill_id ~= nil and not seen[tostring(r.skill_id)] then
            seen[tostring(r.skill_id)] = true
            out[#out + 1] = entry(r)
        end
    end
    return out
end

-- Skills from relation-path subgraphs, in path order, each once, at most top_k.
local function from_subgraphs(entries, top_k)
    local out, seen = util.array(), {}
    for _, g in ipairs(type(entries) == "table" and entries or {}) do
        local objects = type(g) == "table" and type(g.objects) == "table" and g.objects or {}
        for _, p in ipairs(type(g) == "table" and type(g.relation_paths) == "table" and g.relation_paths or {}) do
            for _, rel in ipairs(type(p) == "table" and type(p.relations) == "table" and p.relations or {}) do
                for _, id in ipairs({ rel.source_object_id, rel.target_object_id }) do
                    local o = objects[id]
                    if #out < top_k and type(o) == "table" and o.object_type_id == SKILLS and
                        type(o.properties) == "table" and o.properties.skill_id ~= nil and
                        not seen[tostring(o.properties.skill_id)] then
                        seen[tostring(o.properties.skill_id)] = true
                        out[#out + 1] = entry(o.properties)
                    end
                end
            end
        end
    end
    return out
end

local function result(entries, message)
    local out = cljson.object({ entries = entries }, { "entries", "message" })
    if #entries == 0 then
        out.message = message
    end
    return out
end

function M.handle(args, ctx)
    local m = MESSAGES[ctx.lang] or MESSAGES["zh-CN"]
    local kn_id = args.kn_id or ctx.kn_id_header
    if type(kn_id) ~= "string" or kn_id == "" then
        return nil, errors.refuse(400, ctx.lang, m.no_kn)
    end
    local dot = errors.dot_ids(ctx.lang, { kn_id = kn_id, object_type_id = args.object_type_id }, "kn_id",
        "object_type_id")
    if dot then
        return nil, dot
    end
    local kn, err = knschema.export(ctx, kn_id)
    if kn == nil then
        return nil, err
    end
    local skills = find(kn.object_types, function(ot) return ot.id == SKILLS end)
    if skills == nil then
        return nil, errors.refuse(404, ctx.lang, { kn_id = kn_id, skills_object_type_id = SKILLS,
            reason = "skills object type not found in the knowledge network" })
    end
    local missing = util.array()
    for _, name in ipairs(REQUIRED_PROPS) do
        if not find(skills.data_properties, function(p) return p.name == name end) then
            missing[#missing + 1] = name
        end
    end
    if #missing > 0 then
        return nil, errors.refuse(400, ctx.lang, { kn_id = kn_id, skills_object_type_id = SKILLS,
            missing_data_properties = missing, reason = "skills object type contract is incomplete" })
    end
    local ot_id = args.object_type_id
    if not find(kn.object_types, function(ot) return ot.id == ot_id end) then
        return nil, errors.refuse(404, ctx.lang, { kn_id = kn_id, object_type_id = ot_id,
            reason = "object_type_id not found in the knowledge network" })
    end
    local top_k = args.top_k or DEFAULT_TOP_K
    local skill_cond = query_condition(skills, args.skill_query)
    local inst_cond = identities_condition(args.instance_identities)
    local has_instances = inst_cond ~= nil
    local empty = skill_cond and m.no_query_match or (has_instances and m.no_instance_match or m.no_type_match)
    if ot_id == SKILLS then
        local body, ferr = errors.fetch(ctx, { upstream = "ontology_query", method = "POST",
            path = kn_path(kn_id) .. "/object-types/" .. SKILLS,
            query = { include_type_info = "false", include_logic_params = "false" },
            headers = { ["x-http-method-override"] = "GET" },
            json = cljson.object({ condition = both(skill_cond, inst_cond), limit = top_k,
                properties = util.array({ "skill_id", "name", "description" }) },
                { "condition", "limit", "properties" }) })
        if body == nil then
            return nil, ferr
        end
        return result(from_rows(body.datas, top_k), empty)
    end
    local rt = find(kn.relation_types, function(r)
        return (r.source_object_type_id == ot_id and r.target_object_type_id == SKILLS) or
            (r.source_object_type_id == SKILLS and r.target_object_type_id == ot_id)
    end)
    if rt == nil then
        return result(util.array(), m.no_binding)
    end
    local source = cljson.object({ id = ot_id, condition = inst_cond }, { "id", "condition", "limit" })
    local target = cljson.object({ id = SKILLS, condition = skill_cond }, { "id", "condition", "limit" })
    local path = cljson.object({
        object_types = util.array({ source, target }),
        relation_types = util.array({ cljson.object({ relation_type_id = rt.id, source_object_type_id = ot_id,
            target_object_type_id = SKILLS },
            { "relation_type_id", "source_object_type_id", "target_object_type_id" }) }),
    }, { "object_types", "relation_types", "limit" })
    local body, ferr = errors.fetch(ctx, { upstream = "ontology_query", method = "POST",
        path = kn_path(kn_id) .. "/subgraph", query = { query_type = "relation_path" },
        headers = { ["x-http-method-override"] = "GET" },
        json = cljson.object({ relation_type_paths = util.array({ path }) }, { "relation_type_paths" }) })
    if body == nil then
        return nil, ferr
    end
    return result(from_subgraphs(body.entries, top_k), empty)
end

return M
