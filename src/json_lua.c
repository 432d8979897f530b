/* json_lua: module "cljson", the Lua face of the exact JSON codec (see json_lua.h). */
#include "json_lua.h"
#include "json_text.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REG_ARRAY "cljson.array_mt"
#define REG_OBJECT "cljson.object_mt"
#define REG_NUMBER "cljson.number_mt"
/* Remembered key order: object -> order string (see order_put). Weak keys and
 * values, but a string is never removed from a weak table (Lua manual §2.5.4),
 * so an entry lives exactly as long as its object. Not an ephemeron table (weak
 * keys only): the collector walks those several times per cycle, touching every
 * key object, which made half the data-cache misses of decoding small objects. */
#define REG_ORDER "cljson.order"
/* order string -> key list (list[i] = key, list[key] = i): a cache for the
 * encoder, emptied when it reaches LISTS_MAX entries (lists are only derived). */
#define REG_LISTS "cljson.lists"
#define LISTS_MAX 4096
#define REG_BOX "cljson.box"

#define ENC_MAX_DEPTH 512
#define ENC_INLINE 32

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
}

/* An order string is the keys in order, each as its length (LEB128) and bytes,
 * no key twice. Equal orders are equal strings. */
static void order_put(buf *b, const char *k, size_t len)
{
    unsigned char t[10];
    size_t n = 0, v = len;
    do {
        t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    buf_append(b, t, n);
    buf_append(b, k, len);
}

/* order_put of the string at stack index idx. */
static void put_key(lua_State *L, buf *b, int idx)
{
    size_t len;
    const char *k = lua_tolstring(L, idx, &len);
    order_put(b, k, len);
}

/* Reads the key at *p (not past end); returns 0, or -1 if malformed. */
static int order_next(const unsigned char **p, const unsigned char *end, const char **k,
                      size_t *len)
{
    size_t v = 0;
    for (int shift = 0;; shift += 7) {
        if (*p >= end || shift > 56)
            return -1;
        unsigned c = *(*p)++;
        v |= (size_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
    }
    if ((size_t)(end - *p) < v)
        return -1;
    *k = (const char *)*p;
    *len = v;
    *p += v;
    return 0;
}

/* Where key i of a key list is in the list's blob (list[0], a string): its raw
 * bytes and its text as the writer emits it ("key":), so that the writer need
 * not escape and validate listed keys again. */
typedef struct {
    uint32_t raw, rawlen, esc, esclen;
} keyseg;

static int put_str(buf *out, const char *s, size_t len);

/* Pushes the key list of the object at idx (list[i] = key, list[key] = i,
 * list[0] = the blob of keyseg[n] and key texts, absent if a key is not valid
 * UTF-8) and
 * returns 1, or pushes nothing and returns 0 if it has no remembered order. ord
 * and lists are the stack slots of REG_ORDER and of the list cache; a miss builds
 * the list and caches it (a full cache is replaced by an empty one, in the
 * registry and in slot lists). */
static int order_list(lua_State *L, int idx, int ord, int lists)
{
    lua_pushvalue(L, idx);
    if (lua_rawget(L, ord) != LUA_TSTRING) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_rawget(L, lists) == LUA_TTABLE) /* the common case: two lookups */
        return 1;
    lua_pop(L, 1);
    luaL_checkstack(L, 6, "cljson");
    lua_pushvalue(L, idx);
    lua_rawget(L, ord);
    size_t len;
    const unsigned char *s = (const unsigned char *)lua_tolstring(L, -1, &len), *p = s;
    const unsigned char *end = s + len;
    const char *k;
    size_t kl;
    int n = 0;
    while (p < end && order_next(&p, end, &k, &kl) == 0)
        n++;
    lua_createtable(L, n, n + 1);
    int list = lua_gettop(L);
    lua_Integer i = 0;
    for (p = s; p < end && order_next(&p, end, &k, &kl) == 0;) {
        lua_pushlstring(L, k, kl);
        lua_pushvalue(L, -1);
        lua_rawseti(L, list, ++i);
        lua_pushinteger(L, i);
        lua_rawset(L, list);
    }
    buf *bb = &box_new(L)->out; /* freed by the GC even if Lua raises */
    size_t hdr = (size_t)n * sizeof(keyseg);
    buf_reserve(bb, hdr);
    bb->len = hdr;
    int ok = len < UINT32_MAX / 8;
    i = 0;
    for (p = s; ok && p < end && order_next(&p, end, &k, &kl) == 0; i++) {
        keyseg g;
        g.raw = (uint32_t)bb->len;
        g.rawlen = (uint32_t)kl;
        buf_append(bb, k, kl);
        g.esc = (uint32_t)bb->len;
        ok = put_str(bb, k, kl) == 0;
        buf_putc(bb, ':');
        g.esclen = (uint32_t)(bb->len - g.esc);
        memcpy(bb->data + (size_t)i * sizeof g, &g, sizeof g);
    }
    if (ok) {
        lua_pushlstring(L, bb->data, bb->len);
        lua_rawseti(L, list, 0);
    }
    lua_pop(L, 1);
    lua_rawgeti(L, lists, 0);
    lua_Integer cached = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (cached >= LISTS_MAX) {
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, REG_LISTS);
        lua_replace(L, lists);
        cached = 0;
    }
    lua_pushinteger(L, cached + 1);
    lua_rawseti(L, lists, 0);
    lua_pushvalue(L, list - 1);
    lua_pushvalue(L, list);
    lua_rawset(L, lists);
    lua_remove(L, list - 1);
    return 1;
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
            /* The order string, built in a GC'd box (nothing leaks if Lua raises). */
            buf *ob = &box_new(L)->out;
            for (size_t i = 0; i < n; i++) {
                size_t klen;
                const char *k = json_key_at(v, i, &klen);
                lua_pushlstring(L, k, klen);
                lua_pushvalue(L, -1);
                /* A duplicate key keeps its first position and takes the last value
                 * (decoded values are never nil). */
                if (lua_rawget(L, t) == LUA_TNIL)
                    order_put(ob, k, klen);
                lua_pop(L, 1);
                push_value(L, json_val_at(v, i), c);
                lua_rawset(L, t);
            }
            lua_pushvalue(L, t);
            lua_pushlstring(L, ob->data, ob->len);
            lua_rawset(L, c->ord);
            lua_settop(L, t);
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

/* ------------------------------------------------------------- text -> Lua */

/* The decoder parses JSON text straight into Lua values (no json_value tree). It
 * accepts exactly what json_parse accepts and builds the same values as
 * cljson_push of json_parse's tree; it reports only "rejected": do_decode then
 * runs json_parse on the same text for the exact error message. Nothing here is
 * malloc'd across a Lua call: the unescape buffer lives in a GC-owned cbox, so a
 * Lua memory error cannot leak it. */

#define DEC_DEFAULT_DEPTH 512 /* json.c's JSON_DEFAULT_DEPTH */
#define DEC_HARD_DEPTH 10000  /* json.c's JSON_HARD_DEPTH */
/* Members kept on the Lua stack before they are stored into their table: a
 * container is created once with its final size when it has no more than this. */
#define DEC_CHUNK 512

typedef struct {
    lua_State *L;
    const unsigned char *p, *end;
    size_t max_depth;
    int amt, omt, nmt, ord; /* absolute stack indices */
    int shapes;             /* shape cache: slot (a hash of the order) -> order string */
    int boxslot;            /* stack slots of two cboxes (nil until needed): */
    cbox *box[2];           /* [0] unescaped string bytes, [1] the keys of open objects */
    buf *keys;              /* box[1]'s buffer: each open object's keys, in order */
    int lastn[64];          /* members of the last object at each depth (mod 64) */
} dec;

/* The decode's scratch buffer i, in a cbox made at the first need. */
static buf *dec_buf(dec *d, int i)
{
    if (!d->box[i]) {
        d->box[i] = box_new(d->L);
        lua_replace(d->L, d->boxslot + i);
    }
    return &d->box[i]->out;
}

static inline const unsigned char *dec_ws(const unsigned char *p, const unsigned char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* Length of the valid UTF-8 sequence at p (p[0] >= 0x80), or 0. */
static inline int dec_utf8(const unsigned char *p, const unsigned char *end)
{
    int n = json_utf8_seq(p, end);
    return n > 0 ? n : 0;
}

/* 1 if any of the 8 bytes of w is < 0x20, '"', '\\' or >= 0x80. */
static inline int word_special(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t t = (w - ones * 0x20) | (q - ones) | (b - ones) | w;
    return (t & high) != 0;
}

/* Skips bytes that need no work in a string (printable ASCII but '"' and '\\'). */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end)
{
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        if (word_special(w))
            break;
        p += 8;
    }
    while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
        p++;
    return p;
}

/* Pushes the string at d->p (on '"') and moves past it; a key (key != 0) is
 * also appended to d->keys (order_put). */
static int dec_string(dec *d, int key)
{
    const unsigned char *p = d->p + 1, *end = d->end, *run = p;
    int escaped = 0;
    for (;;) {
        p = plain_run(p, end);
        if (p >= end)
            return -1;
        unsigned c = *p;
        if (c == '"')
            break;
        if (c < 0x20)
            return -1;
        if (c >= 0x80) {
            /* A run of multi-byte characters (CJK text) without going back to
             * the ASCII scan between them. */
            do {
                int n;
                if (c >= 0xE1 && c != 0xED && c <= 0xEF && end - p >= 3 && (p[1] & 0xC0) == 0x80 &&
                    (p[2] & 0xC0) == 0x80)
                    n = 3; /* the common 3-byte form: no range limits to check */
                else
                    n = dec_utf8(p, end);
                if (n == 0)
                    return -1;
                p += n;
            } while (p < end && (c = *p) >= 0x80);
            continue;
        }
        /* backslash */
        if (!escaped) {
            escaped = 1;
            buf_reset(dec_buf(d, 0));
        }
        buf_append(&d->box[0]->out, run, (size_t)(p - run));
        if (end - p < 2)
            return -1;
        unsigned char e = p[1];
        p += 2;
        char ch;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            ch = (char)e;
            break;
        case 'b':
            ch = '\b';
            break;
        case 'f':
            ch = '\f';
            break;
        case 'n':
            ch = '\n';
            break;
        case 'r':
            ch = '\r';
            break;
        case 't':
            ch = '\t';
            break;
        case 'u': {
            unsigned cp;
            if (end - p < 4 || json_hex4(p, &cp) < 0)
                return -1;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || json_hex4(p + 2, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            json_put_utf8(&d->box[0]->out, cp);
            run = p;
            continue;
        }
        default:
            return -1;
        }
        buf_putc(&d->box[0]->out, ch);
        run = p;
    }
    if (!escaped) {
        if (key)
            order_put(d->keys, (const char *)run, (size_t)(p - run));
        lua_pushlstring(d->L, (const char *)run, (size_t)(p - run));
    } else {
        buf *b = &d->box[0]->out;
        buf_append(b, run, (size_t)(p - run));
        if (key)
            order_put(d->keys, b->data, b->len);
        lua_pushlstring(d->L, b->data, b->len);
    }
    d->p = p + 1;
    return 0;
}

/* A number token json.c would not make an int64 and that the quick rule below
 * cannot settle: json_parse of the token itself decides DOUBLE vs NUMTEXT (the
 * tree is freed before any Lua call). */
static void dec_number_slow(dec *d, const char *tok, size_t len)
{
    char err[8];
    json_value *v = json_parse(tok, len, NULL, err, sizeof err);
    if (v && json_typeof(v) == JSON_DOUBLE) {
        double x = json_get_double(v);
        json_free(v);
        lua_pushnumber(d->L, (lua_Number)x);
        return;
    }
    json_free(v);
    push_number_box(d->L, tok, len, d->nmt);
}

static int dec_number(dec *d)
{
    const unsigned char *s = d->p, *p = d->p, *end = d->end;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9')
        return -1;
    const unsigned char *digits = p;
    /* Significant digits: position of the first and last non-zero digit. */
    int64_t k = 0, first = -1, last = -1;
    if (*p == '0') {
        p++;
        k = 1;
        if (p < end && *p >= '0' && *p <= '9')
            return -1;
    } else {
        for (; p < end && *p >= '0' && *p <= '9'; p++, k++)
            if (*p != '0') {
                if (first < 0)
                    first = k;
                last = k;
            }
    }
    int64_t nint = k;
    int is_int = 1;
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9')
            return -1;
        for (; p < end && *p >= '0' && *p <= '9'; p++, k++)
            if (*p != '0') {
                if (first < 0)
                    first = k;
                last = k;
            }
    }
    int64_t ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9')
            return -1;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (ex < 1000000000000LL)
                ex = ex * 10 + (*p - '0');
        if (eneg)
            ex = -ex;
    }
    d->p = p;
    size_t len = (size_t)(p - s);
    if (is_int) {
        if (nint <= 19) {
            uint64_t u = 0;
            for (int64_t i = 0; i < nint; i++)
                u = u * 10 + (uint64_t)(digits[i] - '0');
            uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
            if (u <= lim) {
                int64_t i =
                    neg ? (u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u) : (int64_t)u;
                lua_pushinteger(d->L, (lua_Integer)i);
                return 0;
            }
        }
        push_number_box(d->L, (const char *)s, len, d->nmt);
        return 0;
    }
    /* json.c's number_value: zero, or <= 15 significant digits within
     * 10^-300..10^300, is always the double strtod gives. */
    int64_t ndig = first < 0 ? 0 : last - first + 1;
    int64_t mag = first < 0 ? 0 : ex + nint - first;
    if (ndig == 0 || (ndig <= 15 && mag > -300 && mag < 300)) {
        char tmp[64];
        if (len < sizeof tmp) {
            memcpy(tmp, s, len);
            tmp[len] = '\0';
            lua_pushnumber(d->L, (lua_Number)strtod(tmp, NULL));
            return 0;
        }
    }
    dec_number_slow(d, (const char *)s, len);
    return 0;
}

static int dec_lit(dec *d, const char *lit, size_t n)
{
    if ((size_t)(d->end - d->p) < n || memcmp(d->p, lit, n) != 0)
        return -1;
    d->p += n;
    return 0;
}

static int dec_value(dec *d, size_t depth);

/* Stores the pend values above t into the array t (created on the first flush). */
static void flush_array(lua_State *L, int t, lua_Integer *n, int pend)
{
    if (lua_isnil(L, t)) {
        lua_createtable(L, pend, 0);
        lua_replace(L, t);
    }
    for (int i = 1; i <= pend; i++) {
        lua_pushvalue(L, t + i);
        lua_rawseti(L, t, ++*n);
    }
    lua_settop(L, t);
}

/* Makes room for one more pending array element plus what a nested value
 * needs; flushes the pending ones when the stack cannot grow. */
static int dec_room(dec *d, int *pend, int t, lua_Integer *n)
{
    lua_State *L = d->L;
    if (*pend < DEC_CHUNK && lua_checkstack(L, 9))
        return 0;
    if (*pend > 0) {
        flush_array(L, t, n, *pend);
        *pend = 0;
    }
    return lua_checkstack(L, 9) ? 0 : -1;
}

/* Objects of one decode that have the same keys in the same order (the rows of a
 * result set) share one order string: the shape cache maps a cheap hash of the
 * order to the last order string with that hash. */
#define DEC_SHAPES 64

static unsigned shape_slot(const char *k, size_t len)
{
    uint64_t a = 0, b = 0;
    memcpy(&a, k, len < 8 ? len : 8);
    if (len > 8)
        memcpy(&b, k + len - 8, 8);
    uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ULL) ^ len) * 0xFF51AFD7ED558CCDULL;
    return (unsigned)(h >> 58) + 1; /* 1..64 */
}

/* Pushes the order string of the object t whose n members' keys are d->keys
 * from start on (then truncates d->keys back to start). A duplicate key keeps
 * its first position (t took the last value): found by counting t's keys, for
 * a new order only (a cached one has no duplicates). */
static void push_order(dec *d, int t, size_t start, int n)
{
    lua_State *L = d->L;
    buf *kb = d->keys;
    const char *k = kb->data + start;
    size_t len = kb->len - start;
    unsigned slot = shape_slot(k, len);
    if (lua_rawgeti(L, d->shapes, slot) == LUA_TSTRING) {
        size_t sl;
        const char *ss = lua_tolstring(L, -1, &sl);
        if (sl == len && memcmp(ss, k, len) == 0) {
            kb->len = start;
            return;
        }
    }
    lua_pop(L, 1);
    int count = 0;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        count++;
    }
    if (count == n) {
        lua_pushlstring(L, k, len);
    } else {
        /* Rare: the keys again, first occurrences only (seen: key -> true),
         * into the unescape buffer (free between tokens). */
        luaL_checkstack(L, 4, "cljson");
        buf *ob = dec_buf(d, 0);
        buf_reset(ob);
        lua_createtable(L, 0, count);
        const unsigned char *p = (const unsigned char *)k, *end = p + len;
        const char *key;
        size_t kl;
        while (p < end && order_next(&p, end, &key, &kl) == 0) {
            lua_pushlstring(L, key, kl);
            lua_pushvalue(L, -1);
            if (lua_rawget(L, -3) == LUA_TNIL) {
                lua_pop(L, 1);
                order_put(ob, key, kl);
                lua_pushboolean(L, 1);
                lua_rawset(L, -3);
            } else {
                lua_pop(L, 2);
            }
        }
        lua_pop(L, 1);
        lua_pushlstring(L, ob->data, ob->len);
    }
    kb->len = start;
    lua_pushvalue(L, -1);
    lua_rawseti(L, d->shapes, slot);
}

static int dec_array(dec *d, size_t depth)
{
    lua_State *L = d->L;
    lua_pushnil(L); /* the table, created at the first flush */
    int t = lua_gettop(L);
    lua_Integer n = 0;
    int pend = 0;
    const unsigned char *p = dec_ws(d->p + 1, d->end);
    if (p < d->end && *p == ']') {
        d->p = p + 1;
    } else {
        d->p = p;
        for (;;) {
            if (dec_room(d, &pend, t, &n) < 0 || dec_value(d, depth) < 0)
                return -1;
            pend++;
            p = dec_ws(d->p, d->end);
            if (p >= d->end)
                return -1;
            if (*p == ',') {
                d->p = p + 1;
                continue;
            }
            if (*p != ']')
                return -1;
            d->p = p + 1;
            break;
        }
    }
    flush_array(L, t, &n, pend);
    lua_pushvalue(L, d->amt);
    lua_setmetatable(L, t);
    return 0;
}

static int dec_object(dec *d, size_t depth)
{
    lua_State *L = d->L;
    const unsigned char *p = dec_ws(d->p + 1, d->end);
    if (p < d->end && *p == '}') {
        d->p = p + 1;
        lua_createtable(L, 0, 0);
        lua_pushvalue(L, d->omt);
        lua_setmetatable(L, -2);
        return 0;
    }
    /* Members are stored as they come (so a duplicate's last value wins), in a
     * table sized like the last object at this depth (rows repeat); their keys
     * gather in d->keys after those of the enclosing objects. */
    int *lastn = &d->lastn[depth & 63];
    lua_createtable(L, 0, *lastn);
    int t = lua_gettop(L);
    if (!d->keys)
        d->keys = dec_buf(d, 1);
    size_t start = d->keys->len;
    int n = 0;
    for (;;) {
        if (p >= d->end || *p != '"')
            return -1;
        d->p = p;
        if (dec_string(d, 1) < 0)
            return -1;
        p = dec_ws(d->p, d->end);
        if (p >= d->end || *p != ':')
            return -1;
        d->p = p + 1;
        if (dec_value(d, depth) < 0)
            return -1;
        lua_rawset(L, t);
        n++;
        p = dec_ws(d->p, d->end);
        if (p >= d->end)
            return -1;
        if (*p == ',') {
            p = dec_ws(p + 1, d->end);
            continue;
        }
        if (*p != '}')
            return -1;
        d->p = p + 1;
        break;
    }
    *lastn = n < 64 ? n : 64; /* a big object does not inflate the next ones */
    push_order(d, t, start, n);
    /* stack: t, order string */
    lua_pushvalue(L, t);
    lua_insert(L, -2);
    lua_rawset(L, d->ord);
    lua_pushvalue(L, d->omt);
    lua_setmetatable(L, t);
    return 0;
}

/* Pushes one value (skipping whitespace before it). */
static int dec_value(dec *d, size_t depth)
{
    d->p = dec_ws(d->p, d->end);
    if (d->p >= d->end)
        return -1;
    switch (*d->p) {
    case '"':
        return dec_string(d, 0);
    case '{':
    case '[':
        if (depth + 1 > d->max_depth || !lua_checkstack(d->L, 8))
            return -1;
        return *d->p == '{' ? dec_object(d, depth + 1) : dec_array(d, depth + 1);
    case 't':
        if (dec_lit(d, "true", 4) < 0)
            return -1;
        lua_pushboolean(d->L, 1);
        return 0;
    case 'f':
        if (dec_lit(d, "false", 5) < 0)
            return -1;
        lua_pushboolean(d->L, 0);
        return 0;
    case 'n':
        if (dec_lit(d, "null", 4) < 0)
            return -1;
        lua_pushlightuserdata(d->L, CLJSON_NULL);
        return 0;
    default:
        if (*d->p == '-' || (*d->p >= '0' && *d->p <= '9'))
            return dec_number(d);
        return -1;
    }
}

/* Decodes s into one value pushed on the stack; returns 0, or -1 (stack
 * restored) when json_parse would reject the text. May raise a Lua memory error. */
static int decode_direct(lua_State *L, const char *s, size_t len, const json_limits *lim)
{
    if (lim->max_size && len > lim->max_size)
        return -1;
    ensure_registry(L);
    luaL_checkstack(L, 16, "cljson");
    int base = lua_gettop(L);
    luaL_getmetatable(L, REG_ARRAY);
    luaL_getmetatable(L, REG_OBJECT);
    luaL_getmetatable(L, REG_NUMBER);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    lua_pushnil(L); /* the scratch cboxes, made at the first need */
    lua_pushnil(L);
    lua_createtable(L, DEC_SHAPES, 0);
    dec d;
    d.L = L;
    d.p = (const unsigned char *)s;
    d.end = d.p + len;
    d.max_depth = lim->max_depth ? lim->max_depth : DEC_DEFAULT_DEPTH;
    if (d.max_depth > DEC_HARD_DEPTH)
        d.max_depth = DEC_HARD_DEPTH;
    d.amt = base + 1;
    d.omt = base + 2;
    d.nmt = base + 3;
    d.ord = base + 4;
    d.boxslot = base + 5;
    d.shapes = base + 7;
    d.box[0] = d.box[1] = NULL;
    d.keys = NULL;
    memset(d.lastn, 0, sizeof d.lastn);
    if (dec_value(&d, 0) < 0 || dec_ws(d.p, d.end) != d.end) {
        lua_settop(L, base);
        return -1;
    }
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
    return 0;
}

/* ------------------------------------------------------------------ Lua -> C */

typedef struct {
    const char *k; /* key (anchored in a table on the stack) or NULL for an index */
    size_t klen;
    lua_Integer i;
} path_elem;

typedef struct {
    lua_State *L;
    int amt, omt, nmt, ord, lists;  /* absolute stack indices */
    const void *pamt, *pomt, *pnmt; /* the metatables, compared by address */
    int canonical;                  /* ignore remembered key order; sort every object */
    size_t depth;
    /* Tables being converted and the path to them: small inline arrays, moved to
     * a GC-owned userdata (anchored at stack slot grown) past ENC_INLINE levels. */
    const void **seen;
    path_elem *path;
    size_t cap;
    int grown;
    const void *seen_in[ENC_INLINE];
    path_elem path_in[ENC_INLINE];
    cbox *box;  /* tree mode: receives the root */
    buf *w;     /* write mode (non-NULL): text is appended here, no tree is built */
    size_t max; /* write mode: most bytes w may hold (0 = no limit) */
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
static int ordered_keys(lua_State *L, int idx, int ord, int lists, int canonical)
{
    luaL_checkstack(L, 8, "cljson");
    int list = 0;
    lua_Integer n = 0, total = 0;
    lua_createtable(L, 0, 0);
    int out = lua_gettop(L);
    if (!canonical) {
        if (order_list(L, idx, ord, lists)) {
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

/* buf_putc without the NUL terminator (convert writes it once at the end). */
static inline void wputc(buf *b, char c)
{
    if (b->len + 2 > b->cap)
        buf_reserve(b, 1);
    b->data[b->len++] = c;
}

/* Moves seen/path from the inline arrays to a userdata of the full depth. */
static void enc_grow(enc *e)
{
    size_t cap = ENC_MAX_DEPTH + 1;
    char *mem = lua_newuserdatauv(e->L, cap * (sizeof(void *) + sizeof(path_elem)), 0);
    path_elem *path = (path_elem *)mem;
    const void **seen = (const void **)(mem + cap * sizeof(path_elem));
    memcpy(path, e->path, e->depth * sizeof *path);
    memcpy(seen, e->seen, e->depth * sizeof *seen);
    lua_replace(e->L, e->grown);
    e->path = path;
    e->seen = seen;
    e->cap = cap;
}

/* Appends s quoted and escaped, byte for byte what json_write_string writes, and
 * checks its UTF-8 in the same pass; returns -1 (out then holds garbage past its
 * old length) if s is not valid UTF-8. */
static int put_str(buf *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    if (out->len + len + 3 > out->cap) /* buf_reserve's own test, without the call */
        buf_reserve(out, len + 2);
    char *o = out->data + out->len;
    *o++ = '"';
    for (;;) {
        /* Plain ASCII 8 bytes at a time (room for len bytes is reserved). */
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (word_special(w))
                break;
            memcpy(o, &w, 8);
            o += 8;
            p += 8;
        }
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
            *o++ = (char)*p++;
        if (p >= end)
            break;
        unsigned c = *p;
        if (c >= 0x80) {
            /* A run of multi-byte characters (CJK text), copied as checked. */
            do {
                if (c >= 0xE1 && c != 0xED && c <= 0xEF && end - p >= 3 && (p[1] & 0xC0) == 0x80 &&
                    (p[2] & 0xC0) == 0x80) {
                    /* the common 3-byte form: no range limits to check */
                    o[0] = (char)p[0];
                    o[1] = (char)p[1];
                    o[2] = (char)p[2];
                    o += 3;
                    p += 3;
                    continue;
                }
                int n = dec_utf8(p, end);
                if (n == 0) {
                    out->len = (size_t)(o - out->data);
                    return -1;
                }
                for (int i = 0; i < n; i++)
                    o[i] = (char)p[i];
                o += n;
                p += n;
            } while (p < end && (c = *p) >= 0x80);
            continue;
        }
        /* '"', '\\' or a control character: room for the escape and the rest. */
        out->len = (size_t)(o - out->data);
        buf_reserve(out, (size_t)(end - p) + 7);
        o = out->data + out->len;
        o = json_escape_byte(o, c);
        p++;
    }
    *o++ = '"';
    out->len = (size_t)(o - out->data);
    *o = '\0';
    return 0;
}

static int conv(enc *e, int idx, json_value *parent, const char *k, size_t klen);

/* Writes one member: key ks (anchored by the caller), its value at stack slot
 * vidx (the caller pops it). *nout counts the members written so far. */
static int conv_member(enc *e, const char *ks, size_t kl, int vidx, json_value *obj,
                       lua_Integer *nout)
{
    e->path[e->depth] = (path_elem){ks, kl, 0};
    e->depth++;
    int rc = 0;
    if (e->w) {
        if (*nout > 0)
            wputc(e->w, ',');
        if (put_str(e->w, ks, kl) < 0)
            rc = enc_fail(e, "invalid UTF-8 in object key");
        else
            wputc(e->w, ':');
    } else if (!json_utf8_valid(ks, kl)) {
        rc = enc_fail(e, "invalid UTF-8 in object key");
    }
    if (rc == 0)
        rc = conv(e, vidx, obj, ks, kl);
    e->depth--;
    (*nout)++;
    return rc;
}

/* conv_member for a listed key in write mode: esc is the key's text with its
 * quotes and colon, already checked (the key list's blob). */
static int conv_member_listed(enc *e, const char *ks, size_t kl, const char *esc, size_t elen,
                              int vidx, lua_Integer *nout)
{
    e->path[e->depth] = (path_elem){ks, kl, 0};
    e->depth++;
    buf *w = e->w;
    if (w->len + elen + 2 > w->cap)
        buf_reserve(w, elen + 1);
    if (*nout > 0)
        w->data[w->len++] = ',';
    memcpy(w->data + w->len, esc, elen);
    w->len += elen;
    int rc = conv(e, vidx, NULL, ks, kl);
    e->depth--;
    (*nout)++;
    return rc;
}

#define ENC_KEYS_INLINE 16

static const char NONSTR_KEYS[] = "table with non-string keys is neither an array nor an object";

/* 1 if the table at idx has a key that is not a string. */
static int has_nonstring_key(lua_State *L, int idx)
{
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* Writes the members of the object table at idx: the remembered keys still
 * present in their order, then the other keys sorted bytewise (canonical: all
 * keys sorted). count is the number of keys (-1: not counted yet; allstr then
 * unknown too). Same order as the key list of ordered_keys, without building it.
 *
 * With a remembered order the key types are checked lazily (a listed key is a
 * string; other keys are checked when collected), but the first error is the one
 * of the eager check: a table with non-string keys fails before its members, so
 * a member's error is replaced by it. */
static int conv_object(enc *e, int idx, json_value *obj, lua_Integer count, int allstr)
{
    lua_State *L = e->L;
    int top = lua_gettop(L);
    int list = 0, rc = 0, lazy = 0;
    if (!e->canonical && order_list(L, idx, e->ord, e->lists))
        list = top + 1;
    if (count < 0) {
        count = 0;
        lua_pushnil(L);
        if (list) {
            lazy = 1;
            while (lua_next(L, idx)) {
                lua_pop(L, 1);
                count++;
            }
        } else {
            while (lua_next(L, idx)) {
                lua_pop(L, 1);
                count++;
                if (lua_type(L, -1) != LUA_TSTRING)
                    allstr = 0;
            }
        }
    }
    if (!allstr) {
        lua_settop(L, top);
        return enc_fail(e, NONSTR_KEYS);
    }
    lua_Integer n = 0;
    if (list) {
        const char *blob = NULL; /* anchored by the list */
        if (e->w && lua_rawgeti(L, list, 0) == LUA_TSTRING)
            blob = lua_tostring(L, -1);
        lua_settop(L, list);
        lua_Integer ln = (lua_Integer)lua_rawlen(L, list);
        for (lua_Integer i = 1; i <= ln && rc == 0; i++) {
            if (blob) {
                keyseg g;
                memcpy(&g, blob + (size_t)(i - 1) * sizeof g, sizeof g);
                lua_rawgeti(L, list, i);
                if (lua_rawget(L, idx) != LUA_TNIL)
                    rc = conv_member_listed(e, blob + g.raw, g.rawlen, blob + g.esc, g.esclen,
                                            list + 1, &n);
            } else if (lua_rawgeti(L, list, i) == LUA_TSTRING) {
                /* The key string stays alive in the list; its value replaces it. */
                size_t kl;
                const char *ks = lua_tolstring(L, list + 1, &kl);
                if (lua_rawget(L, idx) != LUA_TNIL)
                    rc = conv_member(e, ks, kl, list + 1, obj, &n);
            }
            lua_settop(L, list);
        }
        if (rc != 0 && lazy && count > n && has_nonstring_key(L, idx))
            rc = enc_fail(e, NONSTR_KEYS);
    }
    if (rc == 0 && count > n) {
        size_t want = (size_t)(count - n), nx = 0;
        keyref local[ENC_KEYS_INLINE];
        keyref *ex = local;
        if (want > ENC_KEYS_INLINE)
            ex = lua_newuserdatauv(L, want * sizeof(keyref), 0);
        int exslot = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            if (lazy && lua_type(L, -1) != LUA_TSTRING) {
                lua_settop(L, top);
                return enc_fail(e, NONSTR_KEYS);
            }
            if (list) {
                lua_pushvalue(L, -1);
                int known = lua_rawget(L, list) != LUA_TNIL;
                lua_pop(L, 1);
                if (known)
                    continue;
            }
            if (nx < want) {
                /* The key string stays alive as a key of the table. */
                ex[nx].k = lua_tolstring(L, -1, &ex[nx].len);
                nx++;
            }
        }
        qsort(ex, nx, sizeof *ex, keyref_cmp);
        for (size_t i = 0; i < nx && rc == 0; i++) {
            /* ex[i].k stays alive as a key of the table. */
            lua_pushlstring(L, ex[i].k, ex[i].len);
            lua_rawget(L, idx);
            rc = conv_member(e, ex[i].k, ex[i].len, exslot + 1, obj, &n);
            lua_settop(L, exslot);
        }
    }
    lua_settop(L, top);
    return rc;
}

static int conv_table(enc *e, int idx, json_value *parent, const char *k, size_t klen)
{
    lua_State *L = e->L;
    if (e->w && e->max && e->w->len > e->max)
        return enc_fail(e, CLJSON_TOO_LARGE);
    /* Each level holds at most 4 slots (+2 briefly): room for 8 levels at once. */
    if ((e->depth & 7) == 0)
        luaL_checkstack(L, 64, "cljson");
    int kind = 0; /* 0 plain, 1 array, 2 object, 3 number */
    if (lua_getmetatable(L, idx)) {
        const void *mt = lua_topointer(L, -1);
        if (mt == e->pamt)
            kind = 1;
        else if (mt == e->pomt)
            kind = 2;
        else if (mt == e->pnmt)
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
    if (e->depth + 1 >= e->cap)
        enc_grow(e);
    lua_Integer count = 0;
    int allstr = 1;
    if (kind == 0) {
        lua_Integer maxk = 0;
        int allint = 1;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            count++;
            int kt = lua_type(L, -1);
            if (kt != LUA_TSTRING)
                allstr = 0;
            if (kt == LUA_TNUMBER && lua_isinteger(L, -1)) {
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
    } else {
        count = -1; /* keys not counted yet */
    }
    e->seen[e->depth] = self;
    if (kind == 1) {
        json_value *arr = NULL;
        if (e->w)
            wputc(e->w, '[');
        else
            attach(e, parent, k, klen, arr = json_new_array());
        int top = lua_gettop(L);
        for (lua_Integer i = 1; i <= count; i++) {
            if (e->w && i > 1)
                wputc(e->w, ',');
            lua_rawgeti(L, idx, i);
            e->path[e->depth] = (path_elem){NULL, 0, i};
            e->depth++;
            int rc = conv(e, top + 1, arr, NULL, 0);
            e->depth--;
            lua_settop(L, top);
            if (rc < 0)
                return -1;
        }
        if (e->w)
            wputc(e->w, ']');
        return 0;
    }
    json_value *obj = NULL;
    if (e->w)
        wputc(e->w, '{');
    else
        attach(e, parent, k, klen, obj = json_new_object());
    int rc = conv_object(e, idx, obj, count, allstr);
    if (rc == 0 && e->w)
        wputc(e->w, '}');
    return rc;
}

/* idx is an absolute stack index. */
static int conv(enc *e, int idx, json_value *parent, const char *k, size_t klen)
{
    lua_State *L = e->L;
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
        if (e->w) {
            if (e->max && e->w->len + len > e->max)
                return enc_fail(e, CLJSON_TOO_LARGE);
            if (put_str(e->w, s, len) < 0)
                return enc_fail(e, "invalid UTF-8 in string");
            return 0;
        }
        if (!json_utf8_valid(s, len))
            return enc_fail(e, "invalid UTF-8 in string");
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
static int convert(lua_State *L, int idx, cbox *box, buf *w, size_t max, int canonical, char *err,
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
    lua_pushnil(L); /* slot for enc_grow's userdata */
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LISTS);
    /* On the C stack: nothing to free if a memory error unwinds. */
    enc st, *e = &st;
    e->L = L;
    e->amt = base + 1;
    e->omt = base + 2;
    e->nmt = base + 3;
    e->ord = base + 4;
    e->pamt = lua_topointer(L, e->amt);
    e->pomt = lua_topointer(L, e->omt);
    e->pnmt = lua_topointer(L, e->nmt);
    e->grown = base + 5;
    e->lists = base + 6;
    e->canonical = canonical;
    e->depth = 0;
    e->seen = e->seen_in;
    e->path = e->path_in;
    e->cap = ENC_INLINE;
    e->box = box;
    e->w = w;
    e->max = max ? w->len + max : 0;
    e->err = err;
    e->errlen = errlen;
    int rc = conv(e, idx, NULL, NULL, 0);
    if (w && w->data)
        w->data[w->len] = '\0';
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
    size_t max; /* write mode: most bytes appended (0 = no limit) */
} pcall_args;

static int p_convert(lua_State *L)
{
    pcall_args *a = lua_touserdata(L, 1);
    cbox *box = box_new(L);
    a->rc = convert(L, 2, box, a->write ? a->out : NULL, a->max, a->canonical, a->err, a->errlen);
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
    pcall_args a = {idx, 0, 0, NULL, NULL, err, errlen, -1, 0};
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
    pcall_args a = {idx, canonical, 0, NULL, NULL, err, errlen, -1, 0};
    if (run_protected(L, &a) < 0)
        return -1;
    json_write(out, a.result, canonical);
    json_free(a.result);
    return 0;
}

int cljson_encode(lua_State *L, int idx, buf *out, int canonical, char *err, size_t errlen)
{
    return cljson_encode_max(L, idx, out, canonical, 0, err, errlen);
}

int cljson_encode_max(lua_State *L, int idx, buf *out, int canonical, size_t max, char *err,
                      size_t errlen)
{
    pcall_args a = {idx, canonical, 1, out, NULL, err, errlen, -1, max};
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

/* The former decoder (json_parse, then cljson_push of the tree): pushes the value
 * (returns 1) or nil, "msg at byte N" (returns 2). */
static int decode_tree(lua_State *L, const char *s, size_t len, const json_limits *lim)
{
    char err[160];
    cbox *box = box_new(L);
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
 * were the two ever to disagree, the value). */
static int do_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    json_limits lim;
    read_limits(L, 2, &lim);
    if (decode_direct(L, s, len, &lim) == 0)
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
    if (convert(L, 1, box, &box->out, 0, canonical, err, sizeof err) < 0)
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
        lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
        buf *ob = &box_new(L)->out;                  /* slot 3; freed by the GC even if we raise */
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
    lua_settop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ORDER);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_LISTS);
    if (ordered_keys(L, 1, 2, 3, 0) < 0)
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
