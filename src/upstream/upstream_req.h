/* upstream_req: the checks and encodings of the request a tool's ctx.http sends to an
 * upstream, as pure functions (no Lua, no I/O, no clock; call.c does the glue).
 *
 * Ownership: every pointer argument is borrowed; text goes into the caller's buf. */
#ifndef CL_UPSTREAM_REQ_H
#define CL_UPSTREAM_REQ_H

#include <stddef.h>

#include "util.h"

/* 1 for GET, POST, PUT, PATCH, DELETE and HEAD (exact case), else 0. */
int upstream_method_valid(const char *method);

/* NULL when path may follow an upstream's base URL, else why not (static text): it
 * must start with "/", hold only RFC 3986 path characters with valid %XX escapes,
 * and have no "." or ".." segment, plain or percent-encoded (any case). A query
 * or fragment is refused ('?' and '#' must be percent-encoded; use the query). */
const char *upstream_check_path(const char *path);

/* 1 when name is one of the headers the core sets itself (authorization, host, the
 * identity, request id, trace and language headers, the framing headers, cookie),
 * compared without case; a tool may not give those. */
int upstream_header_reserved(const char *name);
/* 1 when name is a non-empty RFC 9110 token (letters, digits, !#$%&'*+-.^_`|~). */
int upstream_header_name_valid(const char *name);
/* 1 when the len bytes of value hold no CR, LF or NUL (no header splitting). */
int upstream_header_value_valid(const char *value, size_t len);

/* Appends s[0..len) with every byte outside the RFC 3986 unreserved set
 * (A-Z a-z 0-9 - . _ ~) as %XX (upper-case hex). */
void upstream_pct_encode(buf *out, const char *s, size_t len);

/* One query parameter: key = value. An array gives one pair per element, in order. */
typedef struct upstream_query_pair {
    const char *key;   /* NUL-terminated */
    const char *value; /* value_len bytes, may hold any byte */
    size_t value_len;
} upstream_query_pair;

/* Appends "?k=v&k=v..." to url (nothing when n == 0): pairs in byte order of their
 * keys (strcmp), pairs with the same key in the order given (so an array repeats
 * its key with its elements in order), keys and values percent-encoded as
 * upstream_pct_encode does. pairs is not changed. */
void upstream_query_append(buf *url, const upstream_query_pair *pairs, size_t n);

/* The traceparent of a call the core makes on behalf of an inbound request: when
 * in (may be NULL) has the form of a traceparent (55 bytes: 2 lower-case hex version
 * other than ff, '-', 32 lower-case hex trace id, '-', 16 bytes of parent id that are
 * not looked at, '-', 2 lower-case hex flags), out gets version 00 with in's trace
 * id and flags and span_hex as the parent id, and 1 is returned. Otherwise out is not touched and 0
 * is returned: the caller starts a new trace with upstream_traceparent_new. span_hex: 16 lower-case
 * hex digits. */
int upstream_traceparent_child(const char *in, const char *span_hex, char out[56]);
/* out = "00-<trace_hex>-<span_hex>-01" (a new sampled trace; 32 and 16 hex). */
void upstream_traceparent_new(const char *trace_hex, const char *span_hex, char out[56]);
/* The traceparent of an outbound call: a child of in with a fresh random span id
 * (upstream_traceparent_child), 1; when in is not a traceparent, 0 and out untouched,
 * unless new_trace: then a new trace with fresh random ids, 1. */
int upstream_traceparent_outbound(const char *in, int new_trace, char out[56]);

#endif
