/* json_text: the byte-level steps of JSON text that both codec paths take - the
 * tree parser and writer (json.c) and the direct Lua decoder and encoder
 * (json_lua.c) - so that the two cannot drift apart (the equivalence tests and the
 * differential fuzz target hold them to identical output). Inline: they run per
 * byte or per escape on the hot path. Nothing here allocates except through buf. */
#ifndef CL_JSON_TEXT_H
#define CL_JSON_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The UTF-8 sequence at p (p[0] >= 0x80; RFC 3629: no overlongs, surrogates or
 * > U+10FFFF): its length, or -(k + 1) where byte k of it is the first bad one. */
static inline int json_utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return -1;
    }
    if (end - p < 2 || p[1] < lo || p[1] > hi)
        return -2;
    for (int k = 2; k < n; k++) {
        if (end - p <= k || (p[k] & 0xC0) != 0x80)
            return -(k + 1);
    }
    return n;
}

/* The four hex digits at p as *out; -1 if one is not a hex digit. */
static inline int json_hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* Appends code point cp (<= U+10FFFF, not a surrogate) as UTF-8. */
static inline void json_put_utf8(buf *b, unsigned cp)
{
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    buf_append(b, t, n);
}

/* json_utf8_seq with the common case first: a 3-byte sequence from E1..EF but ED
 * (CJK text), whose second and third bytes need no range check. */
static inline int json_utf8_seq_fast(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    if (c >= 0xE1 && c != 0xED && c <= 0xEF && end - p >= 3 && (p[1] & 0xC0) == 0x80 &&
        (p[2] & 0xC0) == 0x80)
        return 3;
    return json_utf8_seq(p, end);
}

/* Eight bytes of text at a time (little-endian only: a byte's borrow then runs
 * towards the later bytes, so the first flagged byte is exact). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define JSON_TEXT_WORDS 1
#else
#define JSON_TEXT_WORDS 0
#endif

/* Bit 7 of each byte of w (8 bytes of text as loaded by memcpy) set for the first
 * byte below 0x20, '"' or '\\' (with high: or 0x80 and above); bytes after it may be
 * flagged spuriously, none before it. 0: none of the eight. */
static inline uint64_t json_special_mask(uint64_t w, int high)
{
    const uint64_t ones = 0x0101010101010101ULL, hb = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t m = (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & hb;
    return high ? m | (w & hb) : m;
}

/* json_special_mask(w, 1) in fewer operations: with the high bytes flagged, a
 * byte's "x - 1 has bit 7" test needs no "and x has not". */
static inline uint64_t json_special_mask_hi(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, hb = 0x8080808080808080ULL;
    return ((w - ones * 0x20) | w | ((w ^ (ones * '"')) - ones) | ((w ^ (ones * '\\')) - ones)) &
           hb;
}

/* Sixteen bytes at a time where the compiler has SSE2: bit i set for each byte i of
 * the 16 at p below 0x20, '"' or '\\' (with high: or 0x80 and above), exactly (no
 * byte flagged spuriously). */
#if defined(__SSE2__)
#include <emmintrin.h>
#define JSON_TEXT_SSE2 1
static inline unsigned json_special16(const unsigned char *p, int high)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i b = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    /* signed: 0x80 and above count as below 0x20; unsigned: min(v, 0x1f) == v */
    __m128i c = high ? _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))
                     : _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c));
}
#else
#define JSON_TEXT_SSE2 0
#endif

/* The index (0..7) of the first flagged byte of a non-zero json_special_mask. */
static inline unsigned json_first_flagged(uint64_t m)
{
    return (unsigned)__builtin_ctzll(m) >> 3;
}

/* Writes the escape of byte c ('"', '\\' or below 0x20) at w, which has room for
 * 6 bytes; returns the position after it. */
static inline char *json_escape_byte(char *w, unsigned c)
{
    static const char hex[] = "0123456789abcdef";
    *w++ = '\\';
    switch (c) {
    case '"':
        *w++ = '"';
        break;
    case '\\':
        *w++ = '\\';
        break;
    case '\b':
        *w++ = 'b';
        break;
    case '\f':
        *w++ = 'f';
        break;
    case '\n':
        *w++ = 'n';
        break;
    case '\r':
        *w++ = 'r';
        break;
    case '\t':
        *w++ = 't';
        break;
    default:
        *w++ = 'u';
        *w++ = '0';
        *w++ = '0';
        *w++ = hex[c >> 4];
        *w++ = hex[c & 15];
    }
    return w;
}

#endif
