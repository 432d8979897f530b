-- loaderr: turns a tool file's load errors into ones an operator can act on: the line
-- of the offending key (Lua keeps no line for table keys, so the file's own text is
-- scanned), the upstream names the file's code passes to ctx.http, and "did you mean"
-- hints. Used by lua/host.lua only when a file has errors (or names an upstream that
-- is not configured), so a clean load never pays for the scan.
--
-- Limits of the scan (docs/writing-tools.md, "Load errors"): it follows the table the
-- file returns when that is a table constructor (`return { … }`) or a local assigned
-- one (`local M = { … } … return M`, with `M.key = …` and `function M.key` too), and
-- values that are constructors, plain names of a local constructor, or a builder
-- called with one constructor (`fields.input { … }`). A table built by any other
-- function call (`return fx.tool(…)`) or computed at run time has no key lines:
-- its errors point at the line of the last `return`.
local M = {}

----------------------------------------------------------------------------
-- tokenizer (Lua 5.4 lexical rules; enough to find keys, strings and blocks)

local function long_bracket(src, i)
    -- src:sub(i) starts with "[" : the level of a long bracket "[==[", or nil
    local eq = src:match("^%[(=*)%[", i)
    return eq and #eq or nil
end

local function skip_long(src, i, level, line)
    -- i is at the opening bracket; returns the index after the closing one and the line
    local open_len = level + 2
    local close = "]" .. string.rep("=", level) .. "]"
    local e = src:find(close, i + open_len, true)
    local stop = e and (e + #close) or (#src + 1)
    local _, nl = src:sub(i, stop - 1):gsub("\n", "")
    return stop, line + nl
end

local function skip_quoted(src, i, q, line)
    -- i is at the quote; returns the index after the closing quote, the line, the text
    local j = i + 1
    local parts = {}
    local n = #src
    while j <= n do
        local c = src:sub(j, j)
        if c == q then
            return j + 1, line, table.concat(parts)
        elseif c == "\\" then
            local d = src:sub(j + 1, j + 1)
            if d == "\n" then
                line = line + 1
            elseif d == "z" then
                local ws = src:match("^%s*", j + 2)
                local _, nl = ws:gsub("\n", "")
                line = line + nl
                j = j + #ws
            end
            parts[#parts + 1] = d
            j = j + 2
        elseif c == "\n" then
            return j, line, table.concat(parts) -- unfinished string: Lua refused the file
        else
            parts[#parts + 1] = c
            j = j + 1
        end
    end
    return j, line, table.concat(parts)
end

local OPS3 = { ["..."] = true }
local OPS2 = {
    [".."] = true, ["=="] = true, ["~="] = true, ["<="] = true, [">="] = true,
    ["//"] = true, ["::"] = true, ["<<"] = true, [">>"] = true,
}

-- tokens(src) -> array of { k = "name"|"string"|"number"|"op", v = text, line = n }
function M.tokens(src)
    local out = {}
    local i, n, line = 1, #src, 1
    if src:sub(1, 1) == "#" then -- a shebang line
        i = (src:find("\n", 1, true) or n) + 0
    end
    while i <= n do
        local c = src:sub(i, i)
        if c == "\n" then
            line = line + 1
            i = i + 1
        elseif c:match("%s") then
            i = i + 1
        elseif src:sub(i, i + 1) == "--" then
            local level = src:sub(i + 2, i + 2) == "[" and long_bracket(src, i + 2)
            if level then
                i, line = skip_long(src, i + 2, level, line)
            else
                i = src:find("\n", i, true) or (n + 1)
            end
        elseif c == "\"" or c == "'" then
            local start = line
            local text
            i, line, text = skip_quoted(src, i, c, line)
            out[#out + 1] = { k = "string", v = text, line = start }
        elseif c == "[" and long_bracket(src, i) then
            local start, j = line, i
            i, line = skip_long(src, i, long_bracket(src, i), line)
            local level = long_bracket(src, j)
            out[#out + 1] = { k = "string", v = src:sub(j + level + 2, i - level - 3), line = start }
        elseif c:match("[%a_]") then
            local w = src:match("^[%w_]+", i)
            out[#out + 1] = { k = "name", v = w, line = line }
            i = i + #w
        elseif c:match("%d") or (c == "." and src:sub(i + 1, i + 1):match("%d")) then
            local num = src:match("^0[xX][%x%.]*[pP][%+%-]?%d+", i) or src:match("^0[xX][%x%.]*", i) or
                src:match("^[%d%.]+[eE][%+%-]?%d+", i) or src:match("^[%d%.]+", i)
            out[#out + 1] = { k = "number", v = num, line = line }
            i = i + #num
        else
            local op = src:sub(i, i + 2)
            if not OPS3[op] then
                op = src:sub(i, i + 1)
                if not OPS2[op] then
                    op = c
                end
            end
            out[#out + 1] = { k = "op", v = op, line = line }
            i = i + #op
        end
    end
    return out
end

----------------------------------------------------------------------------
-- table constructors and their keys

local OPEN = { ["("] = true, ["{"] = true, ["["] = true }
local CLOSE = { [")"] = true, ["}"] = true, ["]"] = true }
local BLOCK_OPEN = { ["function"] = true, ["if"] = true, ["do"] = true, ["repeat"] = true }
local BLOCK_CLOSE = { ["end"] = true, ["until"] = true }

local function is(t, k, v)
    return t ~= nil and t.k == k and (v == nil or t.v == v)
end

-- delta of nesting for token t (brackets and blocks)
local function nesting(t)
    if t.k == "op" then
        return OPEN[t.v] and 1 or CLOSE[t.v] and -1 or 0
    elseif t.k == "name" then
        return BLOCK_OPEN[t.v] and 1 or BLOCK_CLOSE[t.v] and -1 or 0
    end
    return 0
end

-- fields(toks, i) -> the fields of the constructor whose "{" is toks[i]:
-- array of { key = string|integer, line = n, value = index of the value's first token }
local function fields(toks, i)
    local out, depth, pos, j = {}, 0, 0, i + 1
    local start = true
    while toks[j] do
        local t = toks[j]
        if depth == 0 and start then
            start = false
            if is(t, "op", "}") then
                break
            end
            if is(t, "name") and is(toks[j + 1], "op", "=") then
                out[#out + 1] = { key = t.v, line = t.line, value = j + 2 }
            elseif is(t, "op", "[") and toks[j + 1] and (toks[j + 1].k == "string" or
                    toks[j + 1].k == "number") and is(toks[j + 2], "op", "]") and is(toks[j + 3], "op", "=") then
                local key = toks[j + 1].k == "number" and math.tointeger(tonumber(toks[j + 1].v)) or toks[j + 1].v
                out[#out + 1] = { key = key, line = t.line, value = j + 4 }
            else
                pos = pos + 1
                out[#out + 1] = { key = pos, line = t.line, value = j }
            end
        end
        if depth == 0 and t.k == "op" and (t.v == "," or t.v == ";") then
            start = true
        elseif depth == 0 and is(t, "op", "}") then
            break
        else
            depth = depth + nesting(t)
        end
        j = j + 1
    end
    return out
end

-- the index of the "{" that the last `NAME = {` before token limit assigns (not
-- `x.NAME = {`), or nil
local function local_table(toks, name, limit)
    local found
    for j = 1, (limit or #toks) - 2 do
        if is(toks[j], "name", name) and is(toks[j + 1], "op", "=") and is(toks[j + 2], "op", "{") and
                not is(toks[j - 1], "op", ".") and not is(toks[j - 1], "op", ":") then
            found = j + 2
        end
    end
    return found
end

-- a value starting at token v: the index of its constructor "{", or nil. A builder
-- called with one constructor (`fields.input { … }`) counts as that constructor.
local function constructor_of(toks, v)
    local t = toks[v]
    if is(t, "op", "{") then
        return v
    end
    local after = toks[v + 1]
    if is(t, "name") and (after == nil or is(after, "op", ",") or is(after, "op", ";") or
            is(after, "op", "}")) then
        return local_table(toks, t.v, v)
    end
    local j = v
    while is(toks[j], "name") and is(toks[j + 1], "op", ".") do
        j = j + 2
    end
    if is(toks[j], "name") and is(toks[j + 1], "op", "{") then
        return j + 1
    end
    return nil
end

-- root(toks) -> the fields of the returned tool table (constructor fields plus
-- `X.key = …` / `function X.key` statements for `return X`), the line of the chunk's
-- last top-level `return`
local function root(toks)
    local ret, depth = nil, 0
    for j, t in ipairs(toks) do
        if depth == 0 and is(t, "name", "return") then
            ret = j -- the chunk's own return, not one inside a function or block
        end
        depth = depth + nesting(t)
    end
    if not ret then
        return {}, nil
    end
    local list = {}
    local ctor = constructor_of(toks, ret + 1)
    if ctor then
        list = fields(toks, ctor)
    end
    local var = toks[ret + 1]
    if is(var, "name") and not is(toks[ret + 2], "op", "(") and not is(toks[ret + 2], "op", ".") then
        for j = 1, #toks - 3 do
            local f = is(toks[j - 1], "name", "function")
            if is(toks[j], "name", var.v) and (is(toks[j + 1], "op", ".") or (f and is(toks[j + 1], "op", ":"))) and
                    is(toks[j + 2], "name") and (f or is(toks[j + 3], "op", "=")) and
                    not is(toks[j - 1], "op", ".") then
                list[#list + 1] = { key = toks[j + 2].v, line = toks[j + 2].line, value = f and 0 or j + 4 }
            end
        end
    end
    return list, toks[ret].line
end

local function find_field(list, seg)
    local want = math.tointeger(tonumber(seg)) or seg
    for _, f in ipairs(list) do
        if f.key == seg or f.key == want then
            return f
        end
    end
    return nil
end

-- key_line(toks, path) -> the line of the deepest key of path (array of segments,
-- from the tool table down) found in the source, or nil when its first key is not;
-- also the line of the last `return`.
function M.key_line(toks, path)
    local list, ret_line = root(toks)
    local line
    for _, seg in ipairs(path) do
        local f = list and find_field(list, seg)
        if not f then
            break
        end
        line = f.line
        local ctor = f.value > 0 and constructor_of(toks, f.value)
        list = ctor and fields(toks, ctor) or nil
    end
    return line, ret_line
end

----------------------------------------------------------------------------
-- error messages -> key paths

local function unescape(seg)
    return (seg:gsub("~1", "/"):gsub("~0", "~"))
end

-- path_of(msg, keys) -> the key path an error message of lua/contract.lua is about
-- (array of segments), or nil. keys: the contract's top-level keys (set).
function M.path_of(msg, keys)
    local unknown = msg:match("^unknown key '([^']*)'")
    if unknown then
        return { unknown }
    end
    local key, rest = msg:match("^([%a_][%w_]*)(.*)$")
    if not key or not keys[key] then
        return nil
    end
    local path = { key }
    local tail = rest:match("^([/.][^%s:]*)") or ""
    for seg in tail:gmatch("[/.]([^/.]+)") do
        path[#path + 1] = unescape(seg)
    end
    rest = rest:sub(#tail + 1)
    local kw = rest:match("^: unknown keyword '([^']+)'") or rest:match("^: '([^']+)' ")
    if kw then
        path[#path + 1] = kw
    end
    return path
end

----------------------------------------------------------------------------
-- hints

-- distance(a, b) -> the edit distance (insertions, deletions, substitutions,
-- transpositions of neighbours) between two short strings
function M.distance(a, b)
    local d = {}
    for i = 0, #a do
        d[i] = { [0] = i }
    end
    for j = 0, #b do
        d[0][j] = j
    end
    for i = 1, #a do
        for j = 1, #b do
            local cost = a:byte(i) == b:byte(j) and 0 or 1
            local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
                v = math.min(v, d[i - 2][j - 2] + 1)
            end
            d[i][j] = v
        end
    end
    return d[#a][#b]
end

-- suggest(name, candidates) -> " (did you mean X?)" for the nearest candidate within a
-- third of the name's length (at least 1, at most 3 edits), else ""
function M.suggest(name, candidates)
    local best, best_d
    for _, c in ipairs(candidates) do
        local d = M.distance(name, c)
        if best_d == nil or d < best_d or (d == best_d and c < best) then
            best, best_d = c, d
        end
    end
    local limit = math.max(1, math.min(3, #name // 3))
    if best and best_d <= limit then
        return " (did you mean " .. best .. "?)"
    end
    return ""
end

-- upstream_literals(toks) -> array of { name =, line = } for every `upstream = "<name>"`
-- in the file's code (the requests it hands to ctx.http), the tool table's own
-- `upstream` key left out (the contract checks the declaration)
function M.upstream_literals(toks)
    local out, decl = {}, nil
    for _, f in ipairs((root(toks))) do
        if f.key == "upstream" and f.value > 0 and toks[f.value] and toks[f.value].k == "string" then
            decl = f.value
        end
    end
    for j = 1, #toks - 2 do
        if is(toks[j], "name", "upstream") and is(toks[j + 1], "op", "=") and toks[j + 2].k == "string" and
                j + 2 ~= decl then
            out[#out + 1] = { name = toks[j + 2].v, line = toks[j + 2].line }
        end
    end
    return out
end

return M
