-- wrk script: POST the body in $WRK_BODY_FILE with the headers in $WRK_HEADERS
-- ("name: value" pairs separated by '|'), and print one machine-readable line
-- at the end: "WRK rps p50_us p99_us requests errors failed" (failed: non-2xx
-- status or an MCP result with "isError":true).
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
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
