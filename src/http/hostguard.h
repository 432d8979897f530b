/* hostguard: the Host and Origin checks of the listeners (DNS-rebinding and
 * cross-site request guard) and the admin listener's bearer token.
 *
 * Host and Origin are parsed exactly: Host = host [":" port], Origin = scheme "://"
 * host [":" port] with scheme http or https, host a DNS name, an IPv4 address or a
 * bracketed IPv6 address, port 1..5 digits. Anything else (userinfo, a path, a
 * suffix after the port) is not loopback and not allowed; string prefixes are never
 * compared ("http://localhost:1@evil.com" and "http://localhost:31822.evil.com" are
 * foreign origins).
 *
 * Pure functions except admin_token_load (reads the token file). */
#ifndef CL_HOSTGUARD_H
#define CL_HOSTGUARD_H

#include <stddef.h>

/* 1 when a Host header value names a loopback host (localhost, 127.0.0.1, [::1]). */
int hostguard_host_is_loopback(const char *host);
/* 1 when an Origin header value is a well-formed loopback origin. */
int hostguard_origin_is_loopback(const char *origin);
/* The Origin rule: absent is allowed; "", "null" and malformed values are not; a value
 * listed in allow_list (comma-separated, exact and case-insensitive, or "*") or a
 * loopback origin is allowed. */
int hostguard_origin_allowed(const char *origin, const char *allow_list);
/* 1 when a listen setting "host:port" binds a loopback host only. */
int hostguard_listen_is_loopback(const char *addr);

/* The admin listener's token: its SHA-256 (compared in constant time). */
typedef struct admin_token {
    int set;
    unsigned char digest[32];
} admin_token;

/* Reads token_file ("" = no token) and checks that the admin listener at
 * admin_listen ("" = off) is on loopback or has a token. -1 with a message naming
 * the key in err. */
int admin_token_load(admin_token *t, const char *admin_listen, const char *token_file, char *err,
                     size_t errlen);
/* 1 when the Authorization header value carries the token ("Bearer <token>"), or
 * when no token is set. */
int admin_token_ok(const admin_token *t, const char *authorization);

#endif
