-- The Lua face of the text catalogue (src/base/texts.h through cltexts.so) agrees with
-- what the C core answers with, and lua/catalog.lua reads it.
local catalog = require "catalog"
local cltexts = require "cltexts"

describe("catalog", function()
    it("reads the status texts of the C catalogue in both languages", function()
        local d, s = catalog.error_text(404, "en-US")
        assert.equal("Resource not found", d)
        assert.equal(cltexts.status[404]["en-US"][2], s)
        assert.equal("对象不存在", (catalog.error_text("Public.NotFound", "zh-CN")))
        assert.equal("参数错误", (catalog.error_text(418, "zh-CN"))) -- other 4xx: bad request
        assert.equal("Internal server error", (catalog.error_text(599, "en-US")))
        assert.equal("GatewayTimeout", catalog.status_name(504))
        assert.equal(429, catalog.status_of("TooManyRequests"))
    end)

    it("reads free texts by their lower-case id, nil for an unknown id", function()
        assert.equal("Retry later", catalog.text("retry_later", "en-US"))
        assert.equal("请稍后重试", catalog.text("retry_later", "zh-CN"))
        assert.equal("请稍后重试", catalog.text("retry_later", "fr-FR")) -- default language
        assert.is_nil(catalog.text("no_such_text", "en-US"))
        assert.same({ "zh-CN", "en-US" }, cltexts.languages)
    end)
end)
