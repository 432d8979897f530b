local helper = require "helper"
local contract = require "contract"
local schema = require "schema"

local tool = helper.load_tool("run_sql")
local sqlguard = helper.sandbox().require("sqlguard")

local GOOD = "SELECT `id`, status FROM {{.res_orders}} WHERE status = 'paid;--' ORDER BY id LIMIT 10;"

describe("run_sql", function()
    it("is REST-only", function()
        assert.same({ "rest" }, tool.surfaces)
        assert.equal(240, tool.order)
        assert.equal("Run SQL", contract.list_entry(tool, "en-US").title)
    end)

    describe("guard", function()
        it("accepts one read-only SELECT and extracts resource ids", function()
            assert.same({ "res_orders" }, sqlguard.check(GOOD))
            assert.same({ "res_orders", "res_customers" }, sqlguard.check(
                "select o.id, c.name from {{res_orders}} o join {{.res_customers}} c on o.customer_id = c.id "
                .. "where o.id in (select id from {{.res_orders}}) and c.name <> \"it's \\\"x\\\"\""))
            assert.same({ "res_orders" }, sqlguard.check("  ( SELECT 1 FROM {{.res_orders}} ) ; ; "))
            -- keywords inside strings and backtick identifiers are data, not SQL
            assert.same({ "res_orders" }, sqlguard.check(
                "SELECT 'drop table x; insert' AS `update`, \"#\" FROM {{.res_orders}}"))
            -- pure functions, subqueries, derived tables, FROM inside a function call
            assert.same({ "res_orders", "res_customers" }, sqlguard.check(
                "SELECT c.`name`, COUNT(*) AS n, ROUND(AVG(o.amount), 2), COALESCE(MAX(o.note), '-'), "
                .. "EXTRACT(YEAR FROM o.created_at) AS y, TRIM(LEADING 'x' FROM c.code), "
                .. "ROW_NUMBER() OVER (PARTITION BY c.id ORDER BY o.id) AS rn "
                .. "FROM {{.res_orders}} AS o LEFT JOIN {{.res_customers}} c ON (o.customer_id = c.id), "
                .. "(SELECT id FROM {{.res_orders}} WHERE status IN ('a', 'b')) AS t "
                .. "WHERE EXISTS (SELECT 1 FROM {{.res_orders}} x WHERE x.id = o.id) "
                .. "GROUP BY c.`name`, y HAVING COUNT(*) > 1 ORDER BY n DESC LIMIT 10"))
            -- a word that is only a function elsewhere is fine as a column
            assert.same({ "res_orders" }, sqlguard.check("SELECT sleep, `load_file` FROM {{.res_orders}}"))
        end)

        it("refuses everything else with a clear message", function()
            local cases = {
                { "", "sql is required" },
                { "   ", "sql is required" },
                { "SELECT 1 FROM {{.res_orders}} -- trailing", "comments are not allowed" },
                { "SELECT 1 FROM {{.res_orders}} # x", "comments are not allowed" },
                { "SELECT /* hint */ 1 FROM {{.res_orders}}", "comments are not allowed" },
                { "SELECT 1 FROM {{.res_orders}}; DELETE FROM {{.res_orders}}", "multiple statements" },
                { "SELECT 1 FROM {{.res_orders}}; SELECT 2 FROM {{.res_orders}}", "multiple statements" },
                { "DELETE FROM {{.res_orders}}", "must start with SELECT" },
                { "WITH t AS (SELECT 1) SELECT * FROM {{.res_orders}}", "must start with SELECT" },
                { "SHOW TABLES", "must start with SELECT" },
                { "SELECT * FROM {{.res_orders}} INTO OUTFILE '/tmp/x'", 'forbidden keyword "INTO"' },
                { "SELECT * INTO @v FROM {{.res_orders}}", 'forbidden keyword "INTO"' },
                { "SELECT * FROM {{.res_orders}} FOR UPDATE", 'forbidden keyword "UPDATE"' },
                { "SELECT * FROM {{.res_orders}} FOR SHARE", 'locking read "FOR SHARE"' },
                { "SELECT * FROM {{.res_orders}} LOCK IN SHARE MODE", 'forbidden keyword "LOCK"' },
                { "select (select 1 from {{.res_orders}} where exists (drop table t))", 'forbidden keyword "DROP"' },
                { "SELECT 1", "at least one data resource" },
                { "SELECT 1 FROM {{.Res_Orders}}", "at least one data resource" },
                { "SELECT 1 FROM {{.res_orders}} WHERE name = 'open", "unterminated" },
                { ";", "no executable statement" },
                -- side-effecting and time-wasting functions (allow-list of pure functions)
                { "SELECT LOAD_FILE('/etc/passwd') FROM {{.res_orders}}", 'function "LOAD_FILE" is not allowed' },
                { "SELECT SLEEP(10) FROM {{.res_orders}}", 'function "SLEEP" is not allowed' },
                { "SELECT id FROM {{.res_orders}} WHERE sleep (1) = 0", 'function "sleep" is not allowed' },
                { "SELECT BENCHMARK(100000000, MD5('x')) FROM {{.res_orders}}", 'function "BENCHMARK"' },
                { "SELECT GET_LOCK('l', 10) FROM {{.res_orders}}", 'function "GET_LOCK" is not allowed' },
                { "SELECT nextval('seq') FROM {{.res_orders}}", 'function "nextval" is not allowed' },
                { "SELECT set_config('a', 'b', false) FROM {{.res_orders}}", 'function "set_config"' },
                { "SELECT `sleep`(1) FROM {{.res_orders}}", 'function "`sleep`" is not allowed' },
                { "SELECT @@version FROM {{.res_orders}}", "variables (@name, @@name) are not allowed" },
                -- every table reference is a resource placeholder or a subquery
                { "SELECT * FROM {{.res_orders}} o JOIN mysql.user u ON 1 = 1", 'table reference "mysql.user"' },
                { "SELECT * FROM {{.res_orders}}, information_schema.tables",
                    'table reference "information_schema.tables" is not allowed' },
                { "SELECT (SELECT COUNT(*) FROM `mysql`.`user`) FROM {{.res_orders}}",
                    'table reference "`mysql`.`user`" is not allowed' },
                { "SELECT * FROM {{.res_orders}} WHERE id IN (SELECT id FROM orders)", 'table reference "orders"' },
                { "SELECT * FROM {{.res_orders}} o, users", 'table reference "users"' },
                { "SELECT * FROM {{.res_orders}} o LEFT JOIN {{.res_orders}}.x ON 1", 'table reference' },
                { "SELECT * FROM {{.res_orders}} JOIN", "a table reference is missing" },
            }
            for _, c in ipairs(cases) do
                local ids, msg = sqlguard.check(c[1])
                assert.is_nil(ids, c[1])
                assert.truthy(msg:find(c[2], 1, true), c[1] .. " -> " .. tostring(msg))
            end
        end)

        it("refuses before any downstream call, with a localized 400", function()
            local res, err, ctx = helper.call(tool, { sql = "UPDATE {{.res_orders}} SET status = 'x'" },
                { lang = "en-US", responses = {} })
            assert.is_nil(res)
            assert.equal(400, err.status)
            assert.equal("Public.BadRequest", err.code)
            assert.equal("Invalid parameters", err.description)
            assert.truthy(err.details:find("must start with SELECT", 1, true))
            assert.equal(0, #ctx.requests)
        end)
    end)

    describe("schema", function()
        it("requires sql and bounds the timeout", function()
            local _, errs = schema.validate(tool.input_schema, { query_timeout = 0, x = 1 })
            table.sort(errs, function(a, b)
                return a.path < b.path
            end)
            assert.same({ "/query_timeout", "/sql", "/x" }, helper.paths(errs))
        end)
    end)

    describe("request and response", function()
        it("forwards the SQL unchanged to vega and keeps the typed result", function()
            local res, err, ctx = helper.call(tool, { sql = GOOD, query_timeout = 30 },
                { responses = { { status = 200, fixture = "vega_query.json" } } })
            assert.is_nil(err)
            local req = ctx.requests[1]
            assert.equal("vega", req.upstream)
            assert.equal("POST", req.method)
            assert.equal("/in/v1/resources/query", req.path)
            assert.equal(GOOD, req.json.query)
            assert.equal('{"query":' .. helper.encode({ GOOD }):sub(2, -2) .. ',"query_format":"sql",'
                .. '"input_dialect":"mysql","query_timeout_sec":30,"paging":{"mode":"single","limit":10000}}',
                helper.encode(req.json))
            assert.equal('{"columns":[{"name":"id","type":"bigint"},{"name":"status","type":"varchar"},'
                .. '{"name":"tags","type":"json"}],"entries":[{"id":9223372036854775807,"status":"paid",'
                .. '"tags":[]},{"id":2,"status":"open","tags":{}}],"total_count":2}', helper.encode(res))
            res, err, ctx = helper.call(tool, { sql = GOOD }, { responses = { { status = 200, body = "{}" } } })
            assert.is_nil(err)
            assert.equal('{"columns":[],"entries":[]}', helper.encode(res))
            assert.is_nil(ctx.requests[1].json.query_timeout_sec)
        end)

        it("gives empty columns and entries when vega sends none", function()
            assert.equal('{"columns":[],"entries":[]}', helper.encode(tool.trim_response(helper.decode("{}"))))
        end)

        it("passes vega errors through with their status as details", function()
            local _, err = helper.call(tool, { sql = GOOD },
                { responses = { { status = 400, fixture = "vega_error_400.json" } } })
            assert.equal(400, err.status)
            assert.equal("VegaBackend.Query.InvalidParameter", err.details.error_code)
            _, err = helper.call(tool, { sql = GOOD },
                { responses = { { status = 403, fixture = "vega_error_403.json" } } })
            assert.equal(403, err.status)
            assert.equal("VegaBackend.Resource.Forbidden", err.code) -- the platform's own code
            _, err = helper.call(tool, { sql = GOOD }, { responses = { { status = 503, body = "busy" } } })
            assert.equal(503, err.status)
            assert.equal("busy", err.details)
        end)
    end)
end)
