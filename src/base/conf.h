/* conf: the configuration file (etc/context-loader.conf) plus environment
 * overrides. Read once at start into a typed settings struct; read-only afterwards.
 *
 * File format: one "key = value" per line; '#' starts a comment line; blank lines
 * ignored; values are taken verbatim after trimming. Every key has a default, a
 * type and an environment variable (CL_<KEY> with '.' -> '_', upper-cased, or the
 * deployment's own name such as EXECUTE_SKILL_ENABLED). Environment wins over the
 * file. Unknown keys and malformed values fail the load with a message naming the key.
 *
 * CONF_KEYS is the one table of keys: the settings struct, the loader, the
 * environment names and --print-config-keys are all generated from it, so a
 * misspelt setting is a compile error. A key "a.b_c" is the member a_b_c.
 *
 * Ownership: conf_load returns settings the caller frees with conf_free; the
 * strings in them live as long as the settings. */
#ifndef CL_CONF_H
#define CL_CONF_H

#include <stddef.h>
#include <stdio.h>

/* X(member, "key", env or NULL (CL_<KEY>), type, "default", "description") */
#define CONF_KEYS(X)                                                                               \
    X(listen, "listen", NULL, ADDR, "127.0.0.1:30779", "public listener host:port")                \
    X(admin_listen, "admin_listen", NULL, STR, "127.0.0.1:30780",                                  \
      "operator listener (metrics, reload) host:port; empty disables it")                          \
    X(admin_token_file, "admin.token_file", NULL, PATH, "",                                        \
      "file holding the admin listener's bearer token (at least 16 characters); required when "    \
      "admin_listen is not a loopback address")                                                    \
    X(workers, "workers", NULL, WORKERS, "1",                                                      \
      "processes serving the public listener: 1..64, or auto (online CPUs, at most 64); more "     \
      "than 1 needs a redis state_store")                                                          \
    X(tools_dir, "tools_dir", NULL, PATH, "tools", "directory of tool scripts")                    \
    X(tools_watch, "tools.watch", NULL, BOOL, "false",                                             \
      "reload when files in tools_dir change (inotify, debounced; editor temp files ignored)")     \
    X(tools_watch_debounce_ms, "tools.watch_debounce_ms", NULL, INT, "300",                        \
      "tools.watch: quiet period after the last change before reloading")                          \
    X(tools_max_live_generations, "tools.max_live_generations", NULL, INT, "8",                    \
      "reloads are deferred while this many generations are still serving calls")                  \
    X(lua_dir, "lua_dir", NULL, PATH, "lua", "trusted Lua runtime shipped with the core")          \
    X(language, "language", NULL, LANG, "zh-CN", "deployment language: zh-CN or en-US")            \
    X(public_prefix, "public_prefix", NULL, STR, "/api/agent-retrieval/v1", "route prefix")        \
    X(upstream_ontology_query_url, "upstream.ontology_query.url", NULL, STR,                       \
      "http://ontology-query-svc.openbkn:13018/api/ontology-query", "ontology-query base URL")     \
    X(upstream_ontology_query_timeout_ms, "upstream.ontology_query.timeout_ms", NULL, INT,         \
      "30000", "per-call timeout")                                                                 \
    X(upstream_ontology_query_caller_token, "upstream.ontology_query.caller_token", NULL, BOOL,    \
      "false", "ctx.http may send the caller's own bearer token (caller_token = true)")            \
    X(upstream_ontology_query_managed_proxy, "upstream.ontology_query.managed_proxy", NULL, BOOL,  \
      "false", "ctx.http GETs may go out as a network's managed proxy account (managed_proxy)")    \
    X(upstream_bkn_backend_url, "upstream.bkn_backend.url", NULL, STR,                             \
      "http://bkn-backend-svc.openbkn:13014/api/bkn-backend", "bkn-backend base URL")              \
    X(upstream_bkn_backend_timeout_ms, "upstream.bkn_backend.timeout_ms", NULL, INT, "30000",      \
      "per-call timeout")                                                                          \
    X(upstream_bkn_backend_caller_token, "upstream.bkn_backend.caller_token", NULL, BOOL, "false", \
      "ctx.http may send the caller's own bearer token (caller_token = true)")                     \
    X(upstream_bkn_backend_managed_proxy, "upstream.bkn_backend.managed_proxy", NULL, BOOL,        \
      "false", "ctx.http GETs may go out as a network's managed proxy account (managed_proxy)")    \
    X(upstream_vega_url, "upstream.vega.url", NULL, STR,                                           \
      "http://vega-backend-svc.openbkn:13014/api/vega-backend", "vega base URL")                   \
    X(upstream_vega_timeout_ms, "upstream.vega.timeout_ms", NULL, INT, "30000",                    \
      "per-call timeout")                                                                          \
    X(upstream_vega_caller_token, "upstream.vega.caller_token", NULL, BOOL, "false",               \
      "ctx.http may send the caller's own bearer token (caller_token = true)")                     \
    X(upstream_vega_managed_proxy, "upstream.vega.managed_proxy", NULL, BOOL, "false",             \
      "ctx.http GETs may go out as a network's managed proxy account (managed_proxy)")             \
    X(upstream_operator_integration_url, "upstream.operator_integration.url", NULL, STR,           \
      "http://agent-operator-integration.openbkn:9000/api/agent-operator-integration",             \
      "execution factory base URL")                                                                \
    X(upstream_operator_integration_timeout_ms, "upstream.operator_integration.timeout_ms", NULL,  \
      INT, "60000", "per-call timeout")                                                            \
    X(upstream_operator_integration_caller_token, "upstream.operator_integration.caller_token",    \
      NULL, BOOL, "true", "ctx.http may send the caller's own bearer token (caller_token = true)") \
    X(upstream_operator_integration_managed_proxy, "upstream.operator_integration.managed_proxy",  \
      NULL, BOOL, "true",                                                                          \
      "ctx.http GETs may go out as a network's managed proxy account (managed_proxy)")             \
    X(upstream_mf_model_api_url, "upstream.mf_model_api.url", NULL, STR,                           \
      "http://mf-model-api.openbkn:9898/api/private/mf-model-api", "model API base URL")           \
    X(upstream_mf_model_api_timeout_ms, "upstream.mf_model_api.timeout_ms", NULL, INT, "30000",    \
      "per-call timeout")                                                                          \
    X(upstream_mf_model_api_caller_token, "upstream.mf_model_api.caller_token", NULL, BOOL,        \
      "false", "ctx.http may send the caller's own bearer token (caller_token = true)")            \
    X(upstream_mf_model_api_managed_proxy, "upstream.mf_model_api.managed_proxy", NULL, BOOL,      \
      "false", "ctx.http GETs may go out as a network's managed proxy account (managed_proxy)")    \
    X(upstream_bkn_safe_url, "upstream.bkn_safe.url", NULL, STR, "http://bkn-safe:3000",           \
      "bkn-safe base URL for tools (its paths are absolute: /api/safe/v1/...)")                    \
    X(upstream_bkn_safe_timeout_ms, "upstream.bkn_safe.timeout_ms", NULL, INT, "5000",             \
      "per-call timeout")                                                                          \
    X(upstream_bkn_safe_caller_token, "upstream.bkn_safe.caller_token", NULL, BOOL, "false",       \
      "ctx.http may send the caller's own bearer token (caller_token = true)")                     \
    X(upstream_bkn_safe_managed_proxy, "upstream.bkn_safe.managed_proxy", NULL, BOOL, "false",     \
      "ctx.http GETs may go out as a network's managed proxy account (managed_proxy)")             \
    X(oauth_introspect_url, "oauth.introspect_url", NULL, STR,                                     \
      "http://hydra-admin.openbkn:4445/admin/oauth2/introspect",                                   \
      "RFC 7662 token introspection endpoint")                                                     \
    X(oauth_client_id, "oauth.client_id", NULL, STR, "",                                           \
      "HTTP Basic user for introspection (optional)")                                              \
    X(oauth_client_secret, "oauth.client_secret", NULL, STR, "",                                   \
      "HTTP Basic password for introspection (optional)")                                          \
    X(oauth_resource_metadata_url, "oauth.resource_metadata_url", NULL, STR, "",                   \
      "RFC 9728 metadata URL advertised in WWW-Authenticate (optional)")                           \
    X(oauth_authorization_servers, "oauth.authorization_servers", NULL, STR, "",                   \
      "authorization server issuer URLs (comma-separated) MCP clients may get tokens from; "       \
      "when set, the service serves RFC 9728 metadata at /.well-known/oauth-protected-resource")   \
    X(bkn_safe_introspect_url, "bkn_safe.introspect_url", NULL, STR,                               \
      "http://bkn-safe:3000/api/safe/v1/api-keys/introspect",                                      \
      "AppKey (bak_) introspection endpoint")                                                      \
    X(auth_timeout_ms, "auth.timeout_ms", NULL, INT, "5000", "introspection timeout")              \
    X(auth_cache_ttl_s, "auth.cache_ttl_s", NULL, INT, "300",                                      \
      "positive cache TTL (capped by the token's exp)")                                            \
    X(auth_negative_ttl_s, "auth.negative_ttl_s", NULL, INT, "10", "negative cache TTL")           \
    X(auth_cache_entries, "auth.cache_entries", NULL, INT, "10000", "max cached tokens")           \
    X(default_tenant_id, "default_tenant_id", "BKN_TRACE_DEFAULT_TENANT_ID", STR, "openbkn-local", \
      "tenant when the token carries none")                                                        \
    X(default_business_domain, "default_business_domain", "BKN_TRACE_DEFAULT_BUSINESS_DOMAIN",     \
      STR, "bd_public", "business domain when the caller sends none")                              \
    X(trace_core_url, "trace_core.url", "BKN_TRACE_CORE_URL", STR, "", "BKN Trace Core base URL")  \
    X(trace_core_timeout_ms, "trace_core.timeout_ms", NULL, INT, "3000",                           \
      "Trace Core call timeout")                                                                   \
    X(trace_core_capture_policy_ttl_s, "trace_core.capture_policy_ttl_s", NULL, INT, "30",         \
      "capture policy cache TTL")                                                                  \
    X(trace_core_lease_cache_ttl_s, "trace_core.lease_cache_ttl_s", NULL, INT, "10",               \
      "reuse an interaction's lease between calls of one turn for this long (0: look it up "       \
      "every call); Trace Core still checks it on every operation")                                \
    X(trace_core_pipeline, "trace_core.pipeline", NULL, BOOL, "true",                              \
      "Trace Core requests that start together go out on one kept connection in one write "        \
      "(HTTP/1.1 pipelining); false: one request per connection at a time")                        \
    X(trace_core_probe_tries, "trace_core.probe_tries", NULL, INT, "3",                            \
      "availability probe: tries")                                                                 \
    X(trace_core_probe_budget_ms, "trace_core.probe_budget_ms", NULL, INT, "1500",                 \
      "availability probe: total budget")                                                          \
    X(trace_core_probe_verdict_ttl_s, "trace_core.probe_verdict_ttl_s", NULL, INT, "5",            \
      "availability verdict cache TTL")                                                            \
    X(trace_core_operation_key_retention_s, "trace_core.operation_key_retention_s", NULL, INT,     \
      "86400",                                                                                     \
      "how long Trace Core can answer a retry by its Operation key; idempotency_ttl_s must be at " \
      "least this (checked at load)")                                                              \
    X(state_store, "state_store", NULL, STR, "memory",                                             \
      "memory | redis://[[user]:password@]host[:port][/db] (shared by several instances)")         \
    X(state_store_connect_timeout_ms, "state_store.connect_timeout_ms", NULL, INT, "1000",         \
      "redis: connect + AUTH + SELECT budget; calls fail fast (retryable) until connected")        \
    X(state_store_command_timeout_ms, "state_store.command_timeout_ms", NULL, INT, "1000",         \
      "redis: a command unanswered this long counts as an outage (reconnect)")                     \
    X(state_store_reconnect_max_ms, "state_store.reconnect_max_ms", NULL, INT, "2000",             \
      "redis: reconnect backoff cap")                                                              \
    X(state_store_key_prefix, "state_store.key_prefix", NULL, STR,                                 \
      "cl:", "redis: prefix of every key")                                                         \
    X(idempotency_ttl_s, "idempotency_ttl_s", NULL, INT, "86400",                                  \
      "idempotency records (and ended sessions) live this long; at least "                         \
      "trace_core.operation_key_retention_s")                                                      \
    X(idempotency_wait_ms, "idempotency.wait_ms", NULL, INT, "10000",                              \
      "how long a duplicate waits for the first call before in_progress")                          \
    X(idempotency_claim_ttl_ms, "idempotency.claim_ttl_ms", NULL, INT, "60000",                    \
      "how long the claim of a running call lives (longer than the longest call): a duplicate "    \
      "waits behind it, and an Operation still pending after it is taken as abandoned")            \
    X(idempotency_max_records, "idempotency.max_records", NULL, INT, "100000",                     \
      "memory store: most records kept")                                                           \
    X(session_secret, "session_secret", NULL, STR, "",                                             \
      "HMAC secret for Mcp-Session-Id (share it between replicas); empty = random per process")    \
    X(session_max_age_s, "session.max_age_s", NULL, INT, "86400",                                  \
      "lifetime of an Mcp-Session-Id, signed into the id (a client re-initializes after it); "     \
      "ended sessions are remembered in the state store until then")                               \
    X(trusted_proxies, "trusted_proxies", NULL, STR, "127.0.0.1/8, ::1",                           \
      "addresses/CIDR blocks whose X-Forwarded-Host/-Proto are believed (/mcp/info, links tools "  \
      "build); other peers get public_url or the address they connected to")                       \
    X(public_url, "public_url", NULL, STR, "",                                                     \
      "http(s)://host[:port][/path] clients use to reach this service (no trailing slash); used "  \
      "by /mcp/info when the peer is not a trusted proxy")                                         \
    X(allowed_origins, "allowed_origins", NULL, STR, "",                                           \
      "comma-separated Origin allow-list for MCP routes; requests with another Origin get 403")    \
    X(limits_max_header_bytes, "limits.max_header_bytes", NULL, INT, "16384",                      \
      "request header block limit (413 past it)")                                                  \
    X(limits_max_body_bytes, "limits.max_body_bytes", NULL, INT, "4194304",                        \
      "request body limit (413 past it)")                                                          \
    X(limits_idle_timeout_s, "limits.idle_timeout_s", NULL, INT, "30",                             \
      "idle/slow-request timeout per connection")                                                  \
    X(limits_max_connections, "limits.max_connections", NULL, INT, "16384",                        \
      "open client connections per worker; past it a new connection gets 503 and is closed "       \
      "(0: no cap)")                                                                               \
    X(limits_max_calls_per_principal, "limits.max_calls_per_principal", NULL, INT, "32",           \
      "MCP/REST calls one principal may have in flight per worker; past it 429 with "              \
      "Retry-After (0: no limit)")                                                                 \
    X(limits_max_response_bytes, "limits.max_response_bytes", NULL, INT, "33554432",               \
      "upstream response size cap")                                                                \
    X(upstream_client, "upstream_client", NULL, CLIENT, "lean",                                    \
      "outbound HTTP client: lean (built-in HTTP/1.1 client for http:// URLs with a numeric "      \
      "host; libcurl for https and host names) or curl (libcurl for everything)")                  \
    X(limits_json_max_depth, "limits.json_max_depth", NULL, INT, "128",                            \
      "JSON nesting limit for request bodies")                                                     \
    X(lua_instruction_budget, "lua.instruction_budget", NULL, INT, "200000000",                    \
      "VM instructions per tool call")                                                             \
    X(lua_memory_cap_mb, "lua.memory_cap_mb", NULL, INT, "128", "Lua memory per tool call")        \
    X(lua_max_run_ms, "lua.max_run_ms", NULL, INT, "100",                                          \
      "longest a tool may run without yielding (wall clock, per resume and per tool file "         \
      "load); past it the call stops with time_limit_exceeded; 0 disables")                        \
    X(lua_max_output_bytes, "lua.max_output_bytes", NULL, INT, "16777216",                         \
      "largest encoded result of one tool call; past it the call fails with output_too_large; "    \
      "0 disables")                                                                                \
    X(permission_request_path_template, "permission_request.path_template", NULL, STR,             \
      "/studio/bkn/{kn_id}/object-types/{ot_id}?apply_permission=1",                               \
      "Studio route of the permission request dialog")                                             \
    X(permission_request_disabled, "permission_request.disabled", NULL, BOOL, "false",             \
      "true removes request links")                                                                \
    X(execute_skill_enabled, "execute_skill_enabled", "EXECUTE_SKILL_ENABLED", BOOL, "false",      \
      "registers execute_skill, /kn/execute_skill and /mcp/ptc")                                   \
    X(ptc_sandbox_mcp_url, "ptc.sandbox_mcp_url", "PTC_SANDBOX_MCP_URL", STR, "",                  \
      "in-cluster URL the PTC sandbox calls")                                                      \
    X(mcp_progress_interval_ms, "mcp.progress_interval_ms", NULL, INT, "2000",                     \
      "a call still running after this long streams notifications/progress (when the client "      \
      "sent a progressToken); 0 disables")                                                         \
    X(mcp_tools_page_size, "mcp.tools_page_size", NULL, INT, "100",                                \
      "tools/list page size (cursor pagination)")                                                  \
    X(mcp_keepalive_s, "mcp.keepalive_s", NULL, INT, "15",                                         \
      "every open MCP event stream (a session's GET stream, a subscriptions/listen) gets a "       \
      "keep-alive comment this often; 0 disables")                                                 \
    X(mcp_listen_max_per_principal, "mcp.listen_max_per_principal", NULL, INT, "8",                \
      "open subscriptions/listen streams one caller may hold; one more is refused with 429")       \
    X(confirm_tools, "confirm.tools", NULL, STR, "",                                               \
      "comma-separated tools a person must confirm before they run (tool, tool@kn_id or "          \
      "tool@kn_id/at_id; kn_id may be *), e.g. execute_action,execute_skill; empty: none")         \
    X(confirm_ttl_s, "confirm.ttl_s", NULL, INT, "600",                                            \
      "how long a confirmation question stays answerable (its signed state expires after it)")     \
    X(shutdown_grace_s, "shutdown_grace_s", NULL, INT, "10",                                       \
      "SIGTERM: time allowed for in-flight calls")                                                 \
    X(access_log, "access_log", NULL, BOOL, "true", "one JSON line per request on stderr")

/* C type of each value type. WORKERS: 1..64, or 0 for "auto". */
#define CONF_CTYPE_STR const char *
#define CONF_CTYPE_PATH const char * /* a relative path from the file: against its directory */
#define CONF_CTYPE_ADDR const char * /* host:port */
#define CONF_CTYPE_LANG const char * /* "zh-CN" | "en-US" */
#define CONF_CTYPE_INT long          /* >= 0 */
#define CONF_CTYPE_BOOL int          /* 0 | 1 */
#define CONF_CTYPE_WORKERS int
#define CONF_CTYPE_CLIENT const char * /* "lean" | "curl" */

typedef struct settings {
#define CONF_MEMBER(member, key, env, type, def, doc) CONF_CTYPE_##type member;
    CONF_KEYS(CONF_MEMBER)
#undef CONF_MEMBER
} settings;

/* path may be NULL (defaults + environment only). Returns NULL on error with a
 * message in err (every problem, one per line). */
settings *conf_load(const char *path, char *err, size_t errlen);
/* Like conf_load, but never stops at a problem: each one is a line of *errors
 * ("FILE:LINE: message" for a line of the file, "environment NAME: message", or a
 * "config key KEY: ..." message that no single line carries), counted in *n_errors;
 * a wrong value is left at its default. Never NULL; the caller frees *errors (malloc)
 * and the settings (conf_free). */
settings *conf_load_all(const char *path, char **errors, int *n_errors);
/* Where key's value came from: "FILE:LINE", "env NAME", or NULL (the default);
 * valid as long as s. */
const char *conf_origin(const settings *s, const char *key);
/* Appends msg as one problem line of errs (counted in *n): a "config key KEY: ..."
 * message gets the place KEY was set ("FILE:LINE: " or "environment NAME: ") in front. */
struct buf;
void conf_add_key_error(const settings *s, const char *msg, struct buf *errs, int *n);
void conf_free(settings *s);

/* Whether a tool's feature switch is on: no gate -> on; EXECUTE_SKILL_ENABLED ->
 * the execute_skill_enabled setting (s may be NULL: off); any other name -> its
 * environment variable is "true" or "1". Called when tools load, not per request. */
int conf_gate_open(const settings *s, const char *gate);

/* The table, for the reference and tests: number of keys, key i's name and its
 * environment variable. */
size_t conf_key_count(void);
const char *conf_key_name(size_t i);
void conf_key_env(size_t i, char *out, size_t outlen);

/* Writes the documented table of keys (key, env, default, description) to stdout. */
void conf_print_reference(void);

/* Writes every key's effective value and where it came from ("# default",
 * "# FILE:LINE", "# env NAME"), like `nginx -T`: secrets (session_secret,
 * oauth.client_secret) and the password of a URL's user-info are masked. */
void conf_print_effective(const settings *s, FILE *out);

/* Environment variables that look like settings (CL_*) but name no key, one per
 * line with the nearest key's variable when one is close ("CL_TOOL_DIR (did you mean
 * CL_TOOLS_DIR?)"); "" when none. Caller frees. */
char *conf_unknown_env(void);

#endif
