/* context-loader: argv, configuration, event base, signals; the first tool load
 * must succeed. */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static const char *UPSTREAM_NAMES[] = {"ontology_query", "bkn_backend", "vega",
                                       "operator_integration", "mf_model_api"};

static void usage(FILE *f)
{
    fputs("usage: context-loader [--config FILE]         run the service\n"
          "       context-loader --check-tools DIR [--config FILE]\n"
          "                                              validate a tools directory offline\n"
          "       context-loader --print-config-keys     list every config key and its env name\n"
          "       context-loader --version\n",
          f);
}

/* A text file without its trailing newlines (file formatting, not text), or NULL. */
static char *read_text(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    if (read_file_max(path, 1 << 20, &text, &len) != 0)
        return NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    return text;
}

static void fill_tools_config(app *a, tools_config *tc)
{
    memset(tc, 0, sizeof *tc);
    tc->lua_dir = conf_str(a->cfg, "lua_dir");
    tc->mem_cap_bytes = (size_t)conf_int(a->cfg, "lua.memory_cap_mb") * 1024 * 1024;
    tc->instr_budget = conf_int(a->cfg, "lua.instruction_budget");
    tc->upstreams = a->upstreams;
    tc->n_upstreams = a->n_upstreams;
    tc->max_response_bytes = (size_t)conf_int(a->cfg, "limits.max_response_bytes");
    tc->fetch = a->fetch;
    tc->base = a->base;
}

static void fill_upstreams(app *a)
{
    static char keys[5][2][96];
    for (size_t i = 0; i < sizeof UPSTREAM_NAMES / sizeof UPSTREAM_NAMES[0]; i++) {
        snprintf(keys[i][0], sizeof keys[i][0], "upstream.%s.url", UPSTREAM_NAMES[i]);
        snprintf(keys[i][1], sizeof keys[i][1], "upstream.%s.timeout_ms", UPSTREAM_NAMES[i]);
        tools_upstream *u = &a->upstreams[a->n_upstreams++];
        u->name = UPSTREAM_NAMES[i];
        u->base_url = conf_str(a->cfg, keys[i][0]);
        u->timeout_ms = conf_int(a->cfg, keys[i][1]);
    }
}

static void on_term(evutil_socket_t sig, short ev, void *arg);

static void drain_check(evutil_socket_t fd, short ev, void *arg)
{
    app *a = arg;
    (void)fd;
    (void)ev;
    static int64_t deadline = 0;
    if (!deadline)
        deadline = now_mono_ms() + conf_int(a->cfg, "shutdown_grace_s") * 1000;
    if (a->inflight == 0 || now_mono_ms() >= deadline) {
        fprintf(stderr, "{\"ts\":%lld,\"level\":\"info\",\"msg\":\"shutdown\",\"abandoned\":%zu}\n",
                (long long)now_wall_ms(), a->inflight);
        event_base_loopexit(a->base, NULL);
        return;
    }
    struct timeval tv = {0, 50 * 1000};
    event_base_once(a->base, -1, EV_TIMEOUT, drain_check, a, &tv);
}

static void on_term(evutil_socket_t sig, short ev, void *arg)
{
    app *a = arg;
    (void)ev;
    if (a->draining) {
        event_base_loopexit(a->base, NULL);
        return;
    }
    a->draining = 1;
    fprintf(
        stderr,
        "{\"ts\":%lld,\"level\":\"info\",\"msg\":\"draining\",\"signal\":%d,\"inflight\":%zu}\n",
        (long long)now_wall_ms(), (int)sig, a->inflight);
    httpd_stop_accepting(a);
    mcp_close_streams(a);
    drain_check(-1, 0, a);
}

/* SIGHUP arrives through evsignal (never in signal context); the reload itself is
 * scheduled on the loop, coalesced with any pending one, and logged by tools.c. */
static void on_hup(evutil_socket_t sig, short ev, void *arg)
{
    app *a = arg;
    (void)sig;
    (void)ev;
    tools_host_reload_async(a->tools, "SIGHUP");
}

static void on_swap(tools_gen *cur, void *arg)
{
    mcp_tools_changed(arg, cur);
}

static void on_heartbeat(evutil_socket_t fd, short ev, void *arg)
{
    (void)fd;
    (void)ev;
    mcp_heartbeat(arg);
}

static int check_tools(const char *dir, conf *cfg)
{
    app a;
    memset(&a, 0, sizeof a);
    a.cfg = cfg;
    fill_upstreams(&a);
    tools_config tc;
    fill_tools_config(&a, &tc);
    char *report = NULL;
    int errors = tools_check_dir(&tc, dir, &report);
    if (report && *report)
        fprintf(errors ? stderr : stdout, "%s\n", report);
    if (errors)
        fprintf(stderr, "context-loader: %s: %d error(s)\n", dir, errors);
    else
        printf("context-loader: %s: tools are valid\n", dir);
    free(report);
    return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *config_path = NULL, *check_dir = NULL;
    int rc = 1;
    app a;
    memset(&a, 0, sizeof a);
    struct event *sigterm = NULL, *sigint = NULL, *sighup = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config_path = argv[++i];
        } else if (!strcmp(argv[i], "--check-tools") && i + 1 < argc) {
            check_dir = argv[++i];
        } else if (!strcmp(argv[i], "--version")) {
            puts("context-loader " CL_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--print-config-keys")) {
            conf_print_reference();
            return 0;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "context-loader: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    char err[512];
    a.cfg = conf_load(config_path, err, sizeof err);
    if (!a.cfg) {
        fprintf(stderr, "context-loader: %s\n", err);
        return 2;
    }
    if (check_dir) {
        rc = check_tools(check_dir, a.cfg);
        conf_free(a.cfg);
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    a.started_ms = now_wall_ms();
    a.default_lang = strcmp(conf_str(a.cfg, "language"), "en-US") ? LANG_ZH_CN : LANG_EN_US;
    snprintf(a.prefix, sizeof a.prefix, "%s", conf_str(a.cfg, "public_prefix"));
    fill_upstreams(&a);
    a.base = event_base_new();
    if (!a.base) {
        fprintf(stderr, "context-loader: event_base_new failed\n");
        goto done;
    }
    fetch_config fc = {0, (size_t)conf_int(a.cfg, "limits.max_response_bytes"), 0};
    const char *ferr = NULL;
    a.fetch = fetch_new(a.base, &fc, &ferr);
    if (!a.fetch) {
        fprintf(stderr, "context-loader: %s\n", ferr ? ferr : "fetch init failed");
        goto done;
    }
    auth_config ac;
    memset(&ac, 0, sizeof ac);
    ac.oauth_introspect_url = conf_str(a.cfg, "oauth.introspect_url");
    ac.oauth_client_id = conf_str(a.cfg, "oauth.client_id");
    ac.oauth_client_secret = conf_str(a.cfg, "oauth.client_secret");
    ac.appkey_introspect_url = conf_str(a.cfg, "bkn_safe.introspect_url");
    ac.timeout_ms = conf_int(a.cfg, "auth.timeout_ms");
    ac.cache_ttl_s = (int)conf_int(a.cfg, "auth.cache_ttl_s");
    ac.negative_ttl_s = (int)conf_int(a.cfg, "auth.negative_ttl_s");
    ac.max_entries = (size_t)conf_int(a.cfg, "auth.cache_entries");
    ac.default_tenant_id = conf_str(a.cfg, "default_tenant_id");
    ac.default_business_domain = conf_str(a.cfg, "default_business_domain");
    a.auth = auth_new(a.base, a.fetch, &ac);
    trace_config tcfg;
    memset(&tcfg, 0, sizeof tcfg);
    tcfg.base_url = conf_str(a.cfg, "trace_core.url");
    tcfg.timeout_ms = conf_int(a.cfg, "trace_core.timeout_ms");
    tcfg.policy_ttl_s = (int)conf_int(a.cfg, "trace_core.capture_policy_ttl_s");
    tcfg.probe_tries = (int)conf_int(a.cfg, "trace_core.probe_tries");
    tcfg.probe_budget_ms = conf_int(a.cfg, "trace_core.probe_budget_ms");
    tcfg.verdict_ttl_s = (int)conf_int(a.cfg, "trace_core.probe_verdict_ttl_s");
    tcfg.default_tenant_id = conf_str(a.cfg, "default_tenant_id");
    tcfg.default_business_domain = conf_str(a.cfg, "default_business_domain");
    a.trace = trace_new(a.base, a.fetch, &tcfg);
    const char *ss = conf_str(a.cfg, "state_store");
    if (!strcmp(ss, "memory")) {
        a.store = store_memory_new(a.base, (size_t)conf_int(a.cfg, "idempotency.max_records"));
    } else if (!strncmp(ss, "redis://", 8)) {
        /* Several instances share idempotency records and ended sessions (SPEC §19). */
        store_redis_config rc;
        memset(&rc, 0, sizeof rc);
        rc.url = ss;
        rc.connect_timeout_ms = conf_int(a.cfg, "state_store.connect_timeout_ms");
        rc.command_timeout_ms = conf_int(a.cfg, "state_store.command_timeout_ms");
        rc.reconnect_max_ms = conf_int(a.cfg, "state_store.reconnect_max_ms");
        rc.key_prefix = conf_str(a.cfg, "state_store.key_prefix");
        a.store = store_redis_new(a.base, &rc, err, sizeof err);
        if (!a.store) {
            fprintf(stderr, "context-loader: config key state_store: %s\n", err);
            goto done;
        }
        if (!*conf_str(a.cfg, "session_secret"))
            fprintf(stderr,
                    "{\"ts\":%lld,\"level\":\"warn\",\"msg\":\"state_store is shared but "
                    "session_secret is empty: session ids work only on the instance "
                    "that minted them\"}\n",
                    (long long)now_wall_ms());
    } else {
        fprintf(stderr, "context-loader: config key state_store: expected memory or "
                        "redis://[[user]:password@]host[:port][/db]\n");
        goto done;
    }
    idem_config icfg;
    memset(&icfg, 0, sizeof icfg);
    icfg.ttl_ms = conf_int(a.cfg, "idempotency_ttl_s") * 1000;
    icfg.wait_ms = conf_int(a.cfg, "idempotency.wait_ms");
    a.idem = idem_new(a.base, a.store, &icfg);
    a.sessions = session_new(conf_str(a.cfg, "session_secret"),
                             conf_int(a.cfg, "idempotency_ttl_s"), a.store);

    for (int l = 0; l < LANG_COUNT; l++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/locales/instructions.%s.txt", conf_str(a.cfg, "lua_dir"),
                 lang_tag((lang_id)l));
        a.instructions[l] = read_text(path);
    }
    /* ctx.config: the deployment settings tools may read. */
    a.ctx_config = json_new_object();
    json_value *pr = json_new_object();
    const char *tpl = conf_str(a.cfg, "permission_request.path_template");
    json_set(pr, "path_template", json_new_str(tpl, strlen(tpl)));
    json_set(pr, "disabled", json_new_bool(conf_bool(a.cfg, "permission_request.disabled")));
    json_set(a.ctx_config, "permission_request", pr);
    json_value *gates = json_new_object();
    json_set(gates, "EXECUTE_SKILL_ENABLED",
             json_new_bool(conf_bool(a.cfg, "execute_skill_enabled")));
    json_set(a.ctx_config, "gates", gates);
    const char *lang = conf_str(a.cfg, "language");
    json_set(a.ctx_config, "language", json_new_str(lang, strlen(lang)));
    tools_config tc;
    fill_tools_config(&a, &tc);
    a.tools = tools_host_new(&tc);
    tools_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.dir = conf_str(a.cfg, "tools_dir");
    ops.watch = conf_bool(a.cfg, "tools.watch");
    ops.debounce_ms = conf_int(a.cfg, "tools.watch_debounce_ms");
    ops.max_live = (size_t)conf_int(a.cfg, "tools.max_live_generations");
    ops.on_swap = on_swap;
    ops.arg = &a;
    if (ops.max_live < 2) {
        fprintf(stderr, "context-loader: config key tools.max_live_generations: must be >= 2\n");
        goto done;
    }
    if (tools_host_set_ops(a.tools, &ops, err, sizeof err) < 0) {
        fprintf(stderr, "context-loader: config key tools.watch: %s\n", err);
        goto done;
    }
    char *report = NULL;
    if (tools_host_reload(a.tools, conf_str(a.cfg, "tools_dir"), &report) < 0) {
        fprintf(stderr, "context-loader: cannot load tools from %s:\n%s\n",
                conf_str(a.cfg, "tools_dir"), report ? report : "");
        free(report);
        goto done;
    }
    fprintf(stderr, "{\"ts\":%lld,\"level\":\"info\",\"msg\":\"tools loaded\",\"report\":\"%s\"}\n",
            (long long)now_wall_ms(), report ? report : "");
    free(report);
    if (httpd_start(&a, err, sizeof err) < 0) {
        fprintf(stderr, "context-loader: %s\n", err);
        goto done;
    }
    sigterm = evsignal_new(a.base, SIGTERM, on_term, &a);
    sigint = evsignal_new(a.base, SIGINT, on_term, &a);
    sighup = evsignal_new(a.base, SIGHUP, on_hup, &a);
    evsignal_add(sigterm, NULL);
    evsignal_add(sigint, NULL);
    evsignal_add(sighup, NULL);
    a.heartbeat = event_new(a.base, -1, EV_PERSIST, on_heartbeat, &a);
    struct timeval hb = {15, 0};
    event_add(a.heartbeat, &hb);
    event_base_dispatch(a.base);
    rc = 0;
done:
    if (a.heartbeat)
        event_free(a.heartbeat);
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    if (sighup)
        event_free(sighup);
    mcp_close_streams(&a);
    httpd_free(&a);
    if (a.idem)
        idem_free(a.idem);
    if (a.store)
        store_free(a.store);
    if (a.trace)
        trace_free(a.trace);
    if (a.auth)
        auth_free(a.auth);
    if (a.fetch)
        fetch_free(a.fetch);
    if (a.tools)
        tools_host_free(a.tools);
    if (a.sessions)
        session_free(a.sessions);
    for (int l = 0; l < LANG_COUNT; l++)
        free(a.instructions[l]);
    json_free(a.ctx_config);
    if (a.base)
        event_base_free(a.base);
    conf_free(a.cfg);
    return rc;
}
