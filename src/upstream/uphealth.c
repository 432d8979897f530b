/* uphealth: see uphealth.h. */
#include "uphealth.h"

#include <stdio.h>
#include <string.h>

#include "metrics.h"

#define MAX_UPSTREAMS 16
static const char *const REASONS[] = {"timeout", "unreachable", "response_too_large",
                                      "transport_error", "http_5xx"};
#define N_REASONS (sizeof REASONS / sizeof REASONS[0])

typedef struct up_entry {
    char name[64];
    int64_t last_ok_ms, last_fail_ms;
    const char *last_reason; /* one of REASONS */
    uint64_t successes;
    uint64_t failures[N_REASONS];
} up_entry;

static up_entry g_up[MAX_UPSTREAMS];
static size_t g_n;

static up_entry *entry(const char *name, int create)
{
    for (size_t i = 0; i < g_n; i++)
        if (!strcmp(g_up[i].name, name))
            return &g_up[i];
    if (!create || g_n == MAX_UPSTREAMS || strlen(name) >= sizeof g_up[0].name)
        return NULL;
    up_entry *e = &g_up[g_n++];
    memset(e, 0, sizeof *e);
    strcpy(e->name, name);
    return e;
}

void uphealth_record(const char *upstream, const char *reason, int64_t at_ms)
{
    up_entry *e = entry(upstream, 1);
    if (!e)
        return;
    if (!reason) {
        e->successes++;
        e->last_ok_ms = at_ms;
        return;
    }
    size_t r = N_REASONS - 2; /* transport_error unless named */
    for (size_t i = 0; i < N_REASONS; i++)
        if (!strcmp(REASONS[i], reason))
            r = i;
    e->failures[r]++;
    e->last_fail_ms = at_ms;
    e->last_reason = REASONS[r];
}

static void write_time(buf *out, int64_t ms)
{
    char t[25];
    if (!ms) {
        buf_puts(out, "null");
        return;
    }
    time_rfc3339(ms, t);
    buf_printf(out, "\"%s\"", t);
}

void uphealth_write_json(buf *out, const char *upstream, int configured)
{
    const up_entry *e = entry(upstream, 0);
    buf_printf(out, "{\"configured\":%s,\"last_success\":", configured ? "true" : "false");
    write_time(out, e ? e->last_ok_ms : 0);
    buf_puts(out, ",\"last_failure\":");
    write_time(out, e ? e->last_fail_ms : 0);
    buf_puts(out, ",\"last_failure_reason\":");
    if (e && e->last_reason)
        buf_printf(out, "\"%s\"", e->last_reason);
    else
        buf_puts(out, "null");
    buf_putc(out, '}');
}

void uphealth_write_metrics(buf *out)
{
    char lbl[256];
    metrics_write_header(out, "cl_upstream_successes_total", "counter",
                         "Upstream answers (2xx-4xx) by upstream.");
    for (size_t i = 0; i < g_n; i++) {
        snprintf(lbl, sizeof lbl, "upstream=\"%.63s\"", g_up[i].name);
        metrics_write_sample(out, "cl_upstream_successes_total", lbl, (double)g_up[i].successes);
    }
    metrics_write_header(out, "cl_upstream_failures_total", "counter",
                         "Upstream failures (transport errors and 5xx) by upstream and reason.");
    for (size_t i = 0; i < g_n; i++)
        for (size_t r = 0; r < N_REASONS; r++) {
            snprintf(lbl, sizeof lbl, "upstream=\"%.63s\",reason=\"%s\"", g_up[i].name, REASONS[r]);
            metrics_write_sample(out, "cl_upstream_failures_total", lbl,
                                 (double)g_up[i].failures[r]);
        }
}

void uphealth_reset(void)
{
    g_n = 0;
}
