/* test_fetch: fetch against an in-process evhttp server on 127.0.0.1 in the same
 * event base. Routes: /echo, /slow?ms=N, /big?n=M, /status?code=S. */
#include "check.h"
#include "fetch.h"
#include "util.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct event_base *base;
static struct evhttp *http;
static int port;
static unsigned char seen_port[65536];
static int n_conns;      /* distinct client ports seen since the last reset */
static int slow_pending; /* slow replies not yet sent */

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

/* Runs the loop until *flag >= want or ms elapse; returns 1 if reached. */
static int run_until(const int *flag, int want, int64_t ms)
{
    int64_t end = now_mono_ms() + ms;
    while ((!flag || *flag < want) && now_mono_ms() < end)
        event_base_loop(base, EVLOOP_ONCE);
    return !flag || *flag >= want;
}

static void run_for(int64_t ms)
{
    int64_t end = now_mono_ms() + ms;
    while (now_mono_ms() < end)
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
    fetch_request rq = {method, url(path), h, nh, body, body ? strlen(body) : 0, timeout, max};
    fetch_req *r = fetch_start(f, &rq, cb, arg, &err);
    if (!r)
        fprintf(stderr, "fetch_start: %s\n", err);
    return r;
}

/* ---- tests ---- */

static void test_methods(fetch_ctx *f)
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
    int64_t t0 = now_mono_ms();
    CHECK(start(f, "GET", "/slow?ms=1500", NULL, NULL, 0, 200, 0, collect_cb, &r));
    CHECK(run_until(&r.done, 1, 3000));
    CHECK(r.res == FETCH_TIMEOUT);
    CHECK(now_mono_ms() - t0 < 1000);
    CHECK(r.elapsed >= 150 && r.elapsed < 1000);
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
    fetch_ctx *f = fetch_new(base, NULL, &err);
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

    selfkill_f = fetch_new(base, NULL, &err);
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

int main(void)
{
    base = event_base_new();
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

    const char *err = NULL;
    fetch_ctx *f = fetch_new(base, NULL, &err);
    CHECK(f != NULL);
    if (!f)
        return CHECK_DONE();

    test_methods(f);
    test_handle_reuse(f);
    test_status(f);
    test_concurrent(f);
    test_reuse_chain(f);
    test_timeout(f);
    test_too_large(f);
    test_refused(f);
    test_invalid(f);
    test_cancel_before(f);
    test_cancel_in_callback(f);
    test_free_inflight();

    fetch_free(f);
    /* Let outstanding slow replies go out before the server is freed. */
    int64_t end = now_mono_ms() + 3000;
    while (slow_pending > 0 && now_mono_ms() < end)
        event_base_loop(base, EVLOOP_ONCE);
    CHECK(slow_pending == 0);
    event_free(tick);
    evhttp_free(http);
    event_base_free(base);
    return CHECK_DONE();
}
