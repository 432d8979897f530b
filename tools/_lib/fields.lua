-- _lib.fields: the input fields tools share, as schema tables with their zh-CN /
-- en-US descriptions, so that one parameter reads the same in every tool. Each call
-- returns a new table (a tool may add to it without touching another tool's).
-- description: text(zh, en) when the tool says more than the shared text.
local util = require "_lib.util"

local text = util.text

local M = {}

-- input { required = …, properties = …, … } -> a tool's input_schema: the same keys,
-- as an object that takes only the named properties (type = "object",
-- additionalProperties = false). Called with one table constructor, so a load error
-- still points at the line of the offending key.
function M.input(s)
    local out = { type = "object", additionalProperties = false }
    for k, v in pairs(s) do
        out[k] = v
    end
    return out
end

-- string(description [, max]): a non-empty string of at most max characters.
function M.string(description, max)
    return { type = "string", minLength = 1, maxLength = max, description = description }
end

-- integer(min, max, description [, default])
function M.integer(min, max, description, default)
    return { type = "integer", minimum = min, maximum = max, default = default, description = description }
end

local id = M.string

function M.kn_id(description)
    return id(description or text("知识网络 ID", "Knowledge network id"))
end

function M.ot_id(description)
    return id(description or text("对象类 ID", "Object type id"))
end

function M.at_id(description)
    return id(description or text("行动类 ID", "Action type id"))
end

function M.skill_id(description)
    return id(description or text("技能 ID", "Skill id"), 256)
end

-- ids(zh, en): 1 to 200 ids (or names) of schema elements.
function M.ids(zh, en)
    return {
        type = "array",
        minItems = 1,
        maxItems = 200,
        items = { type = "string", minLength = 1 },
        description = text(zh, en),
    }
end

-- limit(default, max [, min]): a page size; min 0 (the default) lets 0 mean the
-- default, which the description says.
function M.limit(default, max, min)
    min = min or 0
    local zh, en = "每页条数，默认 " .. default, "Page size, default " .. default
    if min == 0 then
        zh, en = zh .. "（0 表示默认值）", en .. " (0 means the default)"
    end
    return { type = "integer", minimum = min, maximum = max, default = default, description = text(zh, en) }
end

-- offset([description]): rows to skip.
function M.offset(description)
    return { type = "integer", minimum = 0, description = description or text("跳过的条数", "Number of entries to skip") }
end

-- page(): a 1-based page number.
function M.page()
    return { type = "integer", minimum = 1, default = 1, description = text("页码，从 1 开始", "Page number, from 1") }
end

-- search_after(max): the cursor of the next page, sent back as the previous page gave it.
function M.search_after(max)
    local zh, en = "游标翻页：上一页返回的 search_after，原样传回", "Page cursor: the search_after of the previous page, unchanged"
    return { type = "array", maxItems = max, description = text(zh, en) }
end

-- include_logic_params(what): whether the returned what ("rows", "objects", in
-- English) carry the parameters of logic properties.
function M.include_logic_params(what)
    local zh, en = "为 true 时返回逻辑属性的参数定义", "When true, " .. what .. " include the parameters of logic properties"
    return { type = "boolean", default = false, description = text(zh, en) }
end

-- instance_identities(max, zh, en [, min]): target instances, as _instance_identity
-- values of query results.
function M.instance_identities(max, zh, en, min)
    return { type = "array", minItems = min, maxItems = max, items = { type = "object" }, description = text(zh, en) }
end

return M
