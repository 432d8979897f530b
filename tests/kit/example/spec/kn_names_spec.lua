-- Run from the directory that holds tools/ and spec/:
--   lua5.4 /usr/bin/busted --helper=<prefix>/share/context-loader/kit/helper.lua spec/
local helper = require "helper"

describe("kn_names", function()
    local tool = helper.load_tool("kn_names")

    it("asks bkn_backend for the page and keeps ids and names", function()
        local res, err, ctx = helper.call(tool, { limit = 2 },
            { responses = { { status = 200, fixture = "kn_list.json" } } })
        assert.is_nil(err)
        assert.same({ upstream = "bkn_backend", method = "GET", path = "/in/v1/knowledge-networks",
                      query = { limit = "2" } }, ctx.requests[1])
        assert.same({ names = { { id = "kn_medical", name = "医药" }, { id = "kn_retail", name = "Retail" } } }, res)
    end)

    it("refuses a limit out of range before any request", function()
        local res, err, ctx = helper.call(tool, { limit = 0 })
        assert.is_nil(res)
        assert.equal(400, err.status)
        assert.same({ "/limit" }, helper.paths(err.errors))
        assert.equal(0, #ctx.requests)
    end)

    it("maps an upstream failure", function()
        local _, err = helper.call(tool, {}, { responses = { { status = 503, body = "down" } } })
        assert.equal(503, err.status)
    end)
end)
