/* reload: reloads of the tool host's generation (tools.h).
 *
 * tools_host_reload builds a new generation and swaps it in. The host can also drive
 * reloads for operators: SIGHUP and POST /admin/reload call
 * tools_host_reload_ops / tools_host_reload_async; an optional inotify watch on the
 * tools directory only arms a debounce timer. Reloads are single-flight (a trigger
 * during a reload schedules exactly one more) and bounded: while tools_gen_live()
 * is at max_live, a reload is deferred (and retried as generations drain). Every
 * reload is logged as one JSON line on stderr ("msg":"reload"); its outcome, the
 * tools added/changed/removed by name and the errors per file are kept for
 * tools_host_status_json (GET /admin/tools) and the counters for /metrics. */
#ifndef CL_RELOAD_H
#define CL_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "tools.h"

/* Builds a complete new generation from dir. On success it becomes current, the old
 * one retires, *report (if non-NULL) gets a one-line summary ("generation 2: +1 ~0 -0")
 * and 0 is returned. On any error nothing changes, -1 is returned and *report lists
 * every "file:line: message", one per line. The caller frees *report. */
int tools_host_reload(tools_host *h, const char *dir, char **report);

/* Called on the loop after a successful swap; cur is the new current generation
 * (borrowed for the call). */
typedef void (*tools_swap_fn)(tools_gen *cur, void *arg);

typedef struct tools_ops {
    const char *dir;  /* copied */
    int watch;        /* inotify on dir (and dir/_lib) */
    long debounce_ms; /* <= 0 -> 300 */
    size_t max_live;  /* live generations that defer a reload; 0 -> 8 */
    tools_swap_fn on_swap;
    void *arg;
} tools_ops;

typedef struct tools_host_stats {
    uint64_t reloads;         /* reloads that swapped a generation in */
    uint64_t reload_failures; /* reloads rejected (any file error) */
    uint64_t reload_deferred; /* reloads put off by the live-generation cap */
    uint64_t reload_errors;   /* file:line error lines of rejected reloads */
    unsigned generation;      /* current generation id (0 = none) */
    size_t live;              /* tools_gen_live() */
    int64_t last_reload_ms;   /* wall clock of the last attempt, 0 = none */
} tools_host_stats;

/* Needs cfg->base (event loop) for the timers. Returns 0, or -1 with err filled
 * (e.g. inotify unavailable). May be called once, before or after the first load. */
int tools_host_set_ops(tools_host *h, const tools_ops *ops, char *err, size_t errlen);

enum { TOOLS_RELOAD_OK = 0, TOOLS_RELOAD_REJECTED = -1, TOOLS_RELOAD_DEFERRED = 1 };

/* Reloads ops.dir now (trigger: "admin", "SIGHUP", "inotify", ... for the log).
 * Returns TOOLS_RELOAD_*; *json (caller frees) is the reply object: {"ok", "result",
 * "generation", "report", "added", "changed", "removed", "errors", "reason"}. */
int tools_host_reload_ops(tools_host *h, const char *trigger, char **json);
/* Schedules a reload from the loop (coalesced with any pending one). */
void tools_host_reload_async(tools_host *h, const char *trigger);
void tools_host_stats_get(tools_host *h, tools_host_stats *out);
/* Those figures as /metrics series (cl_reload*_total, cl_tools_*generation*). */
void tools_host_write_metrics(tools_host *h, buf *out);
/* GET /admin/tools body: {"generation", "tools":[{name, version, file, sha256, order,
 * surfaces, kind, gate}], "live_generations", "max_live_generations", "watch",
 * "last_reload":{...}, "deferred", "errors_by_file":{file: [lines]}}. Appends to
 * *out (a util.h buf). */
struct buf;
void tools_host_status_json(tools_host *h, struct buf *out);

#endif
