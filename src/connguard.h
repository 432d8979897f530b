/* connguard: a whole-request deadline for server connections (slow-loris defence,
 * connection limits), the strict framing gate in front of evhttp's parser and the connection
 * cap (both described below).
 *
 * libevent's evhttp timeout restarts on every byte read, so a client that sends one
 * header byte every few seconds holds its connection forever. connguard gives every
 * connection of one evhttp a window of `deadline_s` seconds: a connection that spends a
 * whole window reading (headers, body, or nothing at all) without completing a request
 * is shut down; one that completed a request in the window, or is being answered, gets
 * a new window. A slow client is therefore closed after one to two windows (plus up to
 * a second: the windows are checked by a once-a-second sweep).
 *
 * How: the evhttp's bufferevents are created here (evhttp_set_bevcb). Each gets a
 * record holding one reference on it, so the sweep can tell whether libevent has freed
 * the connection (its callbacks are cleared) without touching freed memory, and drops
 * the record (and with it the buffers and the socket) within a second.
 *
 * The sweep also hands freed heap back to the kernel (glibc malloc_trim) after the
 * number of connections has dropped by 1,024 or more since the last time: without it
 * the RSS of a burst of 10,000 connections stays after they close.
 *
 * Ownership: the guard is owned by the caller (connguard_free after evhttp_free of the
 * attached evhttp, before event_base_free); connection records are owned by the guard. */
#ifndef CL_CONNGUARD_H
#define CL_CONNGUARD_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>

typedef struct connguard connguard;

/* The framing gate and the connection cap. Every byte a client sends passes the
 * strict framing check (framing.h) before evhttp reads it: the input buffer of a
 * connection only ever holds whole, checked request heads (and their bodies), so
 * evhttp and a proxy in front read the same requests. A request that fails the check
 * never reaches evhttp: its bytes and everything after them are discarded and a
 * marker request takes its place, which the request callback recognises through
 * connguard_request_done and answers with the refusal (JSON error, connection
 * closed). A chunked body is held back until its last chunk has been checked, except
 * when the client waits for 100-continue: then the chunks go through as they are
 * checked and a bad one closes the connection without an answer.
 *
 * The cap: past max_conns open connections a new one is refused (its first request
 * is answered 503 and the connection closed); when accept() fails for want of
 * descriptors (EMFILE/ENFILE) a descriptor kept in reserve is used to accept the
 * waiting connection, write a 503 and close it, so the listener does not spin. */
typedef struct connguard_limits {
    int deadline_s;  /* whole-request window (see above) */
    size_t max_head; /* limits.max_header_bytes */
    uint64_t max_body;
    size_t max_conns; /* 0: no cap */
} connguard_limits;

/* A refusal to answer: the status and the reason (a static string). */
typedef struct connguard_refusal {
    int status;
    const char *reason;
} connguard_refusal;

connguard *connguard_new(struct event_base *base, const connguard_limits *lim);
/* Creates the bufferevents of http's future connections. */
void connguard_attach(connguard *g, struct evhttp *http);
/* Handles accept() failures of the listener (descriptors exhausted). s == NULL:
 * the listener is about to be freed (before evhttp_del_accept_socket). */
void connguard_listener(connguard *g, struct evhttp_bound_socket *s);
/* Call first in the request callback: req's connection completed a request. Returns
 * 1 when req stands for a refused request or connection, with *why set: answer it
 * with that status and close the connection. */
int connguard_request_done(connguard *g, struct evhttp_request *req, connguard_refusal *why);
/* Requests refused by the framing check, connections refused by the cap (including
 * at EMFILE). */
uint64_t connguard_framing_refused(const connguard *g);
uint64_t connguard_conns_refused(const connguard *g);
/* Connections shut down for missing their deadline so far. */
uint64_t connguard_closed(const connguard *g);
/* Connections open now (including ones freed by evhttp in the last second). */
uint64_t connguard_open(const connguard *g);
/* Times free heap was returned to the kernel after connections closed. */
uint64_t connguard_trims(const connguard *g);
void connguard_free(connguard *g);

#endif
