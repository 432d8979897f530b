-- The token-saving TOON view (src/codec/toonview.c through cltoon.view, declared by a tool
-- with toon_view): tables for rows with nested values, dotted columns, side lists,
-- and the cases that stay as they are.
local cpath = os.getenv("CLTOON_CPATH") or os.getenv("CLJSON_CPATH")
package.cpath = cpath and (cpath .. ";" .. package.cpath) or (package.cpath .. ";build/?.so")
local cljson = require "cljson"
local cltoon = require "cltoon"
local contract = require "contract"

-- omit: a function naming the column to leave out whatever the rows hold (the rule
-- without a prefix).
local function view_json(text, omit)
    local rule = omit and omit("_instance_id") and
        { rows = "datas", id = "_instance_id", identity = "_instance_identity" } or nil
    local got = cltoon.view(cljson.decode(text), rule)
    return got
end

describe("toonview", function()
    it("folds a nested record shared by every row into dotted columns and moves lists beside the table", function()
        local got = view_json('{"datas":[' ..
            '{"id":1,"tags":["a"],"ext":{"k":1},"_instance_identity":{"id":1},"_display":"x"},' ..
            '{"id":2,"tags":[],"ext":{},"_instance_identity":{"id":2},"_display":"y"}],"total_count":2}')
        assert.equal('{"datas":[{"id":1,"_instance_identity.id":1,"_display":"x"},' ..
            '{"id":2,"_instance_identity.id":2,"_display":"y"}],' ..
            '"datas_tags":[["a"],[]],"datas_ext":[{"k":1},{}],"total_count":2}', got)
    end)

    it("keeps big numbers and key order", function()
        local got = view_json('{"rows":[{"n":12345678901234567890123,"r":{"b":1,"a":2}}]}')
        assert.equal('{"rows":[{"n":12345678901234567890123,"r.b":1,"r.a":2}]}', got)
    end)

    it("leaves out a column only through omit", function()
        local omit = function(k) return k == "_instance_id" end
        assert.equal('{"datas":[{"id":1}]}', view_json('{"datas":[{"id":1,"_instance_id":"kn-ot-1"}]}', omit))
        local kept = '{"datas":[{"id":1,"_instance_id":"kn-ot-1"}]}'
        assert.equal(kept, view_json(kept))
    end)

    it("leaves rows with different keys, lists of records and taken side names as they are", function()
        local same = {
            '{"rows":[{"a":1,"l":[1]},{"b":2,"l":[2]}]}',
            '{"rows":[{"a":1,"sub":[{"x":1}]}]}',
            '{"rows":[{"a":1,"l":[1]}],"rows_l":0}',
            '{"rows":[{"l":[1]}]}',
            '{"rows":[{"a.b":1,"l":[1]}]}',
        }
        for _, text in ipairs(same) do
            assert.equal(text, view_json(text))
        end
    end)

    it("views records inside a list: their own arrays become tables", function()
        local got = view_json('{"rows":[{"a":1,"sub":[{"x":1,"m":{"k":"v"}},{"x":2,"m":{"k":"w"}}]}]}')
        assert.equal('{"rows":[{"a":1,"sub":[{"x":1,"m.k":"v"},{"x":2,"m.k":"w"}]}]}', got)
    end)

    it("the description sentence goes into both languages", function()
        local t = { description = contract.view_description(
            { ["zh-CN"] = "工具。", ["en-US"] = "A tool." }, true) }
        assert.equal("A tool. " .. contract.TOON_VIEW_DESCRIPTION["en-US"], t.description["en-US"])
        assert.equal("工具。" .. contract.TOON_VIEW_DESCRIPTION["zh-CN"], t.description["zh-CN"])
    end)
end)
