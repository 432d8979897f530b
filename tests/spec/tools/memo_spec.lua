-- _lib.memo: the bounded memo tools share.
local helper = require "helper"

describe("_lib.memo", function()
    local memo = helper.sandbox().tool_require("_lib.memo")

    it("remembers one-argument answers, at most max, and starts over when full", function()
        local calls = 0
        local f = memo.one(function(x)
            calls = calls + 1
            return "v" .. tostring(x)
        end, 3)
        assert.equal("va", f("a"))
        assert.equal("va", f("a"))
        assert.equal(1, calls)
        f("b")
        f("c")
        assert.equal(3, calls)
        f("d") -- full: emptied, then d kept
        assert.equal("va", f("a"))
        assert.equal(5, calls)
        assert.equal("vd", f("d"))
        assert.equal(5, calls)
    end)

    it("keeps only what keep accepts, never nil, NaN or a nil answer", function()
        local calls = 0
        local f = memo.one(function(x)
            calls = calls + 1
            if x ~= "none" then
                return tostring(x)
            end
        end, 10, function(x)
            return type(x) == "string"
        end)
        f(5)
        f(5)
        assert.equal(2, calls)
        f(nil)
        f(0 / 0)
        f(0 / 0)
        assert.equal(5, calls)
        assert.is_nil(f("none"))
        assert.is_nil(f("none"))
        assert.equal(7, calls)
    end)

    it("remembers two-argument answers per pair, at most max pairs", function()
        local calls = 0
        local f = memo.two(function(a, b)
            calls = calls + 1
            return tostring(a) .. "/" .. tostring(b)
        end, 2)
        assert.equal("a/b", f("a", "b"))
        assert.equal("a/b", f("a", "b"))
        assert.equal("a/c", f("a", "c"))
        assert.equal(2, calls)
        assert.equal("b/a", f("b", "a")) -- full: starts over
        assert.equal("a/b", f("a", "b"))
        assert.equal(4, calls)
        assert.equal("nil/b", f(nil, "b"))
        assert.equal("nil/b", f(nil, "b"))
        assert.equal(6, calls)
    end)
end)
