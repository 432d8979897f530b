/* json_lua_decode: JSON into Lua values for module "cljson" (json_lua.h): a parsed
 * tree (cljson_push) and JSON text straight into Lua values (the decoder). */
#include "json_lua_impl.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ C -> Lua */

typedef struct {
    int amt, omt, nmt, ord, shapes; /* absolute stack indices */
} push_ctx;

static inline uint64_t text_hash(const void *k, size_t len);

void cljson_push_number_box(lua_State *L, const char *s, size_t len, int nmt)
{
    lua_createtable(L, 0, 1);
    lua_pushlstring(L, s, len);
    lua_setfield(L, -2, "text");
    lua_pushvalue(L, nmt);
    lua_setmetatable(L, -2);
}

/* Objects of at most this many members find a duplicate key by comparing the tree's
 * keys in C (no Lua lookup per key); a bigger one asks its table. */
#define PUSH_DUP_SCAN 16

/* Objects pushed with the same keys in the same order (a tool's arguments, call
 * after call) reuse one entry of the push's shape cache: {order string, key 1, ...,
 * key n}, the Lua strings themselves, so such an object makes no key string and no
 * order string of its own. Each state keeps one cache (registry, by this address)
 * of PUSH_SHAPES slots, found by a hash of the order; an entry is compared in full
 * before it is used. */
#define PUSH_SHAPES 64
static const char push_shape_key;

/* The slot of an order string in a shape cache of 64 slots (the push's and the
 * decoder's): 1..64. */
static unsigned shape_slot(const void *order, size_t len)
{
    return (unsigned)(text_hash(order, len) >> 58) + 1;
}

/* Fills t (stack top) with the n <= PUSH_DUP_SCAN members of object v whose
 * order string (each key once) fits in order[size]; returns 0, nothing pushed or
 * stored, when a key repeats (the general path keeps its first position) or the
 * order does not fit. */
static int push_shaped(lua_State *L, const json_value *v, size_t n, int t, const push_ctx *c,
                       unsigned char *order, size_t size, const char **ks, size_t *kls);

/* A container checks the stack room for itself and its members (a scalar member or
 * a number box needs at most 4 slots above the container's table); cljson_push
 * makes room for the root. */
static void push_value(lua_State *L, const json_value *v, const push_ctx *c)
{
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
        cljson_push_number_box(L, s, len, c->nmt);
        break;
    case JSON_STRING:
        s = json_get_str(v, &len);
        lua_pushlstring(L, s, len);
        break;
    case JSON_ARRAY: {
        luaL_checkstack(L, 6, "cljson: nesting too deep");
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
        luaL_checkstack(L, 8, "cljson: nesting too deep");
        size_t n = json_count(v);
        int hint = n > INT32_MAX ? INT32_MAX : (int)n;
        lua_createtable(L, 0, hint);
        int t = lua_gettop(L);
        /* The order string: on the C stack while it is short, then in a GC'd box
         * (slot t + 1: nothing leaks if Lua raises). */
        unsigned char small[192];
        const char *ks[PUSH_DUP_SCAN]; /* the keys so far, while n <= PUSH_DUP_SCAN */
        size_t kls[PUSH_DUP_SCAN];
        if (n > 0 &&
            !(n <= PUSH_DUP_SCAN && push_shaped(L, v, n, t, c, small, sizeof small, ks, kls))) {
            size_t slen = 0;
            buf *ob = NULL;
            for (size_t i = 0; i < n; i++) {
                size_t klen;
                const char *k = json_key_at(v, i, &klen);
                /* A duplicate key keeps its first position and takes the last value
                 * (decoded values are never nil). */
                int fresh = 1;
                if (n <= PUSH_DUP_SCAN) {
                    for (size_t j = 0; j < i && fresh; j++)
                        fresh = kls[j] != klen || memcmp(ks[j], k, klen) != 0;
                    ks[i] = k;
                    kls[i] = klen;
                    lua_pushlstring(L, k, klen);
                } else {
                    lua_pushlstring(L, k, klen);
                    lua_pushvalue(L, -1);
                    fresh = lua_rawget(L, t) == LUA_TNIL;
                    lua_pop(L, 1);
                }
                if (fresh && !ob && slen + klen + 10 <= sizeof small) {
                    slen += order_len(small + slen, klen);
                    memcpy(small + slen, k, klen);
                    slen += klen;
                } else if (fresh) {
                    if (!ob) {
                        ob = &cljson_box_new(L)->out;
                        lua_insert(L, -2); /* below the key */
                        buf_append(ob, small, slen);
                    }
                    order_put(ob, k, klen);
                }
                push_value(L, json_val_at(v, i), c);
                lua_rawset(L, t);
            }
            lua_pushvalue(L, t);
            if (ob)
                lua_pushlstring(L, ob->data, ob->len);
            else
                lua_pushlstring(L, (const char *)small, slen);
            lua_rawset(L, c->ord);
            lua_settop(L, t);
        }
        lua_pushvalue(L, c->omt);
        lua_setmetatable(L, t);
        break;
    }
    }
}

/* (ks, kls: room for the keys; the caller's, so that a deep nesting of objects
 * takes no more C stack than before.) */
__attribute__((noinline)) static int push_shaped(lua_State *L, const json_value *v, size_t n, int t,
                                                 const push_ctx *c, unsigned char *order,
                                                 size_t size, const char **ks, size_t *kls)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        ks[i] = json_key_at(v, i, &kls[i]);
        for (size_t j = 0; j < i; j++)
            if (kls[j] == kls[i] && memcmp(ks[j], ks[i], kls[i]) == 0)
                return 0;
        if (len + kls[i] + 10 > size)
            return 0;
        len += order_len(order + len, kls[i]);
        memcpy(order + len, ks[i], kls[i]);
        len += kls[i];
    }
    /* An entry with this order string has these n keys (only this function makes
     * entries). */
    unsigned slot = shape_slot(order, len);
    size_t sl;
    const char *ss;
    if (lua_rawgeti(L, c->shapes, slot) != LUA_TTABLE || lua_rawgeti(L, t + 1, 1) != LUA_TSTRING ||
        (ss = lua_tolstring(L, t + 2, &sl), sl != len || memcmp(ss, order, len) != 0)) {
        lua_settop(L, t);
        lua_createtable(L, (int)n + 1, 0); /* t + 1: the new entry */
        lua_pushlstring(L, (const char *)order, len);
        lua_pushvalue(L, -1);
        lua_rawseti(L, t + 1, 1);
        for (size_t i = 0; i < n; i++) {
            lua_pushlstring(L, ks[i], kls[i]);
            lua_rawseti(L, t + 1, (lua_Integer)i + 2);
        }
        lua_pushvalue(L, t + 1);
        lua_rawseti(L, c->shapes, slot);
    }
    /* stack: t, its entry, the order string */
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, t + 1, (lua_Integer)i + 2);
        push_value(L, json_val_at(v, i), c);
        lua_rawset(L, t);
    }
    lua_pushvalue(L, t);
    lua_pushvalue(L, t + 2);
    lua_rawset(L, c->ord);
    lua_settop(L, t);
    return 1;
}

void cljson_push(lua_State *L, const json_value *v)
{
    int base = cljson_push_tables(L, 8);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &push_shape_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_createtable(L, PUSH_SHAPES, 0);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &push_shape_key);
    }
    push_ctx c = {base + 1, base + 2, base + 3, base + 4, base + 5};
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

/* The raw scan (below): a row of more members is not checked for duplicates. */
#define RAW_MAX_KEYS 64

/* A key of an object being scanned (its text, after its opening quote). */
typedef struct {
    const unsigned char *k;
    size_t len;
    uint64_t hash;
} rawkey_ref;

typedef struct {
    lua_State *L;
    const unsigned char *p, *end;
    size_t max_depth;
    int amt, omt, nmt, ord;    /* absolute stack indices */
    int shapes;                /* shape cache: slot (a hash of the order) -> order string */
    int boxslot;               /* stack slots of two cboxes (nil until needed): */
    cbox *box[2];              /* [0] unescaped string bytes, [1] the keys of open objects */
    buf *keys;                 /* box[1]'s buffer: each open object's keys, in order */
    int lastn[64];             /* members of the last object at each depth (mod 64) */
    const cljson_raw_opts *ro; /* raw option (NULL: none) */
    int rawmt;                 /* stack slot of cljson.raw_mt */
    int canon;                 /* raw scan: the text so far is what the encoder writes */
    int ncut;                  /* its members to drop: key start, value end */
    const unsigned char *cut[CLJSON_DROP_MAX][2];
    uint64_t drophash[CLJSON_DROP_MAX]; /* key_hash of each ro->drop name */
    int nprev;                          /* the keys of the last canonical row (no duplicates) */
    uint64_t prevcut;                   /* a bit per key of it: a dropped member */
    rawkey_ref prev[RAW_MAX_KEYS];
} dec;

/* Each state keeps the scratch cboxes of its last decode (in its shape cache,
 * below, after the shapes: one registry look-up for both) for the next: a decode
 * then makes no userdata with a finalizer and its buffers keep their memory. A
 * decode takes them out while it runs (a nested one, or one that raised, makes
 * its own; the GC frees those). */
#define DEC_SHAPES 64
_Static_assert(DEC_SHAPES == 64 && PUSH_SHAPES == 64, "shape_slot gives 1..64");
#define DEC_SPARE(i) (DEC_SHAPES + 1 + (i)) /* the shape cache's slot of spare box i */
#define DEC_SPARE_MAX 65536                 /* a bigger scratch buffer is freed, not kept */

/* The decode's scratch buffer i, in a cbox taken or made at the first need. */
static buf *dec_buf(dec *d, int i)
{
    if (!d->box[i]) {
        lua_State *L = d->L;
        if (lua_rawgeti(L, d->shapes, DEC_SPARE(i)) == LUA_TUSERDATA) {
            d->box[i] = lua_touserdata(L, -1);
            lua_pushnil(L);
            lua_rawseti(L, d->shapes, DEC_SPARE(i));
        } else {
            lua_pop(L, 1);
            d->box[i] = cljson_box_new(L);
        }
        lua_replace(L, d->boxslot + i);
    }
    return &d->box[i]->out;
}

/* Hands the decode's scratch cboxes back to the state (the Lua stack is unchanged). */
static void dec_spare_put(dec *d)
{
    for (int i = 0; i < 2; i++) {
        cbox *b = d->box[i];
        if (!b)
            continue;
        if (b->out.cap > DEC_SPARE_MAX)
            buf_free(&b->out);
        else
            buf_reset(&b->out);
        lua_pushvalue(d->L, d->boxslot + i);
        lua_rawseti(d->L, d->shapes, DEC_SPARE(i));
    }
}

static inline const unsigned char *dec_ws(const unsigned char *p, const unsigned char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* Strings are scanned 16 bytes at a time with SSE2 (json_special16 with the high
 * bytes flagged: a byte of 0x80 and above starts a UTF-8 sequence to check). */
#define DEC_SSE2 (JSON_TEXT_SSE2 && JSON_TEXT_WORDS)

/* Skips bytes that need no work in a string (printable ASCII but '"' and '\\'). */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end)
{
#if DEC_SSE2
    while (end - p >= 16) {
        unsigned m = json_special16(p, 1);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if JSON_TEXT_WORDS
        uint64_t m = json_special_mask_hi(w);
        if (m)
            return p + json_first_flagged(m);
#else
        if (word_special(w))
            break;
#endif
        p += 8;
    }
    while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
        p++;
    return p;
}

/* A cheap hash of a text: its first and last 8 bytes and its length. */
static inline uint64_t text_hash(const void *k, size_t len)
{
    uint64_t a = 0, b = 0;
    memcpy(&a, k, len < 8 ? len : 8);
    if (len > 8)
        memcpy(&b, (const char *)k + len - 8, 8);
    return (a ^ (b * 0x9E3779B97F4A7C15ULL) ^ len) * 0xFF51AFD7ED558CCDULL;
}

#if DEC_SSE2
/* How many of the 16 bytes at p, from the first, are whole 3-byte characters led
 * by E1..EF but ED (json_utf8_seq_fast's common case: their continuation bytes
 * need no range check), checked together: 0, 3, ... 15. */
static inline unsigned cjk_prefix(const unsigned char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i cont =
        _mm_cmpeq_epi8(_mm_and_si128(v, _mm_set1_epi8((char)0xC0)), _mm_set1_epi8((char)0x80));
    __m128i off = _mm_sub_epi8(v, _mm_set1_epi8((char)0xE1));
    __m128i lead = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xED)),
                                    _mm_cmpeq_epi8(_mm_min_epu8(off, _mm_set1_epi8(0x0E)), off));
    /* leads expected at 0, 3, 6, 9, 12; continuation bytes between them */
    unsigned ok =
        ((unsigned)_mm_movemask_epi8(lead) & 0x1249) | ((unsigned)_mm_movemask_epi8(cont) & 0x6DB6);
    unsigned good = (unsigned)__builtin_ctz(~ok); /* the valid positions from 0 */
    return good / 3 * 3;
}
#endif

/* Skips a run of multi-byte characters at p (*p >= 0x80; CJK text) without going
 * back to the ASCII scan between them; returns its end, or NULL if it is not
 * valid UTF-8. */
static inline const unsigned char *utf8_run(const unsigned char *p, const unsigned char *end)
{
    do {
#if DEC_SSE2
        if (end - p >= 16) {
            unsigned k = cjk_prefix(p);
            if (k) {
                p += k;
                continue;
            }
        }
#endif
        int n = json_utf8_seq_fast(p, end);
        if (n <= 0)
            return NULL;
        p += n;
    } while (p < end && *p >= 0x80);
    return p;
}

/* The next '"' or backslash of a string from p; NULL at its end or at a byte a
 * string cannot hold (a control character, invalid UTF-8). */
static inline __attribute__((always_inline)) const unsigned char *str_next(const unsigned char *p,
                                                                           const unsigned char *end)
{
    for (;;) {
        p = plain_run(p, end);
        if (p >= end || *p < 0x20)
            return NULL;
        if (*p < 0x80)
            return p;
        if (!(p = utf8_run(p, end)))
            return NULL;
        if (p < end && *p == '"') /* the end of a string of multi-byte characters */
            return p;
    }
}

/* Reads the escape at p (on a backslash): its code point in *cp (a surrogate
 * pair combined); returns its end, or NULL if it is not a valid escape. */
static const unsigned char *read_escape(const unsigned char *p, const unsigned char *end,
                                        unsigned *cp)
{
    if (end - p < 2)
        return NULL;
    unsigned char e = p[1];
    p += 2;
    switch (e) {
    case '"':
    case '\\':
    case '/':
        *cp = e;
        return p;
    case 'b':
        *cp = '\b';
        return p;
    case 'f':
        *cp = '\f';
        return p;
    case 'n':
        *cp = '\n';
        return p;
    case 'r':
        *cp = '\r';
        return p;
    case 't':
        *cp = '\t';
        return p;
    case 'u':
        if (end - p < 4 || json_hex4(p, cp) < 0)
            return NULL;
        p += 4;
        if (*cp >= 0xDC00 && *cp <= 0xDFFF)
            return NULL;
        if (*cp >= 0xD800 && *cp <= 0xDBFF) {
            unsigned lo;
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || json_hex4(p + 2, &lo) < 0 ||
                lo < 0xDC00 || lo > 0xDFFF)
                return NULL;
            p += 6;
            *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        return p;
    default:
        return NULL;
    }
}

/* Pushes the string at d->p (on '"') and moves past it; a key (key != 0) is
 * also appended to d->keys (order_put). */
static int dec_string(dec *d, int key)
{
    const unsigned char *p = d->p + 1, *end = d->end, *run = p;
    int escaped = 0;
    for (;;) {
        if (!(p = str_next(p, end)))
            return -1;
        if (*p == '"')
            break;
        /* backslash */
        if (!escaped) {
            escaped = 1;
            buf_reset(dec_buf(d, 0));
        }
        buf_append(&d->box[0]->out, run, (size_t)(p - run));
        unsigned cp;
        if (!(p = read_escape(p, end, &cp)))
            return -1;
        json_put_utf8(&d->box[0]->out, cp);
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
    cljson_push_number_box(d->L, tok, len, d->nmt);
}

/* What a number token is, as json.c's number_value sees it. */
typedef struct {
    const unsigned char *digits; /* first integer digit */
    int neg, is_int;
    int64_t nint; /* integer digits */
    int64_t ndig; /* significant digits (0: the value is zero) */
    int64_t mag;  /* decimal magnitude of the first significant digit */
} num_tok;

/* Scans the number token at s (strict JSON grammar); returns its end, or NULL. */
static const unsigned char *num_scan(const unsigned char *s, const unsigned char *end, num_tok *t)
{
    const unsigned char *p = s;
    t->neg = 0;
    if (*p == '-') {
        t->neg = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9')
        return NULL;
    t->digits = p;
    /* Significant digits: position of the first and last non-zero digit. */
    int64_t k = 0, first = -1, last = -1;
    if (*p == '0') {
        p++;
        k = 1;
        if (p < end && *p >= '0' && *p <= '9')
            return NULL;
    } else {
        for (; p < end && *p >= '0' && *p <= '9'; p++, k++)
            if (*p != '0') {
                if (first < 0)
                    first = k;
                last = k;
            }
    }
    t->nint = k;
    t->is_int = 1;
    if (p < end && *p == '.') {
        t->is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9')
            return NULL;
        for (; p < end && *p >= '0' && *p <= '9'; p++, k++)
            if (*p != '0') {
                if (first < 0)
                    first = k;
                last = k;
            }
    }
    int64_t ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        t->is_int = 0;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9')
            return NULL;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (ex < 1000000000000LL)
                ex = ex * 10 + (*p - '0');
        if (eneg)
            ex = -ex;
    }
    t->ndig = first < 0 ? 0 : last - first + 1;
    t->mag = first < 0 ? 0 : ex + t->nint - first;
    return p;
}

/* An integer token that fits int64: its value in *out (returns 1), else 0. */
static int num_int64(const num_tok *t, int64_t *out)
{
    if (t->nint > 19)
        return 0;
    uint64_t u = 0;
    for (int64_t i = 0; i < t->nint; i++)
        u = u * 10 + (uint64_t)(t->digits[i] - '0');
    uint64_t lim = t->neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (u > lim)
        return 0;
    *out = t->neg ? (u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u) : (int64_t)u;
    return 1;
}

/* json.c's number_value: zero, or <= 15 significant digits within 10^-300..10^300,
 * is always the double strtod gives (the quick case; returns 1 with *x). */
static int num_quick(const num_tok *t, const unsigned char *s, size_t len, double *x)
{
    char tmp[64];
    if (!(t->ndig == 0 || (t->ndig <= 15 && t->mag > -300 && t->mag < 300)) || len >= sizeof tmp)
        return 0;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    *x = strtod(tmp, NULL);
    return 1;
}

static int dec_number(dec *d)
{
    const unsigned char *s = d->p;
    num_tok t;
    const unsigned char *p = num_scan(s, d->end, &t);
    if (!p)
        return -1;
    d->p = p;
    size_t len = (size_t)(p - s);
    if (t.is_int) {
        int64_t i;
        if (num_int64(&t, &i))
            lua_pushinteger(d->L, (lua_Integer)i);
        else
            cljson_push_number_box(d->L, (const char *)s, len, d->nmt);
        return 0;
    }
    double x;
    if (num_quick(&t, s, len, &x)) {
        lua_pushnumber(d->L, (lua_Number)x);
        return 0;
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

/* ------------------------------------------------ raw values (scan only) */

/* A raw value is a slice of the decoded text kept as is. The scanner below
 * accepts exactly what dec_value accepts (same grammar, UTF-8, escape and depth
 * rules) without making Lua values, and clears d->canon when the slice is not
 * byte for byte what the encoder writes for the decoded value: whitespace, an
 * escape the writer would not use, a number the writer would spell differently,
 * a duplicate key, or an object of more than RAW_MAX_KEYS members (not checked
 * for duplicates). Such an element is decoded into tables as usual, so a raw
 * value always encodes to the same bytes as its tables would.
 * Each step returns the position after what it read, or NULL if the text is
 * rejected. The usual case is tried first at each step: canonical text has no
 * whitespace, so the next byte is the expected one; anything else takes the
 * general path (whitespace skipped, and the text is then not canonical).
 * The text is a Lua string, so a '\0' follows it: a byte no step accepts, which
 * ends every step at the text's end without a bounds check (a NUL inside the
 * text is rejected in the same way; strings, whose word loads need the bound,
 * and the end of a number still check it). */

static const unsigned char *rs_value(dec *d, const unsigned char *p, size_t depth);

/* Whether r is the key k of kl bytes and hash h (rs_key's). Below 8 bytes equal
 * hashes and lengths settle it: the hash is then a bijection of the bytes. */
static inline int key_same(const rawkey_ref *r, const unsigned char *k, size_t kl, uint64_t h)
{
    if (r->hash != h || r->len != kl)
        return 0;
    if (kl < 8)
        return 1;
    if (kl > 16)
        return memcmp(r->k, k, kl) == 0;
    uint64_t a, b, x, y; /* the first and the last 8 bytes cover them all */
    memcpy(&a, r->k, 8);
    memcpy(&b, k, 8);
    memcpy(&x, r->k + kl - 8, 8);
    memcpy(&y, k + kl - 8, 8);
    return a == b && x == y;
}

/* Whether the len bytes at p (a key with its quotes and the colon after it) are
 * the len bytes at prev, which is before p in the text (so its loads stay in the
 * text wherever p's do). */
static inline int key_again(const unsigned char *p, const unsigned char *prev, size_t len,
                            const unsigned char *end)
{
    if ((size_t)(end - p) < (len < 16 ? 16 : len))
        return 0;
#if DEC_SSE2
    if (len <= 32) {
        size_t o = len <= 16 ? 0 : len - 16; /* two loads cover 17..32 bytes */
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)prev);
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + o));
        __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(prev + o));
        unsigned eq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(a, b)) &
                      (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, y));
        unsigned need = len >= 16 ? 0xFFFFu : (1u << len) - 1;
        return (eq & need) == need;
    }
#endif
    return memcmp(p, prev, len) == 0;
}

/* Whitespace at p: skipped, and the text is then not canonical. */
static const unsigned char *rs_ws(dec *d, const unsigned char *p)
{
    const unsigned char *q = dec_ws(p, d->end);
    if (q != p)
        d->canon = 0;
    return q;
}

/* The escape at p (a backslash in a string): its end, or NULL if it is not a
 * valid escape; clears d->canon if the writer would not write it so (it escapes
 * only '"', '\\' and control characters). */
static __attribute__((noinline)) const unsigned char *rs_escape(dec *d, const unsigned char *p)
{
    const unsigned char *esc = p;
    unsigned cp;
    if (!(p = read_escape(p, d->end, &cp)))
        return NULL;
    if (d->canon) {
        char w[8];
        size_t wl = 0;
        if (cp < 0x20 || cp == '"' || cp == '\\')
            wl = (size_t)(json_escape_byte(w, cp) - w);
        if (wl != (size_t)(p - esc) || memcmp(w, esc, wl) != 0)
            d->canon = 0;
    }
    return p;
}

/* The rest of a string from p (after its opening quote): the position of its
 * closing quote. */
static inline __attribute__((always_inline)) const unsigned char *rs_string(dec *d,
                                                                            const unsigned char *p)
{
    for (;;) {
        if (!(p = str_next(p, d->end)))
            return NULL;
        if (*p == '"')
            return p;
        if (!(p = rs_escape(d, p)))
            return NULL;
    }
}

/* The hash rs_key gives a key's text s..s+len: text_hash, but for 8 bytes, whose
 * last 8 count too. */
static inline uint64_t key_hash(const void *s, size_t len)
{
    if (len < 8)
        return text_hash(s, len);
    uint64_t a, b;
    memcpy(&a, s, 8);
    memcpy(&b, (const char *)s + len - 8, 8);
    return (a ^ (b * 0x9E3779B97F4A7C15ULL) ^ len) * 0xFF51AFD7ED558CCDULL;
}

/* The key at p (on its opening quote): the position of its closing quote, and
 * in *h its key_hash. A key of fewer than 16 plain bytes (8 without SSE2) is read
 * and hashed from one check of its first bytes. */
static inline __attribute__((always_inline)) const unsigned char *
rs_key(dec *d, const unsigned char *p, uint64_t *h)
{
    const unsigned char *s = p + 1, *q = s;
#if DEC_SSE2
    if (d->end - s >= 16) {
        unsigned m = json_special16(s, 1);
        unsigned i = m ? (unsigned)__builtin_ctz(m) : 16;
        if (i < 16 && s[i] == '"') {
            uint64_t a, b;
            memcpy(&a, s, 8);
            if (i < 8) {
                a &= ~(~0ULL << (i * 8));
                *h = (a ^ i) * 0xFF51AFD7ED558CCDULL; /* text_hash of i < 8 bytes */
            } else {
                memcpy(&b, s + i - 8, 8);
                *h = (a ^ (b * 0x9E3779B97F4A7C15ULL) ^ i) * 0xFF51AFD7ED558CCDULL;
            }
            return s + i;
        }
        q = s + i; /* i plain bytes */
    }
#elif JSON_TEXT_WORDS
    if (d->end - s >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        uint64_t m = json_special_mask_hi(w);
        if (m) {
            unsigned i = json_first_flagged(m);
            if (s[i] == '"') {
                w &= ~(~0ULL << (i * 8));
                *h = (w ^ i) * 0xFF51AFD7ED558CCDULL; /* text_hash of i < 8 bytes */
                return s + i;
            }
        } else {
            q = s + 8; /* eight plain bytes */
        }
    }
#endif
    if (!(q = rs_string(d, q)))
        return NULL;
    *h = key_hash(s, (size_t)(q - s));
    return q;
}

/* A run of decimal digits from p: its end. */
static inline const unsigned char *digit_run(const unsigned char *p, const unsigned char *end)
{
#if JSON_TEXT_WORDS
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        /* Bit 7 of a byte set if it is not '0'..'9' (exact for the first such byte:
         * the digits before it carry and borrow nothing). */
        uint64_t m =
            ((w + 0x4646464646464646ULL) | (w - 0x3030303030303030ULL)) & 0x8080808080808080ULL;
        if (m)
            return p + json_first_flagged(m);
        p += 8;
    }
#endif
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p;
}

/* Whether the number token s..s+len is what the writer writes for its value. */
static int num_canonical(dec *d, const num_tok *t, const unsigned char *s, size_t len)
{
    if (t->is_int) /* int64 as its digits ("-0" is 0), beyond it the text */
        return !(t->neg && t->ndig == 0);
    double x;
    if (!num_quick(t, s, len, &x)) {
        char err[8];
        json_value *v = json_parse((const char *)s, len, NULL, err, sizeof err);
        int dbl = v && json_typeof(v) == JSON_DOUBLE;
        if (dbl)
            x = json_get_double(v);
        json_free(v);
        if (!dbl)
            return 1; /* kept as text */
    }
    buf *b = dec_buf(d, 0);
    buf_reset(b);
    json_write_double(b, x);
    return b->len == len && memcmp(b->data, s, len) == 0;
}

/* A number token s..p with a fraction or exponent (p on '.', 'e' or 'E'): num_scan
 * reads it again and num_canonical settles it. */
static __attribute__((noinline)) const unsigned char *rs_number_frac(dec *d, const unsigned char *s)
{
    num_tok t;
    const unsigned char *p = num_scan(s, d->end, &t);
    if (!p)
        return NULL;
    if (d->canon && !num_canonical(d, &t, s, (size_t)(p - s)))
        d->canon = 0;
    return p;
}

/* The number token at p. An integer is canonical unless it is "-0". */
static inline __attribute__((always_inline)) const unsigned char *rs_number(dec *d,
                                                                            const unsigned char *p)
{
    const unsigned char *s = p, *end = d->end;
    int neg = *p == '-', zero = 0;
    p += neg;
    if (*p == '0') {
        zero = 1;
        if (*++p >= '0' && *p <= '9')
            return NULL;
    } else if (*p >= '1' && *p <= '9') {
        p = digit_run(p + 1, end);
    } else {
        return NULL;
    }
    if (*p == '.' || (*p | 0x20) == 'e')
        return rs_number_frac(d, s);
    if (neg && zero)
        d->canon = 0;
    return p;
}

/* What rs_object keeps while it reads one object's members. */
typedef struct {
    buf *kb;          /* d->keys: this object's key references from kb->data + start */
    size_t start;     /* (a 16-byte boundary: the buffer is malloc'd, so they are aligned) */
    uint64_t seen[4]; /* a bit per key hash (from its top 8 bits) */
    uint64_t cutbits; /* a bit per key: a dropped member (a row's prevcut) */
    int n;            /* the keys read so far */
} rs_members;

/* Whether the key p+1..p+1+kl (hash h) of a row is one of the dropped names (it
 * needs no escaping, so its text is its bytes; below 8 bytes equal hashes and
 * lengths settle it, as in key_same). droplens: a bit per dropped name's length. */
static inline int rs_dropped(const dec *d, uint64_t droplens, const unsigned char *p, size_t kl,
                             uint64_t h)
{
    int cut = 0;
    if ((droplens >> (kl & 63) & 1) && d->canon) {
        for (int i = 0; i < d->ro->ndrop && !cut; i++)
            cut = d->drophash[i] == h && kl == d->ro->droplen[i] &&
                  (kl < 8 || memcmp(p + 1, d->ro->drop[i], kl) == 0);
    }
    return cut;
}

/* The colon after a key (q on the key's closing quote): its position, or NULL. */
static inline __attribute__((always_inline)) const unsigned char *rs_colon(dec *d,
                                                                           const unsigned char *q)
{
    if (*++q != ':') {
        q = rs_ws(d, q);
        if (*q != ':')
            return NULL;
    }
    return q;
}

/* The value of member `member` (on its key's opening quote), q on its colon; a
 * dropped member (cut) is noted in d->cut. Returns the ',' or '}' after the value,
 * or NULL. */
static inline __attribute__((always_inline)) const unsigned char *
rs_member_value(dec *d, rs_members *o, const unsigned char *member, const unsigned char *q,
                size_t depth, int cut)
{
    if (*++q == '"') {
        if (!(q = rs_string(d, q + 1)))
            return NULL;
        q++;
    } else if (*q >= '0' && *q <= '9') {
        if (!(q = rs_number(d, q)))
            return NULL;
    } else if ((*q == '{' && q[1] == '}') || (*q == '[' && q[1] == ']')) {
        /* empty: no call (q[1] is at most the text's end mark) */
        if (depth + 1 > d->max_depth)
            return NULL;
        q += 2;
    } else {
        o->kb->len = o->start + (size_t)o->n * sizeof(rawkey_ref); /* a nested object's go after */
        if (!(q = rs_value(d, q, depth)))
            return NULL;
    }
    if (cut && d->ncut < CLJSON_DROP_MAX) {
        d->cut[d->ncut][0] = member;
        d->cut[d->ncut][1] = q;
        d->ncut++;
    }
    if (*q != ',' && *q != '}')
        q = rs_ws(d, q);
    return *q == ',' || *q == '}' ? q : NULL;
}

/* The next member after the comma at q: its first byte (an opening quote, or the
 * object is rejected). */
static inline const unsigned char *rs_next_member(dec *d, const unsigned char *q)
{
    const unsigned char *p = q + 1;
    return *p == '"' ? p : rs_ws(d, p);
}

/* The same-shape path: a row's members from p (a member's first byte) while their
 * keys are the last canonical row's, in order, so they have no duplicates. The
 * usual key is those bytes again with its quotes and colon (no scan, hash or
 * duplicate check). Returns the object's closing '}' when every member's key was
 * the last row's at its place; sets *diverged to the first member whose key is not
 * (the general path reads the object from there) and returns NULL; NULL alone: the
 * object is rejected. */
static const unsigned char *rs_same_shape(dec *d, rs_members *o, const unsigned char *p,
                                          size_t depth, uint64_t droplens,
                                          const unsigned char **diverged)
{
    for (;;) {
        if (*p != '"')
            return NULL;
        const unsigned char *q, *member = p;
        int cut, n = o->n;
        if (n < d->nprev && key_again(p, d->prev[n].k - 1, d->prev[n].len + 3, d->end)) {
            q = p + d->prev[n].len + 2; /* on the colon */
            cut = (int)(d->prevcut >> n & 1);
        } else {
            /* the same key in another layout (whitespace, or near the text's end) */
            uint64_t h;
            if (!(q = rs_key(d, p, &h)))
                return NULL;
            size_t kl = (size_t)(q - p) - 1;
            if (!(n < d->nprev && key_same(&d->prev[n], p + 1, kl, h))) {
                *diverged = member;
                return NULL;
            }
            cut = rs_dropped(d, droplens, p, kl, h);
            if (!(q = rs_colon(d, q)))
                return NULL;
        }
        o->cutbits |= (uint64_t)cut << n;
        o->n = n + 1;
        if (!(q = rs_member_value(d, o, member, q, depth, cut)))
            return NULL;
        if (*q == '}')
            return q;
        p = rs_next_member(d, q);
    }
}

/* Notes key p+1..p+1+kl (hash h) as the next of the object, and clears d->canon
 * when it repeats one (compared as text: canonical escapes are unique) or is one
 * more than RAW_MAX_KEYS. */
static inline void rs_new_key(dec *d, rs_members *o, const unsigned char *p, size_t kl,
                              uint64_t h, int cut)
{
    /* (a nested object may have moved the buffer) */
    rawkey_ref *refs = (rawkey_ref *)(void *)(o->kb->data + o->start);
    uint64_t *sw = &o->seen[h >> 62], bit = 1ULL << (h >> 56 & 63);
    int n = o->n;
    if (n == RAW_MAX_KEYS) {
        d->canon = 0;
        return;
    }
    if (*sw & bit) {
        for (int i = 0; i < n; i++)
            if (key_same(&refs[i], p + 1, kl, h)) {
                d->canon = 0;
                break;
            }
    }
    *sw |= bit;
    refs[n].k = p + 1;
    refs[n].len = kl;
    refs[n].hash = h;
    o->cutbits |= (uint64_t)cut << n;
    o->n = n + 1;
}

/* The general path: the members from p (a member's first byte), each key checked
 * against the object's others while the text is canonical. Returns the object's
 * closing '}', or NULL. */
static const unsigned char *rs_general(dec *d, rs_members *o, const unsigned char *p, size_t depth,
                                       uint64_t droplens)
{
    for (;;) {
        if (*p != '"')
            return NULL;
        const unsigned char *q, *member = p;
        uint64_t h;
        if (!(q = rs_key(d, p, &h)))
            return NULL;
        size_t kl = (size_t)(q - p) - 1;
        int cut = rs_dropped(d, droplens, p, kl, h);
        if (d->canon)
            rs_new_key(d, o, p, kl, h, cut);
        if (!(q = rs_colon(d, q)))
            return NULL;
        if (!(q = rs_member_value(d, o, member, q, depth, cut)))
            return NULL;
        if (*q == '}')
            return q;
        p = rs_next_member(d, q);
    }
}

/* The object at p (on '{', depth already counted). row: the raw row itself, whose
 * dropped members are noted in d->cut and whose keys are first compared with the
 * last canonical row's (the same-shape path); from the first key that differs, and
 * for any other object, the general path reads it. */
static const unsigned char *rs_object(dec *d, const unsigned char *p, size_t depth, int row)
{
    if (*++p != '"') {
        p = rs_ws(d, p);
        if (*p == '}')
            return p + 1;
    }
    if (!d->keys)
        d->keys = dec_buf(d, 1);
    buf *kb = d->keys;
    size_t len0 = kb->len;
    rs_members o = {kb, (len0 + 15) & ~(size_t)15, {0, 0, 0, 0}, 0, 0};
    if (o.start + RAW_MAX_KEYS * sizeof(rawkey_ref) >= kb->cap)
        buf_reserve(kb, o.start - len0 + RAW_MAX_KEYS * sizeof(rawkey_ref));
    uint64_t droplens = row ? d->ro->droplens : 0;
    const unsigned char *q;
    if (row && d->nprev > 0) {
        const unsigned char *diverged = NULL;
        q = rs_same_shape(d, &o, p, depth, droplens, &diverged);
        if (!diverged) {
            kb->len = len0;
            return q ? q + 1 : NULL;
        }
        if (d->canon) { /* the keys so far are the last row's, as if checked here */
            rawkey_ref *refs = (rawkey_ref *)(void *)(kb->data + o.start);
            for (int i = 0; i < o.n; i++) {
                refs[i] = d->prev[i];
                o.seen[refs[i].hash >> 62] |= 1ULL << (refs[i].hash >> 56 & 63);
            }
        }
        p = diverged;
    }
    q = rs_general(d, &o, p, depth, droplens);
    if (q && row && d->canon) { /* a new shape: the next rows compare with it */
        memcpy(d->prev, kb->data + o.start, (size_t)o.n * sizeof(rawkey_ref));
        d->nprev = o.n;
        d->prevcut = o.cutbits;
    }
    kb->len = len0;
    return q ? q + 1 : NULL;
}

/* A small nested object at p (on '{', depth already counted): at most
 * SMALL_KEYS members whose values are scalars or empty, in canonical layout,
 * checked for duplicate keys against each other (no key buffer or hashes). Any
 * other object sets *other after reading no nested value (rs_object then reads
 * it, without reading anything twice over more than these few scalars). */
#define SMALL_KEYS 8
static const unsigned char *rs_small(dec *d, const unsigned char *p, size_t depth, int *other)
{
    const unsigned char *ks[SMALL_KEYS];
    size_t kls[SMALL_KEYS];
    int n = 0;
    if (*++p != '"')
        goto other;
    for (;;) {
        if (n == SMALL_KEYS)
            goto other;
        const unsigned char *q = rs_string(d, p + 1);
        if (!q)
            return NULL;
        size_t kl = (size_t)(q - p) - 1;
        for (int i = 0; i < n && d->canon; i++)
            if (kls[i] == kl && memcmp(ks[i], p + 1, kl) == 0)
                d->canon = 0; /* canonical escapes are unique: the text settles it */
        ks[n] = p + 1;
        kls[n++] = kl;
        if (*++q != ':')
            goto other;
        q++;
        if (*q == '"') {
            if (!(q = rs_string(d, q + 1)))
                return NULL;
            q++;
        } else if ((*q >= '0' && *q <= '9') || *q == '-') {
            if (!(q = rs_number(d, q)))
                return NULL;
        } else if ((*q == '{' && q[1] == '}') || (*q == '[' && q[1] == ']')) {
            if (depth + 1 > d->max_depth)
                return NULL;
            q += 2;
        } else if (*q == 't' || *q == 'f' || *q == 'n') {
            if (!(q = rs_value(d, q, depth)))
                return NULL;
        } else {
            goto other;
        }
        if (*q == '}')
            return q + 1;
        if (*q != ',' || q[1] != '"')
            goto other;
        p = q + 1;
    }
other:
    *other = 1;
    return NULL;
}

/* The array at p (on '[', depth already counted). */
static const unsigned char *rs_array(dec *d, const unsigned char *p, size_t depth)
{
    p = rs_ws(d, p + 1);
    if (*p == ']')
        return p + 1;
    for (;;) {
        if (!(p = rs_value(d, p, depth)))
            return NULL;
        if (*p != ',' && *p != ']')
            p = rs_ws(d, p);
        if (*p == ',') {
            p++;
            continue;
        }
        return *p == ']' ? p + 1 : NULL;
    }
}

/* The value at p (whitespace before it clears d->canon). */
static const unsigned char *rs_value(dec *d, const unsigned char *p, size_t depth)
{
    const unsigned char *end = d->end;
    if (p < end && *p <= ' ')
        p = rs_ws(d, p);
    if (p >= end)
        return NULL;
    switch (*p) {
    case '"':
        p = rs_string(d, p + 1);
        return p ? p + 1 : NULL;
    case '{': {
        if (depth + 1 > d->max_depth)
            return NULL;
        int other = 0;
        const unsigned char *e = rs_small(d, p, depth + 1, &other);
        return other ? rs_object(d, p, depth + 1, 0) : e;
    }
    case '[':
        return depth + 1 > d->max_depth ? NULL : rs_array(d, p, depth + 1);
    case 't':
        d->p = p;
        return dec_lit(d, "true", 4) < 0 ? NULL : d->p;
    case 'f':
        d->p = p;
        return dec_lit(d, "false", 5) < 0 ? NULL : d->p;
    case 'n':
        d->p = p;
        return dec_lit(d, "null", 4) < 0 ? NULL : d->p;
    default:
        return rs_number(d, p);
    }
}

/* Pushes a raw value of the row s..e (canonical text): a slice of the decoded
 * text, or its own copy without the d->cut members (with one comma each). */
static void push_raw(dec *d, const unsigned char *s, const unsigned char *e)
{
    lua_State *L = d->L;
    if (d->ncut == 0) {
        cljson_raw_push(L, d->ro->anchor, (const char *)s, (size_t)(e - s), d->rawmt);
        return;
    }
    /* The parts kept: from[i]..to[i] (the last one ends at e). */
    const unsigned char *from[CLJSON_DROP_MAX + 1], *to[CLJSON_DROP_MAX + 1];
    size_t len = 0;
    from[0] = s;
    for (int i = 0; i < d->ncut; i++) {
        const unsigned char *a = d->cut[i][0] - 1, *b = d->cut[i][1];
        if (*a == '{' || a < from[i]) { /* the first member left: its comma after */
            a = d->cut[i][0];
            if (*b == ',')
                b++;
        }
        to[i] = a;
        len += (size_t)(a - from[i]);
        from[i + 1] = b;
    }
    to[d->ncut] = e;
    len += (size_t)(e - from[d->ncut]);
    char *t = cljson_raw_new(L, len, d->rawmt);
    for (int i = 0; i <= d->ncut; i++) {
        memcpy(t, from[i], (size_t)(to[i] - from[i]));
        t += to[i] - from[i];
    }
}

/* One element of the raw array: an object whose text is canonical stays raw;
 * anything else is decoded as usual (an object then loses the dropped members). */
static int dec_raw_elem(dec *d, size_t depth)
{
    const unsigned char *p = dec_ws(d->p, d->end);
    if (p < d->end && *p == '{') {
        if (depth + 1 > d->max_depth)
            return -1;
        d->canon = 1;
        d->ncut = 0;
        const unsigned char *e = rs_object(d, p, depth + 1, 1);
        if (!e)
            return -1;
        if (d->canon) {
            d->p = e;
            push_raw(d, p, e);
            return 0;
        }
    }
    d->p = p;
    if (dec_value(d, depth) < 0)
        return -1;
    if (p < d->end && *p == '{') {
        for (int i = 0; i < d->ro->ndrop; i++) {
            lua_pushlstring(d->L, d->ro->drop[i], d->ro->droplen[i]);
            lua_pushnil(d->L);
            lua_rawset(d->L, -3);
        }
    }
    return 0;
}

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

/* Objects that have the same keys in the same order (the rows of a result set,
 * the same response decoded call after call) share one order string: the shape
 * cache maps a cheap hash of the order to the last order string with that hash.
 * Each state keeps one cache for all its decodes (registry, by this address): a
 * decode then makes no table of its own. An entry is compared in full before it
 * is used, so a nested decode may share it. */
#define DEC_SHAPE_MAX 4096 /* a longer order string is not kept for later decodes */
static const char dec_shapes;

/* Pushes the state's shape cache (made at the first decode). */
static void push_shapes(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &dec_shapes) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_createtable(L, DEC_SPARE(1), 0);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &dec_shapes);
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
    if (len <= DEC_SHAPE_MAX) {
        lua_pushvalue(L, -1);
        lua_rawseti(L, d->shapes, slot);
    }
}

static int dec_raw_elem(dec *d, size_t depth);

/* raw: each object element stays raw when it can (dec_raw_elem). */
static int dec_array(dec *d, size_t depth, int raw)
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
            if (dec_room(d, &pend, t, &n) < 0 ||
                (raw ? dec_raw_elem(d, depth) : dec_value(d, depth)) < 0)
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

/* Whether the key ks of kl bytes is one of ro->keep. */
static int kept(const cljson_raw_opts *ro, const char *ks, size_t kl)
{
    for (int i = 0; i < ro->nkeep; i++)
        if (ro->keeplen[i] == kl && memcmp(ro->keep[i], ks, kl) == 0)
            return 1;
    return 0;
}

/* What follows an object member's value ending at e: 1 with *next on the next
 * member (past the comma and whitespace), 0 with d->p past the closing brace, -1 for
 * anything else. */
static int member_end(dec *d, const unsigned char *e, const unsigned char **next)
{
    const unsigned char *p = dec_ws(e, d->end);
    if (p >= d->end)
        return -1;
    if (*p == ',') {
        *next = dec_ws(p + 1, d->end);
        return 1;
    }
    if (*p != '}')
        return -1;
    d->p = p + 1;
    return 0;
}

/* A member not kept (option keep): its value at v validated by the scan, no Lua
 * value made; then as member_end. */
static int skip_member(dec *d, const unsigned char *v, size_t depth, const unsigned char **next)
{
    d->canon = 0; /* no canonical-text checks */
    const unsigned char *e = rs_value(d, v, depth);
    return e ? member_end(d, e, next) : -1;
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
     * table sized like the last object at this depth (rows repeat; the top-level
     * object, a response's envelope, with room for 8); their keys gather in
     * d->keys after those of the enclosing objects. */
    int *lastn = &d->lastn[depth & 63];
    lua_createtable(L, 0, *lastn ? *lastn : depth == 1 ? 8 : 0);
    int t = lua_gettop(L);
    if (!d->keys)
        d->keys = dec_buf(d, 1);
    size_t start = d->keys->len;
    int n = 0;
    for (;;) {
        if (p >= d->end || *p != '"')
            return -1;
        d->p = p;
        if (depth == 1 && d->ro && d->ro->nkeep) {
            /* A member not kept, its key without escapes: skipped before its key
             * is made a Lua string. */
            const unsigned char *q = str_next(p + 1, d->end);
            if (q && *q == '"' && !kept(d->ro, (const char *)p + 1, (size_t)(q - p) - 1)) {
                p = dec_ws(q + 1, d->end);
                if (p >= d->end || *p != ':')
                    return -1;
                int more = skip_member(d, p + 1, depth, &p);
                if (more < 0)
                    return -1;
                if (more)
                    continue;
                break;
            }
        }
        size_t klen0 = d->keys->len;
        if (dec_string(d, 1) < 0)
            return -1;
        p = dec_ws(d->p, d->end);
        if (p >= d->end || *p != ':')
            return -1;
        d->p = p + 1;
        int raw = 0;
        if (depth == 1 && d->ro) {
            size_t kl;
            const char *ks = lua_tolstring(L, -1, &kl);
            if (d->ro->nkeep && !kept(d->ro, ks, kl)) {
                /* the key is forgotten */
                lua_pop(L, 1);
                d->keys->len = klen0;
                int more = skip_member(d, d->p, depth, &p);
                if (more < 0)
                    return -1;
                if (more)
                    continue;
                break;
            }
            const unsigned char *v = dec_ws(d->p, d->end);
            raw = d->ro->key && kl == d->ro->keylen && memcmp(ks, d->ro->key, kl) == 0 &&
                  v < d->end && *v == '[';
            if (raw) {
                if (depth + 1 > d->max_depth || !lua_checkstack(L, 8))
                    return -1;
                d->p = v;
            }
        }
        if ((raw ? dec_array(d, depth + 1, 1) : dec_value(d, depth)) < 0)
            return -1;
        lua_rawset(L, t);
        n++;
        int more = member_end(d, d->p, &p);
        if (more < 0)
            return -1;
        if (more)
            continue;
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
        return *d->p == '{' ? dec_object(d, depth + 1) : dec_array(d, depth + 1, 0);
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

int cljson_decode_direct(lua_State *L, const char *s, size_t len, const json_limits *lim)
{
    return cljson_decode_raw(L, s, len, lim, NULL);
}

int cljson_decode_raw(lua_State *L, const char *s, size_t len, const json_limits *lim,
                      const cljson_raw_opts *ro)
{
    assert(s[len] == '\0'); /* the raw scan's end mark */
    if (lim->max_size && len > lim->max_size)
        return -1;
    int base = cljson_push_tables(L, 16);
    lua_pushnil(L); /* the scratch cboxes, made at the first need */
    lua_pushnil(L);
    push_shapes(L);
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
    d.ro = ro && (ro->key || ro->nkeep) ? ro : NULL;
    d.rawmt = 0;
    d.ncut = 0;
    d.nprev = 0;
    if (d.ro) {
        for (int i = 0; i < d.ro->ndrop; i++)
            d.drophash[i] = key_hash(d.ro->drop[i], d.ro->droplen[i]);
        cljson_push_reg_at(L, REGI_RAW); /* base + 8 */
        d.rawmt = base + 8;
    }
    if (dec_value(&d, 0) < 0 || dec_ws(d.p, d.end) != d.end) {
        lua_settop(L, d.shapes); /* down to the boxes, whatever the decode left */
        dec_spare_put(&d);
        lua_settop(L, base);
        return -1;
    }
    dec_spare_put(&d);
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
    return 0;
}

int cljson_scan_canonical(lua_State *L, const char *s, size_t len, int *canon)
{
    assert(s[len] == '\0'); /* the raw scan's end mark */
    luaL_checkstack(L, 6, "cljson");
    int base = lua_gettop(L);
    lua_pushnil(L); /* the scratch cboxes, made at the first need */
    lua_pushnil(L);
    push_shapes(L);
    dec d;
    memset(&d, 0, sizeof d);
    d.shapes = base + 3;
    d.L = L;
    d.p = (const unsigned char *)s;
    d.end = d.p + len;
    d.max_depth = DEC_DEFAULT_DEPTH;
    d.boxslot = base + 1;
    d.canon = 1;
    const unsigned char *e = rs_value(&d, d.p, 0);
    int rc = e ? 0 : -1;
    if (e && e != d.end) {
        if (dec_ws(e, d.end) != d.end)
            rc = -1;
        d.canon = 0;
    }
    *canon = d.canon;
    lua_settop(L, base + 3);
    dec_spare_put(&d);
    lua_settop(L, base);
    return rc;
}
