-- Spec for the Lua face of the exact JSON codec (module "cljson", docs/json.md).
-- Run from the repo root: CLJSON_CPATH=build/?.so lua5.4 /usr/bin/busted tests/spec/json_spec.lua
-- (under the lua_busted test, --cpath and CLJSON_CPATH point at the build directory
-- under test; build/ comes last so it never shadows it)
local cpath = os.getenv("CLJSON_CPATH")
package.cpath = cpath and (cpath .. ";" .. package.cpath) or (package.cpath .. ";build/?.so")
local cljson = require "cljson"

describe("cljson", function()
  describe("round trips", function()
    it("keeps 64-bit ids, big numbers, [] and {} byte-for-byte", function()
      local text = '{"drug_id":9007199254740993,"batch_no":12345678901234567890123,"tags":[],"ext":{}}'
      local v = cljson.decode(text)
      assert.are.equal(9007199254740993, v.drug_id)
      assert.are.equal("integer", math.type(v.drug_id))
      assert.is_true(cljson.is_number(v.batch_no))
      assert.are.equal("12345678901234567890123", tostring(v.batch_no))
      assert.is_true(cljson.is_array(v.tags))
      assert.is_true(cljson.is_object(v.ext))
      assert.are.equal(text, cljson.encode(v))
    end)

    it("encodes deep nesting: decoded objects and arrays, plain tables", function()
      -- the encoder makes room on the Lua stack every few levels
      local text = string.rep('{"k":[', 250) .. "1" .. string.rep("]}", 250)
      assert.are.equal(text, cljson.encode(cljson.decode(text)))
      local t = { z = 1, a = 2 }
      for _ = 1, 500 do
        t = { b = t, a = { t.a or 1 } }
      end
      local v = cljson.decode(cljson.encode(t))
      for _ = 1, 500 do
        assert.are.same({ "a", "b" }, cljson.keys(v))
        v = v.b
      end
      assert.are.equal('{"a":2,"z":1}', cljson.encode(v))
    end)

    it("decodes numbers by the exactness rule", function()
      local v = cljson.decode('[1, -9223372036854775808, 1.5, 0.1, 1e2, 1.0, 1.000000000000000005, 1e400]')
      assert.are.equal("integer", math.type(v[1]))
      assert.are.equal(math.mininteger, v[2])
      assert.are.equal("float", math.type(v[3]))
      assert.are.equal(0.1, v[4])
      assert.are.equal(100.0, v[5])
      assert.are.equal("float", math.type(v[6]))
      assert.is_true(cljson.is_number(v[7]))
      assert.is_true(cljson.is_number(v[8]))
      assert.are.equal('[1,-9223372036854775808,1.5,0.1,100.0,1.0,1.000000000000000005,1e400]',
                       cljson.encode(v))
    end)

    it("writes floats shortest, keeping float-ness", function()
      assert.are.equal("[3.0,0.30000000000000004,-0.0,1e+100]",
                       cljson.encode(cljson.array { 3.0, 0.1 + 0.2, -0.0, 1e100 }))
    end)

    it("boxed numbers compare by text and convert", function()
      local a, b = cljson.number("123456789012345678901234"), cljson.number("123456789012345678901234")
      assert.are.equal(a, b)
      assert.are_not.equal(a, cljson.number("1"))
      assert.are.equal("123456789012345678901234", tostring(a))
      assert.are.equal(42, cljson.tonumber(cljson.number(42)))
      assert.are.equal(1.5, cljson.tonumber(cljson.number("1.5")))
      assert.has_error(function() cljson.number("01") end)
      assert.has_error(function() cljson.number("NaN") end)
    end)

    it("null survives", function()
      local v = cljson.decode('{"a":null,"b":[null,1]}')
      assert.are.equal(cljson.null, v.a)
      assert.are.equal(cljson.null, v.b[1])
      assert.are.equal('{"a":null,"b":[null,1]}', cljson.encode(v))
      assert.are.equal("null", cljson.encode(nil))
      assert.are.equal("null", cljson.encode(cljson.null))
    end)

    it("strings with escapes and NUL", function()
      local v = cljson.decode('"a\\u0000b\\n\\u00e9\\ud83d\\ude00"')
      assert.are.equal("a\0b\n\xc3\xa9\xf0\x9f\x98\x80", v)
      assert.are.equal('"a\\u0000b\\n\xc3\xa9\xf0\x9f\x98\x80"', cljson.encode(v))
    end)
  end)

  describe("key order", function()
    it("remembers decoded order", function()
      local text = '{"z":1,"a":2,"m":{"y":true,"b":false}}'
      local v = cljson.decode(text)
      assert.are.same({ "z", "a", "m" }, cljson.keys(v))
      assert.are.equal(text, cljson.encode(v))
    end)

    it("starts every decode afresh: after a rejected text, an escaped key, a long one", function()
      -- decodes share their scratch buffers (key order, unescaping) from one to the next
      assert.is_nil(cljson.pdecode('{"p":{"q":{"r":1,"s":[1,2,'))
      local v = cljson.decode('{"b":1,"a":{"d":2,"c":3}}')
      assert.are.same({ "b", "a" }, cljson.keys(v))
      assert.are.same({ "d", "c" }, cljson.keys(v.a))
      v = cljson.decode('{"\\u00e9x":"\\n","y":"é"}')
      assert.are.equal('{"éx":"\\n","y":"é"}', cljson.encode(v))
      local long = string.rep("k", 70000)
      v = cljson.decode('{"' .. long .. '":"' .. long .. '\\t","z":1}')
      assert.are.same({ long, "z" }, cljson.keys(v))
      assert.are.equal(long .. "\t", v[long])
      v = cljson.decode('{"y":"\\"","x":2}')
      assert.are.same({ "y", "x" }, cljson.keys(v))
      assert.are.equal('"', v.y)
    end)

    it("decodes one after another: each object keeps its own order", function()
      -- orders of the same length, first and last bytes (x and y swapped), decoded apart
      local a = cljson.decode('{"aaaaaaaa":1,"x":2,"y":3,"zzzzzzzz":4}')
      local b = cljson.decode('{"aaaaaaaa":1,"y":2,"x":3,"zzzzzzzz":4}')
      local c = cljson.decode('[{"aaaaaaaa":1,"x":2,"y":3,"zzzzzzzz":4},{"aaaaaaaa":1,"y":2,"x":3,"zzzzzzzz":4}]')
      assert.are.same({ "aaaaaaaa", "x", "y", "zzzzzzzz" }, cljson.keys(a))
      assert.are.same({ "aaaaaaaa", "y", "x", "zzzzzzzz" }, cljson.keys(b))
      assert.are.same({ "aaaaaaaa", "x", "y", "zzzzzzzz" }, cljson.keys(c[1]))
      assert.are.same({ "aaaaaaaa", "y", "x", "zzzzzzzz" }, cljson.keys(c[2]))
      -- an order seen before, then the same keys with a duplicate
      assert.are.same({ "b", "a" }, cljson.keys(cljson.decode('{"b":1,"a":2}')))
      assert.are.equal('{"b":3,"a":2}', cljson.encode(cljson.decode('{"b":1,"a":2,"b":3}')))
      -- rows with an order too long for the cache
      local keys, row = {}, {}
      for i = 1, 600 do
        keys[i] = string.format("col%04d", i)
        row[i] = string.format('"%s":%d', keys[i], i)
      end
      local text = "{" .. table.concat(row, ",") .. "}"
      local rows = cljson.decode("[" .. text .. "," .. text .. "]")
      assert.are.same(keys, cljson.keys(rows[1]))
      assert.are.same(keys, cljson.keys(rows[2]))
      assert.are.same(keys, cljson.keys(cljson.decode(text)))
    end)

    it("puts new keys after remembered ones, sorted, and skips removed keys", function()
      local v = cljson.decode('{"z":1,"a":2,"m":3}')
      v.a = nil
      v.q = "q"
      v.c = "c"
      assert.are.equal('{"z":1,"m":3,"c":"c","q":"q"}', cljson.encode(v))
      v.a = 5 -- a remembered key comes back in its old place
      assert.are.equal('{"z":1,"a":5,"m":3,"c":"c","q":"q"}', cljson.encode(v))
    end)

    it("duplicate keys: first position, last value", function()
      assert.are.equal('{"a":2,"b":1}', cljson.encode(cljson.decode('{"a":1,"b":1,"a":2}')))
    end)

    it("object(t, keys) states an order explicitly", function()
      local o = cljson.object({ b = 1, a = 2, c = 3 }, { "c", "a" })
      assert.are.equal('{"c":3,"a":2,"b":1}', cljson.encode(o))
      assert.are.same({ "c", "a", "b" }, cljson.keys(o))
    end)

    it("object() without an order: keys sorted, small and big, nested", function()
      -- up to 16 keys are gathered while counting, more in a second walk
      for _, n in ipairs({ 1, 2, 15, 16, 17, 40 }) do
        local t, keys = {}, {}
        for i = n, 1, -1 do
          local k = string.format("k%02d", i)
          t[k] = i
          keys[#keys + 1] = string.format('"%s":%d', k, i)
        end
        table.sort(keys)
        local want = "{" .. table.concat(keys, ",") .. "}"
        assert.are.equal(want, cljson.encode(cljson.object(t)))
        assert.are.equal('{"in":' .. want .. ',"z":' .. want .. "}",
          cljson.encode(cljson.object({ z = cljson.object(t), ["in"] = cljson.object(t) })))
      end
      -- a non-string key among the first 16 or past them fails the object
      for _, n in ipairs({ 1, 16, 17, 30 }) do
        local t = {}
        for i = 1, n do
          t["k" .. i] = i
        end
        t[n + 1] = true
        local ok, err = pcall(cljson.encode, cljson.object(t))
        assert.is_false(ok)
        assert.matches("neither an array nor an object", err)
      end
    end)

    it("plain tables: sequences are arrays, others objects with sorted keys", function()
      assert.are.equal("[1,2,3]", cljson.encode({ 1, 2, 3 }))
      assert.are.equal('{"a":1,"b":2}', cljson.encode({ b = 2, a = 1 }))
      assert.are.equal("{}", cljson.encode({}))
      assert.are.equal("[]", cljson.encode(cljson.array()))
      assert.are.equal("{}", cljson.encode(cljson.object()))
    end)
  end)

  describe("canonical", function()
    it("sorts every object's keys bytewise", function()
      local v = cljson.decode('{"b":{"d":1,"c":[{"z":1,"y":2}]},"a":[],"B":{}}')
      assert.are.equal('{"B":{},"a":[],"b":{"c":[{"y":2,"z":1}],"d":1}}', cljson.encode_canonical(v))
      -- ordinary encode is untouched by a canonical encode
      assert.are.equal('{"b":{"d":1,"c":[{"z":1,"y":2}]},"a":[],"B":{}}', cljson.encode(v))
    end)
  end)

  describe("decode errors", function()
    local cases = {
      { "[1,2,]", "unexpected character at byte 5" },
      { "[01]", "leading zero in number at byte 2" },
      { '{"a":1,}', "expected string key at byte 7" },
      { "[NaN]", "unexpected character at byte 1" },
      { '["\\ud800"]', "lone high surrogate \\u escape at byte 2" },
      { '["\xed\xa0\x80"]', "invalid UTF-8 in string at byte 3" },
      { "\xef\xbb\xbf{}", "byte order mark not allowed at byte 0" },
      { "{} x", "trailing characters after JSON value at byte 3" },
    }
    for _, c in ipairs(cases) do
      it("reports " .. c[2], function()
        local v, err = cljson.pdecode(c[1])
        assert.is_nil(v)
        assert.are.equal(c[2], err)
        local ok, msg = pcall(cljson.decode, c[1])
        assert.is_false(ok)
        assert.are.equal("cljson: " .. c[2], msg)
      end)
    end

    it("rejects non-strings", function()
      assert.has_error(function() cljson.decode({}) end)
    end)
  end)

  describe("limits", function()
    it("depth", function()
      local deep = string.rep("[", 513) .. string.rep("]", 513)
      local v, err = cljson.pdecode(deep)
      assert.is_nil(v)
      assert.are.equal("nesting too deep at byte 512", err)
      assert.is_table(cljson.decode(string.rep("[", 512) .. string.rep("]", 512)))
      assert.is_nil((cljson.pdecode("[[[1]]]", { max_depth = 2 })))
      assert.is_table(cljson.decode("[[1]]", { max_depth = 2 }))
    end)

    it("size", function()
      local v, err = cljson.pdecode("[1,2,3]", { max_size = 4 })
      assert.is_nil(v)
      assert.are.equal("document exceeds size limit at byte 4", err)
      assert.is_table(cljson.decode("[1,2,3]", { max_size = 7 }))
    end)
  end)

  describe("encode errors", function()
    local function enc_err(v)
      local ok, msg = pcall(cljson.encode, v)
      assert.is_false(ok)
      return msg
    end

    it("cycles", function()
      local t = { a = {} }
      t.a.b = t
      assert.are.equal("cljson: cycle in table at $.a.b", enc_err(t))
    end)

    it("depth", function()
      local t = {}
      local cur = t
      for _ = 1, 600 do
        cur[1] = {}
        cur = cur[1]
      end
      assert.matches("^cljson: nesting too deep at ", enc_err(t))
    end)

    it("non-finite numbers", function()
      assert.are.equal("cljson: cannot encode a non-finite number at $[2]", enc_err({ 1, 1 / 0 }))
      assert.are.equal("cljson: cannot encode a non-finite number at $.x", enc_err({ x = 0 / 0 }))
    end)

    it("invalid UTF-8", function()
      assert.are.equal("cljson: invalid UTF-8 in string at $.s", enc_err({ s = "\xff" }))
      assert.are.equal("cljson: invalid UTF-8 in object key at $.?", enc_err({ ["\xc0"] = 1 }))
    end)

    it("mixed, sparse and non-string keys", function()
      assert.matches("neither an array nor an object", enc_err({ 1, 2, x = 3 }))
      assert.matches("neither an array nor an object", enc_err({ [1] = 1, [3] = 3 }))
      assert.matches("neither an array nor an object", enc_err({ [true] = 1 }))
      assert.matches("neither an array nor an object", enc_err(cljson.object({ 1 })))
    end)

    it("functions, userdata, threads", function()
      assert.are.equal("cljson: cannot encode a function at $.f", enc_err({ f = print }))
      assert.are.equal("cljson: cannot encode a thread at $[1]",
                       enc_err({ coroutine.create(function() end) }))
      assert.matches("cannot encode a userdata", enc_err({ io.stdout }))
    end)
  end)

  it("the module can be required twice and keeps recognising values", function()
    local v = cljson.decode("[]")
    package.loaded.cljson = nil
    local again = require "cljson"
    assert.is_true(again.is_array(v))
    assert.are.equal("[]", again.encode(v))
    assert.are.equal(cljson.null, again.null)
  end)
end)

describe("cljson raw values", function()
  local RAW = { raw = "datas" }

  -- decode with and without the raw option: same acceptance, same error, same bytes
  local function same_both_ways(text)
    local a, ea = cljson.pdecode(text)
    local b, eb = cljson.pdecode(text, RAW)
    assert.are.equal(ea, eb)
    if a == nil then
      return nil
    end
    assert.are.equal(cljson.encode(a), cljson.encode(b))
    assert.are.equal(cljson.encode_canonical(a), cljson.encode_canonical(b))
    return b
  end

  it("keeps rows whose text is what the encoder writes as raw, byte for byte", function()
    local text = '{"total_count":2,"datas":[{"id":9007199254740993,"n":12345678901234567890123,'
      .. '"x":1.5,"y":1.0,"big":1E400,"t":[],"o":{},"s":"a\\"b\\\\c\\n\\u0001é/\127","u":null,'
      .. '"b":true,"nest":{"l":[[],{}],"k":-1}},{"a":1}],"next":[1]}'
    local v = same_both_ways(text)
    assert.are.equal(text, cljson.encode(v))
    assert.are.equal("object", cljson.is_raw(v.datas[1]))
    assert.are.equal("object", cljson.is_raw(v.datas[2]))
    assert.is_true(cljson.is_array(v.datas))
    assert.is_true(cljson.is_array(v.next)) -- only the named array holds raw rows
    assert.is_false(cljson.is_raw(v.next))
    assert.are.equal('{"a":1}', tostring(v.datas[2]))
    assert.are.equal("userdata", type(v.datas[1]))
    assert.are.equal(getmetatable(v.datas[1]), cljson.raw_mt)
  end)

  it("decodes rows into tables when raw text would encode differently", function()
    for _, row in ipairs({
      '{"a": 1}', '{ "a":1}', '{"a":1 }', '{"a":[1, 2]}', '{"a":"\\u00e9"}', '{"a":"\\/"}',
      '{"a":"\\u000A"}', '{"a":"\\u001F"}', '{"a":1e2}', '{"a":1.50}', '{"a":-0}', '{"a":0e5}',
      '{"a":1,"a":2}', '{"n":{"k":1,"k":1}}', '{"\\u0061":1}', '{"a":1E+2}',
    }) do
      local v = same_both_ways('{"datas":[' .. row .. ']}')
      assert.are.equal("table", type(v.datas[1]), row)
    end
    -- an object of more than 64 members is not checked for duplicates: a table
    local keys = {}
    for i = 1, 65 do
      keys[i] = '"k' .. i .. '":' .. i
    end
    local v = same_both_ways('{"datas":[{' .. table.concat(keys, ",") .. '}]}')
    assert.are.equal("table", type(v.datas[1]))
    -- escapes the writer uses, and numbers it writes the same way, stay raw
    for _, row in ipairs({ '{"a":"\\u001f\\b\\t"}', '{"a":-0.0}', '{"a":0.30000000000000004}',
      '{"a":1e+100}', '{"a":-9223372036854775808}', '{"a":-9223372036854775809}' }) do
      v = same_both_ways('{"datas":[' .. row .. ']}')
      assert.are.equal("object", cljson.is_raw(v.datas[1]), row)
    end
  end)

  it("finds duplicate keys and non-canonical text wherever they are in a row", function()
    local function kind(row)
      local v = same_both_ways('{"datas":[' .. row .. ']}')
      return type(v.datas[1])
    end
    -- the same key read near the end of the text and far from it, short and long
    for _, k in ipairs({ "", "a", "abcdefg", "abcdefgh", "abcdefghi", "abcdefgh_1_ijklmnop", "é",
      string.rep("k", 15), string.rep("k", 16), string.rep("k", 17), 'abcdefghijklmn\\"o', "abcdefghijklmnopé" }) do
      local q = '"' .. k .. '"'
      assert.are.equal("table", kind("{" .. q .. ":1," .. q .. ":2}"), k)
      assert.are.equal("table", kind("{" .. q .. ":1,\"x\":{" .. q .. ":[]," .. q .. ":3}}"), k)
      assert.are.equal("userdata", kind("{" .. q .. ":1,\"x\":{" .. q .. ":2}}"), k)
    end
    -- a row after one with other keys: a duplicate of a key both rows share is found
    for _, k in ipairs({ "a", "abcdefgh", "abcdefghijklmnop", "abcdefghijklmnopq" }) do
      local q = '"' .. k .. '"'
      local first = "{" .. q .. ':1,"b":2}'
      for _, second in ipairs({ "{" .. q .. ':1,"c":3,' .. q .. ":4}", "{" .. q .. ':1,"b":2,' .. q .. ":3}",
        '{"b":1,' .. q .. ':2,"b":3}' }) do
        local v = same_both_ways('{"datas":[' .. first .. "," .. second .. "," .. first .. "]}")
        assert.are.equal("userdata", type(v.datas[1]), second)
        assert.are.equal("table", type(v.datas[2]), second)
        assert.are.equal("userdata", type(v.datas[3]), second)
      end
      -- and a row like the last one but for one key of the same length
      local other = "{" .. q .. ':1,"B":2}'
      local v = same_both_ways('{"datas":[' .. first .. "," .. other .. "," .. first .. "]}")
      assert.are.equal('{"datas":[' .. first .. "," .. other .. "," .. first .. "]}", cljson.encode(v))
      assert.are.equal("userdata", type(v.datas[2]))
    end
    -- keys alike in their first and last 8 bytes and length are still different keys
    assert.are.equal("userdata", kind('{"abcdefgh_1_ijklmnop":1,"abcdefgh_2_ijklmnop":2}'))
    -- 64 members (a duplicate among them found wherever it is), then 65
    local keys = {}
    for i = 1, 64 do
      keys[i] = '"key_' .. string.rep("k", i % 13) .. i .. '":' .. i
    end
    assert.are.equal("userdata", kind("{" .. table.concat(keys, ",") .. "}"))
    for _, at in ipairs({ 2, 33, 64 }) do
      local dup = { table.unpack(keys) }
      dup[at] = keys[at - 1]:gsub(":%d+$", ":0")
      assert.are.equal("table", kind("{" .. table.concat(dup, ",") .. "}"), at)
    end
    -- numbers: digit runs of every length, "-0" anywhere, and what is not a number
    for n = 1, 25 do
      local d = string.rep("9", n)
      assert.are.equal("userdata", kind('{"a":' .. d .. ',"b":[-' .. d .. '],"c":{"d":' .. d .. "}}"), n)
      assert.are.equal("table", kind('{"a":' .. d .. ',"b":{"c":[-0]}}'), n)
      assert.is_nil(cljson.pdecode('{"datas":[{"a":0' .. d .. "}]}", RAW))
      assert.is_nil(cljson.pdecode('{"datas":[{"a":-' .. d .. "-}]}", RAW))
      assert.is_nil(cljson.pdecode('{"datas":[{"a":' .. d, RAW))
    end
    -- whitespace in each place a row can have it
    local row = '{"a":[1,{"b":"c"}],"d":2}'
    for i = 1, #row - 1 do
      for _, ws in ipairs({ " ", "\n", "\t", "\r" }) do
        local r = row:sub(1, i) .. ws .. row:sub(i + 1)
        if not r:find('"[^"]*' .. ws .. '[^"]*"') then -- not inside a string
          assert.are.equal("table", kind(r), r)
        end
      end
    end
    -- a dropped member wherever it is, and a row cut down to nothing
    local text = '{"datas":[{"_score":1,"a":{"_score":2}},{"a":1,"_score":2},{"a":1,"_score":2,"b":3},'
      .. '{"_score":[{"_score":1}]},{"_scorf":1}]}'
    local v = cljson.decode(text, { raw = "datas", drop = { "_score" } })
    assert.are.equal('{"datas":[{"a":{"_score":2}},{"a":1},{"a":1,"b":3},{},{"_scorf":1}]}',
      cljson.encode(v))
    for i = 1, 5 do
      assert.are.equal("object", cljson.is_raw(v.datas[i]))
    end
    -- names of 8 bytes and more, beside keys of their length
    text = '{"datas":[{"overall_":1,"overall-":2,"a_long_dropped_key":3,"a_long_dropped_kez":4}]}'
    v = cljson.decode(text, { raw = "datas", drop = { "overall_", "a_long_dropped_key" } })
    assert.are.equal('{"datas":[{"overall-":2,"a_long_dropped_kez":4}]}', cljson.encode(v))
    assert.are.equal("object", cljson.is_raw(v.datas[1]))
  end)

  it("only touches object elements of the named top-level array", function()
    local v = same_both_ways('{"datas":[1,"s",null,[{"a":1}],{"a":1}],"x":{"datas":[{"a":1}]}}')
    assert.are.equal("integer", math.type(v.datas[1]))
    assert.is_true(cljson.is_array(v.datas[4]))
    assert.are.equal("object", cljson.is_raw(v.datas[5]))
    assert.is_true(cljson.is_object(v.x.datas[1]))
    v = same_both_ways('[{"datas":[{"a":1}]}]')
    assert.is_true(cljson.is_object(v[1].datas[1]))
    v = same_both_ways('{"datas":{"a":{"b":1}}}')
    assert.is_true(cljson.is_object(v.datas.a))
    v = same_both_ways('{"datas":[{"a":1}],"datas":[{"b":2}]}')
    assert.are.equal('{"b":2}', tostring(v.datas[1]))
  end)

  it("still validates raw rows: malformed text and the depth limit give the decoder's errors", function()
    for _, text in ipairs({
      '{"datas":[{"a":1,}]}', '{"datas":[{"a":01}]}', '{"datas":[{"a":"\\ud800"}]}',
      '{"datas":[{"a":"\255"}]}', '{"datas":[{"a":"x\001"}]}', '{"datas":[{"a":tru}]}',
      '{"datas":[{"a":1}', '{"datas":[{"a":1}]} x', '{"datas":[{"a":"\\q"}]}', '{"datas":[{"a" 1}]}',
      '{"datas":[{"a":[1 2]}]}', '{"datas":[{"a":1.}]}', '{"datas":[{"a":-}]}',
    }) do
      local v, err = cljson.pdecode(text, RAW)
      assert.is_nil(v, text)
      assert.are.equal(select(2, cljson.pdecode(text)), err)
      assert.has_error(function() cljson.decode(text, RAW) end)
    end
    for _, deep in ipairs({ '{"datas":[{"a":[[1]]}]}', '{"datas":[{"b":1,"a":[[]]}]}',
      '{"datas":[{"b":1,"a":[{}]}]}', '{"datas":[{"b":1,"a":{"c":{}}}]}' }) do -- depth 5
      same_both_ways(deep)
      for _, d in ipairs({ 4, 5 }) do
        local a, ea = cljson.pdecode(deep, { max_depth = d })
        local b, eb = cljson.pdecode(deep, { max_depth = d, raw = "datas" })
        assert.are.equal(ea, eb)
        assert.are.equal(d == 4, a == nil, deep)
        assert.are.equal(a == nil, b == nil)
      end
    end
    for _, empty in ipairs({ '{"datas":[{"b":1,"a":[]}]}', '{"datas":[{"b":1,"a":{}}]}' }) do -- depth 4
      assert.is_nil(cljson.pdecode(empty, { max_depth = 3, raw = "datas" }))
      assert.are.equal("object", cljson.is_raw(cljson.decode(empty, { max_depth = 4, raw = "datas" }).datas[1]))
    end
    assert.has_error(function() cljson.decode("{}", { raw = 1 }) end)
  end)

  it("without() cuts members out of the text and leaves the rest byte for byte", function()
    local r = cljson.raw('{"x":1,"_score":0.5,"y":{"_score":2},"z":[{"_score":3}]}')
    assert.are.equal('{"x":1,"y":{"_score":2},"z":[{"_score":3}]}', tostring(cljson.without(r, "_score")))
    assert.are.equal('{"_score":0.5,"z":[{"_score":3}]}', tostring(cljson.without(r, "x", "y")))
    assert.are.equal('{"x":1,"_score":0.5}', tostring(cljson.without(r, "y", "z")))
    assert.are.equal('{"x":1,"y":{"_score":2}}', tostring(cljson.without(r, "_score", "z")))
    assert.are.equal("{}", tostring(cljson.without(r, "z", "x", "_score", "y")))
    assert.is_true(rawequal(r, cljson.without(r, "nope")))
    assert.is_true(rawequal(r, cljson.without(r)))
    local e = cljson.raw('{"a\\"b":1,"c\\n":"}\\",{","é":[1],"d":2}')
    assert.are.equal('{"c\\n":"}\\",{","é":[1],"d":2}', tostring(cljson.without(e, 'a"b')))
    assert.are.equal('{"a\\"b":1,"é":[1],"d":2}', tostring(cljson.without(e, "c\n")))
    assert.are.equal('{"a\\"b":1,"c\\n":"}\\",{","d":2}', tostring(cljson.without(e, "é")))
    -- the result is a raw value too, and decodes like the table with the key removed
    local w = cljson.without(e, "d")
    assert.are.equal("object", cljson.is_raw(w))
    local t = cljson.decode(tostring(e))
    t.d = nil
    assert.are.equal(cljson.encode(t), cljson.encode(w))
    -- on a table: the members removed in place
    t = cljson.decode('{"a":1,"b":2,"c":3}')
    assert.is_true(rawequal(t, cljson.without(t, "a", "c")))
    assert.are.equal('{"b":2}', cljson.encode(t))
    -- arrays and scalars have no members
    assert.are.equal("[1]", tostring(cljson.without(cljson.raw("[1]"), "a")))
    assert.has_error(function() cljson.without("x", "a") end)
    assert.has_error(function() cljson.without(r, 1) end)
  end)

  it("drops members of every row while decoding (option drop)", function()
    local text = '{"datas":[{"_score":1,"a":1},{"a":2,"_score":0.5,"x":{"_score":3}},{"a": 3,"_score":4},'
      .. '{"b":1,"_score":1,"c":2,"z":9},{"_score":1},5],"_score":7}'
    local v = cljson.decode(text, { raw = "datas", drop = { "_score", "z" } })
    assert.are.equal('{"datas":[{"a":1},{"a":2,"x":{"_score":3}},{"a":3},{"b":1,"c":2},{},5],"_score":7}',
      cljson.encode(v))
    assert.are.equal("object", cljson.is_raw(v.datas[1]))
    assert.are.equal("table", type(v.datas[3])) -- whitespace: decoded, the members removed
    -- the same as without() on the rows of the plain decoding
    local t = cljson.decode(text)
    for i, r in ipairs(t.datas) do
      if type(r) == "table" then
        t.datas[i] = cljson.without(r, "_score", "z")
      end
    end
    assert.are.equal(cljson.encode(t), cljson.encode(v))
    assert.has_error(function() cljson.decode(text, { drop = { "a" } }) end)
    assert.has_error(function() cljson.decode(text, { raw = "datas", drop = { 'a"' } }) end)
    assert.has_error(function() cljson.decode(text, { raw = "datas", drop = { 1 } }) end)
    assert.has_error(function() cljson.decode(text, { raw = "datas", drop = "a" }) end)
  end)

  it("reads rows like the last one's keys byte for byte, not just by their start", function()
    -- each pair: a first row, then one whose keys start like the first's but differ
    -- (a byte, a length, an escape, a duplicate, whitespace, a dropped member moved)
    local long = string.rep("k", 20)
    local longer = string.rep("q", 40)
    local pairs_ = {
      { '{"a":1,"bc":2,"_score":3}', '{"a":1,"b":2,"_score":3}' },
      { '{"a":1,"b":2,"_score":3}', '{"a":1,"bc":2,"_score":3}' },
      { '{"a":1,"b":2,"_score":3}', '{"a":1,"c":2,"_score":3}' },
      { '{"a":1,"b":2}', '{"a":1,"a":2}' },
      { '{"a":1,"b":2}', '{"a":1,"b":2,"b":3}' },
      { '{"a":1,"b":2}', '{"a":1,"b" :2}' },
      { '{"a\\"x":1,"b":2}', '{"a\\"x":1,"a\\"x":2}' },
      { '{"a\\"x":1,"b":2}', '{"a\\"y":1,"b":2}' },
      { '{"_score":1,"a":2}', '{"a":2,"_score":1}' },
      { '{"a":1,"_score":2}', '{"a":1,"_scorf":2}' },
      { '{"' .. long .. '":1,"b":2}', '{"' .. long .. 'x":1,"b":2}' },
      { '{"' .. long .. '":1,"b":2}', '{"' .. long:sub(2) .. 'x":1,"b":2}' },
      { '{"' .. longer .. '":1,"b":2}', '{"' .. longer:sub(2) .. 'x":1,"b":2}' },
      { '{"' .. longer .. '":1,"b":2}', '{"' .. longer .. '":1,"' .. longer .. '":2}' },
      { '{"x":1,"y":2}', '{"x":1,"y":2}' }, -- the end of the text within 16 bytes
    }
    for _, pr in ipairs(pairs_) do
      for _, rows in ipairs({ pr[1] .. "," .. pr[2], pr[1] .. "," .. pr[1] .. "," .. pr[2] }) do
        local text = '{"datas":[' .. rows .. ']}'
        local v = same_both_ways(text)
        local opts = { raw = "datas", drop = { "_score", "b" } }
        local d = cljson.decode(text, opts)
        local t = cljson.decode(text)
        for i, r in ipairs(t.datas) do
          t.datas[i] = cljson.without(r, "_score", "b")
        end
        assert.are.equal(cljson.encode(t), cljson.encode(d), text)
        assert.are.equal(cljson.encode_canonical(t), cljson.encode_canonical(d), text)
        local plain = cljson.decode(text)
        for i, r in ipairs(v.datas) do
          assert.are.equal(cljson.encode(plain.datas[i]), cljson.encode(r), text)
        end
      end
    end
    -- a duplicate key after the last row's keys: not raw, its last value kept
    local v = cljson.decode('{"datas":[{"a":1,"b":2},{"a":1,"b":2,"a":3}]}', RAW)
    assert.are.equal("object", cljson.is_raw(v.datas[1]))
    assert.are.equal("table", type(v.datas[2]))
    assert.are.equal('{"a":3,"b":2}', cljson.encode(v.datas[2]))
    v = cljson.decode('{"datas":[{"a":1,"bc":2},{"a":1,"b":2},{"a":1,"b":2}]}', RAW)
    for i = 1, 3 do
      assert.are.equal("object", cljson.is_raw(v.datas[i]))
    end
    assert.are.equal('{"a":1,"b":2}', tostring(v.datas[3]))
  end)

  it("checks nested objects of a row like the rows: duplicates, layout, depth, errors", function()
    local function obj(n, dup)
      local m = {}
      for i = 1, n do
        m[i] = '"k' .. ((dup and i == n) and 1 or i) .. '":' .. i
      end
      return "{" .. table.concat(m, ",") .. "}"
    end
    local canonical = { obj(1), obj(2), obj(8), obj(9), '{"a":true,"b":false,"c":null,"d":-1.5}',
      '{"a":{},"b":[]}', '{"a":{"b":{"c":1}}}', '{"a":[1],"b":"x"}', '{"\\u0001":1,"\\"":2}' }
    local not_canonical = { obj(2, true), obj(8, true), obj(9, true), '{"a":1, "b":2}',
      '{"a" :1}', '{"a": 1}', '{"a":1,"a":{}}', '{"a":1,"b":2,"a":3}', '{"a":1.50}', '{"a":-0}',
      '{"\\u0041":1}', '{"a":"\\u0041"}', '{"a":1,"b":{"c":1,"c":2}}' }
    local bad = { '{"a":1,}', '{"a":1', '{"a"}', '{"a":tru}', '{"a":-}', '{"a":01}', '{"a":1 "b":2}',
      '{"a\\q":1}', '{"a":"\\q"}', '{"a":[}', '{"a":{]}' }
    for _, list in ipairs({ canonical, not_canonical, bad }) do
      for _, o in ipairs(list) do
        local text = '{"datas":[{"id":1,"o":' .. o .. '},{"id":2,"o":' .. o .. '}]}'
        local v = same_both_ways(text)
        if list == bad then
          assert.is_nil(v, text)
        else
          local want = list == canonical and "object" or false
          assert.are.equal(want, cljson.is_raw(v.datas[1]), text)
          assert.are.equal(want, cljson.is_raw(v.datas[2]), text)
        end
      end
    end
    -- the depth limit counts a small object's empty members
    local text = '{"datas":[{"o":{"a":1,"b":{}}}]}' -- depth 5
    assert.is_nil(cljson.pdecode(text, { max_depth = 4, raw = "datas" }))
    assert.is_not_nil(cljson.pdecode(text, { max_depth = 5, raw = "datas" }))
  end)

  it("checks runs of multi-byte characters wherever an invalid sequence sits", function()
    local cjk = "\228\184\173" -- U+4E2D, 3 bytes
    local bad = { "\237\160\128", "\224\128\128", "\228\184", "\228\184A", "\128", "\192\128",
      "\244\144\128\128", "\239\191" }
    local good = { "\195\169", "\240\159\152\128", "\224\160\128", "\237\159\191", "\239\191\191",
      "\225\128\128", "\236\191\191", "\238\128\128" }
    for before = 0, 7 do
      local head = cjk:rep(before)
      for _, b in ipairs(bad) do
        local s = head .. b .. cjk:rep(6)
        for _, text in ipairs({ '"' .. s .. '"', '{"datas":[{"s":"' .. s .. '"}]}' }) do
          local v, err = cljson.pdecode(text, RAW)
          assert.is_nil(v, text)
          assert.matches("UTF%-8", err)
        end
      end
      for _, g in ipairs(good) do
        local s = head .. g .. cjk:rep(6) .. "x" .. cjk
        assert.are.equal(s, cljson.decode('"' .. s .. '"'))
        local v = cljson.decode('{"datas":[{"s":"' .. s .. '"}]}', RAW)
        assert.are.equal("object", cljson.is_raw(v.datas[1]))
        assert.are.equal(s, v.datas[1].s)
      end
    end
  end)

  it("decodes only the kept top-level members (option keep)", function()
    -- plain decoding, then every other top-level member removed: what keep gives
    local function kept(text, names, opts)
      local t, et = cljson.pdecode(text, opts)
      local o = { keep = names }
      for k, v in pairs(opts or {}) do
        o[k] = v
      end
      local v, ev = cljson.pdecode(text, o)
      assert.are.equal(et, ev)
      if t == nil then
        return nil
      end
      if cljson.is_object(t) then
        local want = {}
        for _, k in ipairs(names) do
          want[k] = true
        end
        for _, k in ipairs(cljson.keys(t)) do
          if not want[k] then
            t[k] = nil
          end
        end
      end
      assert.are.equal(cljson.encode(t), cljson.encode(v))
      if cljson.is_object(t) then
        assert.are.same(cljson.keys(t), cljson.keys(v))
      end
      return v
    end
    local text = '{"z":{"deep":[1,{"q":"\\u00e9"}]},"b":2,"datas":[{"a":1,"_score":2}],"a":"x",' ..
      '"skip": [ true , false , null , -1.5e3 ],"c":{"d":1}}'
    -- the text's order, not the list's
    local v = kept(text, { "c", "a", "b" })
    assert.are.equal('{"b":2,"a":"x","c":{"d":1}}', cljson.encode(v))
    assert.are.same({ "b", "a", "c" }, cljson.keys(v))
    -- a name that is absent, an empty list, a text that is not an object
    assert.are.equal('{"b":2}', cljson.encode(kept(text, { "b", "nope" })))
    assert.are.equal("{}", cljson.encode(kept(text, {})))
    assert.are.equal("[1,2]", cljson.encode(kept("[1,2]", { "a" })))
    assert.are.equal('"s"', cljson.encode(kept('"s"', { "a" })))
    -- only the top level: nested members of the same names stay
    assert.are.equal('{"c":{"d":1,"b":3}}', cljson.encode(kept('{"c":{"d":1,"b":3},"d":4}', { "c" })))
    -- duplicates: the last value in the first one's place, kept or skipped
    v = kept('{"a":1,"x":2,"b":3,"a":4,"x":5}', { "a", "b" })
    assert.are.equal('{"a":4,"b":3}', cljson.encode(v))
    -- an escaped key is compared as decoded
    assert.are.equal('{"é":1}', cljson.encode(kept('{"\\u00e9":1,"e":2}', { "é" })))
    assert.are.equal('{"datas":[1],"e":2}', cljson.encode(kept('{"d\\u0061tas":[1],"e":2,"f":3}', { "datas", "e" })))
    assert.are.equal('{"e":2}', cljson.encode(kept('{"\\u0064atas":[1],"e":2,"d\\"":3}', { "e" })))
    -- with raw and drop: the rows stay raw, without the dropped members
    local o = { raw = "datas", drop = { "_score" } }
    v = kept(text, { "datas", "a" }, o)
    assert.are.equal('{"datas":[{"a":1}],"a":"x"}', cljson.encode(v))
    assert.are.equal("object", cljson.is_raw(v.datas[1]))
    -- the raw member not kept
    assert.are.equal('{"a":"x"}', cljson.encode(kept(text, { "a" }, o)))
    -- a skipped member is still validated: the same errors as the plain decoder
    for _, bad in ipairs({ '{"a":1,"z":[1,}', '{"a":1,"z":"\\x"}', '{"z":tru,"a":1}', '{"z":01}',
      '{"z":"\255"}', '{"z":{"a" 1}}', '{"z":1 "a":1}', '{"z":[1]', '{"a":1,"z":1,}', '{"z":1}x',
      '{"z":-}', '{"z":{"y":[[[[1]]]]},"a":1}', '{"\255":1,"a":1}', '{"z\001":1,"a":1}',
      '{"z" 1,"a":1}', '{"z"}', '{"z":}', '{"z":1,"a":1,"z"', '{"z', '{"z\\q":1}' }) do
      assert.is_nil(kept(bad, { "a" }, bad:find("y") and { max_depth = 4 } or nil))
    end
    -- the depth limit counts a skipped member's nesting as the decoder does
    local deep = '{"a":1,"z":' .. string.rep("[", 5) .. string.rep("]", 5) .. "}"
    for d = 4, 7 do
      assert.are.equal(d < 6, kept(deep, { "a" }, { max_depth = d }) == nil)
    end
    -- a skipped member is not in the remembered order: set later, it is written last
    v = cljson.decode('{"z":1,"a":2,"y":3}', { keep = { "a" } })
    v.z, v.b = 4, 5
    assert.are.equal('{"a":2,"b":5,"z":4}', cljson.encode(v))
    assert.has_error(function() cljson.decode("{}", { keep = "a" }) end)
    assert.has_error(function() cljson.decode("{}", { keep = { 1 } }) end)
    local many = {}
    for i = 1, 17 do
      many[i] = "k" .. i
    end
    assert.has_error(function() cljson.decode("{}", { keep = many }) end)
  end)

  it("encodes canonically (sorted keys) and as a tree for TOON", function()
    local text = '{"datas":[{"b":{"z":1,"y":[{"q":1,"p":2}]},"a":12345678901234567890123}]}'
    local t, v = cljson.decode(text), cljson.decode(text, RAW)
    assert.are.equal("object", cljson.is_raw(v.datas[1]))
    assert.are.equal('{"datas":[{"a":12345678901234567890123,"b":{"y":[{"p":2,"q":1}],"z":1}}]}',
      cljson.encode_canonical(v))
    assert.are.equal(cljson.encode_canonical(t), cljson.encode_canonical(v))
    local ok, cltoon = pcall(require, "cltoon")
    if ok then
      assert.are.equal(cltoon.encode(t), cltoon.encode(v))
    end
  end)

  it("raw(), tostring and field reads", function()
    local r = cljson.raw('{"a":1,"b":[2]}')
    assert.are.equal('{"a":1,"b":[2]}', tostring(r))
    assert.are.equal(1, r.a)
    assert.is_true(cljson.is_array(r.b))
    assert.is_nil(r.c)
    -- text the encoder would write differently is stored as its encoding
    assert.are.equal('{"a":100.0,"b":"é"}', tostring(cljson.raw(' {"a": 1e2, "b":"\\u00e9"} ')))
    assert.are.equal("array", cljson.is_raw(cljson.raw("[1]")))
    assert.are.equal("string", cljson.is_raw(cljson.raw('"s"')))
    assert.are.equal("number", cljson.is_raw(cljson.raw("-1")))
    assert.are.equal("boolean", cljson.is_raw(cljson.raw("true")))
    assert.are.equal("null", cljson.is_raw(cljson.raw("null")))
    assert.is_false(cljson.is_raw({}))
    assert.has_error(function() cljson.raw("{") end, "cljson: unterminated object at byte 1")
    assert.has_error(function() return cljson.raw("1").x end)
    assert.are.equal('[{"a":1,"b":[2]},2]', cljson.encode({ r, 2 }))
  end)
end)
