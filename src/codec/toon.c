/* toon: the TOON encoder. See toon.h and docs/toon.md.
 *
 * One pass over the tree, writing straight into the output buffer: no per-value
 * allocation (key folding uses two scratch buffers reused for the whole call). The
 * layout decisions mirror the reference encoder so that the official fixtures
 * match byte for byte. */
#include "toon.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Byte classes for the quoting scan. */
enum {
    C_QUOTE = 1, /* forces quotes: : " \ [ ] { }, controls, the delimiter */
    C_HIGH = 2,  /* first byte of a multi-byte UTF-8 sequence (or an invalid byte) */
    C_ESC = 4    /* needs an escape inside quotes: " \ and controls */
};

typedef struct enc {
    buf *out;
    size_t start_len; /* out->len on entry, restored on error */
    int indent;
    char delim;
    int fold;
    size_t flatten; /* SIZE_MAX = unlimited */
    size_t max_depth;
    int first_line;
    const char *err;
    unsigned char cls[256];
    /* Folding: root keys that contain '.', and the key path from the root object
     * (only tracked when such keys exist, the one case where it matters). */
    const json_value *root;
    size_t *dotted;
    size_t n_dotted;
    buf path;
    buf fkey;
} enc;

/* ------------------------------------------------------------------ output */

static inline void put(enc *e, const char *s, size_t n)
{
    buf *b = e->out;
    if (b->len + n + 1 > b->cap)
        buf_reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

static inline void putch(enc *e, char c)
{
    buf *b = e->out;
    if (b->len + 2 > b->cap)
        buf_reserve(b, 1);
    b->data[b->len++] = c;
}

/* Starts a line at the given depth (lines are joined by LF, none at the end). */
static void line(enc *e, size_t depth)
{
    size_t n = depth * (size_t)e->indent;
    buf *b = e->out;
    if (b->len + n + 2 > b->cap)
        buf_reserve(b, n + 1);
    if (!e->first_line)
        b->data[b->len++] = '\n';
    e->first_line = 0;
    memset(b->data + b->len, ' ', n);
    b->len += n;
}

static void list_line(enc *e, size_t depth)
{
    line(e, depth);
    put(e, "- ", 2);
}

static int fail(enc *e, const char *msg)
{
    if (!e->err)
        e->err = msg;
    return -1;
}

static inline int is_primitive(const json_value *v)
{
    return json_typeof(v) < JSON_ARRAY;
}

/* ------------------------------------------------------------------ strings */

/* Length of the valid UTF-8 sequence at p (RFC 3629), 0 if invalid; *cp gets the
 * code point. */
static size_t utf8_decode(const unsigned char *p, const unsigned char *end, unsigned *cp)
{
    unsigned c = p[0];
    size_t n;
    unsigned v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        n = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* Non-ASCII code points that JavaScript's trim() removes (the reference quotes
 * strings that start or end with one). */
static int is_js_space(unsigned cp)
{
    return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

/* /^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$/i without the sign (strings starting with '-'
 * are quoted anyway). */
static int numeric_like(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == 0)
        return 0;
    if (i < n && s[i] == '.') {
        size_t j = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == j)
            return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t j = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == j)
            return 0;
    }
    return i == n;
}

static const char hexd[] = "0123456789abcdef";

/* Writes s quoted with the §7.1 escapes. */
static void write_quoted(enc *e, const char *s, size_t n)
{
    putch(e, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(e->cls[c] & C_ESC))
            continue;
        put(e, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        switch (c) {
        case '"':
        case '\\':
            esc[1] = (char)c;
            put(e, esc, 2);
            break;
        case '\n':
            put(e, "\\n", 2);
            break;
        case '\r':
            put(e, "\\r", 2);
            break;
        case '\t':
            put(e, "\\t", 2);
            break;
        default:
            esc[1] = 'u';
            esc[4] = hexd[c >> 4];
            esc[5] = hexd[c & 15];
            put(e, esc, 6);
        }
    }
    put(e, s + run, n - run);
    putch(e, '"');
}

/* A string value with delimiter-aware quoting (§7.2). cls carries the delimiter. */
static int write_string(enc *e, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    int quote = n == 0 || s[0] == '-' || s[0] == ' ' || s[n - 1] == ' ';
    unsigned acc = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        unsigned k = e->cls[c];
        if (!(k & C_HIGH)) {
            acc |= k;
            i++;
            continue;
        }
        unsigned cp;
        size_t len = utf8_decode(p + i, end, &cp);
        if (!len)
            return fail(e, "invalid UTF-8 in a string");
        if ((i == 0 || i + len == n) && is_js_space(cp))
            quote = 1;
        i += len;
    }
    if (acc & C_QUOTE)
        quote = 1;
    if (!quote) {
        if (s[0] >= '0' && s[0] <= '9')
            quote = numeric_like(s, n);
        else if (s[0] == 't' || s[0] == 'f' || s[0] == 'n')
            quote = (n == 4 && (memcmp(s, "true", 4) == 0 || memcmp(s, "null", 4) == 0)) ||
                    (n == 5 && memcmp(s, "false", 5) == 0);
    }
    if (quote)
        write_quoted(e, s, n);
    else
        put(e, s, n);
    return 0;
}

/* Keys: unquoted only when /^[A-Za-z_][A-Za-z0-9_.]*$/ (§7.3). */
static int key_unquoted(const char *k, size_t n)
{
    if (n == 0)
        return 0;
    unsigned char c = (unsigned char)k[0];
    if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && c != '_')
        return 0;
    for (size_t i = 1; i < n; i++) {
        c = (unsigned char)k[i];
        if (!(((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.'))
            return 0;
    }
    return 1;
}

/* IdentifierSegment (§1.9): the same without dots. */
static int ident_segment(const char *k, size_t n)
{
    return key_unquoted(k, n) && !memchr(k, '.', n);
}

static int write_key(enc *e, const char *k, size_t n)
{
    if (key_unquoted(k, n)) {
        put(e, k, n);
        return 0;
    }
    if (!json_utf8_valid(k, n))
        return fail(e, "invalid UTF-8 in a key");
    write_quoted(e, k, n);
    return 0;
}

/* ------------------------------------------------------------------ numbers */

static void write_u64(enc *e, uint64_t u, int neg)
{
    char t[24];
    char *p = t + sizeof t;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (neg)
        *--p = '-';
    put(e, p, (size_t)(t + sizeof t - p));
}

static void put_zeros(enc *e, size_t n)
{
    static const char z[] = "00000000000000000000000000000000";
    while (n) {
        size_t k = n < sizeof z - 1 ? n : sizeof z - 1;
        put(e, z, k);
        n -= k;
    }
}

/* Canonical form of a JSON number text, computed on the digits (§2): no exponent
 * when -6 <= p < max(21, k) (p: power of ten of the first significant digit, k:
 * significant digits), no leading or trailing zeros, -0 -> 0; otherwise
 * d.ddde+p. keep_int: an integer text (no fraction or exponent) is kept as written. */
static int write_number_text(enc *e, const char *s, size_t n, int keep_int)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && s[i] == '-')
        neg = 1, i++;
    size_t int_at = i;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    size_t int_len = i - int_at;
    if (int_len == 0 || (int_len > 1 && s[int_at] == '0'))
        return fail(e, "invalid number text");
    size_t frac_at = i, frac_len = 0;
    if (i < n && s[i] == '.') {
        frac_at = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        frac_len = i - frac_at;
        if (frac_len == 0)
            return fail(e, "invalid number text");
    }
    int64_t exp = 0;
    int has_exp = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        has_exp = 1;
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        size_t j = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (exp > 100000000000000LL)
                return fail(e, "number exponent out of range");
            exp = exp * 10 + (s[i] - '0');
            i++;
        }
        if (i == j)
            return fail(e, "invalid number text");
        if (eneg)
            exp = -exp;
    }
    if (i != n)
        return fail(e, "invalid number text");

    if (keep_int && !frac_len && !has_exp) {
        if (int_len == 1 && s[int_at] == '0')
            putch(e, '0');
        else
            put(e, s, n);
        return 0;
    }

    /* Significant digits: the integer digits then the fraction digits, without
     * leading and trailing zeros. They live in up to two pieces of s. */
    const char *a = s + int_at, *b = s + frac_at;
    size_t alen = int_len, blen = frac_len;
    int64_t point = (int64_t)int_len + exp; /* value = 0.DIGITS x 10^point */
    while (alen && *a == '0')
        a++, alen--, point--;
    if (!alen)
        while (blen && *b == '0')
            b++, blen--, point--;
    if (blen)
        while (blen && b[blen - 1] == '0')
            blen--;
    if (!blen)
        while (alen && a[alen - 1] == '0')
            alen--;
    size_t k = alen + blen;
    if (k == 0) {
        putch(e, '0');
        return 0;
    }
    if (neg)
        putch(e, '-');
    int64_t p = point - 1;
    int64_t lim = (int64_t)k > 21 ? (int64_t)k : 21;
    if (p >= -6 && p < lim) {
        if (point <= 0) {
            put(e, "0.", 2);
            put_zeros(e, (size_t)-point);
            put(e, a, alen);
            put(e, b, blen);
        } else if ((size_t)point >= k) {
            put(e, a, alen);
            put(e, b, blen);
            put_zeros(e, (size_t)point - k);
        } else {
            /* The point falls inside the digits. */
            size_t pt = (size_t)point;
            if (pt <= alen) {
                put(e, a, pt);
                putch(e, '.');
                put(e, a + pt, alen - pt);
                put(e, b, blen);
            } else {
                put(e, a, alen);
                put(e, b, pt - alen);
                putch(e, '.');
                put(e, b + (pt - alen), blen - (pt - alen));
            }
        }
        return 0;
    }
    /* Exponent form: first digit, '.', the rest, e+p / e-p. */
    const char *first = alen ? a : b;
    putch(e, *first);
    if (k > 1) {
        putch(e, '.');
        if (alen) {
            put(e, a + 1, alen - 1);
            put(e, b, blen);
        } else {
            put(e, b + 1, blen - 1);
        }
    }
    putch(e, 'e');
    putch(e, p < 0 ? '-' : '+');
    write_u64(e, p < 0 ? (uint64_t)-p : (uint64_t)p, 0);
    return 0;
}

static int write_double(enc *e, double d)
{
    if (!isfinite(d)) {
        put(e, "null", 4);
        return 0;
    }
    /* Integral values in the exact range: plain digits, no formatting round trip. */
    if (d == 0) {
        putch(e, '0');
        return 0;
    }
    if (d == trunc(d) && fabs(d) < 9007199254740992.0) {
        write_u64(e, (uint64_t)fabs(d), d < 0);
        return 0;
    }
    /* Shortest of 15..17 significant digits that reads back, then canonicalised. */
    char t[40];
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(t, sizeof t, "%.*e", prec - 1, d);
        if (strtod(t, NULL) == d)
            break;
    }
    return write_number_text(e, t, (size_t)n, 0);
}

/* ------------------------------------------------------------------ values */

static int write_primitive(enc *e, const json_value *v)
{
    size_t n;
    const char *s;
    switch (json_typeof(v)) {
    case JSON_NULL:
        put(e, "null", 4);
        return 0;
    case JSON_FALSE:
        put(e, "false", 5);
        return 0;
    case JSON_TRUE:
        put(e, "true", 4);
        return 0;
    case JSON_INT: {
        int64_t i = json_get_int(v);
        write_u64(e, i < 0 ? 0 - (uint64_t)i : (uint64_t)i, i < 0);
        return 0;
    }
    case JSON_DOUBLE:
        return write_double(e, json_get_double(v));
    case JSON_NUMTEXT:
        s = json_get_str(v, &n);
        return write_number_text(e, s, n, 1);
    case JSON_STRING:
        s = json_get_str(v, &n);
        return write_string(e, s, n);
    default:
        return fail(e, "not a primitive");
    }
}

/* The member of row named k, preferring the same position (uniform rows keep
 * their key order), else the last one with that name. */
static const json_value *row_get(const json_value *row, size_t pos, const char *k, size_t klen)
{
    const json_value *v;
    return json_key_is(row, pos, k, klen, &v) ? v : json_get_n(row, k, klen);
}

/* §9.3: every element an object with the first element's (non-empty) key set and
 * primitive values only. */
static int tabular(const json_value *arr)
{
    size_t n = json_count(arr);
    if (n == 0)
        return 0;
    const json_value *first = json_at(arr, 0);
    if (json_typeof(first) != JSON_OBJECT)
        return 0;
    size_t nf = json_count(first);
    if (nf == 0)
        return 0;
    for (size_t r = 0; r < n; r++) {
        const json_value *row = json_at(arr, r);
        if (json_typeof(row) != JSON_OBJECT || json_count(row) != nf)
            return 0;
        for (size_t j = 0; j < nf; j++) {
            size_t kl;
            const char *k = json_key_at(first, j, &kl);
            const json_value *v = row_get(row, j, k, kl);
            if (!v || !is_primitive(v))
                return 0;
        }
    }
    return 1;
}

/* key[N<delim?>]{fields}: with key and fields optional. */
static int header(enc *e, const char *key, size_t klen, size_t n, const json_value *fields)
{
    if (key && write_key(e, key, klen) < 0)
        return -1;
    putch(e, '[');
    write_u64(e, n, 0);
    if (e->delim != ',')
        putch(e, e->delim);
    putch(e, ']');
    if (fields) {
        putch(e, '{');
        size_t nf = json_count(fields);
        for (size_t j = 0; j < nf; j++) {
            size_t kl;
            const char *k = json_key_at(fields, j, &kl);
            if (j)
                putch(e, e->delim);
            if (write_key(e, k, kl) < 0)
                return -1;
        }
        putch(e, '}');
    }
    putch(e, ':');
    return 0;
}

static int all_primitive(const json_value *arr)
{
    size_t n = json_count(arr);
    for (size_t i = 0; i < n; i++)
        if (!is_primitive(json_at(arr, i)))
            return 0;
    return 1;
}

/* [N]: v1,v2 (after an optional key already written by the caller). */
static int inline_array(enc *e, const char *key, size_t klen, const json_value *arr)
{
    size_t n = json_count(arr);
    if (header(e, key, klen, n, NULL) < 0)
        return -1;
    if (n)
        putch(e, ' ');
    for (size_t i = 0; i < n; i++) {
        if (i)
            putch(e, e->delim);
        if (write_primitive(e, json_at(arr, i)) < 0)
            return -1;
    }
    return 0;
}

static int rows(enc *e, const json_value *arr, size_t depth)
{
    const json_value *first = json_at(arr, 0);
    size_t n = json_count(arr), nf = json_count(first);
    for (size_t r = 0; r < n; r++) {
        const json_value *row = json_at(arr, r);
        line(e, depth);
        for (size_t j = 0; j < nf; j++) {
            size_t kl;
            const char *k = json_key_at(first, j, &kl);
            if (j)
                putch(e, e->delim);
            if (write_primitive(e, row_get(row, j, k, kl)) < 0)
                return -1;
        }
    }
    return 0;
}

static int encode_object(enc *e, const json_value *obj, size_t from, size_t depth, size_t nest,
                         size_t flatten, int rootchain);
static int list_item(enc *e, const json_value *v, size_t depth, size_t nest);

static int encode_array(enc *e, const char *key, size_t klen, const json_value *arr, size_t depth,
                        size_t nest)
{
    if (nest > e->max_depth)
        return fail(e, "nesting too deep");
    size_t n = json_count(arr);
    line(e, depth);
    if (n == 0) {
        if (key) {
            if (write_key(e, key, klen) < 0)
                return -1;
            put(e, ": []", 4);
        } else {
            put(e, "[]", 2);
        }
        return 0;
    }
    int prim = 1, arrs = 1, objs = 1;
    for (size_t i = 0; i < n; i++) {
        json_type t = json_typeof(json_at(arr, i));
        prim &= t < JSON_ARRAY;
        arrs &= t == JSON_ARRAY;
        objs &= t == JSON_OBJECT;
    }
    if (prim)
        return inline_array(e, key, klen, arr);
    if (arrs) {
        int inner_prim = 1;
        for (size_t i = 0; i < n && inner_prim; i++)
            inner_prim = all_primitive(json_at(arr, i));
        if (inner_prim) {
            if (header(e, key, klen, n, NULL) < 0)
                return -1;
            for (size_t i = 0; i < n; i++) {
                list_line(e, depth + 1);
                if (inline_array(e, NULL, 0, json_at(arr, i)) < 0)
                    return -1;
            }
            return 0;
        }
    }
    if (objs && tabular(arr)) {
        if (header(e, key, klen, n, json_at(arr, 0)) < 0)
            return -1;
        return rows(e, arr, depth + 1);
    }
    if (header(e, key, klen, n, NULL) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (list_item(e, json_at(arr, i), depth + 1, nest + 1) < 0)
            return -1;
    return 0;
}

/* An object as a list item (§10): the first field on the hyphen line. */
static int object_item(enc *e, const json_value *obj, size_t depth, size_t nest)
{
    size_t n = json_count(obj);
    if (n == 0) {
        line(e, depth);
        putch(e, '-');
        return 0;
    }
    size_t klen;
    const char *key = json_key_at(obj, 0, &klen);
    const json_value *v = json_val_at(obj, 0);
    json_type t = json_typeof(v);
    list_line(e, depth);
    if (t == JSON_ARRAY && tabular(v)) {
        if (header(e, key, klen, json_count(v), json_at(v, 0)) < 0 || rows(e, v, depth + 2) < 0)
            return -1;
    } else if (t < JSON_ARRAY) {
        if (write_key(e, key, klen) < 0)
            return -1;
        put(e, ": ", 2);
        if (write_primitive(e, v) < 0)
            return -1;
    } else if (t == JSON_ARRAY) {
        size_t m = json_count(v);
        if (write_key(e, key, klen) < 0)
            return -1;
        if (m == 0) {
            put(e, ": []", 4);
        } else if (all_primitive(v)) {
            if (inline_array(e, NULL, 0, v) < 0)
                return -1;
        } else {
            if (header(e, NULL, 0, m, NULL) < 0)
                return -1;
            if (nest + 1 > e->max_depth)
                return fail(e, "nesting too deep");
            for (size_t i = 0; i < m; i++)
                if (list_item(e, json_at(v, i), depth + 2, nest + 2) < 0)
                    return -1;
        }
    } else {
        if (write_key(e, key, klen) < 0)
            return -1;
        putch(e, ':');
        if (json_count(v) && encode_object(e, v, 0, depth + 2, nest + 1, e->flatten, 0) < 0)
            return -1;
    }
    return n > 1 ? encode_object(e, obj, 1, depth + 1, nest, e->flatten, 0) : 0;
}

static int list_item(enc *e, const json_value *v, size_t depth, size_t nest)
{
    if (nest > e->max_depth)
        return fail(e, "nesting too deep");
    json_type t = json_typeof(v);
    if (t < JSON_ARRAY) {
        list_line(e, depth);
        return write_primitive(e, v);
    }
    if (t == JSON_OBJECT)
        return object_item(e, v, depth, nest);
    list_line(e, depth);
    if (all_primitive(v))
        return inline_array(e, NULL, 0, v);
    size_t n = json_count(v);
    if (header(e, NULL, 0, n, NULL) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (list_item(e, json_at(v, i), depth + 1, nest + 1) < 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------ key folding */

static int sibling_named(const json_value *obj, size_t from, const char *k, size_t klen)
{
    size_t n = json_count(obj), l;
    for (size_t i = from; i < n; i++) {
        const char *s = json_key_at(obj, i, &l);
        if (l == klen && memcmp(s, k, klen) == 0)
            return 1;
    }
    return 0;
}

/* Whether path + "." + k (or k at the root) is one of the root's literal dotted keys. */
static int root_collision(enc *e, const char *k, size_t klen)
{
    size_t save = e->path.len;
    if (save)
        buf_putc(&e->path, '.');
    buf_append(&e->path, k, klen);
    int hit = 0;
    for (size_t i = 0; i < e->n_dotted && !hit; i++) {
        size_t l;
        const char *s = json_key_at(e->root, e->dotted[i], &l);
        hit = l == e->path.len && memcmp(s, e->path.data, l) == 0;
    }
    e->path.len = save;
    return hit;
}

static void path_push(enc *e, const char *k, size_t klen, size_t *save)
{
    *save = e->path.len;
    if (e->n_dotted) {
        if (*save)
            buf_putc(&e->path, '.');
        buf_append(&e->path, k, klen);
    }
}

/* Tries §13.4 safe folding of key -> v. Returns 1 when it wrote the member, 0 when
 * the member is to be written normally, -1 on error. */
static int try_fold(enc *e, const char *key, size_t klen, const json_value *v,
                    const json_value *sib, size_t from, size_t depth, size_t nest, size_t flatten,
                    int rootchain)
{
    size_t segs = 1;
    const json_value *cur = v;
    while (segs < flatten && json_typeof(cur) == JSON_OBJECT && json_count(cur) == 1) {
        segs++;
        cur = json_val_at(cur, 0);
    }
    if (segs < 2 || !ident_segment(key, klen))
        return 0;
    e->fkey.len = 0;
    buf_append(&e->fkey, key, klen);
    const json_value *o = v;
    for (size_t i = 1; i < segs; i++) {
        size_t l;
        const char *s = json_key_at(o, 0, &l);
        if (!ident_segment(s, l))
            return 0;
        buf_putc(&e->fkey, '.');
        buf_append(&e->fkey, s, l);
        o = json_val_at(o, 0);
    }
    const char *fk = e->fkey.data;
    size_t fkl = e->fkey.len;
    if (sibling_named(sib, from, fk, fkl))
        return 0;
    if (rootchain && e->n_dotted && root_collision(e, fk, fkl))
        return 0;
    json_type t = json_typeof(cur);
    if (t == JSON_ARRAY) {
        /* encode_array writes the key before anything can reuse fkey. */
        return encode_array(e, fk, fkl, cur, depth, nest + 1) < 0 ? -1 : 1;
    }
    line(e, depth);
    put(e, fk, fkl); /* identifier segments: never quoted */
    if (t < JSON_ARRAY) {
        put(e, ": ", 2);
        return write_primitive(e, cur) < 0 ? -1 : 1;
    }
    putch(e, ':');
    if (json_count(cur) == 0)
        return 1;
    size_t save = e->path.len;
    if (rootchain && e->n_dotted) {
        if (save)
            buf_putc(&e->path, '.');
        buf_append(&e->path, fk, fkl);
    }
    size_t rest = flatten == SIZE_MAX ? SIZE_MAX : flatten - segs;
    int rc = encode_object(e, cur, 0, depth + 1, nest + 1, rest, rootchain);
    e->path.len = save;
    return rc < 0 ? -1 : 1;
}

/* ------------------------------------------------------------------ objects */

static int encode_member(enc *e, const json_value *obj, size_t i, size_t from, size_t depth,
                         size_t nest, size_t flatten, int rootchain)
{
    size_t klen;
    const char *key = json_key_at(obj, i, &klen);
    const json_value *v = json_val_at(obj, i);
    json_type t = json_typeof(v);
    if (e->fold && t == JSON_OBJECT) {
        int rc = try_fold(e, key, klen, v, obj, from, depth, nest, flatten, rootchain);
        if (rc)
            return rc < 0 ? -1 : 0;
    }
    if (t == JSON_ARRAY)
        return encode_array(e, key, klen, v, depth, nest + 1);
    line(e, depth);
    if (write_key(e, key, klen) < 0)
        return -1;
    if (t < JSON_ARRAY) {
        put(e, ": ", 2);
        return write_primitive(e, v);
    }
    putch(e, ':');
    if (json_count(v) == 0)
        return 0;
    size_t save = 0;
    if (rootchain)
        path_push(e, key, klen, &save);
    int rc = encode_object(e, v, 0, depth + 1, nest + 1, flatten, rootchain);
    if (rootchain)
        e->path.len = save;
    return rc;
}

/* Members from index `from` on; the siblings for collision checks are the same
 * range (as the reference sees them). */
static int encode_object(enc *e, const json_value *obj, size_t from, size_t depth, size_t nest,
                         size_t flatten, int rootchain)
{
    if (nest > e->max_depth)
        return fail(e, "nesting too deep");
    size_t n = json_count(obj);
    for (size_t i = from; i < n; i++)
        if (encode_member(e, obj, i, from, depth, nest, flatten, rootchain) < 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------ entry points */

void toon_options_init(toon_options *o)
{
    memset(o, 0, sizeof *o);
    o->indent = 2;
    o->delimiter = ',';
    o->key_folding = TOON_FOLD_OFF;
    o->flatten_depth = TOON_FLATTEN_ALL;
    o->max_depth = 1024;
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
}

int toon_options_from_json(const json_value *opts, toon_options *o, char *err, size_t errlen)
{
    int rc = -1;
    const char *msg = NULL;
    if (!opts || json_typeof(opts) == JSON_NULL) {
        rc = 0;
        goto done;
    }
    if (json_typeof(opts) != JSON_OBJECT) {
        msg = "options must be an object";
        goto done;
    }
    for (size_t i = 0; i < json_count(opts); i++) {
        size_t kl, sl = 0;
        const char *k = json_key_at(opts, i, &kl);
        const json_value *v = json_val_at(opts, i);
        json_type t = json_typeof(v);
        const char *s = t == JSON_STRING ? json_get_str(v, &sl) : NULL;
        if (strcmp(k, "indent") == 0 || strcmp(k, "indentSize") == 0) {
            if (t != JSON_INT || json_get_int(v) < 1 || json_get_int(v) > 16) {
                msg = "indent must be an integer from 1 to 16";
                goto done;
            }
            o->indent = (int)json_get_int(v);
        } else if (strcmp(k, "delimiter") == 0) {
            if (!s || sl != 1 || (s[0] != ',' && s[0] != '\t' && s[0] != '|')) {
                msg = "delimiter must be \",\", \"\\t\" or \"|\"";
                goto done;
            }
            o->delimiter = s[0];
        } else if (strcmp(k, "keyFolding") == 0) {
            if (s && strcmp(s, "off") == 0) {
                o->key_folding = TOON_FOLD_OFF;
            } else if (s && strcmp(s, "safe") == 0) {
                o->key_folding = TOON_FOLD_SAFE;
            } else {
                msg = "keyFolding must be \"off\" or \"safe\"";
                goto done;
            }
        } else if (strcmp(k, "flattenDepth") == 0) {
            if (t == JSON_NULL) {
                o->flatten_depth = TOON_FLATTEN_ALL;
            } else if (t == JSON_INT && json_get_int(v) >= 0) {
                int64_t d = json_get_int(v);
                o->flatten_depth = d > 1000000 ? 1000000 : (int)d;
            } else {
                msg = "flattenDepth must be a non-negative integer";
                goto done;
            }
        }
    }
    rc = 0;
done:
    if (msg)
        set_err(err, errlen, msg);
    return rc;
}

int toon_encode(buf *out, const json_value *v, const toon_options *opts, char *err, size_t errlen)
{
    toon_options def;
    if (!opts) {
        toon_options_init(&def);
        opts = &def;
    }
    enc e;
    memset(&e, 0, sizeof e);
    e.out = out;
    e.start_len = out->len;
    e.first_line = 1;
    e.indent = opts->indent ? opts->indent : 2;
    e.delim = opts->delimiter ? opts->delimiter : ',';
    e.fold = opts->key_folding == TOON_FOLD_SAFE;
    e.flatten = opts->flatten_depth < 0 ? SIZE_MAX : (size_t)opts->flatten_depth;
    e.max_depth = opts->max_depth ? opts->max_depth : 1024;
    int rc = -1;
    if (!v) {
        fail(&e, "no value");
        goto done;
    }
    if (e.indent < 1 || e.indent > 16) {
        fail(&e, "indent must be from 1 to 16");
        goto done;
    }
    if (e.delim != ',' && e.delim != '\t' && e.delim != '|') {
        fail(&e, "delimiter must be ',', '\\t' or '|'");
        goto done;
    }
    if (opts->key_folding != TOON_FOLD_OFF && opts->key_folding != TOON_FOLD_SAFE) {
        fail(&e, "unknown key_folding mode");
        goto done;
    }
    for (int c = 0; c < 0x20; c++)
        e.cls[c] = C_QUOTE | C_ESC;
    for (int c = 0x80; c < 0x100; c++)
        e.cls[c] = C_HIGH;
    e.cls['"'] = e.cls['\\'] = C_QUOTE | C_ESC;
    e.cls[':'] = e.cls['['] = e.cls[']'] = e.cls['{'] = e.cls['}'] = C_QUOTE;
    e.cls[(unsigned char)e.delim] |= C_QUOTE;
    buf_reserve(out, 256);

    json_type t = json_typeof(v);
    if (t < JSON_ARRAY) {
        rc = write_primitive(&e, v);
    } else if (t == JSON_ARRAY) {
        rc = encode_array(&e, NULL, 0, v, 0, 1);
    } else {
        size_t n = json_count(v);
        if (e.fold) {
            e.root = v;
            for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *k = json_key_at(v, i, &l);
                if (memchr(k, '.', l)) {
                    if (!e.dotted)
                        e.dotted = xmalloc(n * sizeof *e.dotted);
                    e.dotted[e.n_dotted++] = i;
                }
            }
        }
        rc = encode_object(&e, v, 0, 0, 1, e.flatten, 1);
    }
done:
    if (rc < 0) {
        out->len = e.start_len;
        set_err(err, errlen, e.err ? e.err : "encoding failed");
    }
    if (out->data)
        out->data[out->len] = '\0';
    free(e.dotted);
    buf_free(&e.path);
    buf_free(&e.fkey);
    return rc < 0 ? -1 : 0;
}
