-- wrk script: POST the body in $WRK_BODY_FILE with the headers in $WRK_HEADERS
-- ("name: value" pairs separated by '|'), and print one machine-readable line
-- at the end: "WRK rps p50_us p99_us requests errors failed" (failed: non-2xx
-- status or an MCP result with "isError":true).
-- With WRK_BODY_REUSE=n the file holds one body per line instead, and each body is
-- sent at most n times (the managed calls: one Trace Core interaction per line);
-- WRK_BODY_SKIP lines are skipped (spent by an earlier run). Thread k of T takes
-- lines k, k+T, k+2T, ... (T = $WRK_THREADS) so no two threads share an interaction.
-- With WRK_DEPTH=n (n > 1, not with WRK_BODY_REUSE) each connection writes n requests at
-- once (pipelined: the next batch goes when all their answers are in); latency is then
-- per batch.
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
local reuse = tonumber(os.getenv("WRK_BODY_REUSE") or "")
local bodies = {}
if reuse then
    local skip = tonumber(os.getenv("WRK_BODY_SKIP") or "0")
    local i = 0
    for line in wrk.body:gmatch("[^\n]+") do
        i = i + 1
        if i > skip then
            bodies[#bodies + 1] = line
        end
    end
end
wrk.headers["Content-Type"] = "application/json"
for pair in (os.getenv("WRK_HEADERS") or ""):gmatch("[^|]+") do
    local name, value = pair:match("^%s*([^:]+):%s*(.-)%s*$")
    if name then
        wrk.headers[name] = value
    end
end

-- a global: thread:get() reads it from each thread's state
non2xx = 0 -- luacheck: ignore
-- MCP tool failures are 200 responses with "isError":true: they count as failures.
function response(status, _, body) -- luacheck: ignore
    if status < 200 or status > 299 or (body and body:find('"isError":true', 1, true)) then
        non2xx = non2xx + 1 -- luacheck: ignore
    end
end

-- wrk runs response() in each thread's own Lua state: collect the counters per thread.
local threads = {}
function setup(thread) -- luacheck: ignore
    threads[#threads + 1] = thread
    thread:set("thread_index", #threads)
end

local depth = tonumber(os.getenv("WRK_DEPTH") or "1")
if depth > 1 and not reuse then
    local batch
    function init() -- luacheck: ignore
        local one = wrk.format()
        batch = one:rep(depth)
    end
    function request() -- luacheck: ignore
        return batch
    end
end

if reuse then
    local stride = tonumber(os.getenv("WRK_THREADS") or "1")
    local line, used, exhausted = nil, 0, false
    function request() -- luacheck: ignore
        if not line or used >= reuse then
            line = line and line + stride or thread_index -- luacheck: ignore (set by setup)
            used = 0
        end
        used = used + 1
        local body = bodies[line]
        if not body then
            if not exhausted then
                io.stderr:write("wrk-post.lua: out of interaction bodies\n")
                exhausted = true
            end
            body = bodies[#bodies]
        end
        return wrk.format(nil, nil, nil, body)
    end
end

function done(summary, latency) -- luacheck: ignore
    local bad = 0
    for _, t in ipairs(threads) do
        bad = bad + (t:get("non2xx") or 0)
    end
    local e = summary.errors
    local errors = e.connect + e.read + e.write + e.timeout
    io.write(string.format("WRK %.1f %d %d %d %d %d\n",
        summary.requests / (summary.duration / 1e6), latency:percentile(50),
        latency:percentile(99), summary.requests, errors, bad))
end
