-- The sandbox's own string.rep/upper/lower/reverse, table.insert/remove/move/concat/
-- unpack/sort, utf8.len and plain string.find (src/host/lbounded.c, lpattern.c: their
-- work is charged to the call's budget as it goes) give what the stock libraries give:
-- the same results and the same errors, case by case.
local clsandbox = require "clsandbox"
local helper = require "helper"

local cases = {
    [=[return string.rep("ab", 3, ",")]=],
    [=[return string.rep("", 5)]=],
    [=[return string.rep("x", 0)]=],
    [=[return string.rep("x", -1)]=],
    [=[return ("Hello World \200"):upper()]=],
    [=[return ("Hello World \200"):lower()]=],
    [=[return ("abc"):reverse()]=],
    [=[return (""):reverse()]=],
    [=[return ("x"):rep(1e10)]=],
    [=[local t = {1,2,3}; table.insert(t, 4); return table.concat(t, ",")]=],
    [=[local t = {1,2,3}; table.insert(t, 1, 0); return table.concat(t, ",")]=],
    [=[local t = {1,2,3}; table.insert(t, 5, 0); return table.concat(t, ",")]=],
    [=[local t = {1,2,3}; table.insert(t, 1, 2, 3)]=],
    [=[local t = {1,2,3}; return table.remove(t), table.concat(t, ",")]=],
    [=[local t = {1,2,3}; return table.remove(t, 1), table.concat(t, ",")]=],
    [=[local t = {}; return table.remove(t), #t]=],
    [=[local t = {}; return table.remove(t, 0)]=],
    [=[local t = {1}; return table.remove(t, 3)]=],
    [=[local t = {1,2,3}; return table.remove(t, 4)]=],
    [=[return table.concat(table.move({1,2,3,4,5}, 2, 4, 1), ",")]=],
    [=[return table.concat(table.move({1,2,3,4,5}, 1, 3, 3), ",")]=],
    [=[return table.concat(table.move({1,2,3}, 1, 3, 1, {9,9,9,9}), ",")]=],
    [=[return table.move({1,2,3}, 1, math.maxinteger, 2)]=],
    [=[return table.move({}, -1, math.maxinteger, 2)]=],
    [=[return table.concat({1, 2, "x", 4.5}, "-")]=],
    [=[return table.concat({1, {}, 3})]=],
    [=[return table.concat({1,2,3}, ",", 2, 3)]=],
    [=[return table.concat({}, ",", 3, 2)]=],
    [=[return table.unpack({1,2,3})]=],
    [=[return table.unpack({1,2,3}, 2)]=],
    [=[return table.unpack({1,2,3}, 2, 5)]=],
    [=[return table.unpack({}, 1, 1e8)]=],
    [=[return select('#', table.unpack({}, 3, 1))]=],
    [=[local t = {5,3,1,4,2}; table.sort(t); return table.concat(t, ",")]=],
    [=[local t = {5,3,1,4,2}; table.sort(t, function(a,b) return a > b end); return table.concat(t, ",")]=],
    [=[local t = {};
        for i = 1, 1000 do t[i] = (i * 7919) % 1000 end;
        table.sort(t);
        return t[1], t[500], t[1000]]=],
    [=[local t = {};
        for i = 1, 1000 do t[i] = (i * 7919) % 1000 end;
        table.sort(t, function(a, b) return a > b end);
        return t[1], t[500], t[1000]]=],
    [=[local t = {3, "a", 1}; table.sort(t)]=],
    [=[table.sort({1,2}, 3)]=],
    [=[return utf8.len("häll€ 😀")]=],
    [=[return utf8.len("\xff")]=],
    [=[return utf8.len("abc\xffdef")]=],
    [=[return utf8.len("abc", 2)]=],
    [=[return utf8.len("abc", -1)]=],
    [=[return utf8.len("abc", 5)]=],
    [=[return utf8.len("abc", 1, 10)]=],
    [=[return utf8.len("\u{D800}")]=],
    [=[return utf8.len("\u{D800}", 1, -1, true)]=],
    [=[return utf8.len("\u{7FFFFFFF}")]=],
    [=[return utf8.len("\u{7FFFFFFF}", 1, -1, true)]=],
    [=[return utf8.len("\xC0\x80")]=],
    [=[return utf8.len("", 1)]=],
    [=[return utf8.len("abc", 0)]=],
    [=[return utf8.len("abc", 4)]=],
    [=[return utf8.len("abc", math.mininteger)]=],
    [=[return ("abcabc"):find("ca", 1, true)]=],
    [=[return ("abcabc"):find("cb", 1, true)]=],
    [=[return ("aaaa"):find("aab", 1, true)]=],
    [=[local t = setmetatable({}, {__index = function(_, k) return k * 2 end, __len = function() return 4 end});
        return table.concat(t, ","), table.unpack(t)]=],
    [=[return table.insert(nil, 1)]=],
    [=[return table.concat("abc")]=],
}

local function pack(...)
    return { n = select("#", ...), ... }
end

-- "ok | value | value ..." of a pcall's results
local function show(...)
    local r = pack(...)
    local out = {}
    for i = 1, r.n do
        out[#out + 1] = tostring(r[i])
    end
    return table.concat(out, " | ")
end

describe("the budget-charged library functions", function()
    local sb = clsandbox.new(helper.lua_dir)
    it("match the stock libraries", function()
        for _, c in ipairs(cases) do
            local stock = assert(load(c, "=c", "t", _ENV))
            local charged = assert(sb.load(c, "=c"))
            assert.are.equal(show(pcall(stock)), show(pcall(charged)), c)
        end
    end)
end)
