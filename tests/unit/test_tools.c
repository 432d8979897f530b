/* test_tools: generations, the sandbox, budgets and calls against an in-process
 * upstream (evhttp on 127.0.0.1:0). Fixtures: tests/fixtures/tools_good,
 * tests/fixtures/tools_bad_all. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "call.h"
#include "check.h"
#include "fetch.h"
#include "json.h"
#include "lvm.h"
#include "reload.h"
#include "tools.h"
#include "tools_impl.h"
#include "util.h"

#define GOOD CL_SOURCE_DIR "/tests/fixtures/tools_good"
#define BAD CL_SOURCE_DIR "/tests/fixtures/tools_bad_all"
#define HOSTILE CL_SOURCE_DIR "/tests/fixtures/tools_hostile"

static const char BIG_BODY[] = "{\"id\":9007199254740993,\"big\":123456789012345678901234567890,"
                               "\"empty\":[],\"obj\":{},\"f\":1.5,\"z\":\"\xc3\xa9\"}";
#define NOT_FOUND_JSON "{\"error\":\"not found\",\"id\":12345678901234567890}"
static const char NOT_FOUND_BODY[] = NOT_FOUND_JSON;

static struct event_base *base;

static struct {
    char uri[512];
    char account[64];
    char tenant[64];
    int has_auth;
    char traceparent[64];
    char custom[16];
    char lang[16];
    char reqid[64];
    int hits;
} seen;

static void copy_hdr(struct evkeyvalq *h, const char *name, char *out, size_t n)
{
    const char *v = evhttp_find_header(h, name);
    snprintf(out, n, "%s", v ? v : "");
}

static void slow_reply(evutil_socket_t fd, short what, void *arg)
{
    struct evhttp_request *req = arg;
    struct evbuffer *b = evbuffer_new();
    (void)fd;
    (void)what;
    evbuffer_add_printf(b, "{\"ok\":true}");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void upstream_cb(struct evhttp_request *req, void *arg)
{
    const char *uri = evhttp_request_get_uri(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evbuffer *out = evbuffer_new();
    (void)arg;
    seen.hits++;
    snprintf(seen.uri, sizeof seen.uri, "%s", uri);
    copy_hdr(in, "x-account-id", seen.account, sizeof seen.account);
    copy_hdr(in, "x-tenant-id", seen.tenant, sizeof seen.tenant);
    copy_hdr(in, "traceparent", seen.traceparent, sizeof seen.traceparent);
    copy_hdr(in, "x-custom", seen.custom, sizeof seen.custom);
    copy_hdr(in, "accept-language", seen.lang, sizeof seen.lang);
    copy_hdr(in, "bkn-request-id", seen.reqid, sizeof seen.reqid);
    seen.has_auth = evhttp_find_header(in, "authorization") != NULL;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    if (strncmp(uri, "/api/slow", 9) == 0) {
        struct timeval tv = {0, 300000};
        evbuffer_free(out);
        event_base_once(base, -1, EV_TIMEOUT, slow_reply, req, &tv);
        return;
    }
    if (strncmp(uri, "/api/kn/kn_404/", 15) == 0) {
        evbuffer_add(out, NOT_FOUND_BODY, strlen(NOT_FOUND_BODY));
        evhttp_send_reply(req, 404, "Not Found", out);
    } else if (strncmp(uri, "/api/echo", 9) == 0) {
        const char *ct = evhttp_find_header(in, "content-type");
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Seen-Content-Type",
                          ct ? ct : "");
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Dup", "a");
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Dup", "b");
        evbuffer_add_buffer(out, evhttp_request_get_input_buffer(req));
        evhttp_send_reply(req, 200, "OK", out);
    } else {
        evbuffer_add(out, BIG_BODY, strlen(BIG_BODY));
        evhttp_send_reply(req, 200, "OK", out);
    }
    evbuffer_free(out);
}

typedef struct outcome {
    int done;
    int status;
    int is_error;
    char *body;
    char *code;
    char *incident;
} outcome;

static void on_done(const call_result *r, void *arg)
{
    outcome *o = arg;
    o->done++;
    o->status = r->status;
    o->is_error = r->is_error;
    o->body = xstrndup(r->body, r->body_len);
    o->code = r->error_code ? xstrdup(r->error_code) : NULL;
    o->incident = r->incident_id ? xstrdup(r->incident_id) : NULL;
}

static void outcome_free(outcome *o)
{
    free(o->body);
    free(o->code);
    free(o->incident);
    memset(o, 0, sizeof *o);
}

static principal who;
static call_env env;

/* Gives up after ms, longer on a loaded machine (check_wait in check.h). */
static void loop_until(int *flag, int64_t ms)
{
    check_wait w = check_wait_start(ms);
    while (!*flag && check_wait_on(&w)) {
        struct timeval tv = {0, 20000}; /* bounded wait per turn */
        event_base_loopexit(base, &tv);
        event_base_loop(base, EVLOOP_ONCE);
    }
}

static void run_for(int64_t ms)
{
    struct timeval tv = {(long)(ms / 1000), (long)(ms % 1000) * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

static call *start(tools_gen *g, const char *tool, const char *args, outcome *o)
{
    json_value *a = NULL;
    char err[128];
    const tools_info *info = tools_gen_find(g, tool);
    call *c;
    memset(o, 0, sizeof *o);
    if (!info) {
        fprintf(stderr, "no tool %s\n", tool);
        exit(2);
    }
    if (args) {
        a = json_parse(args, strlen(args), NULL, err, sizeof err);
        if (!a) {
            fprintf(stderr, "bad args %s: %s\n", args, err);
            exit(2);
        }
    }
    c = call_start(g, info, a, &env, on_done, o);
    json_free(a);
    CHECK(o->done == 0); /* never inside call_start */
    return c;
}

static void run(tools_gen *g, const char *tool, const char *args, outcome *o)
{
    start(g, tool, args, o);
    loop_until(&o->done, 10000);
    CHECK(o->done == 1);
    if (!o->body)
        o->body = xstrdup("");
}

static int contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

static void check_escape(tools_gen *g, const char *what, const char *expect)
{
    outcome o;
    char args[128];
    snprintf(args, sizeof args, "{\"what\":\"%s\"}", what);
    run(g, "escape", args, &o);
    if (!(contains(o.body, "\"ok\":false") && contains(o.body, expect)))
        fprintf(stderr, "escape %s: %s (expected %s)\n", what, o.body, expect);
    CHECK(o.status == 200);
    CHECK(contains(o.body, "\"ok\":false"));
    CHECK(contains(o.body, expect));
    outcome_free(&o);
}

/* Process CPU time in milliseconds (what the loop spent, whatever the machine's load). */
static int64_t cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs hostile tool `tool` and checks that it stops with `code` within max_ms of
 * CPU time (one resume: the time it held the loop). */
static void check_stops(tools_gen *g, const char *tool, const char *code, int64_t max_ms)
{
    outcome o;
    int64_t t0 = cpu_ms(), took;
    start(g, tool, NULL, &o);
    loop_until(&o.done, 10000);
    took = cpu_ms() - t0;
    if (!o.code || strcmp(o.code, code) != 0 || took > max_ms)
        fprintf(stderr, "%s: %s after %lld ms of CPU: %s\n", tool, o.code ? o.code : "(none)",
                (long long)took, o.body ? o.body : "");
    CHECK(o.done == 1);
    CHECK_STR(o.code, code);
    CHECK(o.status == 500);
    CHECK(took <= max_ms);
    outcome_free(&o);
}

/* Finished coroutines serve later calls: a call takes the pooled one and gives it
 * back clean; one that raised, was stopped, cancelled or handed to the tool is not
 * given back. Calls here run one at a time, so the pool holds at most one. */
static void check_co_reuse(tools_gen *g)
{
    outcome o;
    call *c;
    int clean;
    run(g, "fetch_json", "{\"kn_id\":\"kn_a\"}", &o);
    CHECK(o.status == 200);
    outcome_free(&o);
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
    run(g, "fetch_json", "{\"kn_id\":\"kn_a\"}", &o); /* took it: no second one */
    CHECK(o.status == 200);
    outcome_free(&o);
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
    /* raised */
    run(g, "boom", NULL, &o);
    CHECK_STR(o.code, "tool_raised");
    outcome_free(&o);
    CHECK(call_co_pooled(g, &clean) == 0);
    check_escape(g, "tbc_count", "closed 0");
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
    /* stopped by the instruction budget, with and without a pcall around the loop */
    run(g, "spin", NULL, &o);
    CHECK_STR(o.code, "instruction_budget_exceeded");
    outcome_free(&o);
    CHECK(call_co_pooled(g, &clean) == 0);
    check_escape(g, "tbc_count", "closed 0");
    run(g, "spin", "{\"mode\":\"pcall\"}", &o);
    CHECK_STR(o.code, "instruction_budget_exceeded");
    outcome_free(&o);
    CHECK(call_co_pooled(g, &clean) == 0);
    /* stopped by the memory cap */
    check_escape(g, "tbc_count", "closed 0");
    run(g, "hog", NULL, &o);
    CHECK_STR(o.code, "memory_limit_exceeded");
    outcome_free(&o);
    CHECK(call_co_pooled(g, &clean) == 0);
    /* cancelled while it waits for ctx.http */
    check_escape(g, "tbc_count", "closed 0");
    c = start(g, "slow", NULL, &o);
    run_for(60);
    call_cancel(c);
    CHECK(call_co_pooled(g, &clean) == 0);
    /* handed to the tool by coroutine.running: it could resume or close it later */
    check_escape(g, "tbc_count", "closed 0");
    check_escape(g, "co_running", "thread false");
    CHECK(call_co_pooled(g, &clean) == 0);
    /* a to-be-closed variable open across a yield is closed by the return, and the
     * coroutine comes back empty */
    check_escape(g, "tbc", "open 0");
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
    check_escape(g, "tbc_count", "closed 1");
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
    /* a counted call: its coroutine comes back without the count hook */
    check_escape(g, "busy", "busy");
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
    check_escape(g, "tbc_count", "closed 1");
    CHECK(call_co_pooled(g, &clean) == 1 && clean);
}

/* The run-time slice and the output cap: a large instruction budget and memory cap,
 * so that only the wall clock (or the output cap) can stop these tools. */
static void check_hostile(const tools_config *base_cfg)
{
    tools_config cfg = *base_cfg;
    tools_host *h;
    tools_gen *g;
    char *report = NULL;
    outcome o;
    cfg.instr_budget = 4000000000L;
    cfg.mem_cap_bytes = (size_t)128 << 20;
    cfg.max_run_ms = 50;
    cfg.max_output_bytes = 1 << 20;
    h = tools_host_new(&cfg);
    CHECK(tools_host_reload(h, HOSTILE, &report) == 0);
    free(report);
    g = tools_host_acquire(h);
    /* CPU time, so a loaded machine does not matter; generous for the sanitizers
       (the slice is 50 ms). Without the slice each of these runs for many seconds or
       for ever; the last ones loop after the stop (message handler, __close,
       __tostring), in finalizers or in C library loops. */
    static const char *const stopped[] = {
        "hostile_loop",         "hostile_pcall_loop",   "hostile_pattern",     "hostile_gmatch",
        "hostile_rep_bomb",     "hostile_concat_bomb",  "hostile_pcall_bomb",  "hostile_wrap_loop",
        "hostile_pingpong",     "hostile_xpcall_spin",  "hostile_xpcall_error", "hostile_tostring",
        "hostile_close_wrap",   "hostile_close_pcall",  "hostile_gc",          "hostile_table_move",
        "hostile_table_insert", "hostile_table_range",  "hostile_string_scan", NULL};
    for (int i = 0; stopped[i]; i++)
        check_stops(g, stopped[i], "time_limit_exceeded", 500);
    tools_gen_release(g);
    tools_host_free(h);
    /* the output cap: a precise error, not an incident. Its own host with a slice
       no loaded machine reaches, so that only the cap can stop it (with the 50 ms
       slice a sanitizer build under load was stopped by the clock first). */
    cfg.max_run_ms = 600000;
    h = tools_host_new(&cfg);
    CHECK(tools_host_reload(h, HOSTILE, &report) == 0);
    free(report);
    g = tools_host_acquire(h);
    run(g, "hostile_output", NULL, &o);
    CHECK_STR(o.code, "output_too_large");
    CHECK(o.status == 500 && o.incident == NULL);
    CHECK(contains(o.body, "more than lua.max_output_bytes (1048576 bytes)"));
    CHECK(strlen(o.body) < 1024);
    outcome_free(&o);
    tools_gen_release(g);
    tools_host_free(h);
    CHECK(tools_gen_live() == 0);
}

/* Sanitizer builds keep no freed blocks (lvm.c), so that a use after free is caught. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_KEEPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_KEEPS 0
#endif
#endif
#ifndef POOL_KEEPS
#define POOL_KEEPS 1
#endif

/* A state with the runtime of lua/ loaded; NULL (a failed check) if it cannot be made. */
static lvm *runtime_vm(void)
{
    char *err = NULL;
    lvm *vm = lvm_new(CL_SOURCE_DIR "/lua", NULL, 0, &err);
    CHECK(vm != NULL);
    free(err);
    return vm;
}

/* The state keeps freed small blocks for reuse, within its bound, and accounts
 * for its memory as before: what a run allocates and drops comes back off the total. */
static void check_pool(void)
{
    lvm *vm = runtime_vm();
    if (!vm)
        return;
    lua_State *L = lvm_state(vm);
    static const char code[] =
        "local t = {}\n"
        "for i = 1, 20000 do t[i % 100 + 1] = { tostring(i), i .. 'x' } end\n"
        "return #t";
    size_t after[2];
    for (int i = 0; i < 2; i++) {
        CHECK(lvm_load(L, code, strlen(code), "=pool") == LUA_OK);
        CHECK(lua_pcall(L, 0, 1, 0) == LUA_OK);
        CHECK(lua_tointeger(L, -1) == 100);
        lua_settop(L, 0);
        lua_gc(L, LUA_GCCOLLECT, 0);
        after[i] = lvm_mem_total(vm);
    }
    CHECK(after[1] <= after[0] + 1024); /* the second run's garbage is all accounted for */
    CHECK(POOL_KEEPS ? lvm_pool_bytes(vm) > 0 : lvm_pool_bytes(vm) == 0);
    CHECK(lvm_pool_bytes(vm) <= (size_t)256 << 10);
    lvm_free(vm);
}

/* The state's collector is generational: incremental mode was slower on the wall
 * clock at 16 connections and no faster at 256. */
static void check_gc_mode(void)
{
    lvm *vm = runtime_vm();
    if (!vm)
        return;
    lua_State *L = lvm_state(vm);
    CHECK(lua_gc(L, LUA_GCGEN, 0, 0) == LUA_GCGEN); /* the mode it was in */
    lvm_free(vm);
}

/* With calls in flight the state keeps more of what the collector frees (the
 * garbage of all of them, reused by the next calls); when the last call ends it
 * hands back all but one call's worth (256 kB + 1 MB). */
static void check_pool_calls(void)
{
    lvm *vm = runtime_vm();
    if (!vm)
        return;
    lua_State *L = lvm_state(vm);
    static const char code[] = "local t = {}\n"
                               "for i = 1, 40000 do t[i] = { i } end\n"
                               "return #t";
    for (int i = 0; i < 16; i++)
        lvm_call_begin(vm);
    CHECK(lvm_load(L, code, strlen(code), "=pool") == LUA_OK);
    CHECK(lua_pcall(L, 0, 1, 0) == LUA_OK);
    CHECK(lua_tointeger(L, -1) == 40000);
    lua_settop(L, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    size_t in_flight = lvm_pool_bytes(vm);
    for (int i = 0; i < 16; i++)
        lvm_call_end(vm);
    size_t idle = lvm_pool_bytes(vm);
    CHECK(POOL_KEEPS ? in_flight > (size_t)2 << 20 : in_flight == 0);
    CHECK(idle <= ((size_t)256 << 10) + ((size_t)1 << 20));
    lvm_free(vm);
}

/* The fixture the cases share: the upstream server, the fetch client, the host and
 * its generation, the outcomes (set up by setup(), in order: a case may leave the
 * host or generation for the next). */
static struct evhttp *http;
static struct evhttp_bound_socket *sock;
static fetch_ctx *fetch;
static const char *ferr = NULL;
static char base_url[64];
static tools_upstream ups[4];
static tools_config cfg;
static tools_host *h;
static tools_gen *g;
static char *report = NULL;
static outcome o, o2;
static int port, n;
static call *c;

/* The upstream server, the fetch client, the configuration and the call's env. */
static int setup(void)
{
    /* Started with the run-time slice's signal blocked (an inherited mask): the
     * hostile tools must still be stopped. */
    {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGRTMIN);
        sigprocmask(SIG_BLOCK, &set, NULL);
    }
    base = event_base_new();
    http = evhttp_new(base);
    sock = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    if (!sock)
        return 2;
    {
        struct sockaddr_storage ss;
        ev_socklen_t len = sizeof ss;
        getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&ss, &len);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    evhttp_set_gencb(http, upstream_cb, NULL);
    fetch = fetch_new(base, &(fetch_config){.default_timeout_ms = 2000}, &ferr);
    if (!fetch)
        return 2;
    snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d/api", port);
    ups[0] = (tools_upstream){"up", base_url, 3000, 0, 0, NULL};
    ups[1] = (tools_upstream){"down", "http://127.0.0.1:1/api", 2000, 0, 0, NULL};
    /* the hostile fixtures declare it (declared upstreams must be configured) */
    ups[2] = (tools_upstream){"bkn_backend", "http://127.0.0.1:1/api", 2000, 0, 0, NULL};
    ups[3] = (tools_upstream){"up_open", base_url, 3000, 1, 1, NULL};

    memset(&cfg, 0, sizeof cfg);
    cfg.lua_dir = CL_SOURCE_DIR "/lua";
    cfg.mem_cap_bytes = 16 << 20;
    cfg.instr_budget = 20000000;
    cfg.upstreams = ups;
    cfg.n_upstreams = 4;
    cfg.fetch = fetch;
    cfg.base = base;

    memset(&who, 0, sizeof who);
    strcpy(who.account_id, "u1");
    strcpy(who.account_type, "user");
    strcpy(who.tenant_id, "t1");
    env.who = &who;
    env.request_id = "req_test0001";
    env.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    env.lang = LANG_EN_US;
    env.surface = "rest";

    return 0;
}

static void case_check_tools_on_both_dirs(void)
{
    /* --check-tools on both dirs */
    n = tools_check_dir(&cfg, GOOD, &report);
    if (n)
        fprintf(stderr, "good dir: %s\n", report);
    CHECK(n == 0);
    free(report);
    n = tools_check_dir(&cfg, BAD, &report);
    fprintf(stderr, "bad dir report:\n%s", report);
    CHECK(n >= 5);
    CHECK(contains(report, "syntax.lua:4:"));
    CHECK(contains(report, "runtime.lua:2:"));
    CHECK(contains(report, "misnamed.lua:2:"));
    CHECK(contains(report, "other_name"));
    CHECK(contains(report, "badschema.lua:4:"));
    CHECK(contains(report, "frobnicate"));
    CHECK(contains(report, "nohandle.lua:3:"));
    CHECK(contains(report, "handle"));
    free(report);

}

static void case_first_generation(void)
{
    /* first generation */
    h = tools_host_new(&cfg);
    CHECK(tools_host_acquire(h) == NULL);
    CHECK(tools_host_reload(h, GOOD, &report) == 0);
    CHECK_STR(report, "generation 1: +9 ~0 -0");
    free(report);
    g = tools_host_acquire(h);
    CHECK(g && tools_gen_id(g) == 1);
    CHECK(tools_gen_count(g) == 9);
    CHECK_STR(tools_gen_info(g, 0)->name, "fetch_json");
    CHECK_STR(tools_gen_info(g, 1)->name, "post_json");
    CHECK(tools_gen_info(g, 0)->surfaces == (SURFACE_MCP | SURFACE_REST));
    CHECK(tools_gen_info(g, 0)->toon == 1);
    CHECK(tools_gen_info(g, 0)->order == 10);
    CHECK(contains(tools_gen_info(g, 0)->list_json[LANG_EN_US], "\"title\":\"Test fetch_json\""));
    CHECK(contains(tools_gen_info(g, 0)->list_json[LANG_ZH_CN], "\"name\":\"fetch_json\""));
    CHECK(tools_gen_find_rest(g, "boom") != NULL);
    CHECK(tools_gen_find(g, "nope") == NULL);

}

static void case_result_passthrough_request_shaping_identity_headers(void)
{
    /* result passthrough, request shaping, identity headers */
    run(g, "fetch_json", "{\"kn_id\":\"kn_a\",\"q\":\"a b&c\",\"tags\":[\"x\",\"y\"]}", &o);
    CHECK(o.status == 200 && !o.is_error);
    CHECK_STR(o.body, BIG_BODY);
    CHECK_STR(seen.uri, "/api/kn/kn_a/items?exact=true&limit=5&q=a%20b%26c&tags=x&tags=y");
    CHECK_STR(seen.account, "u1");
    CHECK_STR(seen.tenant, "t1");
    CHECK(!seen.has_auth);
    CHECK_STR(seen.custom, "yes");
    CHECK_STR(seen.lang, "en-US");
    CHECK_STR(seen.reqid, "req_test0001");
    CHECK(strncmp(seen.traceparent, "00-0af7651916cd43dd8448eb211c80319c-", 36) == 0);
    CHECK(strcmp(seen.traceparent, env.traceparent) != 0);
    outcome_free(&o);

}

static void case_more_query_pairs_than_the_c(void)
{
    /* more query pairs than the C stack holds: the same sorted, encoded query */
    run(g, "fetch_json",
        "{\"kn_id\":\"kn_a\",\"tags\":[\"t01\",\"t02\",\"t03\",\"t04\",\"t05\",\"t06\","
        "\"t07\",\"t08\",\"t09\",\"t10\",\"t11\",\"t12\",\"t13\",\"t14\",\"t15\",\"t16\","
        "\"t17\",\"t/18\"]}",
        &o);
    CHECK(o.status == 200);
    CHECK_STR(seen.uri, "/api/kn/kn_a/items?exact=true&limit=5&tags=t01&tags=t02&tags=t03&tags=t04"
                        "&tags=t05&tags=t06&tags=t07&tags=t08&tags=t09&tags=t10&tags=t11&tags=t12"
                        "&tags=t13&tags=t14&tags=t15&tags=t16&tags=t17&tags=t%2F18");
    outcome_free(&o);

}

static void case_a_query_value_s_tostring_that(void)
{
    /* a query value's __tostring that removes the keys read so far and makes garbage:
     * the keys already read stay alive until the URL is written */
    run(g, "fetch_json", "{\"kn_id\":\"kn_a\",\"churn\":12}", &o);
    CHECK(o.status == 200);
    CHECK(contains(seen.uri, "zz=last"));
    outcome_free(&o);

}

static void case_kn_id_from_the_x_kn(void)
{
    /* kn_id from the X-Kn-ID header when the argument is absent */
    env.kn_id_header = "kn_h";
    run(g, "fetch_json", "{}", &o);
    CHECK(o.status == 200);
    CHECK(strncmp(seen.uri, "/api/kn/kn_h/items", 18) == 0);
    outcome_free(&o);
    env.kn_id_header = NULL;

}

static void case_argument_validation(void)
{
    /* argument validation */
    n = seen.hits;
    run(g, "fetch_json", "{}", &o);
    CHECK(o.status == 400 && o.is_error);
    CHECK_STR(o.code, "invalid_arguments");
    CHECK(contains(o.body, "\"code\":\"Public.BadRequest\""));
    CHECK(contains(o.body, "\"details\":[{\"path\":"));
    outcome_free(&o);
    run(g, "fetch_json", "{\"kn_id\":5}", &o);
    CHECK(o.status == 400);
    outcome_free(&o);
    CHECK(seen.hits == n); /* refused before any downstream call */

}

static void case_nil_err_with_status_and_raw(void)
{
    /* nil, err with status and raw: mapped into the envelope, the status kept, the
     * body (numbers exact) as details, the next step naming the id to check */
    run(g, "fetch_json", "{\"kn_id\":\"kn_404\"}", &o);
    CHECK(o.status == 404 && o.is_error);
    CHECK(contains(o.body, "\"code\":\"Public.NotFound\""));
    CHECK(contains(o.body, "\"details\":" NOT_FOUND_JSON ","));
    CHECK(contains(o.body, "kn_404"));
    CHECK(contains(o.body, "\"retryable\":false,\"required_action\":\"check_ids\""));
    CHECK(!contains(o.body, "\"link\""));
    outcome_free(&o);
    run(g, "fail_env", NULL, &o);
    CHECK(o.status == 404);
    CHECK(contains(o.body, "\"code\":\"Test.NotFound\""));
    CHECK(contains(o.body, "\"description\":\"no such thing\""));
    CHECK(contains(o.body, "\"solution\":\""));
    CHECK(!contains(o.body, "\"solution\":\"\""));
    outcome_free(&o);

}

static void case_json_body_and_a_transport_failure(void)
{
    /* json= body and a transport failure */
    run(g, "post_json", "{}", &o);
    CHECK(o.status == 200);
    CHECK(contains(o.body, "\"echoed\":{\"b\":2,\"a\":[],\"n\":9007199254740993}"));
    CHECK(contains(o.body, "\"ctype\":\"application/json\""));
}

static void case_res_headers_made_on_its_first(void)
{
    /* res.headers: made on its first read, listed by pairs, repeats joined */
    CHECK(contains(o.body, "\"dup\":\"a, b\""));
    CHECK(contains(o.body, "\"keys\":\"body,headers,json,status\""));
    CHECK(contains(o.body, "\"lazy\":true"));
    outcome_free(&o);
    run(g, "post_json", "{\"down\":true}", &o);
    CHECK(o.status == 502 && o.is_error);
    CHECK_STR(o.code, "upstream_unreachable");
    outcome_free(&o);

}

static void case_a_raising_tool_incident_id_no(void)
{
    /* a raising tool: incident id, no traceback or message in the body */
    run(g, "boom", NULL, &o);
    CHECK(o.status == 500 && o.is_error);
    CHECK_STR(o.code, "tool_raised");
    CHECK(o.incident && strncmp(o.incident, "inc_", 4) == 0 && strlen(o.incident) == 20);
    CHECK(contains(o.body, o.incident ? o.incident : "inc_"));
    CHECK(contains(o.body, "\"code\":\"Public.InternalServerError\""));
    CHECK(!contains(o.body, "secret"));
    CHECK(!contains(o.body, "traceback"));
    outcome_free(&o);

}

static void case_calls_that_finish_quickly_never_install(void)
{
    /* calls that finish quickly never install the count hook (lazy counting) */
    CHECK(lua_gethook(lvm_state(g->vm)) == NULL);

}

static void case_budgets_instructions_and_memory_also_when(void)
{
    /* budgets: instructions and memory, also when the tool tries to swallow them */
    run(g, "spin", NULL, &o);
    CHECK_STR(o.code, "instruction_budget_exceeded");
    CHECK(o.status == 500 && o.incident != NULL);
    outcome_free(&o);
}

static void case_a_counted_call_leaves_no_hook(void)
{
    /* a counted call leaves no hook on the state's main thread for the next call */
    CHECK(lua_gethook(lvm_state(g->vm)) == NULL);
    run(g, "spin", "{\"mode\":\"pcall\"}", &o);
    CHECK_STR(o.code, "instruction_budget_exceeded");
    outcome_free(&o);
    run(g, "hog", NULL, &o);
    CHECK_STR(o.code, "memory_limit_exceeded");
    outcome_free(&o);
    run(g, "hog", "{\"mode\":\"pcall\"}", &o);
    CHECK_STR(o.code, "memory_limit_exceeded");
    outcome_free(&o);
    run(g, "fetch_json", "{\"kn_id\":\"kn_after\"}", &o); /* the state still serves */
    CHECK(o.status == 200);
    CHECK_STR(o.body, BIG_BODY);
    outcome_free(&o);

}

static void case_sandbox_escapes(void)
{
    /* sandbox escapes */
    check_escape(g, "os_execute", "execute");
    check_escape(g, "io", "unknown global 'io'");
    check_escape(g, "require_io", "module 'io' not found");
    check_escape(g, "package", "unknown global 'package'");
    check_escape(g, "debug", "unknown global 'debug'");
    check_escape(g, "bytecode", "binary chunk");
    check_escape(g, "load_no_env", "explicit env");
    check_escape(g, "write_G", "read-only");
    check_escape(g, "write_global", "assignment to global 'leaked'");
    check_escape(g, "read_unknown", "unknown global 'undefined_thing'");
    check_escape(g, "string_mt", "boolean");
    check_escape(g, "string_upper", "read-only");
    check_escape(g, "setmetatable_lib", "read-only");
    check_escape(g, "rawset_lib", "read-only");
    check_escape(g, "gc_mt", "__gc");
}

static void case_the_trust_boundary_runtime_modules_private(void)
{
    /* the trust boundary: runtime modules private, public ones and ctx read-only */
    check_escape(g, "require_host", "module 'host' is private to the runtime");
    check_escape(g, "require_contract", "module 'contract' is private to the runtime");
    check_escape(g, "require_schema", "module 'schema' is private to the runtime");
    check_escape(g, "require_cltexts", "module 'cltexts' is private to the runtime");
    check_escape(g, "require_runtime", "module 'clruntime' is private to the runtime");
    check_escape(g, "lib_requires_host", "module 'host' is private to the runtime");
    check_escape(g, "write_module", "read-only table (field 'encode')");
    check_escape(g, "write_lib", "read-only table (field 'tool')");
    check_escape(g, "write_cljson_mt", "read-only table (field '__index')");
    check_escape(g, "rawset_cljson_mt", "attempt to modify a read-only table");
    check_escape(g, "write_facade", "read-only table (field 'envelope')");
    check_escape(g, "write_facade_nested", "read-only table");
    check_escape(g, "facade_private_field", "attempt to index a nil value");
    check_escape(g, "load_env_escape", "module 'host' is private to the runtime");
    check_escape(g, "poison_stub", "the forged list stayed out of the cache");
    check_escape(g, "write_ctx", "read-only table (field 'stash'): ctx and its tables");
    check_escape(g, "rawset_ctx", "attempt to modify a read-only table");
    check_escape(g, "write_ctx_config", "read-only table (field 'gates'): ctx and its tables");
    check_escape(g, "write_ctx_principal",
                 "read-only table (field 'account_id'): ctx and its tables");
    check_escape(g, "setmetatable_ctx", "read-only table");
}

static void case_ctx_principal_is_the_call_s(void)
{
    /* ctx.principal is the call's own, caller after caller (its table is shared
     * only while the caller repeats) */
    check_escape(g, "who", "who u1/user");
    {
        principal other;
        memset(&other, 0, sizeof other);
        strcpy(other.account_id, "u2");
        strcpy(other.account_type, "app");
        env.who = &other;
        check_escape(g, "who", "who u2/app");
        env.who = NULL;
        check_escape(g, "who", "who -/-");
        env.who = &who;
        check_escape(g, "who", "who u1/user");
        check_escape(g, "who", "who u1/user");
    }
    check_escape(g, "auth_header", "cannot be given by a tool");
    check_escape(g, "unknown_upstream", "unknown upstream 'nope'");
    check_escape(g, "dotdot", "'..'");
}

static void case_caller_token_and_managed_proxy_per(void)
{
    /* caller_token and managed_proxy: per upstream (upstream.<name>.caller_token,
     * .managed_proxy), refused on an upstream that does not allow them */
    check_escape(g, "caller_token_closed", "caller_token is not allowed for upstream 'up'");
    check_escape(g, "managed_proxy_closed", "managed_proxy is not allowed for upstream 'up'");
    check_escape(g, "caller_token_open", "caller_token_missing");
    check_escape(g, "managed_proxy_open", "status 200");
    CHECK_STR(seen.account, "kn-proxy-kn_a");

    check_co_reuse(g);
}

static void case_ctx_lazy_fields_one_list(void)
{
    /* every field of the C side's one list (LVM_CTX_FIELDS) and the runtime's own
     * first-read fields are listed by pairs and made (the request and config are
     * given, so none is nil) */
    json_value *config = json_new_object();
    json_value *req = json_new_object();
    json_set(req, "x_host", json_new_str("h1:80", 5));
    env.config = config;
    env.request = req;
#define CHECK_LISTED(name) check_escape(g, "ctx_lazy", "," #name "=");
    LVM_CTX_FIELDS(CHECK_LISTED)
#undef CHECK_LISTED
    {
        outcome o;
        run(g, "escape", "{\"what\":\"ctx_lazy\"}", &o);
        CHECK(o.body && !strstr(o.body, "=nil"));
        outcome_free(&o);
    }
    check_escape(g, "ctx_lazy", ",invoke=function,");
    check_escape(g, "ctx_lazy", ",list_tools=function,");
    check_escape(g, "ctx_lazy", ",authz=table,");
    check_escape(g, "ctx_lazy", ",log=function,");
    check_escape(g, "ctx_lazy", ",request=table,");
    check_escape(g, "ctx_lazy", ",config=table,");
    env.config = NULL;
    env.request = NULL;
    json_free(config);
    json_free(req);
}

static void case_ctx_log_and_ctx_now_ms(void)
{
    /* ctx.log and ctx.now_ms, made on first read, are listed and work */
    check_escape(g, "ctx_fields", ",log,");
    check_escape(g, "ctx_fields", ",now_ms,");
    check_escape(g, "ctx_fields", " integer true");
    check_escape(g, "ctx_values", ",deadline_ms,");
    check_escape(g, "ctx_values", ",generation,");
    check_escape(g, "ctx_values", ",request_id,");
    check_escape(g, "ctx_values", ",principal,");
    check_escape(g, "ctx_values", ",surface ");
    check_escape(g, "ctx_values", " req_test0001 integer true integer u1:user true rest nil");
    {
        json_value *config = json_new_object();
        json_set(config, "x", json_new_int(7));
        env.config = config;
        check_escape(g, "ctx_values", ",config,");
        check_escape(g, "ctx_values", " u1:user true rest 7");
        env.config = NULL;
        /* (the state keeps the table made of it, under its address, for later calls) */
        json_free(config);
    }
    check_escape(g, "ctx_request", "no request");
    {
        json_value *req = json_new_object();
        json_set(req, "x_host", json_new_str("h1:80", 5));
        json_set(req, "forwarded_proto", json_new_str("https", 5));
        env.request = req;
        check_escape(g, "ctx_request", "forwarded_proto=https,x_host=h1:80;");
        check_escape(g, "ctx_request", "forwarded_proto=https,x_host=h1:80;");
        json_set(req, "x_host", json_new_str("h2:80", 5));
        check_escape(g, "ctx_request", "forwarded_proto=https,x_host=h2:80;");
        json_set(req, "port", json_new_int(8080)); /* not all strings: a table of its own */
        check_escape(g, "ctx_request", "forwarded_proto=https,port=8080,x_host=h2:80;");
        env.request = NULL;
        json_free(req);
    }

}

static void case_ctx_after_the_call_ended(void)
{
    /* ctx after the call ended */
    run(g, "keep_ctx", "{\"mode\":\"save\"}", &o);
    CHECK(o.status == 200);
    outcome_free(&o);
    run(g, "keep_ctx", "{\"mode\":\"use\"}", &o);
    CHECK(contains(o.body, "ctx used after the call ended"));
    CHECK(contains(o.body, "\"request_id\":\"req_test0001\""));
    CHECK(contains(o.body, "\"account_id\":\"u1\""));
    outcome_free(&o);

}

static void case_cancel_mid_fetch_done_never_runs(void)
{
    /* cancel mid-fetch: done never runs, the fetch is gone, the server keeps serving */
    c = start(g, "slow", NULL, &o);
    run_for(60);
    CHECK(call_inflight() == 1);
    CHECK(fetch_inflight(fetch) == 1);
    call_cancel(c);
    CHECK(call_inflight() == 0);
    CHECK(fetch_inflight(fetch) == 0);
    run_for(400);
    CHECK(o.done == 0);
    run(g, "fetch_json", "{\"kn_id\":\"kn_b\"}", &o);
    CHECK(o.status == 200);
    outcome_free(&o);

}

static void case_a_bad_reload_changes_nothing(void)
{
    /* a bad reload changes nothing */
    CHECK(tools_host_reload(h, BAD, &report) == -1);
    CHECK(contains(report, "syntax.lua:4:") && contains(report, "nohandle.lua:3:"));
    free(report);
    tools_gen_release(g);
    g = tools_host_acquire(h);
    CHECK(tools_gen_id(g) == 1);
    CHECK(tools_gen_live() == 1);

}

static void case_generation_refcount_a_call_started_on(void)
{
    /* generation refcount: a call started on 1 finishes on 1 after the swap to 2 */
    start(g, "slow", NULL, &o);
    run_for(30);
    CHECK(tools_host_reload(h, GOOD, &report) == 0);
    CHECK_STR(report, "generation 2: +0 ~0 -0");
    free(report);
    CHECK(tools_gen_live() == 2);
    tools_gen_release(g); /* only the call holds generation 1 now */
    CHECK(tools_gen_live() == 2);
    loop_until(&o.done, 5000);
    CHECK(o.done == 1);
    CHECK(contains(o.body, "\"generation\":1"));
    CHECK(tools_gen_live() == 1); /* closed with its last call */
    outcome_free(&o);
    g = tools_host_acquire(h);
    CHECK(tools_gen_id(g) == 2);
    run(g, "slow", NULL, &o2);
    CHECK(contains(o2.body, "\"generation\":2"));
    outcome_free(&o2);
    tools_gen_release(g);

    CHECK(call_inflight() == 0);
    tools_host_free(h);
    CHECK(tools_gen_live() == 0);

}

static void case_the_base_url_is_parsed_once(void)
{
    /* The base URL is parsed once per configuration: a host made with a changed
     * URL sends to the new one. */
    {
        char moved[64];
        snprintf(moved, sizeof moved, "http://127.0.0.1:%d/moved/api", port);
        ups[0].base_url = moved;
        h = tools_host_new(&cfg);
        ups[0].base_url = base_url;
        CHECK(tools_host_reload(h, GOOD, &report) == 0);
        free(report);
        g = tools_host_acquire(h);
        run(g, "fetch_json", "{\"kn_id\":\"kn_m\",\"q\":\"x\"}", &o);
        CHECK(o.status == 200 && !o.is_error);
        CHECK_STR(seen.uri, "/moved/api/kn/kn_m/items?exact=true&limit=5&q=x");
        outcome_free(&o);
        tools_gen_release(g);
        tools_host_free(h);
    }

}

static const struct {
    const char *name;
    void (*run)(void);
} CASES[] = {
    {"check_tools_on_both_dirs", case_check_tools_on_both_dirs},
    {"first_generation", case_first_generation},
    {"result_passthrough_request_shaping_identity_headers", case_result_passthrough_request_shaping_identity_headers},
    {"more_query_pairs_than_the_c", case_more_query_pairs_than_the_c},
    {"a_query_value_s_tostring_that", case_a_query_value_s_tostring_that},
    {"kn_id_from_the_x_kn", case_kn_id_from_the_x_kn},
    {"argument_validation", case_argument_validation},
    {"nil_err_with_status_and_raw", case_nil_err_with_status_and_raw},
    {"json_body_and_a_transport_failure", case_json_body_and_a_transport_failure},
    {"res_headers_made_on_its_first", case_res_headers_made_on_its_first},
    {"a_raising_tool_incident_id_no", case_a_raising_tool_incident_id_no},
    {"calls_that_finish_quickly_never_install", case_calls_that_finish_quickly_never_install},
    {"budgets_instructions_and_memory_also_when", case_budgets_instructions_and_memory_also_when},
    {"a_counted_call_leaves_no_hook", case_a_counted_call_leaves_no_hook},
    {"sandbox_escapes", case_sandbox_escapes},
    {"ctx_lazy_fields_one_list", case_ctx_lazy_fields_one_list},
    {"the_trust_boundary_runtime_modules_private", case_the_trust_boundary_runtime_modules_private},
    {"ctx_principal_is_the_call_s", case_ctx_principal_is_the_call_s},
    {"caller_token_and_managed_proxy_per", case_caller_token_and_managed_proxy_per},
    {"ctx_log_and_ctx_now_ms", case_ctx_log_and_ctx_now_ms},
    {"ctx_after_the_call_ended", case_ctx_after_the_call_ended},
    {"cancel_mid_fetch_done_never_runs", case_cancel_mid_fetch_done_never_runs},
    {"a_bad_reload_changes_nothing", case_a_bad_reload_changes_nothing},
    {"generation_refcount_a_call_started_on", case_generation_refcount_a_call_started_on},
    {"the_base_url_is_parsed_once", case_the_base_url_is_parsed_once},
};

int main(void)
{
    if (setup() != 0)
        return 2;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        check_case = CASES[i].name;
        CASES[i].run();
    }
    check_case = NULL;
    check_hostile(&cfg);
    check_pool();
    check_pool_calls();
    check_gc_mode();
    fetch_free(fetch);
    evhttp_free(http);
    event_base_free(base);
    return CHECK_DONE();
}
