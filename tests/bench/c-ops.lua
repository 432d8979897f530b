-- CPU time (os.clock, best of 5) of single C operations of stock Lua 5.4 on large
-- strings: what one operation that is not charged as it goes can add past the
-- run-time slice (docs/security.md, "Measured"). Run by hostile-cpu.sh.
local function best(f)
    local b = math.huge
    for _ = 1, 5 do
        collectgarbage()
        collectgarbage()
        local c = os.clock()
        f()
        local d = os.clock() - c
        if d < b then
            b = d
        end
    end
    return string.format("%.1f ms", b * 1000)
end

local MIB = 1024 * 1024
local s24 = string.rep("x", 24 * MIB)
local s24b = string.rep("x", 24 * MIB - 1) .. "x" -- equal bytes, another string
local s120 = string.rep("x", 120 * MIB)
local cases = {
    { "string.format('%s') of 24 MiB", function() return string.format("%s", s24) end },
    { "string.format('%s') of 120 MiB", function() return string.format("%s", s120) end },
    { "a 48 MiB concatenation", function() return s24 .. s24b end },
    { "a comparison of two 24 MiB strings", function() return s24 == s24b end },
    { "utf8.len of 24 MiB", function() return utf8.len(s24) end },
    { "string.upper of 24 MiB", function() return string.upper(s24) end },
    { "string.reverse of 24 MiB", function() return string.reverse(s24) end },
}
for _, c in ipairs(cases) do
    print(string.format("%-38s %s", c[1], best(c[2])))
end
