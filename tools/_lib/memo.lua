-- _lib.memo: the one bounded memo for tools. A function whose answer depends only on
-- its arguments, asked again and again for the same few (an id's escaped form, the
-- request path of an id pair), answers from a table read instead. A memo made at a
-- module's top level lives as long as the module, one generation; it keeps at most
-- max answers and starts over (emptied) when full, so a stream of distinct
-- arguments cannot grow it. A nil answer is not kept.
local M = {}

-- A value a table can be keyed by (not nil, not NaN).
local function key_ok(x)
    return x ~= nil and x == x
end

-- memo.one(fn, max [, keep]) -> f(x) = fn(x), remembered for x when keep(x) (default:
-- any x a table can be keyed by).
function M.one(fn, max, keep)
    keep = keep or key_ok
    local seen, n = {}, 0
    return function(x)
        local v = seen[x]
        if v ~= nil then
            return v
        end
        v = fn(x)
        if v ~= nil and key_ok(x) and keep(x) then
            if n >= max then
                seen, n = {}, 0
            end
            seen[x] = v
            n = n + 1
        end
        return v
    end
end

-- memo.two(fn, max) -> f(a, b) = fn(a, b), remembered per (a, b) pair (both keys a
-- table can be keyed by), at most max pairs.
function M.two(fn, max)
    local seen, n = {}, 0
    return function(a, b)
        local of_a = seen[a]
        local v = of_a and of_a[b]
        if v ~= nil then
            return v
        end
        v = fn(a, b)
        if v ~= nil and key_ok(a) and key_ok(b) then
            if n >= max then
                seen, n, of_a = {}, 0, nil
            end
            if of_a == nil then
                of_a = {}
                seen[a] = of_a
            end
            of_a[b] = v
            n = n + 1
        end
        return v
    end
end

return M
