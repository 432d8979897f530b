-- The token-saving TOON view in C (src/codec/toonview.c, cltoon.view) against its Lua oracle
-- (tests/spec/oracle/toonview.lua, the implementation tools used before): the same
-- view and the same text, byte for byte, over the spec fixtures and random row sets
-- from a fixed seed, on REST (always the view) and MCP (compact JSON unless the view
-- is the cheaper text in tokens), with and without query_object_instance's _instance_id rule.
local cpath = os.getenv("CLTOON_CPATH") or os.getenv("CLJSON_CPATH")
package.cpath = cpath and (cpath .. ";" .. package.cpath) or (package.cpath .. ";build/?.so")
local cljson = require "cljson"
local cltoon = require "cltoon"
local oracle = require "oracle.toonview"

local PREFIX = "kn-ot-"

-- Compares the C view of v with the oracle's; returns nil or a message.
local function differ(v, prefix)
    local omit = prefix and oracle.implied(v, prefix) or nil
    local want_view = oracle.view(v, omit)
    local want_json = cljson.encode(want_view)
    local want_rest = cltoon.encode(want_view)
    local want_mcp = oracle.render(v, { surface = "mcp" }, omit)
    want_mcp = want_mcp == nil and cljson.encode(v) or cltoon.encode(want_mcp)
    -- query_object_instance's rule (its toon_view omit_id) with the call's prefix
    local rule = prefix and { rows = "datas", id = "_instance_id", identity = "_instance_identity",
        prefix = prefix } or nil
    local got_json, got_rest = cltoon.view(v, rule)
    local _, got_mcp = cltoon.view(v, rule, true)
    if got_json ~= want_json then
        return "view " .. tostring(got_json) .. "\n  want " .. want_json
    elseif got_rest ~= want_rest then
        return "REST text " .. tostring(got_rest) .. "\n  want " .. tostring(want_rest)
    elseif got_mcp ~= want_mcp then
        return "MCP text " .. tostring(got_mcp) .. "\n  want " .. tostring(want_mcp)
    end
    return nil
end

local seen = { table = 0, omit = 0, json = 0 } -- how often each branch was taken

local function check(v, what)
    if cljson.encode(oracle.view(v)) ~= cljson.encode(v) then
        seen.table = seen.table + 1
    end
    if oracle.implied(v, PREFIX) then
        seen.omit = seen.omit + 1
    end
    if oracle.render(v, { surface = "mcp" }) == nil then
        seen.json = seen.json + 1
    end
    for _, prefix in ipairs({ false, PREFIX }) do
        local msg = differ(v, prefix or nil)
        if msg then
            error(what .. " (" .. (prefix and "omit rule" or "plain") .. "): " .. msg ..
                "\n  input " .. cljson.encode(v), 0)
        end
    end
end

-- Random values shaped like tool results: rows of records sharing (or not) keys,
-- nested records, lists, big numbers, nulls, dotted and non-identifier keys.
local KEYS = { "id", "name", "a", "b", "_instance_id", "_instance_identity", "ext", "tags",
    "sub", "x.y", "1k", "k-ey", "n" }

local function pick(t)
    return t[math.random(#t)]
end

local gen

local function prim()
    local r = math.random(9)
    if r == 1 then
        return math.random(-5, 5)
    elseif r == 2 then
        return math.random() * 100
    elseif r == 3 then
        return pick({ "x", "", "a,b", "阿司匹林", "1", "true", "- item", "a:b" })
    elseif r == 4 then
        return math.random(2) == 1
    elseif r == 5 then
        return cljson.null
    elseif r == 6 then
        return cljson.decode("12345678901234567890123")
    elseif r == 7 then
        return pick({ 1.0, 3.0, -0.5, 1e20, 2.5e-7 })
    else
        return "s" .. math.random(3)
    end
end

local function record(depth, keys)
    local t = {}
    for _, k in ipairs(keys) do
        t[k] = gen(depth + 1)
    end
    if math.random(4) == 1 then
        return cljson.object(t, keys) -- a remembered key order
    end
    return t
end

local function some_keys()
    local keys, used = {}, {}
    for _ = 1, math.random(0, 4) do
        local k = pick(KEYS)
        if not used[k] then
            used[k] = true
            keys[#keys + 1] = k
        end
    end
    return keys
end

local function rows(depth)
    local keys = some_keys()
    local sub = math.random(3) == 1 and some_keys() or nil
    local list = {}
    for i = 1, math.random(1, 5) do
        local r = record(depth, math.random(8) == 1 and some_keys() or keys)
        if sub and math.random(6) ~= 1 then
            r.ext = record(depth + 1, sub)
        end
        if math.random(3) == 1 then
            r._instance_identity = { id = i }
            r._instance_id = PREFIX .. (math.random(10) == 1 and "x" or tostring(i))
        end
        list[i] = r
    end
    return list
end

gen = function(depth)
    local r = math.random(depth > 3 and 3 or 8)
    if r <= 3 then
        return prim()
    elseif r == 4 then
        return record(depth, some_keys())
    elseif r == 5 then
        local l = {}
        for i = 1, math.random(0, 3) do
            l[i] = gen(depth + 1)
        end
        return #l == 0 and cljson.array() or l
    else
        return rows(depth)
    end
end

describe("toonview in C", function()
    it("matches the Lua view on the spec cases", function()
        local cases = {
            '{"datas":[{"id":1,"tags":["a"],"ext":{"k":1},"_instance_identity":{"id":1},"_display":"x"},' ..
                '{"id":2,"tags":[],"ext":{},"_instance_identity":{"id":2},"_display":"y"}],"total_count":2}',
            '{"rows":[{"n":12345678901234567890123,"r":{"b":1,"a":2}}]}',
            '{"datas":[{"id":1,"_instance_id":"kn-ot-1","_instance_identity":{"id":1}}]}',
            '{"datas":[{"id":1,"_instance_id":"kn-ot-1"}]}',
            '{"rows":[{"a":1,"l":[1]},{"b":2,"l":[2]}]}',
            '{"rows":[{"a":1,"sub":[{"x":1}]}]}',
            '{"rows":[{"a":1,"l":[1]}],"rows_l":0}',
            '{"rows":[{"l":[1]}]}',
            '{"rows":[{"a.b":1,"l":[1]}]}',
            '{"rows":[{"a":1,"sub":[{"x":1,"m":{"k":"v"}},{"x":2,"m":{"k":"w"}}]}]}',
            '{"datas":[{"_instance_id":"kn-ot-1.5","_instance_identity":{"v":1.5}},' ..
                '{"_instance_id":"kn-ot-3.0","_instance_identity":{"v":3.0}},' ..
                '{"_instance_id":"kn-ot-1e+20","_instance_identity":{"v":1e20}},' ..
                '{"_instance_id":"kn-ot-true","_instance_identity":{"v":true}},' ..
                '{"_instance_id":"kn-ot-12345678901234567890123","_instance_identity":{"v":12345678901234567890123}}]}',
            '{"datas":[{"_instance_id":"kn-ot-1","_instance_identity":{"v":1},"a":{"b":{"c":[1]}}}]}',
            '{"datas":[{"_instance_id":"kn-ot-1","_instance_identity":[1]}]}',
            '{}', '{"a":[]}', '{"a":[{}]}', '{"a":[{},{}]}', '{"a":[[{"x":1}]]}',
        }
        for _, text in ipairs(cases) do
            check(cljson.decode(text), text)
        end
    end)

    it("matches the Lua view on every JSON fixture", function()
        local n = 0
        for name in io.popen("ls tests/spec/fixtures/*.json"):lines() do
            local f = assert(io.open(name, "rb"))
            local v = cljson.decode(f:read("a"))
            f:close()
            if type(v) == "table" and cljson.is_object(v) then
                check(v, name)
                n = n + 1
            end
        end
        assert.is_true(n > 20)
    end)

    it("matches the Lua view on random row sets from a fixed seed", function()
        math.randomseed(20261203)
        seen = { table = 0, omit = 0, json = 0 }
        for i = 1, 2000 do
            local v = {}
            for _ = 1, math.random(1, 3) do
                local k = pick({ "datas", "rows", "datas_tags", "rows_ext", "total_count", "x.y" })
                v[k] = math.random(5) == 1 and gen(1) or rows(1)
            end
            if math.random(4) == 1 then
                v = cljson.object(v, cljson.keys(v))
            end
            check(v, "random case " .. i)
        end
        -- the cases reach every branch: tables, the omit rule, the JSON fallback
        assert.is_true(seen.table > 200 and seen.omit > 20 and seen.json > 200,
            cljson.encode(seen))
    end)
end)
