/* fetch: asynchronous HTTP client driven by the libevent loop. Plain http:// URLs
 * with a numeric host go through a lean HTTP/1.1 client (hclient.h) unless the
 * config asks for libcurl; everything else (https, host names) goes through one
 * libcurl multi handle (CURLMOPT_SOCKETFUNCTION / TIMERFUNCTION -> events). Nothing
 * blocks the loop.
 *
 * Every outbound call of the process (upstreams, introspection, Trace Core) goes
 * through one fetch_ctx. Connections are reused (keep-alive pool of the multi
 * handle). Each request has its own total timeout and response-size cap.
 *
 * Callbacks are never invoked from inside a curl callback nor from inside
 * fetch_start: completions are collected after curl_multi_socket_action returns and
 * delivered from the event loop, so a callback may start new requests or cancel
 * others freely.
 *
 * Ownership: fetch_start copies everything it needs from the request; the response
 * passed to the callback (and all its strings) is owned by fetch and valid only
 * during the callback. */
#ifndef CL_FETCH_H
#define CL_FETCH_H

#include <stddef.h>
#include <stdint.h>

struct event_base;

typedef struct fetch_ctx fetch_ctx;
typedef struct fetch_req fetch_req; /* an in-flight request */

typedef struct fetch_header {
    const char *name;
    const char *value;
} fetch_header;

/* A base URL parsed once (an upstream's, per configuration): a request on it only
 * appends its path and query, and the lean client's target, Host line and path
 * prefix are not worked out again per request. Never NULL; the URL is copied. */
typedef struct fetch_base fetch_base;
fetch_base *fetch_base_new(const char *base_url);
void fetch_base_free(fetch_base *b);
/* 1 when requests on b can go through the lean client (http:// with a numeric host). */
int fetch_base_lean(const fetch_base *b);

typedef struct fetch_request {
    const char *method; /* "GET", "POST", ... */
    const char *url;    /* absolute http(s) URL; NULL with base */
    const fetch_header *headers;
    size_t n_headers;
    const char *body; /* may be NULL; sent (even empty) for POST/PUT/PATCH or when
                         non-NULL; curl adds a form Content-Type unless one is given */
    size_t body_len;
    long timeout_ms;        /* total; 0 = ctx default */
    size_t max_response;    /* body bytes; 0 = ctx default */
    const fetch_base *base; /* with url NULL: the URL is base's URL followed by path */
    const char *path;       /* path_len bytes (path and query), with base */
    size_t path_len;
    /* The lean client may write it on a kept connection right behind other such
     * requests, in one write, before their answers are in (HTTP/1.1 pipelining; see
     * hclient.h for what happens when that connection fails). For a server known to
     * answer in order; libcurl ignores it. */
    int pipeline;
} fetch_request;

typedef enum {
    FETCH_OK = 0,    /* got an HTTP response (any status) */
    FETCH_TIMEOUT,   /* timeout_ms elapsed */
    FETCH_CONNECT,   /* could not connect / DNS / refused */
    FETCH_TOO_LARGE, /* response body exceeded max_response */
    FETCH_ERROR      /* other transport error */
} fetch_result;

typedef struct fetch_response {
    fetch_result result;
    const char *error;           /* human text when result != FETCH_OK, else NULL */
    long status;                 /* HTTP status when FETCH_OK */
    const fetch_header *headers; /* response headers, names lower-cased */
    size_t n_headers;
    /* The same headers as "name\0value\0" pairs in one block (the lean client's), or
       NULL (libcurl's): a caller that keeps them packed takes them as they are. */
    const char *packed_headers;
    size_t packed_headers_len;
    const char *body; /* NUL-terminated for convenience; may contain NULs */
    size_t body_len;
    int64_t elapsed_ms;
} fetch_response;

typedef void (*fetch_cb)(const fetch_response *resp, void *arg);

typedef enum {
    FETCH_CLIENT_LEAN = 0, /* http:// with a numeric host: the lean client; else libcurl */
    FETCH_CLIENT_CURL,     /* libcurl for everything */
} fetch_client;

typedef struct fetch_config {
    long default_timeout_ms;     /* 0 -> 10000 */
    size_t default_max_response; /* 0 -> 16 MiB */
    long max_host_connections;   /* 0 -> 64 (per host:port, both clients) */
    fetch_client client;         /* 0 -> FETCH_CLIENT_LEAN */
} fetch_config;

/* Returns NULL and sets *err (static text) on failure. */
fetch_ctx *fetch_new(struct event_base *base, const fetch_config *cfg, const char **err);
/* Cancels every in-flight request (their callbacks are not called) and frees. May
 * be called from inside a fetch callback (the free completes when it returns). */
void fetch_free(fetch_ctx *ctx);

/* Starts a request; the callback runs exactly once later unless the request is
 * cancelled first. Returns NULL only on invalid arguments (err set). */
fetch_req *fetch_start(fetch_ctx *ctx, const fetch_request *req, fetch_cb cb, void *arg,
                       const char **err);
/* Cancels an in-flight request; its callback will not be called, even if its
 * completion is already queued. Safe to call from any callback; on the request
 * whose callback is running it is a no-op (the request is freed after it). The
 * handle is invalid once the callback has returned or after the cancel. */
void fetch_cancel(fetch_req *r);

/* Number of in-flight requests (for metrics and tests). */
size_t fetch_inflight(const fetch_ctx *ctx);

/* Looks up a response header (name case-insensitive); NULL if absent. */
const char *fetch_response_header(const fetch_response *resp, const char *name);

#endif
