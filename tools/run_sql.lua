-- run_sql (REST only): one read-only SELECT over data resources through vega's
-- query endpoint. REST-only because it answers by the caller's own data-resource
-- grants and bypasses the knowledge network's property rules. The guard refuses
-- everything else locally, before any call; it is lua/sqlguard.lua, part of the
-- trusted runtime.
local cljson = require "cljson"
local util = require "_lib.util"
local fields = require "_lib.fields"
local errors = require "_lib.errors"
local sqlguard = require "sqlguard"

local text = util.text

local M = {
    name = "run_sql",
    version = "1.0.0",
    kind = "read",
    title = text("SQL 查询", "Run SQL"),
    description = text(
        "对数据资源执行一条只读的 MySQL 方言 SELECT。表用 {{.resource_id}} 占位符引用（资源 ID 见 " ..
            "list_resources），标识符用反引号。不允许注释、多条语句、INTO、加锁读、写操作或 DDL。",
        "Runs one read-only SELECT (MySQL dialect) over data resources. Reference tables with " ..
            "{{.resource_id}} placeholders (ids from list_resources) and quote identifiers with " ..
            "backticks. Comments, several statements, INTO, locking reads, writes and DDL are refused."),
    group = "query",
    order = 240,
    surfaces = { "rest" },
    upstream = "vega",
    input_schema = fields.input {
        required = { "sql" },
        properties = {
            sql = fields.string(text("一条只读 SELECT，表写作 {{.resource_id}}",
                "One read-only SELECT; tables written as {{.resource_id}}"), 65536),
            query_timeout = fields.integer(1, 3600, text("查询超时（秒）", "Query timeout in seconds")),
        },
    },
    output_schema = {
        type = "object",
        properties = {
            columns = { type = "array", items = { type = "object" } },
            entries = { type = "array", items = { type = "object" } },
            total_count = { type = "integer" },
            warnings = { type = "array" },
        },
    },
}

-- shape_request(args, ctx) -> the vega query | nil, a 400 for SQL that is not one
-- read-only SELECT
function M.shape_request(args, ctx)
    local ok, msg = sqlguard.check(args.sql)
    if not ok then
        return nil, errors.refuse(400, ctx.lang, msg)
    end
    local body = util.object({
        query = args.sql, -- forwarded unchanged, placeholders intact
        query_format = "sql",
        input_dialect = "mysql",
        query_timeout_sec = args.query_timeout,
        paging = util.object({ mode = "single", limit = 10000 }, { "mode", "limit" }),
    }, { "query", "query_format", "input_dialect", "query_timeout_sec", "paging" })
    return { upstream = "vega", method = "POST", path = "/in/v1/resources/query", json = body }
end

function M.trim_response(body)
    if type(body) ~= "table" then
        body = cljson.object()
    end
    util.keep_only(body, { "columns", "entries", "total_count", "warnings" })
    if type(body.columns) ~= "table" then
        body.columns = util.array()
    end
    if type(body.entries) ~= "table" then
        body.entries = util.array()
    end
    if util.is_null(body.total_count) then
        body.total_count = nil
    end
    return body
end


return M
