/* tokproxy: the token estimate (tokproxy.h). */
#include "tokproxy.h"

static int is_word(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int is_break(unsigned char c)
{
    return c == '\n' || c == '\r' || c == '\t';
}

size_t tokproxy_count(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0, i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t j = i + 1;
        if (is_word(c)) {
            while (j < len && is_word(p[j]))
                j++;
            n += 1 + (j - i - 1) / 6;
        } else if (is_digit(c)) {
            while (j < len && is_digit(p[j]))
                j++;
            n += (j - i + 2) / 3;
        } else if (c == ' ') {
            while (j < len && p[j] == ' ')
                j++;
            if (!(j - i == 1 && j < len && (is_word(p[j]) || is_digit(p[j]))))
                n++; /* a single space before a word belongs to it */
        } else if (is_break(c)) {
            while (j < len && is_break(p[j]))
                j++;
            n++;
        } else if (c < 0x80) {
            while (j < len && p[j] < 0x80 && p[j] > ' ' && !is_word(p[j]) && !is_digit(p[j]))
                j++;
            n += 1 + (j - i - 1) / 3;
        } else {
            j = i + (c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1);
            n++;
        }
        i = j;
    }
    return n;
}

int tokproxy_prefer(const char *text, size_t text_len, const char *json, size_t json_len)
{
    return tokproxy_count(text, text_len) * 100 <= tokproxy_count(json, json_len) * TOKPROXY_PERCENT;
}
