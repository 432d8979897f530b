/* test_auth: auth against in-process fakes of the OAuth (RFC 7662) and bkn-safe
 * AppKey introspection endpoints, served by evhttp on 127.0.0.1 in the same base. */
#include "auth.h"
#include "check.h"
#include "fetch.h"
#include "json.h"
#include "util.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct event_base *base;
static int port;
static int oauth_calls, appkey_calls;
static char last_form[512];
static char last_authz[256];
static char last_ct[128];
static int slow_pending;

/* ---- fake endpoints ---- */

struct delayed {
    struct evhttp_request *req;
    struct event *ev;
    char *body;
};

static void delayed_fire(evutil_socket_t fd, short what, void *arg)
{
    struct delayed *d = arg;
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, d->body, strlen(d->body));
    evhttp_send_reply(d->req, 200, "OK", out);
    evbuffer_free(out);
    event_free(d->ev);
    free(d->body);
    free(d);
    slow_pending--;
}

static void reply(struct evhttp_request *req, int code, const char *body)
{
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, body, strlen(body));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, "X", out);
    evbuffer_free(out);
}

static char *body_of(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    char *s = xmalloc(n + 1);
    evbuffer_remove(in, s, n);
    s[n] = '\0';
    return s;
}

static void copy_header(struct evhttp_request *req, const char *name, char *dst, size_t cap)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    snprintf(dst, cap, "%s", v ? v : "");
}

static void oauth_cb(struct evhttp_request *req, void *arg)
{
    oauth_calls++;
    char *form = body_of(req);
    snprintf(last_form, sizeof(last_form), "%s", form);
    copy_header(req, "Authorization", last_authz, sizeof(last_authz));
    copy_header(req, "Content-Type", last_ct, sizeof(last_ct));
    long long now = (long long)time(NULL);
    char out[1024];
    const char *tok = strncmp(form, "token=", 6) == 0 ? form + 6 : "";
    if (strcmp(tok, "user-tok") == 0) {
        snprintf(out, sizeof(out),
                 "{\"active\":true,\"sub\":\"u1\",\"client_id\":\"web\",\"exp\":%lld,"
                 "\"ext\":{\"visitor_type\":\"realname\",\"visitor_name\":\"Alice\","
                 "\"tenant_id\":\"t1\",\"business_domain\":\"bd1\"}}",
                 now + 3600);
        reply(req, 200, out);
    } else if (strcmp(tok, "app-tok") == 0) {
        reply(req, 200, "{\"active\":true,\"sub\":\"c1\",\"client_id\":\"c1\"}");
    } else if (strcmp(tok, "anon-tok") == 0) {
        reply(req, 200,
              "{\"active\":true,\"sub\":\"x\",\"client_id\":\"web\","
              "\"ext\":{\"visitor_type\":\"anonymous\"}}");
    } else if (strcmp(tok, "novt-tok") == 0) {
        reply(req, 200, "{\"active\":true,\"sub\":\"y\",\"client_id\":\"web\"}");
    } else if (strcmp(tok, "short-tok") == 0) {
        snprintf(out, sizeof(out),
                 "{\"active\":true,\"sub\":\"s1\",\"exp\":%lld,"
                 "\"ext\":{\"visitor_type\":\"realname\"}}",
                 now + 2);
        reply(req, 200, out);
    } else if (strcmp(tok, "slow-tok") == 0) {
        struct delayed *d = xcalloc(1, sizeof(*d));
        struct timeval tv = {0, 150000};
        d->req = req;
        d->body = xstrdup("{\"active\":true,\"sub\":\"slow\",\"client_id\":\"web\","
                          "\"ext\":{\"visitor_type\":\"realname\"}}");
        d->ev = evtimer_new(base, delayed_fire, d);
        evtimer_add(d->ev, &tv);
        slow_pending++;
    } else if (strcmp(tok, "err-tok") == 0) {
        reply(req, 500, "{\"error\":\"boom\"}");
    } else if (strcmp(tok, "garbage-tok") == 0) {
        reply(req, 200, "not json at all");
    } else if (strcmp(tok, "weird%20%2B%2F%26%3D%25%C3%A9tok") == 0) {
        reply(req, 200, "{\"active\":true,\"sub\":\"w\",\"ext\":{\"visitor_type\":\"realname\"}}");
    } else if (strncmp(tok, "tok", 3) == 0) { /* tok1, tok2, ...: generic users */
        snprintf(out, sizeof(out),
                 "{\"active\":true,\"sub\":\"%.20s\",\"ext\":{\"visitor_type\":\"realname\"}}",
                 tok);
        reply(req, 200, out);
    } else {
        reply(req, 200, "{\"active\":false}");
    }
    free(form);
}

static void appkey_cb(struct evhttp_request *req, void *arg)
{
    appkey_calls++;
    char *body = body_of(req);
    copy_header(req, "Content-Type", last_ct, sizeof(last_ct));
    json_value *doc = json_parse(body, strlen(body), NULL, NULL, 0);
    const char *tok = doc ? json_get_string(doc, "token") : NULL;
    if (tok && strcmp(tok, "bak_app\"key") == 0)
        reply(req, 200,
              "{\"active\":true,\"sub\":\"a1\",\"subject_name\":\"Bot\",\"account_type\":\"app\","
              "\"key_id\":\"k1\",\"key_name\":\"ci\"}");
    else if (tok && strcmp(tok, "bak_user") == 0)
        reply(req, 200,
              "{\"active\":true,\"sub\":\"u9\",\"subject_name\":\"Bob\","
              "\"account_type\":\"id_card\",\"key_id\":\"k2\",\"key_name\":\"mine\"}");
    else
        reply(req, 200, "{\"active\":false}");
    json_free(doc);
    free(body);
}

/* ---- loop helpers ---- */

static void tick_cb(evutil_socket_t fd, short what, void *arg) {}

/* Both wait at least ms, longer when the machine is loaded (check_wait in check.h);
 * the 10 ms tick bounds a turn. */
static int run_until(const int *flag, int want, int64_t ms)
{
    check_wait w = check_wait_start(ms);
    while (*flag < want && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    return *flag >= want;
}

static int run_until_zero(const int *count, int64_t ms)
{
    check_wait w = check_wait_start(ms);
    while (*count > 0 && check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
    return *count == 0;
}

static void run_for(int64_t ms)
{
    check_wait w = check_wait_start(ms);
    while (check_wait_on(&w))
        event_base_loop(base, EVLOOP_ONCE);
}

/* ---- results ---- */

typedef struct res {
    int done;
    auth_status st;
    principal who;
    int has_who;
    char detail[200];
} res;

static void res_cb(auth_status st, const principal *who, const char *detail, void *arg)
{
    res *r = arg;
    r->done++;
    r->st = st;
    r->has_who = who != NULL;
    if (who)
        r->who = *who;
    snprintf(r->detail, sizeof(r->detail), "%s", detail ? detail : "");
}

/* One check, run to completion. */
static res check1(auth_ctx *a, const char *token)
{
    res r;
    memset(&r, 0, sizeof(r));
    auth_wait *w = auth_check(a, token, strlen(token), res_cb, &r);
    CHECK(w != NULL);
    CHECK(r.done == 0); /* never synchronous */
    CHECK(run_until(&r.done, 1, 3000));
    return r;
}

static char oauth_url[128], appkey_url[128];

static auth_ctx *new_auth(fetch_ctx *f, size_t max_entries, int ttl, int neg_ttl)
{
    auth_config c = {.oauth_introspect_url = oauth_url,
                     .appkey_introspect_url = appkey_url,
                     .timeout_ms = 30000, /* a liveness cap: a loaded machine answers late */
                     .cache_ttl_s = ttl,
                     .negative_ttl_s = neg_ttl,
                     .max_entries = max_entries,
                     .default_tenant_id = "dt",
                     .default_business_domain = "dbd"};
    return auth_new(base, f, &c);
}

/* ---- tests ---- */

static void test_mapping(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    res r = check1(a, "user-tok");
    CHECK(r.st == AUTH_OK && r.has_who);
    CHECK_STR(r.who.account_type, "user");
    CHECK_STR(r.who.account_id, "u1");
    CHECK_STR(r.who.auth_method, "oauth");
    CHECK_STR(r.who.client_id, "web");
    CHECK_STR(r.who.subject_name, "Alice");
    CHECK_STR(r.who.tenant_id, "t1");
    CHECK_STR(r.who.business_domain, "bd1");
    char want[65];
    sha256_hex("user|u1|t1", 10, want);
    CHECK_STR(r.who.key, want);
    CHECK_STR(last_ct, "application/x-www-form-urlencoded");
    CHECK_STR(last_form, "token=user-tok");
    CHECK_STR(last_authz, ""); /* no Basic auth configured */

    r = check1(a, "app-tok");
    CHECK(r.st == AUTH_OK);
    CHECK_STR(r.who.account_type, "app");
    CHECK_STR(r.who.account_id, "c1");
    CHECK_STR(r.who.tenant_id, "dt"); /* defaults from the config */
    CHECK_STR(r.who.business_domain, "dbd");

    r = check1(a, "anon-tok");
    CHECK(r.st == AUTH_OK);
    CHECK_STR(r.who.account_type, "anonymous");
    r = check1(a, "novt-tok");
    CHECK(r.st == AUTH_OK);
    CHECK_STR(r.who.account_type, "anonymous"); /* missing visitor_type */

    int calls = appkey_calls, ocalls = oauth_calls;
    r = check1(a, "bak_app\"key"); /* the quote must be JSON-escaped */
    CHECK(r.st == AUTH_OK);
    CHECK(appkey_calls == calls + 1 && oauth_calls == ocalls);
    CHECK_STR(last_ct, "application/json");
    CHECK_STR(r.who.account_type, "app");
    CHECK_STR(r.who.auth_method, "api_key");
    CHECK_STR(r.who.account_id, "a1");
    CHECK_STR(r.who.client_id, "k1");
    CHECK_STR(r.who.subject_name, "Bot");
    r = check1(a, "bak_user");
    CHECK(r.st == AUTH_OK);
    CHECK_STR(r.who.account_type, "user");
    CHECK_STR(r.who.client_id, "k2");

    r = check1(a, "bak_nope");
    CHECK(r.st == AUTH_INVALID && !r.has_who);
    CHECK_STR(r.detail, "api key is invalid");
    r = check1(a, "nope-tok");
    CHECK(r.st == AUTH_INVALID);
    CHECK_STR(r.detail, "token is invalid");
    auth_free(a);
}

static void test_empty_and_encoding(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    int calls = oauth_calls + appkey_calls;
    res r = check1(a, "");
    CHECK(r.st == AUTH_INVALID);
    CHECK_STR(r.detail, "token is invalid");
    CHECK(oauth_calls + appkey_calls == calls);

    r = check1(a, "bak_\xff\xfe");
    CHECK(r.st == AUTH_INVALID);
    CHECK_STR(r.detail, "api key is invalid");
    CHECK(oauth_calls + appkey_calls == calls);

    r = check1(a, "weird +/&=%\xc3\xa9tok");
    CHECK(r.st == AUTH_OK);
    CHECK_STR(last_form, "token=weird%20%2B%2F%26%3D%25%C3%A9tok");
    auth_free(a);

    /* Basic client authentication, credentials form-encoded first (RFC 6749 2.3.1). */
    auth_config c = {.oauth_introspect_url = oauth_url,
                     .oauth_client_id = "cid",
                     .oauth_client_secret = "sec ret"};
    a = auth_new(base, f, &c);
    r = check1(a, "user-tok");
    CHECK(r.st == AUTH_OK);
    CHECK_STR(last_authz, "Basic Y2lkOnNlYyUyMHJldA==");
    auth_free(a);
}

static void test_cache(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    auth_stats_t s;
    int calls = oauth_calls;
    res r = check1(a, "user-tok");
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 1);
    r = check1(a, "user-tok"); /* a hit: still delivered later, no call */
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 1);
    CHECK_STR(r.who.account_id, "u1");
    auth_stats(a, &s);
    CHECK(s.hits == 1 && s.misses == 1 && s.introspections == 1);

    /* Negative caching. */
    r = check1(a, "bad-tok");
    r = check1(a, "bad-tok");
    CHECK(r.st == AUTH_INVALID);
    CHECK_STR(r.detail, "token is invalid");
    CHECK(oauth_calls == calls + 2);
    auth_stats(a, &s);
    CHECK(s.negative_hits == 1);

    /* Expiry by exp (whole seconds: now + 2 s, so it lives for 1-2 s). */
    r = check1(a, "short-tok");
    CHECK(r.st == AUTH_OK);
    r = check1(a, "short-tok");
    CHECK(oauth_calls == calls + 3);
    run_for(2050);
    r = check1(a, "short-tok");
    CHECK(r.st == AUTH_OK);
    CHECK(oauth_calls == calls + 4);
    auth_free(a);

    /* Negative TTL expiry and the positive TTL bound: 1 s each. */
    a = new_auth(f, 0, 1, 1);
    calls = oauth_calls;
    check1(a, "bad-tok");
    check1(a, "user-tok");
    check1(a, "bad-tok");
    check1(a, "user-tok");
    CHECK(oauth_calls == calls + 2);
    run_for(1050);
    check1(a, "bad-tok");
    check1(a, "user-tok");
    CHECK(oauth_calls == calls + 4);
    auth_free(a);

    /* Bounded size: the oldest entry is evicted. */
    a = new_auth(f, 2, 0, 0);
    calls = oauth_calls;
    check1(a, "tok1");
    check1(a, "tok2");
    check1(a, "tok3");
    auth_stats(a, &s);
    CHECK(s.entries == 2);
    check1(a, "tok3");
    CHECK(oauth_calls == calls + 3);
    r = check1(a, "tok1");
    CHECK(oauth_calls == calls + 4);
    CHECK_STR(r.who.account_id, "tok1");
    auth_free(a);
}

/* One check through memo m, run to completion. */
static res check_memo(auth_ctx *a, const char *token, auth_memo *m)
{
    res r;
    memset(&r, 0, sizeof(r));
    CHECK(auth_check_memo(a, token, strlen(token), m, res_cb, &r) != NULL);
    CHECK(r.done == 0);
    CHECK(run_until(&r.done, 1, 3000));
    return r;
}

static void test_memo(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    auth_memo m;
    char key[65];
    memset(&m, 0, sizeof m);
    int calls = oauth_calls;
    res r = check_memo(a, "user-tok", &m);
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 1);
    sha256_hex("user-tok", 8, key);
    CHECK(m.len == 8 && m.token && memcmp(m.token, "user-tok", 8) == 0);
    CHECK_STR(m.key, key);

    /* The same bytes again: the remembered key is used, not a new hash (shown by a
     * planted key, tok1's, whose cached principal comes back). */
    r = check_memo(a, "tok1", NULL);
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 2);
    sha256_hex("tok1", 4, m.key);
    r = check_memo(a, "user-tok", &m);
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 2);
    CHECK_STR(r.who.account_id, "tok1");

    /* Other bytes, even of the same length: hashed, and the memo follows them. */
    r = check_memo(a, "bad-tok1", &m);
    CHECK(r.st == AUTH_INVALID && oauth_calls == calls + 3);
    sha256_hex("bad-tok1", 8, key);
    CHECK(m.len == 8 && memcmp(m.token, "bad-tok1", 8) == 0);
    CHECK_STR(m.key, key);
    r = check_memo(a, "user-tok", &m);
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 3);
    CHECK_STR(r.who.account_id, "u1");

    /* The memo remembers no result: an expired entry is not served through it. */
    r = check_memo(a, "short-tok", &m);
    r = check_memo(a, "short-tok", &m);
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 4);
    run_for(2050);
    r = check_memo(a, "short-tok", &m);
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 5);

    auth_memo_clear(&m);
    CHECK(m.token == NULL && m.len == 0 && m.key[0] == '\0');
    auth_free(a);
}

#define NSF 50
static void test_single_flight(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    res rs[NSF];
    auth_wait *ws[NSF];
    int calls = oauth_calls;
    memset(rs, 0, sizeof(rs));
    for (int i = 0; i < NSF; i++)
        ws[i] = auth_check(a, "slow-tok", 8, res_cb, &rs[i]);
    auth_cancel(ws[3]); /* one waiter leaves; the flight goes on for the others */
    auth_cancel(ws[0]);
    run_for(400);
    int ok = 1;
    for (int i = 0; i < NSF; i++) {
        int want = (i == 3 || i == 0) ? 0 : 1;
        if (rs[i].done != want ||
            (want && (rs[i].st != AUTH_OK || strcmp(rs[i].who.account_id, "slow") != 0)))
            ok = 0;
    }
    CHECK(ok);
    CHECK(oauth_calls == calls + 1);
    auth_stats_t s;
    auth_stats(a, &s);
    CHECK(s.introspections == 1 && s.coalesced == NSF - 1);

    /* Every waiter cancelled: the call still fills the cache. */
    auth_free(a);
    a = new_auth(f, 0, 0, 0);
    calls = oauth_calls;
    res r1;
    memset(&r1, 0, sizeof(r1));
    auth_wait *w = auth_check(a, "slow-tok", 8, res_cb, &r1);
    auth_cancel(w);
    run_for(400);
    CHECK(r1.done == 0);
    res r = check1(a, "slow-tok");
    CHECK(r.st == AUTH_OK && oauth_calls == calls + 1);

    /* Cancelling a cache hit before delivery. */
    memset(&r1, 0, sizeof(r1));
    w = auth_check(a, "slow-tok", 8, res_cb, &r1);
    auth_cancel(w);
    run_for(50);
    CHECK(r1.done == 0);
    auth_free(a);
}

static int closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    socklen_t len = sizeof(sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(s, (struct sockaddr *)&sa, &len);
    close(s);
    return ntohs(sa.sin_port);
}

static void test_unavailable(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    int calls = oauth_calls;
    res r = check1(a, "err-tok");
    CHECK(r.st == AUTH_UNAVAILABLE && !r.has_who);
    CHECK(strstr(r.detail, "500") != NULL);
    CHECK(strstr(r.detail, "err-tok") == NULL);
    r = check1(a, "err-tok"); /* failures are not cached */
    CHECK(r.st == AUTH_UNAVAILABLE && oauth_calls == calls + 2);
    r = check1(a, "garbage-tok");
    CHECK(r.st == AUTH_UNAVAILABLE);
    CHECK_STR(r.detail, "undecodable introspection response");
    auth_stats_t s;
    auth_stats(a, &s);
    CHECK(s.errors == 3);
    auth_free(a);

    char u[128];
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/introspect", closed_port());
    auth_config c = {.oauth_introspect_url = u, .appkey_introspect_url = u};
    a = auth_new(base, f, &c);
    r = check1(a, "user-tok");
    CHECK(r.st == AUTH_UNAVAILABLE);
    CHECK(strstr(r.detail, "unreachable") != NULL);
    r = check1(a, "bak_user");
    CHECK(r.st == AUTH_UNAVAILABLE);
    auth_free(a);

    /* Nothing configured. */
    auth_config none = {0};
    a = auth_new(base, f, &none);
    r = check1(a, "user-tok");
    CHECK(r.st == AUTH_UNAVAILABLE);
    auth_free(a);
}

static auth_ctx *selfkill_a;
static int selfkill_calls;
static void selfkill_cb(auth_status st, const principal *who, const char *detail, void *arg)
{
    selfkill_calls++;
    auth_free(selfkill_a);
    selfkill_a = NULL;
}

static void test_free_pending(fetch_ctx *f)
{
    auth_ctx *a = new_auth(f, 0, 0, 0);
    res r;
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 5; i++)
        auth_check(a, "slow-tok", 8, res_cb, &r);
    auth_check(a, "", 0, res_cb, &r);
    auth_free(a);
    run_for(300);
    CHECK(r.done == 0);
    CHECK(fetch_inflight(f) == 0);

    /* auth_free from inside a callback with other checks pending. */
    selfkill_a = new_auth(f, 0, 0, 0);
    selfkill_calls = 0;
    auth_check(selfkill_a, "", 0, selfkill_cb, NULL);
    auth_check(selfkill_a, "", 0, selfkill_cb, NULL);
    auth_check(selfkill_a, "slow-tok", 8, selfkill_cb, NULL);
    run_for(300);
    CHECK(selfkill_calls == 1);
    CHECK(selfkill_a == NULL);
}

int main(void)
{
    base = event_base_new();
    struct evhttp *http = evhttp_new(base);
    evhttp_set_cb(http, "/oauth/introspect", oauth_cb, NULL);
    evhttp_set_cb(http, "/appkey/introspect", appkey_cb, NULL);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    if (!bs) {
        fprintf(stderr, "cannot bind\n");
        return 1;
    }
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sa, &sl);
    port = ntohs(sa.sin_port);
    snprintf(oauth_url, sizeof(oauth_url), "http://127.0.0.1:%d/oauth/introspect", port);
    snprintf(appkey_url, sizeof(appkey_url), "http://127.0.0.1:%d/appkey/introspect", port);
    struct event *tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
    struct timeval tv = {0, 10000};
    event_add(tick, &tv);

    const char *err = NULL;
    fetch_ctx *f = fetch_new(base, NULL, &err);
    CHECK(f != NULL);
    CHECK(auth_new(base, NULL, NULL) == NULL);

    test_mapping(f);
    test_empty_and_encoding(f);
    test_cache(f);
    test_memo(f);
    test_single_flight(f);
    test_unavailable(f);
    test_free_pending(f);

    fetch_free(f);
    CHECK(run_until_zero(&slow_pending, 3000));
    event_free(tick);
    evhttp_free(http);
    event_base_free(base);
    return CHECK_DONE();
}
