/* tools: Lua tool generations (SPEC §10, DESIGN §4).
 *
 * A generation is one sandboxed lua_State holding every tools/NAME.lua file of a
 * directory, loaded and validated together (lua/contract.lua, lua/schema.lua).
 * The host keeps a current generation; callers acquire it for the length of a
 * call (refcount) so that a reload never changes code under a running call; a
 * retired generation is closed when its last reference is released.
 *
 * Ownership: tools_info pointers and their strings belong to the generation and
 * live as long as the caller holds a reference to it. */
#ifndef CL_TOOLS_H
#define CL_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "fetch.h"

typedef enum { LANG_ZH_CN = 0, LANG_EN_US = 1, LANG_COUNT = 2 } lang_id;

enum {
    SURFACE_MCP = 1,     /* listed on /mcp */
    SURFACE_COMPACT = 2, /* listed on /mcp-compact */
    SURFACE_REST = 4,    /* POST /kn/<name> */
    SURFACE_PTC = 8,     /* /mcp/ptc */
    SURFACE_PROXY = 16   /* POST /mcp/proxy/{mcp_id}/tools/{tool_name}/call */
};

typedef struct tools_info {
    const char *name;
    const char *version;
    const char *kind;       /* "read" | "execute" */
    const char *group;      /* may be NULL */
    int order;              /* 0 = unordered */
    const char *gate;       /* feature switch name, or NULL */
    int gate_open;          /* the switch, resolved once when the generation loads */
    const char *rest_alias; /* extra REST name (e.g. "logic-property-resolver"), or NULL */
    unsigned surfaces;      /* SURFACE_* bits */
    int toon;               /* 1 when "toon" is among formats */
    /* The tools/list entry of this tool as a JSON object text, per language:
     * name, title, description, inputSchema, outputSchema (when declared),
     * annotations, _meta {openbkn.ai/group, group_title, order}. Schemas are written
     * with sorted keys. */
    const char *list_json[LANG_COUNT];
} tools_info;

typedef struct tools_upstream {
    const char *name;     /* e.g. "ontology_query" */
    const char *base_url; /* e.g. "http://127.0.0.1:9100/api/ontology-query" (no trailing /) */
    long timeout_ms;
} tools_upstream;

typedef struct tools_config {
    const char *lua_dir;  /* trusted runtime dir (lua/) */
    size_t mem_cap_bytes; /* per call; 0 -> 64 MiB */
    long instr_budget;    /* per call, VM instructions; 0 -> 100 million */
    const tools_upstream *upstreams;
    size_t n_upstreams;
    size_t max_response_bytes; /* cap for ctx.http responses; 0 -> fetch default */
    fetch_ctx *fetch;          /* NULL in offline checks */
    struct event_base *base;   /* NULL in offline checks */
    const settings *settings;  /* for the tools' gates; not copied, outlives the host;
                                  may be NULL (conf_gate_open) */
} tools_config;

typedef struct tools_host tools_host;
typedef struct tools_gen tools_gen;

/* cfg is copied (strings too). */
tools_host *tools_host_new(const tools_config *cfg);
/* Frees the host; every generation must have been released. */
void tools_host_free(tools_host *h);

/* Builds a complete new generation from dir. On success it becomes current, the old
 * one retires, *report (if non-NULL) gets a one-line summary ("generation 2: +1 ~0 -0")
 * and 0 is returned. On any error nothing changes, -1 is returned and *report lists
 * every "file:line: message", one per line. The caller frees *report. */
int tools_host_reload(tools_host *h, const char *dir, char **report);

/* Current generation with a reference taken (NULL before the first load). */
tools_gen *tools_host_acquire(tools_host *h);
void tools_gen_release(tools_gen *g);
unsigned tools_gen_id(const tools_gen *g);
size_t tools_gen_count(const tools_gen *g);
/* Ordered by order (unordered last), then name. */
const tools_info *tools_gen_info(const tools_gen *g, size_t i);
const tools_info *tools_gen_find(const tools_gen *g, const char *name);
/* Finds by name or rest_alias. */
const tools_info *tools_gen_find_rest(const tools_gen *g, const char *name);

/* ---- operator reloads (SPEC §10, DESIGN §5) ----
 *
 * The host can also drive reloads for operators: SIGHUP and POST /admin/reload call
 * tools_host_reload_ops / tools_host_reload_async; an optional inotify watch on the
 * tools directory only arms a debounce timer. Reloads are single-flight (a trigger
 * during a reload schedules exactly one more) and bounded: while tools_gen_live()
 * is at max_live, a reload is deferred (and retried as generations drain). Every
 * reload is logged as one JSON line on stderr ("msg":"reload"); its outcome, the
 * tools added/changed/removed by name and the errors per file are kept for
 * tools_host_status_json (GET /admin/tools) and the counters for /metrics. */

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
/* GET /admin/tools body: {"generation", "tools":[{name, version, file, sha256, order,
 * surfaces, kind, gate}], "live_generations", "max_live_generations", "watch",
 * "last_reload":{...}, "deferred", "errors_by_file":{file: [lines]}}. Appends to
 * *out (a util.h buf). */
struct buf;
void tools_host_status_json(tools_host *h, struct buf *out);

/* Offline validation (--check-tools): loads dir with the same loader and contract.
 * Returns the number of errors (0 = valid); *report lists them, or a summary. */
int tools_check_dir(const tools_config *cfg, const char *dir, char **report);

#endif
