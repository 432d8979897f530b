/* tools_impl.h: the insides of a tool host and its generations, shared by tools.c
 * (generations: loading, lifetime, look-ups) and reload.c (operator reloads: the
 * single-flight reload, the generation swap and its report). No other module
 * includes it.
 *
 * Ownership: a tools_host owns its config copy, its current generation (one
 * reference) and every string and event below. */
#ifndef CL_TOOLS_IMPL_H
#define CL_TOOLS_IMPL_H

#include "lvm.h"
#include "reload.h"
#include "tools.h"
#include "util.h"

typedef struct tool_file {
    char *name; /* file name without .lua */
    char hash[65];
} tool_file;

struct tools_gen {
    unsigned id;
    int refs;
    const tools_config *cfg; /* the host's copy (or the checker's); outlives the gen */
    lvm *vm;
    int host_ref;
    tools_info *infos;
    size_t n;
    tool_file *files;
    size_t nfiles;
    char runtime[65]; /* digest of lua/ and tools/_lib/ sources this generation loaded */
    /* The lifecycle tools' tools/list entries per language (lua/lifecycle.lua), two
     * JSON objects separated by one comma. */
    char *lifecycle_json[LANG_COUNT];
};

/* Errors of the last rejected reload of one file ("file:line: message" lines). */
typedef struct file_errors {
    char *file;
    buf lines;
} file_errors;

struct tools_host {
    tools_config cfg;
    tools_upstream *ups;
    tools_gen *current;
    unsigned next_id;
    /* operator reloads (tools_host_set_ops) */
    int ops_set;
    tools_ops ops;
    char *ops_dir;
    struct event *run_ev;      /* a scheduled reload */
    struct event *debounce_ev; /* inotify quiet period */
    struct event *retry_ev;    /* a deferred reload */
    struct event *watch_ev;
    int watch_fd;
    int reloading, again, scheduled, deferred;
    char trigger[32];
    tools_host_stats st;
    /* the last attempt */
    int last_rc;
    int64_t last_duration_ms;
    char last_trigger[32];
    char *last_report;
    buf last_added, last_changed, last_removed; /* JSON string lists, no brackets */
    file_errors *ferr;
    size_t n_ferr;
};

/* Builds a generation from dir (tools.c). Returns NULL when anything failed; every
 * problem is appended to errs as "file:line: message\n". prev (may be NULL): the
 * generation being replaced, whose catalogue entries are reused for unchanged files.
 * The result holds no reference yet (refs == 0). */
tools_gen *tools_gen_build(const tools_config *cfg, const char *dir, const tools_gen *prev,
                           buf *errs);
/* The sha256 hex of the file name.lua in g, or NULL (also when g is NULL). Borrowed
 * from g. */
const char *tools_gen_file_hash(const tools_gen *g, const char *name);
/* dir "/_lib" (caller frees *out). */
void tools_lib_dir(const char *dir, char **out);
/* Frees what reload.c added to h (events, the inotify watch, the last report). */
void tools_reload_free(tools_host *h);

#endif
