#include "guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errenv.h"

/* The catalogue text id in the refusal's language. */
#define T(why, id) text_get(TEXT_##id, (why)->lang)

static int refuse(guard_refusal *why, const char *code, const char *mcp_action,
                  const char *rest_action, int status, const char *msg)
{
    why->code = code;
    why->mcp_action = mcp_action;
    why->rest_action = rest_action;
    why->rest_status = status;
    why->retryable = 0;
    snprintf(why->message, sizeof why->message, "%s", msg);
    json_utf8_scrub(why->message);
    return -1;
}

static int invalid_context(guard_refusal *why, const char *msg)
{
    return refuse(why, "invalid_business_context", "correct_bkn_context", "correct_bkn_context",
                  400, msg);
}

/* ref_type -> (ref_id prefix, minimum segment count). */
static const struct {
    const char *type, *prefix;
    int min_segments;
} REF_TYPES[] = {
    {"knowledge_network", "kn", 2},
    {"object_type", "object", 3},
    {"object_instance", "object_instance", 4},
    {"property", "property", 4},
    {"relation_type", "relation", 3},
    {"data_resource", "resource", 2},
    {"metric", "metric", 3},
    {"logic", "logic", 3},
    {"function", "function", 3},
    {"action_type", "action_type", 3},
    {"action_instance", "action_instance", 4},
};

static int bad_ref(guard_refusal *why, size_t i, const char *msg)
{
    char m[sizeof why->message];
    snprintf(m, sizeof m, T(why, GUARD_REF_AT), i, msg);
    return refuse(why, "invalid_business_ref", "correct_business_refs", "correct_business_refs",
                  400, m);
}

static int check_ref_id(const char *id, size_t idlen, const char *prefix, int min_segments,
                        int needs_kn, const char *kn_id, lang_id lang, char *err, size_t errlen)
{
    if (idlen > 512) {
        snprintf(err, errlen, "%s", text_get(TEXT_GUARD_REF_ID_LONG, lang));
        return -1;
    }
    int seg = 0;
    const char *p = id, *end = id + idlen;
    while (p <= end) {
        const char *q = memchr(p, ':', (size_t)(end - p));
        if (!q)
            q = end;
        size_t n = (size_t)(q - p);
        if (n == 0) {
            snprintf(err, errlen, "%s", text_get(TEXT_GUARD_REF_ID_EMPTY_SEGMENT, lang));
            return -1;
        }
        if (seg == 0 && (strlen(prefix) != n || memcmp(p, prefix, n) != 0)) {
            snprintf(err, errlen, text_get(TEXT_GUARD_REF_ID_PREFIX, lang), prefix);
            return -1;
        }
        if (seg == 1 && needs_kn && kn_id && (strlen(kn_id) != n || memcmp(p, kn_id, n) != 0)) {
            snprintf(err, errlen, text_get(TEXT_GUARD_REF_ID_KN, lang), kn_id);
            return -1;
        }
        seg++;
        p = q + 1;
    }
    if (seg < min_segments) {
        snprintf(err, errlen, text_get(TEXT_GUARD_REF_ID_SEGMENTS, lang), min_segments);
        return -1;
    }
    return 0;
}

static int parse_refs(const json_value *refs, const char *kn_id, json_value **out,
                      guard_refusal *why)
{
    if (json_typeof(refs) != JSON_ARRAY)
        return bad_ref(why, 0, T(why, GUARD_REFS_ARRAY));
    size_t n = json_count(refs);
    if (n > 64)
        return bad_ref(why, 64, T(why, GUARD_REFS_MAX));
    json_value *list = json_new_array();
    for (size_t i = 0; i < n; i++) {
        const json_value *r = json_at(refs, i);
        if (json_typeof(r) != JSON_OBJECT) {
            bad_ref(why, i, T(why, GUARD_REF_OBJECT));
            goto fail;
        }
        for (size_t k = 0; k < json_count(r); k++) {
            const char *key = json_key_at(r, k, NULL);
            if (strcmp(key, "ref_type") && strcmp(key, "ref_id") && strcmp(key, "version")) {
                char m[320];
                snprintf(m, sizeof m, T(why, GUARD_REF_FIELD), key);
                bad_ref(why, i, m);
                goto fail;
            }
        }
        const char *type = json_get_string(r, "ref_type");
        size_t idlen = 0;
        const json_value *idv = json_get(r, "ref_id");
        const char *id = idv && json_typeof(idv) == JSON_STRING ? json_get_str(idv, &idlen) : NULL;
        const json_value *verv = json_get(r, "version");
        const char *version = "unversioned";
        if (verv) {
            if (json_typeof(verv) != JSON_STRING) {
                bad_ref(why, i, T(why, GUARD_REF_VERSION_TYPE));
                goto fail;
            }
            size_t vlen;
            version = json_get_str(verv, &vlen);
            if (vlen == 0)
                version = "unversioned";
            else if (vlen > 128) {
                bad_ref(why, i, T(why, GUARD_REF_VERSION_LONG));
                goto fail;
            }
        }
        int t = -1;
        for (size_t j = 0; type && j < sizeof REF_TYPES / sizeof REF_TYPES[0]; j++)
            if (!strcmp(type, REF_TYPES[j].type))
                t = (int)j;
        if (t < 0) {
            bad_ref(why, i, T(why, GUARD_REF_TYPE));
            goto fail;
        }
        if (!id) {
            bad_ref(why, i, T(why, GUARD_REF_ID_TYPE));
            goto fail;
        }
        char err[400];
        if (check_ref_id(id, idlen, REF_TYPES[t].prefix, REF_TYPES[t].min_segments,
                         strcmp(type, "data_resource") != 0, kn_id, why->lang, err,
                         sizeof err) < 0) {
            bad_ref(why, i, err);
            goto fail;
        }
        /* Compared member by member: a joined-text search missed a duplicate of the
         * latest ref and could confuse ids holding the separators (fuzz_guard). */
        int dup = 0;
        for (size_t j = 0; j < json_count(list) && !dup; j++) {
            const json_value *o = json_at(list, j);
            size_t olen;
            const char *oid = json_get_str(json_get(o, "ref_id"), &olen);
            dup = !strcmp(json_get_string(o, "ref_type"), type) && olen == idlen &&
                  !memcmp(oid, id, idlen) && !strcmp(json_get_string(o, "version"), version);
        }
        if (dup)
            continue;
        json_value *o = json_new_object();
        json_set(o, "ref_type", json_new_str(type, strlen(type)));
        json_set(o, "ref_id", json_new_str(id, idlen));
        json_set(o, "version", json_new_str(version, strlen(version)));
        json_push(list, o);
    }
    *out = list;
    return 0;
fail:
    json_free(list);
    return -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int parse_causation(const json_value *v, json_value **out, guard_refusal *why)
{
    if (json_typeof(v) != JSON_ARRAY || json_count(v) > 64)
        return invalid_context(why, T(why, GUARD_CAUSATION_ARRAY));
    size_t n = json_count(v);
    const char **ids = xcalloc(n ? n : 1, sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        const json_value *e = json_at(v, i);
        size_t len = 0;
        if (json_typeof(e) != JSON_STRING || (json_get_str(e, &len), len == 0 || len > 128)) {
            free(ids);
            return invalid_context(why, T(why, GUARD_CAUSATION_EMPTY));
        }
        ids[i] = json_get_str(e, NULL);
    }
    qsort(ids, n, sizeof *ids, cmp_str);
    json_value *list = json_new_array();
    for (size_t i = 0; i < n; i++)
        if (i == 0 || strcmp(ids[i], ids[i - 1]))
            json_push(list, json_new_str(ids[i], strlen(ids[i])));
    free(ids);
    *out = list;
    return 0;
}

static int copy_id(const json_value *v, const char *name, char *out, size_t outlen,
                   guard_refusal *why)
{
    size_t len = 0;
    if (json_typeof(v) != JSON_STRING) {
        char m[320];
        snprintf(m, sizeof m, T(why, GUARD_ID_NOT_STRING), name);
        return invalid_context(why, m);
    }
    const char *s = json_get_str(v, &len);
    if (len == 0 || len >= outlen || memchr(s, '\0', len)) {
        char m[320];
        snprintf(m, sizeof m, T(why, GUARD_ID_BAD), name, outlen - 1);
        return invalid_context(why, m);
    }
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

int guard_parse(const json_value *args, const char *kn_id, lang_id lang, bkn_context *out,
                guard_refusal *why)
{
    memset(out, 0, sizeof *out);
    why->lang = lang;
    const json_value *ctx = args ? json_get(args, "bkn_context") : NULL;
    if (!ctx || (json_typeof(ctx) == JSON_OBJECT && json_count(ctx) == 0)) {
        out->adhoc = 1;
        return 0;
    }
    if (json_typeof(ctx) != JSON_OBJECT)
        return invalid_context(why, T(why, GUARD_NOT_OBJECT));
    /* Unknown or misspelt fields are refused before anything else. */
    for (size_t i = 0; i < json_count(ctx); i++) {
        const char *k = json_key_at(ctx, i, NULL);
        if (strcmp(k, "conversation_id") && strcmp(k, "interaction_id") &&
            strcmp(k, "parent_operation_id") && strcmp(k, "causation_event_ids") &&
            strcmp(k, "business_refs")) {
            char m[sizeof why->message];
            snprintf(m, sizeof m, T(why, GUARD_UNKNOWN_FIELD), k);
            return invalid_context(why, m);
        }
    }
    const json_value *cid = json_get(ctx, "conversation_id");
    const json_value *iid = json_get(ctx, "interaction_id");
    if (!cid)
        return refuse(why, "conversation_required", "bkn_start_interaction", "create_conversation",
                      400, T(why, GUARD_CONVERSATION_REQUIRED));
    if (!iid)
        return refuse(why, "interaction_required", "bkn_start_interaction", "start_interaction",
                      400, T(why, GUARD_INTERACTION_REQUIRED));
    if (copy_id(cid, "conversation_id", out->conversation_id, sizeof out->conversation_id, why) <
            0 ||
        copy_id(iid, "interaction_id", out->interaction_id, sizeof out->interaction_id, why) < 0)
        goto fail;
    const json_value *parent = json_get(ctx, "parent_operation_id");
    if (parent && copy_id(parent, "parent_operation_id", out->parent_operation_id,
                          sizeof out->parent_operation_id, why) < 0)
        goto fail;
    const json_value *caus = json_get(ctx, "causation_event_ids");
    if (caus && parse_causation(caus, &out->causation_event_ids, why) < 0)
        goto fail;
    const json_value *refs = json_get(ctx, "business_refs");
    if (refs && parse_refs(refs, kn_id, &out->business_refs, why) < 0)
        goto fail;
    return 0;
fail:
    guard_context_free(out);
    return -1;
}

int guard_is_hint(const char *key)
{
    static const char *const HINTS[] = {
        "openbkn.ai/client-invocation-id", "openbkn.ai/host-conversation-key",
        "x-openbkn-client-invocation-id", "x-openbkn-host-conversation-key"};
    int hint = 0, first = key[0] | 0x20;
    if (first != 'o' && first != 'x') /* every hint name's first letter */
        return 0;
    for (size_t h = 0; h < sizeof HINTS / sizeof *HINTS; h++)
        hint |= str_ieq(key, HINTS[h]);
    return hint;
}

int guard_strip_hints(json_value *args)
{
    int removed = 0;
    if (!args || json_typeof(args) != JSON_OBJECT)
        return 0;
    for (size_t i = 0; i < json_count(args);) {
        const char *k = json_key_at(args, i, NULL);
        if (guard_is_hint(k)) {
            char key[64];
            snprintf(key, sizeof key, "%s", k);
            json_remove(args, key);
            removed++;
        } else {
            i++;
        }
    }
    return removed;
}

void guard_context_free(bkn_context *c)
{
    json_free(c->causation_event_ids);
    json_free(c->business_refs);
    c->causation_event_ids = c->business_refs = NULL;
}

void guard_write_object(buf *out, const guard_error *e)
{
    const char *action = e->required_action && *e->required_action ? e->required_action
                                                                   : "contact_administrator";
    const char *sol = e->solution && *e->solution ? e->solution : text_action(action, e->lang);
    if (!sol)
        sol = text_action("contact_administrator", e->lang);
    buf_puts(out, "{\"code\":");
    json_write_string(out, e->code, strlen(e->code));
    buf_puts(out, ",\"description\":");
    json_write_string(out, e->description, strlen(e->description));
    buf_puts(out, ",\"solution\":");
    json_write_string(out, sol, strlen(sol));
    if (e->details) {
        buf_puts(out, ",\"details\":");
        json_write(out, e->details, 0);
    }
    buf_printf(out, ",\"retryable\":%s", e->retryable ? "true" : "false");
    if (e->retryable) /* a real wait; absent when a retry cannot help */
        buf_printf(out, ",\"retry_after_ms\":%ld",
                   e->retry_after_ms > 0 ? e->retry_after_ms : (long)ERR_RETRY_AFTER_MS);
    buf_puts(out, ",\"required_action\":");
    json_write_string(out, action, strlen(action));
    for (size_t i = 0; e->extra && i < json_count(e->extra); i++) {
        size_t klen;
        const char *k = json_key_at(e->extra, i, &klen);
        buf_putc(out, ',');
        json_write_string(out, k, klen);
        buf_putc(out, ':');
        json_write(out, json_val_at(e->extra, i), 0);
    }
    buf_putc(out, '}');
}

void guard_write_error(buf *out, lang_id lang, const char *code, const char *message, int retryable,
                       const char *required_action)
{
    guard_write_error_status(out, lang, code, message, retryable, required_action, NULL);
}

void guard_write_error_status(buf *out, lang_id lang, const char *code, const char *message,
                              int retryable, const char *required_action,
                              const char *current_status)
{
    json_value *extra = NULL;
    if (current_status) {
        extra = json_new_object();
        json_set(extra, "current_status", json_new_str(current_status, strlen(current_status)));
    }
    guard_error e = {.lang = lang,
                     .code = code,
                     .description = message,
                     .retryable = retryable,
                     .required_action = required_action,
                     .extra = extra};
    guard_write_object(out, &e);
    json_free(extra);
}

/* 1 when token is a required_action of the vocabulary (CL_ACTIONS). */
static int known_action(const char *token)
{
    return token && text_action(token, LANG_EN_US) != NULL;
}

void guard_write_api_error(buf *out, const json_value *body, lang_id lang, int mcp)
{
    const json_value *e = json_get(body, "error");
    if (json_typeof(e) != JSON_OBJECT) { /* not Trace Core's error envelope */
        const char *desc = text_get(TEXT_LC_TRACE_UNAVAILABLE, lang);
        guard_error g = {.lang = lang,
                         .code = "trace_core_unavailable",
                         .description = desc,
                         .details = body,
                         .retryable = 1,
                         .required_action = "retry_later"};
        guard_write_object(out, &g);
        return;
    }
    const char *code = json_get_string(e, "code");
    const char *message = json_get_string(e, "message");
    const json_value *r = json_get(e, "retryable");
    int retryable = r && json_typeof(r) == JSON_TRUE;
    const json_value *w = json_get(e, "retry_after_ms");
    long wait = w && json_typeof(w) == JSON_INT ? (long)json_get_int(w) : 0;
    const char *desc, *mcp_action, *rest_action;
    char refused[200];
    const char *action;
    if (code && text_trace_code(code, lang, &desc, &mcp_action, &rest_action)) {
        action = mcp ? mcp_action : rest_action;
    } else {
        snprintf(refused, sizeof refused, text_get(TEXT_TRACE_CORE_REFUSED, lang),
                 code ? code : "?");
        desc = refused;
        const char *theirs = json_get_string(e, "required_action");
        action = known_action(theirs) ? theirs : "contact_administrator";
    }
    if (retryable)
        action = "retry_later";
    /* Trace Core's own words, and every member but the ones written above */
    json_value *details = json_new_object();
    if (message)
        json_set(details, "message", json_new_str(message, strlen(message)));
    json_value *extra = json_new_object();
    static const char *const OWN[] = {"code", "message", "retryable", "retry_after_ms",
                                      "required_action"};
    for (size_t i = 0; i < json_count(e); i++) {
        const char *k = json_key_at(e, i, NULL);
        int own = 0;
        for (size_t j = 0; j < sizeof OWN / sizeof *OWN; j++)
            own |= !strcmp(k, OWN[j]);
        if (!own)
            json_set(extra, k, json_clone(json_val_at(e, i)));
    }
    for (size_t i = 0; i < json_count(body); i++) { /* members beside "error" */
        const char *k = json_key_at(body, i, NULL);
        if (strcmp(k, "error"))
            json_set(extra, k, json_clone(json_val_at(body, i)));
    }
    guard_error g = {.lang = lang,
                     .code = code ? code : "internal_error",
                     .description = desc,
                     .details = json_count(details) ? details : NULL,
                     .retryable = retryable,
                     .retry_after_ms = wait,
                     .required_action = action,
                     .extra = extra};
    guard_write_object(out, &g);
    json_free(details);
    json_free(extra);
}
