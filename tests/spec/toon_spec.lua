-- Spec for the Lua face of the TOON encoder (module "cltoon", docs/toon.md).
-- Run from the repo root: CLTOON_CPATH=build/?.so lua5.4 /usr/bin/busted tests/spec/toon_spec.lua
-- (under the lua_busted test, --cpath already points at the build directory)
local cpath = os.getenv("CLTOON_CPATH") or os.getenv("CLJSON_CPATH")
package.cpath = cpath and (cpath .. ";" .. package.cpath) or (package.cpath .. ";build/?.so")
local cljson = require "cljson"
local cltoon = require "cltoon"

local ROWS = '{"entries":[' ..
  '{"drug_id":9007199254740993,"name":"阿司匹林","batch_no":12345678901234567890123,"price":12.5},' ..
  '{"drug_id":1001,"name":"Ibuprofen, 200mg","batch_no":20240001,"price":3}],' ..
  '"total_count":2,"search_after":[]}'

describe("cltoon", function()
  describe("encode_json", function()
    it("renders uniform rows as a table with exact big integers", function()
      assert.are.equal(table.concat({
        "entries[2]{drug_id,name,batch_no,price}:",
        "  9007199254740993,阿司匹林,12345678901234567890123,12.5",
        '  1001,"Ibuprofen, 200mg",20240001,3',
        "total_count: 2",
        "search_after: []",
      }, "\n"), cltoon.encode_json(ROWS))
    end)

    it("keeps key order, nests objects and marks empty containers", function()
      assert.are.equal("z: 1\na:\n  y: true\n  x: null\nb: []\nc:",
                       cltoon.encode_json('{"z":1,"a":{"y":true,"x":null},"b":[],"c":{}}'))
    end)

    it("renders a NUMTEXT in exponent form as canonical decimal, digits intact", function()
      assert.are.equal("[3]: 123456.789012345678901,0.000001,1e-7",
                       cltoon.encode_json("[1.23456789012345678901e5, 1e-6, 1e-7]"))
    end)

    it("applies options", function()
      assert.are.equal("rows[2|]{a|b}:\n    1|x,y\n    2|z",
                       cltoon.encode_json('{"rows":[{"a":1,"b":"x,y"},{"a":2,"b":"z"}]}',
                                          { indent = 4, delimiter = "|" }))
      assert.are.equal("a.b.c: 1", cltoon.encode_json('{"a":{"b":{"c":1}}}', { key_folding = "safe" }))
      assert.are.equal("a.b:\n  c: 1",
                       cltoon.encode_json('{"a":{"b":{"c":1}}}', { keyFolding = "safe", flattenDepth = 2 }))
    end)

    it("returns nil and a message for bad JSON, raises for bad options", function()
      local v, err = cltoon.encode_json("{")
      assert.is_nil(v)
      assert.matches("^cltoon: ", err)
      assert.has_error(function() cltoon.encode_json("[]", { delimiter = ";" }) end)
      assert.has_error(function() cltoon.encode_json("[]", { indent = 0 }) end)
    end)
  end)

  describe("encode", function()
    it("encodes decoded values: int64, boxed big numbers, [] and {}", function()
      local v = cljson.decode(ROWS)
      assert.are.equal(cltoon.encode_json(ROWS), cltoon.encode(v))
    end)

    it("encodes values built in Lua", function()
      local v = cljson.object({ id = 9007199254740993, tags = cljson.array {}, ext = cljson.object(),
                                none = cljson.null, n = cljson.number("12345678901234567890123") },
                              { "id", "n", "tags", "ext", "none" })
      assert.are.equal("id: 9007199254740993\nn: 12345678901234567890123\ntags: []\next:\nnone: null",
                       cltoon.encode(v))
      assert.are.equal("[3]: 1,2.5,-0.5", cltoon.encode(cljson.array { 1, 2.5, -0.5 }))
      assert.are.equal("hello world", cltoon.encode("hello world"))
      assert.are.equal('"true"', cltoon.encode("true"))
    end)

    it("renders nested lists and objects as list items", function()
      local v = cljson.decode('{"items":[{"id":1,"tags":["a","b"]},{"id":2,"sub":{"k":"v"}},[1,2],"x"]}')
      assert.are.equal(table.concat({
        "items[4]:",
        "  - id: 1",
        "    tags[2]: a,b",
        "  - id: 2",
        "    sub:",
        "      k: v",
        "  - [2]: 1,2",
        "  - x",
      }, "\n"), cltoon.encode(v))
    end)

    it("converts directly when no other cljson copy is loaded", function()
      local saved = package.loaded.cljson
      package.loaded.cljson = nil
      local ok, text = pcall(cltoon.encode, cljson.array { cljson.object({ a = 1, b = "x" }, { "b", "a" }) })
      package.loaded.cljson = saved
      assert.is_true(ok)
      assert.are.equal("[1]{b,a}:\n  x,1", text)
    end)

    it("returns nil and a message for values JSON cannot carry", function()
      local v, err = cltoon.encode({ f = function() end })
      assert.is_nil(v)
      assert.matches("^cltoon: ", err)
      v, err = cltoon.encode(0 / 0)
      assert.is_nil(v)
      assert.is_string(err)
    end)
  end)
end)
