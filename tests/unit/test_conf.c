/* conf: every key of the table reaches its settings member from the file and from
 * the environment (which wins), defaults fill the rest, malformed values,
 * unknown keys and an idempotency TTL shorter than the Operation key retention fail
 * the load, and gates follow their switch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "conf.h"

/* A valid value of each type, different from every default; v = 1 (file) or 2 (env). */
static void sample(const char *type, size_t i, int v, char *out, size_t outlen)
{
    if (!strcmp(type, "INT"))
        snprintf(out, outlen, "%zu", 7000 + i * 10 + (size_t)v);
    else if (!strcmp(type, "BOOL"))
        snprintf(out, outlen, "%s", v == 1 ? "yes" : "off");
    else if (!strcmp(type, "LANG"))
        snprintf(out, outlen, "%s", v == 1 ? "en-US" : "zh-CN");
    else if (!strcmp(type, "ADDR"))
        snprintf(out, outlen, "10.0.0.%d:%zu", v, 4000 + i);
    else if (!strcmp(type, "WORKERS"))
        snprintf(out, outlen, "%s", v == 1 ? "auto" : "5");
    else if (!strcmp(type, "CLIENT"))
        snprintf(out, outlen, "%s", v == 1 ? "curl" : "lean");
    else if (!strcmp(type, "PATH")) /* absolute: a relative one is read against the file */
        snprintf(out, outlen, "/value %d of key %zu", v, i);
    else
        snprintf(out, outlen, "value %d of key %zu", v, i);
}

/* The member as text in the form sample() wrote it. */
static void show_str(const char *m, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", m);
}
static void show_long(long m, const char *type, char *out, size_t outlen)
{
    if (!strcmp(type, "BOOL"))
        snprintf(out, outlen, "%s", m ? "1" : "0");
    else if (!strcmp(type, "WORKERS") && m == 0)
        snprintf(out, outlen, "auto");
    else
        snprintf(out, outlen, "%ld", m);
}
#define SHOW_STR(m, type, out, outlen) show_str(m, out, outlen)
#define SHOW_ADDR SHOW_STR
#define SHOW_PATH SHOW_STR
#define SHOW_LANG SHOW_STR
#define SHOW_CLIENT SHOW_STR
#define SHOW_INT(m, type, out, outlen) show_long(m, type, out, outlen)
#define SHOW_BOOL SHOW_INT
#define SHOW_WORKERS SHOW_INT

/* What the member must read after loading sample(type, i, v). */
static void expect(const char *type, size_t i, int v, char *out, size_t outlen)
{
    sample(type, i, v, out, outlen);
    if (!strcmp(type, "BOOL"))
        snprintf(out, outlen, "%s", v == 1 ? "1" : "0");
}

/* Member i of s as text, through the table's member names. */
static void member_text(const settings *s, size_t i, char *out, size_t outlen)
{
    size_t k = 0;
#define SHOW_ROW(member, key, env, type, def, doc)                                                 \
    if (k++ == i)                                                                                  \
        SHOW_##type(s->member, #type, out, outlen);
    CONF_KEYS(SHOW_ROW)
#undef SHOW_ROW
}

static const char *const TYPES[] = {
#define TYPE_ROW(member, key, env, type, def, doc) #type,
    CONF_KEYS(TYPE_ROW)
#undef TYPE_ROW
};

static const char *const DEFAULTS[] = {
#define DEF_ROW(member, key, env, type, def, doc) def,
    CONF_KEYS(DEF_ROW)
#undef DEF_ROW
};

static settings *load(const char *path)
{
    char err[512] = "";
    settings *s = conf_load(path, err, sizeof err);
    if (!s)
        fprintf(stderr, "conf_load: %s\n", err);
    return s;
}

static void unset_all(void)
{
    for (size_t i = 0; i < conf_key_count(); i++) {
        char env[128];
        conf_key_env(i, env, sizeof env);
        unsetenv(env);
    }
}

/* Loads path (and the environment): every member reads sample v. */
static void check_loaded(const char *path, int v)
{
    char want[256], got[256];
    settings *s = load(path);
    CHECK(s != NULL);
    for (size_t i = 0; s && i < conf_key_count(); i++) {
        expect(TYPES[i], i, v, want, sizeof want);
        member_text(s, i, got, sizeof got);
        CHECK_STR(got, want);
    }
    conf_free(s);
}

static void test_round_trip(const char *path)
{
    size_t n = conf_key_count();
    CHECK(n == sizeof TYPES / sizeof TYPES[0]);
    char want[256], got[256];

    /* defaults */
    settings *s = load(NULL);
    CHECK(s != NULL);
    for (size_t i = 0; s && i < n; i++) {
        member_text(s, i, got, sizeof got);
        if (!strcmp(TYPES[i], "BOOL"))
            snprintf(want, sizeof want, "%s", strcmp(DEFAULTS[i], "true") ? "0" : "1");
        else
            snprintf(want, sizeof want, "%s", DEFAULTS[i]);
        CHECK_STR(got, want);
    }
    conf_free(s);

    /* every key from the file */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("# every key\n\n", f);
    for (size_t i = 0; i < n; i++) {
        sample(TYPES[i], i, 1, want, sizeof want);
        fprintf(f, "  %s =  %s  \n", conf_key_name(i), want);
    }
    fclose(f);
    check_loaded(path, 1);

    /* every key from the environment, over the file */
    for (size_t i = 0; i < n; i++) {
        char env[128];
        conf_key_env(i, env, sizeof env);
        sample(TYPES[i], i, 2, want, sizeof want);
        setenv(env, want, 1);
    }
    check_loaded(path, 2);
    unset_all();
}

static void test_env_names(void)
{
    char env[128];
    for (size_t i = 0; i < conf_key_count(); i++) {
        if (!strcmp(conf_key_name(i), "limits.max_body_bytes")) {
            conf_key_env(i, env, sizeof env);
            CHECK_STR(env, "CL_LIMITS_MAX_BODY_BYTES");
        }
        if (!strcmp(conf_key_name(i), "execute_skill_enabled")) {
            conf_key_env(i, env, sizeof env);
            CHECK_STR(env, "EXECUTE_SKILL_ENABLED");
        }
    }
}

static void test_errors(const char *path)
{
    char err[512];
    const char *bad[][2] = {
        {"no_such_key = 1\n", "unknown config key 'no_such_key'"},
        {"limits.max_body_bytes = -1\n", "limits.max_body_bytes"},
        {"access_log = maybe\n", "access_log"},
        {"language = fr-FR\n", "language"},
        {"upstream_client = http2\n", "upstream_client: 'http2' is not lean or curl"},
        {"workers = 65\n", "workers"},
        {"listen = nonsense\n", "listen"},
        {"just text\n", "expected 'key = value'"},
        /* records must outlive the Operation keys Trace Core answers retries by */
        {"idempotency_ttl_s = 3600\n", "trace_core.operation_key_retention_s"},
        {"trace_core.operation_key_retention_s = 90000\n", "idempotency_ttl_s"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f)
            return;
        fputs(bad[i][0], f);
        fclose(f);
        err[0] = '\0';
        settings *s = conf_load(path, err, sizeof err);
        CHECK(s == NULL);
        CHECK(strstr(err, bad[i][1]) != NULL);
        conf_free(s);
    }
    setenv("CL_TRACE_CORE_TIMEOUT_MS", "soon", 1);
    err[0] = '\0';
    settings *s = conf_load(NULL, err, sizeof err);
    CHECK(s == NULL);
    CHECK(strstr(err, "CL_TRACE_CORE_TIMEOUT_MS") != NULL);
    conf_free(s);
    unsetenv("CL_TRACE_CORE_TIMEOUT_MS");
}

/* idempotency_ttl_s may equal or exceed the retention it must cover. */
static void test_retention(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("idempotency_ttl_s = 600\ntrace_core.operation_key_retention_s = 600\n", f);
    fclose(f);
    settings *s = load(path);
    CHECK(s && s->idempotency_ttl_s == 600 && s->trace_core_operation_key_retention_s == 600);
    conf_free(s);
    setenv("CL_IDEMPOTENCY_TTL_S", "599", 1);
    char err[512] = "";
    s = conf_load(path, err, sizeof err);
    CHECK(s == NULL);
    CHECK(strstr(err, "idempotency_ttl_s") != NULL);
    conf_free(s);
    unsetenv("CL_IDEMPOTENCY_TTL_S");
}

/* caller_token / managed_proxy are per-upstream settings: on by default only for
 * the execution factory, switched on for another upstream by its key. */
static void test_upstream_permissions(void)
{
    settings *s = load(NULL);
    CHECK(s && s->upstream_operator_integration_caller_token == 1 &&
          s->upstream_operator_integration_managed_proxy == 1);
    CHECK(s && s->upstream_vega_caller_token == 0 && s->upstream_ontology_query_managed_proxy == 0);
    conf_free(s);
    setenv("CL_UPSTREAM_VEGA_CALLER_TOKEN", "true", 1);
    setenv("CL_UPSTREAM_OPERATOR_INTEGRATION_MANAGED_PROXY", "false", 1);
    s = load(NULL);
    CHECK(s && s->upstream_vega_caller_token == 1 && s->upstream_vega_managed_proxy == 0);
    CHECK(s && s->upstream_operator_integration_managed_proxy == 0);
    conf_free(s);
    unsetenv("CL_UPSTREAM_VEGA_CALLER_TOKEN");
    unsetenv("CL_UPSTREAM_OPERATOR_INTEGRATION_MANAGED_PROXY");
}

static void test_gates(void)
{
    settings *s = load(NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK(conf_gate_open(s, NULL) == 1);
    CHECK(conf_gate_open(s, "") == 1);
    CHECK(conf_gate_open(s, "EXECUTE_SKILL_ENABLED") == 0);
    CHECK(conf_gate_open(NULL, "EXECUTE_SKILL_ENABLED") == 0);
    conf_free(s);
    setenv("EXECUTE_SKILL_ENABLED", "on", 1);
    s = load(NULL);
    CHECK(s && conf_gate_open(s, "EXECUTE_SKILL_ENABLED") == 1);
    conf_free(s);
    unsetenv("EXECUTE_SKILL_ENABLED");
    unsetenv("CL_TEST_GATE");
    CHECK(conf_gate_open(NULL, "CL_TEST_GATE") == 0);
    setenv("CL_TEST_GATE", "1", 1);
    CHECK(conf_gate_open(NULL, "CL_TEST_GATE") == 1);
    setenv("CL_TEST_GATE", "TRUE", 1);
    CHECK(conf_gate_open(NULL, "CL_TEST_GATE") == 1);
    setenv("CL_TEST_GATE", "yes", 1);
    CHECK(conf_gate_open(NULL, "CL_TEST_GATE") == 0);
    unsetenv("CL_TEST_GATE");
}

/* Relative paths in the file name places next to it; from the environment they stay
 * as given. The effective configuration masks secrets and says where each value came
 * from; a CL_* variable that names no key is reported with the nearest one. */
static void test_paths_and_effective(void)
{
    char dir[] = "/tmp/cl_test_confdir_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/cl.conf", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("tools_dir = my-tools\nlua_dir = /opt/lua\nsession_secret = s3cr3t\n"
          "state_store = redis://app:hunter2@10.0.0.9:6379/2\n",
          f);
    fclose(f);
    setenv("CL_ADMIN_TOKEN_FILE", "rel/token", 1);
    settings *s = load(path);
    CHECK(s != NULL);
    if (s) {
        char want[640]; /* room for dir and path whole: no truncation warning at -O0 */
        snprintf(want, sizeof want, "%s/my-tools", dir);
        CHECK_STR(s->tools_dir, want);
        CHECK_STR(s->lua_dir, "/opt/lua");
        CHECK_STR(s->admin_token_file, "rel/token");
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        conf_print_effective(s, m);
        fclose(m);
        snprintf(want, sizeof want, "tools_dir = %s/my-tools  # %s:1\n", dir, path);
        CHECK(strstr(text, want) != NULL);
        CHECK(strstr(text, "session_secret = ********  # ") != NULL);
        CHECK(strstr(text, "s3cr3t") == NULL);
        CHECK(strstr(text, "state_store = redis://app:***@10.0.0.9:6379/2") != NULL);
        CHECK(strstr(text, "hunter2") == NULL);
        CHECK(strstr(text, "admin.token_file = rel/token  # env CL_ADMIN_TOKEN_FILE\n") != NULL);
        CHECK(strstr(text, "language = zh-CN  # default\n") != NULL);
        free(text);
    }
    conf_free(s);
    unsetenv("CL_ADMIN_TOKEN_FILE");

    setenv("CL_TOOL_DIR", "x", 1);
    setenv("CL_SOMETHING_ELSE_ENTIRELY", "y", 1);
    char *unknown = conf_unknown_env();
    CHECK(strstr(unknown, "CL_TOOL_DIR (did you mean CL_TOOLS_DIR?)\n") != NULL);
    CHECK(strstr(unknown, "CL_SOMETHING_ELSE_ENTIRELY\n") != NULL);
    CHECK(strstr(unknown, "CL_TOOLS_DIR") == strstr(unknown, "CL_TOOLS_DIR?"));
    free(unknown);
    unsetenv("CL_TOOL_DIR");
    unsetenv("CL_SOMETHING_ELSE_ENTIRELY");
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    char path[] = "/tmp/cl_test_conf_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    close(fd);
    unset_all();
    test_round_trip(path);
    test_env_names();
    test_errors(path);
    test_retention(path);
    test_gates();
    test_upstream_permissions();
    test_paths_and_effective();
    unlink(path);
    return CHECK_DONE();
}
