-- The Lua oracle of the token-saving TOON view (the server's is src/codec/toonview.c, which
-- tests/spec/tools/toonview_diff_spec.lua compares byte for byte with this one): the
-- implementation tools used through their render hook before the view moved to C.
--
-- TOON writes an array of records as a table only when every cell is a primitive;
-- result rows usually carry a nested record or a list, so the encoder falls back to
-- one indented list item per row, every key repeated, which costs more tokens than
-- compact JSON. The view keeps such arrays tabular:
--   * a nested record with the same keys in every row becomes dotted columns
--     (`_instance_identity.drug_id`), which a decoder with path expansion
--     (`expandPaths: "safe"`) turns back into the record;
--   * a field that cannot be a cell (a list, or a record whose keys vary) leaves the
--     table: it follows it as `<array>_<field>`, a list with one entry per row in
--     row order;
--   * everything else is as in the result, views applied at every depth.
-- An array whose rows do not all have the same keys, or hold lists of records, stays a
-- list of records (their own arrays viewed)..
local cljson = require "cljson"

local M = {}

local IDENT = "^[A-Za-z_][A-Za-z0-9_]*$"

local function is_primitive(v)
    return type(v) ~= "table" or cljson.is_number(v)
end

local function is_array(v)
    if type(v) ~= "table" or cljson.is_number(v) or cljson.is_object(v) then
        return false
    end
    return cljson.is_array(v) or (next(v) ~= nil and #v > 0 and next(v, #v) == nil)
end

local function is_record(v)
    return type(v) == "table" and not cljson.is_number(v) and not is_array(v)
end

local function same_keys(a, b)
    local n = 0
    for k in pairs(a) do
        if b[k] == nil then
            return false
        end
        n = n + 1
    end
    for _ in pairs(b) do
        n = n - 1
    end
    return n == 0
end

local view

-- The dotted leaf paths of column `key` when every row holds a non-empty record with
-- the same keys, all identifiers, down to primitives; nil otherwise.
local function fold_paths(rows, key)
    local first = rows[1][key]
    if not is_record(first) or next(first) == nil then
        return nil
    end
    for _, r in ipairs(rows) do
        local v = r[key]
        if not is_record(v) or not same_keys(first, v) then
            return nil
        end
    end
    local paths = {}
    for _, k in ipairs(cljson.keys(first)) do
        if not k:match(IDENT) then
            return nil
        end
        local all_prim = true
        for _, r in ipairs(rows) do
            if not is_primitive(r[key][k]) then
                all_prim = false
                break
            end
        end
        if all_prim then
            paths[#paths + 1] = { k }
        else
            local sub = {}
            for i, r in ipairs(rows) do
                sub[i] = r[key]
            end
            local deeper = fold_paths(sub, k)
            if deeper == nil then
                return nil
            end
            for _, p in ipairs(deeper) do
                table.insert(p, 1, k)
                paths[#paths + 1] = p
            end
        end
    end
    return paths
end

local function dig(v, path)
    for _, k in ipairs(path) do
        v = v[k]
    end
    return v
end

-- Writes `name` = rows as a table into out (keys list extended), with its side lists;
-- taken: the keys the enclosing object already uses. omit(row, key): leave the cell out.
local function put_table(out, keys, name, rows, taken, omit)
    local first = rows[1]
    for i = 2, #rows do
        if not is_record(rows[i]) or not same_keys(first, rows[i]) then
            return false
        end
    end
    local cols, sides = {}, {}
    for _, k in ipairs(cljson.keys(first)) do
        local prim = true
        for _, r in ipairs(rows) do
            if not is_primitive(r[k]) then
                prim = false
                break
            end
        end
        if k:find(".", 1, true) then
            return false -- a dotted key would read as a dotted column
        elseif prim then
            if not (omit and omit(k)) then
                cols[#cols + 1] = { name = k, path = { k } }
            end
        else
            local paths = fold_paths(rows, k)
            if paths and k:match(IDENT) then
                for _, p in ipairs(paths) do
                    table.insert(p, 1, k)
                    cols[#cols + 1] = { name = table.concat(p, "."), path = p }
                end
            else
                -- a list of records keeps its own table only inside its row's record
                for _, r in ipairs(rows) do
                    if is_array(r[k]) and is_record(r[k][1]) then
                        return false
                    end
                end
                local side = name .. "_" .. k
                if taken[side] or not name:match(IDENT) then
                    return false
                end
                sides[#sides + 1] = { name = side, key = k }
            end
        end
    end
    if #cols == 0 then
        return false
    end
    local trows = {}
    for i, r in ipairs(rows) do
        local t, tk = {}, {}
        for j, c in ipairs(cols) do
            t[c.name] = dig(r, c.path)
            tk[j] = c.name
        end
        trows[i] = cljson.object(t, tk)
    end
    out[name] = cljson.array(trows)
    keys[#keys + 1] = name
    for _, s in ipairs(sides) do
        local list = {}
        for i, r in ipairs(rows) do
            list[i] = view(r[s.key])
        end
        out[s.name] = cljson.array(list)
        keys[#keys + 1] = s.name
        taken[s.name] = true
    end
    return true
end

local function view_array(v)
    local list = {}
    for i, x in ipairs(v) do
        list[i] = view(x)
    end
    return cljson.array(list)
end

-- view(v [, omit]): the view of v; omit(key) -> true leaves that primitive column out
-- of the top-level tables (a value the tool's description tells how to rebuild).
view = function(v, omit)
    if is_array(v) then
        return view_array(v)
    end
    if not is_record(v) then
        return v
    end
    local src = cljson.keys(v)
    local taken = {}
    for _, k in ipairs(src) do
        taken[k] = true
    end
    local out, keys = {}, {}
    for _, k in ipairs(src) do
        local x = v[k]
        local done = false
        if is_array(x) and is_record(x[1]) then
            done = put_table(out, keys, k, x, taken, omit)
        end
        if not done then
            out[k] = view(x)
            keys[#keys + 1] = k
        end
    end
    return cljson.object(out, keys)
end

M.view = view

-- render(result, ctx [, omit]): a render hook. The view; on MCP nil (the host then
-- sends the compact JSON result) unless the view's TOON text is at least a tenth
-- smaller than that JSON in bytes: a nested document with few rows costs a token per
-- indented line and can cost more than its JSON, a table far less.
-- tokens(s): the token estimate of src/codec/tokproxy.c, written again: a run of ASCII
-- letters and "_" is one per started 6 bytes past the first, digits one per started 3,
-- a single space before a word or number is part of it (another run of spaces is one),
-- a run of line breaks or tabs is one, other ASCII punctuation one per started 3 past
-- the first, every other code point one.
function M.tokens(s)
    local n, i, len = 0, 1, #s
    local function word(c)
        return c and (c:match("[%a_]") ~= nil) and c:byte() < 128
    end
    local function digit(c)
        return c and c:match("%d") ~= nil
    end
    while i <= len do
        local c = s:sub(i, i)
        local b = c:byte()
        local j = i + 1
        if word(c) then
            while j <= len and word(s:sub(j, j)) do
                j = j + 1
            end
            n = n + 1 + (j - i - 1) // 6
        elseif digit(c) then
            while j <= len and digit(s:sub(j, j)) do
                j = j + 1
            end
            n = n + (j - i + 2) // 3
        elseif c == " " then
            while j <= len and s:sub(j, j) == " " do
                j = j + 1
            end
            local nx = s:sub(j, j)
            if not (j - i == 1 and j <= len and (word(nx) or digit(nx))) then
                n = n + 1
            end
        elseif c == "\n" or c == "\r" or c == "\t" then
            while j <= len and s:sub(j, j):match("[\n\r\t]") do
                j = j + 1
            end
            n = n + 1
        elseif b < 128 then
            while j <= len do
                local d = s:byte(j)
                if d >= 128 or d <= 32 or word(s:sub(j, j)) or digit(s:sub(j, j)) then
                    break
                end
                j = j + 1
            end
            n = n + 1 + (j - i - 1) // 3
        else
            j = i + (b >= 0xf0 and 4 or b >= 0xe0 and 3 or b >= 0xc0 and 2 or 1)
            n = n + 1
        end
        i = j
    end
    return n
end

function M.render(result, ctx, omit)
    local v = view(result, omit)
    if ctx and ctx.surface == "rest" then
        return v
    end
    local text = require("cltoon").encode(v) -- loaded on use: only the server renders
    -- MCP: the view only when it is the cheaper text in tokens (93 % of the JSON's)
    if text and M.tokens(text) * 100 <= M.tokens(cljson.encode(result)) * 93 then
        return v
    end
    return nil
end

-- implied(result, prefix): query_object_instance's rule for leaving _instance_id out:
-- every row of result.datas has _instance_id = prefix .. its single identity value.
function M.implied(result, prefix)
    local rows = result.datas
    local implied = type(rows) == "table" and #rows > 0
    for _, r in ipairs(implied and rows or {}) do
        local id = type(r) == "table" and r._instance_identity
        local k = type(id) == "table" and next(id)
        if not k or next(id, k) ~= nil or type(r._instance_id) ~= "string" or
            r._instance_id ~= prefix .. tostring(id[k]) then
            implied = false
            break
        end
    end
    return implied and function(key)
        return key == "_instance_id"
    end or nil
end

return M
