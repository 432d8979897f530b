local helper = require "helper"

local sqlguard = helper.sandbox().require("sqlguard")

-- Randomized statements from SQL-ish tokens (fixed seed): the guard never raises,
-- answers ids or nil and a message, and nothing it accepts calls a function outside
-- its allow-list or reads a table that is not a placeholder.
describe("sqlguard on random statements", function()
    local TOKENS = { "SELECT", "select", "*", "id", "`t`", "FROM", "from", "{{.res_a}}", "{{.res_b}}",
        "{{x}}", "JOIN", "LEFT", "ON", "WHERE", "AND", "OR", "(", ")", "(", ")", ",", ".", "=", "1", "'s'",
        "\"q\"", "COUNT", "SLEEP", "sleep", "LOAD_FILE", "BENCHMARK", "nextval", "mysql", "user",
        "information_schema", "tables", "EXTRACT", "YEAR", "IN", "EXISTS", "@", "@@", "--", "#", "/*",
        ";", "UNION", "ALL", "AS", "GROUP", "BY", "LIMIT", "10", "{{", "}}", "`", "'", "\\", " " }
    local BAD_CALL = { SLEEP = true, LOAD_FILE = true, BENCHMARK = true, NEXTVAL = true }

    it("never raises and never accepts a forbidden call or table", function()
        math.randomseed(20260422)
        local accepted = 0
        for _ = 1, 3000 do
            local parts = {}
            if math.random() < 0.8 then
                parts[1] = "SELECT"
            end
            for _ = 1, math.random(1, 24) do
                parts[#parts + 1] = TOKENS[math.random(#TOKENS)]
            end
            local sql = table.concat(parts, math.random() < 0.5 and " " or "")
            local ok, ids, msg = pcall(sqlguard.check, sql)
            assert.is_true(ok, sql .. " raised " .. tostring(ids))
            if ids then
                accepted = accepted + 1
                assert.is_table(ids)
                local words = sql:gsub("'[^']*'", " "):gsub('"[^"]*"', " ")
                for w in words:gmatch("([%a_]+)%s*%(") do
                    assert.is_nil(BAD_CALL[w:upper()], sql)
                end
                for kw in words:upper():gmatch("%f[%w_](%a+)%s+MYSQL%f[^%w_]") do
                    assert.is_true(kw ~= "FROM" and kw ~= "JOIN", sql)
                end
                for kw in words:upper():gmatch("%f[%w_](%a+)%s+INFORMATION_SCHEMA") do
                    assert.is_true(kw ~= "FROM" and kw ~= "JOIN", sql)
                end
            else
                assert.is_string(msg, sql)
            end
        end
        assert.is_true(accepted > 0, "no statement was accepted: the generator is too narrow")
    end)
end)
