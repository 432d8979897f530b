/* test_fetch: fetch against an in-process evhttp server on 127.0.0.1 in the same
 * event base (routes: /echo, /slow?ms=N, /big?n=M, /status?code=S) and a scripted
 * raw server (fixed response bytes, written whole, split or byte by byte, optionally
 * closing), once with the lean client and once with libcurl for everything. The
 * lean client's response parser is also fed directly at every split point. */
#include "check.h"
#include "fetch.h"
#include "hclient.h"
#include "util.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

static struct event_base *base;
static fetch_config g_cfg; /* the client under test */
static struct evhttp *http;
static int port;
static unsigned char seen_port[65536];
static int n_conns;      /* distinct client ports seen since the last reset */
static int slow_pending; /* slow replies not yet sent */
static int g_pipeline;   /* the requests started ask for pipelining */

/* ---- server ---- */

static long query_long(struct evhttp_request *req, const char *key, long dflt)
{
    struct evkeyvalq q;
    long v = dflt;
    const char *qs = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (!qs || evhttp_parse_query_str(qs, &q) != 0)
        return dflt;
    const char *s = evhttp_find_header(&q, key);
    if (s)
        v = strtol(s, NULL, 10);
    evhttp_clear_headers(&q);
    return v;
}

static const char *method_name(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    default:
        return "OTHER";
    }
}

struct slow {
    struct evhttp_request *req;
    struct event *ev;
};

static void slow_fire(evutil_socket_t fd, short what, void *arg)
{
    struct slow *s = arg;
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, "slow");
    /* Safe even if the client went away: libevent detaches the request from a
     * closed connection and frees it when we reply. */
    evhttp_send_reply(s->req, 200, "OK", out);
    evbuffer_free(out);
    event_free(s->ev);
    free(s);
    slow_pending--;
}

static void server_cb(struct evhttp_request *req, void *arg)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon) {
        char *addr = NULL;
        ev_uint16_t p = 0;
        evhttp_connection_get_peer(evcon, &addr, &p);
        if (!seen_port[p]) {
            seen_port[p] = 1;
            n_conns++;
        }
    }
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    struct evbuffer *out = evbuffer_new();
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    if (strcmp(path, "/echo") == 0) {
        struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
        const char *xt = evhttp_find_header(ih, "X-Test");
        const char *ct = evhttp_find_header(ih, "Content-Type");
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        evbuffer_add_printf(out, "method=%s\nx-test=%s\ncontent-type=%s\nbody=", method_name(req),
                            xt ? xt : "", ct ? ct : "");
        evbuffer_add_buffer(out, in);
        evhttp_add_header(oh, "X-Reply-Header", "Echo");
        evhttp_send_reply(req, 200, "OK", out);
    } else if (strcmp(path, "/slow") == 0) {
        struct slow *s = xcalloc(1, sizeof(*s));
        long ms = query_long(req, "ms", 100);
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        s->req = req;
        s->ev = evtimer_new(base, slow_fire, s);
        evtimer_add(s->ev, &tv);
        slow_pending++;
    } else if (strcmp(path, "/big") == 0) {
        long n = query_long(req, "n", 1000);
        char *blob = xmalloc((size_t)n);
        memset(blob, 'x', (size_t)n);
        evbuffer_add(out, blob, (size_t)n);
        free(blob);
        evhttp_send_reply(req, 200, "OK", out);
    } else if (strncmp(path, "/base/", 6) == 0) {
        const char *host = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
        evbuffer_add_printf(out, "uri=%s\nhost=%s", evhttp_request_get_uri(req), host ? host : "");
        evhttp_send_reply(req, 200, "OK", out);
    } else if (strcmp(path, "/status") == 0) {
        long code = query_long(req, "code", 200);
        if (code >= 300 && code < 400)
            evhttp_add_header(oh, "Location", "/echo");
        evbuffer_add_printf(out, "status %ld", code);
        evhttp_send_reply(req, (int)code, "Whatever", out);
    } else {
        evhttp_send_error(req, 404, NULL);
    }
    evbuffer_free(out);
}

static void reset_conns(void)
{
    memset(seen_port, 0, sizeof(seen_port));
    n_conns = 0;
}

/* ---- loop helpers ---- */

static void tick_cb(evutil_socket_t fd, short what, void *arg) {}

/* Runs the loop until *flag >= want; gives up after ms, longer on a loaded machine
 * (check_wait in check.h: the 10 ms tick bounds a turn). Returns 1 if reached. */
static int run_until(const int *flag, int want, int64_t ms)
{
    check_wait w = check_wait_start(ms);
    while ((!flag || *flag < want) && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    return !flag || *flag >= want;
}

static void run_for(int64_t ms)
{
    check_wait w = check_wait_start(ms);
    while (check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
}

/* ---- result collection ---- */

typedef struct result {
    int done;
    fetch_result res;
    long status;
    char *body;
    size_t body_len;
    char *xreply;
    int lower_names;
    int packed; /* packed_headers given, and the pairs of headers byte for byte */
    int64_t elapsed;
} result;

static void result_clear(result *r)
{
    free(r->body);
    free(r->xreply);
    memset(r, 0, sizeof(*r));
}

static void collect_cb(const fetch_response *resp, void *arg)
{
    result *r = arg;
    r->done++;
    r->res = resp->result;
    r->status = resp->status;
    free(r->body);
    r->body = xstrndup(resp->body, resp->body_len);
    r->body_len = resp->body_len;
    const char *x = fetch_response_header(resp, "x-REPLY-header");
    free(r->xreply);
    r->xreply = x ? xstrdup(x) : NULL;
    r->lower_names = 1;
    for (size_t i = 0; i < resp->n_headers; i++)
        for (const char *p = resp->headers[i].name; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                r->lower_names = 0;
    r->packed = 0;
    if (resp->packed_headers) {
        buf b = BUF_INIT;
        for (size_t i = 0; i < resp->n_headers; i++) {
            buf_append(&b, resp->headers[i].name, strlen(resp->headers[i].name) + 1);
            buf_append(&b, resp->headers[i].value, strlen(resp->headers[i].value) + 1);
        }
        r->packed = b.len == resp->packed_headers_len &&
                    memcmp(b.data ? b.data : "", resp->packed_headers, b.len) == 0;
        buf_free(&b);
    }
    r->elapsed = resp->elapsed_ms;
}

static char url_buf[256];
static const char *url(const char *path)
{
    snprintf(url_buf, sizeof(url_buf), "http://127.0.0.1:%d%s", port, path);
    return url_buf;
}

static fetch_req *start(fetch_ctx *f, const char *method, const char *path, const char *body,
                        const fetch_header *h, size_t nh, long timeout, size_t max, fetch_cb cb,
                        void *arg)
{
    const char *err = NULL;
    fetch_request rq = {method,  url(path), h,    nh,   body, body ? strlen(body) : 0,
                        timeout, max,       NULL, NULL, 0,    g_pipeline};
    fetch_req *r = fetch_start(f, &rq, cb, arg, &err);
    if (!r)
        fprintf(stderr, "fetch_start: %s\n", err);
    return r;
}

/* ---- tests ---- */

static void test_methods(fetch_ctx *f, int lean)
{
    const fetch_header hs[] = {{"X-Test", "hello world"}, {"Content-Type", "text/plain"}};
    const char *methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
    for (size_t i = 0; i < 5; i++) {
        result r = {0};
        int has_body = strcmp(methods[i], "GET") != 0;
        CHECK(start(f, methods[i], "/echo", has_body ? "payload\"1\"" : NULL, hs, 2, 0, 0,
                    collect_cb, &r) != NULL);
        CHECK(r.done == 0); /* never from inside fetch_start */
        CHECK(run_until(&r.done, 1, 3000));
        CHECK(r.res == FETCH_OK);
        CHECK(r.status == 200);
        char want[256];
        snprintf(want, sizeof(want),
                 "method=%s\nx-test=hello world\ncontent-type=text/plain\nbody=%s", methods[i],
                 has_body ? "payload\"1\"" : "");
        CHECK_STR(r.body, want);
        CHECK_STR(r.xreply, "Echo");
        CHECK(r.lower_names);
        CHECK(r.packed == lean); /* the lean client's headers also come packed */
        result_clear(&r);
    }
    /* POST without a body and without headers. */
    result r = {0};
    CHECK(start(f, "POST", "/echo", NULL, NULL, 0, 0, 0, collect_cb, &r) != NULL);
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.status == 200);
    CHECK(r.body && strstr(r.body, "method=POST\n") == r.body);
    result_clear(&r);
}

/* Easy handles are reset and reused (LIFO): nothing of one request leaks into the
 * next - a GET after a POST with a body and headers, a GET after a HEAD. */
static void test_handle_reuse(fetch_ctx *f)
{
    const fetch_header hs[] = {{"X-Test", "first"}, {"Content-Type", "text/plain"}};
    result r = {0};
    CHECK(start(f, "POST", "/echo", "a body", hs, 2, 0, 0, collect_cb, &r) != NULL);
    CHECK(run_until(&r.done, 1, 3000));
    CHECK_STR(r.body, "method=POST\nx-test=first\ncontent-type=text/plain\nbody=a body");
    result_clear(&r);
    CHECK(start(f, "GET", "/echo", NULL, NULL, 0, 0, 0, collect_cb, &r) != NULL);
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.status == 200);
    CHECK_STR(r.body, "method=GET\nx-test=\ncontent-type=\nbody=");
    result_clear(&r);
    CHECK(start(f, "HEAD", "/echo", NULL, NULL, 0, 0, 0, collect_cb, &r) != NULL);
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.status == 200);
    CHECK(r.body == NULL || r.body[0] == '\0');
    result_clear(&r);
    CHECK(start(f, "GET", "/echo", NULL, NULL, 0, 0, 0, collect_cb, &r) != NULL);
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.body && strstr(r.body, "method=GET\n") == r.body);
    result_clear(&r);
}

static void test_status(fetch_ctx *f)
{
    result r = {0};
    CHECK(start(f, "GET", "/status?code=418", NULL, NULL, 0, 0, 0, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_OK && r.status == 418);
    CHECK_STR(r.body, "status 418");
    result_clear(&r);
    /* Redirects are not followed. */
    CHECK(start(f, "GET", "/status?code=302", NULL, NULL, 0, 0, 0, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_OK && r.status == 302);
    result_clear(&r);
    CHECK(start(f, "GET", "/status?code=503", NULL, NULL, 0, 0, 0, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_OK && r.status == 503);
    result_clear(&r);
}

#define NCONC 200
static int conc_done, conc_ok;
static char conc_bodies[NCONC][16];
static void conc_cb(const fetch_response *resp, void *arg)
{
    int i = (int)(intptr_t)arg;
    conc_done++;
    const char *b = strstr(resp->body, "body=");
    if (resp->result == FETCH_OK && resp->status == 200 && b && strcmp(b + 5, conc_bodies[i]) == 0)
        conc_ok++;
}

static void test_concurrent(fetch_ctx *f)
{
    reset_conns();
    conc_done = conc_ok = 0;
    for (int i = 0; i < NCONC; i++) {
        snprintf(conc_bodies[i], sizeof(conc_bodies[i]), "req-%d", i);
        CHECK(start(f, "POST", "/echo", conc_bodies[i], NULL, 0, 0, 0, conc_cb,
                    (void *)(intptr_t)i) != NULL);
    }
    CHECK(fetch_inflight(f) == NCONC);
    CHECK(run_until(&conc_done, NCONC, 10000));
    CHECK(conc_done == NCONC);
    CHECK(conc_ok == NCONC);
    CHECK(fetch_inflight(f) == 0);
    fprintf(stderr, "concurrent: %d requests over %d connections\n", NCONC, n_conns);
    CHECK(n_conns > 0 && n_conns <= 64); /* max_host_connections */
}

/* Sequential chain: each callback starts the next request. */
static int chain_left, chain_done, chain_ok;
static fetch_ctx *chain_f;
static void chain_cb(const fetch_response *resp, void *arg)
{
    chain_done++;
    if (resp->result == FETCH_OK && resp->status == 200)
        chain_ok++;
    if (--chain_left > 0)
        CHECK(start(chain_f, "GET", "/echo", NULL, NULL, 0, 0, 0, chain_cb, NULL) != NULL);
}

static void test_reuse_chain(fetch_ctx *f)
{
    run_for(50); /* let earlier idle connections settle */
    reset_conns();
    chain_f = f;
    chain_left = 20;
    chain_done = chain_ok = 0;
    CHECK(start(f, "GET", "/echo", NULL, NULL, 0, 0, 0, chain_cb, NULL) != NULL);
    CHECK(run_until(&chain_done, 20, 5000));
    CHECK(chain_ok == 20);
    fprintf(stderr, "chain: 20 requests over %d connections\n", n_conns);
    CHECK(n_conns == 1);
}

static void test_timeout(fetch_ctx *f)
{
    result r = {0};
    CHECK(start(f, "GET", "/slow?ms=1500", NULL, NULL, 0, 200, 0, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 30000));
    /* The timer ended it (the answer would have come after 1.5 s, as FETCH_OK), not
     * before its 200 ms. No upper bound: a loaded machine fires timers late. */
    CHECK(r.res == FETCH_TIMEOUT);
    CHECK(r.elapsed >= 150);
    result_clear(&r);
}

static void test_too_large(fetch_ctx *f)
{
    result r = {0};
    CHECK(start(f, "GET", "/big?n=100000", NULL, NULL, 0, 0, 1000, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_TOO_LARGE);
    result_clear(&r);
    CHECK(start(f, "GET", "/big?n=1000", NULL, NULL, 0, 0, 1000, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_OK && r.body_len == 1000);
    result_clear(&r);
    /* Default cap is large enough for a 1 MiB body. */
    CHECK(start(f, "GET", "/big?n=1048576", NULL, NULL, 0, 0, 0, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 5000));
    CHECK(r.res == FETCH_OK && r.body_len == 1048576);
    result_clear(&r);
}

static int closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    socklen_t len = sizeof(a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, (struct sockaddr *)&a, sizeof(a));
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s); /* bound but never listened: connecting is refused */
    return ntohs(a.sin_port);
}

static void test_refused(fetch_ctx *f)
{
    result r = {0};
    char u[128];
    const char *err = NULL;
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/x", closed_port());
    fetch_request rq = {.method = "GET", .url = u, .timeout_ms = 2000};
    CHECK(fetch_start(f, &rq, collect_cb, &r, &err) != NULL);
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_CONNECT);
    result_clear(&r);
}

/* A host name goes through libcurl's resolver with either client. */
static void test_host_name(fetch_ctx *f)
{
    result r = {0};
    char u[128];
    const char *err = NULL;
    snprintf(u, sizeof(u), "http://localhost:%d/echo", port);
    /* (the time limits here are liveness caps, not what is tested) */
    fetch_request rq = {.method = "GET", .url = u, .timeout_ms = 30000};
    CHECK(fetch_start(f, &rq, collect_cb, &r, &err) != NULL);
    CHECK(run_until(&r.done, 1, 40000));
    CHECK(r.res == FETCH_OK && r.status == 200);
    result_clear(&r);
}

static void test_invalid(fetch_ctx *f)
{
    const char *err = NULL;
    result r = {0};
    fetch_request rq = {.method = "GET", .url = "ftp://127.0.0.1/x"};
    CHECK(fetch_start(f, &rq, collect_cb, &r, &err) == NULL && err != NULL);
    err = NULL;
    fetch_request rq2 = {.method = "GE T", .url = url("/echo")};
    CHECK(fetch_start(f, &rq2, collect_cb, &r, &err) == NULL && err != NULL);
    const fetch_header bad[] = {{"X-Bad", "a\r\nInjected: 1"}};
    fetch_request rq3 = {.method = "GET", .url = url("/echo"), .headers = bad, .n_headers = 1};
    err = NULL;
    CHECK(fetch_start(f, &rq3, collect_cb, &r, &err) == NULL && err != NULL);
    CHECK(fetch_inflight(f) == 0);
}

/* One GET on a base URL parsed once; r filled. NULL when fetch_start refused. */
static fetch_req *base_get(fetch_ctx *f, const fetch_base *b, const char *path, result *r,
                           const char **err)
{
    fetch_request rq = {
        .method = "GET", .base = b, .path = path, .path_len = strlen(path), .timeout_ms = 30000};
    result_clear(r);
    *err = NULL;
    fetch_req *q = fetch_start(f, &rq, collect_cb, r, err);
    if (q)
        CHECK(run_until(&r->done, 1, 40000));
    return q;
}

/* Requests on a parsed base URL: the path and query follow the base's own path, each
 * base keeps its own address, and what the lean client does not serve (a host name,
 * userinfo, a fragment) or fetch refuses (not http) is served or refused as the
 * whole URL would be. */
static void test_base(fetch_ctx *f)
{
    result r = {0};
    const char *err;
    char u[160], want[200];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/base", port);
    fetch_base *a = fetch_base_new(u);
    CHECK(fetch_base_lean(a));
    CHECK(base_get(f, a, "/x/y?q=1&r=%20", &r, &err) != NULL);
    snprintf(want, sizeof want, "uri=/base/x/y?q=1&r=%%20\nhost=127.0.0.1:%d", port);
    CHECK(r.res == FETCH_OK && r.status == 200);
    CHECK_STR(r.body, want);
    /* a fragment ends the URL before the rest, as in the whole URL */
    CHECK(base_get(f, a, "/x#frag/y", &r, &err) != NULL);
    CHECK(r.res == FETCH_OK && r.body && strncmp(r.body, "uri=/base/x\n", 12) == 0);

    snprintf(u, sizeof u, "http://127.0.0.1:%d", port);
    fetch_base *root = fetch_base_new(u);
    CHECK(fetch_base_lean(root));
    CHECK(base_get(f, root, "/base/z", &r, &err) != NULL);
    CHECK(r.res == FETCH_OK && r.body && strncmp(r.body, "uri=/base/z\n", 12) == 0);

    snprintf(u, sizeof u, "http://127.0.0.1:%d/x", closed_port());
    fetch_base *closed = fetch_base_new(u);
    CHECK(base_get(f, closed, "/base/y", &r, &err) != NULL);
    CHECK(r.res == FETCH_CONNECT);

    snprintf(u, sizeof u, "http://localhost:%d/base", port);
    fetch_base *named = fetch_base_new(u);
    CHECK(!fetch_base_lean(named));
    CHECK(base_get(f, named, "/n", &r, &err) != NULL);
    CHECK(r.res == FETCH_OK && r.body && strncmp(r.body, "uri=/base/n\n", 12) == 0);

    snprintf(u, sizeof u, "http://user@127.0.0.1:%d/base", port);
    fetch_base *userinfo = fetch_base_new(u);
    CHECK(!fetch_base_lean(userinfo));
    CHECK(base_get(f, userinfo, "/u", &r, &err) != NULL);
    CHECK(r.res == FETCH_OK && r.body && strncmp(r.body, "uri=/base/u\n", 12) == 0);

    fetch_base *ftp = fetch_base_new("ftp://127.0.0.1/x");
    fetch_base *empty = fetch_base_new("");
    CHECK(!fetch_base_lean(ftp) && !fetch_base_lean(empty));
    CHECK(base_get(f, ftp, "/x", &r, &err) == NULL && err != NULL);
    CHECK(base_get(f, empty, "/x", &r, &err) == NULL && err != NULL);
    CHECK(fetch_inflight(f) == 0);
    result_clear(&r);
    fetch_base_free(a);
    fetch_base_free(root);
    fetch_base_free(closed);
    fetch_base_free(named);
    fetch_base_free(userinfo);
    fetch_base_free(ftp);
    fetch_base_free(empty);
}

static void test_cancel_before(fetch_ctx *f)
{
    result r = {0};
    fetch_req *q = start(f, "GET", "/slow?ms=100", NULL, NULL, 0, 0, 0, collect_cb, &r);
    CHECK(q != NULL);
    fetch_cancel(q);
    CHECK(fetch_inflight(f) == 0);
    /* Also cancel a fast one right away. */
    q = start(f, "GET", "/echo", NULL, NULL, 0, 0, 0, collect_cb, &r);
    fetch_cancel(q);
    run_for(300);
    CHECK(r.done == 0);
    result_clear(&r);
}

/* Pairs of requests; the first callback to run cancels its partner, which may be
 * still running or already queued for delivery. The partner must never run. */
typedef struct pair {
    fetch_req *a, *b;
    int calls;
} pair;
static int pair_calls_total;
static void pair_cb(const fetch_response *resp, void *arg)
{
    pair *p = arg;
    p->calls++;
    pair_calls_total++;
    /* Cancel both: one is ourselves (must be a harmless no-op), one the partner. */
    fetch_cancel(p->a);
    fetch_cancel(p->b);
}

static void test_cancel_in_callback(fetch_ctx *f)
{
    enum { NP = 30 };
    pair ps[NP];
    pair_calls_total = 0;
    for (int i = 0; i < NP; i++) {
        ps[i].calls = 0;
        ps[i].a = start(f, "GET", "/echo", NULL, NULL, 0, 0, 0, pair_cb, &ps[i]);
        ps[i].b =
            start(f, "GET", i % 2 ? "/echo" : "/slow?ms=150", NULL, NULL, 0, 0, 0, pair_cb, &ps[i]);
    }
    run_for(500);
    int ok = 1;
    for (int i = 0; i < NP; i++)
        if (ps[i].calls != 1)
            ok = 0;
    CHECK(ok);
    CHECK(pair_calls_total == NP);
    CHECK(fetch_inflight(f) == 0);
}

static int after_free_calls;
static void count_cb(const fetch_response *resp, void *arg)
{
    after_free_calls++;
}

static fetch_ctx *selfkill_f;
static int selfkill_calls;
static void selfkill_cb(const fetch_response *resp, void *arg)
{
    selfkill_calls++;
    fetch_free(selfkill_f); /* from inside a callback, with others in flight */
    selfkill_f = NULL;
}

static void test_free_inflight(void)
{
    const char *err = NULL;
    fetch_ctx *f = fetch_new(base, &g_cfg, &err);
    CHECK(f != NULL);
    after_free_calls = 0;
    for (int i = 0; i < 5; i++) {
        start(f, "GET", "/slow?ms=100", NULL, NULL, 0, 0, 0, count_cb, NULL);
        start(f, "GET", "/echo", NULL, NULL, 0, 0, 0, count_cb, NULL);
    }
    run_for(5); /* get some of them connected; fast ones may complete */
    int before = after_free_calls;
    CHECK(fetch_inflight(f) >= 5); /* at least the slow ones are still in flight */
    fetch_free(f);
    run_for(300);
    CHECK(after_free_calls == before);

    selfkill_f = fetch_new(base, &g_cfg, &err);
    selfkill_calls = 0;
    start(selfkill_f, "GET", "/echo", NULL, NULL, 0, 0, 0, selfkill_cb, NULL);
    for (int i = 0; i < 5; i++) {
        start(selfkill_f, "GET", "/slow?ms=100", NULL, NULL, 0, 0, 0, selfkill_cb, NULL);
        start(selfkill_f, "GET", "/echo", NULL, NULL, 0, 0, 0, selfkill_cb, NULL);
    }
    run_for(400);
    CHECK(selfkill_calls == 1);
    CHECK(selfkill_f == NULL);
}

/* ---- scripted raw server ---- */

static struct {
    int lfd;
    struct event *lev;
    int port;
    const char *resp; /* the response to every request (unless echo) */
    size_t resp_len;
    int bytewise;    /* one byte per loop turn */
    size_t split;    /* else: this many bytes first, the rest a moment later */
    int close_after; /* close the connection after the response */
    int drop_on;     /* close without a reply on this request of a connection (1-based) */
    int echo;        /* answer each request with its own body (200, Content-Length) */
    int close_on;    /* echo: this request of a connection is answered with
                        "Connection: close", and the connection closed after it */
    int hold_on;     /* this request of a connection is answered hold_ms late */
    int hold_ms;
    int accepted;  /* connections accepted since fake_set */
    int requests;  /* requests read since fake_set */
    int max_batch; /* most whole requests one read brought */
    int open;      /* connections open */
} fk;

typedef struct fake_conn {
    LIST_ENTRY(fake_conn) link;
    int fd;
    struct event *ev, *tmr;
    buf in;
    buf out; /* the answer being sent */
    int nreq;
    size_t out_off;
    int sending, closing;
} fake_conn;

static LIST_HEAD(, fake_conn) fake_conns = LIST_HEAD_INITIALIZER(fake_conns);

static void fake_set(const char *resp, size_t len)
{
    fk.resp = resp;
    fk.resp_len = len;
    fk.bytewise = 0;
    fk.split = 0;
    fk.close_after = 0;
    fk.drop_on = 0;
    fk.echo = fk.close_on = fk.hold_on = fk.hold_ms = 0;
    fk.accepted = fk.requests = fk.max_batch = 0;
}

static void fake_close(fake_conn *c)
{
    LIST_REMOVE(c, link);
    event_free(c->ev);
    event_free(c->tmr);
    close(c->fd);
    buf_free(&c->in);
    buf_free(&c->out);
    free(c);
    fk.open--;
}

static void fake_serve(fake_conn *c);

static void fake_send_step(fake_conn *c)
{
    size_t left = c->out.len - c->out_off;
    size_t n = fk.bytewise ? 1 : (c->out_off == 0 && fk.split ? fk.split : left);
    if (n > left)
        n = left;
    while (n) {
        ssize_t w = send(c->fd, c->out.data + c->out_off, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN)
            continue; /* small responses on loopback: a short spin at most */
        if (w <= 0) {
            fake_close(c);
            return;
        }
        c->out_off += (size_t)w;
        n -= (size_t)w;
    }
    if (c->out_off < c->out.len) {
        struct timeval tv = {0, 1000};
        evtimer_add(c->tmr, &tv);
        return;
    }
    c->sending = 0;
    if (fk.close_after || c->closing) {
        fake_close(c);
        return;
    }
    fake_serve(c); /* requests that came pipelined behind it */
}

static void fake_tmr(evutil_socket_t fd, short what, void *arg)
{
    fake_send_step(arg);
}

/* Length of the first complete request in c->in (headers + Content-Length body), or 0;
 * *body_off says where its body starts. */
static size_t fake_request_at(const char *s, size_t len, size_t *body_off)
{
    const char *end = len ? strstr(s, "\r\n\r\n") : NULL;
    if (!end)
        return 0;
    size_t head = (size_t)(end - s) + 4, body = 0;
    const char *cl = strstr(s, "\r\nContent-Length:");
    if (cl && cl < end)
        body = strtoul(cl + 17, NULL, 10);
    if (body_off)
        *body_off = head;
    return len >= head + body ? head + body : 0;
}

/* Answers the next buffered request (one at a time: the next when this one is sent). */
static void fake_serve(fake_conn *c)
{
    size_t len, body_off = 0;
    if (c->sending || !(len = fake_request_at(c->in.data, c->in.len, &body_off)))
        return;
    c->nreq++;
    fk.requests++;
    if (c->nreq == fk.drop_on) {
        fake_close(c);
        return;
    }
    buf_reset(&c->out);
    if (fk.echo) {
        char head[160];
        c->closing = c->nreq == fk.close_on;
        snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s\r\n",
                 len - body_off, c->closing ? "Connection: close\r\n" : "");
        buf_puts(&c->out, head);
        buf_append(&c->out, c->in.data + body_off, len - body_off);
    } else {
        buf_append(&c->out, fk.resp, fk.resp_len);
    }
    memmove(c->in.data, c->in.data + len, c->in.len - len + 1);
    c->in.len -= len;
    c->sending = 1;
    c->out_off = 0;
    if (c->nreq == fk.hold_on) {
        struct timeval tv = {fk.hold_ms / 1000, (fk.hold_ms % 1000) * 1000};
        evtimer_add(c->tmr, &tv);
        return;
    }
    fake_send_step(c); /* c may be gone */
}

static void fake_read(evutil_socket_t fd, short what, void *arg)
{
    fake_conn *c = arg;
    char tmp[4096];
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN)
            fake_close(c);
        return;
    }
    buf_append(&c->in, tmp, (size_t)n);
    int whole = 0;
    for (size_t off = 0, len; (len = fake_request_at(c->in.data + off, c->in.len - off, NULL));
         off += len)
        whole++;
    if (whole > fk.max_batch)
        fk.max_batch = whole;
    fake_serve(c);
}

static void fake_accept(evutil_socket_t lfd, short what, void *arg)
{
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        return;
    evutil_make_socket_nonblocking(fd);
    fake_conn *c = xcalloc(1, sizeof(*c));
    c->fd = fd;
    c->ev = event_new(base, fd, EV_READ | EV_PERSIST, fake_read, c);
    c->tmr = evtimer_new(base, fake_tmr, c);
    event_add(c->ev, NULL);
    LIST_INSERT_HEAD(&fake_conns, c, link);
    fk.accepted++;
    fk.open++;
}

/* The server closes every connection, and the clients notice: the next request
 * starts on a fresh one. */
static void fake_fresh(void)
{
    while (!LIST_EMPTY(&fake_conns))
        fake_close(LIST_FIRST(&fake_conns));
    run_for(30);
}

static void fake_listen(void)
{
    struct sockaddr_in a = {0};
    socklen_t len = sizeof(a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fk.lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fk.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    bind(fk.lfd, (struct sockaddr *)&a, sizeof(a));
    listen(fk.lfd, 128);
    getsockname(fk.lfd, (struct sockaddr *)&a, &len);
    fk.port = ntohs(a.sin_port);
    evutil_make_socket_nonblocking(fk.lfd);
    fk.lev = event_new(base, fk.lfd, EV_READ | EV_PERSIST, fake_accept, NULL);
    event_add(fk.lev, NULL);
}

static void fake_unlisten(void)
{
    event_free(fk.lev);
    close(fk.lfd);
}

static fetch_req *fake_start(fetch_ctx *f, const char *method, const char *body, size_t max,
                             long timeout, result *r)
{
    char u[128];
    const char *err = NULL;
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/fake", fk.port);
    fetch_request rq = {method,  u,   NULL, 0,    body, body ? strlen(body) : 0,
                        timeout, max, NULL, NULL, 0,    g_pipeline};
    fetch_req *q = fetch_start(f, &rq, collect_cb, r, &err);
    if (!q)
        fprintf(stderr, "fetch_start: %s\n", err);
    return q;
}

/* One request against the scripted server; returns its result (r filled). Its time
 * limit is a liveness cap (a loaded machine answers late), not what is tested. */
static fetch_result fake_fetch(fetch_ctx *f, const char *method, size_t max, result *r)
{
    result_clear(r);
    CHECK(fake_start(f, method, NULL, max, 30000, r) != NULL);
    CHECK(run_until(&r->done, 1, 40000));
    return r->done ? r->res : (fetch_result)-1;
}

#define LIT(s) s, sizeof(s) - 1

static const char CHUNKED[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                              "X-Reply-Header: Chunky\r\n\r\n"
                              "5;name=value\r\nhello\r\n6 ; x\r\n world\r\n"
                              "0\r\nX-Trailer: t\r\n\r\n";
static const char INTERIM[] = "HTTP/1.1 100 Continue\r\nX-Reply-Header: interim\r\n\r\n"
                              "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Reply-Header: Final\r\n"
                              "\r\nok";

/* Body framings written whole and byte by byte: Content-Length, chunked with
 * extensions and trailers, close-delimited, a 1xx before the final response, HEAD
 * and 204 without a body on a kept connection. */
static void test_fake_shapes(fetch_ctx *f)
{
    result r = {0};
    for (int bytewise = 0; bytewise <= 1; bytewise++) {
        fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Reply-Header: A\r\n\r\nhello"));
        fk.bytewise = bytewise;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
        CHECK(r.status == 200 && r.body_len == 5);
        CHECK_STR(r.body, "hello");
        CHECK_STR(r.xreply, "A");
        CHECK(r.lower_names);

        fake_set(LIT(CHUNKED));
        fk.bytewise = bytewise;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
        CHECK_STR(r.body, "hello world");
        CHECK_STR(r.xreply, "Chunky");

        fake_set(LIT("HTTP/1.1 200 OK\r\nX-Reply-Header: close\r\n\r\nuntil the end"));
        fk.bytewise = bytewise;
        fk.close_after = 1;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
        CHECK_STR(r.body, "until the end");
        CHECK_STR(r.xreply, "close");

        fake_set(LIT(INTERIM));
        fk.bytewise = bytewise;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
        CHECK(r.status == 200);
        CHECK_STR(r.body, "ok");
        CHECK_STR(r.xreply, "Final");

        /* No body after HEAD (even with a Content-Length) nor after 204 / 304: the
         * connection serves the next request. */
        fake_fresh();
        fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"));
        fk.bytewise = bytewise;
        CHECK(fake_fetch(f, "HEAD", 0, &r) == FETCH_OK);
        CHECK(r.status == 200 && r.body_len == 0);
        CHECK(fake_fetch(f, "HEAD", 0, &r) == FETCH_OK);
        CHECK(fk.accepted == 1);
        fake_set(LIT("HTTP/1.1 204 No Content\r\n\r\n"));
        fk.bytewise = bytewise;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK && r.status == 204 && r.body_len == 0);
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK && r.status == 204);
        CHECK(fk.accepted == 0); /* still the HEAD's connection */
        fake_set(LIT("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"));
        fk.bytewise = bytewise;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK && r.status == 304 && r.body_len == 0);
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK && r.status == 304);
    }
    result_clear(&r);
}

/* The response arrives in two pieces, split at every byte boundary. */
static void test_fake_splits(fetch_ctx *f)
{
    const char *resps[] = {CHUNKED, INTERIM};
    const char *bodies[] = {"hello world", "ok"};
    result r = {0};
    for (size_t k = 0; k < 2; k++) {
        size_t len = strlen(resps[k]);
        int ok = 0;
        for (size_t split = 1; split < len; split++) {
            fake_set(resps[k], len);
            fk.split = split;
            if (fake_fetch(f, "GET", 0, &r) == FETCH_OK && r.status == 200 &&
                strcmp(r.body, bodies[k]) == 0)
                ok++;
        }
        CHECK(ok == (int)len - 1);
    }
    result_clear(&r);
}

/* A body cut short by the server's close, a malformed status line or chunk: errors. */
static void test_fake_errors(fetch_ctx *f)
{
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        "SMTP ready\r\n\r\n",
        "", /* a fresh connection closed without a byte */
    };
    result r = {0};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fake_set(bad[i], strlen(bad[i]));
        fk.close_after = 1;
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_ERROR);
    }
    result_clear(&r);
}

/* Bodies beyond max_response in each framing: FETCH_TOO_LARGE; at the cap: fine. */
static void test_fake_too_large(fetch_ctx *f)
{
    result r = {0};
    buf b = BUF_INIT;
    buf_puts(&b, "HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n");
    for (int i = 0; i < 1001; i++)
        buf_putc(&b, 'x');
    fake_set(b.data, b.len);
    CHECK(fake_fetch(f, "GET", 1000, &r) == FETCH_TOO_LARGE);
    CHECK(fake_fetch(f, "GET", 1001, &r) == FETCH_OK && r.body_len == 1001);
    buf_reset(&b);
    buf_puts(&b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int c = 0; c < 3; c++) {
        buf_puts(&b, "258\r\n"); /* 600 bytes */
        for (int i = 0; i < 600; i++)
            buf_putc(&b, 'y');
        buf_puts(&b, "\r\n");
    }
    buf_puts(&b, "0\r\n\r\n");
    fake_set(b.data, b.len);
    CHECK(fake_fetch(f, "GET", 1000, &r) == FETCH_TOO_LARGE);
    CHECK(fake_fetch(f, "GET", 1800, &r) == FETCH_OK && r.body_len == 1800);
    buf_reset(&b);
    buf_puts(&b, "HTTP/1.1 200 OK\r\n\r\n");
    for (int i = 0; i < 2000; i++)
        buf_putc(&b, 'z');
    fake_set(b.data, b.len);
    fk.close_after = 1;
    CHECK(fake_fetch(f, "GET", 1000, &r) == FETCH_TOO_LARGE);
    run_for(20);
    buf_free(&b);
    result_clear(&r);
}

/* Connections are reused only when the response allows it. */
static void test_fake_keepalive(fetch_ctx *f, int lean)
{
    result r = {0};
    fake_fresh();
    fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    for (int i = 0; i < 5; i++)
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
    CHECK(fk.accepted == 1);
    fake_fresh();
    fake_set(LIT("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"));
    for (int i = 0; i < 3; i++)
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
    CHECK(fk.accepted == 3);
    fake_fresh();
    fake_set(LIT("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    fk.close_after = 1;
    for (int i = 0; i < 3; i++)
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK && strcmp(r.body, "ok") == 0);
    CHECK(fk.accepted == 3);
    /* The server closes a kept connection while it is idle: the next request
     * gets a new one. */
    fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    fk.close_after = 1;
    CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
    run_for(30);
    CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
    CHECK(fk.accepted == 2);
    /* The lean client closes the connection after a response with something out of
     * place: an interim 1xx other than 100, a 101, a 204 that claims a body (any
     * Content-Length above 0 or Transfer-Encoding), a HEAD or 304 answer with a
     * Transfer-Encoding, Content-Length with Transfer-Encoding. A 100 Continue before
     * the answer does not. */
    if (!lean) {
        result_clear(&r);
        return;
    }
    static const char *const closes[] = {
        "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: "
        "2\r\n\r\nok",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\nok\r\n0\r\n\r\n",
        NULL};
    for (int k = 0; closes[k]; k++) {
        fake_fresh();
        fake_set(closes[k], strlen(closes[k]));
        for (int i = 0; i < 3; i++)
            CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
        if (fk.accepted != 3)
            fprintf(stderr, "kept after: %.40s\n", closes[k]);
        CHECK(fk.accepted == 3);
    }
    /* Bytes beyond the answer: the server answered twice, the request fails. */
    fake_fresh();
    fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                 "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno"));
    CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_ERROR);
    fake_fresh();
    fake_set(
        LIT("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"));
    for (int i = 0; i < 3; i++)
        CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
    CHECK(fk.accepted == 1);
    result_clear(&r);
}

/* A kept connection that the server closes on receiving the next request (the
 * keep-alive race): an idempotent request is retried once on a new connection; a
 * POST that was sent is not (lean client; libcurl has its own rules). */
static void test_fake_retry(fetch_ctx *f, int lean)
{
    result r = {0};
    fake_fresh();
    fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    fk.drop_on = 2;
    CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
    CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK && strcmp(r.body, "ok") == 0);
    CHECK(fk.accepted == 2 && fk.requests == 3);
    if (lean) {
        result_clear(&r);
        CHECK(fake_start(f, "POST", "once", 0, 30000, &r) != NULL);
        CHECK(run_until(&r.done, 1, 40000));
        CHECK(r.res == FETCH_ERROR);
        CHECK(fk.accepted == 2 && fk.requests == 4);
        /* PUT and DELETE are idempotent: retried as GET is */
        const char *again[] = {"PUT", "DELETE"};
        for (int i = 0; i < 2; i++) {
            fake_fresh();
            fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
            fk.drop_on = 2;
            CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_OK);
            CHECK(fake_fetch(f, again[i], 0, &r) == FETCH_OK && strcmp(r.body, "ok") == 0);
            CHECK(fk.accepted == 2 && fk.requests == 3);
        }
    }
    /* A response that never arrives is not retried either: the server closes a
     * fresh connection. */
    fake_fresh();
    fake_set(LIT(""));
    fk.drop_on = 1;
    CHECK(fake_fetch(f, "GET", 0, &r) == FETCH_ERROR);
    CHECK(fk.accepted == 1);
    result_clear(&r);
}

static void test_fake_timeout(fetch_ctx *f)
{
    result r = {0};
    fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"));
    CHECK(fake_start(f, "GET", NULL, 0, 200, &r) != NULL);
    CHECK(run_until(&r.done, 1, 30000));
    CHECK(r.res == FETCH_TIMEOUT); /* the response never completes: only the timer ends it */
    CHECK(r.elapsed >= 150);
    run_for(20);
    result_clear(&r);
}

/* max_host_connections bounds the pool; the rest wait and are served in turn. */
static void test_fake_pool_bound(void)
{
    const char *err = NULL;
    fetch_config cfg = g_cfg;
    cfg.max_host_connections = 2;
    fetch_ctx *f = fetch_new(base, &cfg, &err);
    CHECK(f != NULL);
    fake_set(LIT("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    fk.split = 1; /* keeps each response in flight for a moment */
    enum { N = 10 };
    result rs[N];
    memset(rs, 0, sizeof(rs));
    for (int i = 0; i < N; i++)
        CHECK(fake_start(f, "GET", NULL, 0, 30000, &rs[i]) != NULL);
    check_wait w = check_wait_start(40000); /* liveness only */
    int done = 0;
    while (done < N && check_wait_on(&w)) {
        event_base_loop(base, EVLOOP_ONCE);
        done = 0;
        for (int i = 0; i < N; i++)
            done += rs[i].done;
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        ok += rs[i].res == FETCH_OK && rs[i].body && strcmp(rs[i].body, "ok") == 0;
        result_clear(&rs[i]);
    }
    CHECK(ok == N);
    CHECK(fk.accepted >= 1 && fk.accepted <= 2);
    fetch_free(f);
    run_for(20);
}

/* ---- pipelining (the lean client) ---- */

enum { NPIPE = 5 };
static result pipe_rs[NPIPE];
static char pipe_bodies[NPIPE][16];
static fetch_req *pipe_fr[NPIPE];

/* A pooled connection first (one request answered and kept), then NPIPE requests
 * started in one loop turn with their own bodies, the server echoing each. */
static void pipe_start(fetch_ctx *f, const char *method, int pipeline, long timeout)
{
    result warm = {0};
    fake_fresh();
    fake_set(NULL, 0);
    fk.echo = 1;
    g_pipeline = pipeline;
    CHECK(fake_fetch(f, "POST", 0, &warm) == FETCH_OK);
    result_clear(&warm);
    fk.accepted = fk.requests = fk.max_batch = 0;
    for (int i = 0; i < NPIPE; i++) {
        result_clear(&pipe_rs[i]);
        snprintf(pipe_bodies[i], sizeof(pipe_bodies[i]), "answer-%d", i);
        pipe_fr[i] =
            fake_start(f, method, pipe_bodies[i], 0, i == 0 ? timeout : 30000, &pipe_rs[i]);
        CHECK(pipe_fr[i] != NULL);
    }
    g_pipeline = 0;
}

/* Runs the loop until want of the n requests of rs are done; how many are (each one's
 * callback at most once, checked). */
static int results_wait(const result *rs, int n, int want)
{
    check_wait w = check_wait_start(40000); /* liveness only */
    int done = 0;
    while (check_wait_on(&w)) {
        event_base_loop(base, EVLOOP_ONCE);
        done = 0;
        for (int i = 0; i < n; i++) {
            CHECK(rs[i].done <= 1);
            done += rs[i].done;
        }
        if (done >= want)
            break;
    }
    return done;
}

/* Requests done of the batch. */
static int pipe_wait(int want)
{
    return results_wait(pipe_rs, NPIPE, want);
}

/* Each answered request got its own answer. */
static int pipe_own(int from)
{
    int ok = 0;
    for (int i = from; i < NPIPE; i++)
        ok += pipe_rs[i].res == FETCH_OK && pipe_rs[i].body &&
              strcmp(pipe_rs[i].body, pipe_bodies[i]) == 0;
    return ok;
}

/* Requests that start on the loop's pass after another's (here: from a socket that
 * turns readable on that pass) join its write: it is written after that pass's events. */
static fetch_ctx *nx_f;
static result nx_r[2];
static int nx_pair[2];
static void nx_second(evutil_socket_t fd, short what, void *arg)
{
    char b;
    CHECK(recv(fd, &b, 1, 0) == 1);
    g_pipeline = 1;
    CHECK(fake_start(nx_f, "POST", "second", 0, 30000, &nx_r[1]) != NULL);
    g_pipeline = 0;
}
static void nx_first(evutil_socket_t fd, short what, void *arg)
{
    g_pipeline = 1;
    CHECK(fake_start(nx_f, "POST", "first", 0, 30000, &nx_r[0]) != NULL);
    g_pipeline = 0;
    CHECK(send(nx_pair[1], "x", 1, 0) == 1);
}
static void test_pipeline_next_pass(fetch_ctx *f)
{
    result warm = {0};
    fake_fresh();
    fake_set(NULL, 0);
    fk.echo = 1;
    g_pipeline = 1;
    CHECK(fake_fetch(f, "POST", 0, &warm) == FETCH_OK);
    g_pipeline = 0;
    result_clear(&warm);
    fk.accepted = fk.requests = fk.max_batch = 0;
    nx_f = f;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, nx_pair) == 0);
    struct event *second = event_new(base, nx_pair[0], EV_READ, nx_second, NULL);
    struct event *first = event_new(base, -1, 0, nx_first, NULL);
    event_add(second, NULL);
    event_active(first, 0, 0);
    check_wait w = check_wait_start(40000); /* liveness only */
    while ((nx_r[0].done + nx_r[1].done) < 2 && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    CHECK(nx_r[0].res == FETCH_OK && nx_r[0].body && strcmp(nx_r[0].body, "first") == 0);
    CHECK(nx_r[1].res == FETCH_OK && nx_r[1].body && strcmp(nx_r[1].body, "second") == 0);
    CHECK(fk.max_batch == 2 && fk.accepted == 0);
    event_free(first);
    event_free(second);
    close(nx_pair[0]);
    close(nx_pair[1]);
    result_clear(&nx_r[0]);
    result_clear(&nx_r[1]);
}

/* In a loop with the worker's priorities (main), a gathering connection is written
 * once the loop has run out of ready events: requests that start over several passes
 * of other work all join one write; a connection that takes its 16th request
 * (HC_PIPELINE_MAX) is written on that pass; and a loop that never runs out of work
 * still writes it (after at most HC_GATHER_WAIT_MAX_US). */
enum { IP_MAX = 16 };
static fetch_ctx *ip_f;
static result ip_r[IP_MAX];
static char ip_bodies[IP_MAX][16];
static int ip_started, ip_want;
static int ip_busy_passes, ip_busy_stop;
static long ip_unread = -1; /* bytes of requests at the server when ip_probe ran */
static struct event *ip_probe_ev;

static void ip_start_one(void)
{
    snprintf(ip_bodies[ip_started], sizeof(ip_bodies[0]), "idle-%d", ip_started);
    g_pipeline = 1;
    CHECK(fake_start(ip_f, "POST", ip_bodies[ip_started], 0, 30000, &ip_r[ip_started]) != NULL);
    g_pipeline = 0;
    ip_started++;
}
/* One request a pass, a pass each: a timer due at once, added again. */
static void ip_tick(evutil_socket_t fd, short what, void *arg)
{
    struct event *self = arg;
    ip_start_one();
    if (ip_started < ip_want) {
        struct timeval now = {0, 0};
        evtimer_add(self, &now);
    }
}
/* A loop with something ready on every pass until ip_busy_stop. */
static void ip_busy(evutil_socket_t fd, short what, void *arg)
{
    struct event *self = arg;
    ip_busy_passes++;
    if (!ip_busy_stop) {
        struct timeval now = {0, 0};
        evtimer_add(self, &now);
    }
}
/* ip_want requests from one event, then a look at the server's socket on the same
 * pass, after the writes that pass makes. */
static void ip_burst(evutil_socket_t fd, short what, void *arg)
{
    while (ip_started < ip_want)
        ip_start_one();
    event_active(ip_probe_ev, 0, 0);
}
static void ip_probe(evutil_socket_t fd, short what, void *arg)
{
    int n = 0;
    CHECK(!LIST_EMPTY(&fake_conns) && LIST_NEXT(LIST_FIRST(&fake_conns), link) == NULL);
    CHECK(ioctl(LIST_FIRST(&fake_conns)->fd, FIONREAD, &n) == 0);
    ip_unread = n;
}
static int ip_wait(void)
{
    return results_wait(ip_r, ip_want, ip_want);
}
static int ip_own(void)
{
    int ok = 0;
    for (int i = 0; i < ip_want; i++)
        ok += ip_r[i].res == FETCH_OK && ip_r[i].body && strcmp(ip_r[i].body, ip_bodies[i]) == 0;
    return ok;
}
static void ip_fresh(fetch_ctx *f, int want)
{
    result warm = {0};
    fake_fresh();
    fake_set(NULL, 0);
    fk.echo = 1;
    g_pipeline = 1;
    CHECK(fake_fetch(f, "POST", 0, &warm) == FETCH_OK); /* a kept connection */
    g_pipeline = 0;
    result_clear(&warm);
    fk.accepted = fk.requests = fk.max_batch = 0;
    for (int i = 0; i < IP_MAX; i++)
        result_clear(&ip_r[i]);
    ip_f = f;
    ip_started = 0;
    ip_want = want;
    ip_unread = -1;
}
static void test_pipeline_idle(fetch_ctx *f)
{
    /* Six requests on six passes: one write. */
    ip_fresh(f, 6);
    struct event *tick = evtimer_new(base, ip_tick, event_self_cbarg());
    struct timeval now = {0, 0};
    evtimer_add(tick, &now);
    CHECK(ip_wait() == 6 && ip_own() == 6);
    CHECK(fk.accepted == 0 && fk.requests == 6 && fk.max_batch == 6);
    event_free(tick);

    /* Fifteen from one event: nothing written on that pass; sixteen: written on it. */
    ip_probe_ev = event_new(base, -1, 0, ip_probe, NULL);
    struct event *burst = event_new(base, -1, 0, ip_burst, NULL);
    for (int want = IP_MAX - 1; want <= IP_MAX; want++) {
        ip_fresh(f, want);
        event_active(burst, 0, 0);
        CHECK(ip_wait() == want && ip_own() == want);
        CHECK(want == IP_MAX ? ip_unread > 0 : ip_unread == 0);
        CHECK(fk.accepted == 0 && fk.requests == want && fk.max_batch == want);
    }
    event_free(burst);
    event_free(ip_probe_ev);

    /* Something ready on every pass: the request is still written, and answered while
     * the loop stays busy. */
    ip_fresh(f, 1);
    ip_busy_passes = ip_busy_stop = 0;
    struct event *busy = evtimer_new(base, ip_busy, event_self_cbarg());
    evtimer_add(busy, &now);
    ip_start_one();
    CHECK(ip_wait() == 1 && ip_own() == 1);
    CHECK(ip_busy_passes > 0);
    ip_busy_stop = 1;
    CHECK(evtimer_pending(busy, NULL)); /* busy to the end */
    run_for(5);
    event_free(busy);
}

static void test_pipeline(fetch_ctx *f)
{
    /* Asked for: the batch goes out in one write on the kept connection, and every
     * request gets its own answer, in order. */
    pipe_start(f, "POST", 1, 30000);
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_own(0) == NPIPE);
    CHECK(fk.accepted == 0 && fk.requests == NPIPE && fk.max_batch == NPIPE);
    /* the connection is kept after the batch */
    result r = {0};
    CHECK(fake_fetch(f, "POST", 0, &r) == FETCH_OK && fk.accepted == 0);
    result_clear(&r);

    /* The answers a byte at a time: each request still takes exactly its own. */
    pipe_start(f, "POST", 1, 30000);
    fk.bytewise = 1;
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_own(0) == NPIPE);
    CHECK(fk.accepted == 0 && fk.max_batch == NPIPE);

    /* Not asked for: one request per connection at a time, as before. */
    pipe_start(f, "POST", 0, 30000);
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_own(0) == NPIPE);
    CHECK(fk.accepted == NPIPE - 1 && fk.max_batch == 1);

    /* The server announces the close in its answer to the second request: it read
     * none of the requests behind it, so they go to new connections and are answered,
     * POST as they are. */
    pipe_start(f, "POST", 1, 30000);
    fk.close_on = 2;
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_own(0) == NPIPE);
    CHECK(fk.accepted >= 1);

    /* The server closes without answering the third request: the ones answered keep
     * their answers; the POSTs written behind fail (the server may have acted on
     * them), no answer crosses. */
    pipe_start(f, "POST", 1, 30000);
    fk.drop_on = 4; /* the warm-up was the connection's first request */
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_own(0) == 2);
    for (int i = 2; i < NPIPE; i++)
        CHECK(pipe_rs[i].res == FETCH_ERROR);
    /* ... and idempotent requests written behind are sent again, once, and answered */
    pipe_start(f, "PUT", 1, 30000);
    fk.drop_on = 4; /* the warm-up was the connection's first request */
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_own(0) == NPIPE);

    /* The first request times out while the server holds its answer: the others get
     * their own answers (the late one is read and dropped), and the connection stays. */
    pipe_start(f, "POST", 1, 150);
    fk.hold_on = 2; /* the warm-up was the connection's first request */
    fk.hold_ms = 400;
    CHECK(pipe_wait(NPIPE) == NPIPE);
    CHECK(pipe_rs[0].res == FETCH_TIMEOUT);
    CHECK(pipe_own(1) == NPIPE - 1);
    CHECK(fk.accepted == 0);

    /* A request cancelled after its write: its answer is read and dropped, the others
     * get theirs, the connection stays; one cancelled before the write is never sent. */
    pipe_start(f, "POST", 1, 30000);
    fk.hold_on = 2; /* every answer waits behind the first one's */
    fk.hold_ms = 200;
    g_pipeline = 1; /* joins the batch's write */
    fetch_req *later = fake_start(f, "POST", "never-sent", 0, 30000, &r);
    g_pipeline = 0;
    CHECK(later != NULL);
    fetch_cancel(later);
    check_wait w = check_wait_start(40000);
    while (fk.max_batch == 0 && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    CHECK(fk.max_batch == NPIPE && pipe_rs[2].done == 0);
    fetch_cancel(pipe_fr[2]);
    CHECK(pipe_wait(NPIPE - 1) == NPIPE - 1);
    run_for(50);
    CHECK(pipe_rs[2].done == 0 && r.done == 0);
    CHECK(pipe_own(0) == NPIPE - 1 && fk.requests == NPIPE && fk.accepted == 0);
    CHECK(fake_fetch(f, "POST", 0, &r) == FETCH_OK && fk.accepted == 0);
    result_clear(&r);

    /* The last request is cancelled while its answer is held: once the others have
     * theirs, only a placeholder is left, with no timer, and the connection is closed
     * rather than kept waiting for an answer that may never come. */
    pipe_start(f, "POST", 1, 30000);
    fk.hold_on = 1 + NPIPE; /* the warm-up was the connection's first request */
    fk.hold_ms = 60000;
    w = check_wait_start(40000);
    while (fk.max_batch == 0 && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    fetch_cancel(pipe_fr[NPIPE - 1]);
    CHECK(pipe_wait(NPIPE - 1) == NPIPE - 1);
    CHECK(pipe_own(0) == NPIPE - 1);
    w = check_wait_start(40000); /* liveness only: the client's close reaches the server */
    while (fk.open > 0 && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    CHECK(fk.open == 0);
    for (int i = 0; i < NPIPE; i++)
        result_clear(&pipe_rs[i]);
}

/* ---- the lean client's parser, fed directly ---- */

/* Feeds resp in two pieces (at split; 0 = byte by byte) the way a connection does
 * (unconsumed bytes are offered again with the next ones). Returns the final code. */
static int parse_in_pieces(const char *resp, size_t len, size_t split, int head, size_t max,
                           hc_parser *p, int eof)
{
    buf pend = BUF_INIT;
    size_t pos = 0;
    int rc = HC_MORE;
    hc_parser_init(p, head, max);
    while (rc == HC_MORE && pos < len) {
        size_t n = split ? (pos == 0 ? split : len - pos) : 1;
        buf_append(&pend, resp + pos, n);
        pos += n;
        size_t used = 0;
        rc = hc_parser_feed(p, pend.data, pend.len, &used);
        memmove(pend.data, pend.data + used, pend.len - used);
        pend.len -= used;
    }
    if (rc == HC_MORE && eof)
        rc = hc_parser_eof(p);
    buf_free(&pend);
    return rc;
}

static void test_parser_splits(void)
{
    static const struct {
        const char *resp, *body;
        int head, eof;
        long status;
        const char *header, *value;
    } cases[] = {
        {CHUNKED, "hello world", 0, 0, 200, "x-reply-header", "Chunky"},
        {INTERIM, "ok", 0, 0, 200, "x-reply-header", "Final"},
        {"HTTP/1.1 201 Created\r\ncontent-LENGTH: 3\r\nX-A:  spaced value \t\r\n\r\nabc", "abc", 0,
         0, 201, "x-a", "spaced value"},
        {"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", "hi", 0, 0, 200, "content-length", "2"},
        {"HTTP/1.0 200 OK\r\nX-B: 1\r\n\r\nto the end", "to the end", 0, 1, 200, "x-b", "1"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", "", 1, 0, 200, "content-length", "9"},
        {"HTTP/1.1 204 No Content\r\nX-C: c\r\n\r\n", "", 0, 0, 204, "x-c", "c"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
         "A\r\n0123456789\r\n0\r\n\r\n",
         "0123456789", 0, 0, 200, "transfer-encoding", "gzip, chunked"},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        size_t len = strlen(cases[k].resp);
        for (size_t split = 0; split < len; split++) {
            hc_parser p;
            int rc =
                parse_in_pieces(cases[k].resp, len, split, cases[k].head, 1000, &p, cases[k].eof);
            fetch_header *h = hc_parser_headers(&p);
            const char *v = NULL;
            for (size_t i = 0; i < p.n_headers; i++)
                if (strcmp(h[i].name, cases[k].header) == 0)
                    v = h[i].value;
            if (rc != HC_DONE || p.status != cases[k].status ||
                p.body.len != strlen(cases[k].body) ||
                (p.body.len && memcmp(p.body.data, cases[k].body, p.body.len) != 0) || !v ||
                strcmp(v, cases[k].value) != 0) {
                fprintf(stderr, "parser case %zu split %zu: rc %d status %ld\n", k, split, rc,
                        p.status);
                bad++;
            }
            free(h);
            hc_parser_free(&p);
        }
    }
    CHECK(bad == 0);
}

/* Which URLs the lean client takes (numeric hosts, plain paths) and how it splits
 * them; the rest goes to libcurl. */
static void test_parse_url(void)
{
    hc_target t;
    CHECK(hc_parse_url("http://127.0.0.1:8080/a/b?c=d#frag", &t) == 0);
    CHECK(t.addr.ss_family == AF_INET && t.addrlen == sizeof(struct sockaddr_in));
    CHECK(ntohs(((struct sockaddr_in *)&t.addr)->sin_port) == 8080);
    CHECK(t.authority_len == 14 && memcmp(t.authority, "127.0.0.1:8080", 14) == 0);
    CHECK(t.path_len == 8 && memcmp(t.path, "/a/b?c=d", 8) == 0);
    CHECK(hc_parse_url("HTTP://10.1.2.3", &t) == 0);
    CHECK(ntohs(((struct sockaddr_in *)&t.addr)->sin_port) == 80 && t.path_len == 0);
    CHECK(hc_parse_url("http://[::1]:9/x", &t) == 0);
    CHECK(t.addr.ss_family == AF_INET6 && t.authority_len == 7);
    CHECK(hc_parse_url("http://127.0.0.1?q=1", &t) == 0 && t.path[0] == '?');
    const char *curl_only[] = {
        "https://127.0.0.1/x",
        "http://localhost:80/x",
        "http://user@127.0.0.1/x",
        "http://127.0.0.1:0/x",
        "http://127.0.0.1:70000",
        "http://127.0.0.1:/x",
        "http://127.0.0.1/a b",
        "http://[::1/x",
        "http://::1/x",
        "http://1.2.3/x",
        "http:///x",
        "http://127.0.0.1:8a/x",
    };
    for (size_t i = 0; i < sizeof(curl_only) / sizeof(curl_only[0]); i++)
        CHECK(hc_parse_url(curl_only[i], &t) == -1);
}

static void test_parser_errors(void)
{
    static const struct {
        const char *resp;
        int want;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", HC_FAIL}, /* early close */
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 2000 OK\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\n folded\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nX Bad: 1\r\n\r\n", HC_FAIL}, /* bytes a name may not hold */
        {"HTTP/1.1 200 OK\r\nX-\x7f: 1\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nX-\x80: 1\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nX-\x01: 1\r\n\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", HC_FAIL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", HC_TOO_LARGE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n5\r\n", HC_TOO_LARGE},
        {"HTTP/1.1 200 OK\r\n\r\n0123456789A", HC_TOO_LARGE},
        {"", HC_FAIL},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        hc_parser p;
        int rc = parse_in_pieces(cases[k].resp, strlen(cases[k].resp), 0, 0, 10, &p, 1);
        if (strlen(cases[k].resp) == 0)
            rc = hc_parser_eof(&p);
        if (rc != cases[k].want) {
            fprintf(stderr, "parser error case %zu: rc %d\n", k, rc);
            bad++;
        }
        hc_parser_free(&p);
    }
    CHECK(bad == 0);
    /* Every visible ASCII byte but ':' may be in a name, which is lower-cased. */
    {
        static const char names[] = "HTTP/1.1 200 OK\r\nAz-09_.~!#$%&'*+^`|Q:  v w \r\n"
                                    "Content-Length: 0\r\n\r\n";
        hc_parser p;
        CHECK(parse_in_pieces(names, sizeof(names) - 1, 0, 0, 10, &p, 0) == HC_DONE);
        CHECK(p.n_headers == 2 && p.arena.data &&
              memcmp(p.arena.data, "az-09_.~!#$%&'*+^`|q\0v w\0", 25) == 0);
        hc_parser_free(&p);
    }
    /* A NUL inside a header line (names and values are kept NUL-separated). */
    static const char nul[] = "HTTP/1.1 200 OK\r\nX-Nul: a\0b\r\nContent-Length: 0\r\n\r\n";
    hc_parser p;
    CHECK(parse_in_pieces(nul, sizeof(nul) - 1, 0, 0, 10, &p, 0) == HC_FAIL);
    hc_parser_free(&p);
    /* Header block beyond the limit. */
    hc_parser_init(&p, 0, 10);
    buf b = BUF_INIT;
    buf_puts(&b, "HTTP/1.1 200 OK\r\n");
    while (b.len < 300 * 1024)
        buf_puts(&b, "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    size_t used = 0;
    CHECK(hc_parser_feed(&p, b.data, b.len, &used) == HC_FAIL);
    hc_parser_free(&p);
    buf_free(&b);
}

int main(void)
{
    base = event_base_new();
    CHECK(event_base_priority_init(base, CL_EV_PRIORITIES) == 0); /* as the worker's */
    http = evhttp_new(base);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                         EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD);
    evhttp_set_gencb(http, server_cb, NULL);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    if (!bs) {
        fprintf(stderr, "cannot bind\n");
        return 1;
    }
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sa, &sl);
    port = ntohs(sa.sin_port);
    /* Keeps EVLOOP_ONCE from sleeping for long so deadlines are checked. */
    struct event *tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
    struct timeval tv = {0, 10000};
    event_add(tick, &tv);

    fake_listen();
    test_parser_splits();
    test_parser_errors();
    test_parse_url();
    for (int client = FETCH_CLIENT_LEAN; client <= FETCH_CLIENT_CURL; client++) {
        const char *err = NULL;
        memset(&g_cfg, 0, sizeof(g_cfg));
        g_cfg.client = (fetch_client)client;
        g_cfg.default_timeout_ms = 60000; /* a liveness cap: a loaded machine answers late */
        fprintf(stderr, "== client: %s\n", client == FETCH_CLIENT_LEAN ? "lean" : "curl");
        fetch_ctx *f = fetch_new(base, &g_cfg, &err);
        CHECK(f != NULL);
        if (!f)
            return CHECK_DONE();
        test_methods(f, client == FETCH_CLIENT_LEAN);
        test_handle_reuse(f);
        test_status(f);
        test_concurrent(f);
        test_reuse_chain(f);
        test_timeout(f);
        test_too_large(f);
        test_refused(f);
        test_invalid(f);
        test_host_name(f);
        test_base(f);
        test_cancel_before(f);
        test_cancel_in_callback(f);
        test_free_inflight();
        test_fake_shapes(f);
        test_fake_splits(f);
        test_fake_errors(f);
        test_fake_too_large(f);
        test_fake_keepalive(f, client == FETCH_CLIENT_LEAN);
        test_fake_retry(f, client == FETCH_CLIENT_LEAN);
        test_fake_timeout(f);
        if (client == FETCH_CLIENT_LEAN) {
            test_pipeline(f);
            test_pipeline_next_pass(f);
            test_pipeline_idle(f);
        }
        fetch_free(f);
        test_fake_pool_bound();
    }
    fake_unlisten();
    /* Let outstanding slow replies go out before the server is freed. */
    check_wait w = check_wait_start(3000);
    while (slow_pending > 0 && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    CHECK(slow_pending == 0);
    event_free(tick);
    evhttp_free(http);
    event_base_free(base);
    return CHECK_DONE();
}
