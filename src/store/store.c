/* store: the backend-independent front of the state store (see store.h). */
#include "store.h"
#include "metrics.h"

#include <string.h>

static store_op *submit(store *s, store_kind kind, const char *key, const char *expect,
                        size_t expect_len, const char *val, size_t len, long ttl_ms,
                        store_get_cb get_cb, store_rc_cb rc_cb, void *arg)
{
    store_request req;
    memset(&req, 0, sizeof req);
    req.kind = kind;
    req.key = key;
    req.expect = expect;
    req.expect_len = expect_len;
    req.val = val;
    req.len = len;
    req.ttl_ms = ttl_ms;
    req.get_cb = get_cb;
    req.rc_cb = rc_cb;
    req.arg = arg;
    return s->vt->submit(s, &req);
}

store_op *store_get(store *s, const char *key, store_get_cb cb, void *arg)
{
    return submit(s, STORE_GET, key, NULL, 0, NULL, 0, 0, cb, NULL, arg);
}

store_op *store_set(store *s, const char *key, const char *val, size_t len, long ttl_ms,
                    store_rc_cb cb, void *arg)
{
    return submit(s, STORE_SET, key, NULL, 0, val, len, ttl_ms, NULL, cb, arg);
}

store_op *store_claim(store *s, const char *key, const char *val, size_t len, long ttl_ms,
                      store_rc_cb cb, void *arg)
{
    return submit(s, STORE_CLAIM, key, NULL, 0, val, len, ttl_ms, NULL, cb, arg);
}

store_op *store_set_if(store *s, const char *key, const char *expect, size_t expect_len,
                       const char *val, size_t len, long ttl_ms, store_rc_cb cb, void *arg)
{
    return submit(s, STORE_SET_IF, key, expect, expect_len, val, len, ttl_ms, NULL, cb, arg);
}

store_op *store_del(store *s, const char *key, store_rc_cb cb, void *arg)
{
    return submit(s, STORE_DEL, key, NULL, 0, NULL, 0, 0, NULL, cb, arg);
}

store_op *store_del_if(store *s, const char *key, const char *expect, size_t expect_len,
                       store_rc_cb cb, void *arg)
{
    return submit(s, STORE_DEL_IF, key, expect, expect_len, NULL, 0, 0, NULL, cb, arg);
}

void store_cancel(store_op *op)
{
    if (op)
        op->s->vt->cancel(op);
}

void store_stats(const store *s, store_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->ops = s->ops;
    out->errors = s->errors;
    out->evictions = s->evictions;
    out->expired = s->expired;
    out->timeouts = s->timeouts;
    out->entries = s->vt->entries(s);
}

void store_write_metrics(const store *s, buf *out)
{
    store_stats_t st;
    if (!s)
        return;
    store_stats(s, &st);
    metrics_write_counter(out, "cl_store_ops_total", "State store operations.", (double)st.ops);
    metrics_write_counter(out, "cl_store_errors_total", "State store operations that failed.",
                          (double)st.errors);
    metrics_write_gauge(out, "cl_store_entries", "State store entries.", (double)st.entries);
    metrics_write_counter(out, "cl_store_evictions_total", "Entries evicted to respect the bound.",
                          (double)st.evictions);
}

void store_free(store *s)
{
    if (s)
        s->vt->destroy(s);
}
