/* json_lua: module "cljson", the Lua face of the exact JSON codec (see json_lua.h). */
#include "json_lua.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REG_ARRAY "cljson.array_mt"
#define REG_OBJECT "cljson.object_mt"
#define REG_NUMBER "cljson.number_mt"
#define REG_ORDER "cljson.order" /* weak-keyed: decoded object -> key list */
#define REG_BOX "cljson.box"

#define ENC_MAX_DEPTH 512

/* cljson.null: a light userdata whose address is unique to this module copy. */
static const char null_sentinel = 0;
#define CLJSON_NULL ((void *)&null_sentinel)

/* A GC-owned holder for C resources that must not leak if a Lua error (for
 * example out of memory under a capped allocator) unwinds through our code. */
typedef struct {
    json_value *root;
    buf out;
} cbox;

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

static cbox *box_new(lua_State *L)
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

/* Creates the registry entries once per lua_State; later calls reuse them so that
 * values made before a second require stay recognised. */
static void ensure_registry(lua_State *L)
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
    if (lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    } else {
        lua_pop(L, 1);
    }
}

/* ------------------------------------------------------------------ C -> Lua */

typedef struct {
    int amt, omt, nmt, ord; /* absolute stack indices */
} push_ctx;

static void push_number_box(lua_State *L, const char *s, size_t len, int nmt)
{
    lua_createtable(L, 0, 1);
    lua_pushlstring(L, s, len);
    lua_setfield(L, -2, "text");
    lua_pushvalue(L, nmt);
    lua_setmetatable(L, -2);
}

static void push_value(lua_State *L, const json_value *v, const push_ctx *c)
{
    luaL_checkstack(L, 6, "cljson: nesting too deep");
    size_t len;
    const char *s;
    switch (json_typeof(v)) {
    case JSON_NULL:
        lua_pushlightuserdata(L, CLJSON_NULL);
        break;
    case JSON_FALSE:
        lua_pushboolean(L, 0);
        break;
    case JSON_TRUE:
        lua_pushboolean(L, 1);
        break;
    case JSON_INT:
        lua_pushinteger(L, (lua_Integer)json_get_int(v));
        break;
    case JSON_DOUBLE:
        lua_pushnumber(L, (lua_Number)json_get_double(v));
        break;
    case JSON_NUMTEXT:
        s = json_get_str(v, &len);
        push_number_box(L, s, len, c->nmt);
        break;
    case JSON_STRING:
        s = json_get_str(v, &len);
        lua_pushlstring(L, s, len);
        break;
    case JSON_ARRAY: {
        size_t n = json_count(v);
        lua_createtable(L, n > INT32_MAX ? INT32_MAX : (int)n, 0);
        for (size_t i = 0; i < n; i++) {
            push_value(L, json_at(v, i), c);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_pushvalue(L, c->amt);
        lua_setmetatable(L, -2);
        break;
    }
    case JSON_OBJECT: {
        size_t n = json_count(v);
        int hint = n > INT32_MAX ? INT32_MAX : (int)n;
        lua_createtable(L, 0, hint);
        int t = lua_gettop(L);
        if (n > 0) {
            /* The key list doubles as a set: list[i] = key, list[key] = i. */
            lua_createtable(L, hint, hint);
            int list = t + 1;
            lua_Integer li = 0;
            for (size_t i = 0; i < n; i++) {
                size_t klen;
                const char *k = json_key_at(v, i, &klen);
                lua_pushlstring(L, k, klen);
                lua_pushvalue(L, -1);
                if (lua_rawget(L, list) == LUA_TNIL) {
                    lua_pop(L, 1);
                    lua_pushvalue(L, -1);
                    lua_rawseti(L, list, ++li);
                    lua_pushvalue(L, -1);
                    lua_pushinteger(L, li);
                    lua_rawset(L, list);
                } else {
                    lua_pop(L, 1); /* duplicate key: first position, last value */
                }
                push_value(L, json_val_at(v, i), c);
                lua_rawset(L, t);
            }
            lua_pushvalue(L, t);
            lua_insert(L, list); /* stack: t, t, list */
            lua_rawset(L, c->ord);
        }
        lua_pushvalue(L, c->omt);
        lua_setmetatable(L, t);
        break;
    }
    }
}

void cljson_push(lua_State *L, const json_value *v)
{
    ensure_registry(L);
    luaL_checkstack(L, 8, "cljson");
    int base = lua_gettop(L);
    luaL_getmetatable(L, REG_ARRAY);
    luaL_getmetatable(L, REG_OBJECT);
    luaL_getmetatable(L, REG_NUMBER);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    push_ctx c = {base + 1, base + 2, base + 3, base + 4};
    push_value(L, v, &c);
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
}

/* ------------------------------------------------------------------ Lua -> C */

typedef struct {
    const char *k; /* key (anchored in a table on the stack) or NULL for an index */
    size_t klen;
    lua_Integer i;
} path_elem;

typedef struct {
    lua_State *L;
    int amt, omt, nmt, ord; /* absolute stack indices */
    int canonical;          /* ignore remembered key order; sort every object */
    size_t depth;
    const void *seen[ENC_MAX_DEPTH + 1];
    path_elem path[ENC_MAX_DEPTH + 1];
    cbox *box; /* tree mode: receives the root */
    buf *w;    /* write mode (non-NULL): text is appended here, no tree is built */
    char *err;
    size_t errlen;
} enc;

typedef struct {
    const char *k;
    size_t len;
} keyref;

static int enc_fail(enc *e, const char *msg)
{
    if (!e->err || e->errlen == 0)
        return -1;
    buf p = BUF_INIT;
    buf_putc(&p, '$');
    for (size_t d = 0; d < e->depth && p.len < 200; d++) {
        if (e->path[d].k) {
            /* ASCII only: the message may end up in a JSON error envelope. */
            buf_putc(&p, '.');
            for (size_t i = 0; i < e->path[d].klen && i < 40; i++) {
                unsigned char c = (unsigned char)e->path[d].k[i];
                buf_putc(&p, c >= 0x20 && c < 0x7f ? (char)c : '?');
            }
        } else
            buf_printf(&p, "[%lld]", (long long)e->path[d].i);
    }
    snprintf(e->err, e->errlen, "%s at %s", msg, p.data);
    buf_free(&p);
    return -1;
}

static void attach(enc *e, json_value *parent, const char *k, size_t klen, json_value *v)
{
    if (!parent)
        e->box->root = v;
    else if (json_typeof(parent) == JSON_ARRAY)
        json_push(parent, v);
    else
        json_obj_append(parent, k, klen, v);
}

/* Same digits as json.c's integer writer (json_write of a JSON_INT). */
static void write_int(buf *out, lua_Integer li)
{
    char t[24];
    char *p = t + sizeof t;
    int64_t i = (int64_t)li;
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0)
        *--p = '-';
    buf_append(out, p, (size_t)(t + sizeof t - p));
}

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->k, y->k, n);
    if (c)
        return c;
    return x->len < y->len ? -1 : (x->len > y->len);
}

/* Pushes the list of keys of the object table at idx in encode order: remembered
 * keys still present, then the other keys sorted bytewise. Returns -1 (nothing
 * pushed) if a key is not a string. */
static int ordered_keys(lua_State *L, int idx, int ord, int canonical)
{
    luaL_checkstack(L, 8, "cljson");
    int list = 0;
    lua_Integer n = 0, total = 0;
    lua_createtable(L, 0, 0);
    int out = lua_gettop(L);
    if (!canonical) {
        lua_pushvalue(L, idx);
        if (lua_rawget(L, ord) == LUA_TTABLE) {
            list = lua_gettop(L);
            lua_Integer ln = (lua_Integer)lua_rawlen(L, list);
            for (lua_Integer i = 1; i <= ln; i++) {
                if (lua_rawgeti(L, list, i) == LUA_TSTRING) {
                    lua_pushvalue(L, -1);
                    if (lua_rawget(L, idx) != LUA_TNIL) {
                        lua_pop(L, 1);
                        lua_rawseti(L, out, ++n);
                        continue;
                    }
                    lua_pop(L, 1);
                }
                lua_pop(L, 1);
            }
        } else {
            lua_pop(L, 1);
        }
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_settop(L, out - 1);
            return -1;
        }
        total++;
    }
    if (total > n) {
        keyref *ex = lua_newuserdatauv(L, (size_t)(total - n) * sizeof(keyref), 0);
        size_t nx = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            if (list) {
                lua_pushvalue(L, -1);
                int known = lua_rawget(L, list) != LUA_TNIL;
                lua_pop(L, 1);
                if (known)
                    continue;
            }
            if (nx < (size_t)(total - n)) {
                /* The key string stays alive as a key of the table. */
                ex[nx].k = lua_tolstring(L, -1, &ex[nx].len);
                nx++;
            }
        }
        qsort(ex, nx, sizeof *ex, keyref_cmp);
        for (size_t i = 0; i < nx; i++) {
            lua_pushlstring(L, ex[i].k, ex[i].len);
            lua_rawseti(L, out, ++n);
        }
        lua_pop(L, 1);
    }
    lua_settop(L, out);
    return 0;
}

static int conv(enc *e, int idx, json_value *parent, const char *k, size_t klen);

static int conv_table(enc *e, int idx, json_value *parent, const char *k, size_t klen)
{
    lua_State *L = e->L;
    luaL_checkstack(L, 10, "cljson");
    int kind = 0; /* 0 plain, 1 array, 2 object, 3 number */
    if (lua_getmetatable(L, idx)) {
        if (lua_rawequal(L, -1, e->amt))
            kind = 1;
        else if (lua_rawequal(L, -1, e->omt))
            kind = 2;
        else if (lua_rawequal(L, -1, e->nmt))
            kind = 3;
        lua_pop(L, 1);
    }
    if (kind == 3) {
        lua_pushliteral(L, "text");
        lua_rawget(L, idx);
        size_t len = 0;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (!s || !json_number_valid(s, len)) {
            lua_pop(L, 1);
            return enc_fail(e, "invalid cljson.number text");
        }
        if (e->w)
            buf_append(e->w, s, len);
        else
            attach(e, parent, k, klen, json_new_numtext(s, len));
        lua_pop(L, 1);
        return 0;
    }
    if (e->depth >= ENC_MAX_DEPTH)
        return enc_fail(e, "nesting too deep");
    const void *self = lua_topointer(L, idx);
    for (size_t d = 0; d < e->depth; d++)
        if (e->seen[d] == self)
            return enc_fail(e, "cycle in table");
    lua_Integer count = 0;
    if (kind == 0) {
        lua_Integer maxk = 0;
        int allint = 1;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            count++;
            if (lua_type(L, -1) == LUA_TNUMBER && lua_isinteger(L, -1)) {
                lua_Integer i = lua_tointeger(L, -1);
                if (i < 1)
                    allint = 0;
                else if (i > maxk)
                    maxk = i;
            } else {
                allint = 0;
            }
        }
        if (count > 0 && allint && maxk == count)
            kind = 1;
        else
            kind = 2;
    } else if (kind == 1) {
        count = (lua_Integer)lua_rawlen(L, idx);
    }
    e->seen[e->depth] = self;
    if (kind == 1) {
        json_value *arr = NULL;
        if (e->w)
            buf_putc(e->w, '[');
        else
            attach(e, parent, k, klen, arr = json_new_array());
        for (lua_Integer i = 1; i <= count; i++) {
            if (e->w && i > 1)
                buf_putc(e->w, ',');
            lua_rawgeti(L, idx, i);
            e->path[e->depth] = (path_elem){NULL, 0, i};
            e->depth++;
            int rc = conv(e, -1, arr, NULL, 0);
            e->depth--;
            lua_pop(L, 1);
            if (rc < 0)
                return -1;
        }
        if (e->w)
            buf_putc(e->w, ']');
        return 0;
    }
    json_value *obj = NULL;
    if (e->w)
        buf_putc(e->w, '{');
    else
        attach(e, parent, k, klen, obj = json_new_object());
    if (ordered_keys(L, idx, e->ord, e->canonical) < 0)
        return enc_fail(e, "table with non-string keys is neither an array nor an object");
    int keys = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, keys);
    int rc = 0;
    for (lua_Integer i = 1; i <= n && rc == 0; i++) {
        lua_rawgeti(L, keys, i);
        size_t kl;
        const char *ks = lua_tolstring(L, -1, &kl);
        e->path[e->depth] = (path_elem){ks, kl, 0};
        e->depth++;
        if (!json_utf8_valid(ks, kl)) {
            rc = enc_fail(e, "invalid UTF-8 in object key");
        } else {
            if (e->w) {
                /* Keys come from one Lua table, so they are unique and already in
                 * the order json_write would give the tree (canonical included). */
                if (i > 1)
                    buf_putc(e->w, ',');
                json_write_string(e->w, ks, kl);
                buf_putc(e->w, ':');
            }
            lua_pushvalue(L, -1);
            lua_rawget(L, idx);
            rc = conv(e, -1, obj, ks, kl);
            lua_pop(L, 1);
        }
        e->depth--;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (rc == 0 && e->w)
        buf_putc(e->w, '}');
    return rc;
}

static int conv(enc *e, int idx, json_value *parent, const char *k, size_t klen)
{
    lua_State *L = e->L;
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        if (e->w)
            buf_append(e->w, "null", 4);
        else
            attach(e, parent, k, klen, json_new_null());
        return 0;
    case LUA_TBOOLEAN: {
        int b = lua_toboolean(L, idx);
        if (e->w)
            buf_append(e->w, b ? "true" : "false", b ? 4 : 5);
        else
            attach(e, parent, k, klen, json_new_bool(b));
        return 0;
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            if (e->w)
                write_int(e->w, lua_tointeger(L, idx));
            else
                attach(e, parent, k, klen, json_new_int((int64_t)lua_tointeger(L, idx)));
        } else {
            double d = (double)lua_tonumber(L, idx);
            if (!isfinite(d))
                return enc_fail(e, "cannot encode a non-finite number");
            if (e->w)
                json_write_double(e->w, d);
            else
                attach(e, parent, k, klen, json_new_double(d));
        }
        return 0;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (!json_utf8_valid(s, len))
            return enc_fail(e, "invalid UTF-8 in string");
        if (e->w)
            json_write_string(e->w, s, len);
        else
            attach(e, parent, k, klen, json_new_str(s, len));
        return 0;
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == CLJSON_NULL) {
            if (e->w)
                buf_append(e->w, "null", 4);
            else
                attach(e, parent, k, klen, json_new_null());
            return 0;
        }
        return enc_fail(e, "cannot encode a light userdata");
    case LUA_TTABLE:
        return conv_table(e, idx, parent, k, klen);
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "cannot encode a %s", luaL_typename(L, idx));
        return enc_fail(e, msg);
    }
    }
}

/* Converts the value at idx into box->root (w == NULL), or writes its text straight
 * into w (the fast path: same bytes as json_write of the tree, no tree built). May
 * raise only on Lua memory errors, in which case the box's __gc frees the partial
 * tree. */
static int convert(lua_State *L, int idx, cbox *box, buf *w, int canonical, char *err,
                   size_t errlen)
{
    idx = lua_absindex(L, idx);
    ensure_registry(L);
    luaL_checkstack(L, 8, "cljson");
    int base = lua_gettop(L);
    luaL_getmetatable(L, REG_ARRAY);
    luaL_getmetatable(L, REG_OBJECT);
    luaL_getmetatable(L, REG_NUMBER);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    /* A userdata, not malloc: freed by the GC even if a memory error unwinds. */
    enc *e = lua_newuserdatauv(L, sizeof *e, 0);
    memset(e, 0, sizeof *e);
    e->L = L;
    e->amt = base + 1;
    e->omt = base + 2;
    e->nmt = base + 3;
    e->ord = base + 4;
    e->canonical = canonical;
    e->box = box;
    e->w = w;
    e->err = err;
    e->errlen = errlen;
    int rc = conv(e, idx, NULL, NULL, 0);
    lua_settop(L, base);
    return rc;
}

/* Protected trampoline for the C API entry points. */
typedef struct {
    int idx;
    int canonical;
    int write; /* 1: write text into out */
    buf *out;
    json_value *result;
    char *err;
    size_t errlen;
    int rc;
} pcall_args;

static int p_convert(lua_State *L)
{
    pcall_args *a = lua_touserdata(L, 1);
    cbox *box = box_new(L);
    a->rc = convert(L, 2, box, a->write ? a->out : NULL, a->canonical, a->err, a->errlen);
    if (a->rc == 0 && !a->write)
        a->result = box->root, box->root = NULL;
    return 0;
}

static int msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    luaL_traceback(L, L, msg ? msg : "(error object)", 1);
    return 1;
}

static int run_protected(lua_State *L, pcall_args *a)
{
    int idx = lua_absindex(L, a->idx);
    a->idx = idx;
    a->rc = -1;
    lua_pushcfunction(L, msgh);
    int h = lua_gettop(L);
    lua_pushcfunction(L, p_convert);
    lua_pushlightuserdata(L, a);
    lua_pushvalue(L, idx); /* the pcall'd function has its own stack frame */
    int st = lua_pcall(L, 2, 0, h);
    if (st != LUA_OK) {
        if (a->err && a->errlen)
            snprintf(a->err, a->errlen, "cljson: %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        a->rc = -1;
    }
    lua_pop(L, 1);
    return a->rc;
}

json_value *cljson_to_value(lua_State *L, int idx, char *err, size_t errlen)
{
    pcall_args a = {idx, 0, 0, NULL, NULL, err, errlen, -1};
    if (run_protected(L, &a) < 0) {
        json_free(a.result);
        return NULL;
    }
    return a.result;
}

/* The former encoder (build a json_value tree, then json_write it), kept as the
 * reference the direct writer is tested against (tests/unit/test_json.c). Same
 * contract as cljson_encode. Not in json_lua.h: a test hook only. */
int cljson_encode_tree(lua_State *L, int idx, buf *out, int canonical, char *err, size_t errlen);
int cljson_encode_tree(lua_State *L, int idx, buf *out, int canonical, char *err, size_t errlen)
{
    pcall_args a = {idx, canonical, 0, NULL, NULL, err, errlen, -1};
    if (run_protected(L, &a) < 0)
        return -1;
    json_write(out, a.result, canonical);
    json_free(a.result);
    return 0;
}

int cljson_encode(lua_State *L, int idx, buf *out, int canonical, char *err, size_t errlen)
{
    pcall_args a = {idx, canonical, 1, out, NULL, err, errlen, -1};
    size_t start = out->len;
    int rc = run_protected(L, &a);
    if (rc < 0)
        out->len = start; /* drop the partial text, as the tree path never wrote any */
    return rc;
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

/* Returns 1 value on success; on failure pushes nil, msg and returns 2. */
static int do_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    json_limits lim;
    read_limits(L, 2, &lim);
    char err[160];
    cbox *box = box_new(L);
    box->root = json_parse(s, len, &lim, err, sizeof err);
    if (!box->root) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    cljson_push(L, box->root);
    json_free(box->root);
    box->root = NULL;
    return 1;
}

static int l_decode(lua_State *L)
{
    if (do_decode(L) == 2)
        return luaL_error(L, "cljson: %s", lua_tostring(L, -1));
    return 1;
}

static int l_pdecode(lua_State *L)
{
    return do_decode(L);
}

static int encode_impl(lua_State *L, int canonical)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    char err[320];
    cbox *box = box_new(L);
    if (convert(L, 1, box, &box->out, canonical, err, sizeof err) < 0)
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
        lua_Integer n = (lua_Integer)lua_rawlen(L, 2), li = 0;
        lua_createtable(L, (int)n, (int)n);
        int list = lua_gettop(L);
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, 2, i) != LUA_TSTRING)
                return luaL_argerror(L, 2, "keys must be strings");
            lua_pushvalue(L, -1);
            if (lua_rawget(L, list) == LUA_TNIL) {
                lua_pop(L, 1);
                lua_pushvalue(L, -1);
                lua_rawseti(L, list, ++li);
                lua_pushinteger(L, li);
                lua_rawset(L, list);
            } else {
                lua_pop(L, 2);
            }
        }
        lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
        lua_pushvalue(L, 1);
        lua_pushvalue(L, list);
        lua_rawset(L, -3);
        lua_pop(L, 2);
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
    push_number_box(L, s, len, lua_gettop(L));
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
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    if (ordered_keys(L, 1, lua_gettop(L), 0) < 0)
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
                                   {"pdecode", l_pdecode},
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
                                   {NULL, NULL}};
    ensure_registry(L);
    luaL_newlib(L, fns);
    lua_pushlightuserdata(L, CLJSON_NULL);
    lua_setfield(L, -2, "null");
    luaL_getmetatable(L, REG_ARRAY);
    lua_setfield(L, -2, "array_mt");
    luaL_getmetatable(L, REG_OBJECT);
    lua_setfield(L, -2, "object_mt");
    luaL_getmetatable(L, REG_NUMBER);
    lua_setfield(L, -2, "number_mt");
    return 1;
}
