/* json_lua_impl.h: what the parts of module "cljson" share: json_lua.c (the registry,
 * boxes and the Lua API), json_lua_decode.c (C tree and JSON text -> Lua) and
 * json_lua_encode.c (Lua -> JSON text or tree). No other module includes it.
 *
 * The functions below are hidden: each copy of the module (the server, cljson.so,
 * cltoon.so) keeps its own, as it keeps its own cljson.null. */
#ifndef CL_JSON_LUA_IMPL_H
#define CL_JSON_LUA_IMPL_H

#include <lauxlib.h>
#include <stdint.h>
#include <string.h>

#include "json_lua.h"
#include "json_text.h"

#define CLJSON_HIDDEN __attribute__((visibility("hidden")))

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
/* A raw value: a slice of already validated JSON text that is byte for byte what
 * the encoder writes for its decoded value (see cljson_decode_raw). */
#define REG_RAW "cljson.raw_mt"

#define ENC_MAX_DEPTH 512
#define ENC_INLINE 32

/* cljson.null: a light userdata whose address is unique to this module copy. */
CLJSON_HIDDEN extern const char cljson_null_sentinel;
#define CLJSON_NULL ((void *)&cljson_null_sentinel)

/* A GC-owned holder for C resources that must not leak if a Lua error (for
 * example out of memory under a capped allocator) unwinds through our code. */
typedef struct {
    json_value *root;
    buf out;
} cbox;

/* A new cbox pushed on the stack (its __gc frees what it holds). */
CLJSON_HIDDEN cbox *cljson_box_new(lua_State *L);
/* Creates the registry entries once per lua_State; later calls reuse them so that
 * values made before a second require stay recognised. */
CLJSON_HIDDEN void cljson_ensure_registry(lua_State *L);
/* The registry entries below that are never replaced (not REG_LISTS), in one table
 * made by cljson_ensure_registry and found by address (no string lookups): its
 * REGI_* elements. */
enum { REGI_ARRAY = 1, REGI_OBJECT, REGI_NUMBER, REGI_ORDER, REGI_RAW, REGI_N = REGI_RAW };
CLJSON_HIDDEN extern const char cljson_reg_key;
/* Pushes that table (making the entries at the first use). */
static inline void cljson_push_reg(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &cljson_reg_key) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    cljson_ensure_registry(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &cljson_reg_key);
}
/* Pushes element i (REGI_*) of that table. */
static inline void cljson_push_reg_at(lua_State *L, int i)
{
    cljson_push_reg(L);
    lua_rawgeti(L, -1, i);
    lua_remove(L, -2);
}

/* An order string is the keys in order, each as its length (LEB128) and bytes,
 * no key twice. Equal orders are equal strings. */
/* Writes the LEB128 length of an order string entry at t (10 bytes); returns its size. */
static inline size_t order_len(unsigned char *t, size_t len)
{
    size_t n = 0, v = len;
    do {
        t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static inline void order_put(buf *b, const char *k, size_t len)
{
    unsigned char t[10];
    buf_append(b, t, order_len(t, len));
    buf_append(b, k, len);
}

/* Reads the key at *p (not past end); returns 0, or -1 if malformed. */
static inline int order_next(const unsigned char **p, const unsigned char *end, const char **k,
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

/* Makes sure the registry entries exist and that room more stack slots are free,
 * then pushes the array, object and number metatables and the order table (REG_ORDER)
 * in that order; returns the stack top before them. */
static inline int cljson_push_tables(lua_State *L, int room)
{
    luaL_checkstack(L, room, "cljson");
    int base = lua_gettop(L);
    cljson_push_reg(L);
    for (int i = 1; i <= 4; i++)
        lua_rawgeti(L, base + 1, i);
    lua_remove(L, base + 1);
    return base;
}

/* json_lua_decode.c. Pushes a boxed number of text s (nmt: the stack slot of the
 * number metatable). */
CLJSON_HIDDEN void cljson_push_number_box(lua_State *L, const char *s, size_t len, int nmt);
/* Decodes s into one value pushed on the stack; returns 0, or -1 (stack restored)
 * when json_parse would reject the text. May raise a Lua memory error. */
CLJSON_HIDDEN int cljson_decode_direct(lua_State *L, const char *s, size_t len,
                                       const json_limits *lim);

/* The userdata behind cljson.raw_mt. The text is either in the Lua string that is
 * its user value 1 (so it stays valid while the userdata lives) or, for a raw
 * value made by cljson_raw_new, in the userdata's own block, after this struct. */
typedef struct {
    const char *text;
    size_t len;
} rawval;

/* Pushes a raw value for text..text+len, which lies in the string at stack slot
 * anchor (rawmt: the slot of cljson.raw_mt). */
CLJSON_HIDDEN void cljson_raw_push(lua_State *L, int anchor, const char *text, size_t len,
                                   int rawmt);
/* Pushes a raw value that holds its own copy of len bytes of text (rawmt: stack
 * slot of cljson.raw_mt) and returns where the caller writes that text (len bytes,
 * then a '\0' already in place). */
CLJSON_HIDDEN char *cljson_raw_new(lua_State *L, size_t len, int rawmt);
/* The raw value at idx, or NULL if it is not one. */
CLJSON_HIDDEN const rawval *cljson_raw_at(lua_State *L, int idx);

#define CLJSON_DROP_MAX 8
#define CLJSON_KEEP_MAX 16
typedef struct {
    const char *key; /* the member whose rows stay raw (NULL: none) */
    size_t keylen;
    int anchor;                        /* stack slot of the decoded string */
    int ndrop;                         /* member names removed from every row: */
    const char *drop[CLJSON_DROP_MAX]; /* their bytes (none needs escaping in JSON) */
    size_t droplen[CLJSON_DROP_MAX];
    uint64_t droplens; /* bit (length % 64) set for each drop name: most keys skip the loop */
    int nkeep;         /* > 0: the only members of a top-level object decoded: */
    const char *keep[CLJSON_KEEP_MAX]; /* their names (as decoded, escapes resolved) */
    size_t keeplen[CLJSON_KEEP_MAX];
} cljson_raw_opts;

/* cljson_decode_direct with the raw option: when ro->key is not NULL, the elements
 * of the array that is member ro->key of a top-level object are pushed as raw
 * values (their text in the string s at slot ro->anchor) when their text is
 * exactly what the encoder would write; other elements are decoded as usual. The
 * ro->drop members are removed from every object element (a raw one gets its own
 * text without them). ro->keep: the other members of a top-level object are
 * scanned (validated) but not decoded, as if removed from its table afterwards.
 * Accepts and rejects exactly what cljson_decode_direct does.
 * s[len] must be '\0' (s is a Lua string): the raw scan stops at that byte. */
CLJSON_HIDDEN int cljson_decode_raw(lua_State *L, const char *s, size_t len, const json_limits *lim,
                                    const cljson_raw_opts *ro);
/* Whether the value text s..s+len (a complete JSON text) is valid (returns 0, else
 * -1) and exactly what the encoder writes for it (*canon = 1). s[len] must be '\0'
 * (s is a Lua string). */
CLJSON_HIDDEN int cljson_scan_canonical(lua_State *L, const char *s, size_t len, int *canon);

/* json_lua_encode.c. */
CLJSON_HIDDEN int cljson_ordered_keys(lua_State *L, int idx, int ord, int lists, int canonical);
/* Converts the value at idx into box->root (w == NULL), or writes its text straight
 * into w. May raise only on Lua memory errors (the box's __gc frees the partial
 * tree). */
CLJSON_HIDDEN int cljson_convert(lua_State *L, int idx, cbox *box, buf *w, size_t max,
                                 int canonical, char *err, size_t errlen);

#endif
