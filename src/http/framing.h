/* framing: the strict HTTP/1.1 request framing check (RFC 9112) the listeners'
 * server (hsrv.c) applies to the raw bytes: it is the server's parser.
 *
 * Lenient parsers (libevent's evhttp among them) let the first of two Content-Length
 * headers win, ignore "Transfer-Encoding : chunked", read "+51" as a length, join
 * obsolete line folding, merge chunk trailers into the request headers. Any such
 * disagreement with a proxy in front lets a client smuggle a request. These
 * functions accept only messages whose framing is unambiguous; everything else gets
 * a status and a reason (hsrv.c hands it to the request callback as a refusal, which
 * is answered and the connection closed).
 *
 * Pure functions over byte ranges: no allocation, no I/O. Reasons are static
 * strings. */
#ifndef CL_FRAMING_H
#define CL_FRAMING_H

#include <stddef.h>
#include <stdint.h>

typedef struct framing_limits {
    size_t max_head;   /* request line + header fields + the empty line, bytes */
    uint64_t max_body; /* body bytes (Content-Length or the sum of the chunks) */
} framing_limits;

typedef enum { FRAMING_MORE = 0, FRAMING_OK = 1, FRAMING_BAD = -1 } framing_rc;

typedef enum { FRAMING_BODY_NONE, FRAMING_BODY_LENGTH, FRAMING_BODY_CHUNKED } framing_body;

/* A refusal: the HTTP status (400, 413, 414, 417, 501, 505) and what was wrong. */
typedef struct framing_error {
    int status;
    const char *reason;
} framing_error;

typedef struct framing_head {
    size_t head_len;     /* request line through the empty line, bytes */
    framing_body body;   /* how the body is delimited */
    uint64_t length;     /* FRAMING_BODY_LENGTH: the body's bytes */
    int expect_continue; /* HTTP/1.1 with Expect: 100-continue */
} framing_head;

/* Where the header block of buf[0..len) ends: the offset just past the empty line,
 * or 0 when it is not complete yet. *scanned remembers how far a previous call got
 * (start with 0), so that a block arriving in pieces is searched once. Lines end
 * with LF, optionally preceded by CR (as libevent reads them). */
size_t framing_head_end(const char *buf, size_t len, size_t *scanned);

/* Checks the complete header block buf[0..len) (len as framing_head_end returned).
 * FRAMING_OK fills *head; FRAMING_BAD fills *err. */
framing_rc framing_check_head(const char *buf, size_t len, const framing_limits *lim,
                              framing_head *head, framing_error *err);

/* What an incomplete head that already has len bytes means: FRAMING_MORE while it
 * may still be valid, FRAMING_BAD (413 or 414) once it is over lim->max_head. */
framing_rc framing_check_partial(const char *buf, size_t len, const framing_limits *lim,
                                 framing_error *err);

/* A chunked body, fed in pieces. Chunk extensions and trailer fields are refused
 * (libevent would read the first differently and merge the second into the request
 * headers). */
typedef struct framing_chunks {
    int state;
    int digits;         /* hex digits of the size line so far */
    uint64_t size;      /* the size line's value */
    uint64_t remaining; /* data bytes of the current chunk still to come */
    uint64_t total;     /* data bytes so far */
} framing_chunks;

void framing_chunks_init(framing_chunks *st);
/* Consumes bytes of p[0..n): returns how many. *rc: FRAMING_MORE (all n consumed,
 * body not finished), FRAMING_OK (the body ended after the returned count; the rest
 * belongs to the next request) or FRAMING_BAD (*err set). */
size_t framing_chunks_feed(framing_chunks *st, const char *p, size_t n, const framing_limits *lim,
                           framing_rc *rc, framing_error *err);

#endif
