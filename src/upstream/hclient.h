/* hclient: a lean HTTP/1.1 client for plain http:// URLs with a numeric host, driven
 * by the libevent loop (fetch.c uses it; libcurl serves everything else).
 *
 * Non-blocking connect, one keep-alive pool per host:port bounded by max_conns
 * (requests beyond it wait in FIFO order), requests written without printf, an
 * incremental response parser (Content-Length, chunked, close-delimited; 1xx skipped;
 * HEAD/204/304 have no body). A connection goes back to the pool only when the
 * response allows it (HTTP/1.1, no "Connection: close", body fully read, nothing
 * extra) and nothing in it was out of place: an interim 1xx other than 100, a 101, a
 * 204 that claims a body (Content-Length above 0 or a Transfer-Encoding), a HEAD or
 * 304 answer with a Transfer-Encoding (their Content-Length describes the resource,
 * as the protocol allows), Content-Length together with Transfer-Encoding - any of these
 * may leave bytes that the next request would take for its answer, so the connection
 * is closed after the response. Bytes beyond a response fail the request (the server
 * answered one request twice, and which answer is its own cannot be told; after HEAD
 * they are taken for a body sent anyway, and only close the connection). A pooled
 * connection is checked again right before its next request is written: anything
 * readable (a late or unsolicited response, a body that came after all) or its end,
 * and it is closed and the request goes to a new one. What a server sends after that
 * check, while the next request is on its way, cannot be told from the answer to it:
 * against a server that answers unasked at any moment only closing every connection
 * would help.
 * A request on a reused connection that the server closed before sending a
 * byte of the response is retried once on a new connection when the method is
 * idempotent or nothing of the request was sent.
 *
 * Pipelining (asked per request, never for HEAD): a kept connection that takes such a
 * request is written once the loop has run the events that are ready, and the requests
 * that start until then join it - up to 16 requests, 64 KiB together - and go out in
 * one write. In a loop with the worker's priorities (CL_EV_PRIORITIES in util.h) the
 * write waits for the first pass with nothing else ready (at once when the loop has
 * nothing else to do, at most 1 ms under a flood of other work), or comes on the pass
 * that brings the 16th request; in any other loop it comes on the next pass. Their
 * answers are read in order, each request taking the next answer
 * (HTTP/1.1 answers in request order), and bytes beyond one answer begin the next.
 * Only the last request's answer is held to the rules above on extra bytes. When an
 * answer leaves the connection unusable (a close, a framing in doubt, a bad answer,
 * a reset), the requests written behind it are retried once on new connections, alone,
 * when the rule above allows it or when the server announced the close ("Connection:
 * close": it reads nothing after that answer); otherwise they fail - a server may
 * have acted on a POST whose answer was lost, so a pipeline costs a lost connection
 * more failed requests than a request per connection does. A request cancelled or
 * timed out after its write, while others on its connection still wait, stays there
 * as a placeholder: its answer is read and dropped, so no answer ever reaches another
 * request; one not yet written is taken off. A connection left with placeholders only
 * is closed.
 *
 * The completion callback runs from the event loop (never inside hc_start); the
 * hc_req is freed right after it returns. It must not call into the client (start,
 * cancel, free): several may run in one pass over a connection's answers (fetch.c's
 * only takes the answer over and delivers it from its own event). Ownership: hc_start copies
 * everything it needs; the hc_result passed to the callback owns its headers, arena and body, which
 * the callback may take (set the pointers to NULL / steal the buf). */
#ifndef CL_HCLIENT_H
#define CL_HCLIENT_H

#include "fetch.h"
#include "util.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;

typedef struct hc_ctx hc_ctx;
typedef struct hc_req hc_req;

/* Where a URL points, split by hc_parse_url (pointers into the URL). */
typedef struct hc_target {
    struct sockaddr_storage addr; /* numeric IPv4 or IPv6 host and the port */
    socklen_t addrlen;
    const char *authority; /* "host[:port]" as written, for the Host header */
    size_t authority_len;
    const char *path; /* from the first '/' or '?' up to '#' ("/" when empty) */
    size_t path_len;
} hc_target;

/* 0 when url is http:// with a numeric host and a plain path (the lean client can
 * serve it), -1 otherwise (the caller falls back to libcurl). */
int hc_parse_url(const char *url, hc_target *t);

/* ---- response parser (exposed for tests and fuzzing) ---- */

enum { HC_MORE = 0, HC_DONE = 1, HC_FAIL = -1, HC_TOO_LARGE = -2 };

typedef struct hc_parser {
    int state;
    int no_body;      /* request was HEAD */
    size_t max_body;  /* body cap */
    long status;      /* final status */
    int http11;       /* final response is HTTP/1.1 or later */
    int conn_close;   /* "Connection: close" seen */
    int no_reuse;     /* something out of place: close the connection after this response */
    int close_framed; /* body ends at connection close */
    int chunked;
    int have_len;
    uint64_t remaining; /* body bytes (Content-Length) or chunk bytes left */
    size_t head_bytes;  /* header bytes of this response, capped */
    buf arena;          /* "name\0value\0" pairs of the final response */
    size_t n_headers;
    buf body;
    const char *error; /* static text on HC_FAIL */
} hc_parser;

void hc_parser_init(hc_parser *p, int no_body, size_t max_body);
/* Consumes a prefix of data; *used says how much (the rest must be offered again
 * with more bytes after it). Returns HC_MORE, HC_DONE, HC_FAIL or HC_TOO_LARGE. */
int hc_parser_feed(hc_parser *p, const char *data, size_t len, size_t *used);
/* The connection closed: HC_DONE for a close-delimited body, else HC_FAIL. */
int hc_parser_eof(hc_parser *p);
/* An array of n_headers entries pointing into p->arena (caller frees the array). */
fetch_header *hc_parser_headers(const hc_parser *p);
void hc_parser_free(hc_parser *p);

/* ---- client ---- */

typedef struct hc_result {
    fetch_result result;
    const char *error; /* static text when result != FETCH_OK */
    hc_parser *parser; /* status, arena and body of the response (owned by hc) */
} hc_result;

typedef void (*hc_done_cb)(hc_result *res, void *arg);

/* NULL when its event cannot be created. */
hc_ctx *hc_new(struct event_base *base, long max_conns);
/* Cancels everything in flight (no callbacks) and closes every connection. */
void hc_free(hc_ctx *ctx);

/* The request target is t->path followed by the path_len bytes of path (a base URL's
 * path prefix, parsed once, and the request's own path and query; path may be NULL
 * when path_len is 0). body may be NULL; send_body says whether to send it (with
 * Content-Length) even when empty. Returns NULL (err set) when the request cannot be
 * written. */
hc_req *hc_start(hc_ctx *ctx, const hc_target *t, const char *path, size_t path_len,
                 const char *method, const fetch_header *headers, size_t n_headers,
                 const char *body, size_t body_len, int send_body, int pipeline, long timeout_ms,
                 size_t max_response, hc_done_cb cb, void *arg, const char **err);
/* No callback afterwards; the request's connection is closed if it was busy. */
void hc_cancel(hc_req *r);

/* Connections opened since hc_new (for tests). */
size_t hc_connections_opened(const hc_ctx *ctx);

#endif
