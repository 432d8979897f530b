/* reload: operator reloads of the tool host (reload.h): single-flight, deferred while
 * too many generations are live, triggered by SIGHUP, POST /admin/reload or an
 * inotify watch with a debounce; the generation swap and its report. */
#include "reload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <event2/event.h>

#include "json.h"
#include "log.h"
#include "metrics.h"
#include "tools_impl.h"
#include "util.h"

static void ferr_clear(tools_host *h)
{
    size_t i;
    for (i = 0; i < h->n_ferr; i++) {
        free(h->ferr[i].file);
        buf_free(&h->ferr[i].lines);
    }
    free(h->ferr);
    h->ferr = NULL;
    h->n_ferr = 0;
}

/* Frees what reload.c added to h. */
void tools_reload_free(tools_host *h)
{
    if (h->run_ev)
        event_free(h->run_ev);
    if (h->debounce_ev)
        event_free(h->debounce_ev);
    if (h->retry_ev)
        event_free(h->retry_ev);
    if (h->watch_ev)
        event_free(h->watch_ev);
    if (h->watch_fd > 0)
        close(h->watch_fd);
    free(h->ops_dir);
    free(h->last_report);
    buf_free(&h->last_added);
    buf_free(&h->last_changed);
    buf_free(&h->last_removed);
    ferr_clear(h);
}

static void name_list_add(buf *b, const char *name)
{
    if (b->len)
        buf_putc(b, ',');
    json_write_string(b, name, strlen(name));
}

/* Groups "dir/file:line: message" lines by file (the name within dir, as /admin/tools
 * lists tools) for /admin/tools. */
static void ferr_record(tools_host *h, const char *dir, const char *errs)
{
    const char *p = errs;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    ferr_clear(h);
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        size_t skip = len > dl && strncmp(p, dir, dl) == 0 && p[dl] == '/' ? dl + 1 : 0;
        const char *key = p + skip;
        const char *colon = memchr(key, ':', len - skip);
        size_t flen = colon ? (size_t)(colon - key) : len - skip;
        size_t i;
        file_errors *fe = NULL;
        h->st.reload_errors++;
        for (i = 0; i < h->n_ferr; i++)
            if (strlen(h->ferr[i].file) == flen && strncmp(h->ferr[i].file, key, flen) == 0)
                fe = &h->ferr[i];
        if (!fe) {
            h->ferr = xrealloc(h->ferr, (h->n_ferr + 1) * sizeof *h->ferr);
            fe = &h->ferr[h->n_ferr++];
            fe->file = xstrndup(key, flen);
            memset(&fe->lines, 0, sizeof fe->lines);
        }
        if (fe->lines.len)
            buf_putc(&fe->lines, ',');
        json_write_string(&fe->lines, p, len);
        p = nl ? nl + 1 : NULL;
    }
}

int tools_host_reload(tools_host *h, const char *dir, char **report)
{
    buf errs = BUF_INIT;
    int64_t t0 = now_mono_ms();
    tools_gen *g = tools_gen_build(&h->cfg, dir, h->current, &errs);
    size_t i;
    int added = 0, changed = 0, removed = 0;

    h->st.last_reload_ms = now_wall_ms();
    buf_reset(&h->last_added);
    buf_reset(&h->last_changed);
    buf_reset(&h->last_removed);
    free(h->last_report);
    h->last_report = NULL;
    if (!g) {
        h->last_rc = TOOLS_RELOAD_REJECTED;
        h->st.reload_failures++;
        ferr_record(h, dir, errs.data);
        h->last_report = xstrdup(errs.data ? errs.data : "");
        h->last_duration_ms = now_mono_ms() - t0;
        if (report)
            *report = buf_steal(&errs, NULL);
        buf_free(&errs);
        return -1;
    }
    buf_free(&errs);
    g->id = h->next_id++;
    for (i = 0; i < g->nfiles; i++) {
        const char *old = tools_gen_file_hash(h->current, g->files[i].name);
        if (!old) {
            added++;
            name_list_add(&h->last_added, g->files[i].name);
        } else if (strcmp(old, g->files[i].hash) != 0) {
            changed++;
            name_list_add(&h->last_changed, g->files[i].name);
        }
    }
    if (h->current)
        for (i = 0; i < h->current->nfiles; i++)
            if (!tools_gen_file_hash(g, h->current->files[i].name)) {
                removed++;
                name_list_add(&h->last_removed, h->current->files[i].name);
            }
    tools_gen_release(h->current); /* closed now, or when its last call ends */
    h->current = g;
    h->last_rc = TOOLS_RELOAD_OK;
    h->st.reloads++;
    ferr_clear(h);
    {
        buf r = BUF_INIT;
        buf_printf(&r, "generation %u: +%d ~%d -%d", g->id, added, changed, removed);
        h->last_report = xstrdup(r.data);
        if (report)
            *report = buf_steal(&r, NULL);
        buf_free(&r);
    }
    h->last_duration_ms = now_mono_ms() - t0;
    if (h->ops_set && h->ops.on_swap)
        h->ops.on_swap(g, h->ops.arg);
    return 0;
}

/* ---- operator reloads ---- */

static size_t ops_max_live(const tools_host *h)
{
    return h->ops.max_live ? h->ops.max_live : 8;
}

static void reply_json(tools_host *h, int rc, const char *reason, buf *out)
{
    buf_printf(out, "{\"ok\":%s,\"result\":\"%s\",\"generation\":%u,\"report\":",
               rc == TOOLS_RELOAD_OK ? "true" : "false",
               rc == TOOLS_RELOAD_OK         ? "ok"
               : rc == TOOLS_RELOAD_DEFERRED ? "deferred"
                                             : "rejected",
               h->current ? h->current->id : 0);
    if (rc == TOOLS_RELOAD_DEFERRED || !h->last_report)
        json_write_string(out, reason ? reason : "", reason ? strlen(reason) : 0);
    else
        json_write_string(out, h->last_report, strlen(h->last_report));
    if (rc == TOOLS_RELOAD_OK)
        buf_printf(out, ",\"added\":[%s],\"changed\":[%s],\"removed\":[%s]",
                   h->last_added.data ? h->last_added.data : "",
                   h->last_changed.data ? h->last_changed.data : "",
                   h->last_removed.data ? h->last_removed.data : "");
    if (rc == TOOLS_RELOAD_REJECTED) {
        size_t i;
        buf_puts(out, ",\"errors\":[");
        for (i = 0; i < h->n_ferr; i++)
            buf_printf(out, "%s%s", i ? "," : "", h->ferr[i].lines.data);
        buf_putc(out, ']');
    }
    if (reason && rc == TOOLS_RELOAD_DEFERRED) {
        buf_puts(out, ",\"reason\":");
        json_write_string(out, reason, strlen(reason));
    }
    buf_putc(out, '}');
}

static void retry_cb(evutil_socket_t fd, short ev, void *arg)
{
    tools_host *h = arg;
    char trigger[32];
    (void)fd;
    (void)ev;
    snprintf(trigger, sizeof trigger, "%s", h->trigger[0] ? h->trigger : "deferred");
    tools_host_reload_async(h, trigger);
}

int tools_host_reload_ops(tools_host *h, const char *trigger, char **json)
{
    buf out = BUF_INIT;
    int rc;
    char reason[160];
    const char *dir = h->ops_set ? h->ops_dir : NULL;

    reason[0] = '\0';
    if (!dir) {
        snprintf(reason, sizeof reason, "no tools directory configured");
        rc = TOOLS_RELOAD_REJECTED;
        reply_json(h, rc, reason, &out);
        goto done;
    }
    if (h->reloading) { /* re-entered from on_swap: exactly one more afterwards */
        h->again = 1;
        snprintf(reason, sizeof reason, "a reload is running; one more is scheduled after it");
        rc = TOOLS_RELOAD_DEFERRED;
        reply_json(h, rc, reason, &out);
        goto done;
    }
    if (tools_gen_live() >= ops_max_live(h)) {
        int first = !h->deferred;
        snprintf(reason, sizeof reason,
                 "%zu live generations (max %zu): old generations still serve calls; the reload "
                 "runs when one drains",
                 tools_gen_live(), ops_max_live(h));
        snprintf(h->trigger, sizeof h->trigger, "%s", trigger);
        h->deferred = 1;
        if (first)
            h->st.reload_deferred++;
        if (h->retry_ev) {
            struct timeval tv = {0, 100 * 1000};
            evtimer_add(h->retry_ev, &tv);
        }
        rc = TOOLS_RELOAD_DEFERRED;
        reply_json(h, rc, reason, &out);
        if (!first)
            goto quiet;
        goto done;
    }
    h->reloading = 1;
    h->deferred = 0;
    snprintf(h->last_trigger, sizeof h->last_trigger, "%s", trigger);
    rc = tools_host_reload(h, dir, NULL) == 0 ? TOOLS_RELOAD_OK : TOOLS_RELOAD_REJECTED;
    reply_json(h, rc, NULL, &out);
    h->reloading = 0;
done : {
    /* the reply's members follow the trigger and the duration */
    log_line *l = log_begin(rc == TOOLS_RELOAD_OK         ? LOG_INFO
                            : rc == TOOLS_RELOAD_DEFERRED ? LOG_WARN
                                                          : LOG_ERROR,
                            "reload");
    json_value *reply = json_parse(out.data, out.len, NULL, NULL, 0);
    log_str(l, "trigger", trigger);
    log_int(l, "duration_ms", rc == TOOLS_RELOAD_DEFERRED ? 0 : h->last_duration_ms);
    log_members(l, reply);
    log_end(l);
    json_free(reply);
}
quiet:
    if (json)
        *json = buf_steal(&out, NULL);
    buf_free(&out);
    if (h->again && !h->reloading) {
        h->again = 0;
        tools_host_reload_async(h, "coalesced");
    }
    return rc;
}

static void run_cb(evutil_socket_t fd, short ev, void *arg)
{
    tools_host *h = arg;
    char trigger[32];
    (void)fd;
    (void)ev;
    h->scheduled = 0;
    snprintf(trigger, sizeof trigger, "%s", h->trigger[0] ? h->trigger : "async");
    h->trigger[0] = '\0';
    tools_host_reload_ops(h, trigger, NULL);
}

void tools_host_reload_async(tools_host *h, const char *trigger)
{
    if (!h->run_ev)
        return;
    if (h->reloading) {
        h->again = 1;
        return;
    }
    if (h->scheduled)
        return; /* coalesced with the pending one */
    h->scheduled = 1;
    snprintf(h->trigger, sizeof h->trigger, "%s", trigger);
    event_active(h->run_ev, EV_TIMEOUT, 0);
}

/* Editor and deploy temp files never trigger a reload (the loader skips them too). */
static int ignored_name(const char *n)
{
    size_t len = strlen(n);
    if (!len || n[0] == '.' || n[len - 1] == '~' || n[0] == '#')
        return 1;
    if (len >= 4 && (!strcmp(n + len - 4, ".swp") || !strcmp(n + len - 4, ".swx") ||
                     !strcmp(n + len - 4, ".tmp")))
        return 1;
    return 0;
}

static void debounce_cb(evutil_socket_t fd, short ev, void *arg)
{
    (void)fd;
    (void)ev;
    tools_host_reload_async(arg, "inotify");
}

static void watch_cb(evutil_socket_t fd, short ev, void *arg)
{
    tools_host *h = arg;
    char evbuf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    int relevant = 0;
    (void)ev;
    while ((n = read(fd, evbuf, sizeof evbuf)) > 0) {
        char *p = evbuf;
        while (p < evbuf + n) {
            const struct inotify_event *ie = (const struct inotify_event *)p;
            if (ie->len == 0 || !ignored_name(ie->name))
                relevant = 1;
            p += sizeof *ie + ie->len;
        }
    }
    if (relevant) { /* (re)start the quiet period */
        long ms = h->ops.debounce_ms > 0 ? h->ops.debounce_ms : 300;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        evtimer_add(h->debounce_ev, &tv);
    }
}

int tools_host_set_ops(tools_host *h, const tools_ops *ops, char *err, size_t errlen)
{
    const uint32_t mask =
        IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_ATTRIB;
    if (h->ops_set) {
        snprintf(err, errlen, "reload options are already set");
        return -1;
    }
    h->ops = *ops;
    h->ops_dir = xstrdup(ops->dir ? ops->dir : "tools");
    h->ops.dir = h->ops_dir;
    h->ops_set = 1;
    h->watch_fd = -1;
    if (h->cfg.base) {
        h->run_ev = event_new(h->cfg.base, -1, 0, run_cb, h);
        h->retry_ev = evtimer_new(h->cfg.base, retry_cb, h);
        h->debounce_ev = evtimer_new(h->cfg.base, debounce_cb, h);
    }
    if (ops->watch) {
        char *lib = NULL;
        if (!h->cfg.base) {
            snprintf(err, errlen, "tools.watch needs an event loop");
            return -1;
        }
        h->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (h->watch_fd < 0 || inotify_add_watch(h->watch_fd, h->ops_dir, mask) < 0) {
            snprintf(err, errlen, "tools.watch: cannot watch %s: %s", h->ops_dir, strerror(errno));
            return -1;
        }
        tools_lib_dir(h->ops_dir, &lib);
        (void)inotify_add_watch(h->watch_fd, lib, mask); /* _lib is optional */
        free(lib);
        h->watch_ev = event_new(h->cfg.base, h->watch_fd, EV_READ | EV_PERSIST, watch_cb, h);
        event_add(h->watch_ev, NULL);
    }
    return 0;
}

void tools_host_stats_get(tools_host *h, tools_host_stats *out)
{
    *out = h->st;
    out->generation = h->current ? h->current->id : 0;
    out->live = tools_gen_live();
}

void tools_host_write_metrics(tools_host *h, buf *out)
{
    tools_host_stats ts;
    tools_host_stats_get(h, &ts);
    metrics_write_counter(out, "cl_reloads_total", "Tool reloads that swapped a generation in.",
                          (double)ts.reloads);
    metrics_write_counter(out, "cl_reload_failures_total",
                          "Tool reloads rejected for file errors.", (double)ts.reload_failures);
    metrics_write_counter(out, "cl_reload_deferred_total",
                          "Tool reloads deferred by the generation cap.",
                          (double)ts.reload_deferred);
    metrics_write_counter(out, "cl_reload_errors_total",
                          "file:line errors reported by rejected reloads.",
                          (double)ts.reload_errors);
    metrics_write_gauge(out, "cl_tools_generation", "Current tool generation.", ts.generation);
    metrics_write_gauge(out, "cl_tools_live_generations", "Tool generations not yet closed.",
                        (double)ts.live);
}

static const char *const SURFACE_NAMES[] = {"mcp", "compact", "rest", "ptc", "proxy", "gateway"};

void tools_host_status_json(tools_host *h, buf *out)
{
    tools_gen *g = h->current;
    size_t i;
    buf_printf(out, "{\"generation\":%u,\"tools_dir\":", g ? g->id : 0);
    json_write_string(out, h->ops_dir ? h->ops_dir : "", h->ops_dir ? strlen(h->ops_dir) : 0);
    buf_puts(out, ",\"tools\":[");
    for (i = 0; g && i < g->n; i++) {
        const tools_info *t = &g->infos[i];
        const char *hash = tools_gen_file_hash(g, t->name);
        int s, first = 1;
        buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        json_write_string(out, t->name, strlen(t->name));
        buf_puts(out, ",\"version\":");
        json_write_string(out, t->version, strlen(t->version));
        buf_printf(out, ",\"file\":\"%s.lua\",\"sha256\":\"%s\",\"order\":%d,\"kind\":\"%s\"",
                   t->name, hash ? hash : "", t->order, t->kind);
        buf_puts(out, ",\"surfaces\":[");
        for (s = 0; s < (int)(sizeof SURFACE_NAMES / sizeof SURFACE_NAMES[0]); s++)
            if (t->surfaces & (1u << s)) {
                buf_printf(out, "%s\"%s\"", first ? "" : ",", SURFACE_NAMES[s]);
                first = 0;
            }
        buf_puts(out, "],\"gate\":");
        if (t->gate)
            json_write_string(out, t->gate, strlen(t->gate));
        else
            buf_puts(out, "null");
        buf_putc(out, '}');
    }
    buf_printf(out, "],\"live_generations\":%zu,\"max_live_generations\":%zu,\"watch\":%s",
               tools_gen_live(), ops_max_live(h), h->watch_fd > 0 ? "true" : "false");
    buf_printf(out, ",\"reloads\":%llu,\"reload_failures\":%llu,\"reload_deferred\":%llu",
               (unsigned long long)h->st.reloads, (unsigned long long)h->st.reload_failures,
               (unsigned long long)h->st.reload_deferred);
    buf_puts(out, ",\"deferred\":");
    if (h->deferred)
        buf_printf(out,
                   "{\"reason\":\"%zu live generations (max %zu): old generations still serve "
                   "calls; the reload runs when one drains\"}",
                   tools_gen_live(), ops_max_live(h));
    else
        buf_puts(out, "null");
    buf_puts(out, ",\"last_reload\":");
    if (!h->st.last_reload_ms) {
        buf_puts(out, "null");
    } else {
        buf_printf(out, "{\"at_ms\":%lld,\"trigger\":", (long long)h->st.last_reload_ms);
        json_write_string(out, h->last_trigger[0] ? h->last_trigger : "start",
                          strlen(h->last_trigger[0] ? h->last_trigger : "start"));
        buf_printf(out, ",\"result\":\"%s\",\"duration_ms\":%lld,\"report\":",
                   h->last_rc == TOOLS_RELOAD_OK ? "ok" : "rejected",
                   (long long)h->last_duration_ms);
        json_write_string(out, h->last_report ? h->last_report : "",
                          h->last_report ? strlen(h->last_report) : 0);
        buf_printf(out, ",\"added\":[%s],\"changed\":[%s],\"removed\":[%s]}",
                   h->last_added.data ? h->last_added.data : "",
                   h->last_changed.data ? h->last_changed.data : "",
                   h->last_removed.data ? h->last_removed.data : "");
    }
    buf_puts(out, ",\"errors_by_file\":{");
    for (i = 0; i < h->n_ferr; i++) {
        if (i)
            buf_putc(out, ',');
        json_write_string(out, h->ferr[i].file, strlen(h->ferr[i].file));
        buf_printf(out, ":[%s]", h->ferr[i].lines.data ? h->ferr[i].lines.data : "");
    }
    buf_puts(out, "}}");
}
