/* tokproxy: the token estimate (tokproxy.h). */
#include "tokproxy.h"

#include <stdint.h>

/* Byte classes: a run is one class from its first byte on (see tokproxy.h). */
enum { C_WORD = 1, C_DIGIT, C_SPACE, C_BREAK, C_PUNCT, C_CTRL, C_HIGH };

#define R4(x) x, x, x, x
#define R8(x) R4(x), R4(x)
#define R16(x) R8(x), R8(x)
/* C_PUNCT: printable ASCII (past the space) that is neither a word byte nor a digit,
 * and DEL - the bytes that continue a run of punctuation; C_CTRL: the other control
 * bytes, which start such a run but do not continue one. */
static const uint8_t cls[256] = {
    /* 0x00 */ R8(C_CTRL), C_CTRL, C_BREAK, C_BREAK, C_CTRL, C_CTRL, C_BREAK, C_CTRL, C_CTRL,
    /* 0x10 */ R16(C_CTRL),
    /* 0x20 */ C_SPACE, R8(C_PUNCT), R4(C_PUNCT), C_PUNCT, C_PUNCT, C_PUNCT,
    /* 0x30 */ R8(C_DIGIT), C_DIGIT, C_DIGIT, R4(C_PUNCT), C_PUNCT, C_PUNCT,
    /* 0x40 */ C_PUNCT, R8(C_WORD), R4(C_WORD), C_WORD, C_WORD, C_WORD,
    /* 0x50 */ R8(C_WORD), C_WORD, C_WORD, C_WORD, R4(C_PUNCT), C_WORD,
    /* 0x60 */ C_PUNCT, R8(C_WORD), R4(C_WORD), C_WORD, C_WORD, C_WORD,
    /* 0x70 */ R8(C_WORD), C_WORD, C_WORD, C_WORD, R4(C_PUNCT), C_PUNCT,
    /* 0x80 */ R16(C_HIGH), R16(C_HIGH), R16(C_HIGH), R16(C_HIGH),
    R16(C_HIGH), R16(C_HIGH), R16(C_HIGH), R16(C_HIGH),
};

/* The estimate of s, or a number at least cap once the count reaches cap (it is
 * looked at after each run of punctuation, which every JSON text has between its
 * tokens): a count only grows, run by run, so a prefix's count is a lower bound of
 * the whole's. */
static size_t count_upto(const char *s, size_t len, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;
    size_t n = 0;
    while (p < end) {
        const unsigned char *q = p + 1;
        switch (cls[*p]) {
        case C_WORD:
            while (q < end && cls[*q] == C_WORD)
                q++;
            n += 1 + (size_t)(q - p - 1) / 6;
            break;
        case C_DIGIT:
            while (q < end && cls[*q] == C_DIGIT)
                q++;
            n += (size_t)(q - p + 2) / 3;
            break;
        case C_SPACE:
            while (q < end && *q == ' ')
                q++;
            /* a single space before a word or a number belongs to it */
            if (!(q - p == 1 && q < end && (cls[*q] == C_WORD || cls[*q] == C_DIGIT)))
                n++;
            break;
        case C_BREAK:
            while (q < end && cls[*q] == C_BREAK)
                q++;
            n++;
            break;
        case C_PUNCT:
        case C_CTRL:
            while (q < end && cls[*q] == C_PUNCT)
                q++;
            n += 1 + (size_t)(q - p - 1) / 3;
            if (n >= cap)
                return n;
            break;
        default: { /* a code point of 2 to 4 bytes (a stray byte: 1) */
            unsigned char c = *p;
            size_t step = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
            q = (size_t)(end - p) > step ? p + step : end;
            n++;
            break;
        }
        }
        p = q;
    }
    return n;
}

size_t tokproxy_count(const char *s, size_t len)
{
    return count_upto(s, len, SIZE_MAX);
}

int tokproxy_prefer(const char *text, size_t text_len, const char *json, size_t json_len)
{
    /* text wins when count(text) * 100 <= count(json) * TOKPROXY_PERCENT, that is
     * when count(json) reaches the smallest whole number that satisfies it: json is
     * counted only that far. */
    size_t t = tokproxy_count(text, text_len);
    size_t need = (t * 100 + TOKPROXY_PERCENT - 1) / TOKPROXY_PERCENT;
    return count_upto(json, json_len, need) >= need;
}
