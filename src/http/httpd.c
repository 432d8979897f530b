/* httpd: listeners, limits, request ids, the authentication step, replies, the
 * access log and the admin listener. What a path means is the route table's
 * (app.route, route.c): httpd calls the handler it returns and knows nothing of
 * the layers above it; a request's one pending operation is cancelled through the
 * function pointer it was registered with. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <sys/queue.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accept.h"
#include "errenv.h"
#include "hostguard.h"
#include "hsrv.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "uphealth.h"
#include "mshare.h"
#include "plimit.h"
#include "proxytrust.h"
#include "reload.h"
#include "server.h"
#include "trace.h"

/* One registry per process (one app per process); created by httpd_start. */
static metrics *g_metrics;
/* Calls in flight per principal (limits.max_calls_per_principal); the admin token. */
static plimit *g_plimit;
static admin_token g_admin_token;

/* Process model (httpd.h): -1 = single process. */
static int g_worker = -1, g_workers = 1, g_listen_fd = -1, g_admin_fd = -1;
static mshare *g_share;          /* the workers' /metrics texts (workers > 1) */
static struct event *g_share_ev; /* publishes this worker's text every second */
static pid_t g_master;

/* ---- request id and traceparent ---- */

static int valid_request_id(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 12 || n > 132 || strncmp(s, "req_", 4) != 0)
        return 0;
    for (size_t i = 4; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(isalnum(ch) || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

static void new_request_id(char *out, size_t outlen)
{
    unsigned char r[16];
    char hex[33];
    id_random_bytes(r, sizeof r); /* an identifier, not a secret */
    r[6] = (r[6] & 0x0f) | 0x40;
    r[8] = (r[8] & 0x3f) | 0x80;
    hex_encode(r, sizeof r, hex);
    /* req_ and the UUID form 8-4-4-4-12 */
    char id[4 + 36 + 1], *w = id;
    static const unsigned char groups[] = {8, 4, 4, 4, 12};
    memcpy(w, "req_", 4);
    w += 4;
    for (size_t g = 0, at = 0; g < sizeof groups; g++) {
        if (g)
            *w++ = '-';
        memcpy(w, hex + at, groups[g]);
        w += groups[g];
        at += groups[g];
    }
    *w = '\0';
    str_copy(out, outlen, id);
}

static int valid_traceparent(const char *s)
{
    if (!s || strlen(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
        return 0;
    for (int i = 0; i < 55; i++) {
        if (i == 2 || i == 35 || i == 52)
            continue;
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    }
    return strncmp(s + 3, "00000000000000000000000000000000", 32) != 0;
}

/* tracestate and baggage are passed on as they came, when they are printable ASCII
 * within their format's size limit; otherwise dropped. */
#define TRACESTATE_MAX 512
#define BAGGAGE_MAX 8192
static const char *valid_trace_text(const char *s, size_t max)
{
    if (!s || !*s)
        return NULL;
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= max || (unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e)
            return NULL;
    return s;
}

void req_trace_from_meta(req_ctx *c, const json_value *meta)
{
    if (!meta)
        return;
    const char *tp = json_get_string(meta, "traceparent");
    if (valid_traceparent(tp))
        str_copy(c->traceparent, sizeof c->traceparent, tp);
    const char *ts = valid_trace_text(json_get_string(meta, "tracestate"), TRACESTATE_MAX);
    const char *bg = valid_trace_text(json_get_string(meta, "baggage"), BAGGAGE_MAX);
    if (ts)
        c->tracestate = ts;
    if (bg)
        c->baggage = bg;
}

/* ---- replies ---- */

const char *req_header(req_ctx *c, const char *name)
{
    return hconn_header(c->conn, name);
}

void req_add_header(req_ctx *c, const char *name, const char *value)
{
    hconn_add_header(c->conn, name, value);
}

const char *req_body(req_ctx *c, size_t *len)
{
    return hconn_body(c->conn, len);
}

/* A bounded route label for /metrics (never the raw path: clients choose paths). */
static const char *route_label(req_ctx *c)
{
    static const char *const fixed[] = {"/health/alive", "/health/ready", "/metrics",
                                        "/admin/reload", "/admin/tools"};
    const char *prefix = c->app->prefix;
    size_t plen = strlen(prefix), i;
    for (i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (!strcmp(c->path, fixed[i]))
            return fixed[i];
    if (c->kind == ROUTE_MCP)
        return "/mcp";
    if (c->kind == ROUTE_REST && !strncmp(c->path, prefix, plen))
        return "/kn";
    return "unmatched";
}

static int upstream_failure(req_ctx *c)
{
    const char *o = c->outcome ? c->outcome : "";
    return strstr(o, "upstream") != NULL || strstr(o, "BadGateway") != NULL ||
           strstr(o, "GatewayTimeout") != NULL || c->status == 502 || c->status == 504;
}

/* Every request ends here (reply, detach, client gone): the one place that records
 * request and tool-call metrics. */
static void record_metrics(req_ctx *c)
{
    if (!g_metrics)
        return;
    metrics_request(g_metrics, route_label(c), c->status);
    if (!c->tool[0] || !c->outcome || !strcmp(c->outcome, "rpc_error"))
        return;
    /* only names of the catalogue: unknown names chosen by clients are not series */
    if (!c->tool_builtin && !(c->gen && tools_gen_find_rest(c->gen, c->tool)))
        return;
    metrics_tool_call(g_metrics, c->tool, c->outcome, now_mono_ms() - c->t0, c->lua_ms,
                      c->upstream_ms, c->trace_ms);
    if (upstream_failure(c))
        metrics_upstream_error(g_metrics, c->tool);
}

static void access_log(req_ctx *c, size_t bytes_out)
{
    record_metrics(c);
    if (!c->app->cfg->access_log)
        return;
    int64_t dur = now_mono_ms() - c->t0;
    log_line *l = log_begin(LOG_INFO, "request");
    log_str(l, "request_id", c->request_id);
    log_str(l, "method", c->method);
    log_str(l, "path", c->path);
    log_int(l, "status", c->status);
    if (c->authed)
        log_strn(l, "principal", c->who.key, 16);
    if (c->surface[0])
        log_str(l, "surface", c->surface);
    const char *rpc = c->msg ? json_get_string(c->msg, "method") : NULL;
    if (rpc) /* the JSON-RPC method of an MCP message (client text: bounded, escaped) */
        log_strn(l, "rpc_method", rpc, 64);
    if (c->tool[0])
        log_str(l, "tool", c->tool);
    if (c->gen)
        log_int(l, "generation", tools_gen_id(c->gen));
    log_str(l, "outcome", c->outcome);
    log_int(l, "duration_ms", dur);
    log_int(l, "lua_ms", c->lua_ms);
    log_int(l, "upstream_ms", c->upstream_ms);
    log_int(l, "trace_core_ms", c->trace_ms);
    log_int(l, "bytes_out", (long long)bytes_out);
    if (c->sse)
        log_bool(l, "sse", 1);
    log_end(l);
}

void req_pending_set(req_ctx *c, void *op, void (*cancel)(void *op))
{
    c->pending.op = op;
    c->pending.cancel = cancel;
}

void req_pending_clear(req_ctx *c)
{
    c->pending.op = NULL;
    c->pending.cancel = NULL;
}

/* Freed request contexts kept for the next requests (a context is a few kB: a
 * malloc of that size and its free cost more than clearing a kept one). */
#define CTX_KEEP 32
static req_ctx *g_ctx_kept[CTX_KEEP];
static int g_ctx_nkept;

static req_ctx *ctx_new(void)
{
    if (g_ctx_nkept == 0)
        return xcalloc(1, sizeof(req_ctx));
    req_ctx *c = g_ctx_kept[--g_ctx_nkept];
    memset(c, 0, sizeof *c);
    return c;
}

static void ctx_release(req_ctx *c)
{
    if (g_ctx_nkept < CTX_KEEP)
        g_ctx_kept[g_ctx_nkept++] = c;
    else
        free(c);
}

static void ctx_free(req_ctx *c)
{
    if (c->plimit_held)
        plimit_leave(g_plimit, c->who.key);
    if (c->pending.cancel)
        c->pending.cancel(c->pending.op);
    if (c->gen)
        tools_gen_release(c->gen);
    if (c->app->req_end)
        c->app->req_end(c);
    json_free(c->msg);
    json_free(c->reqinfo);
    ctx_release(c);
}

static void on_conn_close(void *arg);

static void async_end(req_ctx *c)
{
    if (c->on_close_set) {
        hconn_on_close(c->conn, NULL, NULL);
        c->on_close_set = 0;
        c->app->inflight--;
    }
}

/* The connection is watched while the request waits (hsrv.h): a client that hangs
 * up ends the work at once, not when the reply would be written. */
void req_async_begin(req_ctx *c)
{
    if (c->on_close_set)
        return;
    hconn_on_close(c->conn, on_conn_close, c);
    c->on_close_set = 1;
    c->app->inflight++;
}

/* The client went away while we were working: stop the work. */
static void on_conn_close(void *arg)
{
    req_ctx *c = arg;
    c->on_close_set = 0;
    c->app->inflight--;
    c->status = 499;
    c->outcome = "client_closed";
    access_log(c, 0);
    ctx_free(c);
}

/* ---- the request's transport: what the surfaces read and send ---- */

const char *req_query(req_ctx *c)
{
    return hconn_query(c->conn);
}

const struct sockaddr *req_peer(req_ctx *c)
{
    return hconn_peer(c->conn);
}

void req_public_base(req_ctx *c, char *out, size_t outlen)
{
    proxy_request pr = {req_peer(c), hconn_fd(c->conn), req_header(c, "X-Forwarded-Proto"),
                        req_header(c, "X-Forwarded-Host"), req_header(c, "Host")};
    proxy_public_base(&pr, c->app->cfg->trusted_proxies, c->app->cfg->public_url, out, outlen);
}

/* A stream is its connection (hsrv.h), with the close callback of the owner. */
struct hstream {
    hconn *conn;
    void (*on_close)(void *arg);
    void *arg;
};

static void stream_start(req_ctx *c)
{
    hconn_add_header(c->conn, "Content-Type", "text/event-stream");
    hconn_add_header(c->conn, "Cache-Control", "no-store");
    hconn_add_header(c->conn, "bkn-request-id", c->request_id);
    hconn_stream_begin(c->conn, 200, "OK");
}

void req_stream_begin(req_ctx *c)
{
    if (c->sse)
        return;
    stream_start(c);
    c->sse = 1;
}

void req_stream_write(req_ctx *c, const char *data, size_t len)
{
    hconn_stream_write(c->conn, data, len);
}

void req_end_stream(req_ctx *c, size_t bytes_out)
{
    async_end(c);
    hconn_stream_end(c->conn);
    c->status = 200;
    access_log(c, bytes_out);
    ctx_free(c);
}

static void on_stream_close(void *arg)
{
    hstream *s = arg;
    s->on_close(s->arg);
    free(s);
}

hstream *req_stream_detach(req_ctx *c, void (*on_close)(void *arg), void *arg)
{
    hstream *s = xcalloc(1, sizeof *s);
    s->conn = c->conn;
    s->on_close = on_close;
    s->arg = arg;
    stream_start(c);
    async_end(c);
    c->status = 200;
    access_log(c, 0);
    ctx_free(c);
    hconn_on_close(s->conn, on_stream_close, s);
    return s;
}

void hstream_write(hstream *s, const char *data, size_t len)
{
    hconn_stream_write(s->conn, data, len);
}

void hstream_end(hstream *s)
{
    hconn_on_close(s->conn, NULL, NULL);
    hconn_stream_end(s->conn);
    free(s);
}

void req_reply(req_ctx *c, int status, const char *content_type, const char *body, size_t len)
{
    async_end(c);
    hconn *h = c->conn;
    hconn_add_header(h, "bkn-request-id", c->request_id);
    if (!hconn_has_header(h, "Cache-Control"))
        hconn_add_header(h, "Cache-Control", "no-store");
    if (content_type)
        hconn_add_header(h, "Content-Type", content_type);
    c->status = status;
    const char *reason = status == 200   ? "OK"
                         : status == 202 ? "Accepted"
                         : status == 400 ? "Bad Request"
                         : status == 401 ? "Unauthorized"
                         : status == 403 ? "Forbidden"
                         : status == 404 ? "Not Found"
                         : status == 405 ? "Method Not Allowed"
                         : status == 406 ? "Not Acceptable"
                         : status == 408 ? "Request Timeout"
                         : status == 409 ? "Conflict"
                         : status == 413 ? "Payload Too Large"
                         : status == 414 ? "URI Too Long"
                         : status == 415 ? "Unsupported Media Type"
                         : status == 417 ? "Expectation Failed"
                         : status == 422 ? "Unprocessable Content"
                         : status == 429 ? "Too Many Requests"
                         : status == 500 ? "Internal Server Error"
                         : status == 501 ? "Not Implemented"
                         : status == 502 ? "Bad Gateway"
                         : status == 503 ? "Service Unavailable"
                         : status == 504 ? "Gateway Timeout"
                         : status == 505 ? "HTTP Version Not Supported"
                                         : "Status";
    hconn_reply(h, status, reason, body, len); /* Date and Content-Length: hsrv */
    access_log(c, len);
    ctx_free(c);
}

void req_reply_json(req_ctx *c, int status, const char *json)
{
    req_reply(c, status, "application/json; charset=utf-8", json, strlen(json));
}

void req_reply_error(req_ctx *c, int status, const char *code, const char *details)
{
    buf b = BUF_INIT;
    err_next next;
    err_next_of(status, &next);
    err_write(&b, status, c->lang, code, NULL, NULL, details, &next, NULL);
    int after = err_retry_after_s(&next);
    if (after > 0) { /* the header and retry_after_ms say the same wait */
        char v[16];
        snprintf(v, sizeof v, "%d", after);
        req_add_header(c, "Retry-After", v);
    }
    req_add_header(c, "Content-Language", lang_tag(c->lang));
    req_reply(c, status, "application/json; charset=utf-8", b.data, b.len);
    buf_free(&b);
}

/* ---- authentication ---- */

/* credentials: 0 when the request carried none (RFC 6750 section 3.1: then the
 * challenge has no error code, so a client can tell "log in" from "refresh"). */
static void reply_unauthorized(req_ctx *c, const char *details, int credentials)
{
    buf h = BUF_INIT;
    buf_puts(&h, "Bearer realm=\"context-loader\"");
    if (credentials)
        buf_puts(&h, ", error=\"invalid_token\"");
    const char *meta = c->app->cfg->oauth_resource_metadata_url;
    if (*meta) {
        buf_printf(&h, ", resource_metadata=\"%s\"", meta);
    } else if (*c->app->cfg->oauth_authorization_servers) {
        /* our own RFC 9728 document for the path asked for (path-suffixed form) */
        char base[512];
        req_public_base(c, base, sizeof base);
        const char *suffix = strspn(c->path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789/_.-") == strlen(c->path)
                                 ? c->path
                                 : "";
        buf_printf(&h, ", resource_metadata=\"%s/.well-known/oauth-protected-resource%s\"", base,
                   suffix);
    }
    req_add_header(c, "WWW-Authenticate", h.data);
    buf_free(&h);
    req_reply_error(c, 401, NULL, details);
}

/* limits.max_calls_per_principal: a POST to an MCP or REST route counts from here
 * until its request ends (ctx_free). Replies 429 and returns 1 past the limit. */
static int principal_over_limit(req_ctx *c)
{
    if (strcmp(c->method, "POST") || (c->kind != ROUTE_MCP && c->kind != ROUTE_REST) || !g_plimit)
        return 0;
    if (plimit_enter(g_plimit, c->who.key)) {
        c->plimit_held = 1;
        return 0;
    }
    char details[160];
    snprintf(details, sizeof details,
             "this principal already has %ld calls in flight (limits.max_calls_per_principal)",
             c->app->cfg->limits_max_calls_per_principal);
    req_reply_error(c, 429, "Public.TooManyRequests.CallsInFlight", details);
    return 1;
}

static void on_auth(auth_status st, const principal *who, const char *detail, void *arg)
{
    req_ctx *c = arg;
    req_pending_clear(c);
    if (st == AUTH_OK) {
        c->who = *who;
        c->authed = 1;
        if (principal_over_limit(c))
            return;
        c->handler(c);
    } else if (st == AUTH_INVALID) {
        reply_unauthorized(c, detail ? detail : "token is invalid", 1);
    } else {
        req_reply_error(c, 503, "Public.ServiceUnavailable.AuthUnavailable",
                        detail ? detail : "token introspection is unavailable");
    }
}

/* The raw bearer token of the request (a pointer into its headers, so it lives and
 * dies with the request and is never copied into req_ctx), or NULL. */
static const char *req_bearer(req_ctx *c)
{
    const char *h = req_header(c, "Authorization");
    if (!h)
        h = req_header(c, "X-Authorization");
    if (!h || !*h)
        return NULL;
    const char *tok = h;
    if (str_istartswith(h, "Bearer "))
        tok = h + 7;
    while (*tok == ' ')
        tok++;
    return tok;
}

static void cancel_auth(void *w)
{
    auth_cancel(w);
}

static void memo_free(void *m)
{
    auth_memo_clear(m);
    free(m);
}

/* A client sends the same token on every request of its connection: the
 * connection's memo spares hashing it again. */
static void authenticate(req_ctx *c)
{
    const char *tok = req_bearer(c);
    if (!tok) {
        reply_unauthorized(c, "missing bearer token", 0);
        return;
    }
    auth_memo *m = hconn_user(c->conn);
    if (!m) {
        m = xcalloc(1, sizeof *m);
        hconn_set_user(c->conn, m, memo_free);
    }
    req_async_begin(c);
    req_pending_set(c, auth_check_memo(c->app->auth, tok, strlen(tok), m, on_auth, c), cancel_auth);
}

/* ---- routing ---- */

/* Origin allow-list (config) plus loopback origins; DNS-rebinding guard on Host
 * when the listener is a loopback address (MCP transport security, and the admin
 * listener). Host and Origin are parsed exactly (hostguard.h). */
static int origin_allowed(req_ctx *c, int loopback_listener)
{
    if (loopback_listener && !hostguard_host_is_loopback(req_header(c, "Host")))
        return 0;
    return hostguard_origin_allowed(req_header(c, "Origin"), c->app->cfg->allowed_origins);
}

int req_origin_allowed(req_ctx *c)
{
    return origin_allowed(c, c->app->listen_loopback);
}

/* "trace_core": whether it is configured (without it every MCP tool answers
 * feature_not_installed), the breaker, and the last availability probe's verdict. */
static void health_trace_core(buf *b, trace_ctx *t)
{
    static const char *const breaker[] = {"closed", "open", "half_open"};
    int on = t && trace_installed(t);
    buf_printf(b, "\"trace_core\":{\"configured\":%s", on ? "true" : "false");
    if (!on) {
        buf_puts(b, ",\"effect\":\"every MCP tool answers feature_not_installed: set "
                    "trace_core.url (env BKN_TRACE_CORE_URL)\"}");
        return;
    }
    trace_stats_t st;
    trace_stats(t, &st);
    buf_printf(b, ",\"breaker\":\"%s\",\"last_probe\":", breaker[st.breaker]);
    if (st.last_probe < 0) {
        buf_puts(b, "null}");
        return;
    }
    char at[25];
    time_rfc3339(st.last_probe_wall_ms, at);
    buf_printf(b, "{\"verdict\":\"%s\",\"at\":\"%s\"}}",
               st.last_probe == PROBE_ALIVE ? "alive" : "down", at);
}

static void health(req_ctx *c, int ready)
{
    if (!ready) {
        req_reply_json(c, 200, "{\"status\":\"alive\"}");
        return;
    }
    buf b = BUF_INIT;
    tools_gen *g = tools_host_acquire(c->app->tools);
    int ok = g != NULL && !c->app->draining;
    buf_printf(&b, "{\"status\":\"%s\",\"generation\":%u,\"tools\":%zu,\"upstreams\":{",
               ok ? "ready" : (c->app->draining ? "draining" : "not_ready"),
               g ? tools_gen_id(g) : 0, g ? tools_gen_count(g) : 0);
    for (size_t i = 0; i < c->app->n_upstreams; i++)
        buf_printf(&b, "%s\"%s\":%s", i ? "," : "", c->app->upstreams[i].name,
                   *c->app->upstreams[i].base_url ? "true" : "false");
    /* what this process has seen of each: the last success and failure (when, why) */
    buf_puts(&b, "},\"upstream_status\":{");
    for (size_t i = 0; i < c->app->n_upstreams; i++) {
        buf_printf(&b, "%s\"%s\":", i ? "," : "", c->app->upstreams[i].name);
        uphealth_write_json(&b, c->app->upstreams[i].name, *c->app->upstreams[i].base_url != 0);
    }
    buf_puts(&b, "},");
    health_trace_core(&b, c->app->trace);
    buf_putc(&b, '}');
    if (g)
        tools_gen_release(g);
    req_reply(c, ok ? 200 : 503, "application/json; charset=utf-8", b.data, b.len);
    buf_free(&b);
}

void req_not_found(req_ctx *c)
{
    req_reply_error(c, 404, NULL, "no such route");
}

/* The servers of the public and the admin listener. */
static hsrv *g_srv, *g_admin_srv;
static int g_admin_loopback;

/* A request the connection guard refused (framing, connection cap): answered with
 * the JSON error, and the connection closes. */
static void reply_refused(req_ctx *c, int status, const char *reason)
{
    req_add_header(c, "Connection", "close");
    req_reply_error(c, status,
                    status == 503 ? "Public.ServiceUnavailable.TooManyConnections" : NULL, reason);
}

/* A request context for the connection's request; *refused: the status of a refusal
 * to answer with *why (hsrv.h), or 0. */
static req_ctx *ctx_for(app *a, hconn *conn, int *refused, const char **why)
{
    if (!hconn_refusal(conn, refused, why))
        *refused = 0;
    req_ctx *c = ctx_new();
    c->app = a;
    c->conn = conn;
    c->t0 = now_mono_ms();
    str_copy(c->method, sizeof c->method, hconn_method(conn));
    const char *path = hconn_path(conn);
    str_copy(c->path, sizeof c->path, *path ? path : "/");
    return c;
}

static void gencb(hconn *conn, void *arg)
{
    app *a = arg;
    int refused;
    const char *why = NULL;
    req_ctx *c = ctx_for(a, conn, &refused, &why);
    a->requests_total++;

    const char *rid = req_header(c, "bkn-request-id");
    if (!valid_request_id(rid))
        rid = req_header(c, "x-request-id");
    if (valid_request_id(rid)) {
        str_copy(c->request_id, sizeof c->request_id, rid);
        c->caller_request_id = 1;
    } else
        new_request_id(c->request_id, sizeof c->request_id);
    const char *tp = req_header(c, "traceparent");
    if (valid_traceparent(tp))
        str_copy(c->traceparent, sizeof c->traceparent, tp);
    c->tracestate = valid_trace_text(req_header(c, "tracestate"), TRACESTATE_MAX);
    c->baggage = valid_trace_text(req_header(c, "baggage"), BAGGAGE_MAX);
    c->lang = lang_from_accept(req_header(c, "Accept-Language"), a->default_lang);
    if (refused) {
        reply_refused(c, refused, why);
        return;
    }

    if (!strcmp(c->path, "/health/alive") || !strcmp(c->path, "/health/ready")) {
        health(c, c->path[8] == 'r');
        return;
    }
    if (!strncmp(c->path, "/.well-known/", 13)) { /* public metadata (RFC 9728) */
        a->route(c, c->path);
        return;
    }
    size_t plen = strlen(a->prefix);
    if (strncmp(c->path, a->prefix, plen) != 0 || (c->path[plen] != '/' && c->path[plen])) {
        req_not_found(c);
        return;
    }
    route_handler h = a->route(c, c->path + plen); /* NULL: it answered, c is gone */
    if (!h)
        return;
    c->handler = h;
    if (a->draining) {
        req_add_header(c, "Connection", "close");
        req_reply_error(c, 503, "Public.ServiceUnavailable.ShuttingDown",
                        "server is shutting down");
        return;
    }
    authenticate(c);
}

/* Splits "host:port" (host may be "[v6]") of a listen setting in place in host
 * (a copy of addr); *h and *port point into it. */
static int split_listen_addr(const char *addr, char host[256], const char **h, const char **port,
                             char *err, size_t errlen)
{
    str_copy(host, 256, addr);
    char *colon = strrchr(host, ':');
    if (!colon) {
        snprintf(err, errlen, "listen address '%s' is not host:port", addr);
        return -1;
    }
    *colon = '\0';
    *port = colon + 1;
    *h = host;
    if (host[0] == '[') { /* [::1] */
        (*h)++;
        char *e = strchr(host, ']');
        if (e)
            *e = '\0';
    }
    return 0;
}

static int bind_listener(hsrv *srv, const char *addr, char *err, size_t errlen)
{
    int fd = -1;
    /* the master's binder: its errors carry the system's reason ("Address already in use") */
    if (httpd_bind_socket(addr, &fd, err, errlen) < 0)
        return -1;
    hsrv_listen(srv, fd);
    return 0;
}

void httpd_log_listening(int fd, const char *what)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    char host[64] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        port = ntohs(sin->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        port = ntohs(sin6->sin6_port);
    }
    log_line *l = log_begin(LOG_INFO, "listening");
    log_str(l, "listener", what);
    log_str(l, "addr", host);
    log_int(l, "port", port);
    log_end(l);
}

static void print_bound(hsrv *s, const char *what)
{
    httpd_log_listening(hsrv_listen_fd(s), what);
}

/* Same parsing and socket options as libevent's evhttp_bind_socket had (SO_REUSEADDR, backlog),
 * but without an event base: the master binds before forking the workers. */
int httpd_bind_socket(const char *addr, int *out, char *err, size_t errlen)
{
    int rc = -1, fd = -1;
    struct addrinfo *res = NULL;
    char host[256];
    const char *h, *port;
    if (split_listen_addr(addr, host, &h, &port, err, errlen) < 0)
        goto done;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(*h ? h : NULL, port, &hints, &res);
    if (gai) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, gai_strerror(gai));
        goto done;
    }
    /* non-blocking: every worker accepts until EAGAIN, so a lost race must not block */
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, res->ai_protocol);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 511) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(errno));
        goto done;
    }
    *out = fd;
    fd = -1;
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    if (res)
        freeaddrinfo(res);
    return rc;
}

void httpd_set_metrics_share(mshare *share)
{
    g_share = share;
}

void httpd_set_worker(int index, int count, int listen_fd, int admin_fd, pid_t master)
{
    g_worker = index;
    g_workers = count;
    g_listen_fd = listen_fd;
    g_admin_fd = admin_fd;
    g_master = master;
}

static int is_loopback_bound(hsrv *s)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(hsrv_listen_fd(s), (struct sockaddr *)&ss, &len) < 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
    return 0;
}

/* The /metrics body: recorded series, then the figures of each module that owns
 * some (each writes its own series), then this layer's own. */
static void httpd_metrics_text(app *a, buf *b)
{
    if (g_metrics)
        metrics_render(g_metrics, b);
    tools_host_write_metrics(a->tools, b);
    call_write_metrics(b);
    metrics_write_gauge(b, "cl_requests_inflight", "Requests waiting on asynchronous work.",
                        (double)a->inflight);
    metrics_write_gauge(b, "cl_sse_streams_open",
                        "Open MCP event streams (session GET streams and subscriptions/listen).",
                        (double)a->n_streams);
    auth_write_metrics(a->auth, b);
    trace_write_metrics(a->trace, b);
    idem_write_metrics(a->idem, b);
    store_write_metrics(a->store, b);
    hsrv_write_metrics(g_srv, g_admin_srv, b);
    uphealth_write_metrics(b);
    metrics_write_gauge(b, "process_start_time_seconds",
                        "Start time of the process (Unix seconds).",
                        (double)a->started_ms / 1000.0);
    metrics_write_process(b);
    metrics_write_header(b, "cl_build_info", "gauge", "Build of this binary (value 1).");
    metrics_write_sample(b, "cl_build_info", "version=\"" CL_VERSION "\"", 1);
    metrics_write_gauge(b, "cl_workers", "Worker processes of this instance (config key workers).",
                        (double)g_workers);
    metrics_write_gauge(b, "cl_worker_index",
                        "Index of the worker answering /metrics (0 when single).",
                        (double)(g_worker < 0 ? 0 : g_worker));
}

/* workers > 1: this worker's text goes to its slot; the scrape merges every slot. */
static void publish_metrics(app *a)
{
    buf b = BUF_INIT;
    httpd_metrics_text(a, &b);
    mshare_publish(g_share, g_worker, b.data ? b.data : "", b.len);
    buf_free(&b);
}

static void on_publish_metrics(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    publish_metrics(arg);
}

static void httpd_metrics_scrape(app *a, buf *b)
{
    if (!g_share || g_workers < 2 || g_worker < 0) {
        httpd_metrics_text(a, b);
        return;
    }
    publish_metrics(a); /* this worker's own series are current */
    int n = g_workers;
    buf *texts = xcalloc((size_t)n, sizeof *texts);
    const char **ptrs = xcalloc((size_t)n, sizeof *ptrs);
    size_t *lens = xcalloc((size_t)n, sizeof *lens);
    for (int k = 0; k < n; k++) {
        if (mshare_read(g_share, k, &texts[k]) == 0) {
            ptrs[k] = texts[k].data;
            lens[k] = texts[k].len;
        }
    }
    metrics_merge_workers(ptrs, lens, n, b);
    for (int k = 0; k < n; k++)
        buf_free(&texts[k]);
    free(texts);
    free(ptrs);
    free(lens);
}

/* The admin listener's guard (every route but /health): the Host/Origin rule of the
 * MCP endpoint and, when admin.token_file is set, the bearer token. Replies and
 * returns 0 when the request may not go on. */
static int admin_allowed(req_ctx *c)
{
    if (!origin_allowed(c, g_admin_loopback)) {
        req_reply_error(c, 403, "Public.Forbidden.OriginRejected",
                        "Origin or Host header not allowed on the admin listener");
        return 0;
    }
    const char *auth = req_header(c, "Authorization");
    if (!admin_token_ok(&g_admin_token, auth)) {
        req_add_header(c, "WWW-Authenticate",
                       auth ? "Bearer realm=\"context-loader-admin\", error=\"invalid_token\""
                            : "Bearer realm=\"context-loader-admin\"");
        /* a static token: nothing to refresh, the request must carry the right one */
        buf b = BUF_INIT;
        err_next next = {0, 0, "fix_request"};
        err_write(&b, 401, c->lang, NULL, NULL, text_get(TEXT_ADMIN_TOKEN_SOLUTION, c->lang),
                  auth ? "the bearer token is not the admin token (admin.token_file)"
                       : "the admin listener needs the admin token (admin.token_file) as a "
                         "bearer token",
                  &next, NULL);
        req_add_header(c, "Content-Language", lang_tag(c->lang));
        req_reply(c, 401, "application/json; charset=utf-8", b.data, b.len);
        buf_free(&b);
        return 0;
    }
    return 1;
}

static void admin_gencb(hconn *conn, void *arg)
{
    app *a = arg;
    int refused;
    const char *why = NULL;
    req_ctx *c = ctx_for(a, conn, &refused, &why);
    new_request_id(c->request_id, sizeof c->request_id);
    c->lang = lang_from_accept(req_header(c, "Accept-Language"), a->default_lang);
    if (refused) {
        reply_refused(c, refused, why);
        return;
    }
    if (!strcmp(c->path, "/health/alive") || !strcmp(c->path, "/health/ready")) {
        health(c, c->path[8] == 'r');
        return;
    }
    if (!admin_allowed(c))
        return;
    if (!strcmp(c->path, "/") && !strcmp(c->method, "GET")) {
        /* the index: what this listener serves */
        static const char INDEX[] =
            "{\"service\":\"context-loader\",\"version\":\"" CL_VERSION "\",\"routes\":["
            "{\"method\":\"GET\",\"path\":\"/health/alive\",\"description\":\"the process "
            "answers (no token)\"},"
            "{\"method\":\"GET\",\"path\":\"/health/ready\",\"description\":\"generation, "
            "tools, upstreams and what was seen of them, Trace Core (no token)\"},"
            "{\"method\":\"GET\",\"path\":\"/metrics\",\"description\":\"Prometheus text "
            "format 0.0.4, every worker\"},"
            "{\"method\":\"GET\",\"path\":\"/admin/tools\",\"description\":\"the current tool "
            "generation, live generations, the last reload\"},"
            "{\"method\":\"POST\",\"path\":\"/admin/reload\",\"description\":\"reload the "
            "tools: 200 swapped, 202 deferred, 422 rejected with file:line errors\"}]}";
        req_reply_json(c, 200, INDEX);
        return;
    }
    if (!strcmp(c->path, "/admin/reload")) {
        if (strcmp(c->method, "POST")) {
            req_add_header(c, "Allow", "POST");
            req_reply_error(c, 405, NULL, "use POST on /admin/reload");
            return;
        }
        char *json = NULL;
        int rc = tools_host_reload_ops(a->tools, "admin", &json);
        /* The master forwards SIGHUP to every other worker (it skips the sender);
         * getppid guards against signalling whoever adopted an orphan. */
        if (g_workers > 1 && g_master > 0 && getppid() == g_master)
            kill(g_master, SIGHUP);
        if (rc == TOOLS_RELOAD_DEFERRED)
            req_add_header(c, "Retry-After", "1");
        req_reply(c,
                  rc == TOOLS_RELOAD_OK         ? 200
                  : rc == TOOLS_RELOAD_DEFERRED ? 202
                                                : 422,
                  "application/json; charset=utf-8", json, strlen(json));
        free(json);
        return;
    }
    if (!strcmp(c->path, "/admin/tools") && !strcmp(c->method, "GET")) {
        buf b = BUF_INIT;
        tools_host_status_json(a->tools, &b);
        req_reply(c, 200, "application/json; charset=utf-8", b.data, b.len);
        buf_free(&b);
        return;
    }
    if (!strcmp(c->path, "/metrics") && !strcmp(c->method, "GET")) {
        buf b = BUF_INIT;
        httpd_metrics_scrape(a, &b);
        req_reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
        buf_free(&b);
        return;
    }
    req_not_found(c);
}

#define JSON_TYPE "application/json; charset=utf-8"

int httpd_start(app *a, char *err, size_t errlen)
{
    /* the whole request within a window, the framing check on every request (hsrv.h) */
    hsrv_limits lim = {(int)a->cfg->limits_idle_timeout_s, (int)a->cfg->limits_idle_timeout_s,
                       (size_t)a->cfg->limits_max_header_bytes,
                       (uint64_t)a->cfg->limits_max_body_bytes,
                       (size_t)a->cfg->limits_max_connections};
    if (admin_token_load(&g_admin_token, a->cfg->admin_listen, a->cfg->admin_token_file, err,
                         errlen) < 0)
        return -1;
    g_srv = hsrv_new(a->base, &lim, gencb, a, JSON_TYPE);
    a->http = g_srv;
    if (!g_plimit)
        g_plimit = plimit_new((size_t)a->cfg->limits_max_calls_per_principal);
    if (g_listen_fd >= 0) {
        /* a worker: accept on the socket the master bound (and already logged) */
        hsrv_listen(g_srv, g_listen_fd);
        g_listen_fd = -1;
    } else {
        if (bind_listener(g_srv, a->cfg->listen, err, errlen) < 0)
            return -1;
        print_bound(g_srv, "public");
    }
    a->listen_loopback = is_loopback_bound(g_srv);

    if (!g_metrics)
        g_metrics = metrics_new();
    if (g_share && g_workers > 1 && g_worker >= 0 && !g_share_ev) {
        static const struct timeval every = {1, 0};
        g_share_ev = event_new(a->base, -1, EV_PERSIST, on_publish_metrics, a);
        event_add(g_share_ev, &every);
        publish_metrics(a);
    }
    const char *admin = a->cfg->admin_listen;
    /* workers > 1: worker 0 alone serves it, on the socket the master bound */
    if (*admin && (g_worker < 0 || g_admin_fd >= 0)) {
        hsrv_limits al = {30, 30, 16384, 65536, 0};
        g_admin_srv = hsrv_new(a->base, &al, admin_gencb, a, JSON_TYPE);
        a->admin_http = g_admin_srv;
        if (g_admin_fd >= 0) {
            hsrv_listen(g_admin_srv, g_admin_fd);
            g_admin_fd = -1;
        } else {
            if (bind_listener(g_admin_srv, admin, err, errlen) < 0)
                return -1;
            print_bound(g_admin_srv, "admin");
        }
        g_admin_loopback = is_loopback_bound(g_admin_srv);
    }
    return 0;
}

int httpd_listen_fd(const app *a)
{
    return hsrv_listen_fd(a->http);
}

void httpd_stop_accepting(app *a)
{
    hsrv_stop_accepting(a->http);
}

void httpd_free(app *a)
{
    hsrv_free(g_srv);
    hsrv_free(g_admin_srv);
    g_srv = g_admin_srv = NULL;
    a->http = a->admin_http = NULL;
    plimit_free(g_plimit);
    g_plimit = NULL;
    metrics_free(g_metrics);
    g_metrics = NULL;
    if (g_share_ev)
        event_free(g_share_ev);
    g_share_ev = NULL;
    while (g_ctx_nkept > 0)
        free(g_ctx_kept[--g_ctx_nkept]);
}

void req_call_env(req_ctx *c, call_env *env)
{
    memset(env, 0, sizeof *env);
    env->who = &c->who;
    env->request_id = c->request_id;
    env->traceparent = c->traceparent[0] ? c->traceparent : NULL;
    env->tracestate = c->tracestate;
    env->baggage = c->baggage;
    env->lang = c->lang;
    env->kn_id_header = req_header(c, "X-Kn-ID");
    env->surface = c->surface;
    env->deadline_ms = 0;
    if (!c->reqinfo) {
        static const char *const names[][2] = {{"host", "Host"},
                                               {"forwarded_host", "X-Forwarded-Host"},
                                               {"forwarded_proto", "X-Forwarded-Proto"}};
        /* X-Forwarded-* only from a trusted proxy (tools build links from them) */
        size_t n = (req_header(c, "X-Forwarded-Host") || req_header(c, "X-Forwarded-Proto")) &&
                           proxy_trusted(req_peer(c), c->app->cfg->trusted_proxies)
                       ? sizeof names / sizeof names[0]
                       : 1;
        c->reqinfo = json_new_object();
        for (size_t i = 0; i < n; i++) {
            const char *v = req_header(c, names[i][1]);
            if (v)
                json_set(c->reqinfo, names[i][0], json_new_str(v, strlen(v)));
        }
    }
    env->request = c->reqinfo;
    env->config = c->app->ctx_config;
    /* The validated turn context (flow has checked it before any call starts): the
     * arguments of tools/call on MCP, the body on REST. */
    const json_value *args = c->msg;
    if (args && c->kind == ROUTE_MCP) {
        const json_value *params = json_get(c->msg, "params");
        args = params ? json_get(params, "arguments") : NULL;
    }
    const json_value *bkn =
        args && json_typeof(args) == JSON_OBJECT ? json_get(args, "bkn_context") : NULL;
    env->bkn_context = bkn && json_typeof(bkn) == JSON_OBJECT ? bkn : NULL;
    env->caller_token = c->authed ? req_bearer(c) : NULL;
}
