/* context-loader: argv, configuration, event base, signals; the first tool load
 * must succeed. With workers > 1 a master process (master.c) binds the public socket
 * and supervises N forked workers, each of which runs what a single process runs
 * (docs/operations.md, "Workers"). */
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accept.h"
#include "flow.h"
#include "hostguard.h"
#include "httpd.h"
#include "log.h"
#include "master.h"
#include "proxytrust.h"
#include "reload.h"
#include "sdnotify.h"
#include "server.h"
#include "surfaces.h"

static int64_t g_first_term_ms; /* worker: when the first SIGTERM/SIGINT arrived */
static int g_is_worker;
static const char *g_config_path; /* --config, or NULL (defaults and environment) */

static void usage(FILE *f)
{
    fputs("usage: context-loader [--config FILE]         run the service\n"
          "       context-loader --check-config [--config FILE]\n"
          "                                              check the configuration and the tools it\n"
          "                                              names, then exit (like nginx -t)\n"
          "       context-loader --check-tools [DIR] [--config FILE]\n"
          "                                              validate a tools directory offline\n"
          "                                              (default: the configured tools_dir)\n"
          "       context-loader --print-config [--config FILE]\n"
          "                                              the effective configuration: file and\n"
          "                                              environment, secrets masked\n"
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
    tc->lua_dir = a->cfg->lua_dir;
    tc->mem_cap_bytes = (size_t)a->cfg->lua_memory_cap_mb * 1024 * 1024;
    tc->instr_budget = a->cfg->lua_instruction_budget;
    tc->max_run_ms = a->cfg->lua_max_run_ms;
    tc->max_output_bytes = (size_t)a->cfg->lua_max_output_bytes;
    tc->upstreams = a->upstreams;
    tc->n_upstreams = a->n_upstreams;
    tc->max_response_bytes = (size_t)a->cfg->limits_max_response_bytes;
    tc->fetch = a->fetch;
    tc->base = a->base;
    tc->settings = a->cfg;
}

static void fill_upstreams(app *a)
{
    const settings *s = a->cfg;
#define UPSTREAM(n)                                                                                \
    {                                                                                              \
#n, s->upstream_##n##_url, s->upstream_##n##_timeout_ms, s->upstream_##n##_caller_token,   \
            s->upstream_##n##_managed_proxy, NULL                                                  \
    }
    const tools_upstream ups[] = {
        UPSTREAM(ontology_query),       UPSTREAM(bkn_backend),  UPSTREAM(vega),
        UPSTREAM(operator_integration), UPSTREAM(mf_model_api), UPSTREAM(bkn_safe),
    };
#undef UPSTREAM
    for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++)
        a->upstreams[a->n_upstreams++] = ups[i];
}

static void on_term(evutil_socket_t sig, short ev, void *arg);

static void drain_check(evutil_socket_t fd, short ev, void *arg)
{
    app *a = arg;
    (void)fd;
    (void)ev;
    static int64_t deadline = 0;
    if (!deadline)
        deadline = now_mono_ms() + a->cfg->shutdown_grace_s * 1000;
    /* requests, and calls that run on without their client (flow.h) */
    if ((a->inflight == 0 && flow_detached() == 0) || now_mono_ms() >= deadline) {
        log_line *l = log_begin(LOG_INFO, "shutdown");
        log_int(l, "abandoned", (long long)(a->inflight + flow_detached()));
        log_end(l);
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
        /* A worker may get the same stop twice at once (the master forwards it and a
         * terminal or service manager signals the whole group): only a later repeat
         * means "stop now". */
        if (g_is_worker && now_mono_ms() - g_first_term_ms < 1000)
            return;
        event_base_loopexit(a->base, NULL);
        return;
    }
    a->draining = 1;
    g_first_term_ms = now_mono_ms();
    if (!g_is_worker)
        sd_notify_state("STOPPING=1");
    log_line *l = log_begin(LOG_INFO, "draining");
    log_int(l, "signal", (int)sig);
    log_int(l, "inflight", (long long)a->inflight);
    log_end(l);
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

static int check_tools(const char *dir, settings *cfg)
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

/* workers: "auto" = online CPUs; bounded to 1..MASTER_MAX_WORKERS (conf.c checked the form). */
static int conf_workers(const settings *cfg)
{
    long n = cfg->workers ? cfg->workers : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MASTER_MAX_WORKERS ? MASTER_MAX_WORKERS : (int)n;
}

#define WORKERS_NEED_REDIS                                                                         \
    "config key workers: workers > 1 needs a shared state_store (redis://...): idempotency "       \
    "records and ended sessions must be visible to every worker"

/* What no single key can check: the shared state several workers need, and a token
 * for an admin listener off loopback. */
static int check_process_model(const settings *cfg, char *err, size_t errlen)
{
    if (conf_workers(cfg) > 1 && strncmp(cfg->state_store, "redis://", 8)) {
        snprintf(err, errlen, "%s", WORKERS_NEED_REDIS);
        return -1;
    }
    admin_token t; /* an admin listener off loopback needs a token */
    return admin_token_load(&t, cfg->admin_listen, cfg->admin_token_file, err, errlen);
}

/* One line that says what started: version, config, tools, language, store, workers,
 * upstreams, listeners. */
static void log_started(app *a, int workers)
{
    char store[256], ups[256] = "";
    size_t n = 0;
    url_redact(a->cfg->state_store, store, sizeof store);
    for (size_t i = 0; i < a->n_upstreams; i++)
        if (a->upstreams[i].base_url && *a->upstreams[i].base_url && n + 1 < sizeof ups)
            n += (size_t)snprintf(ups + n, sizeof ups - n, "%s%s", n ? "," : "",
                                  a->upstreams[i].name);
    tools_gen *g = tools_host_acquire(a->tools);
    log_line *l = log_begin(LOG_INFO, "started");
    log_str(l, "version", CL_VERSION);
    log_str(l, "config", g_config_path ? g_config_path : "(defaults and environment)");
    log_str(l, "tools_dir", a->cfg->tools_dir);
    log_int(l, "tools", g ? (long long)tools_gen_count(g) : 0);
    log_str(l, "language", a->cfg->language);
    log_str(l, "state_store", store);
    log_int(l, "workers", workers);
    log_str(l, "upstreams", ups);
    log_str(l, "listen", a->cfg->listen);
    if (*a->cfg->admin_listen)
        log_str(l, "admin_listen", a->cfg->admin_listen);
    log_end(l);
    if (g)
        tools_gen_release(g);
}

/* epoll with libevent's change list: the interest changes a request makes on one
 * socket within a loop iteration (curl switching a connection between writing and
 * reading, a connection whose reply would block adding its write event) become one epoll_ctl at
 * the next dispatch instead of one each (measured: 6 epoll_ctl per proxied request
 * without it). We never dup() the sockets we watch, the case the flag warns about. */
static struct event_base *new_event_base(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base = NULL;
    if (cfg) {
        event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        base = event_base_new_with_config(cfg);
        event_config_free(cfg);
    }
    if (!base)
        base = event_base_new();
    if (base && event_base_priority_init(base, CL_EV_PRIORITIES) < 0) {
        event_base_free(base);
        base = NULL;
    }
    return base;
}
/* The introspection client and the Trace Core client, from the configuration. */
static void open_auth_trace(app *a)
{
    auth_config ac;
    memset(&ac, 0, sizeof ac);
    ac.oauth_introspect_url = a->cfg->oauth_introspect_url;
    ac.oauth_client_id = a->cfg->oauth_client_id;
    ac.oauth_client_secret = a->cfg->oauth_client_secret;
    ac.appkey_introspect_url = a->cfg->bkn_safe_introspect_url;
    ac.timeout_ms = a->cfg->auth_timeout_ms;
    ac.cache_ttl_s = (int)a->cfg->auth_cache_ttl_s;
    ac.negative_ttl_s = (int)a->cfg->auth_negative_ttl_s;
    ac.max_entries = (size_t)a->cfg->auth_cache_entries;
    ac.default_tenant_id = a->cfg->default_tenant_id;
    ac.default_business_domain = a->cfg->default_business_domain;
    a->auth = auth_new(a->base, a->fetch, &ac);
    trace_config tcfg;
    memset(&tcfg, 0, sizeof tcfg);
    tcfg.base_url = a->cfg->trace_core_url;
    tcfg.timeout_ms = a->cfg->trace_core_timeout_ms;
    tcfg.policy_ttl_s = (int)a->cfg->trace_core_capture_policy_ttl_s;
    tcfg.probe_tries = (int)a->cfg->trace_core_probe_tries;
    tcfg.probe_budget_ms = a->cfg->trace_core_probe_budget_ms;
    tcfg.verdict_ttl_s = (int)a->cfg->trace_core_probe_verdict_ttl_s;
    tcfg.default_tenant_id = a->cfg->default_tenant_id;
    tcfg.default_business_domain = a->cfg->default_business_domain;
    tcfg.lease_ttl_s = (int)a->cfg->trace_core_lease_cache_ttl_s;
    tcfg.pipeline = a->cfg->trace_core_pipeline != 0;
    a->trace = trace_new(a->base, a->fetch, &tcfg);
}

/* The state store the configuration names (memory or redis://...): 0, or -1 logged. */
static int open_store(app *a, const worker_opts *w)
{
    char err[512];
    const char *ss = a->cfg->state_store;
    if (!strcmp(ss, "memory")) {
        a->store = store_memory_new(a->base, (size_t)a->cfg->idempotency_max_records);
    } else if (!strncmp(ss, "redis://", 8)) {
        /* Several instances share idempotency records and ended sessions. */
        store_redis_config rc;
        memset(&rc, 0, sizeof rc);
        rc.url = ss;
        rc.connect_timeout_ms = a->cfg->state_store_connect_timeout_ms;
        rc.command_timeout_ms = a->cfg->state_store_command_timeout_ms;
        rc.reconnect_max_ms = a->cfg->state_store_reconnect_max_ms;
        rc.key_prefix = a->cfg->state_store_key_prefix;
        a->store = store_redis_new(a->base, &rc, err, sizeof err);
        if (!a->store) {
            log_fatal("config key state_store: %s", err);
            return -1;
        }
        if (!w && !*a->cfg->session_secret)
            log_end(log_begin(LOG_WARN, MASTER_SHARED_NO_SECRET));
    } else {
        log_fatal("config key state_store: expected memory or "
                  "redis://[[user]:password@]host[:port][/db]");
        return -1;
    }
    return 0;
}

/* The initialize instructions of each language and ctx.config (the deployment
 * settings tools may read). */
static void read_texts_and_config(app *a)
{
    for (int l = 0; l < LANG_COUNT; l++) {
        char path[1024];
        /* the initialize instructions describe the tool set: they come with it */
        snprintf(path, sizeof path, "%s/_locales/instructions.%s.txt", a->cfg->tools_dir,
                 lang_tag((lang_id)l));
        a->instructions[l] = read_text(path);
    }
    /* ctx.config: the deployment settings tools may read. */
    a->ctx_config = json_new_object();
    json_value *pr = json_new_object();
    const char *tpl = a->cfg->permission_request_path_template;
    json_set(pr, "path_template", json_new_str(tpl, strlen(tpl)));
    json_set(pr, "disabled", json_new_bool(a->cfg->permission_request_disabled));
    json_set(a->ctx_config, "permission_request", pr);
    json_value *gates = json_new_object();
    json_set(gates, "EXECUTE_SKILL_ENABLED", json_new_bool(a->cfg->execute_skill_enabled));
    json_set(a->ctx_config, "gates", gates);
    const char *lang = a->cfg->language;
    json_set(a->ctx_config, "language", json_new_str(lang, strlen(lang)));
}

/* The tools host, its reload settings and the first generation: 0, or -1 logged. */
static int load_tools(app *a)
{
    char err[512];
    tools_config tc;
    fill_tools_config(a, &tc);
    a->tools = tools_host_new(&tc);
    tools_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.dir = a->cfg->tools_dir;
    ops.watch = a->cfg->tools_watch;
    ops.debounce_ms = a->cfg->tools_watch_debounce_ms;
    ops.max_live = (size_t)a->cfg->tools_max_live_generations;
    ops.on_swap = on_swap;
    ops.arg = a;
    if (ops.max_live < 2) {
        log_fatal("config key tools.max_live_generations: must be >= 2");
        return -1;
    }
    if (tools_host_set_ops(a->tools, &ops, err, sizeof err) < 0) {
        log_fatal("config key tools.watch: %s", err);
        return -1;
    }
    char *report = NULL;
    if (tools_host_reload(a->tools, a->cfg->tools_dir, &report) < 0) {
        log_fatal("cannot load tools from %s:\n%s", a->cfg->tools_dir, report ? report : "");
        free(report);
        return -1;
    }
    log_line *l = log_begin(LOG_INFO, "tools loaded");
    log_str(l, "report", report ? report : "");
    log_end(l);
    free(report);
    return 0;
}

/* Runs the service in this process until it is stopped; takes cfg. w is NULL for
 * the single process, else this worker's place (signals arrive blocked). */
static int run_worker(settings *cfg, const worker_opts *w)
{
    int rc = 1;
    char err[512];
    app a;
    memset(&a, 0, sizeof a);
    g_is_worker = w != NULL;
    a.cfg = cfg;
    struct event *sigterm = NULL, *sigint = NULL, *sighup = NULL;
    signal(SIGPIPE, SIG_IGN);
    a.started_ms = now_wall_ms();
    a.default_lang = strcmp(a.cfg->language, "en-US") ? LANG_ZH_CN : LANG_EN_US;
    snprintf(a.prefix, sizeof a.prefix, "%s", a.cfg->public_prefix);
    fill_upstreams(&a);
    a.base = new_event_base();
    if (!a.base) {
        log_fatal("event_base_new failed");
        goto done;
    }
    fetch_config fc = {0, (size_t)a.cfg->limits_max_response_bytes, 0,
                       strcmp(a.cfg->upstream_client, "curl") ? FETCH_CLIENT_LEAN
                                                              : FETCH_CLIENT_CURL};
    const char *ferr = NULL;
    a.fetch = fetch_new(a.base, &fc, &ferr);
    if (!a.fetch) {
        log_fatal("%s", ferr ? ferr : "fetch init failed");
        goto done;
    }
    open_auth_trace(&a);
    if (open_store(&a, w) < 0)
        goto done;
    idem_config icfg;
    memset(&icfg, 0, sizeof icfg);
    icfg.ttl_ms = a.cfg->idempotency_ttl_s * 1000;
    icfg.wait_ms = a.cfg->idempotency_wait_ms;
    icfg.claim_ttl_ms = a.cfg->idempotency_claim_ttl_ms;
    a.idem = idem_new(a.base, a.store, &icfg);
    const char *secret = a.cfg->session_secret;
    a.sessions = session_new(*secret ? secret
                             : w     ? w->secret
                                     : "",
                             a.cfg->session_max_age_s, a.store);

    read_texts_and_config(&a);
    if (load_tools(&a) < 0)
        goto done;
    a.route = route_request; /* the route table: httpd calls up only through it */
    a.req_end = route_request_end;
    /* Handlers before the listeners: a stop that follows the "listening" line at once
     * must drain, not kill (evsignal queues it until the loop runs). */
    sigterm = evsignal_new(a.base, SIGTERM, on_term, &a);
    sigint = evsignal_new(a.base, SIGINT, on_term, &a);
    sighup = evsignal_new(a.base, SIGHUP, on_hup, &a);
    evsignal_add(sigterm, NULL);
    evsignal_add(sigint, NULL);
    evsignal_add(sighup, NULL);
    if (httpd_start(&a, err, sizeof err) < 0) {
        log_fatal("%s", err);
        goto done;
    }
    ptc_init(&a);
    if (!w || w->index == 0)
        log_started(&a, w ? w->count : 1);
    if (!w)
        sd_notify_state("READY=1"); /* with workers the master says it for all */
    if (w) {
        sigprocmask(SIG_SETMASK, w->orig_mask, NULL);
        unsigned char k = (unsigned char)w->index;
        if (write(w->ready_fd, &k, 1) != 1)
            log_fatal("worker %d: cannot notify the master", w->index);
        close(w->ready_fd);
    }
    if (a.cfg->mcp_keepalive_s > 0) {
        a.heartbeat = event_new(a.base, -1, EV_PERSIST, on_heartbeat, &a);
        struct timeval hb = {a.cfg->mcp_keepalive_s, 0};
        event_add(a.heartbeat, &hb);
    }
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
    flow_drop_detached(); /* what the requests left running, before its contexts go */
    ptc_free();
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
    conf_free(cfg);
    return rc;
}

/* trusted_proxies parses; public_url is empty or http(s)://host[:port][/path]. */
static int check_public_url(const settings *cfg, char *err, size_t errlen)
{
    const char *pub = cfg->public_url;
    if (*pub && ((strncmp(pub, "http://", 7) && strncmp(pub, "https://", 8)) ||
                 strpbrk(pub, " \t\"'<>?#") || pub[strlen(pub) - 1] == '/')) {
        snprintf(err, errlen,
                 "config key public_url: expected http(s)://host[:port][/path] without a "
                 "trailing slash, query or fragment");
        return -1;
    }
    return 0;
}

static int check_edge(const settings *cfg, char *err, size_t errlen)
{
    if (proxy_list_valid(cfg->trusted_proxies, err, errlen) < 0)
        return -1;
    return check_public_url(cfg, err, errlen);
}

/* CL_* variables that name no key: a warning, with the nearest key when close. */
static void warn_unknown_env(int to_stderr)
{
    char *unknown = conf_unknown_env();
    for (char *p = unknown, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        *nl = '\0';
        if (to_stderr) {
            fprintf(stderr, "context-loader: warning: environment %s is not a setting\n", p);
        } else {
            log_line *l = log_begin(LOG_WARN, "environment variable is not a setting");
            log_str(l, "variable", p);
            log_end(l);
        }
    }
    free(unknown);
}

/* lua_dir and tools_dir must be readable directories: the error names the key, the
 * path as resolved (relative ones against the config file) and the system's reason. */
static int check_dir(const char *key, const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "config key %s: %s: %s", key, dir, strerror(errno));
        return -1;
    }
    closedir(d);
    return 0;
}

static int check_dirs(const settings *cfg, char *err, size_t errlen)
{
    return check_dir("lua_dir", cfg->lua_dir, err, errlen) < 0 ||
                   check_dir("tools_dir", cfg->tools_dir, err, errlen) < 0
               ? -1
               : 0;
}

/* What an empty trace_core.url implies, said at start (a warn line) and by
 * --check-config (a notice): the deployment starts, but no MCP tool works. */
#define TRACE_CORE_EFFECT                                                                          \
    "every MCP tool, lifecycle and business, answers feature_not_installed, and no turn is "      \
    "recorded"

static void warn_trace_core(const settings *cfg, int to_stderr)
{
    if (*cfg->trace_core_url)
        return;
    if (to_stderr) {
        fprintf(stderr,
                "context-loader: notice: trace_core.url (env BKN_TRACE_CORE_URL) is empty: %s; "
                "set it to the BKN Trace Core base URL\n",
                TRACE_CORE_EFFECT);
        return;
    }
    log_line *l = log_begin(LOG_WARN, "trace core not configured");
    log_str(l, "setting", "trace_core.url");
    log_str(l, "env", "BKN_TRACE_CORE_URL");
    log_str(l, "effect", TRACE_CORE_EFFECT);
    log_end(l);
}

/* --check-config: every check the service makes at start, without starting, and every
 * problem at once, one per line: "FILE:LINE: message" where a line of the file is to
 * blame (the form of --check-tools), then the tools of tools_dir. Exit 2 on any. */
static int check_config(const char *path)
{
    char *text = NULL;
    int n = 0;
    settings *cfg = conf_load_all(path, &text, &n);
    buf errs = BUF_INIT;
    if (*text)
        buf_puts(&errs, text);
    free(text);
    char err[1024];
    admin_token t;
    if (conf_workers(cfg) > 1 && strncmp(cfg->state_store, "redis://", 8))
        conf_add_key_error(cfg, WORKERS_NEED_REDIS, &errs, &n);
    if (admin_token_load(&t, cfg->admin_listen, cfg->admin_token_file, err, sizeof err) < 0)
        conf_add_key_error(cfg, err, &errs, &n);
    if (proxy_list_valid(cfg->trusted_proxies, err, sizeof err) < 0)
        conf_add_key_error(cfg, err, &errs, &n);
    if (check_public_url(cfg, err, sizeof err) < 0)
        conf_add_key_error(cfg, err, &errs, &n);
    int dirs_ok = 1;
    const char *keys[] = {"lua_dir", "tools_dir"};
    for (size_t i = 0; i < 2; i++)
        if (check_dir(keys[i], i ? cfg->tools_dir : cfg->lua_dir, err, sizeof err) < 0) {
            conf_add_key_error(cfg, err, &errs, &n);
            dirs_ok = 0;
        }
    if (errs.data)
        fputs(errs.data, stderr);
    buf_free(&errs);
    warn_unknown_env(1);
    int tools = dirs_ok ? check_tools(cfg->tools_dir, cfg) : 0;
    warn_trace_core(cfg, 1);
    const char *name = path ? path : "(defaults and environment)";
    if (n)
        fprintf(stderr, "context-loader: configuration %s: %d error(s)\n", name, n);
    else if (!tools)
        printf("context-loader: configuration %s is valid\n", name);
    conf_free(cfg);
    return n || tools ? 2 : 0;
}

int main(int argc, char **argv)
{
    const char *config_path = NULL, *check_dir = NULL;
    int rc = 1, check_tools_default = 0, print_config = 0, check_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config_path = argv[++i];
        } else if (!strcmp(argv[i], "--check-tools")) {
            if (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                check_dir = argv[++i];
            else
                check_tools_default = 1;
        } else if (!strcmp(argv[i], "--print-config")) {
            print_config = 1;
        } else if (!strcmp(argv[i], "--check-config") || !strcmp(argv[i], "-t")) {
            check_only = 1;
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
    char err[4096];
    g_config_path = config_path;
    if (check_only) /* every problem at once, not the first */
        return check_config(config_path);
    settings *cfg = conf_load(config_path, err, sizeof err);
    if (!cfg) {
        log_fatal("%s", err);
        return 2;
    }
    if (print_config) {
        conf_print_effective(cfg, stdout);
        warn_unknown_env(1);
        conf_free(cfg);
        return 0;
    }
    if (check_process_model(cfg, err, sizeof err) < 0 || check_edge(cfg, err, sizeof err) < 0 ||
        (!check_dir && !check_tools_default && check_dirs(cfg, err, sizeof err) < 0)) {
        log_fatal("%s", err);
        conf_free(cfg);
        return 2;
    }
    if (check_dir || check_tools_default) {
        rc = check_tools(check_dir ? check_dir : cfg->tools_dir, cfg);
        conf_free(cfg);
        return rc;
    }
    int n = conf_workers(cfg);
    if (n > 1)
        log_set_role("master"); /* the lines before the fork are the master's */
    warn_unknown_env(0);
    warn_trace_core(cfg, 0);
    return n > 1 ? master_run(cfg, n, run_worker) : run_worker(cfg, NULL);
}
