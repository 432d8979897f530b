/* json: the exact JSON codec (see json.h and docs/json.md). */
#include "json.h"
#include "json_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_DEFAULT_DEPTH 512
/* Recursion guard: the parser and writers recurse once per nesting level. */
#define JSON_HARD_DEPTH 10000

typedef struct json_member {
    char *key; /* NUL-terminated copy; klen may be shorter than strlen if it holds \0 */
    size_t klen;
    json_value *val;
} json_member;

/* A parsed string's bytes follow its node in the node's own block; a parsed object's
 * members and then their keys follow its node the same way (packed: the bytes after
 * the node, 0 for none), so a string is one allocation and an object one, not one per
 * key. The members move out to their own array when the object grows; the keys stay. */
struct json_value {
    json_type type;
    uint32_t packed;
    union {
        int64_t i;
        double d;
        struct {
            char *s; /* NUL-terminated */
            size_t len;
        } str;
        struct {
            json_value **v;
            size_t n, cap;
        } arr;
        struct {
            json_member *m;
            size_t n, cap;
        } obj;
    } u;
};

/* ------------------------------------------------------------------ values */

static json_value *new_value(json_type t)
{
    json_value *v = xcalloc(1, sizeof *v);
    v->type = t;
    return v;
}

/* A string value with its bytes in the node's own block. */
static json_value *new_str_packed(const char *s, size_t len)
{
    json_value *v = xmalloc(sizeof *v + len + 1);
    memset(v, 0, sizeof *v);
    v->type = JSON_STRING;
    v->u.str.s = (char *)(v + 1);
    if (len)
        memcpy(v->u.str.s, s, len);
    v->u.str.s[len] = '\0';
    v->u.str.len = len;
    return v;
}

static int str_packed(const json_value *v)
{
    return v->u.str.s == (const char *)(v + 1);
}

static int members_packed(const json_value *o)
{
    return o->packed && o->u.obj.m == (const json_member *)(o + 1);
}

/* Whether key lies in the object's own block (freed with the node). */
static int key_packed(const json_value *o, const char *key)
{
    uintptr_t lo = (uintptr_t)(o + 1), k = (uintptr_t)key;
    return o->packed && k >= lo && k < lo + o->packed;
}

void json_free(json_value *v)
{
    if (!v)
        return;
    switch (v->type) {
    case JSON_STRING:
    case JSON_NUMTEXT:
        if (!str_packed(v))
            free(v->u.str.s);
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < v->u.arr.n; i++)
            json_free(v->u.arr.v[i]);
        free(v->u.arr.v);
        break;
    case JSON_OBJECT:
        for (size_t i = 0; i < v->u.obj.n; i++) {
            if (!key_packed(v, v->u.obj.m[i].key))
                free(v->u.obj.m[i].key);
            json_free(v->u.obj.m[i].val);
        }
        if (!members_packed(v))
            free(v->u.obj.m);
        break;
    default:
        break;
    }
    free(v);
}

/* An object of n members in one block, packed as the parser packs it (its members,
 * then their keys), values NULL: the keys of src (NULL: keys[i], klens[i] bytes). */
static json_value *packed_object(size_t n, const json_member *src, const char *const *keys,
                                 const size_t *klens)
{
    size_t kbytes = 0;
    for (size_t i = 0; i < n; i++)
        kbytes += (src ? src[i].klen : klens[i]) + 1;
    size_t tail = n * sizeof(json_member) + kbytes;
    json_value *c;
    if (tail > UINT32_MAX) {
        c = new_value(JSON_OBJECT);
        c->u.obj.m = xmalloc(n * sizeof(json_member));
    } else {
        c = xmalloc(sizeof *c + tail);
        memset(c, 0, sizeof *c);
        c->type = JSON_OBJECT;
        c->packed = (uint32_t)tail;
        c->u.obj.m = n ? (json_member *)(c + 1) : NULL;
    }
    char *kp = c->packed ? (char *)(c + 1) + n * sizeof(json_member) : NULL;
    for (size_t i = 0; i < n; i++) {
        const char *k = src ? src[i].key : keys[i];
        size_t kl = src ? src[i].klen : klens[i];
        char *to = kp ? kp : xmalloc(kl + 1);
        if (kl)
            memcpy(to, k, kl);
        to[kl] = '\0';
        if (kp)
            kp += kl + 1;
        c->u.obj.m[i].key = to;
        c->u.obj.m[i].klen = kl;
        c->u.obj.m[i].val = NULL;
    }
    c->u.obj.n = c->u.obj.cap = n;
    return c;
}

json_value *json_new_object_of(size_t n, const char *const *keys, const size_t *klens,
                               json_value *const *vals)
{
    json_value *c = packed_object(n, NULL, keys, klens);
    for (size_t i = 0; i < n; i++)
        c->u.obj.m[i].val = vals[i];
    return c;
}

static json_value *clone_object(const json_value *v)
{
    json_value *c = packed_object(v->u.obj.n, v->u.obj.m, NULL, NULL);
    for (size_t i = 0; i < v->u.obj.n; i++)
        c->u.obj.m[i].val = json_clone(v->u.obj.m[i].val);
    return c;
}

json_value *json_clone(const json_value *v)
{
    if (!v)
        return NULL;
    json_value *c;
    switch (v->type) {
    case JSON_STRING:
    case JSON_NUMTEXT:
        c = new_str_packed(v->u.str.s, v->u.str.len);
        c->type = v->type;
        return c;
    case JSON_OBJECT:
        return clone_object(v);
    default:
        break;
    }
    c = new_value(v->type);
    switch (v->type) {
    case JSON_INT:
        c->u.i = v->u.i;
        break;
    case JSON_DOUBLE:
        c->u.d = v->u.d;
        break;
    case JSON_ARRAY:
        c->u.arr.n = c->u.arr.cap = v->u.arr.n;
        c->u.arr.v = xmalloc(v->u.arr.n * sizeof(json_value *));
        for (size_t i = 0; i < v->u.arr.n; i++)
            c->u.arr.v[i] = json_clone(v->u.arr.v[i]);
        break;
    default:
        break;
    }
    return c;
}

json_type json_typeof(const json_value *v)
{
    return v ? v->type : JSON_NULL;
}

int64_t json_get_int(const json_value *v)
{
    if (!v)
        return 0;
    if (v->type == JSON_INT)
        return v->u.i;
    if (v->type == JSON_DOUBLE) {
        /* Saturate instead of invoking UB on out-of-range casts. */
        if (!(v->u.d > -9223372036854775808.0))
            return isnan(v->u.d) ? 0 : INT64_MIN;
        if (!(v->u.d < 9223372036854775808.0))
            return INT64_MAX;
        return (int64_t)v->u.d;
    }
    return 0;
}

double json_get_double(const json_value *v)
{
    if (!v)
        return 0;
    switch (v->type) {
    case JSON_INT:
        return (double)v->u.i;
    case JSON_DOUBLE:
        return v->u.d;
    case JSON_NUMTEXT:
        return strtod(v->u.str.s, NULL);
    default:
        return 0;
    }
}

const char *json_get_str(const json_value *v, size_t *len)
{
    if (!v || (v->type != JSON_STRING && v->type != JSON_NUMTEXT))
        return NULL;
    if (len)
        *len = v->u.str.len;
    return v->u.str.s;
}

size_t json_count(const json_value *v)
{
    if (!v)
        return 0;
    if (v->type == JSON_ARRAY)
        return v->u.arr.n;
    if (v->type == JSON_OBJECT)
        return v->u.obj.n;
    return 0;
}

const json_value *json_at(const json_value *arr, size_t i)
{
    if (!arr || arr->type != JSON_ARRAY || i >= arr->u.arr.n)
        return NULL;
    return arr->u.arr.v[i];
}

const char *json_key_at(const json_value *obj, size_t i, size_t *klen)
{
    if (!obj || obj->type != JSON_OBJECT || i >= obj->u.obj.n)
        return NULL;
    if (klen)
        *klen = obj->u.obj.m[i].klen;
    return obj->u.obj.m[i].key;
}

const json_value *json_val_at(const json_value *obj, size_t i)
{
    if (!obj || obj->type != JSON_OBJECT || i >= obj->u.obj.n)
        return NULL;
    return obj->u.obj.m[i].val;
}

/* Index of the last member named key (last wins, like most parsers), or -1. */
static ptrdiff_t find_member(const json_value *obj, const char *key, size_t klen)
{
    for (size_t i = obj->u.obj.n; i-- > 0;) {
        const json_member *m = &obj->u.obj.m[i];
        if (m->klen == klen && memcmp(m->key, key, klen) == 0)
            return (ptrdiff_t)i;
    }
    return -1;
}

const json_value *json_get_n(const json_value *obj, const char *key, size_t klen)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    ptrdiff_t i = find_member(obj, key, klen);
    return i < 0 ? NULL : obj->u.obj.m[i].val;
}

const json_value *json_get(const json_value *obj, const char *key)
{
    return key ? json_get_n(obj, key, strlen(key)) : NULL;
}

int json_key_is(const json_value *obj, size_t i, const char *key, size_t klen,
                const json_value **val)
{
    if (!obj || obj->type != JSON_OBJECT || i >= obj->u.obj.n)
        return 0;
    const json_member *m = &obj->u.obj.m[i];
    if (m->klen != klen || memcmp(m->key, key, klen) != 0)
        return 0;
    *val = m->val;
    return 1;
}

json_value *json_take_at(json_value *v, size_t i)
{
    json_value **slot = NULL;
    if (v && v->type == JSON_ARRAY && i < v->u.arr.n)
        slot = &v->u.arr.v[i];
    else if (v && v->type == JSON_OBJECT && i < v->u.obj.n)
        slot = &v->u.obj.m[i].val;
    if (!slot)
        return NULL;
    json_value *x = *slot;
    *slot = NULL;
    return x;
}

const char *json_get_string(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->u.str.s : NULL;
}

json_value *json_new_null(void)
{
    return new_value(JSON_NULL);
}

json_value *json_new_bool(int b)
{
    return new_value(b ? JSON_TRUE : JSON_FALSE);
}

json_value *json_new_int(int64_t i)
{
    json_value *v = new_value(JSON_INT);
    v->u.i = i;
    return v;
}

json_value *json_new_double(double d)
{
    json_value *v = new_value(JSON_DOUBLE);
    v->u.d = d;
    return v;
}

json_value *json_new_numtext(const char *text, size_t len)
{
    json_value *v = new_str_packed(text, len);
    v->type = JSON_NUMTEXT;
    return v;
}

json_value *json_new_str(const char *s, size_t len)
{
    return new_str_packed(s, len);
}

json_value *json_new_array(void)
{
    return new_value(JSON_ARRAY);
}

json_value *json_new_object(void)
{
    return new_value(JSON_OBJECT);
}

void json_push(json_value *arr, json_value *val)
{
    if (!arr || arr->type != JSON_ARRAY) {
        json_free(val);
        return;
    }
    if (arr->u.arr.n == arr->u.arr.cap) {
        arr->u.arr.cap = arr->u.arr.cap ? arr->u.arr.cap * 2 : 4;
        arr->u.arr.v = xrealloc(arr->u.arr.v, arr->u.arr.cap * sizeof(json_value *));
    }
    arr->u.arr.v[arr->u.arr.n++] = val;
}

void json_obj_append(json_value *obj, const char *key, size_t klen, json_value *val)
{
    if (!obj || obj->type != JSON_OBJECT) {
        json_free(val);
        return;
    }
    if (obj->u.obj.n == obj->u.obj.cap) {
        obj->u.obj.cap = obj->u.obj.cap ? obj->u.obj.cap * 2 : 4;
        if (members_packed(obj)) { /* out of the node's block (its keys stay there) */
            json_member *m = xmalloc(obj->u.obj.cap * sizeof(json_member));
            memcpy(m, obj->u.obj.m, obj->u.obj.n * sizeof(json_member));
            obj->u.obj.m = m;
        } else {
            obj->u.obj.m = xrealloc(obj->u.obj.m, obj->u.obj.cap * sizeof(json_member));
        }
    }
    json_member *m = &obj->u.obj.m[obj->u.obj.n++];
    m->key = xstrndup(key, klen);
    m->klen = klen;
    m->val = val;
}

void json_set(json_value *obj, const char *key, json_value *val)
{
    if (!obj || obj->type != JSON_OBJECT || !key) {
        json_free(val);
        return;
    }
    size_t klen = strlen(key);
    ptrdiff_t i = find_member(obj, key, klen);
    if (i >= 0) {
        json_free(obj->u.obj.m[i].val);
        obj->u.obj.m[i].val = val;
        return;
    }
    json_obj_append(obj, key, klen, val);
}

void json_obj_replace_at(json_value *obj, size_t i, json_value *val)
{
    if (!obj || obj->type != JSON_OBJECT || i >= obj->u.obj.n) {
        json_free(val);
        return;
    }
    json_free(obj->u.obj.m[i].val);
    obj->u.obj.m[i].val = val;
}

int json_remove(json_value *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT || !key)
        return 0;
    size_t klen = strlen(key);
    int found = 0;
    ptrdiff_t i;
    /* Removes every duplicate, so the key is really gone afterwards. */
    while ((i = find_member(obj, key, klen)) >= 0) {
        if (!key_packed(obj, obj->u.obj.m[i].key))
            free(obj->u.obj.m[i].key);
        json_free(obj->u.obj.m[i].val);
        memmove(&obj->u.obj.m[i], &obj->u.obj.m[i + 1],
                (obj->u.obj.n - (size_t)i - 1) * sizeof(json_member));
        obj->u.obj.n--;
        found = 1;
    }
    return found;
}

/* ------------------------------------------------------------------ UTF-8 */

/* Checks one multi-byte sequence starting at p (p[0] >= 0x80). Returns its length,
 * or -(k+1) where k is the index of the offending byte (RFC 3629 table: no
 * overlongs, no UTF-16 surrogates, nothing above U+10FFFF, no truncation). */
int json_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n = json_utf8_seq(p, end);
        if (n < 0)
            return 0;
        p += n;
    }
    return 1;
}

/* ------------------------------------------------------------------ numbers */

/* A decimal number reduced to its significant digits and a power of ten:
 * value = (neg ? -1 : 1) * 0.DIGITS * 10^exp10; zero has ndig == 0. */
typedef struct {
    int neg;
    int ndig; /* > 17 means "too many digits to be a double's shortest text" */
    char dig[18];
    int64_t exp10;
} decnum;

/* Normalizes a syntactically valid JSON number (or printf %g output):
 * value = 0.D1D2..Dn * 10^exp10 with D1 and Dn non-zero. */
static void dec_normalize(const char *s, size_t len, decnum *d)
{
    const char *p = s, *end = s + len;
    d->neg = 0;
    d->ndig = 0;
    d->exp10 = 0;
    if (p < end && (*p == '-' || *p == '+')) {
        d->neg = *p == '-';
        p++;
    }
    const char *mant = p;
    int64_t nint = 0, k = 0, first = -1, last = -1;
    int in_frac = 0;
    for (; p < end; p++) {
        if (*p == '.') {
            in_frac = 1;
            continue;
        }
        if (*p < '0' || *p > '9')
            break;
        if (!in_frac)
            nint++;
        if (*p != '0') {
            if (first < 0)
                first = k;
            last = k;
        }
        k++;
    }
    const char *mant_end = p;
    int64_t e = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        /* Saturate: such exponents are far outside any double anyway. */
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (e < 1000000000000LL)
                e = e * 10 + (*p - '0');
        if (eneg)
            e = -e;
    }
    if (first < 0)
        return; /* zero */
    int64_t n = last - first + 1;
    if (n > 17) {
        d->ndig = 18;
    } else {
        k = 0;
        for (const char *q = mant; q < mant_end; q++) {
            if (*q == '.')
                continue;
            if (k >= first && k <= last)
                d->dig[d->ndig++] = *q;
            k++;
        }
    }
    d->exp10 = e + nint - first;
}

static int dec_equal(const decnum *a, const decnum *b)
{
    if (a->ndig != b->ndig || a->ndig > 17)
        return 0;
    if (a->ndig == 0)
        return 1; /* zero; the sign lives in the double */
    return a->neg == b->neg && a->exp10 == b->exp10 && memcmp(a->dig, b->dig, a->ndig) == 0;
}

/* Shortest of %.15g/%.16g/%.17g that reads back as d; returns its length. */
static int double_text(double d, char out[40])
{
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(out, 40, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            break;
    }
    return n;
}

/* Decides DOUBLE vs NUMTEXT for a non-int64 number token (see docs/json.md). */
static json_value *number_value(const char *tok, size_t len, int is_int_token)
{
    if (is_int_token)
        return json_new_numtext(tok, len); /* integers beyond int64 keep their text */
    decnum a;
    dec_normalize(tok, len, &a);
    if (a.ndig > 17)
        return json_new_numtext(tok, len);
    char tmp[64];
    const char *ntok = tok;
    char *heap = NULL;
    if (len < sizeof tmp) {
        memcpy(tmp, tok, len);
        tmp[len] = '\0';
        ntok = tmp;
    } else {
        heap = xstrndup(tok, len);
        ntok = heap;
    }
    double d = strtod(ntok, NULL);
    free(heap);
    json_value *v = NULL;
    if (!isfinite(d)) {
        v = json_new_numtext(tok, len);
    } else if (a.ndig == 0) {
        v = json_new_double(d);
    } else {
        /* <= 15 significant digits inside the normal range always come back from
         * %.15g as the same decimal (DBL_DIG), so skip the formatting there. */
        int64_t mag = a.exp10; /* value in [10^(mag-1), 10^mag) */
        if (a.ndig <= 15 && mag > -300 && mag < 300) {
            v = json_new_double(d);
        } else {
            char out[40];
            int n = double_text(d, out);
            decnum b;
            dec_normalize(out, (size_t)n, &b);
            v = dec_equal(&a, &b) ? json_new_double(d) : json_new_numtext(tok, len);
        }
    }
    return v;
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    const unsigned char *start, *p, *end;
    size_t max_depth;
    char *err;
    size_t errlen;
    int failed;
    buf scratch; /* unescaped string bytes */
    /* Children of the containers being parsed; a container takes its slice when it
     * closes, so arrays/objects are allocated exactly once. */
    json_value **vs;
    size_t vn, vcap;
    json_member *ms; /* a member's key: its offset in keys, until its object closes */
    size_t mn, mcap;
    buf keys; /* the keys of the objects being parsed, each NUL-terminated */
    /* The stacks' first room, in the parser itself: a request's document fits, with
     * no allocation (a heap stack of 64 members is over 1 kB, glibc's slow path). */
    json_value *vs_small[32];
    json_member ms_small[32];
} parser;

/* Doubles a stack of elem-byte entries that starts in small (the parser's own room,
 * never freed) and moves to the heap when it outgrows it. */
static void *grow_stack(void *stack, const void *small, size_t *cap, size_t elem)
{
    size_t n = *cap;
    *cap = n * 2;
    if (stack != small)
        return xrealloc(stack, *cap * elem);
    void *heap = xmalloc(*cap * elem);
    memcpy(heap, small, n * elem);
    return heap;
}

static void fail(parser *ps, const unsigned char *at, const char *msg)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    if (ps->err && ps->errlen > 0)
        snprintf(ps->err, ps->errlen, "%s at byte %zu", msg, (size_t)(at - ps->start));
}

static inline void skip_ws(parser *ps)
{
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    ps->p = p;
}

/* The plain run of a string at *pp: advances over bytes that need no work (ASCII
 * other than '"', '\\' and controls, valid UTF-8) and returns the byte it stops at,
 * '"' or '\\', with *pp on it; -1 on an error (reported through ps). parse_span
 * and skip_string share it, so that a kept and a skipped string accept the same
 * bytes. */
static inline __attribute__((always_inline)) int string_run(parser *ps, const unsigned char **pp)
{
    const unsigned char *p = *pp, *end = ps->end;
    for (;;) {
#if JSON_TEXT_WORDS
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t m = json_special_mask(w, 1);
            if (m) {
                p += json_first_flagged(m);
                break;
            }
            p += 8;
        }
#endif
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
            p++;
        if (p >= end) {
            fail(ps, p, "unterminated string");
            return -1;
        }
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            *pp = p;
            return (int)c;
        }
        if (c < 0x20) {
            fail(ps, p, "control character in string");
            return -1;
        }
        if (c >= 0x80) {
            int n = json_utf8_seq_fast(p, end);
            if (n < 0) {
                fail(ps, p + (-n - 1), "invalid UTF-8 in string");
                return -1;
            }
            p += n;
            continue;
        }
    }
}

/* The four hex digits after "\\u" at *pp (and the low half of a surrogate pair):
 * the code point in *cp, *pp past them; -1 on an error reported at bs (the
 * escape's backslash). */
static int u_escape(parser *ps, const unsigned char **pp, const unsigned char *bs, unsigned *cp)
{
    const unsigned char *p = *pp, *end = ps->end;
    unsigned lo;
    if (end - p < 4 || json_hex4(p, cp) < 0) {
        fail(ps, bs, "invalid \\u escape");
        return -1;
    }
    p += 4;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) {
        fail(ps, bs, "lone low surrogate \\u escape");
        return -1;
    }
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || json_hex4(p + 2, &lo) < 0 ||
            lo < 0xDC00 || lo > 0xDFFF) {
            fail(ps, bs, "lone high surrogate \\u escape");
            return -1;
        }
        p += 6;
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    *pp = p;
    return 0;
}

/* Parses the string at ps->p (on '"'): 0 with *out at its bytes (the input's, or
 * ps->scratch's when it had escapes: good until the next string), -1 on error. */
static int parse_span(parser *ps, const char **out, size_t *outlen)
{
    const unsigned char *p = ps->p + 1, *end = ps->end;
    const unsigned char *run = p;
    int escaped = 0;
    for (;;) {
        int stop = string_run(ps, &p);
        if (stop < 0)
            return -1;
        if (stop == '"')
            break;
        /* backslash */
        if (!escaped) {
            escaped = 1;
            buf_reset(&ps->scratch);
        }
        buf_append(&ps->scratch, run, (size_t)(p - run));
        const unsigned char *bs = p;
        if (end - p < 2) {
            fail(ps, end, "unterminated string");
            return -1;
        }
        char e = (char)p[1];
        p += 2;
        switch (e) {
        case '"':
            buf_putc(&ps->scratch, '"');
            break;
        case '\\':
            buf_putc(&ps->scratch, '\\');
            break;
        case '/':
            buf_putc(&ps->scratch, '/');
            break;
        case 'b':
            buf_putc(&ps->scratch, '\b');
            break;
        case 'f':
            buf_putc(&ps->scratch, '\f');
            break;
        case 'n':
            buf_putc(&ps->scratch, '\n');
            break;
        case 'r':
            buf_putc(&ps->scratch, '\r');
            break;
        case 't':
            buf_putc(&ps->scratch, '\t');
            break;
        case 'u': {
            unsigned cp;
            if (u_escape(ps, &p, bs, &cp) < 0)
                return -1;
            json_put_utf8(&ps->scratch, cp);
            break;
        }
        default:
            fail(ps, bs, "invalid escape in string");
            return -1;
        }
        run = p;
    }
    if (!escaped) {
        *outlen = (size_t)(p - run);
        *out = (const char *)run;
    } else {
        buf_append(&ps->scratch, run, (size_t)(p - run));
        *outlen = ps->scratch.len;
        *out = ps->scratch.data;
    }
    ps->p = p + 1;
    return 0;
}

/* Parses the string at ps->p (on '"'); returns a malloc'd NUL-terminated copy. */
static char *parse_string(parser *ps, size_t *outlen)
{
    const char *s;
    return parse_span(ps, &s, outlen) < 0 ? NULL : xstrndup(s, *outlen);
}

/* Parses the key at ps->p into ps->keys: its offset there, or -1 on error. */
static ptrdiff_t parse_key(parser *ps, size_t *klen)
{
    const char *s;
    if (parse_span(ps, &s, klen) < 0)
        return -1;
    buf *b = &ps->keys;
    if (!b->cap) { /* room for a request's keys at once */
        size_t rest = (size_t)(ps->end - ps->p);
        buf_reserve(b, rest < 512 ? rest : 512);
    }
    size_t off = b->len;
    buf_reserve(b, *klen + 1);
    if (*klen)
        memcpy(b->data + off, s, *klen);
    b->data[off + *klen] = '\0';
    b->len = off + *klen + 1;
    b->data[b->len] = '\0';
    return (ptrdiff_t)off;
}

/* Checks the number at ps->p against the grammar and moves past it; -1 on error. */
static int scan_number(parser *ps, int *neg_out, const unsigned char **digits_out, size_t *nint_out,
                       int *is_int_out)
{
    const unsigned char *p = ps->p, *end = ps->end;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') {
        fail(ps, p, "invalid number");
        return -1;
    }
    const unsigned char *digits = p;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') {
            fail(ps, p, "leading zero in number");
            return -1;
        }
    } else {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    size_t nint = (size_t)(p - digits);
    int is_int = 1;
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            fail(ps, p, "expected digit after decimal point");
            return -1;
        }
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9') {
            fail(ps, p, "expected digit in exponent");
            return -1;
        }
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    ps->p = p;
    *neg_out = neg;
    *digits_out = digits;
    *nint_out = nint;
    *is_int_out = is_int;
    return 0;
}

static json_value *parse_number(parser *ps)
{
    const unsigned char *s = ps->p, *digits, *p;
    int neg, is_int;
    size_t nint;
    if (scan_number(ps, &neg, &digits, &nint, &is_int) < 0)
        return NULL;
    p = ps->p;
    if (is_int && nint <= 19) {
        uint64_t u = 0;
        for (size_t i = 0; i < nint; i++)
            u = u * 10 + (uint64_t)(digits[i] - '0'); /* 19 digits cannot wrap uint64 */
        uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        if (u <= lim) {
            int64_t i = neg ? (int64_t)(0 - u) : (int64_t)u;
            if (neg && u == (uint64_t)INT64_MAX + 1)
                i = INT64_MIN;
            return json_new_int(i);
        }
    }
    return number_value((const char *)s, (size_t)(p - s), is_int);
}

static int match_lit(parser *ps, const char *lit, size_t n)
{
    const unsigned char *p = ps->p;
    for (size_t i = 0; i < n; i++) {
        if (p + i >= ps->end || p[i] != (unsigned char)lit[i]) {
            fail(ps, p + i, "invalid literal");
            return -1;
        }
    }
    ps->p += n;
    return 0;
}

static json_value *parse_value(parser *ps, size_t depth);

/* ---- skipping (json_parse_keep): the same checks as parsing, nothing kept ---- */

/* Moves past the string at ps->p (on '"'), checked as parse_string checks it. */
static int skip_string(parser *ps)
{
    const unsigned char *p = ps->p + 1, *end = ps->end;
    for (;;) {
#if JSON_TEXT_SSE2
        while (end - p >= 16) {
            unsigned m = json_special16(p, 1);
            if (m) {
                p += __builtin_ctz(m);
                break;
            }
            p += 16;
        }
#endif
        int stop = string_run(ps, &p);
        if (stop < 0)
            return -1;
        if (stop == '"')
            break;
        const unsigned char *bs = p;
        if (end - p < 2) {
            fail(ps, end, "unterminated string");
            return -1;
        }
        char e = (char)p[1];
        p += 2;
        if (e == 'u') {
            unsigned cp;
            if (u_escape(ps, &p, bs, &cp) < 0)
                return -1;
        } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
            fail(ps, bs, "invalid escape in string");
            return -1;
        }
    }
    ps->p = p + 1;
    return 0;
}

/* Moves past the value at ps->p (after whitespace), checked as parse_value checks
 * it, at the depth parse_value would be given. */
static int skip_value(parser *ps, size_t depth)
{
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, ps->p, "unexpected end of input");
        return -1;
    }
    unsigned char c = *ps->p;
    if (c == '{' || c == '[') {
        if (depth + 1 > ps->max_depth) {
            fail(ps, ps->p, "nesting too deep");
            return -1;
        }
        int obj = c == '{';
        unsigned char close = obj ? '}' : ']';
        ps->p++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return 0;
        }
        for (;;) {
            if (obj) {
                if (ps->p >= ps->end || *ps->p != '"') {
                    fail(ps, ps->p,
                         ps->p >= ps->end ? "unterminated object" : "expected string key");
                    return -1;
                }
                if (skip_string(ps) < 0)
                    return -1;
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != ':') {
                    fail(ps, ps->p, "expected ':'");
                    return -1;
                }
                ps->p++;
            }
            if (skip_value(ps, depth + 1) < 0)
                return -1;
            skip_ws(ps);
            if (ps->p >= ps->end) {
                fail(ps, ps->p, obj ? "unterminated object" : "unterminated array");
                return -1;
            }
            if (*ps->p == ',') {
                ps->p++;
                if (obj)
                    skip_ws(ps);
                continue;
            }
            if (*ps->p == close) {
                ps->p++;
                return 0;
            }
            fail(ps, ps->p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            return -1;
        }
    }
    switch (c) {
    case '"':
        return skip_string(ps);
    case 't':
        return match_lit(ps, "true", 4);
    case 'f':
        return match_lit(ps, "false", 5);
    case 'n':
        return match_lit(ps, "null", 4);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            const unsigned char *digits;
            int neg, is_int;
            size_t nint;
            return scan_number(ps, &neg, &digits, &nint, &is_int);
        }
        if (c == 0xEF && ps->p == ps->start)
            fail(ps, ps->p, "byte order mark not allowed");
        else
            fail(ps, ps->p, "unexpected character");
        return -1;
    }
}

/* The entry of keep naming the key at ps->p (on '"', already skipped past when the
 * key has no escape: *skipped set), or NULL. A key with an escape is decoded. */
static const json_keep *keep_find(parser *ps, const json_keep *keep, int *failed)
{
    const unsigned char *k = ps->p + 1;
    *failed = 0;
    if (skip_string(ps) < 0) {
        *failed = 1;
        return NULL;
    }
    size_t klen = (size_t)(ps->p - 1 - k);
    const char *key = (const char *)k;
    char *decoded = NULL;
    if (memchr(k, '\\', klen)) {
        const unsigned char *after = ps->p;
        ps->p = k - 1;
        decoded = parse_string(ps, &klen); /* valid: skipped above */
        ps->p = after;
        key = decoded;
    }
    const json_keep *hit = NULL;
    for (const json_keep *e = keep; e->key; e++)
        if (strlen(e->key) == klen && !memcmp(e->key, key, klen)) {
            hit = e;
            break;
        }
    free(decoded);
    return hit;
}

/* Whether a keep list keeps the members it does not name (ends with JSON_KEEP_REST). */
static int keep_rest(const json_keep *keep)
{
    while (keep->key)
        keep++;
    return keep->raw == JSON_KEEP_REST;
}

/* The entry of a JSON_KEEP_REST list naming a key already parsed, or the entry
 * keeping a member whole. */
static const json_keep *keep_lookup(const json_keep *keep, const char *key, size_t klen)
{
    static const json_keep whole = {"", NULL, 0};
    for (const json_keep *e = keep; e->key; e++)
        if (strlen(e->key) == klen && !memcmp(e->key, key, klen))
            return e;
    return &whole;
}

static json_value *parse_array(parser *ps, size_t depth)
{
    size_t base = ps->vn;
    ps->p++; /* '[' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return json_new_array();
    }
    for (;;) {
        json_value *v = parse_value(ps, depth);
        if (!v)
            return NULL;
        if (ps->vn == ps->vcap)
            ps->vs = grow_stack(ps->vs, ps->vs_small, &ps->vcap, sizeof(json_value *));
        ps->vs[ps->vn++] = v;
        skip_ws(ps);
        if (ps->p >= ps->end) {
            fail(ps, ps->p, "unterminated array");
            return NULL;
        }
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == ']') {
            ps->p++;
            break;
        }
        fail(ps, ps->p, "expected ',' or ']'");
        return NULL;
    }
    json_value *a = json_new_array();
    size_t n = ps->vn - base;
    a->u.arr.v = xmalloc(n * sizeof(json_value *));
    memcpy(a->u.arr.v, ps->vs + base, n * sizeof(json_value *));
    a->u.arr.n = a->u.arr.cap = n;
    ps->vn = base;
    return a;
}

/* keep: NULL, or the members to keep (json_parse_keep). */
static json_value *parse_object(parser *ps, size_t depth, const json_keep *keep)
{
    size_t base = ps->mn, kbase = ps->keys.len;
    ps->p++; /* '{' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return json_new_object();
    }
    /* A list that keeps the rest parses every key as parsing does, then looks it up. */
    int rest = keep && keep_rest(keep);
    for (;;) {
        if (ps->p >= ps->end || *ps->p != '"') {
            fail(ps, ps->p, ps->p >= ps->end ? "unterminated object" : "expected string key");
            return NULL;
        }
        size_t klen = 0;
        ptrdiff_t key = -1;
        const json_keep *k = NULL;
        if (rest) {
            key = parse_key(ps, &klen);
            if (key < 0)
                return NULL;
            k = keep_lookup(keep, ps->keys.data + key, klen);
        } else if (keep) {
            const unsigned char *kp = ps->p;
            int bad;
            k = keep_find(ps, keep, &bad);
            if (bad)
                return NULL;
            if (k) { /* kept: its key as parsing takes it */
                ps->p = kp;
                key = parse_key(ps, &klen);
            }
        } else {
            key = parse_key(ps, &klen);
            if (key < 0)
                return NULL;
        }
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            fail(ps, ps->p, "expected ':'");
            return NULL;
        }
        ps->p++;
        if (keep && !k) { /* not kept: checked, nothing made */
            if (skip_value(ps, depth) < 0)
                return NULL;
            goto next;
        }
        json_value *v;
        if (k && k->raw) {
            skip_ws(ps);
            const unsigned char *from = ps->p;
            /* one block, as a parsed string (valid JSON text holds no NUL) */
            v = skip_value(ps, depth) < 0
                    ? NULL
                    : new_str_packed((const char *)from, (size_t)(ps->p - from));
        } else if (k && k->keep) {
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == '{' && depth + 1 <= ps->max_depth)
                v = parse_object(ps, depth + 1, k->keep);
            else
                v = parse_value(ps, depth);
        } else {
            v = parse_value(ps, depth);
        }
        if (!v)
            return NULL;
        if (ps->mn == ps->mcap)
            ps->ms = grow_stack(ps->ms, ps->ms_small, &ps->mcap, sizeof(json_member));
        ps->ms[ps->mn].key = (char *)(uintptr_t)key; /* an offset until the object closes */
        ps->ms[ps->mn].klen = klen;
        ps->ms[ps->mn].val = v;
        ps->mn++;
    next:
        skip_ws(ps);
        if (ps->p >= ps->end) {
            fail(ps, ps->p, "unterminated object");
            return NULL;
        }
        if (*ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            continue;
        }
        if (*ps->p == '}') {
            ps->p++;
            break;
        }
        fail(ps, ps->p, "expected ',' or '}'");
        return NULL;
    }
    /* One block: the node, its members, their keys. */
    size_t n = ps->mn - base, kbytes = ps->keys.len - kbase;
    size_t tail = n * sizeof(json_member) + kbytes;
    json_value *o;
    if (tail <= UINT32_MAX) {
        o = xmalloc(sizeof *o + tail);
        memset(o, 0, sizeof *o);
        o->type = JSON_OBJECT;
        o->packed = (uint32_t)tail;
        o->u.obj.m = n ? (json_member *)(o + 1) : NULL;
        char *kp = (char *)(o + 1) + n * sizeof(json_member);
        if (kbytes)
            memcpy(kp, ps->keys.data + kbase, kbytes);
        for (size_t i = 0; i < n; i++) {
            o->u.obj.m[i] = ps->ms[base + i];
            o->u.obj.m[i].key = kp + ((uintptr_t)ps->ms[base + i].key - kbase);
        }
    } else {
        o = json_new_object();
        o->u.obj.m = xmalloc(n * sizeof(json_member));
        for (size_t i = 0; i < n; i++) {
            o->u.obj.m[i] = ps->ms[base + i];
            o->u.obj.m[i].key =
                xstrndup(ps->keys.data + (uintptr_t)ps->ms[base + i].key, ps->ms[base + i].klen);
        }
    }
    o->u.obj.n = o->u.obj.cap = n;
    ps->mn = base;
    ps->keys.len = kbase;
    return o;
}

static json_value *parse_value(parser *ps, size_t depth)
{
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, ps->p, "unexpected end of input");
        return NULL;
    }
    switch (*ps->p) {
    case '{':
    case '[':
        if (depth + 1 > ps->max_depth) {
            fail(ps, ps->p, "nesting too deep");
            return NULL;
        }
        return *ps->p == '{' ? parse_object(ps, depth + 1, NULL) : parse_array(ps, depth + 1);
    case '"': {
        size_t len;
        const char *s;
        if (parse_span(ps, &s, &len) < 0)
            return NULL;
        return new_str_packed(s, len);
    }
    case 't':
        return match_lit(ps, "true", 4) ? NULL : json_new_bool(1);
    case 'f':
        return match_lit(ps, "false", 5) ? NULL : json_new_bool(0);
    case 'n':
        return match_lit(ps, "null", 4) ? NULL : json_new_null();
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps);
        if (*ps->p == 0xEF && ps->p == ps->start)
            fail(ps, ps->p, "byte order mark not allowed");
        else
            fail(ps, ps->p, "unexpected character");
        return NULL;
    }
}

static json_value *parse_doc(const char *text, size_t len, const json_limits *lim,
                             const json_keep *keep, char *err, size_t errlen);

json_value *json_parse(const char *text, size_t len, const json_limits *lim, char *err,
                       size_t errlen)
{
    return parse_doc(text, len, lim, NULL, err, errlen);
}

json_value *json_parse_keep(const char *text, size_t len, const json_limits *lim,
                            const json_keep *keep, char *err, size_t errlen)
{
    return parse_doc(text, len, lim, keep, err, errlen);
}

static json_value *parse_doc(const char *text, size_t len, const json_limits *lim,
                             const json_keep *keep, char *err, size_t errlen)
{
    parser ps;
    memset(&ps, 0, sizeof ps);
    ps.start = ps.p = (const unsigned char *)text;
    ps.end = ps.start + len;
    ps.err = err;
    ps.errlen = errlen;
    ps.vs = ps.vs_small;
    ps.vcap = sizeof ps.vs_small / sizeof ps.vs_small[0];
    ps.ms = ps.ms_small;
    ps.mcap = sizeof ps.ms_small / sizeof ps.ms_small[0];
    ps.max_depth = lim && lim->max_depth ? lim->max_depth : JSON_DEFAULT_DEPTH;
    if (ps.max_depth > JSON_HARD_DEPTH)
        ps.max_depth = JSON_HARD_DEPTH;
    if (err && errlen)
        err[0] = '\0';
    json_value *root = NULL;
    if (lim && lim->max_size && len > lim->max_size) {
        fail(&ps, ps.start + lim->max_size, "document exceeds size limit");
        goto done;
    }
    if (!text) {
        fail(&ps, ps.start, "no input");
        goto done;
    }
    skip_ws(&ps);
    if (keep && ps.p < ps.end && *ps.p == '{')
        root = parse_object(&ps, 1, keep);
    else
        root = parse_value(&ps, 0);
    if (!root)
        goto done;
    skip_ws(&ps);
    if (ps.p < ps.end) {
        fail(&ps, ps.p, "trailing characters after JSON value");
        json_free(root);
        root = NULL;
    }
done:
    /* On failure the stacks still hold finished children of unfinished containers. */
    for (size_t i = 0; i < ps.vn; i++)
        json_free(ps.vs[i]);
    for (size_t i = 0; i < ps.mn; i++) /* their keys are offsets in ps.keys */
        json_free(ps.ms[i].val);
    if (ps.vs != ps.vs_small)
        free(ps.vs);
    if (ps.ms != ps.ms_small)
        free(ps.ms);
    buf_free(&ps.scratch);
    buf_free(&ps.keys);
    return root;
}

int json_number_valid(const char *s, size_t len)
{
    const char *p = s, *end = s + len;
    if (p < end && *p == '-')
        p++;
    if (p >= end || *p < '0' || *p > '9')
        return 0;
    if (*p == '0')
        p++;
    else
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9')
            return 0;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            return 0;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    return p == end;
}

/* ------------------------------------------------------------------ writer */

/* The escape scan of json_write_string, one block of input at a time: a mask with
 * one bit per byte to escape ('"', '\\' or below 0x20), exact (no byte flagged
 * spuriously), and the index of the first flagged byte of a mask. ESC_SLACK: the
 * room json_write_string keeps past a slice's worst case for the block copies. */
#if JSON_TEXT_SSE2
#define ESC_BLOCK 16
#define ESC_SLACK (2 * ESC_BLOCK)
typedef unsigned esc_mask;
/* ctl: the control bytes alone (most blocks of JSON text have none, and then every
 * flagged byte only needs a backslash before it). */
static inline esc_mask esc_scan(const unsigned char *p, esc_mask *ctl)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i b = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    __m128i c = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
    *ctl = (unsigned)_mm_movemask_epi8(c);
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c));
}
static inline unsigned esc_first(esc_mask m)
{
    return (unsigned)__builtin_ctz(m);
}
#elif JSON_TEXT_WORDS
#define ESC_BLOCK 8
#define ESC_SLACK (2 * ESC_BLOCK)
typedef uint64_t esc_mask;
/* Bit 7 of each flagged byte; every byte is tested on its own (no carries). */
static inline esc_mask esc_scan(const unsigned char *p, esc_mask *ctl_only)
{
    const uint64_t ones = 0x0101010101010101ULL, lo7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t t = w & lo7;
    uint64_t ctl = t + ones * (0x80 - 0x20); /* bit 7: low 7 bits >= 0x20 */
    uint64_t q = (t ^ (ones * '"')) + lo7;   /* bit 7: low 7 bits are not '"' */
    uint64_t b = (t ^ (ones * '\\')) + lo7;  /* bit 7: low 7 bits are not '\\' */
    *ctl_only = ~(ctl | w) & (ones * 0x80);
    return ~((ctl & q & b) | w) & (ones * 0x80);
}
static inline unsigned esc_first(esc_mask m)
{
    return json_first_flagged(m);
}
#else
#define ESC_SLACK 0
#endif

void json_write_string(buf *out, const char *s, size_t len)
{
    /* Writes straight into the buffer, reserving the worst case (6 bytes out per
     * byte in) one slice of the input at a time: JSON text embedded in a string (an
     * MCP text content) has an escape every few bytes, and a call per escape was
     * most of the cost. A slice is small enough that the room reserved for it stays
     * near what the text needs (SLICE: a multiple of ESC_BLOCK). */
    enum { SLICE = 1024 };
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    buf_reserve(out, (len < SLICE ? len : SLICE) * 6 + ESC_SLACK + 2);
    char *w = out->data + out->len;
    *w++ = '"';
    while (p < end) {
        const unsigned char *stop = end - p > SLICE ? p + SLICE : end;
        out->len = (size_t)(w - out->data);
        buf_reserve(out, (size_t)(stop - p) * 6 + ESC_SLACK + 1);
        w = out->data + out->len;
#ifdef ESC_BLOCK
        /* A block at a time, all of its escapes in one go. The output of input byte
         * p[i] of the block is at o + i, o moving on by what the escapes so far
         * added: the block is copied whole, and after each escape the input from
         * the next byte to keep on is copied again, a block's worth, behind it (a
         * '"' or '\\' gets its backslash and is copied with that rest). Those copies
         * read at most 2 blocks past p (so a block is taken only with another one
         * of input after it) and write at most 7 blocks' worth past w (within the
         * room of 6 bytes per byte of the slice left and ESC_SLACK). */
        size_t blocks = (size_t)(stop - p) / ESC_BLOCK, left = (size_t)(end - p) / ESC_BLOCK;
        if (blocks == left) /* the input's last block is left to the loop below */
            blocks = left ? left - 1 : 0;
        for (const unsigned char *last = p + blocks * ESC_BLOCK; p < last;) {
            esc_mask ctl, m = esc_scan(p, &ctl);
            memcpy(w, p, ESC_BLOCK);
            if (m && !ctl) {
                /* only '"' and '\\': a backslash before each, no byte to look at */
                char *o = w;
                do {
                    unsigned k = esc_first(m);
                    m &= m - 1;
                    o[k] = '\\';
                    memcpy(o + k + 1, p + k, ESC_BLOCK);
                    o++;
                } while (m);
                w = o;
            } else if (m) {
                char *o = w;
                do {
                    unsigned k = esc_first(m);
                    m &= m - 1;
                    unsigned c = p[k];
                    if (c >= 0x20) {
                        o[k] = '\\';
                        o++;
                        memcpy(o + k, p + k, ESC_BLOCK);
                    } else {
                        char *t = json_escape_byte(o + k, c);
                        o = t - k - 1;
                        memcpy(t, p + k + 1, ESC_BLOCK);
                    }
                } while (m);
                w = o;
            }
            w += ESC_BLOCK;
            p += ESC_BLOCK;
        }
#endif
        while (p < stop) {
            unsigned c = *p++;
            if (c >= 0x20 && c != '"' && c != '\\') {
                *w++ = (char)c;
                continue;
            }
            w = json_escape_byte(w, c);
        }
    }
    *w++ = '"';
    out->len = (size_t)(w - out->data);
    out->data[out->len] = '\0';
}

void json_write_double(buf *out, double d)
{
    if (!isfinite(d)) {
        buf_append(out, "null", 4);
        return;
    }
    char t[40];
    int n = double_text(d, t);
    buf_append(out, t, (size_t)n);
    if (!memchr(t, '.', (size_t)n) && !memchr(t, 'e', (size_t)n) && !memchr(t, 'n', (size_t)n))
        buf_append(out, ".0", 2);
}

void json_write_int(buf *out, int64_t i)
{
    char t[24];
    char *p = t + sizeof t;
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0)
        *--p = '-';
    buf_append(out, p, (size_t)(t + sizeof t - p));
}

static int member_cmp(const void *a, const void *b)
{
    const json_member *x = *(const json_member *const *)a, *y = *(const json_member *const *)b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    if (x->klen != y->klen)
        return x->klen < y->klen ? -1 : 1;
    /* Keep duplicates in their stored order so the output is deterministic. */
    return x < y ? -1 : (x > y);
}

void json_write(buf *out, const json_value *v, int canonical)
{
    if (!v) {
        buf_append(out, "null", 4);
        return;
    }
    switch (v->type) {
    case JSON_NULL:
        buf_append(out, "null", 4);
        break;
    case JSON_FALSE:
        buf_append(out, "false", 5);
        break;
    case JSON_TRUE:
        buf_append(out, "true", 4);
        break;
    case JSON_INT:
        json_write_int(out, v->u.i);
        break;
    case JSON_DOUBLE:
        json_write_double(out, v->u.d);
        break;
    case JSON_NUMTEXT:
        buf_append(out, v->u.str.s, v->u.str.len);
        break;
    case JSON_STRING:
        json_write_string(out, v->u.str.s, v->u.str.len);
        break;
    case JSON_ARRAY:
        buf_putc(out, '[');
        for (size_t i = 0; i < v->u.arr.n; i++) {
            if (i)
                buf_putc(out, ',');
            json_write(out, v->u.arr.v[i], canonical);
        }
        buf_putc(out, ']');
        break;
    case JSON_OBJECT: {
        size_t n = v->u.obj.n;
        const json_member **order = NULL;
        if (canonical && n > 1) {
            order = xmalloc(n * sizeof *order);
            for (size_t i = 0; i < n; i++)
                order[i] = &v->u.obj.m[i];
            qsort(order, n, sizeof *order, member_cmp);
        }
        buf_putc(out, '{');
        for (size_t i = 0; i < n; i++) {
            const json_member *m = order ? order[i] : &v->u.obj.m[i];
            if (i)
                buf_putc(out, ',');
            json_write_string(out, m->key, m->klen);
            buf_putc(out, ':');
            json_write(out, m->val, canonical);
        }
        buf_putc(out, '}');
        free(order);
        break;
    }
    }
}

void json_utf8_scrub(char *s)
{
    size_t i = 0, o = 0, n = strlen(s);
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (i + k > n || !json_utf8_valid(s + i, k)) {
            i++;
            continue;
        }
        memmove(s + o, s + i, k);
        o += k;
        i += k;
    }
    s[o] = '\0';
}
