-- wrk script: POST the body in $WRK_BODY_FILE, $WRK_DEPTH requests (default 4) written
-- at once on each connection (pipelined: the next batch goes when all their answers are
-- in), and print one machine-readable line at the end, as wrk-post.lua does:
-- "WRK rps p50_us p99_us requests errors failed" (failed: non-2xx status). Latency is
-- per batch.
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
local body = f:read("*a")
f:close()
local depth = tonumber(os.getenv("WRK_DEPTH") or "4")
local batch

function init() -- luacheck: ignore
    local reqs = {}
    for i = 1, depth do
        reqs[i] = wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
    end
    batch = table.concat(reqs)
end

function request() -- luacheck: ignore
    return batch
end

non2xx = 0 -- luacheck: ignore (a global: thread:get() reads it)
function response(status) -- luacheck: ignore
    if status < 200 or status > 299 then
        non2xx = non2xx + 1 -- luacheck: ignore
    end
end

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
    io.write(string.format("WRK %.1f %d %d %d %d %d\n",
        summary.requests / (summary.duration / 1e6), latency:percentile(50),
        latency:percentile(99), summary.requests, e.connect + e.read + e.write + e.timeout, bad))
end
