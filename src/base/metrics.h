/* metrics: the counters and histograms the core records itself (requests, tool
 * calls) and a writer for the Prometheus text exposition format 0.0.4 (GET /metrics).
 * The figures other modules own (auth, trace, idem, store, tools, connections,
 * upstream health) are written at scrape time by those modules themselves
 * (<prefix>_write_metrics, with metrics_write_*); httpd.c calls them in order.
 *
 * Label values are bounded by the caller (route names, tool names of the current
 * catalogue, outcome codes), so the series count stays bounded.
 *
 * Ownership: metrics_new returns a registry the caller frees with metrics_free;
 * label strings are copied. */
#ifndef CL_METRICS_H
#define CL_METRICS_H

#include <stdint.h>

#include "util.h"

typedef struct metrics metrics;

metrics *metrics_new(void);
void metrics_free(metrics *m);

/* One finished HTTP request. */
void metrics_request(metrics *m, const char *route, int status);
/* One finished tool call: latency histograms (seconds) of the whole request, of Lua
 * and of upstream waits, by tool; the count by tool and outcome. */
void metrics_tool_call(metrics *m, const char *tool, const char *outcome, int64_t total_ms,
                       int64_t lua_ms, int64_t upstream_ms, int64_t trace_ms);
/* A tool call that ended on an upstream failure (timeout, unreachable, 5xx). */
void metrics_upstream_error(metrics *m, const char *tool);

/* Writes every recorded series (with HELP and TYPE lines). */
void metrics_render(const metrics *m, buf *out);

/* Helpers for scrape-time values. labels: "" or 'a="x",b="y"' (already escaped). */
void metrics_write_header(buf *out, const char *name, const char *type, const char *help);
void metrics_write_sample(buf *out, const char *name, const char *labels, double value);
/* A series without labels: its HELP and TYPE lines and its one sample. */
void metrics_write_counter(buf *out, const char *name, const char *help, double value);
void metrics_write_gauge(buf *out, const char *name, const char *help, double value);
/* Appends a label value escaped per the format (\\, \", \n). */
void metrics_escape_label(buf *out, const char *value);

/* The standard process series of the calling process (process_cpu_seconds_total,
 * process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
 * process_max_fds), read from /proc and getrlimit now. */
void metrics_write_process(buf *out);

/* One exposition from the texts of n workers (texts[k] is worker k's; NULL or empty
 * for a worker that has none yet): each family's HELP and TYPE once, then its
 * samples of every worker with worker="k" as the first label. Comment lines other
 * than HELP and TYPE are dropped. */
void metrics_merge_workers(const char *const texts[], const size_t lens[], int n, buf *out);

#endif
