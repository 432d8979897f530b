-- sqlguard (trusted runtime): run_sql accepts exactly one read-only SELECT over
-- resource placeholders. Refused, each with a message naming what was refused:
-- comments, more than one statement, anything but SELECT first, write/DDL/lock
-- keywords, INTO, locking reads, variables (@x, @@x), any function outside an
-- allow-list of pure functions (so no SLEEP, BENCHMARK, LOAD_FILE, GET_LOCK, nextval,
-- set_config, ...), and any table reference that is not a {{.resource_id}}
-- placeholder or a subquery (so no mysql.user or information_schema.*). Nothing here
-- talks to a downstream service; the SQL is forwarded unchanged when it passes.
-- It lives in lua/ (shipped with the core), not in the operator-editable tools/_lib/.
local M = {}

local function word_set(text)
    local set = {}
    for w in text:gmatch("[%a_][%w_]*") do
        set[w] = true
    end
    return set
end

local FORBIDDEN = word_set([[INSERT UPDATE DELETE DROP ALTER CREATE TRUNCATE GRANT REVOKE REPLACE
    MERGE UPSERT CALL EXEC EXECUTE RENAME LOAD COPY INTO ATTACH DETACH USE VACUUM ANALYZE REFRESH
    COMMENT PREPARE DEALLOCATE OUTFILE DUMPFILE LOCK UNLOCK HANDLER SET DO]])

-- Pure, bounded functions a read-only query may call (upper case).
local FUNCTIONS = word_set([[
    COUNT SUM AVG MIN MAX GROUP_CONCAT STD STDDEV STDDEV_POP STDDEV_SAMP VARIANCE VAR_POP VAR_SAMP
    BIT_AND BIT_OR BIT_XOR ANY_VALUE
    ROW_NUMBER RANK DENSE_RANK PERCENT_RANK CUME_DIST NTILE LAG LEAD FIRST_VALUE LAST_VALUE NTH_VALUE
    CONCAT CONCAT_WS LOWER UPPER LCASE UCASE LENGTH CHAR_LENGTH CHARACTER_LENGTH OCTET_LENGTH
    SUBSTRING SUBSTR SUBSTRING_INDEX MID LEFT RIGHT TRIM LTRIM RTRIM LPAD RPAD LOCATE POSITION INSTR
    REVERSE STRCMP FIELD FIND_IN_SET ELT HEX UNHEX ASCII ORD
    ABS ROUND TRUNCATE FLOOR CEIL CEILING MOD SIGN SQRT POW POWER EXP LN LOG LOG2 LOG10 PI GREATEST
    LEAST DIV
    COALESCE IFNULL NULLIF IF ISNULL
    CAST CONVERT
    DATE TIME YEAR QUARTER MONTH WEEK DAY DAYOFMONTH DAYOFWEEK DAYOFYEAR HOUR MINUTE SECOND
    MICROSECOND EXTRACT DATE_FORMAT TIME_FORMAT STR_TO_DATE DATEDIFF TIMEDIFF TIMESTAMPDIFF
    TIMESTAMPADD DATE_ADD DATE_SUB ADDDATE SUBDATE LAST_DAY MAKEDATE FROM_UNIXTIME UNIX_TIMESTAMP
    TO_DAYS FROM_DAYS WEEKDAY YEARWEEK MONTHNAME DAYNAME
    JSON_EXTRACT JSON_UNQUOTE JSON_LENGTH JSON_CONTAINS JSON_CONTAINS_PATH JSON_KEYS JSON_TYPE
    JSON_VALID JSON_ARRAY JSON_OBJECT
]])

-- Keywords that may stand before "(" without being a function call.
local PAREN_KEYWORDS = word_set([[SELECT FROM WHERE AND OR NOT XOR IN EXISTS ON AS JOIN UNION ALL ANY
    SOME OVER USING BY HAVING WHEN THEN ELSE CASE IS LIKE BETWEEN DISTINCT INTERVAL LIMIT OFFSET
    PARTITION WINDOW WITH ROLLUP ESCAPE REGEXP RLIKE DIV MOD]])

-- Keywords that end the table list of a FROM clause.
local FROM_END = word_set([[WHERE GROUP HAVING ORDER LIMIT UNION WINDOW ON USING]])
-- Keywords that introduce a table reference.
local TABLE_BEFORE = word_set([[FROM JOIN]])

local MAX_PLACEHOLDER = 40
local PLACEHOLDER = "_rid_"

-- Replaces string literals with one space and backtick identifiers with a marker word
-- (_qid_<n>), and refuses comments. -> stripped text, quoted names | nil, message
local function strip(sql)
    local out, names, i, n = {}, {}, 1, #sql
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
            if c == "`" then
                names[#names + 1] = sql:sub(i, j)
                out[#out + 1] = " _qid_" .. #names .. " "
            else
                out[#out + 1] = " "
            end
            i = j + 1
        else
            out[#out + 1] = c
            i = i + 1
        end
    end
    return table.concat(out), names
end

-- The text of a table reference starting at token k (for messages).
local function ref_text(tokens, k, names)
    local parts = {}
    for t = k, math.min(k + 2, #tokens) do
        local v = tokens[t].v
        if t > k and v ~= "." and tokens[t - 1].v ~= "." then
            break
        end
        parts[#parts + 1] = names[v] or v
    end
    return table.concat(parts)
end

-- Tokens of the stripped text: words, numbers and single punctuation characters.
local function tokenize(text)
    local tokens, i, n = {}, 1, #text
    while i <= n do
        local s, e = text:find("^[%a_][%w_$]*", i)
        if not s then
            s, e = text:find("^%d[%w.]*", i)
        end
        if not s then
            s, e = text:find("^%S", i)
        end
        if s then
            tokens[#tokens + 1] = { v = text:sub(s, e), word = text:find("^[%a_]", s) ~= nil }
            i = e + 1
        else
            i = text:find("%S", i) or n + 1
        end
    end
    return tokens
end

-- Functions and table references. -> true | nil, message
local function check_tokens(tokens, qnames)
    local names = {}
    for k, q in ipairs(qnames) do
        names["_qid_" .. k] = q
    end
    -- from[depth] = true while in the table list of a FROM clause at that depth;
    -- fn[depth] = true inside a function's parentheses (EXTRACT(x FROM d), TRIM(...))
    local depth, from, fn = 0, {}, {}
    local expect_table = false
    for k, tok in ipairs(tokens) do
        local v, up = tok.v, tok.word and tok.v:upper() or tok.v
        local nxt = tokens[k + 1]
        if expect_table then
            expect_table = false
            if v ~= "(" and (v ~= PLACEHOLDER or (nxt and nxt.v == ".")) then
                return nil, 'table reference "' .. ref_text(tokens, k, names) .. '" is not allowed: ' ..
                    "run_sql reads only data resources, written as {{.resource_id}} placeholders"
            end
        end
        if v == "(" then
            local before = tokens[k - 1]
            depth = depth + 1
            fn[depth] = before and before.word and FUNCTIONS[before.v:upper()] or nil
        elseif v == ")" then
            from[depth], fn[depth] = nil, nil
            depth = depth - 1
        elseif v == "," and from[depth] then
            expect_table = true
        elseif v == "@" then
            return nil, "variables (@name, @@name) are not allowed in run_sql"
        elseif tok.word then
            if TABLE_BEFORE[up] and not fn[depth] then
                expect_table = true
                from[depth] = up == "FROM" or from[depth]
            elseif FROM_END[up] then
                from[depth] = nil
            end
            if nxt and nxt.v == "(" and not FUNCTIONS[up] and not PAREN_KEYWORDS[up] then
                return nil, 'function "' .. (names[v] or v) .. '" is not allowed in run_sql: only ' ..
                    "pure aggregate, string, number, date, JSON and conditional functions may be called"
            end
        end
    end
    if expect_table then
        return nil, "a table reference is missing after FROM, JOIN or a comma"
    end
    return true
end

-- check(sql) -> resource ids (array, deduplicated, in order) | nil, message
function M.check(sql)
    if type(sql) ~= "string" or not sql:find("%S") then
        return nil, "sql is required"
    end
    local text, names = strip(sql)
    if not text then
        return nil, names
    end
    local ids, seen = {}, {}
    for inner in text:gmatch("{{(.-)}}") do
        local id = inner:match("^%.?([a-z0-9][a-z0-9_%-]*)$")
        if id and #id <= MAX_PLACEHOLDER and not seen[id] then
            seen[id] = true
            ids[#ids + 1] = id
        end
    end
    text = text:gsub("{{.-}}", " " .. PLACEHOLDER .. " ")
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
    local ok, err = check_tokens(tokenize(text), names)
    if not ok then
        return nil, err
    end
    return ids
end

return M
