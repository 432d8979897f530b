#include "conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef enum { T_STR, T_INT, T_BOOL, T_LANG, T_ADDR, T_WORKERS } conf_type;

typedef struct conf_key {
    const char *key;
    const char *env; /* NULL -> CL_<KEY> */
    conf_type type;
    const char *def;
    const char *doc;
} conf_key;

/* The one list of keys. etc/context-loader.conf documents the same keys. */
static const conf_key KEYS[] = {
    {"listen", NULL, T_ADDR, "127.0.0.1:30779", "public listener host:port"},
    {"admin_listen", NULL, T_STR, "127.0.0.1:30780",
     "operator listener (metrics, reload) host:port; empty disables it"},
    {"admin.token_file", NULL, T_STR, "",
     "file holding the admin listener's bearer token (at least 16 characters); required when "
     "admin_listen is not a loopback address"},
    {"workers", NULL, T_WORKERS, "1",
     "processes serving the public listener: 1..64, or auto (online CPUs, at most 64); more "
     "than 1 needs a redis state_store"},
    {"tools_dir", NULL, T_STR, "tools", "directory of tool scripts (relative to the working dir)"},
    {"tools.watch", NULL, T_BOOL, "false",
     "reload when files in tools_dir change (inotify, debounced; editor temp files ignored)"},
    {"tools.watch_debounce_ms", NULL, T_INT, "300",
     "tools.watch: quiet period after the last change before reloading"},
    {"tools.max_live_generations", NULL, T_INT, "8",
     "reloads are deferred while this many generations are still serving calls"},
    {"lua_dir", NULL, T_STR, "lua", "trusted Lua runtime shipped with the core"},
    {"language", NULL, T_LANG, "zh-CN", "deployment language: zh-CN or en-US"},
    {"public_prefix", NULL, T_STR, "/api/agent-retrieval/v1", "route prefix"},
    {"upstream.ontology_query.url", NULL, T_STR,
     "http://ontology-query-svc.openbkn:13018/api/ontology-query", "ontology-query base URL"},
    {"upstream.ontology_query.timeout_ms", NULL, T_INT, "30000", "per-call timeout"},
    {"upstream.bkn_backend.url", NULL, T_STR,
     "http://bkn-backend-svc.openbkn:13014/api/bkn-backend", "bkn-backend base URL"},
    {"upstream.bkn_backend.timeout_ms", NULL, T_INT, "30000", "per-call timeout"},
    {"upstream.vega.url", NULL, T_STR, "http://vega-backend-svc.openbkn:13014/api/vega-backend",
     "vega base URL"},
    {"upstream.vega.timeout_ms", NULL, T_INT, "30000", "per-call timeout"},
    {"upstream.operator_integration.url", NULL, T_STR,
     "http://agent-operator-integration.openbkn:9000/api/agent-operator-integration",
     "execution factory base URL"},
    {"upstream.operator_integration.timeout_ms", NULL, T_INT, "60000", "per-call timeout"},
    {"upstream.mf_model_api.url", NULL, T_STR,
     "http://mf-model-api.openbkn:9898/api/private/mf-model-api", "model API base URL"},
    {"upstream.mf_model_api.timeout_ms", NULL, T_INT, "30000", "per-call timeout"},
    {"oauth.introspect_url", NULL, T_STR, "http://hydra-admin.openbkn:4445/admin/oauth2/introspect",
     "RFC 7662 token introspection endpoint"},
    {"oauth.client_id", NULL, T_STR, "", "HTTP Basic user for introspection (optional)"},
    {"oauth.client_secret", NULL, T_STR, "", "HTTP Basic password for introspection (optional)"},
    {"oauth.resource_metadata_url", NULL, T_STR, "",
     "RFC 9728 metadata URL advertised in WWW-Authenticate (optional)"},
    {"bkn_safe.introspect_url", NULL, T_STR, "http://bkn-safe:3000/api/safe/v1/api-keys/introspect",
     "AppKey (bak_) introspection endpoint"},
    {"auth.timeout_ms", NULL, T_INT, "5000", "introspection timeout"},
    {"auth.cache_ttl_s", NULL, T_INT, "300", "positive cache TTL (capped by the token's exp)"},
    {"auth.negative_ttl_s", NULL, T_INT, "10", "negative cache TTL"},
    {"auth.cache_entries", NULL, T_INT, "10000", "max cached tokens"},
    {"default_tenant_id", "BKN_TRACE_DEFAULT_TENANT_ID", T_STR, "openbkn-local",
     "tenant when the token carries none"},
    {"default_business_domain", "BKN_TRACE_DEFAULT_BUSINESS_DOMAIN", T_STR, "bd_public",
     "business domain when the caller sends none"},
    {"trace_core.url", "BKN_TRACE_CORE_URL", T_STR, "", "BKN Trace Core base URL"},
    {"trace_core.timeout_ms", NULL, T_INT, "3000", "Trace Core call timeout"},
    {"trace_core.capture_policy_ttl_s", NULL, T_INT, "30", "capture policy cache TTL"},
    {"trace_core.lease_cache_ttl_s", NULL, T_INT, "10",
     "reuse an interaction's lease between calls of one turn for this long (0: look it up "
     "every call); Trace Core still checks it on every operation"},
    {"trace_core.probe_tries", NULL, T_INT, "3", "availability probe: tries"},
    {"trace_core.probe_budget_ms", NULL, T_INT, "1500", "availability probe: total budget"},
    {"trace_core.probe_verdict_ttl_s", NULL, T_INT, "5", "availability verdict cache TTL"},
    {"state_store", NULL, T_STR, "memory",
     "memory | redis://[[user]:password@]host[:port][/db] (shared by several instances)"},
    {"state_store.connect_timeout_ms", NULL, T_INT, "1000",
     "redis: connect + AUTH + SELECT budget; calls fail fast (retryable) until connected"},
    {"state_store.command_timeout_ms", NULL, T_INT, "1000",
     "redis: a command unanswered this long counts as an outage (reconnect)"},
    {"state_store.reconnect_max_ms", NULL, T_INT, "2000", "redis: reconnect backoff cap"},
    {"state_store.key_prefix", NULL, T_STR, "cl:", "redis: prefix of every key"},
    {"idempotency_ttl_s", NULL, T_INT, "86400", "idempotency record TTL"},
    {"idempotency.wait_ms", NULL, T_INT, "10000",
     "how long a duplicate waits for the first call before in_progress"},
    {"idempotency.max_records", NULL, T_INT, "100000", "memory store: most records kept"},
    {"session_secret", NULL, T_STR, "",
     "HMAC secret for Mcp-Session-Id (share it between replicas); empty = random per process"},
    {"allowed_origins", NULL, T_STR, "",
     "comma-separated Origin allow-list for MCP routes; requests with another Origin get 403"},
    {"limits.max_header_bytes", NULL, T_INT, "16384", "request header block limit (413 past it)"},
    {"limits.max_body_bytes", NULL, T_INT, "4194304", "request body limit (413 past it)"},
    {"limits.idle_timeout_s", NULL, T_INT, "30", "idle/slow-request timeout per connection"},
    {"limits.max_connections", NULL, T_INT, "16384",
     "open client connections per worker; past it a new connection gets 503 and is closed "
     "(0: no cap)"},
    {"limits.max_calls_per_principal", NULL, T_INT, "32",
     "MCP/REST calls one principal may have in flight per worker; past it 429 with "
     "Retry-After (0: no limit)"},
    {"limits.max_response_bytes", NULL, T_INT, "33554432", "upstream response size cap"},
    {"limits.json_max_depth", NULL, T_INT, "128", "JSON nesting limit for request bodies"},
    {"lua.instruction_budget", NULL, T_INT, "200000000", "VM instructions per tool call"},
    {"lua.memory_cap_mb", NULL, T_INT, "128", "Lua memory per tool call"},
    {"permission_request.path_template", NULL, T_STR,
     "/studio/bkn/{kn_id}/object-types/{ot_id}?apply_permission=1",
     "Studio route of the permission request dialog"},
    {"permission_request.disabled", NULL, T_BOOL, "false", "true removes request links"},
    {"execute_skill_enabled", "EXECUTE_SKILL_ENABLED", T_BOOL, "false",
     "registers execute_skill, /kn/execute_skill and /mcp/ptc"},
    {"ptc.sandbox_mcp_url", "PTC_SANDBOX_MCP_URL", T_STR, "",
     "in-cluster URL the PTC sandbox calls"},
    {"mcp.progress_interval_ms", NULL, T_INT, "2000",
     "a call still running after this long streams notifications/progress (when the client "
     "sent a progressToken); 0 disables"},
    {"mcp.tools_page_size", NULL, T_INT, "100", "tools/list page size (cursor pagination)"},
    {"shutdown_grace_s", NULL, T_INT, "10", "SIGTERM: time allowed for in-flight calls"},
    {"access_log", NULL, T_BOOL, "true", "one JSON line per request on stderr"},
};

#define N_KEYS (sizeof(KEYS) / sizeof(KEYS[0]))

struct conf {
    char *values[N_KEYS];
};

/* Callers mostly name keys with string literals, so the lookups on the request path
 * (limits, depth, flags) are remembered by the key's address: a direct-mapped cache
 * in front of the linear search, each hit confirmed with one comparison. */
#define KEY_CACHE 128
static struct {
    const char *ptr;
    int idx;
} key_cache[KEY_CACHE];

static int key_index(const char *key)
{
    size_t slot = ((uintptr_t)key >> 3) % KEY_CACHE;
    /* Verified: a key built in a reused buffer may come back at the same address. */
    if (key_cache[slot].ptr == key && strcmp(KEYS[key_cache[slot].idx].key, key) == 0)
        return key_cache[slot].idx;
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].key, key) == 0) {
            key_cache[slot].ptr = key;
            key_cache[slot].idx = (int)i;
            return (int)i;
        }
    return -1;
}

static void env_name(const conf_key *k, char *out, size_t outlen)
{
    if (k->env) {
        snprintf(out, outlen, "%s", k->env);
        return;
    }
    size_t n = snprintf(out, outlen, "CL_");
    for (const char *p = k->key; *p && n + 1 < outlen; p++)
        out[n++] = (*p == '.') ? '_' : (char)toupper((unsigned char)*p);
    out[n] = '\0';
}

static int check_value(const conf_key *k, const char *v, char *err, size_t errlen)
{
    switch (k->type) {
    case T_INT: {
        char *end = NULL;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!*v || *end || errno || n < 0) {
            snprintf(err, errlen, "config key %s: '%s' is not a non-negative integer", k->key, v);
            return -1;
        }
        return 0;
    }
    case T_BOOL:
        if (!(str_ieq(v, "true") || str_ieq(v, "false") || !strcmp(v, "1") || !strcmp(v, "0") ||
              str_ieq(v, "yes") || str_ieq(v, "no") || str_ieq(v, "on") || str_ieq(v, "off"))) {
            snprintf(err, errlen, "config key %s: '%s' is not a boolean (true/false)", k->key, v);
            return -1;
        }
        return 0;
    case T_LANG:
        if (strcmp(v, "zh-CN") && strcmp(v, "en-US")) {
            snprintf(err, errlen, "config key %s: '%s' is not a supported language (zh-CN, en-US)",
                     k->key, v);
            return -1;
        }
        return 0;
    case T_ADDR: {
        const char *colon = strrchr(v, ':');
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : -1;
        if (!colon || colon == v || !end || *end || port < 0 || port > 65535) {
            snprintf(err, errlen, "config key %s: '%s' is not host:port", k->key, v);
            return -1;
        }
        return 0;
    }
    case T_WORKERS: {
        char *end = NULL;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!strcmp(v, "auto"))
            return 0;
        if (!*v || *end || errno || n < 1 || n > 64) {
            snprintf(err, errlen, "config key %s: '%s' is not 1..64 or auto", k->key, v);
            return -1;
        }
        return 0;
    }
    case T_STR:
        return 0;
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int load_file(conf *c, const char *path, char *err, size_t errlen)
{
    int rc = -1;
    char line[4096];
    int lineno = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open config %s: %s", path, strerror(errno));
        goto done;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'key = value'", path, lineno);
            goto done;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        int i = key_index(key);
        if (i < 0) {
            snprintf(err, errlen, "%s:%d: unknown config key '%s'", path, lineno, key);
            goto done;
        }
        char msg[512];
        if (check_value(&KEYS[i], val, msg, sizeof msg) < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
            goto done;
        }
        free(c->values[i]);
        c->values[i] = xstrdup(val);
    }
    rc = 0;
done:
    if (f)
        fclose(f);
    return rc;
}

conf *conf_load(const char *path, char *err, size_t errlen)
{
    conf *c = xcalloc(1, sizeof *c);
    for (size_t i = 0; i < N_KEYS; i++)
        c->values[i] = xstrdup(KEYS[i].def);
    if (path && load_file(c, path, err, errlen) < 0)
        goto fail;
    for (size_t i = 0; i < N_KEYS; i++) {
        char name[128];
        env_name(&KEYS[i], name, sizeof name);
        const char *v = getenv(name);
        if (!v)
            continue;
        char msg[512];
        if (check_value(&KEYS[i], v, msg, sizeof msg) < 0) {
            snprintf(err, errlen, "environment %s: %s", name, msg);
            goto fail;
        }
        free(c->values[i]);
        c->values[i] = xstrdup(v);
    }
    return c;
fail:
    conf_free(c);
    return NULL;
}

void conf_free(conf *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < N_KEYS; i++)
        free(c->values[i]);
    free(c);
}

const char *conf_str(const conf *c, const char *key)
{
    int i = key_index(key);
    if (i < 0) {
        fprintf(stderr, "context-loader: BUG: unknown config key %s\n", key);
        abort();
    }
    return c->values[i];
}

long conf_int(const conf *c, const char *key)
{
    return strtol(conf_str(c, key), NULL, 10);
}

int conf_bool(const conf *c, const char *key)
{
    const char *v = conf_str(c, key);
    return str_ieq(v, "true") || !strcmp(v, "1") || str_ieq(v, "yes") || str_ieq(v, "on");
}

void conf_print_reference(void)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        char name[128];
        env_name(&KEYS[i], name, sizeof name);
        printf("%-40s %-36s default=%s\n    %s\n", KEYS[i].key, name, KEYS[i].def, KEYS[i].doc);
    }
}
