/* test_trace: the Trace Core client against an in-process evhttp fake of Trace Core
 * on 127.0.0.1 (same event base). The fake records every request (path, method,
 * headers, body) and answers per route:
 *   /ok            200 {"ok":true}
 *   /empty         204 (no body)
 *   /apierr        409 error envelope
 *   /html502       502 text/html
 *   /notjson       200 text/plain
 *   /hang          replies after 5 s (flushed at teardown)
 *   /flaky         503 (no envelope) while flaky_left > 0, then 200
 *   /capture-policy  by x-tenant-id: "t_dis" disabled, "t_nocache" enabled ttl_s 0,
 *                    "t_bad" {"capture":"maybe"}, else enabled
 *   /health        health_mode: 0 = 200, 1 = hang, 2 = 500
 *   .../operations:ensure  an operation to execute (attempt 2); without an integer
 *                    attempt when the conversation id is "conv_bad"
 *   /operations/op_late/...  503 while late_left > 0, then the receipt (or a 409
 *                    envelope with late_api_error)
 *   /operations/...  a receipt */
#include "check.h"
#include "fetch.h"
#include "json.h"
#include "trace.h"
#include "util.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define PREFIX "/api/agent-observability/v1"

static struct event_base *base;
static struct evhttp *http;
static int port;
static char base_url[128];
/* The origin do_request's calls carry (test_headers changes it for one call). */
static const trace_origin EN_US = {.lang = "en-US"};
static const trace_origin *g_origin = &EN_US;

/* ---- fake Trace Core ---- */

#define MAX_REC_HEADERS 64
typedef struct recorded {
    char method[16];
    char path[256];
    char *names[MAX_REC_HEADERS], *values[MAX_REC_HEADERS];
    int nh;
    char *body;
} recorded;

static recorded last;
static int n_requests;  /* every request under PREFIX */
static int n_policy;    /* /capture-policy hits */
static int n_health;    /* /health hits */
static int n_flaky;     /* /flaky hits */
static int flaky_left;  /* failures left on /flaky */
static int health_mode; /* 0 alive, 1 hang, 2 500 */
static int n_late;         /* /operations/op_late/... hits */
static int late_left;      /* 503s left there */
static int late_api_error; /* then an error envelope instead of the receipt */

typedef struct held {
    struct evhttp_request *req;
    struct event *ev;
    struct held *next;
} held;
static held *helds;

static void rec_clear(recorded *r)
{
    for (int i = 0; i < r->nh; i++) {
        free(r->names[i]);
        free(r->values[i]);
    }
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static const char *rec_header(const char *name)
{
    for (int i = 0; i < last.nh; i++)
        if (str_ieq(last.names[i], name))
            return last.values[i];
    return NULL;
}

static void held_fire(evutil_socket_t fd, short what, void *arg)
{
    held *h = arg;
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, "{\"late\":true}");
    evhttp_send_reply(h->req, 200, "OK", out);
    evbuffer_free(out);
    for (held **pp = &helds; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    event_free(h->ev);
    free(h);
}

static void hold(struct evhttp_request *req)
{
    held *h = xcalloc(1, sizeof(*h));
    struct timeval tv = {5, 0};
    h->req = req;
    h->ev = evtimer_new(base, held_fire, h);
    evtimer_add(h->ev, &tv);
    h->next = helds;
    helds = h;
}

static void reply(struct evhttp_request *req, int code, const char *ctype, const char *body)
{
    struct evbuffer *out = evbuffer_new();
    if (ctype)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    if (body)
        evbuffer_add(out, body, strlen(body));
    evhttp_send_reply(req, code, "X", out);
    evbuffer_free(out);
}

static const char *cmd_name(struct evhttp_request *req)
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
    default:
        return "OTHER";
    }
}

static void server_cb(struct evhttp_request *req, void *arg)
{
    const char *uri = evhttp_request_get_uri(req);
    struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    const char *p;
    if (strncmp(uri, PREFIX, strlen(PREFIX)) != 0) {
        evhttp_send_error(req, 404, NULL);
        return;
    }
    p = uri + strlen(PREFIX);
    n_requests++;
    rec_clear(&last);
    snprintf(last.method, sizeof(last.method), "%s", cmd_name(req));
    snprintf(last.path, sizeof(last.path), "%s", p);
    for (struct evkeyval *kv = ih->tqh_first; kv && last.nh < MAX_REC_HEADERS;
         kv = kv->next.tqe_next) {
        last.names[last.nh] = xstrdup(kv->key);
        last.values[last.nh] = xstrdup(kv->value);
        last.nh++;
    }
    size_t n = evbuffer_get_length(in);
    last.body = xmalloc(n + 1);
    evbuffer_remove(in, last.body, n);
    last.body[n] = '\0';

    if (strcmp(p, "/ok") == 0 || strncmp(p, "/interactions/", 14) == 0) {
        reply(req, 200, "application/json", "{\"ok\":true}");
    } else if (strcmp(p, "/empty") == 0) {
        reply(req, 204, NULL, NULL);
    } else if (strcmp(p, "/apierr") == 0) {
        reply(req, 409, "application/json",
              "{\"error\":{\"code\":\"interaction_in_progress\",\"message\":\"busy\","
              "\"retryable\":false,\"current_interaction_id\":\"int_1\"}}");
    } else if (strcmp(p, "/html502") == 0) {
        reply(req, 502, "text/html", "<html><body>Bad Gateway</body></html>");
    } else if (strcmp(p, "/notjson") == 0) {
        reply(req, 200, "text/plain", "hello");
    } else if (strcmp(p, "/hang") == 0) {
        hold(req);
    } else if (strcmp(p, "/flaky") == 0) {
        n_flaky++;
        if (flaky_left > 0) {
            flaky_left--;
            reply(req, 503, "text/plain", "try later");
        } else {
            reply(req, 200, "application/json", "{\"n\":1}");
        }
    } else if (strcmp(p, "/capture-policy") == 0) {
        const char *tenant = evhttp_find_header(ih, "x-tenant-id");
        n_policy++;
        if (tenant && strcmp(tenant, "t_dis") == 0)
            reply(req, 200, "application/json", "{\"capture\":\"disabled\"}");
        else if (tenant && strcmp(tenant, "t_nocache") == 0)
            reply(req, 200, "application/json", "{\"capture\":\"enabled\",\"ttl_s\":0}");
        else if (tenant && strcmp(tenant, "t_bad") == 0)
            reply(req, 200, "application/json", "{\"capture\":\"maybe\"}");
        else
            reply(req, 200, "application/json", "{\"capture\":\"enabled\",\"ttl_s\":600}");
    } else if (strstr(p, "/operations:ensure")) {
        reply(req, 200, "application/json",
              strstr(p, "conv_bad")
                  ? "{\"operation\":{\"operation_id\":\"op_1\",\"attempt\":\"2\"},"
                    "\"receipt\":{\"receipt_id\":\"rc_1\"},\"execute\":true}"
                  : "{\"operation\":{\"operation_id\":\"op_1\",\"attempt\":2},"
                    "\"receipt\":{\"receipt_id\":\"rc_1\",\"receipt_status\":\"pending\"},"
                    "\"execute\":true}");
    } else if (strncmp(p, "/operations/op_late/", 20) == 0) {
        n_late++;
        if (late_left > 0) {
            late_left--;
            reply(req, 503, "text/html", "<html>down</html>");
        } else {
            reply(req, late_api_error ? 409 : 200, "application/json",
                  late_api_error ? "{\"error\":{\"code\":\"idempotency_conflict\"}}"
                                 : "{\"receipt\":{\"receipt_id\":\"rc_late\"}}");
        }
    } else if (strncmp(p, "/operations/op_odd/", 19) == 0) {
        /* a receipt past its id: other members first, its id escaped and repeated */
        reply(req, 200, "application/json",
              "{\"operation\":{\"x\":[1,{\"y\":\"]\"}]},\"receipt\" : { \"owner\":{\"a\":\"}\\\"\"}, "
              "\"receipt\\u005fid\":\"rc_old\", \"n\":-1.5e3, \"receipt_id\" : \"rc_\\u00e92\", "
              "\"e\":[] } ,\"execute\":false}");
    } else if (strncmp(p, "/operations/", 12) == 0) {
        reply(req, 200, "application/json", "{\"receipt\":{\"receipt_id\":\"rc_1\"}}");
    } else if (strcmp(p, "/health") == 0) {
        n_health++;
        if (health_mode == 1)
            hold(req);
        else
            reply(req, health_mode == 0 ? 200 : 500, "application/json", "{}");
    } else {
        reply(req, 404, "application/json", "{\"error\":{\"code\":\"not_found\"}}");
    }
}

static void flush_held(void)
{
    while (helds) {
        held *h = helds;
        event_del(h->ev);
        held_fire(-1, 0, h);
    }
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

/* ---- loop helpers ---- */

static void tick(evutil_socket_t fd, short what, void *arg) {}

/* Gives up after ms, longer on a loaded machine (check_wait in check.h; a 10 ms tick
 * bounds a turn). */
static int run_until(const int *flag, int want, int64_t ms)
{
    struct event *ev = event_new(base, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 10000};
    check_wait w = check_wait_start(ms);
    event_add(ev, &tv);
    while (*flag < want && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    event_free(ev);
    return *flag >= want;
}

static void run_for(int64_t ms)
{
    /* A timer keeps EVLOOP_ONCE from blocking past the end. */
    struct event *ev = event_new(base, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 10000};
    check_wait w = check_wait_start(ms);
    event_add(ev, &tv);
    while (check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    event_free(ev);
}

/* ---- result collection ---- */

typedef struct result {
    int done;
    trace_status status;
    long http_status;
    char *body;       /* canonical JSON of the reply body, or NULL */
    char *error_code; /* copy */
    char *detail;
    int64_t elapsed;
} result;

static void result_clear(result *r)
{
    free(r->body);
    free(r->error_code);
    free(r->detail);
    memset(r, 0, sizeof(*r));
}

static void collect(const trace_reply *rp, void *arg)
{
    result *r = arg;
    result_clear(r);
    r->done = 1;
    r->status = rp->status;
    r->http_status = rp->http_status;
    if (rp->body) {
        buf b = BUF_INIT;
        json_write(&b, rp->body, 1);
        r->body = buf_steal(&b, NULL);
    }
    r->error_code = rp->error_code ? xstrdup(rp->error_code) : NULL;
    r->detail = rp->detail ? xstrdup(rp->detail) : NULL;
    r->elapsed = rp->elapsed_ms;
}

static principal user_principal(void)
{
    principal p;
    memset(&p, 0, sizeof(p));
    snprintf(p.account_id, sizeof(p.account_id), "u_alice");
    snprintf(p.account_type, sizeof(p.account_type), "user");
    snprintf(p.auth_method, sizeof(p.auth_method), "oauth");
    snprintf(p.tenant_id, sizeof(p.tenant_id), "t_one");
    snprintf(p.business_domain, sizeof(p.business_domain), "bd_one");
    return p;
}

static trace_config base_cfg(void)
{
    trace_config c = {0};
    c.base_url = base_url;
    c.timeout_ms = 30000; /* a liveness cap: a loaded machine answers late */
    c.breaker_failures = 3;
    c.breaker_open_ms = 300;
    c.default_tenant_id = "t_default";
    c.default_business_domain = "bd_default";
    return c;
}

/* Runs one request to completion; returns the number of requests the fake saw. */
static int do_request(trace_ctx *t, const principal *who, const char *method, const char *path,
                      const json_value *body, int idem, result *r)
{
    int before = n_requests;
    result_clear(r);
    trace_call *c = trace_request(t, who, g_origin, method, path, body, idem, collect, r);
    CHECK(c != NULL);
    CHECK(r->done == 0); /* never inside the starting call */
    CHECK(run_until(&r->done, 1, 5000));
    return n_requests - before;
}

/* ---- tests ---- */

static void test_headers(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    trace_ctx *t = trace_new(base, f, &cfg);
    result r = {0};
    char err[64];

    /* A user without tenant/domain and without client_id: defaults and account id. */
    principal u = user_principal();
    u.tenant_id[0] = '\0';
    u.business_domain[0] = '\0';
    json_value *body = json_parse("{\"b\":1,\"a\":[true,null]}", 23, NULL, err, sizeof(err));
    CHECK(do_request(t, &u, "POST", "/ok", body, 0, &r) == 1);
    CHECK(r.status == TRACE_OK && r.http_status == 200);
    CHECK_STR(r.body, "{\"ok\":true}");
    CHECK_STR(last.method, "POST");
    CHECK_STR(last.path, "/ok");
    CHECK_STR(last.body, "{\"a\":[true,null],\"b\":1}"); /* canonical */
    CHECK_STR(rec_header("Content-Type"), "application/json");
    CHECK_STR(rec_header("Accept-Language"), "en-US");
    CHECK_STR(rec_header("x-account-id"), "u_alice");
    CHECK_STR(rec_header("X-BKN-Effective-Subject-ID"), "u_alice");
    CHECK_STR(rec_header("x-account-type"), "user");
    CHECK_STR(rec_header("x-tenant-id"), "t_default");
    CHECK_STR(rec_header("X-BKN-Tenant-ID"), "t_default");
    CHECK_STR(rec_header("x-business-domain"), "bd_default");
    CHECK_STR(rec_header("X-Business-Domain-ID"), "bd_default");
    CHECK_STR(rec_header("X-BKN-Application-Principal-ID"), "u_alice");
    CHECK_STR(rec_header("X-BKN-Effective-Subject-Type"), "user");
    CHECK_STR(rec_header("X-BKN-Auth-Method"), "oauth");
    CHECK(rec_header("X-BKN-Effective-Subject-Name") == NULL);
    CHECK(rec_header("Authorization") == NULL);
    CHECK(rec_header("X-BKN-Trace-Query-Token") == NULL);
    /* no request id or trace context in the origin: none sent */
    CHECK(rec_header("bkn-request-id") == NULL);
    CHECK(rec_header("traceparent") == NULL);
    CHECK(rec_header("tracestate") == NULL);
    CHECK(rec_header("baggage") == NULL);

    /* The origin's request id and W3C trace context: the request id twice, a child
     * traceparent (the inbound trace id and flags, a span id of its own), tracestate
     * and baggage as they came. */
    trace_origin o = {.lang = "zh-CN",
                      .request_id = "req_9",
                      .traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                      .tracestate = "vendor=abc",
                      .baggage = "tenant=t1"};
    g_origin = &o;
    CHECK(do_request(t, &u, "POST", "/ok", body, 0, &r) == 1);
    CHECK_STR(rec_header("Accept-Language"), "zh-CN");
    CHECK_STR(rec_header("bkn-request-id"), "req_9");
    CHECK_STR(rec_header("x-request-id"), "req_9");
    const char *tp = rec_header("traceparent");
    CHECK(tp && strlen(tp) == 55);
    CHECK(tp && strncmp(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36) == 0);
    CHECK(tp && strcmp(tp + 52, "-01") == 0);
    CHECK(tp && strncmp(tp + 36, "00f067aa0ba902b7", 16) != 0); /* a span of its own */
    CHECK_STR(rec_header("tracestate"), "vendor=abc");
    CHECK_STR(rec_header("baggage"), "tenant=t1");
    CHECK_STR(rec_header("x-account-id"), "u_alice"); /* the owner headers still there */
    CHECK_STR(rec_header("X-BKN-Auth-Method"), "oauth");
    /* a malformed inbound traceparent is not passed on */
    o.traceparent = "00-not-a-trace";
    CHECK(do_request(t, &u, "POST", "/ok", body, 0, &r) == 1);
    CHECK(rec_header("traceparent") == NULL);
    CHECK_STR(rec_header("tracestate"), "vendor=abc");
    g_origin = &EN_US;
    json_free(body);

    /* An app with a client id, its own tenant/domain and a name; a GET has no body. */
    principal a = user_principal();
    snprintf(a.account_id, sizeof(a.account_id), "app_42");
    snprintf(a.account_type, sizeof(a.account_type), "app");
    snprintf(a.auth_method, sizeof(a.auth_method), "api_key");
    snprintf(a.client_id, sizeof(a.client_id), "key_7");
    snprintf(a.subject_name, sizeof(a.subject_name), "Robot");
    buf path = BUF_INIT;
    buf_puts(&path, "/interactions/");
    trace_path_escape("int_x", &path);
    CHECK(do_request(t, &a, "GET", path.data, NULL, 1, &r) == 1);
    CHECK(r.status == TRACE_OK);
    CHECK_STR(last.method, "GET");
    CHECK_STR(last.path, "/interactions/int_x");
    CHECK(rec_header("Content-Type") == NULL);
    CHECK_STR(rec_header("x-account-id"), "app_42");
    CHECK_STR(rec_header("X-BKN-Effective-Subject-ID"), "app_42");
    CHECK_STR(rec_header("x-account-type"), "app");
    CHECK_STR(rec_header("x-tenant-id"), "t_one");
    CHECK_STR(rec_header("X-BKN-Tenant-ID"), "t_one");
    CHECK_STR(rec_header("x-business-domain"), "bd_one");
    CHECK_STR(rec_header("X-Business-Domain-ID"), "bd_one");
    CHECK_STR(rec_header("X-BKN-Application-Principal-ID"), "key_7");
    CHECK_STR(rec_header("X-BKN-Effective-Subject-Type"), "service");
    CHECK_STR(rec_header("X-BKN-Effective-Subject-Name"), "Robot");
    CHECK_STR(rec_header("X-BKN-Auth-Method"), "api_key");
    CHECK(rec_header("Authorization") == NULL);
    buf_free(&path);
    result_clear(&r);
    trace_free(t);
}

static void test_no_owner(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    trace_ctx *t = trace_new(base, f, &cfg);
    result r = {0};
    principal anon = user_principal();
    snprintf(anon.account_type, sizeof(anon.account_type), "anonymous");
    CHECK(do_request(t, &anon, "GET", "/ok", NULL, 1, &r) == 0);
    CHECK(r.status == TRACE_NO_OWNER);
    principal noacc = user_principal();
    noacc.account_id[0] = '\0';
    CHECK(do_request(t, &noacc, "GET", "/ok", NULL, 1, &r) == 0);
    CHECK(r.status == TRACE_NO_OWNER);
    CHECK(do_request(t, NULL, "GET", "/ok", NULL, 1, &r) == 0);
    CHECK(r.status == TRACE_NO_OWNER);
    trace_free(t);

    /* Without defaults, a principal lacking tenant or domain has no owner. */
    cfg.default_tenant_id = NULL;
    cfg.default_business_domain = "";
    t = trace_new(base, f, &cfg);
    principal nt = user_principal();
    nt.tenant_id[0] = '\0';
    CHECK(do_request(t, &nt, "GET", "/ok", NULL, 1, &r) == 0);
    CHECK(r.status == TRACE_NO_OWNER);
    principal nd = user_principal();
    nd.business_domain[0] = '\0';
    CHECK(do_request(t, &nd, "GET", "/ok", NULL, 1, &r) == 0);
    CHECK(r.status == TRACE_NO_OWNER);
    principal ok = user_principal();
    CHECK(do_request(t, &ok, "GET", "/ok", NULL, 1, &r) == 1);
    CHECK(r.status == TRACE_OK);
    trace_stats_t st;
    trace_stats(t, &st);
    CHECK(st.no_owner == 2 && st.http_calls == 1);
    result_clear(&r);
    trace_free(t);
}

static void test_not_installed(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    cfg.base_url = "";
    trace_ctx *t = trace_new(base, f, &cfg);
    result r = {0};
    principal u = user_principal();
    CHECK(!trace_installed(t));
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 1, &r) == 0);
    CHECK(r.status == TRACE_NOT_INSTALLED);
    result_clear(&r);
    trace_free(t);
    cfg.base_url = NULL;
    t = trace_new(base, f, &cfg);
    CHECK(!trace_installed(t));
    trace_free(t);
    cfg = base_cfg();
    t = trace_new(base, f, &cfg);
    CHECK(trace_installed(t));
    trace_free(t);
}

static void test_outcomes(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    cfg.breaker_failures = 100; /* keep the breaker out of this test */
    trace_ctx *t = trace_new(base, f, &cfg);
    result r = {0};
    principal u = user_principal();

    CHECK(do_request(t, &u, "POST", "/apierr", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_API_ERROR && r.http_status == 409);
    CHECK_STR(r.error_code, "interaction_in_progress");
    CHECK_STR(r.body, "{\"error\":{\"code\":\"interaction_in_progress\",\"current_interaction_id\":"
                      "\"int_1\",\"message\":\"busy\",\"retryable\":false}}");

    CHECK(do_request(t, &u, "POST", "/html502", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_UNAVAILABLE && r.http_status == 502);
    CHECK(r.body == NULL && r.detail && strstr(r.detail, "502"));

    CHECK(do_request(t, &u, "GET", "/notjson", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_UNAVAILABLE && r.http_status == 200);

    CHECK(do_request(t, &u, "POST", "/empty", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_OK && r.http_status == 204 && r.body == NULL);

    /* A 404 with an envelope is an API error (passed on), not an outage. */
    CHECK(do_request(t, &u, "GET", "/nowhere", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_API_ERROR);
    CHECK_STR(r.error_code, "not_found");

    /* the answers above under a timeout no loaded machine reaches; the hang under 200 ms */
    trace_free(t);
    cfg.timeout_ms = 200;
    t = trace_new(base, f, &cfg);
    int64_t t0 = now_mono_ms();
    CHECK(do_request(t, &u, "GET", "/hang", NULL, 0, &r) == 1);
    /* the hang never answers: only the timeout ends it (no upper bound on the time: a
     * loaded machine fires timers late) */
    CHECK(r.status == TRACE_UNAVAILABLE && r.http_status == 0);
    CHECK(now_mono_ms() - t0 >= 150 && r.elapsed >= 150);

    /* Bad path: rejected without a call. */
    CHECK(do_request(t, &u, "GET", "no-slash", NULL, 0, &r) == 0);
    CHECK(r.status == TRACE_UNAVAILABLE);
    trace_free(t);

    /* Refused connection. */
    char u2[128];
    snprintf(u2, sizeof(u2), "http://127.0.0.1:%d/", closed_port());
    cfg.base_url = u2;
    t = trace_new(base, f, &cfg);
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 0, &r) == 0);
    CHECK(r.status == TRACE_UNAVAILABLE && r.http_status == 0 && r.detail != NULL);
    result_clear(&r);
    trace_free(t);
}

static void test_retries(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    cfg.breaker_failures = 100;
    trace_ctx *t = trace_new(base, f, &cfg);
    result r = {0};
    principal u = user_principal();
    trace_stats_t st;

    n_flaky = 0;
    flaky_left = 2;
    int64_t t0 = now_mono_ms();
    CHECK(do_request(t, &u, "GET", "/flaky", NULL, 1, &r) == 3);
    CHECK(r.status == TRACE_OK);
    CHECK_STR(r.body, "{\"n\":1}");
    CHECK(n_flaky == 3);
    /* 20 ms + 40 ms backoff; libevent schedules timers on its coarse monotonic clock,
     * so each may fire up to one coarse tick (4 ms) early by this clock */
    CHECK(now_mono_ms() - t0 >= 60 - 8);
    trace_stats(t, &st);
    CHECK(st.retries == 2 && st.http_calls == 3 && st.ok == 1);

    /* Three failures exhaust the tries. */
    n_flaky = 0;
    flaky_left = 5;
    CHECK(do_request(t, &u, "GET", "/flaky", NULL, 1, &r) == 3);
    CHECK(r.status == TRACE_UNAVAILABLE && r.http_status == 503);
    flaky_left = 0;

    /* Not idempotent: one try only. */
    n_flaky = 0;
    flaky_left = 2;
    CHECK(do_request(t, &u, "POST", "/flaky", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_UNAVAILABLE);
    CHECK(n_flaky == 1);
    flaky_left = 0;

    /* A 4xx envelope is never retried, even when idempotent. */
    CHECK(do_request(t, &u, "GET", "/apierr", NULL, 1, &r) == 1);
    CHECK(r.status == TRACE_API_ERROR);
    result_clear(&r);
    trace_free(t);
}

static void test_breaker(fetch_ctx *f)
{
    trace_config cfg = base_cfg(); /* 3 failures, 300 ms open */
    trace_ctx *t = trace_new(base, f, &cfg);
    result r = {0};
    principal u = user_principal();
    trace_stats_t st;

    for (int i = 0; i < 3; i++) {
        CHECK(do_request(t, &u, "POST", "/html502", NULL, 0, &r) == 1);
        CHECK(r.status == TRACE_UNAVAILABLE);
    }
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_OPEN && st.breaker_opens == 1);
    /* Open: no call reaches the fake. */
    for (int i = 0; i < 5; i++) {
        CHECK(do_request(t, &u, "GET", "/ok", NULL, 1, &r) == 0);
        CHECK(r.status == TRACE_UNAVAILABLE);
        CHECK_STR(r.detail, "circuit open");
    }
    trace_stats(t, &st);
    CHECK(st.fast_fails == 5);

    /* After the window: one trial goes out; a second concurrent call fails fast. */
    run_for(350);
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_HALF_OPEN);
    result r2 = {0};
    int before = n_requests;
    result_clear(&r);
    trace_request(t, &u, NULL, "POST", "/html502", NULL, 0, collect, &r);
    trace_request(t, &u, NULL, "GET", "/ok", NULL, 0, collect, &r2);
    CHECK(run_until(&r.done, 1, 3000) && run_until(&r2.done, 1, 3000));
    CHECK(n_requests - before == 1);
    CHECK(r.status == TRACE_UNAVAILABLE);
    CHECK(r2.status == TRACE_UNAVAILABLE);
    CHECK_STR(r2.detail, "circuit open");
    /* The failed trial reopens it. */
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_OPEN && st.breaker_opens == 2);
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 0, &r) == 0);

    /* A successful trial closes it. */
    run_for(350);
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_OK);
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_CLOSED);
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 0, &r) == 1);

    /* API errors count as Core answering: they do not open the breaker. */
    for (int i = 0; i < 5; i++)
        CHECK(do_request(t, &u, "POST", "/apierr", NULL, 0, &r) == 1);
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_CLOSED);

    /* Cancelling the trial lets the next call be the trial. */
    for (int i = 0; i < 3; i++)
        do_request(t, &u, "POST", "/html502", NULL, 0, &r);
    run_for(350);
    r.done = 0;
    trace_call *c = trace_request(t, &u, NULL, "GET", "/hang", NULL, 0, collect, &r);
    run_for(30);
    trace_cancel(c);
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_OK);
    result_clear(&r);
    result_clear(&r2);
    trace_free(t);
}

static int pol_done;
static capture_state pol_st[16];
static void pol_cb(capture_state st, void *arg)
{
    pol_st[(intptr_t)arg] = st;
    pol_done++;
}

static void test_policy(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    trace_ctx *t = trace_new(base, f, &cfg);
    principal u = user_principal();
    trace_stats_t st;

    /* Ten lookups, one after the other: one call. */
    n_policy = 0;
    for (int i = 0; i < 10; i++) {
        pol_done = 0;
        pol_st[0] = CAPTURE_UNKNOWN;
        trace_capture_policy(t, &u, pol_cb, (void *)0);
        CHECK(pol_done == 0);
        CHECK(run_until(&pol_done, 1, 3000));
        CHECK(pol_st[0] == CAPTURE_ENABLED);
    }
    CHECK(n_policy == 1);
    CHECK_STR(rec_header("x-tenant-id"), "t_one");
    CHECK(rec_header("Authorization") == NULL);

    /* Concurrent lookups for a new tenant share one call. */
    principal v = user_principal();
    snprintf(v.tenant_id, sizeof(v.tenant_id), "t_two");
    n_policy = 0;
    pol_done = 0;
    for (int i = 0; i < 5; i++)
        trace_capture_policy(t, &v, pol_cb, (void *)(intptr_t)i);
    CHECK(run_until(&pol_done, 5, 3000));
    CHECK(n_policy == 1);
    for (int i = 0; i < 5; i++)
        CHECK(pol_st[i] == CAPTURE_ENABLED);

    /* Same tenant, another business domain: its own entry. */
    snprintf(v.business_domain, sizeof(v.business_domain), "bd_two");
    pol_done = 0;
    trace_capture_policy(t, &v, pol_cb, (void *)0);
    CHECK(run_until(&pol_done, 1, 3000));
    CHECK(n_policy == 2);

    /* Disabled. */
    principal d = user_principal();
    snprintf(d.tenant_id, sizeof(d.tenant_id), "t_dis");
    pol_done = 0;
    trace_capture_policy(t, &d, pol_cb, (void *)0);
    CHECK(run_until(&pol_done, 1, 3000));
    CHECK(pol_st[0] == CAPTURE_DISABLED);

    /* ttl_s 0 from Core: not cached. */
    principal nc = user_principal();
    snprintf(nc.tenant_id, sizeof(nc.tenant_id), "t_nocache");
    n_policy = 0;
    for (int i = 0; i < 3; i++) {
        pol_done = 0;
        trace_capture_policy(t, &nc, pol_cb, (void *)0);
        CHECK(run_until(&pol_done, 1, 3000));
        CHECK(pol_st[0] == CAPTURE_ENABLED);
    }
    CHECK(n_policy == 3);

    /* A malformed answer is UNKNOWN and not cached. */
    principal b = user_principal();
    snprintf(b.tenant_id, sizeof(b.tenant_id), "t_bad");
    n_policy = 0;
    for (int i = 0; i < 2; i++) {
        pol_done = 0;
        trace_capture_policy(t, &b, pol_cb, (void *)0);
        CHECK(run_until(&pol_done, 1, 3000));
        CHECK(pol_st[0] == CAPTURE_UNKNOWN);
    }
    CHECK(n_policy == 2);

    /* No owner: UNKNOWN without a call. */
    principal anon = user_principal();
    snprintf(anon.account_type, sizeof(anon.account_type), "anonymous");
    n_policy = 0;
    pol_done = 0;
    trace_capture_policy(t, &anon, pol_cb, (void *)0);
    CHECK(run_until(&pol_done, 1, 3000));
    CHECK(pol_st[0] == CAPTURE_UNKNOWN && n_policy == 0);

    /* A cancelled lookup is not called back, but the shared call fills the cache. */
    principal w = user_principal();
    snprintf(w.tenant_id, sizeof(w.tenant_id), "t_three");
    pol_done = 0;
    trace_call *c = trace_capture_policy(t, &w, pol_cb, (void *)1);
    trace_capture_policy(t, &w, pol_cb, (void *)2);
    trace_cancel(c);
    CHECK(run_until(&pol_done, 1, 3000));
    run_for(30);
    CHECK(pol_done == 1 && n_policy == 1);
    trace_stats(t, &st);
    CHECK(st.policy_misses >= 7 && st.policy_hits >= 13);
    trace_free(t);

    /* Core down: UNKNOWN. */
    char u2[128];
    snprintf(u2, sizeof(u2), "http://127.0.0.1:%d", closed_port());
    cfg.base_url = u2;
    t = trace_new(base, f, &cfg);
    pol_done = 0;
    trace_capture_policy(t, &u, pol_cb, (void *)0);
    CHECK(run_until(&pol_done, 1, 3000));
    CHECK(pol_st[0] == CAPTURE_UNKNOWN);
    trace_free(t);

    /* Not installed: DISABLED. */
    cfg.base_url = "";
    t = trace_new(base, f, &cfg);
    pol_done = 0;
    trace_capture_policy(t, &u, pol_cb, (void *)0);
    CHECK(run_until(&pol_done, 1, 3000));
    CHECK(pol_st[0] == CAPTURE_DISABLED);
    trace_free(t);
}

static int probe_done;
static probe_verdict probe_v[8];
static void probe_cb(probe_verdict v, void *arg)
{
    probe_v[(intptr_t)arg] = v;
    probe_done++;
}

static void test_probe(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    cfg.probe_tries = 3;
    /* each try of a hanging Core gets what is left of the budget over the tries left, so
     * a late timer takes from the next try: 500 ms a try leaves a loaded machine room
     * for all three */
    cfg.probe_budget_ms = 1500;
    cfg.verdict_ttl_s = 1;
    trace_ctx *t = trace_new(base, f, &cfg);
    trace_stats_t st;

    /* Alive, and two concurrent probes share one try. */
    health_mode = 0;
    n_health = 0;
    probe_done = 0;
    probe_v[0] = probe_v[1] = PROBE_DOWN;
    trace_probe(t, probe_cb, (void *)0);
    trace_probe(t, probe_cb, (void *)1);
    CHECK(probe_done == 0);
    CHECK(run_until(&probe_done, 2, 3000));
    CHECK(probe_v[0] == PROBE_ALIVE && probe_v[1] == PROBE_ALIVE);
    CHECK(n_health == 1);
    CHECK(rec_header("Authorization") == NULL);

    /* Cached, even though Core now hangs. */
    health_mode = 1;
    probe_done = 0;
    trace_probe(t, probe_cb, (void *)0);
    CHECK(probe_done == 0);
    CHECK(run_until(&probe_done, 1, 3000));
    CHECK(probe_v[0] == PROBE_ALIVE && n_health == 1);

    /* A reported failure drops the ALIVE verdict; a hanging Core is DOWN within the
     * budget after exactly probe_tries tries. */
    trace_note_failure(t);
    probe_done = 0;
    int64_t t0 = now_mono_ms();
    trace_probe(t, probe_cb, (void *)0);
    trace_probe(t, probe_cb, (void *)1);
    CHECK(run_until(&probe_done, 2, 30000));
    int64_t took = now_mono_ms() - t0;
    fprintf(stderr, "probe DOWN after %lld ms\n", (long long)took);
    CHECK(probe_v[0] == PROBE_DOWN && probe_v[1] == PROBE_DOWN);
    /* it spent its budget (the tries are counted below; no upper bound on the time) */
    CHECK(took >= 1450);
    CHECK(n_health == 1 + 3);
    trace_stats(t, &st);
    CHECK(st.probes == 2 && st.probe_tries == 4 && st.probe_down == 1);
    /* DOWN keeps the breaker open, and a DOWN verdict survives note_failure. */
    CHECK(st.breaker == TRACE_BREAKER_OPEN);
    trace_note_failure(t);
    probe_done = 0;
    trace_probe(t, probe_cb, (void *)0);
    CHECK(run_until(&probe_done, 1, 3000));
    CHECK(probe_v[0] == PROBE_DOWN && n_health == 4);

    /* Verdict expires; 500s are DOWN after the tries; then alive again. */
    run_for(1050);
    health_mode = 2;
    probe_done = 0;
    trace_probe(t, probe_cb, (void *)0);
    CHECK(run_until(&probe_done, 1, 3000));
    CHECK(probe_v[0] == PROBE_DOWN && n_health == 7);
    run_for(1050);
    health_mode = 0;
    probe_done = 0;
    trace_probe(t, probe_cb, (void *)0);
    CHECK(run_until(&probe_done, 1, 3000));
    CHECK(probe_v[0] == PROBE_ALIVE && n_health == 8);
    /* ALIVE lets the next call through as the trial, which closes the breaker. */
    result r = {0};
    principal u = user_principal();
    CHECK(do_request(t, &u, "GET", "/ok", NULL, 0, &r) == 1);
    CHECK(r.status == TRACE_OK);
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_CLOSED);
    result_clear(&r);

    /* A cancelled probe is not called back. */
    run_for(1050);
    probe_done = 0;
    trace_call *c = trace_probe(t, probe_cb, (void *)0);
    trace_cancel(c);
    run_for(100);
    CHECK(probe_done == 0);
    trace_free(t);

    /* Refused port: DOWN quickly; not installed: DOWN without a call. */
    char u2[128];
    snprintf(u2, sizeof(u2), "http://127.0.0.1:%d", closed_port());
    cfg.base_url = u2;
    t = trace_new(base, f, &cfg);
    probe_done = 0;
    trace_probe(t, probe_cb, (void *)0);
    CHECK(run_until(&probe_done, 1, 3000));
    CHECK(probe_v[0] == PROBE_DOWN);
    trace_stats(t, &st);
    CHECK(st.probe_tries == 3);
    trace_free(t);
    cfg.base_url = "";
    t = trace_new(base, f, &cfg);
    probe_done = 0;
    trace_probe(t, probe_cb, (void *)0);
    CHECK(run_until(&probe_done, 1, 3000));
    CHECK(probe_v[0] == PROBE_DOWN);
    trace_free(t);
    health_mode = 0;
}

static trace_ctx *free_me;
static int freed_in_cb;
static void free_cb(const trace_reply *rp, void *arg)
{
    freed_in_cb++;
    trace_free(free_me);
}

static void test_cancel_and_free(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    trace_ctx *t = trace_new(base, f, &cfg);
    principal u = user_principal();
    result r = {0}, r2 = {0};

    trace_call *c = trace_request(t, &u, NULL, "GET", "/ok", NULL, 1, collect, &r);
    trace_cancel(c);
    /* Cancel of an immediate (NO_OWNER) result too. */
    c = trace_request(t, NULL, NULL, "GET", "/ok", NULL, 1, collect, &r);
    trace_cancel(c);
    run_for(100);
    CHECK(r.done == 0);

    /* Free with calls, a policy lookup and a probe in flight (the hanging request
     * has reached the fake). */
    pol_done = probe_done = 0;
    health_mode = 1;
    int before = n_requests;
    trace_request(t, &u, NULL, "GET", "/hang", NULL, 1, collect, &r);
    CHECK(run_until(&n_requests, before + 1, 3000));
    trace_capture_policy(t, &u, pol_cb, (void *)0);
    trace_probe(t, probe_cb, (void *)0);
    trace_free(t);
    run_for(50);
    CHECK(r.done == 0 && pol_done == 0 && probe_done == 0);
    health_mode = 0;

    /* Free from inside a callback while another call is in flight. */
    free_me = trace_new(base, f, &cfg);
    freed_in_cb = 0;
    trace_request(free_me, &u, NULL, "GET", "/ok", NULL, 0, free_cb, NULL);
    trace_request(free_me, &u, NULL, "GET", "/hang", NULL, 0, collect, &r2);
    CHECK(run_until(&freed_in_cb, 1, 3000));
    run_for(50);
    CHECK(r2.done == 0);
    CHECK(fetch_inflight(f) == 0);
}

static void test_helpers(void)
{
    char tid[33], sid[17], h[65];
    trace_synthetic_ids("req_abc12345", tid, sid);
    /* Known vector (computed independently with Python hashlib). */
    CHECK_STR(tid, "16f2f26bf0896dce5cc37d9874af875d");
    CHECK_STR(sid, "909b5d94b19df44a");
    const char *ts = "bkn.synthetic.trace:req_XyZ_987654";
    const char *ss = "bkn.synthetic.span:req_XyZ_987654";
    trace_synthetic_ids("req_XyZ_987654", tid, sid);
    sha256_hex(ts, strlen(ts), h);
    CHECK(strlen(tid) == 32 && strncmp(tid, h, 32) == 0);
    sha256_hex(ss, strlen(ss), h);
    CHECK(strlen(sid) == 16 && strncmp(sid, h, 16) == 0);
    trace_synthetic_ids("", tid, sid);
    CHECK_STR(tid, "014e9531d3aa4c5fdab29e23184551c9");
    CHECK_STR(sid, "37f73bc14c4d26c3");

    /* Envelope: inline with the canonical length. */
    char err[64];
    const char *txt = "{\"b\":[1,2.5],\"a\":\"x\\u00e9\"}";
    json_value *p = json_parse(txt, strlen(txt), NULL, err, sizeof(err));
    json_value *env = NULL;
    buf b = BUF_INIT;
    CHECK(trace_payload_envelope(p, &env) == 0 && env);
    json_write(&b, env, 0);
    /* canonical payload {"a":"xé","b":[1,2.5]} = 23 bytes (é is 2 bytes) */
    CHECK_STR(b.data, "{\"mode\":\"inline\",\"media_type\":\"application/json\",\"byte_length\":23,"
                      "\"inline\":{\"b\":[1,2.5],\"a\":\"x\xc3\xa9\"}}");
    json_free(env);
    json_free(p);

    /* Exactly 1 MiB stays inline; one byte more is omitted. */
    size_t n = TRACE_INLINE_MAX - 2;
    char *big = xmalloc(n + 2);
    memset(big, 'a', n + 1);
    p = json_new_str(big, n);
    CHECK(trace_payload_envelope(p, &env) == 0);
    CHECK_STR(json_get_string(env, "mode"), "inline");
    CHECK(json_get_int(json_get(env, "byte_length")) == TRACE_INLINE_MAX);
    json_free(env);
    json_free(p);
    p = json_new_str(big, n + 1);
    CHECK(trace_payload_envelope(p, &env) == 0);
    buf_reset(&b);
    json_write(&b, env, 1);
    CHECK_STR(b.data, "{\"byte_length\":1048577,\"media_type\":\"application/json\",\"mode\":"
                      "\"omitted\",\"omitted_reason\":\"payload_too_large\"}");
    json_free(env);
    json_free(p);
    free(big);

    CHECK(trace_payload_envelope(NULL, &env) == 0);
    CHECK_STR(json_get_string(env, "omitted_reason"), "serialization_failed");
    CHECK(json_get_int(json_get(env, "byte_length")) == 0);
    json_free(env);

    /* Path escaping appends. */
    buf_reset(&b);
    buf_puts(&b, "/x/");
    CHECK_STR(trace_path_escape("int_AZaz09-._~", &b), "/x/int_AZaz09-._~");
    buf_reset(&b);
    CHECK_STR(trace_path_escape("a/b?c d%\xc3\xa9#", &b), "a%2Fb%3Fc%20d%25%C3%A9%23");
    buf_free(&b);
    buf e = BUF_INIT;
    CHECK_STR(trace_path_escape("", &e), "");
    buf_free(&e);
}

/* ---- typed operations ---- */

typedef struct typed_result {
    int done;
    trace_status status;
    int have_op;
    char operation_id[32], receipt_status[32];
    long attempt;
    int execute;
    int have_receipt;
    char receipt_id[32], receipt_json[256];
} typed_result;

static void on_op(const trace_reply *r, const trace_operation *op, void *arg)
{
    typed_result *t = arg;
    t->done++;
    t->status = r->status;
    t->have_op = op != NULL;
    if (op) {
        snprintf(t->operation_id, sizeof t->operation_id, "%s", op->operation_id);
        snprintf(t->receipt_status, sizeof t->receipt_status, "%s",
                 op->receipt_status ? op->receipt_status : "");
        t->attempt = op->attempt;
        t->execute = op->execute;
    }
}

/* text is JSON in canonical form (json_write's canonical text of its own parse). */
static int is_canonical(const char *text)
{
    json_value *v = json_parse(text, strlen(text), NULL, NULL, 0);
    buf b = BUF_INIT;
    if (v)
        json_write(&b, v, 1);
    int same = v && b.data && !strcmp(b.data, text);
    buf_free(&b);
    json_free(v);
    return same;
}

static void on_receipt(const trace_reply *r, const trace_receipt *rc, void *arg)
{
    typed_result *t = arg;
    t->done++;
    t->status = r->status;
    t->have_receipt = rc && rc->receipt_id;
    if (rc) {
        snprintf(t->receipt_id, sizeof t->receipt_id, "%s", rc->receipt_id ? rc->receipt_id : "");
        snprintf(t->receipt_json, sizeof t->receipt_json, "%.*s", (int)rc->len, rc->json);
    }
}

/* The operations build their paths (ids escaped) and bodies, and check replies. */
static void test_typed_ops(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    cfg.lease_ttl_s = 5;
    trace_ctx *t = trace_new(base, f, &cfg);
    principal who = user_principal();
    typed_result r;
    memset(&r, 0, sizeof r);
    json_value *args = json_parse("{\"kn_id\":\"kn_1\"}", 16, NULL, NULL, 0);
    trace_ensure_in in;
    memset(&in, 0, sizeof in);
    in.conversation_id = "conv 1";
    in.interaction_id = "int_1";
    in.operation_key = "op_key";
    in.tool_name = "query_object_instance";
    in.protocol = "mcp";
    in.input = args;
    in.lease_token = "L1";
    trace_ensure_operation(t, &who, &EN_US, &in, on_op, &r);
    CHECK(r.done == 0);
    CHECK(run_until(&r.done, 1, 5000));
    CHECK_STR(last.path, "/conversations/conv%201/interactions/int_1/operations:ensure");
    CHECK_STR(last.method, "POST");
    CHECK(strstr(last.body, "\"lease_epoch\":0") && strstr(last.body, "\"lease_token\":\"L1\""));
    CHECK(strstr(last.body, "\"source_module\":\"context-loader\""));
    CHECK(is_canonical(last.body)); /* written as text: still the canonical form */
    CHECK(r.status == TRACE_OK && r.have_op && r.attempt == 2 && r.execute);
    CHECK_STR(r.operation_id, "op_1");
    CHECK_STR(r.receipt_status, "pending");
    /* a 2xx without an integer attempt: no typed operation */
    memset(&r, 0, sizeof r);
    in.conversation_id = "conv_bad";
    trace_ensure_operation(t, &who, &EN_US, &in, on_op, &r);
    CHECK(run_until(&r.done, 1, 5000));
    CHECK(r.status == TRACE_OK && !r.have_op);
    /* the attempt */
    memset(&r, 0, sizeof r);
    trace_attempt_in a;
    memset(&a, 0, sizeof a);
    a.operation_id = "op_1";
    a.attempt = 2;
    a.receipt_id = "rc_1";
    a.request_id = "req_x";
    a.trace_id = "0123456789abcdef0123456789abcdef";
    a.span_id = "0123456789abcdef";
    a.payload = args;
    trace_finish_attempt(t, &who, &EN_US, &a, on_receipt, &r);
    CHECK(run_until(&r.done, 1, 5000));
    CHECK_STR(last.path, "/operations/op_1/attempts/2:complete");
    CHECK(strstr(last.body, "\"output\":{\"byte_length\":16,\"inline\":{\"kn_id\":\"kn_1\"}"));
    CHECK(is_canonical(last.body));
    /* a failed attempt, its payload given as text: the error envelope around it */
    memset(&r, 0, sizeof r);
    a.failed = 1;
    a.payload = NULL;
    a.payload_json = "{\"a\":1}";
    a.payload_len = 7;
    trace_finish_attempt(t, &who, &EN_US, &a, on_receipt, &r);
    CHECK(run_until(&r.done, 1, 5000));
    CHECK_STR(last.path, "/operations/op_1/attempts/2:fail");
    CHECK(strstr(last.body, "\"error\":{\"byte_length\":102,\"inline\":{\"code\":\"tool_error\","
                            "\"message\":\"the tool returned an error\",\"result\":{\"a\":1},"
                            "\"stage\":\"tool_execution\"},\"media_type\""));
    CHECK(is_canonical(last.body) && !strstr(last.body, "\"output\""));
    /* the receipt handed over is Core's bytes; its id the last member of that name */
    memset(&r, 0, sizeof r);
    a.operation_id = "op_odd";
    trace_finish_attempt(t, &who, &EN_US, &a, on_receipt, &r);
    CHECK(run_until(&r.done, 1, 5000));
    CHECK(r.status == TRACE_OK && r.have_receipt);
    CHECK_STR(r.receipt_id, "rc_\xc3\xa9" "2");
    CHECK_STR(r.receipt_json, "{ \"owner\":{\"a\":\"}\\\"\"}, \"receipt\\u005fid\":\"rc_old\", \"n\":-1.5e3, "
                              "\"receipt_id\" : \"rc_\\u00e92\", \"e\":[] }");
    CHECK(r.have_receipt);
    json_free(args);
    /* the lease cache: per key and conversation, dropped on demand */
    char key[65], tok[160];
    json_value *epoch = NULL, *e7 = json_new_int(7);
    trace_lease_key("caller", "int_1", key);
    CHECK(!trace_lease_get(t, key, "conv_1", tok, sizeof tok, &epoch));
    trace_lease_put(t, key, "conv_1", "L1", e7);
    CHECK(trace_lease_get(t, key, "conv_1", tok, sizeof tok, &epoch));
    CHECK_STR(tok, "L1");
    CHECK(epoch && json_get_int(epoch) == 7);
    json_free(epoch);
    epoch = NULL;
    CHECK(!trace_lease_get(t, key, "conv_2", tok, sizeof tok, &epoch));
    trace_lease_drop(t, key);
    CHECK(!trace_lease_get(t, key, "conv_1", tok, sizeof tok, &epoch));
    json_free(e7);
    trace_free(t);
}

/* A finalization sent again in the background: past the outage and the open
 * breaker, with growing pauses, until the receipt; an API error ends it too. */
static void test_finish_later(fetch_ctx *f)
{
    trace_config cfg = base_cfg();
    cfg.breaker_failures = 1;
    trace_ctx *t = trace_new(base, f, &cfg);
    principal who = user_principal();
    trace_stats_t st;
    json_value *out = json_parse("{\"n\":1}", 7, NULL, NULL, 0);
    trace_attempt_in a;
    memset(&a, 0, sizeof a);
    a.operation_id = "op_late";
    a.attempt = 1;
    a.receipt_id = "rc_late";
    a.request_id = "req_x";
    a.trace_id = "0123456789abcdef0123456789abcdef";
    a.span_id = "0123456789abcdef";
    a.payload = out;
    /* open the breaker: ordinary calls are refused without a try */
    result r = {0};
    flaky_left = 5;
    do_request(t, &who, "GET", "/flaky", NULL, 0, &r);
    flaky_left = 0;
    trace_stats(t, &st);
    CHECK(st.breaker == TRACE_BREAKER_OPEN);
    n_late = 0;
    late_left = 3;
    late_api_error = 0;
    int64_t t0 = now_mono_ms();
    trace_finish_attempt_later(t, &who, &EN_US, &a);
    int want = 4;
    CHECK(run_until(&n_late, want, 10000));
    run_for(50);
    CHECK(n_late == 4);
    /* 250 + 500 + 1000 ms between the tries (the coarse clock may fire a tick early) */
    CHECK(now_mono_ms() - t0 >= 1750 - 12);
    CHECK_STR(last.path, "/operations/op_late/attempts/1:complete");
    CHECK(strstr(last.body, "\"receipt_id\":\"rc_late\"") && strstr(last.body, "\"inline\":{\"n\":1}"));
    trace_stats(t, &st);
    CHECK(st.redeliveries == 1 && st.redelivered == 1 && st.redelivery_failed == 0);
    /* an API error is an answer: no more tries */
    n_late = 0;
    late_left = 1;
    late_api_error = 1;
    trace_finish_attempt_later(t, &who, &EN_US, &a);
    CHECK(run_until(&n_late, 2, 5000));
    run_for(400);
    CHECK(n_late == 2);
    trace_stats(t, &st);
    CHECK(st.redeliveries == 2 && st.redelivered == 1 && st.redelivery_failed == 1);
    /* freeing the ctx drops one still waiting */
    late_left = 100;
    trace_finish_attempt_later(t, &who, &EN_US, &a);
    run_for(100);
    result_clear(&r);
    json_free(out);
    trace_free(t);
    late_left = 0;
}

int main(void)
{
    const char *err = NULL;
    struct evhttp_bound_socket *sock;
    base = event_base_new();
    http = evhttp_new(base);
    sock = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    if (!sock) {
        fprintf(stderr, "cannot bind\n");
        return 1;
    }
    {
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&a, &len);
        port = ntohs(a.sin_port);
    }
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", port);
    evhttp_set_gencb(http, server_cb, NULL);
    fetch_config fc = {0};
    fetch_ctx *f = fetch_new(base, &fc, &err);
    if (!f) {
        fprintf(stderr, "fetch_new: %s\n", err);
        return 1;
    }

    test_helpers();
    test_headers(f);
    test_no_owner(f);
    test_not_installed(f);
    test_outcomes(f);
    test_retries(f);
    test_breaker(f);
    test_policy(f);
    test_probe(f);
    test_cancel_and_free(f);
    test_finish_later(f);
    test_typed_ops(f);

    fetch_free(f);
    flush_held();
    run_for(20);
    rec_clear(&last);
    evhttp_free(http);
    event_base_free(base);
    return CHECK_DONE();
}
