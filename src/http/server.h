/* server: the process-wide state shared by the HTTP layer (httpd.c) and the
 * surfaces above it (surfaces.h), and the per-request context. httpd.c sees only
 * this: what a route does is reached through app.route and req_ctx.pending.
 *
 * Ownership: the app owns every module it points to; a req_ctx is owned by the
 * route handling it from the moment httpd accepts the request until the reply is
 * sent (req_finish frees it). */
#ifndef CL_SERVER_H
#define CL_SERVER_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "auth.h"
#include "call.h"
#include "conf.h"
#include "fetch.h"
#include "idem.h"
#include "json.h"
#include "principal.h"
#include "session.h"
#include "store.h"
#include "trace.h"
#include "tools.h"
#include "util.h"

typedef struct sse_stream sse_stream;
typedef struct req_ctx req_ctx;
/* A streaming reply that outlives its request context (a GET /mcp stream): owned by
 * the HTTP layer until hstream_end or its close callback. */
typedef struct hstream hstream;
struct sockaddr;

/* A route's handler: runs after authentication, owns the request until it replies. */
typedef void (*route_handler)(req_ctx *c);
/* The route table (route.c, registered by main): the handler for the path below the
 * prefix (rest, e.g. "/mcp" or "/kn/x"); NULL when it already answered (404, 405,
 * 403). It sets c->kind, c->surface, c->tool as it sees them. */
typedef route_handler (*route_fn)(req_ctx *c, const char *rest);

typedef struct app {
    const settings *cfg; /* owned by main */
    struct event_base *base;
    fetch_ctx *fetch;
    auth_ctx *auth;
    tools_host *tools;
    session_ctx *sessions;
    trace_ctx *trace;
    store *store;
    idem_ctx *idem;
    struct hsrv *http;       /* the public listener's server (hsrv.h) */
    struct hsrv *admin_http; /* the admin listener's, or NULL */
    char prefix[128];
    lang_id default_lang;
    char *instructions[LANG_COUNT];
    tools_upstream upstreams[8];
    size_t n_upstreams;
    LIST_HEAD(, sse_stream) streams; /* open GET /mcp streams */
    size_t n_streams;
    struct event *heartbeat;
    size_t inflight;     /* requests being processed asynchronously */
    int draining;        /* SIGTERM received */
    int listen_loopback; /* public listener is bound to a loopback address */
    int64_t started_ms;
    uint64_t requests_total;
    json_value *ctx_config; /* ctx.config for tools (permission_request, gates) */
    route_fn route;         /* the route table (set before httpd_start) */
    /* Ends the surfaces' state of a request (req_ctx.surface_state) when its context
     * is freed (set before httpd_start; NULL: nothing to end). */
    void (*req_end)(req_ctx *c);
} app;

/* The bytes of req_ctx kept for the surfaces' own state of a request. */
#define REQ_SURFACE_BYTES 160

typedef enum { ROUTE_NONE, ROUTE_MCP, ROUTE_REST, ROUTE_INFO, ROUTE_TOOLKIT } route_kind;

/* The one asynchronous operation a request waits for (authentication, a session
 * lookup, a business or lifecycle call); cancelled when the request ends first
 * (client gone). */
typedef struct req_pending {
    void *op;
    void (*cancel)(void *op);
} req_pending;

struct req_ctx {
    app *app;
    struct hconn *conn; /* the request on its connection (hsrv.h) */
    route_kind kind;
    char method[8];
    char path[512];
    char request_id[160];
    char traceparent[64];
    /* W3C tracestate and baggage (borrowed: from the request's headers, or from the
     * MCP _meta of c->msg), or NULL */
    const char *tracestate, *baggage;
    lang_id lang;
    int64_t t0;
    principal who;
    int authed;
    req_pending pending;
    route_handler handler; /* from routing, run once authenticated */
    tools_gen *gen;        /* pinned once: at routing (REST) or at tools/call (MCP) */
    const tools_info *ti;  /* REST: the tool found at routing, in gen */
    int tool_builtin;      /* tool is one of the core's own (the lifecycle tools) */
    char tool[128];
    char surface[16];
    json_value *msg; /* parsed body (MCP JSON-RPC message or REST arguments) */
    buf rpc_id;      /* JSON text of the JSON-RPC id */
    int status;      /* for the access log */
    const char *outcome;
    int64_t lua_ms, upstream_ms;
    int on_close_set;      /* the connection's close callback is ours (while async) */
    int caller_request_id; /* the request id came from the caller (a retry hint) */
    json_value *reqinfo;   /* ctx.request, built on first use */
    int sse;               /* the reply is a text/event-stream (req_stream_begin) */
    int64_t trace_ms;      /* time spent waiting for Trace Core */
    int plimit_held;       /* counted in limits.max_calls_per_principal until freed */
    /* The surfaces' own state of this request (theirs to lay out: surfaces.h), opaque
     * here: zeroed with the context, ended by app.req_end when the context is freed. */
    union {
        max_align_t align;
        unsigned char bytes[REQ_SURFACE_BYTES];
    } surface_state;
};

/* httpd.c */
int httpd_start(app *a, char *err, size_t errlen);
void httpd_stop_accepting(app *a);
void httpd_free(app *a);
/* The public listener's socket (its local address), or -1. */
int httpd_listen_fd(const app *a);
/* Common response headers (request id, no-store, content type) and send; frees ctx. */
void req_reply(req_ctx *c, int status, const char *content_type, const char *body, size_t len);
void req_reply_json(req_ctx *c, int status, const char *json);
/* REST-style service error {code, description, solution, link, details}. */
void req_reply_error(req_ctx *c, int status, const char *code, const char *details);
const char *req_header(req_ctx *c, const char *name);
void req_add_header(req_ctx *c, const char *name, const char *value);
/* Body of the request (pointer into the connection's buffer, valid until reply). */
const char *req_body(req_ctx *c, size_t *len);
/* Marks the request as waiting for something asynchronous. */
void req_async_begin(req_ctx *c);
/* The request now waits for op (cancel(op) runs if the request ends first). */
void req_pending_set(req_ctx *c, void *op, void (*cancel)(void *op));
/* op finished (its callback runs): nothing to cancel any more. */
void req_pending_clear(req_ctx *c);
/* The 404 of an unknown route. */
void req_not_found(req_ctx *c);
/* Origin allow-list (config) plus loopback origins; DNS-rebinding guard on Host
 * when the listener is a loopback address. */
int req_origin_allowed(req_ctx *c);
/* The query string of the request target (after '?', not decoded), or NULL. */
const char *req_query(req_ctx *c);
/* The peer's address (NULL when unknown); valid while c lives. */
const struct sockaddr *req_peer(req_ctx *c);
/* The base URL the caller reached us by (proxytrust.h: proxy_public_base). */
void req_public_base(req_ctx *c, char *out, size_t outlen);
/* Switches the reply to a 200 text/event-stream (no-store, the request id; sets
 * c->sse); then req_stream_write sends events and req_end_stream ends it. */
void req_stream_begin(req_ctx *c);
void req_stream_write(req_ctx *c, const char *data, size_t len);
/* Ends a stream begun with req_stream_begin: logs, frees c. */
void req_end_stream(req_ctx *c, size_t bytes_out);
/* Answers c with a 200 text/event-stream that outlives it: logs c and frees it. The
 * stream is the HTTP layer's; on_close(arg) runs when the client goes away (the
 * stream is gone after it returns), unless hstream_end ended it first. */
hstream *req_stream_detach(req_ctx *c, void (*on_close)(void *arg), void *arg);
void hstream_write(hstream *s, const char *data, size_t len);
/* Ends the stream (no close callback). */
void hstream_end(hstream *s);
/* The trace context an MCP request carries in params._meta (traceparent,
 * tracestate, baggage): each well-formed one replaces the header's. meta is part of
 * c->msg. */
void req_trace_from_meta(req_ctx *c, const json_value *meta);
/* Fills a call environment from the request (strings borrowed from c). */
void req_call_env(req_ctx *c, call_env *env);

#endif
