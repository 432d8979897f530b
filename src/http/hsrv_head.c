/* hsrv_head: the head indexing and chunked decoding of the HTTP/1.1 server (hsrv.h):
 * pure functions over bytes the framing check (framing.h) accepted, apart from the
 * server so that the unit tests and the framing fuzz target reach them alone. */
#include <stdint.h>
#include <string.h>

#include "hsrv.h"

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* w with its ASCII upper-case letters made lower case, eight bytes at once: a byte
 * gets 0x20 when it is below 0x80, from 'A' and not past 'Z' (each byte tested on its
 * low seven bits, no carries between bytes). */
static uint64_t fold8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t low7 = w & ~highs;
    uint64_t ge_a = low7 + ones * (0x80 - 'A'); /* bit 7: low 7 bits >= 'A' */
    uint64_t gt_z = low7 + ones * (0x7f - 'Z'); /* bit 7: low 7 bits > 'Z' */
    uint64_t upper = ge_a & ~gt_z & ~w & highs;
    return w | upper >> 2;
}

/* Every request looks up a dozen names: eight bytes compared at a time, not one
 * (inlined in each lookup, as a call it costs as much as the comparison). */
static inline __attribute__((always_inline)) int ieqn(const char *a, const char *b, size_t n)
{
    size_t i = 0;
    if (n >= 8) {
        /* the last word overlaps the one before it when n is not a multiple of 8 */
        for (;; i += 8) {
            if (i + 8 > n)
                i = n - 8;
            uint64_t x, y;
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y && fold8(x) != fold8(y))
                return 0;
            if (i + 8 == n)
                return 1;
        }
    }
    for (; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return 0;
    return 1;
}

int hsrv_parse_head(char *buf, size_t len, hsrv_head *h)
{
    h->n_headers = 0;
    h->lengths = 0;
    h->query = NULL;
    h->absolute = 0;
    char *nl = memchr(buf, '\n', len);
    if (!nl)
        return -1;
    /* the request line, checked by framing_check_head: METHOD SP target SP version */
    char *line = buf, *sp1 = memchr(line, ' ', (size_t)(nl - line));
    size_t mlen = (size_t)(sp1 - line);
    memcpy(h->method, line, mlen < sizeof h->method ? mlen : sizeof h->method - 1);
    h->method[mlen < sizeof h->method ? mlen : sizeof h->method - 1] = '\0';
    char *target = sp1 + 1, *sp2 = memchr(target, ' ', (size_t)(nl - target));
    h->http11 = sp2[8] == '1';
    *sp2 = '\0';
    char *path = target;
    if (target[0] != '/' && target[0] != '*') {
        /* absolute-form: the path starts after the authority */
        h->absolute = 1;
        char *a = strstr(target, "://");
        path = a ? a + 3 : target;
        path += strcspn(path, "/?");
    }
    char *q = strchr(path, '?');
    if (q) {
        h->query = q + 1;
        if (q == path) { /* "http://host?x": an empty path */
            static char empty[1];
            path = empty;
        } else {
            *q = '\0';
        }
    }
    h->path = path;
    size_t pos = (size_t)(nl - buf) + 1;
    while (pos < len) {
        char *l = buf + pos, *e = memchr(l, '\n', len - pos);
        size_t n = (size_t)(e - l);
        pos += n + 1;
        if (n && l[n - 1] == '\r')
            n--;
        if (n == 0)
            break;
        if (h->n_headers == HSRV_MAX_HEADERS)
            return -1;
        char *colon = memchr(l, ':', n);
        size_t v = (size_t)(colon - l) + 1, end = n;
        /* trimmed as framing.c reads it: leading spaces, trailing spaces and tabs */
        while (v < end && l[v] == ' ')
            v++;
        while (end > v && (l[end - 1] == ' ' || l[end - 1] == '\t'))
            end--;
        l[end] = '\0';
        hsrv_header *hd = &h->headers[h->n_headers++];
        hd->name = l;
        hd->name_len = (size_t)(colon - l);
        hd->value = l + v;
        h->lengths |= 1ull << (hd->name_len & 63);
    }
    return 0;
}

const char *hsrv_head_find(const hsrv_head *h, const char *name)
{
    size_t n = strlen(name);
    if (!(h->lengths & (1ull << (n & 63))))
        return NULL;
    unsigned char f = (unsigned char)lower((unsigned char)name[0]);
    for (size_t i = 0; i < h->n_headers; i++) {
        const hsrv_header *hd = &h->headers[i];
        if (hd->name_len == n && (unsigned char)lower((unsigned char)hd->name[0]) == f &&
            ieqn(hd->name, name, n))
            return hd->value;
    }
    return NULL;
}

unsigned hsrv_head_connection(const hsrv_head *h)
{
    unsigned opts = 0;
    if (!(h->lengths & (1ull << 10)))
        return 0;
    for (size_t i = 0; i < h->n_headers; i++) {
        const hsrv_header *hd = &h->headers[i];
        if (hd->name_len != 10 || lower((unsigned char)hd->name[0]) != 'c' ||
            !ieqn(hd->name, "Connection", 10))
            continue;
        /* a comma-separated list: blanks around its elements ignored */
        for (const char *v = hd->value;;) {
            const char *e = strchr(v, ',');
            const char *a = v, *b = e ? e : v + strlen(v);
            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            size_t n = (size_t)(b - a);
            if (n == 5 && ieqn(a, "close", 5))
                opts |= HSRV_CONN_CLOSE;
            else if (n == 10 && ieqn(a, "keep-alive", 10))
                opts |= HSRV_CONN_KEEP_ALIVE;
            if (!e)
                break;
            v = e + 1;
        }
    }
    return opts;
}

static int hexval(unsigned char c)
{
    return c <= '9' ? c - '0' : lower(c) - 'a' + 10;
}

size_t hsrv_dechunk(char *p, size_t n)
{
    size_t r = 0, w = 0;
    for (;;) {
        size_t size = 0;
        while (r < n && p[r] != '\r' && p[r] != '\n')
            size = size * 16 + (size_t)hexval((unsigned char)p[r++]);
        r += r < n && p[r] == '\r' ? 2 : 1;
        if (size == 0 || r + size > n)
            return w;
        memmove(p + w, p + r, size);
        w += size;
        r += size;
        r += r < n && p[r] == '\r' ? 2 : 1;
    }
}
