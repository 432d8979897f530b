/* proxytrust: trusted proxy lists. See proxytrust.h. */
#include "proxytrust.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct entry {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int bits;
} entry;

/* Parses one entry of n bytes; 0 on success. */
static int parse_entry(const char *s, size_t n, entry *e)
{
    char tmp[64];
    char *slash, *end = NULL;
    int max;
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    slash = strchr(tmp, '/');
    if (slash)
        *slash = '\0';
    if (inet_pton(AF_INET, tmp, e->addr) == 1) {
        e->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, tmp, e->addr) == 1) {
        e->family = AF_INET6;
        max = 128;
    } else {
        return -1;
    }
    e->bits = max;
    if (slash) {
        long b = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || b < 0 || b > max)
            return -1;
        e->bits = (int)b;
    }
    return 0;
}

static int prefix_match(const unsigned char *a, const unsigned char *b, int bits)
{
    int full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)full) != 0)
        return 0;
    if (rest) {
        unsigned char mask = (unsigned char)(0xFF << (8 - rest));
        return (a[full] & mask) == (b[full] & mask);
    }
    return 1;
}

/* Calls fn(entry or NULL when malformed, s, n, arg) for each entry; stops when fn
 * returns non-zero and returns that value. */
static int each_entry(const char *list, int (*fn)(const entry *, const char *, size_t, void *),
                      void *arg)
{
    const char *p = list ? list : "";
    while (*p) {
        size_t skip = strspn(p, ", \t"), n;
        p += skip;
        n = strcspn(p, ", \t");
        if (n) {
            entry e;
            int rc = fn(parse_entry(p, n, &e) == 0 ? &e : NULL, p, n, arg);
            if (rc)
                return rc;
        }
        p += n;
    }
    return 0;
}

typedef struct valid_args {
    char *err;
    size_t errlen;
} valid_args;

static int check_one(const entry *e, const char *s, size_t n, void *arg)
{
    valid_args *a = arg;
    if (e)
        return 0;
    snprintf(a->err, a->errlen, "trusted_proxies: '%.*s' is not an IP address or CIDR block",
             (int)(n > 64 ? 64 : n), s);
    return -1;
}

int proxy_list_valid(const char *list, char *err, size_t errlen)
{
    valid_args a = {err, errlen};
    return each_entry(list, check_one, &a);
}

typedef struct peer {
    int family;
    unsigned char addr[16];
} peer;

static int match_one(const entry *e, const char *s, size_t n, void *arg)
{
    const peer *p = arg;
    (void)s;
    (void)n;
    return e && e->family == p->family && prefix_match(e->addr, p->addr, e->bits);
}

int proxy_trusted(const struct sockaddr *sa, const char *list)
{
    peer p;
    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET) {
        p.family = AF_INET;
        memcpy(p.addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            p.family = AF_INET;
            memcpy(p.addr, a6->s6_addr + 12, 4);
        } else {
            p.family = AF_INET6;
            memcpy(p.addr, a6->s6_addr, 16);
        }
    } else {
        return 0;
    }
    return each_entry(list, match_one, &p) > 0;
}

int proxy_local_hostport(int fd, char *out, size_t outlen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN];
    int port;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
        port = ntohs(s4->sin_port);
        return snprintf(out, outlen, "%s:%d", host, port) < (int)outlen;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
        port = ntohs(s6->sin6_port);
        return snprintf(out, outlen, "[%s]:%d", host, port) < (int)outlen;
    }
    return 0;
}

/* First comma-separated value of a header, trimmed, into out; 0 when empty. */
static int first_value(const char *h, char *out, size_t outlen)
{
    if (!h)
        return 0;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strcspn(h, ",");
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= outlen)
        return 0;
    memcpy(out, h, n);
    out[n] = '\0';
    return 1;
}

/* host[:port] as a Host header may carry it: a bracketed IPv6 literal or
 * letters, digits, dots and dashes, then an optional port of 1-5 digits. Rules out
 * paths, user@, spaces and anything that could break out of a URL. */
static int host_valid(const char *h)
{
    const char *p = h;
    if (*p == '[') {
        p++;
        const char *s = p;
        while (isxdigit((unsigned char)*p) || *p == ':' || *p == '.')
            p++;
        if (p == s || *p != ']')
            return 0;
        p++;
    } else {
        const char *s = p;
        while (isalnum((unsigned char)*p) || *p == '.' || *p == '-')
            p++;
        if (p == s)
            return 0;
    }
    if (*p == ':') {
        p++;
        size_t d = 0;
        while (isdigit((unsigned char)p[d]))
            d++;
        if (d < 1 || d > 5)
            return 0;
        p += d;
    }
    return *p == '\0';
}

int proxy_public_base(const proxy_request *req, const char *trusted, const char *public_url,
                      char *out, size_t outlen)
{
    char proto[16] = "http", v[256], host[256] = "";
    if (!proxy_trusted(req->peer, trusted)) {
        if (*public_url)
            snprintf(out, outlen, "%s", public_url);
        else if (proxy_local_hostport(req->fd, host, sizeof host))
            snprintf(out, outlen, "http://%s", host);
        else
            snprintf(out, outlen, "http://localhost");
        return 0;
    }
    if (first_value(req->xf_proto, v, sizeof v)) {
        for (char *p = v; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        if (!strcmp(v, "http") || !strcmp(v, "https"))
            memcpy(proto, v, strlen(v) + 1);
    }
    if (first_value(req->xf_host, v, sizeof v) && host_valid(v))
        snprintf(host, sizeof host, "%s", v);
    else if (first_value(req->host, v, sizeof v) && host_valid(v))
        snprintf(host, sizeof host, "%s", v);
    else
        snprintf(host, sizeof host, "localhost");
    snprintf(out, outlen, "%s://%s", proto, host);
    return 0;
}
