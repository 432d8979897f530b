#include "conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef enum { T_STR, T_PATH, T_INT, T_BOOL, T_LANG, T_ADDR, T_WORKERS, T_CLIENT } conf_type;

typedef struct conf_key {
    const char *key;
    const char *env; /* NULL -> CL_<KEY> */
    conf_type type;
    const char *def;
    const char *doc;
    size_t off; /* of the member in settings */
} conf_key;

/* The one list of keys (CONF_KEYS in conf.h). etc/context-loader.conf documents the
 * same keys. */
static const conf_key KEYS[] = {
#define CONF_ROW(member, key, env, type, def, doc)                                                 \
    {key, env, T_##type, def, doc, offsetof(settings, member)},
    CONF_KEYS(CONF_ROW)
#undef CONF_ROW
};

#define N_KEYS (sizeof(KEYS) / sizeof(KEYS[0]))

/* The settings first, so that conf_free can find the texts they point into. */
typedef struct conf_store {
    settings s;
    char *values[N_KEYS];
    char *origins[N_KEYS]; /* "FILE:LINE" or "env NAME"; NULL = the default */
} conf_store;

/* Only the file loader names keys by text. */
static int key_index(const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].key, key) == 0)
            return (int)i;
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
    case T_CLIENT:
        if (strcmp(v, "lean") && strcmp(v, "curl")) {
            snprintf(err, errlen, "config key %s: '%s' is not lean or curl", k->key, v);
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
    case T_PATH:
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

/* A relative path read from the file names a place next to the file, not in the
 * working directory of whoever starts the service. Other values are copied. */
static char *join_dir(const char *file, const char *val, conf_type type)
{
    const char *slash = strrchr(file, '/');
    if (type != T_PATH || !*val || val[0] == '/' || !slash)
        return xstrdup(val);
    size_t dir = (size_t)(slash - file);
    char *out = xmalloc(dir + 1 + strlen(val) + 1);
    memcpy(out, file, dir);
    out[dir] = '/';
    strcpy(out + dir + 1, val);
    return out;
}

/* The nearest key name to an unknown one, when it is close enough to be a slip. */
static const char *nearest_key(const char *key);

/* One problem: a line of its own in *errs, counted in *n. */
static void add_error(buf *errs, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_error(buf *errs, int *n, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    buf_printf(errs, "%s\n", msg);
    (*n)++;
}

/* Reads every line of the file; a line that is wrong is reported ("FILE:LINE:
 * message") and skipped, so that one pass finds every mistake. */
static void load_file(conf_store *c, const char *path, buf *errs, int *n)
{
    char line[4096];
    int lineno = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        add_error(errs, n, "cannot open config %s: %s", path, strerror(errno));
        return;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            add_error(errs, n, "%s:%d: expected 'key = value'", path, lineno);
            continue;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        int i = key_index(key);
        if (i < 0) {
            const char *near = nearest_key(key);
            if (near)
                add_error(errs, n, "%s:%d: unknown config key '%s' (did you mean %s?)", path,
                          lineno, key, near);
            else
                add_error(errs, n, "%s:%d: unknown config key '%s'", path, lineno, key);
            continue;
        }
        char msg[512];
        if (check_value(&KEYS[i], val, msg, sizeof msg) < 0) {
            add_error(errs, n, "%s:%d: %s", path, lineno, msg);
            continue;
        }
        free(c->values[i]);
        c->values[i] = join_dir(path, val, KEYS[i].type);
        free(c->origins[i]);
        char where[600];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        c->origins[i] = xstrdup(where);
    }
    fclose(f);
}

static int parse_bool(const char *v)
{
    return str_ieq(v, "true") || !strcmp(v, "1") || str_ieq(v, "yes") || str_ieq(v, "on");
}

/* The checked text of key i into its member. */
static void set_member(settings *s, size_t i, const char *v)
{
    void *m = (char *)s + KEYS[i].off;
    switch (KEYS[i].type) {
    case T_INT:
        *(long *)m = strtol(v, NULL, 10);
        break;
    case T_BOOL:
        *(int *)m = parse_bool(v);
        break;
    case T_WORKERS:
        *(int *)m = strcmp(v, "auto") ? (int)strtol(v, NULL, 10) : 0;
        break;
    case T_STR:
    case T_PATH:
    case T_LANG:
    case T_ADDR:
    case T_CLIENT:
        *(const char **)m = v;
        break;
    }
}

/* A retry that finds no idempotency record but an Operation Trace Core still
 * answers for gets no result, only operation_already_executed: records must live at
 * least as long as Trace Core keeps Operation keys. */
static int check_retention(const settings *s, char *err, size_t errlen)
{
    if (s->idempotency_ttl_s >= s->trace_core_operation_key_retention_s)
        return 0;
    snprintf(err, errlen,
             "config key idempotency_ttl_s: %ld is less than trace_core.operation_key_retention_s "
             "(%ld): idempotency records must be kept at least as long as Trace Core keeps "
             "Operation keys, or a retry gets no result",
             (long)s->idempotency_ttl_s, (long)s->trace_core_operation_key_retention_s);
    return -1;
}

settings *conf_load_all(const char *path, char **errors, int *n_errors)
{
    conf_store *c = xcalloc(1, sizeof *c);
    buf errs = BUF_INIT;
    int n = 0;
    for (size_t i = 0; i < N_KEYS; i++)
        c->values[i] = xstrdup(KEYS[i].def);
    if (path)
        load_file(c, path, &errs, &n);
    for (size_t i = 0; i < N_KEYS; i++) {
        char name[128];
        env_name(&KEYS[i], name, sizeof name);
        const char *v = getenv(name);
        if (!v)
            continue;
        char msg[512];
        if (check_value(&KEYS[i], v, msg, sizeof msg) < 0) {
            add_error(&errs, &n, "environment %s: %s", name, msg);
            continue;
        }
        free(c->values[i]);
        c->values[i] = xstrdup(v);
        free(c->origins[i]);
        char where[160];
        snprintf(where, sizeof where, "env %s", name);
        c->origins[i] = xstrdup(where);
    }
    for (size_t i = 0; i < N_KEYS; i++)
        set_member(&c->s, i, c->values[i]);
    char msg[1024];
    if (check_retention(&c->s, msg, sizeof msg) < 0)
        conf_add_key_error(&c->s, msg, &errs, &n);
    *errors = errs.data ? errs.data : xstrdup("");
    *n_errors = n;
    return &c->s;
}

settings *conf_load(const char *path, char *err, size_t errlen)
{
    char *errors = NULL;
    int n = 0;
    settings *s = conf_load_all(path, &errors, &n);
    if (n) {
        size_t len = strlen(errors);
        if (len && errors[len - 1] == '\n')
            errors[len - 1] = '\0';
        snprintf(err, errlen, "%s", errors);
        conf_free(s);
        s = NULL;
    }
    free(errors);
    return s;
}

const char *conf_origin(const settings *s, const char *key)
{
    const conf_store *c = (const conf_store *)s;
    int i = key_index(key);
    return (c && i >= 0) ? c->origins[i] : NULL;
}

void conf_add_key_error(const settings *s, const char *msg, buf *errs, int *n)
{
    char key[128] = "";
    const char *p = strncmp(msg, "config key ", 11) ? NULL : msg + 11;
    const char *colon = p ? strchr(p, ':') : NULL;
    if (colon && (size_t)(colon - p) < sizeof key) {
        memcpy(key, p, (size_t)(colon - p));
        key[colon - p] = '\0';
    }
    const char *where = *key ? conf_origin(s, key) : NULL;
    if (where && !strncmp(where, "env ", 4))
        add_error(errs, n, "environment %s: %s", where + 4, msg);
    else if (where)
        add_error(errs, n, "%s: %s", where, msg);
    else
        add_error(errs, n, "%s", msg);
}

void conf_free(settings *s)
{
    conf_store *c = (conf_store *)s;
    if (!c)
        return;
    for (size_t i = 0; i < N_KEYS; i++) {
        free(c->values[i]);
        free(c->origins[i]);
    }
    free(c);
}

int conf_gate_open(const settings *s, const char *gate)
{
    if (!gate || !*gate)
        return 1;
    if (strcmp(gate, "EXECUTE_SKILL_ENABLED") == 0)
        return s && s->execute_skill_enabled;
    const char *v = getenv(gate); /* other switches: the environment, off unless truthy */
    return v && (str_ieq(v, "true") || !strcmp(v, "1"));
}

size_t conf_key_count(void)
{
    return N_KEYS;
}

const char *conf_key_name(size_t i)
{
    return i < N_KEYS ? KEYS[i].key : NULL;
}

void conf_key_env(size_t i, char *out, size_t outlen)
{
    if (i < N_KEYS)
        env_name(&KEYS[i], out, outlen);
    else if (outlen)
        *out = '\0';
}

void conf_print_reference(void)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        char name[128];
        env_name(&KEYS[i], name, sizeof name);
        printf("%-40s %-36s default=%s\n    %s\n", KEYS[i].key, name, KEYS[i].def, KEYS[i].doc);
    }
}

/* ---- the effective configuration ---- */

static int is_secret(const conf_key *k)
{
    return strstr(k->key, "secret") != NULL || strstr(k->key, "password") != NULL;
}

void conf_print_effective(const settings *s, FILE *out)
{
    const conf_store *c = (const conf_store *)s;
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *v = c->values[i];
        fprintf(out, "%s = ", KEYS[i].key);
        if (is_secret(&KEYS[i]) && *v)
            fputs("********", out);
        else {
            char shown[4096];
            url_redact(v, shown, sizeof shown);
            fputs(shown, out);
        }
        fprintf(out, "  # %s\n", c->origins[i] ? c->origins[i] : "default");
    }
}

/* Levenshtein distance of two short names, capped at 9. */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 9;
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] > 9 ? 9 : row[lb];
}

static const char *nearest_key(const char *key)
{
    int best = 4;
    const char *near = NULL;
    for (size_t i = 0; i < N_KEYS; i++) {
        int d = distance(key, KEYS[i].key);
        if (d < best) {
            best = d;
            near = KEYS[i].key;
        }
    }
    return near;
}

extern char **environ;

char *conf_unknown_env(void)
{
    buf out = BUF_INIT;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "CL_", 3) != 0 || (size_t)(eq - *e) >= 128)
            continue;
        char name[128];
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        int known = 0, best = 9;
        char near[128] = "";
        for (size_t i = 0; i < N_KEYS && !known; i++) {
            char k[128];
            env_name(&KEYS[i], k, sizeof k);
            if (!strcmp(k, name)) {
                known = 1;
            } else {
                int d = distance(name, k);
                if (d < best) {
                    best = d;
                    snprintf(near, sizeof near, "%s", k);
                }
            }
        }
        if (known)
            continue;
        if (best <= 3)
            buf_printf(&out, "%s (did you mean %s?)\n", name, near);
        else
            buf_printf(&out, "%s\n", name);
    }
    if (!out.data)
        return xstrdup("");
    return out.data;
}
