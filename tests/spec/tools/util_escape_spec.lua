local helper = require "helper"

-- _lib.util.escape: a path segment percent-encoded, RFC 3986 unreserved characters
-- as they are.
describe("_lib.util.escape", function()
    local util = helper.sandbox().tool_require("_lib.util")

    it("keeps an id of unreserved characters as it is", function()
        assert.equal("kn_medical-1.2~x", util.escape("kn_medical-1.2~x"))
        assert.equal("", util.escape(""))
    end)

    it("encodes every other byte as %XX (upper case)", function()
        assert.equal("a%2F..%2Fb", util.escape("a/../b"))
        assert.equal("a%20b%26c%3F%25%23", util.escape("a b&c?%#"))
        assert.equal("%E7%BD%91", util.escape("网"))
        assert.equal("%00%0A", util.escape("\0\n"))
    end)

    it("escapes an id seen before from memory, the same text, within a bound", function()
        local sb = helper.sandbox()
        local u = sb.tool_require("_lib.util")
        local gsub = ("").gsub -- what s:gsub calls
        local gsubs = 0
        local function count(event)
            local info = debug.getinfo(2, "f")
            if event == "call" and info.func == gsub then
                gsubs = gsubs + 1
            end
        end
        debug.sethook(count, "c")
        assert.equal("a%2Fb", u.escape("a/b"))
        assert.equal(1, gsubs) -- the hook sees the sandbox's gsub
        gsubs = 0
        local again = u.escape("a/b")
        debug.sethook()
        assert.equal("a%2Fb", again)
        assert.equal(0, gsubs)
        -- past the bound the memory starts over; every answer stays right
        for i = 1, 600 do
            assert.equal("id%20" .. i, u.escape("id " .. i))
        end
        assert.equal("a%2Fb", u.escape("a/b"))
        local long = string.rep("x/", 200)
        assert.equal(string.rep("x%2F", 200), u.escape(long))
        assert.equal(string.rep("x%2F", 200), u.escape(long))
    end)

    it("answers an id that needed no escaping, seen before, without scanning it", function()
        local u = helper.sandbox().tool_require("_lib.util")
        local find = ("").find -- what s:find calls
        local finds = 0
        local function count(event)
            local info = debug.getinfo(2, "f")
            if event == "call" and info.func == find then
                finds = finds + 1
            end
        end
        debug.sethook(count, "c")
        local first = u.escape("kn_medical")
        local scans = finds
        finds = 0
        local again = u.escape("kn_medical")
        debug.sethook()
        assert.equal("kn_medical", first)
        assert.equal(1, scans) -- the hook sees the sandbox's find
        assert.equal("kn_medical", again)
        assert.equal(0, finds)
        -- a number is never taken for its text's entry, nor the text for the number's
        assert.equal("42", u.escape(42))
        assert.equal("42", u.escape("42"))
        assert.equal("42", u.escape(42))
    end)

    it("takes numbers and booleans as their text", function()
        assert.equal("42", util.escape(42))
        assert.equal("1.5", util.escape(1.5))
        assert.equal("true", util.escape(true))
    end)
end)
