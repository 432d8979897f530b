local helper = require "helper"

-- _lib.util.keep_only: the listed keys of a decoded object kept, in place.
describe("_lib.util.keep_only", function()
    local util = helper.sandbox().tool_require("_lib.util")
    local cljson = require "cljson"

    it("removes every other key from the same table, the kept ones in their decoded order", function()
        local obj = cljson.decode('{"z":1,"a":{"b":[1]},"m":null,"x":"s","b":2}')
        local same = util.keep_only(obj, { "b", "a", "nope" })
        assert.equal(obj, same)
        assert.equal('{"a":{"b":[1]},"b":2}', cljson.encode(obj))
        assert.are.same({ "a", "b" }, cljson.keys(obj))
    end)

    it("keeps what is already trimmed (the decoder's option keep) as it is", function()
        local keys = { "datas", "total_count" }
        local obj = cljson.decode('{"object_type":{},"datas":[],"total_count":3,"x":1}', { keep = keys })
        local before = cljson.encode(obj)
        assert.equal('{"datas":[],"total_count":3}', before)
        util.keep_only(obj, keys)
        assert.equal(before, cljson.encode(obj))
    end)

    it("empties the table for an empty list, and passes a non-table through", function()
        local obj = cljson.decode('{"a":1,"b":2}')
        assert.equal("{}", cljson.encode(util.keep_only(obj, {})))
        assert.equal("s", util.keep_only("s", { "a" }))
        assert.is_nil(util.keep_only(nil, { "a" }))
    end)

    it("clears many keys in one traversal, whatever their number", function()
        local obj = cljson.object()
        for i = 1, 200 do
            obj["k" .. i] = i
        end
        util.keep_only(obj, { "k7", "k150" })
        assert.equal('{"k150":150,"k7":7}', cljson.encode(obj))
    end)

    it("makes no table", function()
        local obj = cljson.decode('{"z":1,"a":2,"y":3,"b":4}')
        local keys = { "a", "b" }
        collectgarbage("stop")
        local before = collectgarbage("count")
        util.keep_only(obj, keys)
        local used = collectgarbage("count") - before
        collectgarbage("restart")
        assert.equal(0, used)
        assert.equal('{"a":2,"b":4}', cljson.encode(obj))
    end)
end)
