-- authz: the runtime's authorization cache. Tools reach it as ctx.authz (see
-- docs/writing-tools.md): facts about what the calling principal may see, kept
-- for a while so that repeated calls skip a probe. Entries live in this module,
-- which is loaded once per generation, so a reload drops them all; every entry is
-- filed under the principal it was stored for, so one account never reads
-- another's.
local M = {}

-- Most entries kept in total (all principals); past it the cache starts over.
local MAX_ENTRIES = 4096
local DEFAULT_TTL_MS = 60000

local stores, size = {}, 0

-- clear() drops every entry (tests; a reload does it by making a new generation).
function M.clear()
    stores, size = {}, 0
end

local function principal_key(p)
    if type(p) ~= "table" or type(p.account_id) ~= "string" or p.account_id == "" then
        return nil
    end
    return tostring(p.account_type or "") .. "\0" .. p.account_id
end

local function clock(now_ms)
    if type(now_ms) == "function" then
        return now_ms()
    end
    return os.time() * 1000
end

local NONE = {
    get = function()
        return nil
    end,
    put = function()
        return false
    end,
}

-- handle(principal, now_ms) -> {get = fn(key), put = fn(key, value, ttl_ms)}
-- get(key) -> the value stored for this principal, nil when absent or expired.
-- put(key, value, ttl_ms) stores value (not nil) for ttl_ms (default 60 s) and
-- returns true. A call without an account id gets a cache that keeps nothing.
function M.handle(principal, now_ms)
    local pk = principal_key(principal)
    if pk == nil then
        return NONE
    end
    return {
        get = function(key)
            local store = stores[pk]
            local hit = store and store[key]
            if hit and hit.expires > clock(now_ms) then
                return hit.value
            end
            return nil
        end,
        put = function(key, value, ttl_ms)
            if type(key) ~= "string" then
                error("ctx.authz.put: key must be a string", 2)
            end
            if value == nil then
                error("ctx.authz.put: value must not be nil", 2)
            end
            ttl_ms = math.tointeger(ttl_ms) or DEFAULT_TTL_MS
            if size >= MAX_ENTRIES then
                M.clear()
            end
            local store = stores[pk]
            if store == nil then
                store = {}
                stores[pk] = store
            end
            if store[key] == nil then
                size = size + 1
            end
            store[key] = { value = value, expires = clock(now_ms) + ttl_ms }
            return true
        end,
    }
end

return M
