/* hostguard: see hostguard.h. */
#include "hostguard.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static int is_name_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '.';
}

/* host [":" port] of s[0..n): the host's span, or -1 when malformed. */
static int split_host_port(const char *s, size_t n, size_t *hlen)
{
    size_t i = 0;
    if (n && s[0] == '[') {
        const char *end = memchr(s, ']', n);
        if (!end || end == s + 1)
            return -1;
        for (const char *p = s + 1; p < end; p++)
            if (!(is_name_char((unsigned char)*p) || *p == ':'))
                return -1;
        i = (size_t)(end - s) + 1;
    } else {
        while (i < n && is_name_char((unsigned char)s[i]))
            i++;
        if (i == 0)
            return -1;
    }
    *hlen = i;
    if (i == n)
        return 0;
    if (s[i] != ':' || n - i - 1 == 0 || n - i - 1 > 5)
        return -1;
    long port = 0;
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return -1;
        port = port * 10 + (s[k] - '0');
    }
    return port <= 65535 ? 0 : -1;
}

static int loopback_name(const char *h, size_t n)
{
    return (n == 9 && !strncasecmp(h, "localhost", 9)) || (n == 9 && !memcmp(h, "127.0.0.1", 9)) ||
           (n == 5 && !memcmp(h, "[::1]", 5));
}

int hostguard_host_is_loopback(const char *host)
{
    size_t hlen;
    if (!host || split_host_port(host, strlen(host), &hlen) < 0)
        return 0;
    return loopback_name(host, hlen);
}

/* The host[:port] part of a well-formed origin, or NULL. */
static const char *origin_authority(const char *origin)
{
    const char *rest = NULL;
    if (!strncasecmp(origin, "http://", 7))
        rest = origin + 7;
    else if (!strncasecmp(origin, "https://", 8))
        rest = origin + 8;
    size_t hlen;
    if (!rest || split_host_port(rest, strlen(rest), &hlen) < 0)
        return NULL;
    return rest;
}

int hostguard_origin_is_loopback(const char *origin)
{
    const char *auth = origin ? origin_authority(origin) : NULL;
    size_t hlen;
    return auth && split_host_port(auth, strlen(auth), &hlen) == 0 && loopback_name(auth, hlen);
}

int hostguard_origin_allowed(const char *origin, const char *allow_list)
{
    if (!origin)
        return 1;
    if (!*origin || !strcmp(origin, "null"))
        return 0;
    size_t olen = strlen(origin);
    for (const char *p = allow_list ? allow_list : ""; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t n = (size_t)(e - p);
        while (n && p[n - 1] == ' ')
            n--;
        if (n && ((n == 1 && *p == '*') || (n == olen && strncasecmp(p, origin, n) == 0)))
            return 1;
        p = e;
    }
    return hostguard_origin_is_loopback(origin);
}

int hostguard_listen_is_loopback(const char *addr)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon)
        return 0;
    size_t n = (size_t)(colon - addr);
    if (n == 5 && !memcmp(addr, "[::1]", 5))
        return 1;
    if (n == 9 && !strncasecmp(addr, "localhost", 9))
        return 1;
    /* 127.0.0.0/8 */
    unsigned a, b, c, d;
    char tail;
    char host[64];
    if (n == 0 || n >= sizeof host)
        return 0;
    memcpy(host, addr, n);
    host[n] = '\0';
    return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

int admin_token_load(admin_token *t, const char *admin_listen, const char *token_file, char *err,
                     size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (token_file && *token_file) {
        char *text = NULL;
        size_t len = 0;
        if (read_file_max(token_file, 4096, &text, &len) < 0) {
            snprintf(err, errlen,
                     "config key admin.token_file: cannot read %s (or it is longer than 4096 "
                     "bytes)",
                     token_file);
            return -1;
        }
        size_t s = 0;
        while (s < len && (text[s] == ' ' || text[s] == '\t' || text[s] == '\r' || text[s] == '\n'))
            s++;
        while (len > s && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\r' ||
                           text[len - 1] == '\n'))
            len--;
        if (len - s < 16) {
            free(text);
            snprintf(err, errlen,
                     "config key admin.token_file: %s holds %s; the admin token needs at least "
                     "16 characters",
                     token_file, len == s ? "nothing" : "a token shorter than 16 characters");
            return -1;
        }
        SHA256((const unsigned char *)text + s, len - s, t->digest);
        OPENSSL_cleanse(text, len);
        free(text);
        t->set = 1;
    }
    if (admin_listen && *admin_listen && !t->set && !hostguard_listen_is_loopback(admin_listen)) {
        snprintf(err, errlen,
                 "config key admin_listen: %s is not a loopback address and admin.token_file is "
                 "not set: the admin listener (reload, tool status, metrics) needs a bearer token "
                 "off loopback (set admin.token_file, or listen on 127.0.0.1)",
                 admin_listen);
        return -1;
    }
    return 0;
}

int admin_token_ok(const admin_token *t, const char *authorization)
{
    if (!t->set)
        return 1;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return 0;
    const char *tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    unsigned char d[32];
    /* digests of equal length, compared in constant time: neither the token's length
     * nor its prefix leaks through the timing */
    SHA256((const unsigned char *)tok, strlen(tok), d);
    return CRYPTO_memcmp(d, t->digest, sizeof d) == 0;
}
