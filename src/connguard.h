/* connguard: a whole-request deadline for server connections (slow-loris defence,
 * SPEC §21).
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

connguard *connguard_new(struct event_base *base, int deadline_s);
/* Creates the bufferevents of http's future connections. */
void connguard_attach(connguard *g, struct evhttp *http);
/* Call from the request callback: req's connection completed a request. */
void connguard_request_done(connguard *g, struct evhttp_request *req);
/* Connections shut down for missing their deadline so far. */
uint64_t connguard_closed(const connguard *g);
/* Connections open now (including ones freed by evhttp in the last second). */
uint64_t connguard_open(const connguard *g);
/* Times free heap was returned to the kernel after connections closed. */
uint64_t connguard_trims(const connguard *g);
void connguard_free(connguard *g);

#endif
