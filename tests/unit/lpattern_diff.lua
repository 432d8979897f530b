-- Differential check of lpattern (argument 1: a table with its find, match, gmatch
-- and gsub) against the stock string library of this plain Lua state: a hand-written
-- table of tricky cases (every pattern error included), then random patterns built
-- from pattern tokens against random subjects (fixed seed). Returns the number of
-- cases run and a list of differences.
local ours = ...
local stock = string

local M = {}

local function show(v)
    if type(v) == "string" then
        return string.format("%q", v)
    end
    return type(v) .. ":" .. tostring(v)
end

-- argument errors name the function the caller used; the rest of the text must agree
local function norm_err(e)
    e = tostring(e)
    return (e:gsub("^bad argument #(%d+) to '[^']*'", "bad argument #%1"))
end

local function too_complex(e)
    return e:find("pattern too complex", 1, true) or e:find("stack overflow", 1, true)
end

local function outcome(ok, ...)
    if not ok then
        return "error", norm_err((...))
    end
    local parts = {}
    for i = 1, select("#", ...) do
        parts[#parts + 1] = show((select(i, ...)))
    end
    return "ok", table.concat(parts, ",")
end

local function call(lib, name, args)
    if name ~= "gmatch" then
        return outcome(pcall(lib[name], table.unpack(args, 1, args.n)))
    end
    local ok, it = pcall(lib.gmatch, table.unpack(args, 1, args.n))
    if not ok then
        return "error", norm_err(it)
    end
    local seen = {}
    for _ = 1, 100 do
        local r = table.pack(pcall(it))
        if not r[1] then
            return "error", table.concat(seen, ";") .. "|" .. norm_err(r[2])
        end
        if r[2] == nil then
            break
        end
        local _, text = outcome(table.unpack(r, 1, r.n))
        seen[#seen + 1] = text
    end
    return "ok", table.concat(seen, ";")
end

local function describe(name, args)
    local parts = {}
    for i = 1, args.n do
        parts[#parts + 1] = show(args[i])
    end
    return name .. "(" .. table.concat(parts, ", ") .. ")"
end

-- one comparison; appends to diffs on a difference
local function compare(diffs, name, args)
    local ks, vs = call(stock, name, args)
    local ko, vo = call(ours, name, args)
    if ks == ko and vs == vo then
        return
    end
    if ks == "error" and ko == "error" and (too_complex(vs) or too_complex(vo)) then
        return
    end
    if #diffs < 50 then
        diffs[#diffs + 1] = describe(name, args) .. "\n  stock: " .. ks .. " " .. vs ..
                                "\n  ours:  " .. ko .. " " .. vo
    end
end

local function repl_fn(...)
    local n = select("#", ...)
    local first = ...
    if n == 0 or (type(first) == "string" and #first % 3 == 1) then
        return nil
    end
    if type(first) == "string" and #first % 3 == 2 then
        return false
    end
    return "<" .. table.concat({...}, "|") .. ">"
end

local repl_tab = {a = "A", b = false, ab = 12, ["1"] = "one", [""] = "E", c = {}}

local fixed = {
    -- classes and escapes
    {"find", "hello world", "%a+"}, {"find", "x = 10", "%d+"}, {"match", "\1\2a", "%c+"},
    {"match", "  x", "%g"}, {"match", "aBc", "%l%u%l"}, {"match", "a,.b", "%p+"},
    {"match", "a \t\nb", "%s+"}, {"match", "ab_1", "%w+"}, {"match", "0xfF", "%x+"},
    {"match", "abc123", "%A+"}, {"match", "12ab", "%D+"}, {"match", "ab ", "%S+"},
    {"match", "a.b", "%."}, {"match", "a%b", "%%"}, {"match", "ab", "."}, {"match", "", "."},
    {"match", "a]b", "%]"}, {"match", "zz", "%z"}, {"match", "a+b", "a%+b"},
    -- sets
    {"match", "abc-", "[a-c]+"}, {"match", "abc-", "[^a-c]+"}, {"match", "]x", "[]]"},
    {"match", "]x", "[^]]"}, {"match", "a-z", "[a-]+"}, {"match", "-", "[-a]"},
    {"match", "a1 ", "[%d%s]+"}, {"match", "x^", "[%^x]+"}, {"match", "x^", "[x^]+"},
    {"match", "c", "[c-a]"}, {"match", "%", "[%%]"}, {"match", "b", "[a-%]"},
    {"match", "]", "[%]]"}, {"match", "ab", "[^%a]"}, {"match", "a-", "[a%-]+"},
    -- quantifiers
    {"match", "aaa", "a*"}, {"match", "aaa", "a+"}, {"match", "aaa", "a-"},
    {"match", "aaab", "a-b"}, {"match", "ab", "a?b"}, {"match", "b", "a?b"},
    {"match", "<a><b>", "<(.-)>"}, {"match", "<a><b>", "<(.*)>"}, {"match", "x", "x*?"},
    {"match", "a*", "a*%*"}, {"find", "aaa", "a-$"}, {"find", "aaa", "b*"},
    -- anchors
    {"find", "abc", "^b"}, {"find", "abc", "^a"}, {"find", "abc", "c$"}, {"find", "a$c", "$c"},
    {"find", "abc", "^"}, {"find", "abc", "$"}, {"find", "a^b", "a^b"}, {"find", "^", "^^"},
    {"gsub", "abc", "^", "x"}, {"gsub", "abc", "$", "x"}, {"gsub", "aaa", "^a", "b"},
    {"gmatch", "^a^a", "^a"}, {"gsub", "a$b", "$b", "!"},
    -- captures
    {"match", "key = value", "(%w+)%s*=%s*(%w+)"}, {"find", "hello", "(l)(l)"},
    {"match", "hello", "()ll()"}, {"find", "hello", "()"}, {"match", "abab", "(ab)%1"},
    {"match", "abc", "((a)(b))"}, {"match", "abcabc", "(a(b)c)%1"},
    {"match", "xyx", "()(y)%1"}, {"match", "aa", "()%1"}, {"match", "aa", "(a)%1%1"},
    {"match", "x(a(b)c)y", "%b()"}, {"match", "((", "%b()"}, {"match", "aXbXc", "%bXX"},
    {"match", "THE (quick) fox", "%f[%a]%a+"}, {"gsub", "THE (quick) fox", "%f[%a]%a+", "W"},
    {"gsub", "hello world", "%f[%w]%w+%f[%W]", "X"}, {"find", "ab", "%f[%z]"},
    {"find", "ab", "%f[^%z]"}, {"gmatch", "a1b22c333", "%d+"}, {"gmatch", "abc", "()"},
    {"match", string.rep("(", 31) .. string.rep(")", 31), string.rep("%(", 31) .. "()"},
    {"match", "a", string.rep("()", 32)}, {"match", "a", string.rep("()", 33)},
    -- errors
    {"find", "a", "%"}, {"find", "a", "a%"}, {"find", "a", "[a"}, {"find", "a", "[a%"},
    {"find", "a", "[]"}, {"find", "a", "[^]"}, {"find", "a", "[%"}, {"find", "a", "%b"},
    {"find", "a", "%ba"}, {"find", "a", "%f"}, {"find", "a", "%fa"}, {"find", "a", "%1"},
    {"find", "a", "(a)%2"}, {"find", "a", "(a%1)"}, {"find", "a", "%0"}, {"find", "a", "a)"},
    {"find", "a", "(a"}, {"find", "a", "(()"}, {"match", "a", "(a"}, {"gsub", "a", "(a", "x"},
    {"find", "", string.rep("a?", 300)}, {"match", string.rep("a", 300), string.rep("(a)", 33)},
    {"find", string.rep("a", 500), string.rep("a?", 250) .. "b"},
    {"gsub", "abc", "%w", "%2"}, {"gsub", "abc", "(%w)", "%2"}, {"gsub", "abc", "%w", "%"},
    {"gsub", "abc", "%w", "%x"}, {"gsub", "abc", "%w", "a%"}, {"gsub", "abc", "%w"},
    {"gsub", "abc", "%w", true}, {"gsub", "abc", "%w", {a = {}}}, {"gsub", "abc", "%w", {}},
    {"gsub", "abc", "%w", function() return {} end}, {"find", "abc", "b", "x"},
    {"find", {}, "b"}, {"match", "a", {}}, {"gmatch", "a"}, {"gsub", "a", "a", "b", "x"},
    -- find init and plain
    {"find", "abc", "b", -1}, {"find", "abc", "b", -2}, {"find", "abc", "b", -10},
    {"find", "abc", "b", 0}, {"find", "abc", "b", 4}, {"find", "abc", "", 4}, {"find", "abc", "", 5},
    {"find", "abc", "", 10}, {"find", "abc", "", -10}, {"find", "a.c", ".", 1, true},
    {"find", "a.c", "%.", 1, true}, {"find", "a(c", "(", 1, true}, {"find", "abc", "", 1, true},
    {"find", "ab\0cd", "\0c"}, {"find", "ab\0cd", "%z"}, {"find", "ab\0cd", "[\0]"},
    {"match", "ab\0cd", ".%z."}, {"find", "abc", "c", math.mininteger}, {"find", "abc", "a", math.maxinteger},
    {"match", "abc", ".", -1}, {"match", "abc", "", 4}, {"match", "abc", "", 5},
    -- gmatch init and empty matches
    {"gmatch", "abc", "", 2}, {"gmatch", "abc", "%a*", -1}, {"gmatch", "abc", "%a*", 10},
    {"gmatch", "abc", "x*"}, {"gmatch", "a,b,,c", "[^,]*"}, {"gmatch", "abc", ".-"},
    {"gmatch", "k=v, x=y", "(%w+)=(%w+)"}, {"gmatch", "abc", "()", 0},
    -- gsub replacements and limits
    {"gsub", "hello world", "o", "0"}, {"gsub", "hello world", "(o)", "[%1%0%%]"},
    {"gsub", "hello", "", "-"}, {"gsub", "abc", "%w", "%1%1"}, {"gsub", "abc", "()", "%1"},
    {"gsub", "abc", "(b)()", "%2"}, {"gsub", "hello world", "%w+", "%0 %0", 1},
    {"gsub", "abc", "%w", "x", 0}, {"gsub", "abc", "%w", "x", -1}, {"gsub", "abc", "", "x", 2},
    {"gsub", "abc", "%w", 7}, {"gsub", "abc", "%w", 1.5}, {"gsub", "a b ab", "%w+", repl_tab},
    {"gsub", "a b c", "%w", repl_tab}, {"gsub", "abc", "(a)(b)", repl_tab},
    {"gsub", "a bb ccc dddd", "%w+", repl_fn}, {"gsub", "a=1, b=2", "(%w+)=(%w+)", repl_fn},
    {"gsub", "abc", "()", repl_fn}, {"gsub", "abc", "x*", "-"}, {"gsub", "", "", "x"},
    {"gsub", "abc", "b*", "X"}, {"gsub", "a.b", "%.", "%%"}, {"gsub", "abc", ".", {a = 1.5}},
}

local tokens = {
    "a", "b", "c", "a", "b", ".", "%a", "%d", "%s", "%W", "%p", "%x", "[ab]", "[^a]", "[a-c]",
    "[%d]", "[]a]", "[^%s]", "*", "+", "-", "?", "*", "+", "-", "(", ")", "()", "(", ")", "%1",
    "%2", "%b()", "%bab", "%f[%w]", "%f[^a]", "^", "$", "$", "%", "[", "]", "%(", "%.", "1",
}
local subject_chars = {"a", "b", "c", "a", "b", "1", "2", " ", "(", ")", "^", "$", "%", ".", "-", "]"}

local function pick(list)
    return list[math.random(#list)]
end

-- up to most picks from list, joined
local function random_string(list, most)
    local t = {}
    for i = 1, math.random(0, most) do
        t[i] = pick(list)
    end
    return table.concat(t)
end

local replacements = {"x", "%0", "<%1>", "%2", "%%", "%", "", repl_tab, repl_fn}

function M.run(random_count)
    local diffs = {}
    local count = 0
    for _, c in ipairs(fixed) do
        local args = table.pack(table.unpack(c, 2))
        args.n = #c - 1
        compare(diffs, c[1], args)
        count = count + 1
    end
    math.randomseed(20261203)
    for _ = 1, random_count do
        local s, p = random_string(subject_chars, 12), random_string(tokens, 7)
        local init = math.random(-4, 14)
        compare(diffs, "find", table.pack(s, p))
        compare(diffs, "find", table.pack(s, p, init, math.random(4) == 1))
        compare(diffs, "match", table.pack(s, p))
        compare(diffs, "match", table.pack(s, p, init))
        compare(diffs, "gmatch", table.pack(s, p))
        compare(diffs, "gmatch", table.pack(s, p, init))
        compare(diffs, "gsub", table.pack(s, p, pick(replacements)))
        compare(diffs, "gsub", table.pack(s, p, pick(replacements), math.random(-1, 3)))
        count = count + 8
    end
    return count, diffs
end

return M
