/* hsrv: the HTTP/1.1 server of the listeners (public and admin): accept, one
 * persistent read event per connection, request parsing that is the strict framing
 * check (framing.h), replies written at once, streaming replies, keep-alive and
 * pipelining, the whole-request deadline, the connection cap and the idle timeout.
 * docs/security.md and docs/operations.md describe the rules; the behaviour on the
 * wire is the one libevent's evhttp had behind the framing gate.
 *
 * One request per connection at a time: a request is its connection (hconn) from the
 * request callback until the reply (or the stream) has ended. Pipelined requests wait
 * in the input buffer and are answered in order.
 *
 * Ownership: the server owns its connections and their buffers. A request's strings
 * (method, path, query, header values, body) point into its connection's input buffer
 * and live until the reply is sent, or the close callback has run. The caller owns
 * the server (hsrv_free before event_base_free). */
#ifndef CL_HSRV_H
#define CL_HSRV_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct hsrv hsrv;
typedef struct hconn hconn;

typedef struct hsrv_limits {
    int deadline_s;    /* whole-request window (see hsrv.c) */
    int idle_s;        /* a connection idle (or not reading our reply) this long closes */
    size_t max_head;   /* limits.max_header_bytes */
    uint64_t max_body; /* limits.max_body_bytes */
    size_t max_conns;  /* 0: no cap */
} hsrv_limits;

/* A request is complete (or refused: hconn_refusal). It must end with hconn_reply
 * or a stream, now or later. */
typedef void (*hsrv_request_cb)(hconn *c, void *arg);

/* default_type: the Content-Type of a reply that has none (borrowed, static). */
hsrv *hsrv_new(struct event_base *base, const hsrv_limits *lim, hsrv_request_cb cb, void *arg,
               const char *default_type);
/* Accepts on fd (a bound, listening, non-blocking socket; the server closes it). */
void hsrv_listen(hsrv *s, int fd);
/* The listening socket, or -1. */
int hsrv_listen_fd(const hsrv *s);
/* Closes the listener; connections stay. */
void hsrv_stop_accepting(hsrv *s);
/* Closes every connection (close callbacks run) and frees the server. NULL is fine. */
void hsrv_free(hsrv *s);

/* Counters: requests refused by the framing check, connections
 * refused by the cap or at EMFILE, connections shut for missing their deadline,
 * connections open now, heap trims after many connections closed. */
uint64_t hsrv_framing_refused(const hsrv *s);
uint64_t hsrv_conns_refused(const hsrv *s);
uint64_t hsrv_deadline_closed(const hsrv *s);
uint64_t hsrv_open(const hsrv *s);
uint64_t hsrv_trims(const hsrv *s);
/* Those figures as /metrics series (cl_connections_*, cl_requests_framing_refused_total
 * of both listeners, cl_heap_trims_total); admin may be NULL. */
void hsrv_write_metrics(const hsrv *pub, const hsrv *admin, buf *out);

/* ---- the request ---- */

/* 1 when the request stands for a refusal (framing, connection cap): answer it with
 * *status and *reason (static) and the connection closes after the reply. */
int hconn_refusal(const hconn *c, int *status, const char **reason);
const char *hconn_method(const hconn *c);
/* The path of the target (absolute-form: after the authority; may be ""). */
const char *hconn_path(const hconn *c);
/* After '?', not decoded; NULL without one. */
const char *hconn_query(const hconn *c);
int hconn_http11(const hconn *c);
/* The first field of that name (ASCII case ignored), or NULL. */
const char *hconn_header(const hconn *c, const char *name);
/* The body (Content-Length or chunked, decoded); "" when none. */
const char *hconn_body(const hconn *c, size_t *len);
const struct sockaddr *hconn_peer(const hconn *c);
int hconn_fd(const hconn *c);

/* A reply header (name and value copied). */
void hconn_add_header(hconn *c, const char *name, const char *value);
int hconn_has_header(const hconn *c, const char *name);
/* Sends the reply (headers, Content-Length, body; no body for HEAD) and ends the
 * request. Do not use c after. */
void hconn_reply(hconn *c, int status, const char *reason, const char *body, size_t len);
/* A streaming reply: headers now (chunked on HTTP/1.1), then chunks as they come;
 * stream_end ends it (c is not to be used after). */
void hconn_stream_begin(hconn *c, int status, const char *reason);
void hconn_stream_write(hconn *c, const char *data, size_t len);
void hconn_stream_end(hconn *c);
/* cb(arg) runs when the connection closes before the reply (or stream) ended; c is
 * gone after it returns. NULL clears it. */
void hconn_on_close(hconn *c, void (*cb)(void *arg), void *arg);
/* A value of the callback's that lives with the connection, across its requests:
 * user_free(user) runs when the connection closes (or when another value is set). */
void *hconn_user(const hconn *c);
void hconn_set_user(hconn *c, void *user, void (*user_free)(void *user));

/* The Date header's text for now (RFC 1123, GMT), laid out once a second; NULL past
 * year 9999. */
const char *hsrv_date_now(void);

/* ---- the parser, exposed for the unit tests and the fuzz target ---- */

#define HSRV_MAX_HEADERS 64

typedef struct hsrv_header {
    const char *name;  /* not terminated */
    const char *value; /* NUL-terminated in place */
    size_t name_len;
} hsrv_header;

typedef struct hsrv_head {
    char method[8];
    const char *path;  /* NUL-terminated in place */
    const char *query; /* NUL-terminated in place, or NULL */
    int http11, absolute;
    uint64_t lengths; /* bit (name length % 64) of every field: absent names cost one test */
    size_t n_headers;
    hsrv_header headers[HSRV_MAX_HEADERS];
} hsrv_head;

/* Indexes a head framing_check_head accepted (buf[0..len)), in place: terminates
 * the path, query and values. 0, or -1 past HSRV_MAX_HEADERS fields. */
int hsrv_parse_head(char *buf, size_t len, hsrv_head *h);
const char *hsrv_head_find(const hsrv_head *h, const char *name);
/* The options of the Connection fields (each a comma-separated list, "close, x"
 * holds close; case-insensitive), all fields read in one walk: HSRV_CONN_* bits. */
#define HSRV_CONN_CLOSE 1u
#define HSRV_CONN_KEEP_ALIVE 2u
unsigned hsrv_head_connection(const hsrv_head *h);
/* Decodes a chunked body framing_chunks_feed accepted (p[0..n)) in place; returns
 * the data's length. */
size_t hsrv_dechunk(char *p, size_t n);

#endif
