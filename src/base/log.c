#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

struct log_line {
    buf b;
    int shared; /* the reused line */
};

static int g_worker = -1;
static const char *g_role;
static int g_fd = 2;
static log_line g_line = {BUF_INIT, 1};
static int g_line_busy;

static const char *const LEVELS[] = {"debug", "info", "warn", "error"};

void log_set_worker(int index)
{
    g_worker = index;
}

void log_set_role(const char *role)
{
    g_role = role;
}

void log_set_fd(int fd)
{
    g_fd = fd;
}

int log_level_parse(const char *name, log_level *out)
{
    for (size_t i = 0; name && i < sizeof LEVELS / sizeof LEVELS[0]; i++)
        if (!strcmp(name, LEVELS[i])) {
            *out = (log_level)i;
            return 0;
        }
    return -1;
}

static void put_key(log_line *l, const char *key)
{
    buf_putc(&l->b, ',');
    json_write_string(&l->b, key, strlen(key));
    buf_putc(&l->b, ':');
}

/* {"ts":"2026-12-03T13:10:05.123Z" (RFC 3339, UTC, milliseconds). The formatted
 * second is kept: most lines of a busy second share it. */
static void write_ts(buf *b, int64_t ms)
{
    static int64_t cached_s = -1;
    static char cached[25];
    int64_t sec = ms / 1000;
    if (sec != cached_s) {
        time_rfc3339(sec * 1000, cached);
        cached[19] = '\0';
        cached_s = sec;
    }
    buf_printf(b, "{\"ts\":\"%s.%03dZ\"", cached, (int)(ms % 1000));
}

log_line *log_begin(log_level level, const char *msg)
{
    log_line *l = &g_line;
    if (g_line_busy) {
        l = xcalloc(1, sizeof *l);
    } else {
        g_line_busy = 1;
        buf_reset(&l->b);
    }
    if ((unsigned)level >= sizeof LEVELS / sizeof LEVELS[0])
        level = LOG_ERROR;
    write_ts(&l->b, now_wall_ms());
    if (g_worker >= 0)
        buf_printf(&l->b, ",\"worker\":%d", g_worker);
    buf_printf(&l->b, ",\"level\":\"%s\"", LEVELS[level]);
    log_str(l, "role", g_role);
    log_str(l, "msg", msg ? msg : "");
    return l;
}

void log_str(log_line *l, const char *key, const char *s)
{
    if (!s)
        return;
    log_strn(l, key, s, strlen(s));
}

void log_strn(log_line *l, const char *key, const char *s, size_t n)
{
    const char *nul = s ? memchr(s, '\0', n) : NULL;
    if (!s)
        return;
    if (nul)
        n = (size_t)(nul - s);
    put_key(l, key);
    if (json_utf8_valid(s, n)) {
        json_write_string(&l->b, s, n);
        return;
    }
    char *copy = xstrndup(s, n); /* invalid bytes (a cut or foreign text) are dropped */
    json_utf8_scrub(copy);
    json_write_string(&l->b, copy, strlen(copy));
    free(copy);
}

void log_int(log_line *l, const char *key, long long v)
{
    put_key(l, key);
    buf_printf(&l->b, "%lld", v);
}

void log_bool(log_line *l, const char *key, int v)
{
    put_key(l, key);
    buf_puts(&l->b, v ? "true" : "false");
}

void log_value(log_line *l, const char *key, const json_value *v)
{
    put_key(l, key);
    if (v)
        json_write(&l->b, v, 0);
    else
        buf_puts(&l->b, "null");
}

void log_members(log_line *l, const json_value *obj)
{
    if (json_typeof(obj) != JSON_OBJECT)
        return;
    for (size_t i = 0; i < json_count(obj); i++) {
        size_t klen = 0;
        const char *k = json_key_at(obj, i, &klen);
        buf_putc(&l->b, ',');
        json_write_string(&l->b, k, klen);
        buf_putc(&l->b, ':');
        json_write(&l->b, json_val_at(obj, i), 0);
    }
}

void log_end(log_line *l)
{
    buf_puts(&l->b, "}\n");
    for (size_t done = 0; done < l->b.len;) {
        ssize_t k = write(g_fd, l->b.data + done, l->b.len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        done += (size_t)k;
    }
    if (l->shared) {
        g_line_busy = 0;
        return;
    }
    buf_free(&l->b);
    free(l);
}

void log_fatal(const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_line *l = log_begin(LOG_ERROR, "fatal");
    log_str(l, "error", text);
    log_end(l);
}
