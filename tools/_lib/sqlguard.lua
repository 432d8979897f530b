-- _lib.sqlguard: run_sql accepts exactly one read-only SELECT (SPEC §21,
-- reference/downstream.md §5.1, made stricter): no comments at all, one
-- statement, SELECT first, no write/DDL keyword, no INTO (OUTFILE/DUMPFILE), no
-- locking read, and at least one {{.resource_id}} placeholder. Nothing here talks
-- to a downstream service; the SQL is forwarded unchanged when it passes.
local M = {}

local FORBIDDEN = {}
for w in ([[INSERT UPDATE DELETE DROP ALTER CREATE TRUNCATE GRANT REVOKE REPLACE MERGE UPSERT
    CALL EXEC EXECUTE RENAME LOAD COPY INTO ATTACH DETACH USE VACUUM ANALYZE REFRESH COMMENT
    PREPARE DEALLOCATE OUTFILE DUMPFILE LOCK UNLOCK HANDLER SET DO]]):gmatch("%a+") do
    FORBIDDEN[w] = true
end

local MAX_PLACEHOLDER = 40

-- Replaces string literals and quoted identifiers with one space each and refuses
-- comments. -> stripped text | nil, message
local function strip(sql)
    local out, i, n = {}, 1, #sql
    while i <= n do
        local c = sql:sub(i, i)
        local two = sql:sub(i, i + 1)
        if two == "--" or c == "#" or two == "/*" then
            return nil, "comments are not allowed in run_sql; send one plain SELECT statement"
        elseif c == "'" or c == '"' or c == "`" then
            local j = i + 1
            local closed = false
            while j <= n do
                local d = sql:sub(j, j)
                if d == "\\" and c ~= "`" then
                    j = j + 2
                elseif d == c then
                    if sql:sub(j + 1, j + 1) == c then
                        j = j + 2 -- doubled quote
                    else
                        closed = true
                        break
                    end
                else
                    j = j + 1
                end
            end
            if not closed then
                return nil, "unterminated quoted string or identifier"
            end
            out[#out + 1] = " "
            i = j + 1
        else
            out[#out + 1] = c
            i = i + 1
        end
    end
    return table.concat(out)
end

-- check(sql) -> resource ids (array, deduplicated, in order) | nil, message
function M.check(sql)
    if type(sql) ~= "string" or not sql:find("%S") then
        return nil, "sql is required"
    end
    local text, err = strip(sql)
    if not text then
        return nil, err
    end
    local ids, seen = {}, {}
    for inner in text:gmatch("{{(.-)}}") do
        local id = inner:match("^%.?([a-z0-9][a-z0-9_%-]*)$")
        if id and #id <= MAX_PLACEHOLDER and not seen[id] then
            seen[id] = true
            ids[#ids + 1] = id
        end
    end
    text = text:gsub("{{.-}}", " _rid_ ")
    text = text:gsub("^%s+", ""):gsub("[%s;]+$", "")
    if text == "" then
        return nil, "sql has no executable statement"
    end
    if text:find(";", 1, true) then
        return nil, "multiple statements are not allowed; only a single read-only SELECT is permitted"
    end
    local first = text:match("^[%s(]*([%a_]+)")
    if first == nil or first:upper() ~= "SELECT" then
        return nil, "only read-only queries are allowed: the statement must start with SELECT"
    end
    local prev
    for word in text:gmatch("[%a_][%w_$]*") do
        local w = word:upper()
        if FORBIDDEN[w] then
            return nil, 'forbidden keyword "' .. w .. '" detected: run_sql is read-only (no writes, DDL, ' ..
                'INTO or locks)'
        end
        if prev == "FOR" and (w == "SHARE" or w == "UPDATE") then
            return nil, 'locking read "FOR ' .. w .. '" is not allowed: run_sql is read-only'
        end
        prev = w
    end
    if #ids == 0 then
        return nil, "sql must reference at least one data resource via the {{.resource_id}} placeholder"
    end
    return ids
end

return M
