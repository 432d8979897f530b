/* call: one tool call as a coroutine. See call.h and docs/tools-host.md. */
#include "call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <lauxlib.h>

#include "errenv.h"
#include "identity.h"
#include "json_lua.h"
#include "log.h"
#include "lvm.h"
#include "metrics.h"
#include "toon.h"
#include "tokproxy.h"
#include "toon_lua.h"
#include "toonview.h"
#include "uphealth.h"
#include "upstream_req.h"
#include "util.h"

enum { PHASE_STARTING, PHASE_RUNNING, PHASE_WAITING, PHASE_DONE };

/* Lua run time of a call (summed over its resumes) before its instructions are
 * counted (lvm.h): most calls finish well inside it and never pay for the count
 * hook; a call that runs longer is counted from then on, and the run-time slice
 * (lua.max_run_ms) is checked from then on too. At most a few hundred thousand
 * instructions go uncounted, against a budget of hundreds of millions. */
#ifndef CALL_UNCOUNTED_US /* a build may set its own (instruction-count profiles) */
#define CALL_UNCOUNTED_US 2000
#endif

typedef struct ctx_ud {
    struct call *c; /* NULL once the call ended: ctx is dead */
    /* what the fields of LVM_CTX_FIELDS are made of on their first read (host.ctx_fn;
     * most calls read none), so also after the call ended */
    lua_Integer generation, deadline_ms;
    int has_request;
    const json_value *config; /* the deployment's, fixed for the server's life */
    size_t request_id_len, principal_len, request_len, surface_len;
    /* request_id_len bytes of request_id, then principal_len bytes of the principal
     * (account_id NUL account_type NUL, or nothing for a call without one), then
     * request_len bytes of ctx.request (each key NUL value NUL), then the surface */
    char text[];
} ctx_ud;

static void push_shared_config(lua_State *L, const json_value *config);
static void push_shared_principal(lua_State *L, const char *text, size_t n);
static void push_request_text(lua_State *L, const char *text, size_t n);

struct call {
    tools_gen *gen;
    lvm *vm;
    lua_State *L;
    lua_State *co;
    int co_ref;
    int co_clean; /* co returned and handed its results over: it may serve another call */
    int ud_ref;
    ctx_ud *ud;
    const tools_info *info;
    const tools_config *cfg;
    const json_value *args; /* only during call_start */
    principal who;
    int has_who;
    char *request_id;
    char *traceparent;
    char *tracestate, *baggage; /* passed on unchanged, or NULL */
    char *kn_id_header;
    const json_value *env_query, *env_request, *env_config; /* borrowed during call_start */
    const json_value *env_bkn;                              /* borrowed during call_start */
    char *operation_id;
    char *caller_token; /* wiped before it is freed; never pushed into Lua */
    char *surface;
    lang_id lang;
    int64_t deadline_ms;
    call_done_fn done;
    void *done_arg;
    lvm_budget budget;
    int phase;
    struct event *ev;
    fetch_req *freq;
    int64_t fetch_t0;
    const tools_upstream *fetch_up; /* the request in flight, for the failure log */
    char fetch_method[8];
    char fetch_path[200];
    const fetch_response *resp; /* only while the response is being pushed */
    buf req_url, req_body;      /* ctx.http's request being built (fetch_start copies them) */
    /* result */
    int status;
    int is_error;
    buf body;
    buf toon;     /* the TOON text: the tool's render(), else rendered from value */
    int toon_set; /* toon holds a rendering */
    int toon_wanted;
    size_t output_bytes; /* set when the result was over cfg->max_output_bytes */
    int want_value;      /* build the result tree (value) */
    int keep_value;      /* the tree goes to the callback (else it serves the TOON text only) */
    json_value *value;   /* the result or error object as a tree, or NULL */
    char *error_code;
    char incident[24];
    int64_t lua_ms;
    int64_t upstream_ms;
    int upstream_calls;
};

static size_t g_inflight;

size_t call_inflight(void)
{
    return g_inflight;
}

void call_write_metrics(buf *out)
{
    metrics_write_gauge(out, "cl_tool_calls_inflight", "Lua tool calls in flight.",
                        (double)g_inflight);
}

static void log_call(const call *c, log_level level, const char *msg, const char *k1,
                     const char *v1, const char *k2, const char *v2)
{
    log_line *l = log_begin(level, msg);
    log_str(l, "request_id", c->request_id);
    log_str(l, "tool", c->info->name);
    log_int(l, "generation", tools_gen_id(c->gen));
    if (k1)
        log_str(l, k1, v1);
    if (k2)
        log_str(l, k2, v2);
    log_end(l);
}

/* ---- ctx ---- */

static call *ctx_call(lua_State *L)
{
    ctx_ud *u = lua_touserdata(L, lua_upvalueindex(1));
    if (!u || !u->c)
        luaL_error(L, "ctx used after the call ended");
    return u->c;
}

static int ctx_now_ms(lua_State *L)
{
    ctx_call(L);
    lua_pushinteger(L, (lua_Integer)now_wall_ms());
    return 1;
}

static int ctx_log(lua_State *L)
{
    call *c = ctx_call(L);
    log_level level;
    const char *name = luaL_checkstring(L, 1);
    const char *msg = luaL_checkstring(L, 2);
    if (log_level_parse(name, &level) < 0)
        return luaL_argerror(L, 1, "level must be debug, info, warn or error");
    log_call(c, level, msg, NULL, NULL, NULL, NULL);
    return 0;
}

static int ctx_http(lua_State *L);

/* The state's (one per generation) {host.invoke, host.ctx_mt}, made when host.ctx_fn
 * is set, at its first call. */
static char KEY_CTX_FN;

/* The makers of the fields of LVM_CTX_FIELDS, one per name: each pushes ctx.<name>
 * of the call whose ctx_ud u is on top of the stack (and may use it as an upvalue). */
static void ctx_make_log(lua_State *L, const ctx_ud *u)
{
    (void)u;
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, ctx_log, 1);
}

static void ctx_make_now_ms(lua_State *L, const ctx_ud *u)
{
    (void)u;
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, ctx_now_ms, 1);
}

static void ctx_make_generation(lua_State *L, const ctx_ud *u)
{
    lua_pushinteger(L, u->generation);
}

static void ctx_make_deadline_ms(lua_State *L, const ctx_ud *u)
{
    lua_pushinteger(L, u->deadline_ms);
}

static void ctx_make_request_id(lua_State *L, const ctx_ud *u)
{
    lua_pushlstring(L, u->text, u->request_id_len);
}

static void ctx_make_principal(lua_State *L, const ctx_ud *u)
{
    push_shared_principal(L, u->text + u->request_id_len, u->principal_len);
}

static void ctx_make_request(lua_State *L, const ctx_ud *u)
{
    if (u->has_request)
        push_request_text(L, u->text + u->request_id_len + u->principal_len, u->request_len);
    else
        lua_pushnil(L);
}

static void ctx_make_surface(lua_State *L, const ctx_ud *u)
{
    lua_pushlstring(L, u->text + u->request_id_len + u->principal_len + u->request_len,
                    u->surface_len);
}

static void ctx_make_config(lua_State *L, const ctx_ud *u)
{
    if (u->config)
        push_shared_config(L, u->config);
    else
        lua_pushnil(L);
}

typedef void (*ctx_maker)(lua_State *L, const ctx_ud *u);
#define CTX_MAKER(name) ctx_make_##name,
static const ctx_maker CTX_MAKERS[] = {LVM_CTX_FIELDS(CTX_MAKER)};
#undef CTX_MAKER

/* host.ctx_fn(http, i) -> field i of LVM_CTX_FIELDS (clruntime.ctx_fields[i]) of the
 * call whose ctx.http is http, made on the first read of the field instead of in
 * every call. */
static int ctx_fn(lua_State *L)
{
    lua_Integer i = luaL_checkinteger(L, 2);
    if (lua_tocfunction(L, 1) != ctx_http)
        return luaL_error(L, "ctx_fn: not a ctx.http");
    if (i < 1 || i > (lua_Integer)(sizeof CTX_MAKERS / sizeof CTX_MAKERS[0]))
        return luaL_error(L, "ctx_fn: unknown field");
    lua_getupvalue(L, 1, 1);
    CTX_MAKERS[i - 1](L, lua_touserdata(L, -1));
    return 1;
}

/* A buf owned by Lua (freed by __gc), so raising never leaks it. */
static int gcbuf_gc(lua_State *L)
{
    buf_free(lua_touserdata(L, 1));
    return 0;
}

static buf *push_gcbuf(lua_State *L)
{
    buf *b = lua_newuserdatauv(L, sizeof(buf), 0);
    memset(b, 0, sizeof *b);
    if (luaL_newmetatable(L, "cl.gcbuf")) {
        lua_pushcfunction(L, gcbuf_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

/* Pushes the text of one query scalar (string, number, boolean, boxed cljson
 * number); returns 0 (nothing pushed) for anything else. */
static int push_query_text(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        lua_pushvalue(L, idx);
        return 1;
    case LUA_TNUMBER:
    case LUA_TBOOLEAN:
        luaL_tolstring(L, idx, NULL);
        return 1;
    case LUA_TTABLE:
        if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL) {
            lua_pop(L, 1);
            luaL_tolstring(L, idx, NULL);
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

/* The pairs of one query: the first QUERY_SMALL on the C stack, the rest in a
 * GC-owned buf (pushed on first use, so raising never leaks it). */
#define QUERY_SMALL 16
typedef struct query_pairs {
    upstream_query_pair small[QUERY_SMALL];
    size_t n;
    buf *more; /* all the pairs once there are more than QUERY_SMALL; else NULL */
} query_pairs;

/* Adds the pair key = the string on top of the stack to q, and pops the string
 * into keep (which keeps it alive while the pairs are used). */
static void add_query_pair(lua_State *L, query_pairs *q, int keep, const char *key)
{
    upstream_query_pair p = {key, NULL, 0};
    p.value = lua_tolstring(L, -1, &p.value_len);
    if (q->n < QUERY_SMALL) {
        q->small[q->n] = p;
    } else {
        if (!q->more) {
            q->more = push_gcbuf(L);
            lua_rawsetp(L, keep, q); /* anchored in keep, under a key no pair uses */
            buf_append(q->more, (const char *)q->small, sizeof q->small);
        }
        buf_append(q->more, (const char *)&p, sizeof p);
    }
    lua_rawseti(L, keep, (lua_Integer)++q->n);
}

/* Appends "?k=v&..." for the query table at idx to url (upstream_query_append: keys
 * sorted so URLs are stable, arrays repeat the key). Raises on a key that is not a
 * string, else on a bad value (naming the first such key in key order); url is
 * GC-owned. */
static void build_query(lua_State *L, int idx, buf *url)
{
    const char *bad = NULL;
    query_pairs q;
    int nkeys = 0;
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "ctx.http: query keys must be strings");
        nkeys++;
    }
    q.n = 0;
    q.more = NULL;
    lua_createtable(L, nkeys, nkeys); /* the values, then the keys at -1, -2, ... */
    int keep = lua_gettop(L);
    lua_pushnil(L);
    lua_Integer nread = 0;
    while (lua_next(L, idx)) {
        const char *k = lua_tostring(L, -2);
        /* The key stays alive in keep: a value's __tostring may remove it from the
         * query table (and the collector free it) while the pairs still point at it. */
        lua_pushvalue(L, -2);
        lua_rawseti(L, keep, -++nread);
        int list = lua_type(L, -1) == LUA_TTABLE;
        if (list && luaL_getmetafield(L, -1, "__tostring") != LUA_TNIL) {
            lua_pop(L, 1);
            list = 0; /* a boxed number */
        }
        if (list) {
            lua_Integer j, m = (lua_Integer)lua_rawlen(L, -1);
            for (j = 1; j <= m; j++) {
                lua_rawgeti(L, -1, j);
                if (push_query_text(L, -1))
                    add_query_pair(L, &q, keep, k);
                else if (!bad || strcmp(k, bad) < 0)
                    bad = k;
                lua_pop(L, 1);
            }
        } else if (push_query_text(L, -1)) {
            add_query_pair(L, &q, keep, k);
        } else if (!bad || strcmp(k, bad) < 0) {
            bad = k;
        }
        lua_pop(L, 1);
    }
    if (bad)
        luaL_error(L,
                   "ctx.http: query value of '%s' must be a string, number, boolean or an "
                   "array of those",
                   bad);
    upstream_query_append(url, q.more ? (const upstream_query_pair *)q.more->data : q.small, q.n);
    lua_pop(L, 1);
}

static void on_fetch(const fetch_response *r, void *arg);

typedef struct hdrs {
    fetch_header h[64];
    size_t n;
} hdrs;

static void hdr_add(lua_State *L, hdrs *H, const char *name, const char *value)
{
    if (H->n == sizeof H->h / sizeof H->h[0])
        luaL_error(L, "ctx.http: too many headers");
    H->h[H->n].name = name;
    H->h[H->n].value = value;
    H->n++;
}

/* ctx.http's upstream, method and path (stack slots 2, 3, 4 of the request table at
 * 1) and query (5): the upstream in *up, the URL's path and query in c->req_url.
 * Raises on a tool's mistake. */
static void http_target(lua_State *L, call *c, const tools_upstream **up, const char **method,
                        const char **path)
{
    const char *upname, *perr;
    *up = NULL;
    lua_getfield(L, 1, "upstream"); /* 2 */
    upname = lua_tostring(L, 2);
    if (!upname)
        luaL_error(L, "ctx.http: upstream (a configured upstream name) is required");
    for (size_t i = 0; i < c->cfg->n_upstreams; i++)
        if (strcmp(c->cfg->upstreams[i].name, upname) == 0)
            *up = &c->cfg->upstreams[i];
    if (!*up)
        luaL_error(L, "ctx.http: unknown upstream '%s'", upname);
    lua_getfield(L, 1, "method"); /* 3 */
    *method = lua_isnil(L, 3) ? "GET" : lua_tostring(L, 3);
    if (!upstream_method_valid(*method))
        luaL_error(L, "ctx.http: method must be GET, POST, PUT, PATCH, DELETE or HEAD");
    lua_getfield(L, 1, "path"); /* 4 */
    *path = lua_tostring(L, 4);
    if (!*path)
        luaL_error(L, "ctx.http: path is required");
    if ((perr = upstream_check_path(*path)) != NULL)
        luaL_error(L, "ctx.http: %s", perr);
    buf *url = &c->req_url; /* the call's own: raising leaks nothing, the next request reuses it */
    buf_reset(url);
    if (!(*up)->parsed) /* a config not copied by a tool host */
        buf_puts(url, (*up)->base_url);
    buf_puts(url, *path);         /* after the base URL, parsed once (up->parsed) */
    lua_getfield(L, 1, "query"); /* 5 */
    if (lua_istable(L, 5))
        build_query(L, 5, url);
    else if (!lua_isnil(L, 5))
        luaL_error(L, "ctx.http: query must be a table");
}

/* The tool's own headers (stack slot 6, kept so its strings stay alive) into H. */
static void http_tool_headers(lua_State *L, hdrs *H)
{
    lua_getfield(L, 1, "headers"); /* 6 */
    if (lua_istable(L, 6)) {
        lua_pushnil(L);
        while (lua_next(L, 6)) {
            size_t vlen;
            const char *name, *value;
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "ctx.http: header names and values must be strings");
            name = lua_tostring(L, -2);
            value = lua_tolstring(L, -1, &vlen);
            if (!upstream_header_name_valid(name) || !upstream_header_value_valid(value, vlen))
                luaL_error(L, "ctx.http: invalid header '%s'", name);
            if (upstream_header_reserved(name))
                luaL_error(L, "ctx.http: header '%s' is set by the core and cannot be given by a tool",
                           name);
            hdr_add(L, H, name, value);
            lua_pop(L, 1);
        }
    } else if (!lua_isnil(L, 6)) {
        luaL_error(L, "ctx.http: headers must be a table");
    }
}

/* The request's identity (identity.h) from its managed_proxy and caller_token
 * arguments: IDENTITY_OK or IDENTITY_NO_TOKEN; raises on a refusal. The token never
 * enters Lua. */
static int http_identity(lua_State *L, call *c, const tools_upstream *up, const char *upname,
                         const char *method, identity *id)
{
    char err[300];
    identity_args a = {upname, up->managed_proxy, up->caller_token, method, 0, NULL, 0, 0, 0,
                       c->has_who ? &c->who : NULL, c->caller_token};
    lua_getfield(L, 1, "managed_proxy");
    a.proxy_given = !lua_isnil(L, -1);
    a.proxy_kn = a.proxy_given ? lua_tostring(L, -1) : NULL;
    lua_getfield(L, 1, "caller_token");
    a.token_given = !lua_isnil(L, -1);
    a.token_is_boolean = lua_isboolean(L, -1);
    a.token_wanted = lua_toboolean(L, -1);
    int rc = identity_decide(&a, id, err, sizeof err);
    lua_pop(L, 2); /* keep the stack slots of the later fields where they are */
    if (rc == IDENTITY_REFUSED)
        luaL_error(L, "%s", err);
    return rc;
}

/* The headers the core sets: identity, request id, trace context, language. */
static void http_core_headers(lua_State *L, call *c, hdrs *H, const identity *id,
                              char traceparent[56])
{
    if (id->authorization)
        hdr_add(L, H, "authorization", id->authorization);
    if (id->account_id)
        hdr_add(L, H, "x-account-id", id->account_id);
    if (id->account_type)
        hdr_add(L, H, "x-account-type", id->account_type);
    if (id->tenant_id)
        hdr_add(L, H, "x-tenant-id", id->tenant_id);
    if (id->business_domain)
        hdr_add(L, H, "x-business-domain", id->business_domain);
    hdr_add(L, H, "bkn-request-id", c->request_id);
    hdr_add(L, H, "x-request-id", c->request_id);
    upstream_traceparent_outbound(c->traceparent, 1, traceparent);
    hdr_add(L, H, "traceparent", traceparent);
    if (c->tracestate)
        hdr_add(L, H, "tracestate", c->tracestate);
    if (c->baggage)
        hdr_add(L, H, "baggage", c->baggage);
    hdr_add(L, H, "accept-language", lang_tag(c->lang));
}

/* The body (json= at stack slot 7 or body= at 8) into c->req_body: 1 when the request
 * has one, else 0. */
static int http_body(lua_State *L, call *c, hdrs *H)
{
    char jerr[256];
    buf *body = &c->req_body;
    buf_reset(body);
    lua_getfield(L, 1, "json"); /* 7 */
    lua_getfield(L, 1, "body"); /* 8 */
    int has_json = !lua_isnil(L, 7), has_body = !lua_isnil(L, 8);
    if (has_json && has_body)
        luaL_error(L, "ctx.http: give json= or body=, not both");
    if (has_json) {
        if (cljson_encode(L, 7, body, 0, jerr, sizeof jerr) != 0)
            luaL_error(L, "ctx.http: json: %s", jerr);
        hdr_add(L, H, "content-type", "application/json");
    } else if (has_body) {
        size_t blen;
        const char *b;
        if (lua_type(L, 8) != LUA_TSTRING)
            luaL_error(L, "ctx.http: body must be a string");
        b = lua_tolstring(L, 8, &blen);
        buf_append(body, b, blen);
    }
    return has_json || has_body;
}

/* The request's timeout (timeout_ms= at stack slot 9): the upstream's, or less when
 * the tool asks for less, never past the call's deadline. */
static long http_timeout(lua_State *L, call *c, const tools_upstream *up)
{
    lua_getfield(L, 1, "timeout_ms"); /* 9 */
    long timeout = up->timeout_ms;
    if (!lua_isnil(L, 9)) {
        lua_Integer t = lua_isinteger(L, 9) ? lua_tointeger(L, 9) : 0;
        if (t <= 0)
            luaL_error(L, "ctx.http: timeout_ms must be a positive integer");
        if (timeout <= 0 || t < timeout)
            timeout = (long)t;
    }
    if (c->deadline_ms > 0) {
        int64_t left = c->deadline_ms - now_mono_ms();
        if (left < 1)
            left = 1;
        if (timeout <= 0 || left < timeout)
            timeout = (long)left;
    }
    return timeout;
}

/* ctx.http{upstream=, method=, path=, query=, headers=, json= | body=, timeout_ms=,
 * managed_proxy=, caller_token=} -> response table | nil, err table. Reads the
 * arguments, settles the identity, starts the fetch and yields until it completes. */
static int ctx_http(lua_State *L)
{
    call *c = ctx_call(L);
    const tools_upstream *up;
    const char *method, *path, *ferr = NULL;
    char traceparent[56];
    identity id;
    hdrs H;
    fetch_request req;

    luaL_checktype(L, 1, LUA_TTABLE);
    if (L != c->co)
        return luaL_error(L, "ctx.http must be called from the tool's own coroutine (not from "
                             "a coroutine the tool created)");
    if (!c->cfg->fetch)
        return luaL_error(L, "ctx.http: no upstream client (offline check)");
    lua_settop(L, 1);
    http_target(L, c, &up, &method, &path);
    H.n = 0;
    http_tool_headers(L, &H);
    if (http_identity(L, c, up, lua_tostring(L, 2), method, &id) == IDENTITY_NO_TOKEN) {
        lua_settop(L, 0);
        lua_pushnil(L);
        lua_createtable(L, 0, 2);
        lua_pushliteral(L, "caller_token_missing");
        lua_setfield(L, -2, "code");
        lua_pushliteral(L, "the request carries no bearer token to forward");
        lua_setfield(L, -2, "message");
        return 2;
    }
    http_core_headers(L, c, &H, &id, traceparent);
    int has_body = http_body(L, c, &H);
    long timeout = http_timeout(L, c, up);
    if (!lua_checkstack(L, 4)) { /* room for the values the completion pushes */
        identity_wipe(&id);
        return luaL_error(L, "ctx.http: stack overflow");
    }

    memset(&req, 0, sizeof req);
    req.method = method;
    req.url = up->parsed ? NULL : c->req_url.data;
    req.base = up->parsed;
    req.path = c->req_url.data;
    req.path_len = c->req_url.len;
    req.headers = H.h;
    req.n_headers = H.n;
    req.body = has_body ? (c->req_body.data ? c->req_body.data : "") : NULL;
    req.body_len = c->req_body.len;
    req.timeout_ms = timeout;
    req.max_response = c->cfg->max_response_bytes;
    c->fetch_t0 = now_mono_ms();
    c->fetch_up = up;
    str_copy(c->fetch_method, sizeof c->fetch_method, method);
    str_copy(c->fetch_path, sizeof c->fetch_path, path);
    c->freq = fetch_start(c->cfg->fetch, &req, on_fetch, c, &ferr);
    identity_wipe(&id); /* the client holds its own copy of the headers */
    if (!c->freq)
        return luaL_error(L, "ctx.http: %s", ferr ? ferr : "cannot start the request");
    c->upstream_calls++;
    c->phase = PHASE_WAITING;
    lua_settop(L, 0);
    return lua_yield(L, 0);
}

/* response.json([opts]) -> value | nil, err: cljson.pdecode(body, opts); opts as
 * cljson.decode takes them, e.g. {raw = "datas"} keeps that array's rows raw. The
 * decoder runs on this function's own stack (the body below opts), not through a
 * module look-up and a second call. */
static int resp_json(lua_State *L)
{
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    return cljson_pdecode(L);
}

static const char *transport_code(fetch_result r)
{
    switch (r) {
    case FETCH_TIMEOUT:
        return "upstream_timeout";
    case FETCH_CONNECT:
        return "upstream_unreachable";
    case FETCH_TOO_LARGE:
        return "upstream_response_too_large";
    default:
        return "upstream_error";
    }
}

/* res.headers is made on its first read (most tools never read it): the response's
 * header lines wait, packed as "name\0value\0..." in one string, as the upvalue of
 * res's __index. Pushes the table: names as the fetch gave them (lower case),
 * repeated headers joined with ", " (RFC 9110 field combination). */
static void push_headers(lua_State *L, const char *packed, size_t len)
{
    const char *p = packed, *end = packed + len;
    lua_newtable(L);
    while (p < end) {
        const char *name = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        lua_pushstring(L, name);
        lua_pushvalue(L, -1);
        if (lua_rawget(L, -3) == LUA_TSTRING) {
            lua_pushliteral(L, ", ");
            lua_pushstring(L, value);
            lua_concat(L, 3);
        } else {
            lua_pop(L, 1);
            lua_pushstring(L, value);
        }
        lua_rawset(L, -3);
    }
}

/* __index of a response table: makes res.headers (then stored in res itself). */
static int resp_index(lua_State *L)
{
    size_t len;
    const char *packed;
    if (lua_type(L, 2) != LUA_TSTRING || strcmp(lua_tostring(L, 2), "headers") != 0)
        return 0;
    packed = lua_tolstring(L, lua_upvalueindex(1), &len);
    push_headers(L, packed, len);
    lua_pushvalue(L, -1);
    lua_setfield(L, 1, "headers"); /* rawset: res has no __newindex */
    return 1;
}

static int resp_next(lua_State *L)
{
    lua_settop(L, 2);
    if (lua_next(L, 1))
        return 2;
    lua_pushnil(L);
    return 1;
}

/* __pairs of a response table: res.headers is made first, so pairs lists it. */
static int resp_pairs(lua_State *L)
{
    lua_getfield(L, 1, "headers");
    lua_pop(L, 1);
    lua_pushcfunction(L, resp_next);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

/* Pushes the completion values on the main thread: res | nil, err. */
static int push_response_p(lua_State *L)
{
    call *c = lua_touserdata(L, 1);
    const fetch_response *r = c->resp;
    size_t i;
    lua_settop(L, 0);
    if (r->result != FETCH_OK) {
        lua_pushnil(L);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, transport_code(r->result));
        lua_setfield(L, -2, "code");
        lua_pushstring(L, r->error ? r->error : "transport error");
        lua_setfield(L, -2, "message");
        return 2;
    }
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, r->status);
    lua_setfield(L, -2, "status");
    {
        lua_createtable(L, 0, 2); /* res's metatable */
        if (r->packed_headers) {  /* the lean client's: already in this form */
            lua_pushlstring(L, r->packed_headers, r->packed_headers_len);
        } else {
            luaL_Buffer hb;
            luaL_buffinit(L, &hb);
            for (i = 0; i < r->n_headers; i++) {
                luaL_addstring(&hb, r->headers[i].name);
                luaL_addchar(&hb, '\0');
                luaL_addstring(&hb, r->headers[i].value);
                luaL_addchar(&hb, '\0');
            }
            luaL_pushresult(&hb);
        }
        lua_pushcclosure(L, resp_index, 1);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, resp_pairs);
        lua_setfield(L, -2, "__pairs");
        lua_setmetatable(L, -2);
    }
    lua_pushlstring(L, r->body ? r->body : "", r->body ? r->body_len : 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "body");
    lua_pushcclosure(L, resp_json, 1);
    lua_setfield(L, -2, "json");
    return 1;
}

/* ---- results ---- */

static void set_error_code(call *c, const char *code)
{
    free(c->error_code);
    c->error_code = code ? xstrdup(code) : NULL;
}

/* The 500 envelope of a raised tool or a budget kill; the traceback goes to the log
 * only, the caller sees the incident id. */
static void fail_incident(call *c, const char *error_code, const char *msg, const char *tb)
{
    unsigned char rnd[8];
    random_bytes(rnd, sizeof rnd);
    memcpy(c->incident, "inc_", 4);
    hex_encode(rnd, sizeof rnd, c->incident + 4);
    /* a stable msg to search and count by; what happened is in error and error_code */
    log_line *l = log_begin(LOG_ERROR, "tool call failed");
    log_str(l, "request_id", c->request_id);
    log_str(l, "tool", c->info->name);
    log_int(l, "generation", tools_gen_id(c->gen));
    log_str(l, "incident_id", c->incident);
    log_str(l, "error_code", error_code);
    log_str(l, "error", msg);
    if (tb)
        log_str(l, "traceback", tb);
    log_end(l);
    c->status = 500;
    c->is_error = 1;
    set_error_code(c, error_code);
    buf_reset(&c->body);
    char details[64], extra[64];
    snprintf(details, sizeof details, "incident %s", c->incident);
    snprintf(extra, sizeof extra, "\"incident_id\":\"%s\"", c->incident);
    err_write(&c->body, 500, c->lang, "Public.InternalServerError", NULL,
              text_get(TEXT_ERR_INCIDENT_SOLUTION, c->lang), details, NULL, extra);
}

typedef struct tb_args {
    call *c;
    char *msg;
    char *tb;
} tb_args;

static int traceback_p(lua_State *L)
{
    tb_args *a = lua_touserdata(L, 1);
    lua_State *co = a->c->co;
    const char *m = lua_type(co, -1) == LUA_TSTRING ? lua_tostring(co, -1) : NULL;
    if (!m)
        m = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(co, -1));
    a->msg = xstrdup(m);
    luaL_traceback(L, co, NULL, 0);
    a->tb = xstrdup(lua_tostring(L, -1));
    return 0;
}

static int same_text(const buf *a, const buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* host.invoke returned (status, body, error_code) on the coroutine: encode the body. */
static int collect_p(lua_State *L)
{
    call *c = lua_touserdata(L, lua_gettop(L));
    char err[256];
    int n = lua_gettop(L) - 1;
    if (n < 2)
        return luaL_error(L, "host.invoke returned %d values", n);
    c->status = lua_isinteger(L, 1) ? (int)lua_tointeger(L, 1) : 500;
    set_error_code(c, lua_isstring(L, 3) ? lua_tostring(L, 3) : NULL);
    c->is_error = c->status != 200 || c->error_code != NULL;
    buf_reset(&c->body);
    json_free(c->value);
    c->value = NULL;
    if (lua_type(L, 2) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, 2, &len);
        buf_append(&c->body, s, len);
    } else if (c->want_value
                   /* One walk of the result: its JSON text and its tree (for the TOON
                    * text below and the attempt record), nothing parsed back. */
                   ? cljson_encode_both_max(L, 2, &c->body, &c->value, c->cfg->max_output_bytes,
                                            err, sizeof err) != 0
                   : cljson_encode_max(L, 2, &c->body, 0, c->cfg->max_output_bytes, err,
                                       sizeof err) != 0) {
        if (strncmp(err, CLJSON_TOO_LARGE, strlen(CLJSON_TOO_LARGE)) == 0) {
            c->output_bytes = (size_t)-1; /* stopped while encoding: size unknown */
            return 0;
        }
        return luaL_error(L, "the tool's result cannot be encoded as JSON: %s", err);
    }
    buf_free(&c->toon);
    c->toon_set = 0;
    int ruled = 0; /* the text chosen by the token rule already */
    if (n >= 4 && lua_type(L, 4) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, 4, &len);
        buf_append(&c->toon, s, len);
        c->toon_set = len > 0; /* the tool's own layout */
    }
    if (!c->toon_set && c->toon_wanted && !c->is_error && c->value && n >= 5 &&
        lua_toboolean(L, 5)) {
        /* The tool declared the token-saving view (toon_view); a table is its omit_id
         * rule, applied with the prefix the call's arguments make (the sixth value). */
        size_t plen = 0;
        toonview_omit omit;
        const char *prefix = NULL;
        if (n >= 6 && lua_type(L, 6) == LUA_TSTRING)
            prefix = lua_tolstring(L, 6, &plen);
        int has_omit = prefix && cltoon_omit_rule(L, 5, prefix, plen, &omit);
        int rest = c->surface && strcmp(c->surface, "rest") == 0;
        const char *json = c->body.data ? c->body.data : "";
        int rc;
        if (c->keep_value) {
            rc = toonview_render(&c->toon, c->value, json, c->body.len, rest,
                                 has_omit ? &omit : NULL, err, sizeof err);
        } else {
            /* the tree serves this text only: the view is made of its own values */
            rc = toonview_render_take(&c->toon, c->value, json, c->body.len, rest,
                                      has_omit ? &omit : NULL, err, sizeof err);
            c->value = NULL;
        }
        if (rc < 0)
            log_call(c, LOG_ERROR, "toon rendering failed", "error", err, NULL, NULL);
        else
            c->toon_set = 1, ruled = !rest;
    }
    if (!c->toon_set && c->toon_wanted && !c->is_error && c->value) {
        /* TOON from the result tree (big integers and key order intact). */
        if (toon_encode(&c->toon, c->value, NULL, err, sizeof err) < 0) {
            log_call(c, LOG_ERROR, "toon rendering failed", "error", err, NULL, NULL);
            buf_free(&c->toon); /* falls back to JSON */
        } else {
            c->toon_set = 1;
        }
    }
    if (c->toon_set && !(c->surface && strcmp(c->surface, "rest") == 0) &&
        !(ruled ? !same_text(&c->toon, &c->body)
                : tokproxy_prefer(c->toon.data ? c->toon.data : "", c->toon.len,
                                  c->body.data ? c->body.data : "", c->body.len))) {
        /* MCP: the text is the cheaper of the TOON text and the compact JSON. The view
         * applied that rule already (ruled): its text is the JSON's copy when the JSON
         * won, and the estimate of both texts is not made twice. */
        buf_free(&c->toon);
        c->toon_set = 0;
    }
    if (c->cfg->max_output_bytes &&
        (c->body.len > c->cfg->max_output_bytes || c->toon.len > c->cfg->max_output_bytes))
        c->output_bytes = c->body.len > c->toon.len ? c->body.len : c->toon.len;
    return 0;
}

/* The result was over lua.max_output_bytes: a 500 that says so (nothing of the result
 * is kept). */
static void fail_output(call *c)
{
    char msg[160];
    if (c->output_bytes == (size_t)-1)
        snprintf(msg, sizeof msg,
                 "tool output too large: more than lua.max_output_bytes (%zu bytes)",
                 c->cfg->max_output_bytes);
    else
        snprintf(msg, sizeof msg,
                 "tool output too large: %zu bytes, more than lua.max_output_bytes (%zu bytes)",
                 c->output_bytes, c->cfg->max_output_bytes);
    log_call(c, LOG_ERROR, "tool call failed", "error_code", "output_too_large", "error", msg);
    c->status = 500;
    c->is_error = 1;
    set_error_code(c, "output_too_large");
    buf_reset(&c->body);
    buf_reset(&c->toon);
    err_write(&c->body, 500, c->lang, "Public.InternalServerError",
              text_get(TEXT_ERR_OUTPUT_TOO_LARGE, c->lang),
              text_get(TEXT_ERR_OUTPUT_TOO_LARGE_SOLUTION, c->lang), msg, NULL, NULL);
}

static void finish(call *c);

static const char *kill_code(int killed)
{
    switch (killed) {
    case LVM_KILL_MEM:
        return "memory_limit_exceeded";
    case LVM_KILL_TIME:
        return "time_limit_exceeded";
    default:
        return "instruction_budget_exceeded";
    }
}

static void step(call *c, int nargs)
{
    int nres = 0, status;
    int64_t t0 = now_mono_ms();
    c->phase = PHASE_RUNNING;
    lvm_budget_slice(&c->budget, c->cfg->max_run_ms);
    lvm_enter(c->vm, &c->budget, c->co);
    status = lua_resume(c->co, c->L, nargs, &nres);
    if (status == LUA_ERRMEM && !c->budget.killed)
        c->budget.killed = LVM_KILL_MEM;
    lvm_set_budget(c->vm, NULL);
    c->budget.slice_end_ms = 0; /* the slice is this resume only */
    c->lua_ms += now_mono_ms() - t0;

    if (status == LUA_YIELD && c->freq && !c->budget.killed) {
        lua_pop(c->co, nres);
        return; /* waiting for the fetch; on_fetch resumes */
    }
    if (c->budget.killed) {
        char msg[128];
        if (c->freq) {
            fetch_cancel(c->freq);
            c->freq = NULL;
        }
        if (c->budget.killed == LVM_KILL_TIME)
            snprintf(msg, sizeof msg,
                     "tool stopped: ran longer than lua.max_run_ms (%ld ms) without yielding",
                     c->cfg->max_run_ms);
        else
            snprintf(msg, sizeof msg, "tool stopped: %s", lvm_kill_text(c->budget.killed));
        fail_incident(c, kill_code(c->budget.killed), msg, NULL);
    } else if (status == LUA_YIELD) {
        lua_pop(c->co, nres);
        fail_incident(c, "tool_raised",
                      "tool yielded outside ctx.http (coroutine.yield in the tool's own "
                      "coroutine)",
                      NULL);
    } else if (status != LUA_OK) {
        tb_args ta = {c, NULL, NULL};
        lvm_cpcall(c->L, traceback_p, &ta, NULL);
        fail_incident(c, "tool_raised", ta.msg ? ta.msg : "tool raised", ta.tb);
        free(ta.msg);
        free(ta.tb);
    } else {
        char *err = NULL;
        /* collect_p runs on the finished coroutine, results as its arguments */
        if (!lua_checkstack(c->co, 3)) {
            fail_incident(c, "tool_raised", "no stack space for the result", NULL);
        } else {
            lua_pushlightuserdata(c->co, c);
            lua_pushcfunction(c->co, collect_p);
            lua_insert(c->co, 1);
            lvm_enter(c->vm, &c->budget, c->co);
            if (lua_pcall(c->co, nres + 1, 0, 0) != LUA_OK) {
                const char *m = lua_tostring(c->co, -1);
                err = xstrdup(m ? m : "result encoding failed");
            }
            lvm_set_budget(c->vm, NULL);
            c->co_clean = !err && !c->budget.killed && !c->budget.co_exposed &&
                          lua_status(c->co) == LUA_OK && lua_gettop(c->co) == 0;
            if (err) {
                fail_incident(
                    c, c->budget.killed == LVM_KILL_MEM ? "memory_limit_exceeded" : "tool_raised",
                    err, NULL);
                free(err);
            } else if (c->output_bytes) {
                fail_output(c);
            }
        }
    }
    finish(c);
}

/* "host:port" of a base URL ("http://h:1/api" -> "h:1"), for the log. */
static void url_host(const char *url, char *out, size_t outlen)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *at = strchr(p, '@'), *end = strchr(p, '/');
    if (at && (!end || at < end))
        p = at + 1; /* never the user-info */
    size_t n = end ? (size_t)(end - p) : strlen(p);
    snprintf(out, outlen, "%.*s", (int)n, p);
}

/* Every upstream answer feeds uphealth; a failure (transport error or 5xx) also gets
 * one warn line naming the upstream, where it is and what failed. */
static void note_upstream(call *c, const fetch_response *r, int64_t took_ms)
{
    const char *reason = NULL;
    if (r->result != FETCH_OK)
        reason = r->result == FETCH_TIMEOUT     ? "timeout"
                 : r->result == FETCH_CONNECT   ? "unreachable"
                 : r->result == FETCH_TOO_LARGE ? "response_too_large"
                                                : "transport_error";
    else if (r->status >= 500)
        reason = "http_5xx";
    if (!c->fetch_up)
        return;
    uphealth_record(c->fetch_up->name, reason, now_wall_ms());
    if (!reason)
        return;
    char host[160];
    url_host(c->fetch_up->base_url, host, sizeof host);
    log_line *l = log_begin(LOG_WARN, "upstream failure");
    log_str(l, "request_id", c->request_id);
    log_str(l, "tool", c->info->name);
    log_str(l, "upstream", c->fetch_up->name);
    log_str(l, "host", host);
    log_str(l, "method", c->fetch_method);
    log_str(l, "path", c->fetch_path);
    log_str(l, "reason", reason);
    if (r->result == FETCH_OK)
        log_int(l, "status", r->status);
    else if (r->error)
        log_strn(l, "error", r->error, 200);
    log_int(l, "duration_ms", took_ms);
    log_end(l);
}

static void on_fetch(const fetch_response *r, void *arg)
{
    call *c = arg;
    char *err = NULL;
    c->freq = NULL;
    int64_t took = r->elapsed_ms ? r->elapsed_ms : now_mono_ms() - c->fetch_t0;
    c->upstream_ms += took;
    note_upstream(c, r, took);
    c->resp = r;
    /* Build the values on the main thread (protected), then move them over. */
    lvm_set_budget(c->vm, &c->budget);
    {
        lua_State *L = c->L;
        int top = lua_gettop(L);
        int rc;
        lua_pushcfunction(L, push_response_p);
        lua_pushlightuserdata(L, c);
        rc = lua_pcall(L, 1, LUA_MULTRET, 0);
        c->resp = NULL;
        if (rc != LUA_OK) {
            const char *m = lua_tostring(L, -1);
            err = xstrdup(m ? m : "cannot build the response");
            if (rc == LUA_ERRMEM && !c->budget.killed)
                c->budget.killed = LVM_KILL_MEM;
            lua_settop(L, top);
            lvm_set_budget(c->vm, NULL);
            if (c->budget.killed)
                fail_incident(c, "memory_limit_exceeded", "tool stopped: memory limit exceeded",
                              NULL);
            else
                fail_incident(c, "tool_raised", err, NULL);
            free(err);
            finish(c);
            return;
        }
        lvm_set_budget(c->vm, NULL);
        {
            int n = lua_gettop(L) - top;
            lua_xmove(L, c->co, n); /* ctx.http reserved the stack room */
            step(c, n);
        }
    }
}

/* ---- lifecycle ---- */

/* Finished call coroutines kept for the next calls of the state: a new coroutine
 * (lua_newthread, a registry ref) grows its stack again in every call and is freed
 * by the collector. Only one that returned, handed its results over and was never
 * given to the tool (coroutine.running) comes back; its stack is then empty, its
 * frames and to-be-closed variables are closed by the return itself (lua_resetthread
 * would shrink the stack again). The registry keeps a table of their refs, made with
 * room for CO_POOL_MAX so that putting one back allocates nothing. */
#define CO_POOL_MAX 8
static char KEY_CO_POOL;

/* Takes a pooled coroutine into c (or makes one); protected: may raise. */
static void co_take(lua_State *L, call *c)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_CO_POOL) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_createtable(L, CO_POOL_MAX, 0);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_CO_POOL);
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n > 0) {
        lua_rawgeti(L, -1, n);
        c->co_ref = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
        lua_pushnil(L);
        lua_rawseti(L, -2, n);
        lua_pop(L, 1);
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->co_ref);
        c->co = lua_tothread(L, -1);
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    c->co = lua_newthread(L);
    c->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* Puts coroutine co (registry ref ref) back; 0 when the pool is full or absent.
 * Unprotected: nothing here allocates (the table's array part has the room). */
static int co_give_back(lua_State *L, lua_State *co, int ref)
{
    int ok = 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_CO_POOL) == LUA_TTABLE) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        if (n < CO_POOL_MAX) {
            if (lua_gethook(co))
                lua_sethook(co, NULL, 0, 0);
            lua_pushinteger(L, ref);
            lua_rawseti(L, -2, n + 1);
            ok = 1;
        }
    }
    lua_pop(L, 1);
    return ok;
}

size_t call_co_pooled(tools_gen *gen, int *clean)
{
    lua_State *L = lvm_state(tools_gen_vm(gen));
    size_t n = 0;
    *clean = 1;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_CO_POOL) == LUA_TTABLE) {
        n = lua_rawlen(L, -1);
        for (size_t i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i);
            lua_rawgeti(L, LUA_REGISTRYINDEX, (lua_Integer)lua_tointeger(L, -1));
            lua_State *co = lua_tothread(L, -1);
            if (!co || lua_status(co) != LUA_OK || lua_gettop(co) != 0 || lua_gethook(co))
                *clean = 0;
            lua_pop(L, 2);
        }
    }
    lua_pop(L, 1);
    return n;
}

static void cleanup(call *c)
{
    if (c->ud)
        c->ud->c = NULL; /* ctx is dead from now on */
    if (c->ev) {
        event_free(c->ev);
        c->ev = NULL;
    }
    if (c->freq) {
        fetch_cancel(c->freq);
        c->freq = NULL;
    }
    if (c->L) {
        if (!(c->co_clean && co_give_back(c->L, c->co, c->co_ref)))
            luaL_unref(c->L, LUA_REGISTRYINDEX, c->co_ref);
        luaL_unref(c->L, LUA_REGISTRYINDEX, c->ud_ref);
    }
    lvm_call_end(c->vm);
    tools_gen_release(c->gen); /* may close the state: nothing Lua after this */
    buf_free(&c->req_url);
    buf_free(&c->req_body);
    buf_free(&c->body);
    buf_free(&c->toon);
    json_free(c->value);
    free(c->error_code);
    free(c->request_id);
    free(c->traceparent);
    free(c->tracestate);
    free(c->baggage);
    free(c->kn_id_header);
    free(c->surface);
    free(c->operation_id);
    if (c->caller_token) {
        /* volatile: the wipe must not be optimised away before free */
        volatile char *p = c->caller_token;
        while (*p)
            *p++ = '\0';
        free(c->caller_token);
    }
    free(c);
    g_inflight--;
}

static void finish(call *c)
{
    call_result res;
    c->phase = PHASE_DONE;
    if (c->ud)
        c->ud->c = NULL;
    memset(&res, 0, sizeof res);
    res.is_error = c->is_error;
    res.status = c->status;
    if (!c->body.data)
        buf_puts(&c->body, "{}");
    res.body = c->body.data;
    res.body_len = c->body.len;
    res.body_buf = &c->body;
    res.toon = c->toon_set ? (c->toon.data ? c->toon.data : "") : NULL;
    res.toon_len = c->toon_set ? c->toon.len : 0;
    res.value = c->value; /* the callback owns it from here */
    c->value = NULL;
    res.incident_id = c->incident[0] ? c->incident : NULL;
    res.error_code = c->error_code;
    res.lua_ms = c->lua_ms;
    res.upstream_ms = c->upstream_ms;
    res.upstream_calls = c->upstream_calls;
    if (c->done)
        c->done(&res, c->done_arg);
    else
        json_free(res.value);
    cleanup(c);
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
    call *c = arg;
    (void)fd;
    (void)what;
    event_free(c->ev);
    c->ev = NULL;
    if (c->co)
        step(c, 4);
    else
        finish(c); /* setup failed: the envelope is already in c->body */
}

/* Room for every field ctx can get (the ones set here and the ones the runtime
 * adds), so that filling it never rehashes the table. */
#define CTX_FIELDS 16

/* Pushes ctx.config: the deployment settings, fixed before the first call, so
 * their Lua table is built once per state (the registry keeps it under the
 * settings' address) and shared by every call; tools see it through ctx's
 * read-only view. */
static void push_shared_config(lua_State *L, const json_value *config)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, config) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    cljson_push(L, config);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, config);
}

/* A small ctx table made of a few strings that repeat from call to call (the
 * caller's identity, the request's host): the table of the last text is kept (the
 * registry holds the text, each string followed by a NUL, under keys[0] and the
 * table under keys[1]) and shared while the text does not change, as ctx.config
 * is; tools see it through ctx's read-only view. Pushes it and returns 1, or
 * returns 0 (nothing pushed) when the text is not the last one. */
static int push_last_table(lua_State *L, const char keys[2], const char *text, size_t n)
{
    size_t len;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &keys[0]);
    const char *last = lua_tolstring(L, -1, &len);
    int same = last && len == n && memcmp(last, text, n) == 0;
    lua_pop(L, 1);
    if (!same)
        return 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &keys[1]) == LUA_TTABLE)
        return 1;
    lua_pop(L, 1);
    return 0;
}

/* Keeps the table on top as the one of text (push_last_table); it stays on top. */
static void keep_last_table(lua_State *L, const char keys[2], const char *text, size_t n)
{
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &keys[1]);
    lua_pushlstring(L, text, n);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &keys[0]);
}

/* Appends s and a NUL to text (n bytes used); 0 when it does not fit. */
static int text_add(char *text, size_t size, size_t *n, const char *s, size_t len)
{
    if (*n + len + 1 > size)
        return 0;
    memcpy(text + *n, s, len);
    *n += len;
    text[(*n)++] = '\0';
    return 1;
}

/* The text of ctx.request ({host, forwarded_*} from the request's headers): each
 * key NUL value NUL, into text[size]; 0 when req is not an object of strings
 * without a NUL or the text does not fit. */
static int request_text(const json_value *req, char *text, size_t size, size_t *n)
{
    size_t count = json_count(req);
    int ok = json_typeof(req) == JSON_OBJECT;
    *n = 0;
    for (size_t i = 0; ok && i < count; i++) {
        size_t klen, vlen;
        const char *k = json_key_at(req, i, &klen);
        const json_value *v = json_val_at(req, i);
        const char *s = json_typeof(v) == JSON_STRING ? json_get_str(v, &vlen) : NULL;
        ok = s && !memchr(k, 0, klen) && !memchr(s, 0, vlen) && text_add(text, size, n, k, klen) &&
             text_add(text, size, n, s, vlen);
    }
    return ok;
}

static int push_tree_p(lua_State *L)
{
    cljson_push(L, lua_touserdata(L, 1));
    return 1;
}

/* Pushes ctx.request made of its text (request_text): the table of the last such
 * text, shared as ctx.config is (tools see it through ctx's read-only view). */
static char KEYS_REQUEST[2];
static void push_request_text(lua_State *L, const char *text, size_t n)
{
    if (push_last_table(L, KEYS_REQUEST, text, n))
        return;
    json_value *req = json_new_object();
    for (const char *p = text; p < text + n;) {
        const char *k = p;
        p += strlen(p) + 1;
        size_t vlen = strlen(p);
        json_set(req, k, json_new_str(p, vlen));
        p += vlen + 1;
    }
    lua_pushcfunction(L, push_tree_p);
    lua_pushlightuserdata(L, req);
    int st = lua_pcall(L, 1, 1, 0); /* a memory error must not leak req */
    json_free(req);
    if (st != LUA_OK)
        lua_error(L);
    keep_last_table(L, KEYS_REQUEST, text, n);
}

/* Pushes ctx.principal: {account_id, account_type} of text (account_id NUL
 * account_type NUL), empty for a call without one (n == 0). */
static char KEYS_PRINCIPAL[2];
static void push_shared_principal(lua_State *L, const char *text, size_t n)
{
    if (push_last_table(L, KEYS_PRINCIPAL, text, n))
        return;
    lua_createtable(L, 0, 2);
    if (n) {
        lua_pushstring(L, text);
        lua_setfield(L, -2, "account_id");
        lua_pushstring(L, text + strlen(text) + 1);
        lua_setfield(L, -2, "account_type");
    }
    keep_last_table(L, KEYS_PRINCIPAL, text, n);
}

/* Creates the coroutine with host.invoke, name, args, ctx, nil on its stack. */
static int setup_p(lua_State *L)
{
    call *c = lua_touserdata(L, 1);
    int host, ctx;
    co_take(L, c);

    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_CTX_FN) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_rawgeti(L, LUA_REGISTRYINDEX, tools_gen_host_ref(c->gen));
        /* the fields of LVM_CTX_FIELDS: made by the runtime on first read (host.ctx_fn) */
        lua_pushcfunction(L, ctx_fn);
        lua_setfield(L, -2, "ctx_fn");
        lua_createtable(L, 2, 0);
        lua_getfield(L, -2, "invoke");
        lua_rawseti(L, -2, 1);
        lua_getfield(L, -2, "ctx_mt");
        lua_rawseti(L, -2, 2);
        lua_remove(L, -2);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_CTX_FN);
    }
    host = lua_gettop(L);
    lua_rawgeti(L, host, 1); /* host.invoke */
    lua_pushstring(L, c->info->name);
    if (c->args)
        cljson_push(L, c->args);
    else
        lua_pushnil(L); /* host.invoke makes an empty object */

    lua_createtable(L, 0, CTX_FIELDS);
    ctx = lua_gettop(L);
    lua_rawgeti(L, host, 2); /* host.ctx_mt: the fields the runtime makes on first read */
    lua_setmetatable(L, ctx);
    {
        /* ctx.request: its text kept for its first read, or (not the usual shape)
         * its own table now */
        char rtext[1024];
        size_t qlen = 0;
        int lazy_request =
            c->env_request && request_text(c->env_request, rtext, sizeof rtext, &qlen);
        if (c->env_request && !lazy_request) {
            cljson_push(L, c->env_request);
            lua_setfield(L, ctx, "request");
        }
        size_t rlen = strlen(c->request_id);
        size_t alen = c->has_who ? strlen(c->who.account_id) : 0;
        size_t tlen = c->has_who ? strlen(c->who.account_type) : 0;
        size_t plen = c->has_who ? alen + tlen + 2 : 0;
        size_t slen = strlen(c->surface);
        ctx_ud *u = lua_newuserdatauv(L, sizeof(ctx_ud) + rlen + plen + qlen + slen, 0);
        u->c = NULL;
        u->generation = (lua_Integer)tools_gen_id(c->gen);
        u->deadline_ms = (lua_Integer)c->deadline_ms;
        u->request_id_len = rlen;
        u->principal_len = plen;
        u->has_request = lazy_request;
        u->request_len = qlen;
        memcpy(u->text + rlen + plen, rtext, qlen);
        u->surface_len = slen;
        memcpy(u->text + rlen + plen + qlen, c->surface, slen);
        u->config = c->env_config;
        memcpy(u->text, c->request_id, rlen);
        if (c->has_who) {
            memcpy(u->text + rlen, c->who.account_id, alen + 1);
            memcpy(u->text + rlen + alen + 1, c->who.account_type, tlen + 1);
        }
        lua_pushvalue(L, -1);
        c->ud_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        u->c = c;
        c->ud = u; /* anchored: safe to keep the pointer */
    }
    lua_pushcclosure(L, ctx_http, 1);
    lua_setfield(L, ctx, "http");
    lua_pushstring(L, lang_tag(c->lang));
    lua_setfield(L, ctx, "lang");
    lua_pushstring(L, c->toon_wanted ? "toon" : "json");
    lua_setfield(L, ctx, "response_format");
    if (c->kn_id_header) {
        lua_pushstring(L, c->kn_id_header);
        lua_setfield(L, ctx, "kn_id_header");
    }
    if (c->env_bkn && json_typeof(c->env_bkn) == JSON_OBJECT) {
        static const char *const keys[] = {"conversation_id", "interaction_id",
                                           "parent_operation_id"};
        lua_createtable(L, 0, 3);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const char *v = json_get_string(c->env_bkn, keys[k]);
            if (v) {
                lua_pushstring(L, v);
                lua_setfield(L, -2, keys[k]);
            }
        }
        lua_setfield(L, ctx, "bkn_context");
    }
    if (c->operation_id) {
        lua_pushstring(L, c->operation_id);
        lua_setfield(L, ctx, "operation_id");
    }
    if (c->env_query)
        cljson_push(L, c->env_query);
    else
        lua_pushnil(L);
    lua_xmove(L, c->co, 5);
    lua_pop(L, 1); /* host's parts */
    return 0;
}

call *call_start(tools_gen *gen, const tools_info *info, const json_value *args,
                 const call_env *env, call_done_fn done, void *arg)
{
    call *c = xcalloc(1, sizeof *c);
    const tools_config *cfg = tools_gen_config(gen);
    char *err = NULL;

    g_inflight++;
    tools_gen_ref(gen);
    c->gen = gen;
    c->vm = tools_gen_vm(gen);
    lvm_call_begin(c->vm);
    c->L = lvm_state(c->vm);
    c->co_ref = LUA_NOREF;
    c->ud_ref = LUA_NOREF;
    c->cfg = cfg;
    c->info = info;
    c->done = done;
    c->done_arg = arg;
    c->phase = PHASE_STARTING;
    c->status = 200;
    if (env && env->who) {
        c->who = *env->who;
        c->has_who = 1;
    }
    c->request_id = xstrdup(env && env->request_id ? env->request_id : "");
    c->traceparent = env && env->traceparent ? xstrdup(env->traceparent) : NULL;
    c->tracestate = env && env->tracestate ? xstrdup(env->tracestate) : NULL;
    c->baggage = env && env->baggage ? xstrdup(env->baggage) : NULL;
    c->kn_id_header =
        env && env->kn_id_header && env->kn_id_header[0] ? xstrdup(env->kn_id_header) : NULL;
    c->surface = xstrdup(env && env->surface ? env->surface : "");
    c->operation_id =
        env && env->operation_id && env->operation_id[0] ? xstrdup(env->operation_id) : NULL;
    c->caller_token =
        env && env->caller_token && env->caller_token[0] ? xstrdup(env->caller_token) : NULL;
    c->lang = env && env->lang >= 0 && env->lang < LANG_COUNT ? env->lang : LANG_ZH_CN;
    c->deadline_ms = env ? env->deadline_ms : 0;
    c->budget.instr_limit = cfg->instr_budget;
    c->budget.mem_limit = cfg->mem_cap_bytes;
    c->budget.uncounted_us = CALL_UNCOUNTED_US;

    c->args = args;
    c->env_query = env ? env->query : NULL;
    c->env_request = env ? env->request : NULL;
    c->env_config = env ? env->config : NULL;
    c->toon_wanted = env ? env->toon : 0;
    c->want_value = env ? env->want_value || env->toon : 0;
    c->keep_value = env ? env->want_value : 0;
    c->env_bkn = env ? env->bkn_context : NULL;
    lvm_set_budget(c->vm, &c->budget);
    int setup_rc = lvm_cpcall(c->L, setup_p, c, &err);
    c->env_query = c->env_request = c->env_config = c->env_bkn = NULL; /* setup only */
    if (setup_rc != 0) {
        lvm_budget b = c->budget;
        lvm_set_budget(c->vm, NULL);
        if (c->co_ref != LUA_NOREF) {
            luaL_unref(c->L, LUA_REGISTRYINDEX, c->co_ref);
            c->co_ref = LUA_NOREF;
        }
        c->co = NULL;
        fail_incident(c, b.killed == LVM_KILL_MEM ? "memory_limit_exceeded" : "tool_raised",
                      err ? err : "call setup failed", NULL);
        free(err);
    }
    lvm_set_budget(c->vm, NULL);
    c->args = NULL;
    /* done always runs later from the loop, never inside call_start */
    c->ev = event_new(cfg->base, -1, 0, on_start, c);
    event_active(c->ev, EV_TIMEOUT, 1);
    return c;
}

void call_cancel(call *c)
{
    if (!c || c->phase == PHASE_DONE)
        return;
    cleanup(c);
}
