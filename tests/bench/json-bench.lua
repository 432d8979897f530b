-- json-bench.lua PAYLOAD_DIR: decode and encode throughput of the project's JSON
-- module (cljson.so) and Debian's lua-cjson ("cjson") on the same payloads, in one
-- lua5.4 process. Run through json-bench.sh, which sets package.cpath.
-- Payloads (written to PAYLOAD_DIR): the benchmark's 10-row query_object_instance
-- result, a 1,000-row one (ids above 2^53, numbers beyond int64, [] and {}), and the
-- nested kn_medical detail (object, relation and action types).
local cljson = require "cljson"
local cjson = require "cjson"

local dir = assert(arg[1], "usage: json-bench.lua PAYLOAD_DIR")
local repo = assert(os.getenv("REPO"), "REPO unset")
local MIN_TIME = tonumber(os.getenv("MIN_TIME") or "0.3")

local function read(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("a")
    f:close()
    return s
end

local function write(path, s)
    local f = assert(io.open(path, "wb"))
    f:write(s)
    f:close()
end

-- Rows shaped like the simulator's ot_drug rows (as tests/bench/toon-bench.mjs makes them).
local kn = cljson.decode(read(repo .. "/tests/platform/data/kn_medical.json"), { max_size = 1 << 26 })
local BIG = 9007199254740993
local function rows_payload(n)
    local base = kn.instances.ot_drug
    local rows = cljson.array()
    for i = 0, n - 1 do
        local src = base[i % #base + 1]
        local r = cljson.decode(cljson.encode(src))
        r.drug_id = BIG + i
        if i % 3 == 0 then
            r.batch_no = cljson.number("1234567890123456789" .. string.format("%04d", i))
        else
            r.batch_no = 20240000 + i
        end
        if i % 4 == 0 then
            r.tags = cljson.array()
            r.ext = cljson.object()
        end
        r._instance_id = "kn_medical-ot_drug-" .. (BIG + i)
        r._instance_identity = cljson.object({ drug_id = BIG + i }, { "drug_id" })
        r._display = r.name
        rows[#rows + 1] = r
    end
    local body = cljson.object()
    body.datas = rows
    body.total_count = n
    body.search_after = cljson.array({ BIG + n })
    return cljson.encode(body)
end

local function detail_payload()
    local d = cljson.decode(cljson.encode(kn))
    d.instances = nil
    return cljson.encode(d)
end

local payloads = {
    { name = "query 10 rows", text = read(dir .. "/canned.json") },
    { name = "query 1,000 rows", text = rows_payload(1000) },
    { name = "kn detail (nested)", text = detail_payload() },
}
for i, p in ipairs(payloads) do
    write(dir .. "/payload-" .. i .. ".json", p.text)
end

-- Runs f until MIN_TIME CPU seconds have passed; best of three such rounds.
local function rate(f, bytes)
    f()
    local best
    for _ = 1, 3 do
        local n, t0 = 0, os.clock()
        local dt
        repeat
            f()
            n = n + 1
            dt = os.clock() - t0
        until dt >= MIN_TIME
        local r = bytes * n / dt / 1e6
        if best == nil or r > best then
            best = r
        end
    end
    return best
end

local opts = { max_size = 1 << 26 }
io.write(string.format("%-20s %9s | %11s %11s %7s | %11s %11s %7s | %s\n", "payload", "bytes",
    "dec cljson", "dec cjson", "ratio", "enc cljson", "enc cjson", "ratio", "round trip exact"))
for _, p in ipairs(payloads) do
    local text = p.text
    local v1 = cljson.decode(text, opts)
    local v2 = cjson.decode(text)
    local d1 = rate(function() cljson.decode(text, opts) end, #text)
    local d2 = rate(function() cjson.decode(text) end, #text)
    local e1 = rate(function() cljson.encode(v1) end, #text)
    local e2 = rate(function() cjson.encode(v2) end, #text)
    local exact1 = cljson.encode(v1) == text
    local exact2 = cjson.encode(v2) == text
    io.write(string.format(
        "%-20s %9d | %8.1f MB/s %6.1f MB/s %6.2fx | %8.1f MB/s %6.1f MB/s %6.2fx | cljson %s, cjson %s\n",
        p.name, #text, d1, d2, d1 / d2, e1, e2, e1 / e2, exact1 and "yes" or "NO", exact2 and "yes" or "no"))
end
