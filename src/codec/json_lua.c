/* json_lua: module "cljson", the Lua face of the exact JSON codec (see json_lua.h):
 * the registry entries, boxes and the Lua API. Decoding: json_lua_decode.c;
 * encoding: json_lua_encode.c. */
#include "json_lua.h"
#include "json_lua_impl.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cljson_null_sentinel = 0;

static int box_gc(lua_State *L)
{
    cbox *b = lua_touserdata(L, 1);
    if (b) {
        json_free(b->root);
        b->root = NULL;
        buf_free(&b->out);
    }
    return 0;
}

cbox *cljson_box_new(lua_State *L)
{
    cbox *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, REG_BOX);
    return b;
}

static int number_tostring(lua_State *L)
{
    lua_pushliteral(L, "text");
    lua_rawget(L, 1);
    if (!lua_isstring(L, -1))
        lua_pushliteral(L, "0");
    return 1;
}

static int number_eq(lua_State *L)
{
    lua_pushliteral(L, "text");
    lua_rawget(L, 1);
    lua_pushliteral(L, "text");
    lua_rawget(L, 2);
    lua_pushboolean(L, lua_rawequal(L, -1, -2));
    return 1;
}

/* ------------------------------------------------------------- raw values */

void cljson_raw_push(lua_State *L, int anchor, const char *text, size_t len, int rawmt)
{
    rawval *r = lua_newuserdatauv(L, sizeof *r, 1);
    r->text = text;
    r->len = len;
    lua_pushvalue(L, anchor);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, rawmt);
    lua_setmetatable(L, -2);
}

char *cljson_raw_new(lua_State *L, size_t len, int rawmt)
{
    rawval *r = lua_newuserdatauv(L, sizeof *r + len + 1, 0);
    char *t = (char *)(r + 1);
    t[len] = '\0';
    r->text = t;
    r->len = len;
    lua_pushvalue(L, rawmt);
    lua_setmetatable(L, -2);
    return t;
}

const rawval *cljson_raw_at(lua_State *L, int idx)
{
    return luaL_testudata(L, idx, REG_RAW);
}

static int raw_tostring(lua_State *L)
{
    const rawval *r = luaL_checkudata(L, 1, REG_RAW);
    lua_pushlstring(L, r->text, r->len);
    return 1;
}

static int l_decode(lua_State *L);

/* raw[k]: member k of the decoded value (decoded on each access: for reading a
 * field now and then, not for walking rows). */
static int raw_index(lua_State *L)
{
    const rawval *r = luaL_checkudata(L, 1, REG_RAW);
    lua_settop(L, 2);
    lua_pushcfunction(L, l_decode);
    lua_pushlstring(L, r->text, r->len);
    lua_call(L, 1, 1);
    if (!lua_istable(L, 3))
        return luaL_error(L, "cljson: a raw %s has no members", r->len ? "scalar" : "value");
    lua_pushvalue(L, 2);
    lua_gettable(L, 3);
    return 1;
}

/* Pushes a raw value holding its own copy of text. */
static void raw_push_copy(lua_State *L, const char *text, size_t len)
{
    luaL_getmetatable(L, REG_RAW);
    memcpy(cljson_raw_new(L, len, lua_gettop(L)), text, len);
    lua_remove(L, -2);
}

/* End of the value at p in canonical text (no whitespace), before end. */
static const char *canon_skip(const char *p, const char *end)
{
    if (*p != '"' && *p != '{' && *p != '[') {
        while (p < end && *p != ',' && *p != '}' && *p != ']')
            p++;
        return p;
    }
    int depth = 0;
    do {
        char c = *p++;
        if (c == '"') {
            while (p < end && *p != '"')
                p += *p == '\\' ? 2 : 1;
            p++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    } while (depth > 0 && p < end);
    return p;
}

const char cljson_reg_key = 'r';

void cljson_ensure_registry(lua_State *L)
{
    luaL_newmetatable(L, REG_ARRAY);
    lua_pop(L, 1);
    luaL_newmetatable(L, REG_OBJECT);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, REG_NUMBER)) {
        lua_pushcfunction(L, number_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushcfunction(L, number_eq);
        lua_setfield(L, -2, "__eq");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, REG_BOX)) {
        lua_pushcfunction(L, box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, REG_RAW)) {
        lua_pushcfunction(L, raw_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushcfunction(L, raw_index);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    if (lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "kv");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    } else {
        lua_pop(L, 1);
    }
    if (lua_getfield(L, LUA_REGISTRYINDEX, REG_LISTS) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_setfield(L, LUA_REGISTRYINDEX, REG_LISTS);
    } else {
        lua_pop(L, 1);
    }
    static const char *const names[REGI_N] = {REG_ARRAY, REG_OBJECT, REG_NUMBER, REG_ORDER,
                                              REG_RAW};
    lua_createtable(L, REGI_N, 0);
    for (int i = 0; i < REGI_N; i++) {
        lua_getfield(L, LUA_REGISTRYINDEX, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, &cljson_reg_key);
}

/* order_put of the string at stack index idx. */
static void put_key(lua_State *L, buf *b, int idx)
{
    size_t len;
    const char *k = lua_tolstring(L, idx, &len);
    order_put(b, k, len);
}

/* ------------------------------------------------------------------ Lua API */

static void read_limits(lua_State *L, int idx, json_limits *lim)
{
    memset(lim, 0, sizeof *lim);
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    if (lua_getfield(L, idx, "max_depth") != LUA_TNIL) {
        lua_Integer d = luaL_checkinteger(L, -1);
        luaL_argcheck(L, d > 0, idx, "max_depth must be positive");
        lim->max_depth = (size_t)d;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "max_size") != LUA_TNIL) {
        lua_Integer s = luaL_checkinteger(L, -1);
        luaL_argcheck(L, s > 0, idx, "max_size must be positive");
        lim->max_size = (size_t)s;
    }
    lua_pop(L, 1);
}

/* Options raw = "<member>", drop = {"<name>", ...} and keep = {"<name>", ...}
 * (names anchored in the options table at idx, which stays on the stack during
 * the decode). */
static void read_raw(lua_State *L, int idx, cljson_raw_opts *ro)
{
    if (lua_getfield(L, idx, "raw") != LUA_TNIL) {
        luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, idx, "raw must be a member name");
        ro->key = lua_tolstring(L, -1, &ro->keylen);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "drop") != LUA_TNIL) {
        luaL_argcheck(L, ro->key && lua_type(L, -1) == LUA_TTABLE, idx,
                      "drop must be a list of member names, with raw");
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        luaL_argcheck(L, n <= CLJSON_DROP_MAX, idx, "drop: at most 8 names");
        for (lua_Integer i = 1; i <= n; i++) {
            luaL_argcheck(L, lua_rawgeti(L, -1, i) == LUA_TSTRING, idx, "drop: names are strings");
            size_t kl;
            const char *k = lua_tolstring(L, -1, &kl);
            for (size_t j = 0; j < kl; j++)
                luaL_argcheck(L, (unsigned char)k[j] >= 0x20 && k[j] != '"' && k[j] != '\\', idx,
                              "drop: a name must need no escaping in JSON");
            ro->drop[ro->ndrop] = k;
            ro->droplens |= 1ULL << (kl & 63);
            ro->droplen[ro->ndrop++] = kl;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "keep") != LUA_TNIL) {
        luaL_argcheck(L, lua_type(L, -1) == LUA_TTABLE, idx, "keep must be a list of member names");
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        luaL_argcheck(L, n <= CLJSON_KEEP_MAX, idx, "keep: at most 16 names");
        for (lua_Integer i = 1; i <= n; i++) {
            luaL_argcheck(L, lua_rawgeti(L, -1, i) == LUA_TSTRING, idx, "keep: names are strings");
            ro->keep[ro->nkeep] = lua_tolstring(L, -1, &ro->keeplen[ro->nkeep]);
            ro->nkeep++;
            lua_pop(L, 1);
        }
        /* an empty list keeps nothing: one name no key can be (keys are UTF-8) */
        if (n == 0) {
            ro->keep[0] = "\xff";
            ro->keeplen[0] = 1;
            ro->nkeep = 1;
        }
    }
    lua_pop(L, 1);
}

/* The former decoder (json_parse, then cljson_push of the tree): pushes the value
 * (returns 1) or nil, "msg at byte N" (returns 2). */
static int decode_tree(lua_State *L, const char *s, size_t len, const json_limits *lim)
{
    char err[160];
    cbox *box = cljson_box_new(L);
    box->root = json_parse(s, len, lim, err, sizeof err);
    if (!box->root) {
        lua_pop(L, 1);
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    cljson_push(L, box->root);
    json_free(box->root);
    box->root = NULL;
    lua_remove(L, -2);
    return 1;
}

static unsigned long decode_fallbacks;

/* Returns 1 value on success; on failure pushes nil, msg and returns 2. The
 * direct decoder only says "rejected"; json_parse then gives the message (and,
 * were the two ever to disagree, the value). Option raw = "<member>": the object
 * elements of that array member of a top-level object stay raw values. */
static int do_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    json_limits lim;
    read_limits(L, 2, &lim);
    cljson_raw_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.anchor = 1;
    if (lua_type(L, 2) == LUA_TTABLE)
        read_raw(L, 2, &ro);
    if (cljson_decode_raw(L, s, len, &lim, &ro) == 0)
        return 1;
    int n = decode_tree(L, s, len, &lim);
    if (n == 1)
        decode_fallbacks++; /* the decoders disagree: a bug, counted for the tests */
    return n;
}

/* Test hook (not in json_lua.h): texts the direct decoder rejected but json_parse
 * accepted (then decoded through the tree); the tests require 0. */
unsigned long cljson_decode_fallbacks(void);
unsigned long cljson_decode_fallbacks(void)
{
    return decode_fallbacks;
}

/* Test hook (not in json_lua.h): pdecode through the former tree path, the
 * reference the direct decoder is tested against. */
int cljson_pdecode_tree(lua_State *L);
int cljson_pdecode_tree(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    json_limits lim;
    read_limits(L, 2, &lim);
    return decode_tree(L, s, len, &lim);
}

static int l_decode(lua_State *L)
{
    if (do_decode(L) == 2)
        return luaL_error(L, "cljson: %s", lua_tostring(L, -1));
    return 1;
}

int cljson_pdecode(lua_State *L)
{
    return do_decode(L);
}

static int encode_impl(lua_State *L, int canonical)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    char err[320];
    cbox *box = cljson_box_new(L);
    if (cljson_convert(L, 1, box, &box->out, 0, canonical, err, sizeof err) < 0)
        return luaL_error(L, "cljson: %s", err);
    lua_pushlstring(L, box->out.data, box->out.len);
    buf_free(&box->out);
    return 1;
}

static int l_encode(lua_State *L)
{
    return encode_impl(L, 0);
}

static int l_encode_canonical(lua_State *L)
{
    return encode_impl(L, 1);
}

/* raw(text): a raw value of the JSON text (an error if it is not valid JSON);
 * text that is not what the encoder writes is stored as its encoding. */
static int l_raw(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_settop(L, 1);
    int canon;
    if (cljson_scan_canonical(L, s, len, &canon) < 0 || !canon) {
        lua_pushcfunction(L, l_decode);
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
        lua_pushcfunction(L, l_encode);
        lua_insert(L, -2);
        lua_call(L, 1, 1);
        s = lua_tolstring(L, -1, &len);
        lua_replace(L, 1);
    }
    luaL_getmetatable(L, REG_RAW);
    cljson_raw_push(L, 1, s, len, 2);
    return 1;
}

static const char *raw_kind(const rawval *r)
{
    switch (r->len ? r->text[0] : 0) {
    case '{':
        return "object";
    case '[':
        return "array";
    case '"':
        return "string";
    case 't':
    case 'f':
        return "boolean";
    case 'n':
        return "null";
    default:
        return "number";
    }
}

/* is_raw(v): false, or the JSON type of the raw value ("object", "array", ...). */
static int l_is_raw(lua_State *L)
{
    const rawval *r = cljson_raw_at(L, 1);
    if (r)
        lua_pushstring(L, raw_kind(r));
    else
        lua_pushboolean(L, 0);
    return 1;
}

/* without(v, name...): v without those members. A raw object: the same value
 * when it has none of them, else a new raw value (its own text, the members cut
 * out, the rest byte for byte); a table: the members removed in place. */
static int l_without(lua_State *L)
{
    int top = lua_gettop(L);
    for (int i = 2; i <= top; i++)
        luaL_checktype(L, i, LUA_TSTRING);
    if (lua_type(L, 1) == LUA_TTABLE) {
        for (int i = 2; i <= top; i++) {
            lua_pushvalue(L, i);
            lua_pushnil(L);
            lua_rawset(L, 1);
        }
        lua_settop(L, 1);
        return 1;
    }
    const rawval *r = cljson_raw_at(L, 1);
    luaL_argexpected(L, r != NULL, 1, "table or cljson raw value");
    if (r->len < 2 || r->text[0] != '{' || top < 2) {
        lua_settop(L, 1);
        return 1;
    }
    /* The names as the text spells keys ("name"), in one box. */
    buf *nb = &cljson_box_new(L)->out;
    size_t *ends = lua_newuserdatauv(L, (size_t)(top - 1) * sizeof *ends, 0);
    for (int i = 2; i <= top; i++) {
        size_t kl;
        const char *k = lua_tolstring(L, i, &kl);
        buf_putc(nb, '"');
        for (size_t j = 0; j < kl; j++) {
            unsigned char c = (unsigned char)k[j];
            if (c < 0x20 || c == '"' || c == '\\') {
                char w[8];
                buf_append(nb, w, (size_t)(json_escape_byte(w, c) - w));
            } else {
                buf_putc(nb, (char)c);
            }
        }
        buf_putc(nb, '"');
        ends[i - 2] = nb->len;
    }
    const char *p = r->text + 1, *end = r->text + r->len - 1;
    buf *out = NULL;
    const char *copied = r->text; /* text before this is in out (or unchanged) */
    while (p < end) {
        const char *m = p; /* member start (after '{' or ',') */
        const char *kend = canon_skip(p, end);
        int drop = 0;
        size_t klen = (size_t)(kend - m), from = 0;
        for (int i = 0; i < top - 1 && !drop; from = ends[i], i++)
            drop = klen == ends[i] - from && memcmp(m, nb->data + from, klen) == 0;
        const char *vend = canon_skip(kend + 1, end);
        if (drop) {
            if (!out) {
                out = &cljson_box_new(L)->out;
                buf_reserve(out, r->len);
            }
            /* Cut the member and one comma: the one before it, or after it when first. */
            const char *cut = m - 1, *resume = vend;
            if (*cut == '{' || cut < copied) { /* the first member left */
                cut = m;
                if (resume < end)
                    resume++;
            }
            buf_append(out, copied, (size_t)(cut - copied));
            copied = resume;
        }
        p = vend < end ? vend + 1 : vend;
    }
    if (!out) {
        lua_settop(L, 1);
        return 1;
    }
    buf_append(out, copied, (size_t)(r->text + r->len - copied));
    raw_push_copy(L, out->data, out->len);
    return 1;
}

static int mark(lua_State *L, const char *mt)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    } else {
        luaL_checktype(L, 1, LUA_TTABLE);
    }
    luaL_setmetatable(L, mt);
    lua_settop(L, 1);
    return 1;
}

static int l_array(lua_State *L)
{
    lua_settop(L, 1);
    return mark(L, REG_ARRAY);
}

/* object(t?, keys?): marks t as an object; keys (a list of strings) sets the
 * remembered member order explicitly. */
static int l_object(lua_State *L)
{
    lua_settop(L, 2);
    if (!lua_isnil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        if (lua_isnil(L, 1)) {
            lua_newtable(L);
            lua_replace(L, 1);
        }
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
        buf *ob = &cljson_box_new(L)->out;           /* slot 3; freed by the GC even if we raise */
        lua_createtable(L, 0, n > 64 ? 64 : (int)n); /* slot 4: keys seen */
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, 2, i) != LUA_TSTRING)
                return luaL_argerror(L, 2, "keys must be strings");
            lua_pushvalue(L, -1);
            if (lua_rawget(L, 4) == LUA_TNIL) {
                lua_pop(L, 1);
                put_key(L, ob, -1);
                lua_pushboolean(L, 1);
                lua_rawset(L, 4);
            } else {
                lua_pop(L, 2);
            }
        }
        lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
        lua_pushvalue(L, 1);
        lua_pushlstring(L, ob->data, ob->len);
        lua_rawset(L, -3);
    }
    lua_settop(L, 1);
    return mark(L, REG_OBJECT);
}

static int l_number(lua_State *L)
{
    size_t len;
    const char *s;
    if (lua_type(L, 1) == LUA_TNUMBER && lua_isinteger(L, 1))
        s = lua_tolstring(L, 1, &len);
    else
        s = luaL_checklstring(L, 1, &len);
    if (!json_number_valid(s, len))
        return luaL_argerror(L, 1, "not a JSON number");
    luaL_getmetatable(L, REG_NUMBER);
    cljson_push_number_box(L, s, len, lua_gettop(L));
    return 1;
}

static int has_mt(lua_State *L, int idx, const char *name)
{
    if (!lua_istable(L, idx) || !lua_getmetatable(L, idx))
        return 0;
    luaL_getmetatable(L, name);
    int r = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return r;
}

static int l_keys(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LISTS);
    if (cljson_ordered_keys(L, 1, 2, 3, 0) < 0)
        return luaL_argerror(L, 1, "table has non-string keys");
    return 1;
}

static int l_is_array(lua_State *L)
{
    lua_pushboolean(L, has_mt(L, 1, REG_ARRAY));
    return 1;
}

static int l_is_object(lua_State *L)
{
    lua_pushboolean(L, has_mt(L, 1, REG_OBJECT));
    return 1;
}

static int l_is_number(lua_State *L)
{
    lua_pushboolean(L, has_mt(L, 1, REG_NUMBER));
    return 1;
}

/* tonumber(v): Lua numbers as is; a boxed number as the nearest Lua number (an
 * integer when the text is an integer that fits, else a float). */
static int l_tonumber(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_settop(L, 1);
        return 1;
    }
    if (has_mt(L, 1, REG_NUMBER)) {
        lua_pushliteral(L, "text");
        lua_rawget(L, 1);
        const char *s = lua_tostring(L, -1);
        if (s && lua_stringtonumber(L, s))
            return 1;
    }
    lua_pushnil(L);
    return 1;
}

int luaopen_cljson(lua_State *L)
{
    static const luaL_Reg fns[] = {{"decode", l_decode},
                                   {"pdecode", cljson_pdecode},
                                   {"encode", l_encode},
                                   {"encode_canonical", l_encode_canonical},
                                   {"array", l_array},
                                   {"object", l_object},
                                   {"number", l_number},
                                   {"keys", l_keys},
                                   {"is_array", l_is_array},
                                   {"is_object", l_is_object},
                                   {"is_number", l_is_number},
                                   {"tonumber", l_tonumber},
                                   {"raw", l_raw},
                                   {"is_raw", l_is_raw},
                                   {"without", l_without},
                                   {NULL, NULL}};
    cljson_ensure_registry(L);
    luaL_newlib(L, fns);
    lua_pushlightuserdata(L, CLJSON_NULL);
    lua_setfield(L, -2, "null");
    luaL_getmetatable(L, REG_ARRAY);
    lua_setfield(L, -2, "array_mt");
    luaL_getmetatable(L, REG_OBJECT);
    lua_setfield(L, -2, "object_mt");
    luaL_getmetatable(L, REG_NUMBER);
    lua_setfield(L, -2, "number_mt");
    luaL_getmetatable(L, REG_RAW);
    lua_setfield(L, -2, "raw_mt");
    return 1;
}
