/* upstream_req: checks and encodings of a tool's upstream request (upstream_req.h). */
#define _GNU_SOURCE /* qsort_r */
#include "upstream_req.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Byte classes, one table lookup per byte (these run on every ctx.http call): RFC 3986
 * unreserved, path characters (unreserved, sub-delims, ':', '@', '/' and '%'), and
 * RFC 9110 token characters. ASCII only, whatever the locale. */
enum { C_UNRESERVED = 1, C_PATH = 2, C_TCHAR = 4 };
static unsigned char char_class[256];

static void classes_init(void)
{
    static int ready;
    if (ready)
        return;
    for (int c = 0; c < 128; c++) {
        int alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (alnum || (c && strchr("-._~", c)))
            char_class[c] |= C_UNRESERVED;
        if (alnum || (c && strchr("-._~!$&'()*+,;=:@/%", c)))
            char_class[c] |= C_PATH;
        if (alnum || (c && strchr("!#$%&'*+-.^_`|~", c)))
            char_class[c] |= C_TCHAR;
    }
    ready = 1;
}

int upstream_method_valid(const char *m)
{
    return m && (!strcmp(m, "GET") || !strcmp(m, "POST") || !strcmp(m, "PUT") ||
                 !strcmp(m, "PATCH") || !strcmp(m, "DELETE") || !strcmp(m, "HEAD"));
}

const char *upstream_check_path(const char *p)
{
    const char *seg;
    if (p[0] != '/')
        return "path must start with '/'";
    for (seg = p; *seg;) {
        const char *end = strchr(seg + 1, '/');
        size_t n = end ? (size_t)(end - seg - 1) : strlen(seg + 1);
        const char *s = seg + 1;
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return "path must not contain '.' or '..' segments";
        if ((n == 3 && strncasecmp(s, "%2e", 3) == 0) ||
            (n == 4 && (strncasecmp(s, ".%2e", 4) == 0 || strncasecmp(s, "%2e.", 4) == 0)) ||
            (n == 6 && strncasecmp(s, "%2e%2e", 6) == 0))
            return "path must not contain encoded '.' or '..' segments";
        if (!end)
            break;
        seg = end;
    }
    classes_init();
    for (; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (!(char_class[ch] & C_PATH))
            return "path contains a character that must be percent-encoded (or use query=)";
        if (ch == '%' && !(isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])))
            return "path contains an invalid percent-encoding";
    }
    return NULL;
}

#define RH(lit)                                                                                    \
    {                                                                                              \
        lit, sizeof(lit) - 1                                                                       \
    }
static const struct {
    const char *name;
    size_t len;
} RESERVED_HEADERS[] = {
    RH("authorization"),   RH("host"),           RH("x-account-id"),
    RH("x-account-type"),  RH("x-tenant-id"),    RH("x-business-domain"),
    RH("bkn-request-id"),  RH("x-request-id"),   RH("traceparent"),
    RH("tracestate"),      RH("baggage"),
    RH("accept-language"), RH("content-length"), RH("transfer-encoding"),
    RH("connection"),      RH("cookie"),
};
#undef RH

int upstream_header_reserved(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof RESERVED_HEADERS / sizeof RESERVED_HEADERS[0]; i++)
        if (RESERVED_HEADERS[i].len == n && str_ieq(name, RESERVED_HEADERS[i].name))
            return 1; /* lengths first: most names differ there */
    return 0;
}

int upstream_header_name_valid(const char *s)
{
    if (!*s)
        return 0;
    classes_init();
    for (; *s; s++)
        if (!(char_class[(unsigned char)*s] & C_TCHAR))
            return 0;
    return 1;
}

int upstream_header_value_valid(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0')
            return 0;
    return 1;
}

void upstream_pct_encode(buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    buf_reserve(b, len * 3); /* written in place: at most three bytes per byte */
    classes_init();
    char *o = b->data + b->len;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (char_class[ch] & C_UNRESERVED) {
            *o++ = (char)ch;
        } else {
            o[0] = '%';
            o[1] = hex[ch >> 4];
            o[2] = hex[ch & 15];
            o += 3;
        }
    }
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';
}

/* Orders indices of pairs by key, then by index (a stable order). */
static int cmp_pair(const void *a, const void *b, void *arg)
{
    const upstream_query_pair *p = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(p[i].key, p[j].key);
    return c ? c : (i > j) - (i < j);
}

void upstream_query_append(buf *url, const upstream_query_pair *pairs, size_t n)
{
    size_t small[16];
    size_t *order = n <= 16 ? small : xmalloc(n * sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    if (n > 1)
        qsort_r(order, n, sizeof *order, cmp_pair, (void *)pairs);
    for (size_t i = 0; i < n; i++) {
        const upstream_query_pair *p = &pairs[order[i]];
        buf_putc(url, i ? '&' : '?');
        upstream_pct_encode(url, p->key, strlen(p->key));
        buf_putc(url, '=');
        upstream_pct_encode(url, p->value, p->value_len);
    }
    if (order != small)
        free(order);
}

/* n lower-case hex digits. */
static int lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    return 1;
}

int upstream_traceparent_child(const char *in, const char *span_hex, char out[56])
{
    if (!in || strlen(in) != 55 || in[2] != '-' || in[35] != '-' || in[52] != '-' ||
        !lower_hex(in, 2) || !lower_hex(in + 3, 32) || !lower_hex(in + 53, 2) ||
        strncmp(in, "ff", 2) == 0)
        return 0;
    /* 00-<the inbound trace id>-<span_hex>-<the inbound flags> */
    memcpy(out, "00-", 3);
    memcpy(out + 3, in + 3, 32);
    out[35] = '-';
    memcpy(out + 36, span_hex, 16);
    out[52] = '-';
    memcpy(out + 53, in + 53, 2);
    out[55] = '\0';
    return 1;
}

void upstream_traceparent_new(const char *trace_hex, const char *span_hex, char out[56])
{
    /* 00-<32 hex>-<16 hex>-01 (both given at their full lengths) */
    memcpy(out, "00-", 3);
    memcpy(out + 3, trace_hex, 32);
    out[35] = '-';
    memcpy(out + 36, span_hex, 16);
    memcpy(out + 52, "-01", 4);
}

int upstream_traceparent_outbound(const char *in, int new_trace, char out[56])
{
    unsigned char span[8], trace[16];
    char span_hex[17], trace_hex[33];
    id_random_bytes(span, sizeof span);
    hex_encode(span, sizeof span, span_hex);
    if (upstream_traceparent_child(in, span_hex, out))
        return 1;
    if (!new_trace)
        return 0;
    id_random_bytes(trace, sizeof trace);
    hex_encode(trace, sizeof trace, trace_hex);
    upstream_traceparent_new(trace_hex, span_hex, out);
    return 1;
}
