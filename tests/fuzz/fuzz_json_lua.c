/* fuzz_json_lua: differential libFuzzer target for the Lua JSON module
 * (src/codec/json_lua.c): the direct decoder (cljson.pdecode) against the former tree
 * path (json_parse + cljson_push, the test hook cljson_pdecode_tree).
 *
 * Input: one option byte, then JSON text.
 *   byte 0: bits 0-4 max_depth (0 = default 512; 31 = 1500, past the encoder's 512
 *           levels; else 1..30), bit 6 max_size = text length - 1 (bit 5 set too:
 *           text length, the boundary that must still pass).
 *   Not the hard cap 10000: json.c's parser recurses about 3 KB of stack per level
 *   under clang's ASan + libFuzzer instrumentation and overflowed the 8 MB stack at
 *   2687 levels (corpus regress_asan_stack_depth); optimised builds use ~300 B.
 *
 * Properties: both decoders accept/reject alike; on reject the messages are
 * byte-identical; on accept the two values are structurally identical (types,
 * integer vs float, metatables, boxed number text, remembered key lists) and
 * cljson_encode writes identical text for both, stored order and canonical (or
 * fails alike); cljson_decode_fallbacks() stays 0 (pdecode never had to fall back
 * to json_parse); the encoded text decodes again, through both paths, to values
 * that encode to the same text (round trip stable); when the text has no
 * duplicate keys, the stored-order encoding is exactly json_write of json_parse's
 * tree (an oracle independent of the remembered-order code), and the canonical
 * encoding is json_write's canonical text of that tree; after the same
 * edits to both values (a remembered key removed and put back, keys added, a
 * nested object emptied) both still encode identically. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <string.h>

#include "fuzz_common.h"
#include "json.h"
#include "json_lua.h"
#include "util.h"

#define T "fuzz_json_lua"

/* Test hooks of src/codec/json_lua.c (not in json_lua.h). */
int cljson_pdecode_tree(lua_State *L);
unsigned long cljson_decode_fallbacks(void);

static lua_State *LS;
static lua_CFunction pdecode_new;

static int msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    luaL_traceback(L, L, msg ? msg : "(error object)", 1);
    return 1;
}

static void setup(void)
{
    LS = luaL_newstate();
    fuzz_must(LS != NULL, T, "lua state");
    luaL_requiref(LS, "cljson", luaopen_cljson, 0);
    lua_getfield(LS, -1, "pdecode");
    pdecode_new = lua_tocfunction(LS, -1);
    fuzz_must(pdecode_new != NULL, T, "cljson.pdecode is a C function");
    lua_settop(LS, 0);
}

/* Calls f(text, opts) protected (opts at index optidx, 0: none); leaves its
 * results on the stack and returns how many. A raised error is a failure: pdecode
 * reports errors as nil, msg. */
static int call_decode(lua_State *L, lua_CFunction f, const char *s, size_t len, int optidx)
{
    lua_pushcfunction(L, msgh);
    int h = lua_gettop(L);
    lua_pushcfunction(L, f);
    lua_pushlstring(L, s, len);
    if (optidx)
        lua_pushvalue(L, optidx);
    else
        lua_pushnil(L);
    int st = lua_pcall(L, 2, LUA_MULTRET, h);
    if (st != LUA_OK)
        fprintf(stderr, "%s: %s\n", T, lua_tostring(L, -1));
    fuzz_must(st == LUA_OK, T, "pdecode does not raise");
    lua_remove(L, h);
    return lua_gettop(L) - h + 1;
}

static int same_value(lua_State *L, int a, int b, int ord, int depth);

static int same_table(lua_State *L, int a, int b, int ord, int depth)
{
    int ma = lua_getmetatable(L, a), mb = lua_getmetatable(L, b);
    if (ma != mb || (ma && !lua_rawequal(L, -1, -2))) {
        lua_pop(L, ma + mb);
        return 0;
    }
    lua_pop(L, ma + mb);
    /* The remembered order (objects only): the same order string, both present
     * or not. */
    lua_pushvalue(L, a);
    int la = lua_rawget(L, ord);
    lua_pushvalue(L, b);
    int lb = lua_rawget(L, ord);
    int eq = la == lb && (la == LUA_TNIL || (la == LUA_TSTRING && lua_rawequal(L, -1, -2)));
    lua_pop(L, 2);
    if (!eq)
        return 0;
    size_t na = 0, nb = 0;
    lua_pushnil(L);
    while (lua_next(L, a)) {
        na++;
        lua_pushvalue(L, -2);
        if (lua_rawget(L, b) == LUA_TNIL ||
            !same_value(L, lua_gettop(L) - 1, lua_gettop(L), ord, depth + 1)) {
            lua_pop(L, 3);
            return 0;
        }
        lua_pop(L, 2);
    }
    lua_pushnil(L);
    while (lua_next(L, b)) {
        nb++;
        lua_pop(L, 1);
    }
    return na == nb;
}

/* Structural equality of the decoded values at a and b (absolute indices). */
static int same_value(lua_State *L, int a, int b, int ord, int depth)
{
    fuzz_must(lua_checkstack(L, 10), T, "stack");
    fuzz_must(depth < 20000, T, "bounded depth");
    int ta = lua_type(L, a);
    if (ta != lua_type(L, b))
        return 0;
    switch (ta) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, a) != lua_isinteger(L, b))
            return 0;
        if (lua_isinteger(L, a))
            return lua_tointeger(L, a) == lua_tointeger(L, b);
        /* Bitwise: -0.0 and 0.0 must not pass as equal. */
        lua_Number x = lua_tonumber(L, a), y = lua_tonumber(L, b);
        return memcmp(&x, &y, sizeof x) == 0;
    case LUA_TTABLE:
        return same_table(L, a, b, ord, depth);
    default:
        return lua_rawequal(L, a, b);
    }
}

/* cljson_encode of the value at idx; returns its rc, text or error in out. */
static int encode(lua_State *L, int idx, int canonical, buf *out)
{
    char err[400];
    buf_reset(out);
    int top = lua_gettop(L);
    int rc = cljson_encode(L, idx, out, canonical, err, sizeof err);
    fuzz_must(lua_gettop(L) == top, T, "encode leaves the stack unchanged");
    if (rc < 0) {
        buf_reset(out);
        buf_puts(out, "E:");
        buf_puts(out, err);
    }
    return rc;
}

static int same_buf(const buf *a, const buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static buf ea, eb, ra, rb;

/* 1 if some object in v has a key twice (objects of more than 64 members are
 * not checked and count as having one). */
static int has_dup_keys(const json_value *v)
{
    json_type t = json_typeof(v);
    if (t != JSON_ARRAY && t != JSON_OBJECT)
        return 0;
    size_t n = json_count(v);
    if (t == JSON_OBJECT && n > 64)
        return 1;
    for (size_t i = 0; i < n; i++) {
        if (t == JSON_OBJECT) {
            size_t li, lj;
            const char *ki = json_key_at(v, i, &li);
            for (size_t j = 0; j < i; j++) {
                const char *kj = json_key_at(v, j, &lj);
                if (li == lj && memcmp(ki, kj, li) == 0)
                    return 1;
            }
            if (has_dup_keys(json_val_at(v, i)))
                return 1;
        } else if (has_dup_keys(json_at(v, i))) {
            return 1;
        }
    }
    return 0;
}

/* The same edits to every object of a decoded value (cljson.keys order): the
 * first remembered key removed, then put back if it was the second's value;
 * "zz" and "b" added; an object member emptied of its keys. */
static const char *const edit_src =
    "local cj = require 'cljson'\n"
    "local function edit(v, depth)\n"
    "  if type(v) ~= 'table' or depth > 40 then return end\n"
    "  if cj.is_object(v) then\n"
    "    local k = cj.keys(v)\n"
    "    for _, key in ipairs(k) do edit(v[key], depth + 1) end\n"
    "    if k[1] then local x = v[k[1]] v[k[1]] = nil if #k % 2 == 0 then v[k[1]] = x end end\n"
    "    v.zz = 1 v.b = cj.null\n"
    "    local o = k[2] and v[k[2]]\n"
    "    if cj.is_object(o) then for _, key in ipairs(cj.keys(o)) do o[key] = nil end end\n"
    "  elseif cj.is_array(v) then\n"
    "    for i = 1, #v do edit(v[i], depth + 1) end\n"
    "  end\n"
    "end\n"
    "return function(v) edit(v, 0) return v end\n";
static int edit_ref = LUA_NOREF;

/* The raw option against the plain decoder: the text twice as the rows of
 * {"datas":[...]}; same acceptance and error, same encodings (stored and
 * canonical), also after without() of two member names on every row and
 * when the decoder drops them itself (option drop); and option keep, on the
 * text itself and with raw and drop: the plain decoding without the other
 * top-level members (same acceptance and error). Returns nil, or what differs. */
static const char *const raw_src =
    "local cj = require 'cljson'\n"
    "local function same(a, b)\n"
    "  for _, f in ipairs({cj.encode, cj.encode_canonical}) do\n"
    "    local ok1, t1 = pcall(f, a) local ok2, t2 = pcall(f, b)\n"
    "    if ok1 ~= ok2 or t1 ~= t2 then return false end\n"
    "  end\n"
    "  return true\n"
    "end\n"
    "local function only(v, k)\n"
    "  if cj.is_object(v) then\n"
    "    for _, key in ipairs(cj.keys(v)) do\n"
    "      if key ~= k and key ~= 'datas' then v[key] = nil end\n"
    "    end\n"
    "  end\n"
    "  return v\n"
    "end\n"
    "return function(s, k)\n"
    "  local p, ep = cj.pdecode(s)\n"
    "  local q, eq = cj.pdecode(s, {keep = {k, 'datas'}})\n"
    "  if ep ~= eq then return 'errors differ with keep' end\n"
    "  if p ~= nil and not same(only(p, k), q) then return 'encodings differ with keep' end\n"
    "  local x = '{' .. (k == '' and '' or '\"a\":' .. s .. ',')\n"
    "    .. '\"datas\":[' .. s .. '],\"b\":' .. s .. '}'\n"
    "  local y, ey = cj.pdecode(x, {raw = 'datas', drop = {k, 'b'}})\n"
    "  local z, ez = cj.pdecode(x, {raw = 'datas', drop = {k, 'b'}, keep = {'datas'}})\n"
    "  if ey ~= ez then return 'errors differ with raw, drop and keep' end\n"
    "  if y ~= nil and not same(only(y, 'datas'), z) then\n"
    "    return 'encodings differ with raw, drop and keep'\n"
    "  end\n"
    "  local w = '{\"datas\":[' .. s .. ',' .. s .. ']}'\n"
    "  local a, ea = cj.pdecode(w)\n"
    "  local b, eb = cj.pdecode(w, {raw = 'datas'})\n"
    "  if ea ~= eb then return 'errors differ' end\n"
    "  if a == nil then return nil end\n"
    "  if not same(a, b) then return 'encodings differ' end\n"
    "  for _, v in ipairs({a, b}) do\n"
    "    for i, r in ipairs(v.datas) do\n"
    "      if cj.is_raw(r) or cj.is_object(r) then v.datas[i] = cj.without(r, k, 'b') end\n"
    "    end\n"
    "  end\n"
    "  if not same(a, b) then return 'encodings differ after without' end\n"
    "  local c = cj.pdecode(w, {raw = 'datas', drop = {k, 'b'}})\n"
    "  if not same(a, c) then return 'encodings differ with drop' end\n"
    "  return nil\n"
    "end\n";
static int raw_ref = LUA_NOREF;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!LS)
        setup();
    lua_State *L = LS;
    const char *s = (const char *)data + 1;
    size_t len = size - 1;

    lua_settop(L, 0);
    lua_getfield(L, LUA_REGISTRYINDEX, "cljson.order");
    int ord = lua_gettop(L);
    fuzz_must(lua_istable(L, ord), T, "order table exists");
    int depth = data[0] & 31;
    int optidx = 0;
    if (depth || (data[0] & 64)) {
        lua_createtable(L, 0, 2);
        optidx = lua_gettop(L);
        if (depth) {
            lua_pushinteger(L, depth == 31 ? 1500 : depth);
            lua_setfield(L, optidx, "max_depth");
        }
        if ((data[0] & 64) && len > 1) {
            lua_pushinteger(L, (lua_Integer)len - ((data[0] & 32) ? 0 : 1));
            lua_setfield(L, optidx, "max_size");
        }
    }

    unsigned long fb = cljson_decode_fallbacks();
    int na = call_decode(L, pdecode_new, s, len, optidx);
    int a = lua_gettop(L) - na + 1;
    int nb = call_decode(L, cljson_pdecode_tree, s, len, optidx);
    int b = lua_gettop(L) - nb + 1;
    fuzz_must(cljson_decode_fallbacks() == fb, T, "the direct decoder rejected no valid text");
    fuzz_must(na == nb, T, "both decoders accept or both reject");
    if (raw_ref == LUA_NOREF) {
        luaL_openlibs(L);
        fuzz_must(luaL_dostring(L, raw_src) == LUA_OK, T, "raw chunk loads");
        raw_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    {
        int top = lua_gettop(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, raw_ref);
        lua_pushlstring(L, s, len);
        lua_pushstring(L, (data[0] & 128) ? "a" : "");
        fuzz_must(lua_pcall(L, 2, 1, 0) == LUA_OK, T, "raw check runs");
        if (!lua_isnil(L, -1))
            fprintf(stderr, "raw rows: %s\n", lua_tostring(L, -1));
        fuzz_must(lua_isnil(L, -1), T, "raw rows encode as their tables");
        lua_settop(L, top);
    }
    if (na == 2) {
        fuzz_must(lua_isnil(L, a) && lua_isnil(L, b), T, "a rejection returns nil first");
        fuzz_must(lua_type(L, a + 1) == LUA_TSTRING && lua_rawequal(L, a + 1, b + 1), T,
                  "identical error messages");
        lua_settop(L, 0);
        return 0;
    }
    fuzz_must(na == 1, T, "an accepted text gives one value");
    fuzz_must(same_value(L, a, b, ord, 0), T, "structurally identical values");

    /* Oracle: without duplicate keys the stored order is the text's order. */
    json_limits lim = {0};
    lim.max_depth = depth == 31 ? 1500 : (size_t)depth;
    json_value *tree = json_parse(s, len, &lim, NULL, 0);
    fuzz_must(tree != NULL, T, "json_parse accepts what cljson accepts");
    if (!has_dup_keys(tree) && encode(L, a, 0, &ea) == 0) {
        buf_reset(&eb);
        json_write(&eb, tree, 0);
        fuzz_must(same_buf(&ea, &eb), T, "stored order is the text's order");
        /* and the canonical text is json.c's sort of the same members */
        fuzz_must(encode(L, a, 1, &ea) == 0, T, "a stored-order value encodes canonically");
        buf_reset(&eb);
        json_write(&eb, tree, 1);
        fuzz_must(same_buf(&ea, &eb), T, "canonical order is json_write's");
    }
    json_free(tree);

    for (int canonical = 0; canonical <= 1; canonical++) {
        int rca = encode(L, a, canonical, &ea);
        int rcb = encode(L, b, canonical, &eb);
        fuzz_must(rca == rcb && same_buf(&ea, &eb), T, "identical encodings");
        if (rca < 0) {
            /* Only the encoder's depth limit may refuse a decoded value. */
            fuzz_must(depth == 31 && strstr(ea.data, "nesting too deep") != NULL, T,
                      "a decoded value encodes");
            continue;
        }
        fuzz_must(json_utf8_valid(ea.data, ea.len), T, "encoded text is valid UTF-8");
        /* Round trip: the encoded text decodes (both paths) to values that encode
         * to the same text. Its depth is within the encoder's 512 levels, so the
         * default limits apply. */
        int top = lua_gettop(L);
        int n1 = call_decode(L, pdecode_new, ea.data, ea.len, 0);
        fuzz_must(n1 == 1, T, "encoded text decodes (direct)");
        int n2 = call_decode(L, cljson_pdecode_tree, ea.data, ea.len, 0);
        fuzz_must(n2 == 1, T, "encoded text decodes (tree)");
        fuzz_must(same_value(L, top + 1, top + 2, ord, 0), T, "round trip values identical");
        fuzz_must(encode(L, top + 1, canonical, &ra) == 0 && same_buf(&ra, &ea), T,
                  "round trip stable (direct)");
        fuzz_must(encode(L, top + 2, canonical, &rb) == 0 && same_buf(&rb, &ea), T,
                  "round trip stable (tree)");
        if (!canonical) {
            /* Stored order survives: the value decoded from the text is the text. */
            fuzz_must(encode(L, top + 1, 1, &ra) == 0, T, "re-decoded value encodes canonically");
            fuzz_must(encode(L, a, 1, &rb) == 0 && same_buf(&ra, &rb), T,
                      "canonical text is order-independent");
        }
        fuzz_must(cljson_decode_fallbacks() == fb, T, "no fallback on the round trip");
        lua_settop(L, top);
    }

    /* The same edits to both values: still identical encodings. */
    if (edit_ref == LUA_NOREF) {
        luaL_openlibs(L);
        fuzz_must(luaL_dostring(L, edit_src) == LUA_OK, T, "edit chunk loads");
        edit_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    for (int i = 0; i < 2; i++) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, edit_ref);
        lua_pushvalue(L, i == 0 ? a : b);
        fuzz_must(lua_pcall(L, 1, 0, 0) == LUA_OK, T, "edits run");
    }
    for (int canonical = 0; canonical <= 1; canonical++) {
        int rca = encode(L, a, canonical, &ea);
        int rcb = encode(L, b, canonical, &eb);
        fuzz_must(rca == rcb && same_buf(&ea, &eb), T, "identical encodings after edits");
    }
    lua_settop(L, 0);
    return 0;
}
