/* json_lua_encode: Lua values into JSON text or a json_value tree for module
 * "cljson" (json_lua.h): cljson_encode, cljson_to_value and the key orders. */
#include "json_lua_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where key i of a key list is in the list's blob (list[0], a string): its raw
 * bytes and its text as the writer emits it ("key":), so that the writer need
 * not escape and validate listed keys again. */
typedef struct {
    uint32_t raw, rawlen, esc, esclen;
} keyseg;

static int put_str(buf *out, const char *s, size_t len);

/* The encoder's own elements of the table of cljson_push_reg, made by the first
 * conversion that may raise: the metatables' addresses (what the encoder compares
 * values' metatables with) in a userdata, and the list cache (REG_LISTS) again,
 * found by index rather than by name. */
enum { REGI_ENC_MTS = REGI_N + 1, REGI_ENC_LISTS };
typedef struct {
    const void *amt, *omt, *nmt, *rawmt;
} enc_mts;

/* Pushes the key list of the object at idx (list[i] = key, list[key] = i,
 * list[0] = the blob of keyseg[n] and key texts, absent if a key is not valid
 * UTF-8) and
 * returns 1, or pushes nothing and returns 0 if it has no remembered order. ord
 * and lists are the stack slots of REG_ORDER and of the list cache; a miss builds
 * the list and caches it (a full cache is replaced by an empty one, in the
 * registry and in slot lists), unless build is 0: then it returns -1 (nothing
 * pushed), as building allocates and so may raise. */
static int order_list(lua_State *L, int idx, int ord, int lists, int build)
{
    lua_pushvalue(L, idx);
    if (lua_rawget(L, ord) != LUA_TSTRING) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_rawget(L, lists) == LUA_TTABLE) /* the common case: two lookups */
        return 1;
    lua_pop(L, 1);
    if (!build)
        return -1;
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
    buf *bb = &cljson_box_new(L)->out; /* freed by the GC even if Lua raises */
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
        cljson_push_reg(L);
        lua_pushvalue(L, -2);
        lua_rawseti(L, -2, REGI_ENC_LISTS);
        lua_pop(L, 1);
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

/* ------------------------------------------------------------------ Lua -> C */

typedef struct {
    const char *k; /* key (anchored in a table on the stack) or NULL for an index */
    size_t klen;
    lua_Integer i;
} path_elem;

/* What a conversion that must not raise returns where it would allocate a Lua
 * object (a key list, a deeper path, more stack): the caller starts again under
 * a protected call. */
#define ENC_RETRY (-2)

typedef struct {
    lua_State *L;
    int ord, lists;                 /* absolute stack indices */
    const void *pamt, *pomt, *pnmt; /* the metatables, compared by address */
    const void *prawmt;             /* cljson.raw_mt */
    int canonical;                  /* ignore remembered key order; sort every object */
    int noraise;                    /* no Lua allocation: ENC_RETRY instead */
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
    buf *w;     /* write mode (non-NULL): text is appended here */
    size_t max; /* write mode: most bytes w may hold (0 = no limit) */
    int tree;   /* build the tree (without w, or with it: both in one walk) */
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
/* Whether the key on top of the stack is a key of the table at list. */
static int listed(lua_State *L, int list)
{
    lua_pushvalue(L, -1);
    int known = lua_rawget(L, list) != LUA_TNIL;
    lua_pop(L, 1);
    return known;
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
int cljson_ordered_keys(lua_State *L, int idx, int ord, int lists, int canonical)
{
    luaL_checkstack(L, 8, "cljson");
    int list = 0;
    lua_Integer n = 0, total = 0;
    lua_createtable(L, 0, 0);
    int out = lua_gettop(L);
    if (!canonical) {
        if (order_list(L, idx, ord, lists, 1)) {
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
            if (list && listed(L, list))
                continue;
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
#if JSON_TEXT_WORDS
            uint64_t m = json_special_mask(w, 1);
            memcpy(o, &w, 8); /* room for the rest of s is reserved */
            if (m) {
                unsigned k = json_first_flagged(m);
                o += k;
                p += k;
                break;
            }
#else
            if (word_special(w))
                break;
            memcpy(o, &w, 8);
#endif
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
                              int vidx, json_value *obj, lua_Integer *nout)
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
    int rc = conv(e, vidx, obj, ks, kl);
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

/* A key of the object being written and its value's stack slot. */
typedef struct {
    const char *k;
    size_t len;
    int v;
} keyslot;

/* Writes the members of the object table at idx whose keys are not in the key
 * list at slot list (0: none, all keys), sorted bytewise; *n counts the members
 * written. Up to ENC_KEYS_INLINE of them are gathered in one walk that leaves
 * each key and value on the stack (no key pushed again, no lookup per member);
 * more take two walks and a sort of the key strings. A key that is not a string
 * fails before any of these members is written. */
static int conv_rest(enc *e, int idx, json_value *obj, int list, lua_Integer *n)
{
    lua_State *L = e->L;
    int base = lua_gettop(L);
    if (!e->noraise)
        luaL_checkstack(L, 2 * ENC_KEYS_INLINE + 4, "cljson");
    else if (!lua_checkstack(L, 2 * ENC_KEYS_INLINE + 4))
        return ENC_RETRY;
    keyslot ks[ENC_KEYS_INLINE];
    size_t nk = 0;
    int fits = 1, rc = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) { /* key, value */
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_settop(L, base);
            return enc_fail(e, NONSTR_KEYS);
        }
        if (list) {
            lua_pushvalue(L, -2);
            if (lua_rawget(L, list) != LUA_TNIL) { /* written already */
                lua_pop(L, 2);
                continue;
            }
            lua_pop(L, 1);
        }
        if (nk == ENC_KEYS_INLINE) {
            fits = 0;
            break;
        }
        /* The key string stays alive on the stack (and as a key of the table). */
        ks[nk].k = lua_tolstring(L, -2, &ks[nk].len);
        ks[nk].v = lua_gettop(L);
        nk++;
        lua_pushvalue(L, -2); /* the key for lua_next; key and value stay */
    }
    if (fits) {
        /* Insertion sort: few keys, and no comparison callback per pair. */
        for (size_t i = 1; i < nk; i++) {
            keyslot t = ks[i];
            size_t j = i;
            while (j > 0) {
                const keyslot *x = &ks[j - 1];
                size_t m = x->len < t.len ? x->len : t.len;
                int c = memcmp(x->k, t.k, m);
                if (c < 0 || (c == 0 && x->len <= t.len))
                    break;
                ks[j] = ks[j - 1];
                j--;
            }
            ks[j] = t;
        }
        /* The levels below count on room above the pairs (see conv_table). */
        if (!e->noraise)
            luaL_checkstack(L, 32, "cljson");
        else if (!lua_checkstack(L, 32)) {
            lua_settop(L, base);
            return ENC_RETRY;
        }
        int keep = lua_gettop(L);
        for (size_t i = 0; i < nk && rc == 0; i++) {
            rc = conv_member(e, ks[i].k, ks[i].len, ks[i].v, obj, n);
            lua_settop(L, keep);
        }
        lua_settop(L, base);
        return rc;
    }
    lua_settop(L, base);
    if (e->noraise)
        return ENC_RETRY; /* the key array is a userdata */
    size_t want = 0, nx = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_settop(L, base);
            return enc_fail(e, NONSTR_KEYS);
        }
        if (!list || !listed(L, list))
            want++;
    }
    keyref *ex = lua_newuserdatauv(L, want * sizeof(keyref), 0);
    int exslot = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (list && listed(L, list))
            continue;
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
        rc = conv_member(e, ex[i].k, ex[i].len, exslot + 1, obj, n);
        lua_settop(L, exslot);
    }
    lua_settop(L, base);
    return rc;
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
    int list = 0, rc = 0;
    if (!allstr)
        return enc_fail(e, NONSTR_KEYS);
    if (!e->canonical) {
        int o = order_list(L, idx, e->ord, e->lists, !e->noraise);
        if (o < 0)
            return ENC_RETRY;
        if (o)
            list = top + 1;
    }
    lua_Integer n = 0;
    if (list) {
        int lazy = count < 0;
        if (lazy) {
            count = 0;
            lua_pushnil(L);
            while (lua_next(L, idx)) {
                lua_pop(L, 1);
                count++;
            }
        }
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
                                            list + 1, obj, &n);
            } else if (lua_rawgeti(L, list, i) == LUA_TSTRING) {
                /* The key string stays alive in the list; its value replaces it. */
                size_t kl;
                const char *ks = lua_tolstring(L, list + 1, &kl);
                if (lua_rawget(L, idx) != LUA_TNIL)
                    rc = conv_member(e, ks, kl, list + 1, obj, &n);
            }
            lua_settop(L, list);
        }
        if (rc == -1 && lazy && count > n && has_nonstring_key(L, idx))
            rc = enc_fail(e, NONSTR_KEYS);
        if (rc == 0 && count > n)
            rc = conv_rest(e, idx, obj, list, &n);
    } else if (count != 0) {
        rc = conv_rest(e, idx, obj, 0, &n);
    }
    lua_settop(L, top);
    return rc;
}

static int conv_table(enc *e, int idx, json_value *parent, const char *k, size_t klen)
{
    lua_State *L = e->L;
    if (e->w && e->max && e->w->len > e->max)
        return enc_fail(e, CLJSON_TOO_LARGE);
    /* Each level holds at most 4 slots (+2 briefly): room for 4 levels at once
     * (a result's usual depth: asking for 8 grew the call's stack every call). */
    if ((e->depth & 3) == 0) {
        if (!e->noraise)
            luaL_checkstack(L, 32, "cljson");
        else if (!lua_checkstack(L, 32)) /* grows the stack without raising */
            return ENC_RETRY;
    }
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
        /* Member "text" found by walking the box rather than by pushing the key:
         * pushing a string may allocate, which a noraise conversion must not. */
        int top = lua_gettop(L);
        const char *s = NULL;
        size_t len = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            size_t kl;
            if (lua_type(L, -2) == LUA_TSTRING && (lua_tolstring(L, -2, &kl), kl == 4) &&
                memcmp(lua_tostring(L, -2), "text", 4) == 0) {
                if (lua_type(L, -1) == LUA_TSTRING)
                    s = lua_tolstring(L, -1, &len); /* anchored by the box */
                break;
            }
            lua_pop(L, 1);
        }
        lua_settop(L, top);
        if (!s || !json_number_valid(s, len))
            return enc_fail(e, "invalid cljson.number text");
        if (e->w)
            buf_append(e->w, s, len);
        if (e->tree)
            attach(e, parent, k, klen, json_new_numtext(s, len));
        return 0;
    }
    if (e->depth >= ENC_MAX_DEPTH)
        return enc_fail(e, "nesting too deep");
    const void *self = lua_topointer(L, idx);
    for (size_t d = 0; d < e->depth; d++)
        if (e->seen[d] == self)
            return enc_fail(e, "cycle in table");
    if (e->depth + 1 >= e->cap) {
        if (e->noraise)
            return ENC_RETRY;
        enc_grow(e);
    }
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
        if (e->tree)
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
                return rc;
        }
        if (e->w)
            wputc(e->w, ']');
        return 0;
    }
    json_value *obj = NULL;
    if (e->w)
        wputc(e->w, '{');
    if (e->tree)
        attach(e, parent, k, klen, obj = json_new_object());
    int rc = conv_object(e, idx, obj, count, allstr);
    if (rc == 0 && e->w)
        wputc(e->w, '}');
    return rc;
}

/* A raw value: its text copied (it is what the writer would write), or, for
 * canonical text and for the tree, parsed (it was validated when decoded). */
static int conv_raw(enc *e, const rawval *r, json_value *parent, const char *k, size_t klen)
{
    if (e->w && e->max && e->w->len + r->len > e->max)
        return enc_fail(e, CLJSON_TOO_LARGE);
    json_value *v = NULL;
    if (e->tree || (e->w && e->canonical)) {
        json_limits lim = {10000, 0};
        char perr[8];
        v = json_parse(r->text, r->len, &lim, perr, sizeof perr);
        if (!v)
            return enc_fail(e, "invalid cljson raw text");
    }
    if (e->w) {
        if (e->canonical) {
            json_write(e->w, v, 1);
        } else {
            buf *w = e->w; /* buf_append without its call and NUL (convert ends the text) */
            if (w->len + r->len + 1 > w->cap)
                buf_reserve(w, r->len);
            memcpy(w->data + w->len, r->text, r->len);
            w->len += r->len;
        }
    }
    if (e->tree)
        attach(e, parent, k, klen, v);
    else
        json_free(v);
    return 0;
}

/* idx is an absolute stack index. */
static int conv(enc *e, int idx, json_value *parent, const char *k, size_t klen)
{
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        if (e->w)
            buf_append(e->w, "null", 4);
        if (e->tree)
            attach(e, parent, k, klen, json_new_null());
        return 0;
    case LUA_TBOOLEAN: {
        int b = lua_toboolean(L, idx);
        if (e->w)
            buf_append(e->w, b ? "true" : "false", b ? 4 : 5);
        if (e->tree)
            attach(e, parent, k, klen, json_new_bool(b));
        return 0;
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            if (e->w)
                json_write_int(e->w, (int64_t)lua_tointeger(L, idx));
            if (e->tree)
                attach(e, parent, k, klen, json_new_int((int64_t)lua_tointeger(L, idx)));
        } else {
            double d = (double)lua_tonumber(L, idx);
            if (!isfinite(d))
                return enc_fail(e, "cannot encode a non-finite number");
            if (e->w)
                json_write_double(e->w, d);
            if (e->tree)
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
        } else if (!json_utf8_valid(s, len)) {
            return enc_fail(e, "invalid UTF-8 in string");
        }
        if (e->tree)
            attach(e, parent, k, klen, json_new_str(s, len));
        return 0;
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == CLJSON_NULL) {
            if (e->w)
                buf_append(e->w, "null", 4);
            if (e->tree)
                attach(e, parent, k, klen, json_new_null());
            return 0;
        }
        return enc_fail(e, "cannot encode a light userdata");
    case LUA_TTABLE:
        return conv_table(e, idx, parent, k, klen);
    case LUA_TUSERDATA:
        /* The metatable is left on the stack: every caller restores its top. */
        if (lua_getmetatable(L, idx)) {
            const void *mt = lua_topointer(L, -1);
            if (mt == e->prawmt)
                return conv_raw(e, lua_touserdata(L, idx), parent, k, klen);
        }
        /* fall through */
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "cannot encode a %s", luaL_typename(L, idx));
        return enc_fail(e, msg);
    }
    }
}

/* The room text is written into from the start: growing a buffer copies it each
 * time, and a result of a page of rows (some kB) grew once from 2 kB. A 4 kB block
 * (with the NUL) is one of util.c's kept sizes, as 2 kB is: no dearer to take. */
#define ENC_FIRST_ROOM 4095

/* Converts the value at idx into box->root (w == NULL), or writes its text straight
 * into w (the fast path: same bytes as json_write of the tree, no tree built). May
 * raise only on Lua memory errors, in which case the box's __gc frees the partial
 * tree. */
static int convert(lua_State *L, int idx, cbox *box, buf *w, size_t max, int tree, int canonical,
                   int noraise, char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    int base = lua_gettop(L);
    if (noraise) {
        if (!lua_checkstack(L, 10))
            return ENC_RETRY;
        if (lua_rawgetp(L, LUA_REGISTRYINDEX, &cljson_reg_key) != LUA_TTABLE) {
            lua_settop(L, base); /* the registry entries are made under protection */
            return ENC_RETRY;
        }
    } else {
        luaL_checkstack(L, 10, "cljson");
        cljson_push_reg(L);
    }
    /* On the C stack: nothing to free if a memory error unwinds. */
    enc st, *e = &st;
    e->L = L;
    if (lua_rawgeti(L, base + 1, REGI_ENC_MTS) != LUA_TUSERDATA) {
        if (noraise) {
            lua_settop(L, base);
            return ENC_RETRY;
        }
        lua_pop(L, 1);
        enc_mts *m = lua_newuserdatauv(L, sizeof *m, 0);
        const int at[4] = {REGI_ARRAY, REGI_OBJECT, REGI_NUMBER, REGI_RAW};
        const void **to[4] = {&m->amt, &m->omt, &m->nmt, &m->rawmt};
        for (int i = 0; i < 4; i++) {
            lua_rawgeti(L, base + 1, at[i]);
            *to[i] = lua_topointer(L, -1);
            lua_pop(L, 1);
        }
        lua_rawseti(L, base + 1, REGI_ENC_MTS);
        lua_getfield(L, LUA_REGISTRYINDEX, REG_LISTS);
        lua_rawseti(L, base + 1, REGI_ENC_LISTS);
        lua_rawgeti(L, base + 1, REGI_ENC_MTS);
    }
    const enc_mts *m = lua_touserdata(L, base + 2); /* anchored by the registry */
    e->pamt = m->amt;
    e->pomt = m->omt;
    e->pnmt = m->nmt;
    e->prawmt = m->rawmt;
    lua_rawgeti(L, base + 1, REGI_ORDER);
    e->ord = base + 3;
    lua_pushnil(L); /* slot for enc_grow's userdata */
    e->grown = base + 4;
    lua_rawgeti(L, base + 1, REGI_ENC_LISTS);
    e->lists = base + 5;
    e->canonical = canonical;
    e->noraise = noraise;
    e->depth = 0;
    e->seen = e->seen_in;
    e->path = e->path_in;
    e->cap = ENC_INLINE;
    e->box = box;
    e->w = w;
    e->max = max ? w->len + max : 0;
    if (w && w->cap < ENC_FIRST_ROOM)
        buf_reserve(w, ENC_FIRST_ROOM); /* not grown from 64 bytes by doubling */
    e->tree = tree;
    e->err = err;
    e->errlen = errlen;
    int rc = conv(e, idx, NULL, NULL, 0);
    if (w && w->data)
        w->data[w->len] = '\0';
    lua_settop(L, base);
    return rc;
}

int cljson_convert(lua_State *L, int idx, cbox *box, buf *w, size_t max, int canonical, char *err,
                   size_t errlen)
{
    return convert(L, idx, box, w, max, w == NULL, canonical, 0, err, errlen);
}

/* Protected trampoline for the C API entry points. */
typedef struct {
    int idx;
    int canonical;
    int write; /* 1: write text into out */
    int both;  /* with write: build the tree as well */
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
    int tree = !a->write || a->both;
    /* Only a tree needs the GC-owned box; text goes to the caller's buffer. */
    cbox *box = tree ? cljson_box_new(L) : NULL;
    a->rc = convert(L, 2, box, a->write ? a->out : NULL, a->max, tree, a->canonical, 0, a->err,
                    a->errlen);
    if (a->rc == 0 && tree)
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
    pcall_args a = {idx, 0, 0, 0, NULL, NULL, err, errlen, -1, 0};
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
    pcall_args a = {idx, canonical, 0, 0, NULL, NULL, err, errlen, -1, 0};
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
    size_t start = out->len;
    /* Text only: first without a protected call (its set-up costs more than most
     * small bodies), then, if that needed a Lua allocation, again under one. */
    int rc = convert(L, idx, NULL, out, max, 0, canonical, 1, err, errlen);
    if (rc == ENC_RETRY) {
        out->len = start;
        pcall_args a = {idx, canonical, 1, 0, out, NULL, err, errlen, -1, max};
        rc = run_protected(L, &a);
    }
    if (rc < 0)
        out->len = start; /* drop the partial text, as the tree path never wrote any */
    return rc;
}

int cljson_encode_both(lua_State *L, int idx, buf *out, json_value **tree, char *err, size_t errlen)
{
    return cljson_encode_both_max(L, idx, out, tree, 0, err, errlen);
}

int cljson_encode_both_max(lua_State *L, int idx, buf *out, json_value **tree, size_t max,
                           char *err, size_t errlen)
{
    pcall_args a = {idx, 0, 1, 1, out, NULL, err, errlen, -1, max};
    size_t start = out->len;
    *tree = NULL;
    if (run_protected(L, &a) < 0) {
        json_free(a.result);
        out->len = start;
        return -1;
    }
    *tree = a.result;
    return 0;
}
