/* metrics: see metrics.h. Series are kept in small arrays searched linearly: the
 * label sets are few (routes x statuses, tools x outcomes). */
#include "metrics.h"

#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Latency buckets in seconds (upper bounds; +Inf is implicit). */
static const double BUCKETS[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
#define N_BUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])

typedef struct hist {
    uint64_t counts[N_BUCKETS]; /* per bucket (not cumulative) */
    uint64_t count;
    double sum;
} hist;

typedef struct req_series {
    char *route;
    int status;
    uint64_t n;
} req_series;

typedef struct tool_series {
    char *tool;
    char *outcome;
    uint64_t n;
} tool_series;

typedef struct tool_hist {
    char *tool;
    hist total, lua, upstream, trace;
    uint64_t upstream_errors;
} tool_hist;

struct metrics {
    req_series *req;
    size_t n_req;
    tool_series *calls;
    size_t n_calls;
    tool_hist *hists;
    size_t n_hists;
};

metrics *metrics_new(void)
{
    return xcalloc(1, sizeof(metrics));
}

void metrics_free(metrics *m)
{
    size_t i;
    if (!m)
        return;
    for (i = 0; i < m->n_req; i++)
        free(m->req[i].route);
    for (i = 0; i < m->n_calls; i++) {
        free(m->calls[i].tool);
        free(m->calls[i].outcome);
    }
    for (i = 0; i < m->n_hists; i++)
        free(m->hists[i].tool);
    free(m->req);
    free(m->calls);
    free(m->hists);
    free(m);
}

void metrics_request(metrics *m, const char *route, int status)
{
    size_t i;
    for (i = 0; i < m->n_req; i++)
        if (m->req[i].status == status && !strcmp(m->req[i].route, route)) {
            m->req[i].n++;
            return;
        }
    m->req = xrealloc(m->req, (m->n_req + 1) * sizeof *m->req);
    m->req[m->n_req].route = xstrdup(route);
    m->req[m->n_req].status = status;
    m->req[m->n_req].n = 1;
    m->n_req++;
}

static tool_hist *hist_for(metrics *m, const char *tool)
{
    size_t i;
    for (i = 0; i < m->n_hists; i++)
        if (!strcmp(m->hists[i].tool, tool))
            return &m->hists[i];
    m->hists = xrealloc(m->hists, (m->n_hists + 1) * sizeof *m->hists);
    memset(&m->hists[m->n_hists], 0, sizeof *m->hists);
    m->hists[m->n_hists].tool = xstrdup(tool);
    return &m->hists[m->n_hists++];
}

static void hist_observe(hist *h, int64_t ms)
{
    double s = ms < 0 ? 0 : (double)ms / 1000.0;
    size_t b;
    for (b = 0; b < N_BUCKETS; b++)
        if (s <= BUCKETS[b]) {
            h->counts[b]++;
            break;
        }
    h->count++;
    h->sum += s;
}

void metrics_tool_call(metrics *m, const char *tool, const char *outcome, int64_t total_ms,
                       int64_t lua_ms, int64_t upstream_ms, int64_t trace_ms)
{
    size_t i;
    tool_hist *h;
    if (!outcome || !*outcome)
        outcome = "unknown";
    for (i = 0; i < m->n_calls; i++)
        if (!strcmp(m->calls[i].tool, tool) && !strcmp(m->calls[i].outcome, outcome))
            break;
    if (i == m->n_calls) {
        m->calls = xrealloc(m->calls, (m->n_calls + 1) * sizeof *m->calls);
        m->calls[i].tool = xstrdup(tool);
        m->calls[i].outcome = xstrdup(outcome);
        m->calls[i].n = 0;
        m->n_calls++;
    }
    m->calls[i].n++;
    h = hist_for(m, tool);
    hist_observe(&h->total, total_ms);
    hist_observe(&h->lua, lua_ms);
    hist_observe(&h->upstream, upstream_ms);
    hist_observe(&h->trace, trace_ms);
}

void metrics_upstream_error(metrics *m, const char *tool)
{
    hist_for(m, tool)->upstream_errors++;
}

void metrics_escape_label(buf *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            buf_puts(out, "\\\\");
        else if (*v == '"')
            buf_puts(out, "\\\"");
        else if (*v == '\n')
            buf_puts(out, "\\n");
        else
            buf_putc(out, *v);
    }
}

void metrics_write_header(buf *out, const char *name, const char *type, const char *help)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_value(buf *out, double v)
{
    if (isinf(v))
        buf_puts(out, v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(int64_t)v && fabs(v) < 9e15)
        buf_printf(out, "%lld", (long long)v);
    else {
        /* the shortest text that reads back as the same double (0.005, not 0.0050000000000000001)
         */
        char t[40];
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v)
                break;
        }
        buf_puts(out, t);
    }
}

void metrics_write_sample(buf *out, const char *name, const char *labels, double value)
{
    buf_puts(out, name);
    if (labels && *labels)
        buf_printf(out, "{%s}", labels);
    buf_putc(out, ' ');
    write_value(out, value);
    buf_putc(out, '\n');
}

void metrics_write_counter(buf *out, const char *name, const char *help, double value)
{
    metrics_write_header(out, name, "counter", help);
    metrics_write_sample(out, name, "", value);
}

void metrics_write_gauge(buf *out, const char *name, const char *help, double value)
{
    metrics_write_header(out, name, "gauge", help);
    metrics_write_sample(out, name, "", value);
}

static void write_hist(buf *out, const char *name, const char *tool, const hist *h)
{
    uint64_t cum = 0;
    size_t b;
    buf lbl = BUF_INIT;
    for (b = 0; b <= N_BUCKETS; b++) {
        buf_reset(&lbl);
        buf_puts(&lbl, "tool=\"");
        metrics_escape_label(&lbl, tool);
        buf_puts(&lbl, "\",le=\"");
        if (b < N_BUCKETS) {
            cum += h->counts[b];
            write_value(&lbl, BUCKETS[b]);
        } else {
            cum = h->count;
            buf_puts(&lbl, "+Inf");
        }
        buf_putc(&lbl, '"');
        buf_printf(out, "%s_bucket{%s} %llu\n", name, lbl.data, (unsigned long long)cum);
    }
    buf_reset(&lbl);
    buf_puts(&lbl, "tool=\"");
    metrics_escape_label(&lbl, tool);
    buf_putc(&lbl, '"');
    buf_printf(out, "%s_sum{%s} ", name, lbl.data);
    write_value(out, h->sum);
    buf_printf(out, "\n%s_count{%s} %llu\n", name, lbl.data, (unsigned long long)h->count);
    buf_free(&lbl);
}

/* The latency histograms of a tool call, each a family by tool. */
typedef struct hist_family {
    const char *name, *help;
    size_t offset; /* of its hist in tool_hist */
} hist_family;
static const hist_family HIST_FAMILIES[] = {
    {"cl_tool_call_duration_seconds", "Tool call latency, whole request.",
     offsetof(tool_hist, total)},
    {"cl_tool_lua_seconds", "Time spent running Lua per call.", offsetof(tool_hist, lua)},
    {"cl_tool_upstream_seconds", "Time spent waiting on upstreams per call.",
     offsetof(tool_hist, upstream)},
    {"cl_tool_trace_core_seconds", "Time spent waiting on BKN Trace Core per call.",
     offsetof(tool_hist, trace)},
};

void metrics_render(const metrics *m, buf *out)
{
    size_t i;
    buf lbl = BUF_INIT;
    metrics_write_header(out, "cl_http_requests_total", "counter",
                         "HTTP requests by route and status.");
    for (i = 0; i < m->n_req; i++) {
        buf_reset(&lbl);
        buf_puts(&lbl, "route=\"");
        metrics_escape_label(&lbl, m->req[i].route);
        buf_printf(&lbl, "\",status=\"%d\"", m->req[i].status);
        metrics_write_sample(out, "cl_http_requests_total", lbl.data, (double)m->req[i].n);
    }
    metrics_write_header(out, "cl_tool_calls_total", "counter", "Tool calls by tool and outcome.");
    for (i = 0; i < m->n_calls; i++) {
        buf_reset(&lbl);
        buf_puts(&lbl, "tool=\"");
        metrics_escape_label(&lbl, m->calls[i].tool);
        buf_puts(&lbl, "\",outcome=\"");
        metrics_escape_label(&lbl, m->calls[i].outcome);
        buf_putc(&lbl, '"');
        metrics_write_sample(out, "cl_tool_calls_total", lbl.data, (double)m->calls[i].n);
    }
    for (size_t f = 0; f < sizeof HIST_FAMILIES / sizeof HIST_FAMILIES[0]; f++) {
        const hist_family *hf = &HIST_FAMILIES[f];
        metrics_write_header(out, hf->name, "histogram", hf->help);
        for (i = 0; i < m->n_hists; i++)
            write_hist(out, hf->name, m->hists[i].tool,
                       (const hist *)((const char *)&m->hists[i] + hf->offset));
    }
    metrics_write_header(out, "cl_upstream_errors_total", "counter",
                         "Tool calls that ended on an upstream failure.");
    for (i = 0; i < m->n_hists; i++) {
        buf_reset(&lbl);
        buf_puts(&lbl, "tool=\"");
        metrics_escape_label(&lbl, m->hists[i].tool);
        buf_putc(&lbl, '"');
        metrics_write_sample(out, "cl_upstream_errors_total", lbl.data,
                             (double)m->hists[i].upstream_errors);
    }
    buf_free(&lbl);
}

/* ---- several workers in one exposition ---- */

/* The family a sample line belongs to: its metric name without the histogram and
 * summary suffixes when the family's TYPE says so (callers pass the name as is;
 * a sample whose stripped name was declared is matched by the caller). */
typedef struct family {
    const char *name; /* points into an input text */
    size_t name_len;
    const char *help, *type; /* whole lines, or NULL */
    size_t help_len, type_len;
    buf samples; /* this family's samples of every worker, relabelled */
} family;

static size_t metric_name_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] != '{' && s[i] != ' ')
        i++;
    return i;
}

static family *family_find(family *f, size_t nf, const char *name, size_t len)
{
    for (size_t i = 0; i < nf; i++)
        if (f[i].name_len == len && !memcmp(f[i].name, name, len))
            return &f[i];
    return NULL;
}

/* The declared family of a sample name: exact, or name minus _bucket/_sum/_count. */
static family *family_of_sample(family *f, size_t nf, const char *name, size_t len)
{
    static const char *const SUFFIXES[] = {"_bucket", "_sum", "_count"};
    family *hit = family_find(f, nf, name, len);
    if (hit)
        return hit;
    for (size_t i = 0; i < sizeof SUFFIXES / sizeof SUFFIXES[0]; i++) {
        size_t sl = strlen(SUFFIXES[i]);
        if (len > sl && !memcmp(name + len - sl, SUFFIXES[i], sl) &&
            (hit = family_find(f, nf, name, len - sl)) != NULL)
            return hit;
    }
    return NULL;
}

static family *family_add(family **f, size_t *nf, size_t *cap, const char *name, size_t len)
{
    if (*nf == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *f = xrealloc(*f, *cap * sizeof **f);
    }
    family *x = &(*f)[(*nf)++];
    memset(x, 0, sizeof *x);
    x->name = name;
    x->name_len = len;
    return x;
}

/* Appends one sample line with worker="k" as its first label. */
static void relabel(buf *out, const char *line, size_t n, int worker)
{
    size_t name = metric_name_len(line, n);
    buf_append(out, line, name);
    if (name < n && line[name] == '{') {
        buf_printf(out, "{worker=\"%d\",", worker);
        buf_append(out, line + name + 1, n - name - 1);
    } else {
        buf_printf(out, "{worker=\"%d\"}", worker);
        buf_append(out, line + name, n - name);
    }
    buf_putc(out, '\n');
}

void metrics_merge_workers(const char *const texts[], const size_t lens[], int n, buf *out)
{
    family *fams = NULL;
    size_t nf = 0, cap = 0;
    for (int w = 0; w < n; w++) {
        const char *p = texts[w], *end = p ? p + lens[w] : NULL;
        while (p && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n_line = nl ? (size_t)(nl - p) : (size_t)(end - p);
            const char *line = p;
            p += n_line + 1;
            if (n_line == 0)
                continue;
            if (line[0] == '#') {
                /* "# HELP name text" / "# TYPE name type"; other comments dropped */
                int help = n_line > 7 && !memcmp(line, "# HELP ", 7);
                int type = n_line > 7 && !memcmp(line, "# TYPE ", 7);
                if (!help && !type)
                    continue;
                const char *name = line + 7;
                size_t len = metric_name_len(name, n_line - 7);
                family *f = family_find(fams, nf, name, len);
                if (!f)
                    f = family_add(&fams, &nf, &cap, name, len);
                if (help && !f->help) {
                    f->help = line;
                    f->help_len = n_line;
                } else if (type && !f->type) {
                    f->type = line;
                    f->type_len = n_line;
                }
                continue;
            }
            size_t len = metric_name_len(line, n_line);
            family *f = family_of_sample(fams, nf, line, len);
            if (!f)
                f = family_add(&fams, &nf, &cap, line, len);
            relabel(&f->samples, line, n_line, w);
        }
    }
    for (size_t i = 0; i < nf; i++) {
        if (fams[i].help) {
            buf_append(out, fams[i].help, fams[i].help_len);
            buf_putc(out, '\n');
        }
        if (fams[i].type) {
            buf_append(out, fams[i].type, fams[i].type_len);
            buf_putc(out, '\n');
        }
        buf_append(out, fams[i].samples.data ? fams[i].samples.data : "", fams[i].samples.len);
        buf_free(&fams[i].samples);
    }
    free(fams);
}

/* ---- the process ---- */

void metrics_write_process(buf *out)
{
    char stat[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f)
        fclose(f);
    stat[n] = '\0';
    /* fields after the command, which is in parentheses and may hold spaces */
    const char *p = strrchr(stat, ')');
    unsigned long long utime = 0, stime = 0, vsize = 0;
    long long rss = 0;
    if (p && sscanf(p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                    "%*d %*u %llu %lld",
                    &utime, &stime, &vsize, &rss) == 4) {
        double tick = (double)sysconf(_SC_CLK_TCK);
        long page = sysconf(_SC_PAGESIZE);
        metrics_write_header(out, "process_cpu_seconds_total", "counter",
                             "Total user and system CPU time spent in seconds.");
        metrics_write_sample(out, "process_cpu_seconds_total", "",
                             (double)(utime + stime) / (tick > 0 ? tick : 100.0));
        metrics_write_header(out, "process_virtual_memory_bytes", "gauge",
                             "Virtual memory size in bytes.");
        metrics_write_sample(out, "process_virtual_memory_bytes", "", (double)vsize);
        metrics_write_header(out, "process_resident_memory_bytes", "gauge",
                             "Resident memory size in bytes.");
        metrics_write_sample(out, "process_resident_memory_bytes", "",
                             (double)rss * (double)(page > 0 ? page : 4096));
    }
    long fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                fds++;
        closedir(d);
        metrics_write_header(out, "process_open_fds", "gauge", "Number of open file descriptors.");
        metrics_write_sample(out, "process_open_fds", "", (double)(fds - 1)); /* minus the dir's */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        metrics_write_header(out, "process_max_fds", "gauge",
                             "Maximum number of open file descriptors.");
        metrics_write_sample(out, "process_max_fds", "",
                             rl.rlim_cur == RLIM_INFINITY ? -1.0 : (double)rl.rlim_cur);
    }
}
