/* proxytrust: which peers may speak for the client through X-Forwarded-* headers
 * (the trusted_proxies setting), and the address a connection reached us on.
 *
 * A list is comma- or space-separated IPv4/IPv6 addresses and CIDR blocks
 * ("127.0.0.1/8, ::1, 10.0.0.0/8, fd00::/8"); an IPv4-mapped IPv6 peer matches the
 * IPv4 entries. Nothing here allocates or keeps pointers. */
#ifndef CL_PROXYTRUST_H
#define CL_PROXYTRUST_H

#include <stddef.h>

struct sockaddr;

/* What proxy_public_base reads of one request: the peer's address (NULL when
 * unknown), the connection's socket (its local address; -1 when unknown) and the
 * values of X-Forwarded-Proto, X-Forwarded-Host and Host (NULL when absent).
 * Everything borrowed from the caller for the call. */
typedef struct proxy_request {
    const struct sockaddr *peer;
    int fd;
    const char *xf_proto, *xf_host, *host;
} proxy_request;

/* 0 when every entry of list parses; -1 with err naming the first bad entry. */
int proxy_list_valid(const char *list, char *err, size_t errlen);
/* 1 when sa (may be NULL: 0) is inside one of the entries of list. */
int proxy_trusted(const struct sockaddr *sa, const char *list);
/* "host:port" (IPv6 bracketed) of the local address of socket fd, into out; 0 when
 * unknown. */
int proxy_local_hostport(int fd, char *out, size_t outlen);
/* The base URL the caller reached us by, into out: from a peer in trusted, its
 * X-Forwarded-Proto (http or https) and X-Forwarded-Host when present and valid,
 * else http and Host; any other peer gets public_url when set, else the local address
 * its connection reached (never a header it chose). No trailing slash. */
int proxy_public_base(const proxy_request *req, const char *trusted, const char *public_url,
                      char *out, size_t outlen);

#endif
