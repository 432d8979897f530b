/* outcome: a call's surface-neutral outcome and its idempotency record (outcome.h). */
#include "outcome.h"

#include <stdio.h>
#include <string.h>

#include "guard.h"

void outcome_init(call_outcome *o)
{
    memset(o, 0, sizeof *o);
    o->status = 200;
}

void outcome_free(call_outcome *o)
{
    buf_free(&o->json);
    buf_free(&o->json_quoted);
    buf_free(&o->toon_text);
    buf_free(&o->receipt_json);
    json_free(o->result);
    o->result = NULL;
}

void outcome_quote(call_outcome *o)
{
    buf_reset(&o->json_quoted);
    json_write_string(&o->json_quoted, o->json.data ? o->json.data : "", o->json.len);
}

void outcome_refuse(call_outcome *o, int status, const char *code, const char *message,
                    int retryable, const char *required_action, lang_id lang)
{
    buf_reset(&o->json);
    buf_reset(&o->json_quoted);
    guard_write_error(&o->json, lang, code, message, retryable, required_action);
    o->status = status;
    o->is_error = 1;
    snprintf(o->code, sizeof o->code, "%s", code);
}

static void put_str_member(buf *out, const char *key, const char *v, size_t len)
{
    buf_printf(out, ",\"%s\":", key);
    json_write_string(out, v, len);
}

void outcome_encode(buf *out, const call_outcome *o)
{
    buf_printf(out, "{\"v\":2,\"status\":%d,\"is_error\":%s,\"toon\":%s,\"unrecorded\":%s",
               o->status, o->is_error ? "true" : "false", o->toon ? "true" : "false",
               o->unrecorded ? "true" : "false");
    if (o->receipt_pending)
        buf_puts(out, ",\"receipt_pending\":true");
    put_str_member(out, "receipt_id", o->receipt_id, strlen(o->receipt_id));
    put_str_member(out, "operation_id", o->operation_id, strlen(o->operation_id));
    if (o->json_quoted.len) { /* the same text, escaped once already */
        buf_puts(out, ",\"json\":");
        buf_append(out, o->json_quoted.data, o->json_quoted.len);
    } else {
        put_str_member(out, "json", o->json.data ? o->json.data : "", o->json.len);
    }
    buf_puts(out, ",\"toon_text\":"); /* null: not rendered */
    if (o->toon_text.data)
        json_write_string(out, o->toon_text.data, o->toon_text.len);
    else
        buf_puts(out, "null");
    buf_puts(out, ",\"receipt\":");
    if (o->receipt_json.len)
        buf_append(out, o->receipt_json.data, o->receipt_json.len);
    else
        buf_puts(out, "null");
    buf_putc(out, '}');
}

static int flag(const json_value *v, const char *key)
{
    const json_value *m = json_get(v, key);
    return m && json_typeof(m) == JSON_TRUE;
}

static void copy_str(const json_value *v, const char *key, char *out, size_t outlen)
{
    const char *s = json_get_string(v, key);
    snprintf(out, outlen, "%s", s ? s : "");
}

int outcome_decode(const char *blob, size_t len, call_outcome *o)
{
    int rc = -1;
    json_value *v = json_parse(blob, len, NULL, NULL, 0);
    const json_value *st = v ? json_get(v, "status") : NULL;
    const json_value *js = v ? json_get(v, "json") : NULL;
    const json_value *tt = v ? json_get(v, "toon_text") : NULL;
    const json_value *rc_v = v ? json_get(v, "receipt") : NULL;
    if (!st || json_typeof(st) != JSON_INT || !js || json_typeof(js) != JSON_STRING || !tt ||
        (json_typeof(tt) != JSON_STRING && json_typeof(tt) != JSON_NULL))
        goto done;
    size_t n;
    const char *s;
    o->status = (int)json_get_int(st);
    o->is_error = flag(v, "is_error");
    o->toon = flag(v, "toon");
    o->unrecorded = flag(v, "unrecorded");
    o->receipt_pending = flag(v, "receipt_pending");
    copy_str(v, "receipt_id", o->receipt_id, sizeof o->receipt_id);
    copy_str(v, "operation_id", o->operation_id, sizeof o->operation_id);
    buf_reset(&o->json);
    buf_reset(&o->json_quoted);
    s = json_get_str(js, &n);
    buf_append(&o->json, s, n);
    buf_free(&o->toon_text);
    if (json_typeof(tt) == JSON_STRING) {
        s = json_get_str(tt, &n);
        buf_append(&o->toon_text, s, n);
    }
    buf_reset(&o->receipt_json);
    if (rc_v && json_typeof(rc_v) != JSON_NULL)
        json_write(&o->receipt_json, rc_v, 0);
    json_free(o->result);
    o->result = NULL; /* the MCP writer puts bkn_receipt into the text itself */
    rc = 0;
done:
    json_free(v);
    return rc;
}

/* ---- a stored error, replayed ---- */

void outcome_replayed_error(call_outcome *o, int read_only, lang_id lang)
{
    if (!o->is_error || !o->json.data)
        return;
    json_value *e = json_parse(o->json.data, o->json.len, NULL, NULL, 0);
    const json_value *r = e && json_typeof(e) == JSON_OBJECT ? json_get(e, "retryable") : NULL;
    if (r && json_typeof(r) == JSON_TRUE) {
        const char *action = read_only ? "use_new_idempotency_key" : "read_outcome";
        const char *text =
            text_get(read_only ? TEXT_REPLAYED_ERROR_READ : TEXT_REPLAYED_ERROR_OTHER, lang);
        json_set(e, "retryable", json_new_bool(0));
        json_remove(e, "retry_after_ms");
        json_set(e, "required_action", json_new_str(action, strlen(action)));
        json_set(e, "solution", json_new_str(text, strlen(text)));
        buf_reset(&o->json);
        buf_reset(&o->json_quoted);
        json_write(&o->json, e, 0);
    }
    json_free(e);
}

/* ---- a call that already ran, its result gone ---- */

#define ACTION_TOOL "execute_action"
#define ACTION_REF_TYPE "action_instance"
#define ACTION_REF_PREFIX ACTION_REF_TYPE ":"

/* A ref segment: non-empty, no ':' (Trace Core splits ref ids on it), bounded. */
static int ref_segment(const char *s)
{
    return s && *s && !strchr(s, ':') && strlen(s) <= 160;
}

static json_value *action_refs(const char *kn_id, const json_value *args, const json_value *result,
                               const json_value *caller_refs);

static int same_ref(const json_value *r, const char *id)
{
    const char *t = json_get_string(r, "ref_type");
    const char *i = json_get_string(r, "ref_id");
    const char *v = json_get_string(r, "version");
    return t && i && !strcmp(t, ACTION_REF_TYPE) && !strcmp(i, id) &&
           (!v || !strcmp(v, "unversioned"));
}

json_value *outcome_attempt_refs(const char *tool, const char *kn_id, const json_value *args,
                                 const json_value *result, const buf *result_text,
                                 const json_value *caller_refs)
{
    if (strcmp(tool, ACTION_TOOL))
        return NULL;
    json_value *parsed = NULL;
    if (!result && result_text && result_text->len)
        result = parsed = json_parse(result_text->data, result_text->len, NULL, NULL, 0);
    json_value *refs = NULL;
    if (result && json_typeof(result) == JSON_OBJECT)
        refs = action_refs(kn_id, args, result, caller_refs);
    json_free(parsed);
    return refs;
}

/* outcome_attempt_refs of an execute_action result (an object). */
static json_value *action_refs(const char *kn_id, const json_value *args, const json_value *result,
                               const json_value *caller_refs)
{
    const char *at = args ? json_get_string(args, "at_id") : NULL;
    const char *exec = json_get_string(result, "execution_id");
    if (!ref_segment(kn_id) || !ref_segment(at) || !ref_segment(exec))
        return NULL;
    size_t n = caller_refs ? json_count(caller_refs) : 0;
    if (n >= 64) /* Trace Core keeps at most 64 */
        return NULL;
    buf id = BUF_INIT;
    buf_printf(&id, ACTION_REF_PREFIX "%s:%s:%s", kn_id, at, exec);
    json_value *refs = json_new_array();
    int dup = 0;
    for (size_t i = 0; i < n; i++) {
        dup |= same_ref(json_at(caller_refs, i), id.data);
        json_push(refs, json_clone(json_at(caller_refs, i)));
    }
    if (!dup) {
        json_value *r = json_new_object();
        json_set(r, "ref_type", json_new_str(ACTION_REF_TYPE, strlen(ACTION_REF_TYPE)));
        json_set(r, "ref_id", json_new_str(id.data, id.len));
        json_set(r, "version", json_new_str("unversioned", 11));
        json_push(refs, r);
    }
    buf_free(&id);
    return refs;
}

/* The run an execute_action receipt names (outcome_attempt_refs): the last
 * action_instance ref, split into kn_id and execution_id. 0 when found. */
static int receipt_action_run(const json_value *receipt, char kn[161], char exec[161])
{
    const json_value *refs = receipt ? json_get(receipt, "business_refs") : NULL;
    for (size_t i = json_count(refs); i-- > 0;) {
        const json_value *r = json_at(refs, i);
        const char *t = json_get_string(r, "ref_type");
        const char *id = json_get_string(r, "ref_id");
        if (!t || !id || strcmp(t, ACTION_REF_TYPE) ||
            strncmp(id, ACTION_REF_PREFIX, strlen(ACTION_REF_PREFIX)))
            continue;
        const char *k = id + strlen(ACTION_REF_PREFIX);
        const char *a = strchr(k, ':');
        const char *e = a ? strchr(a + 1, ':') : NULL;
        if (!a || !e || a == k || (size_t)(a - k) > 160 || !ref_segment(e + 1))
            continue;
        snprintf(kn, 161, "%.*s", (int)(a - k), k);
        snprintf(exec, 161, "%s", e + 1);
        return 0;
    }
    return -1;
}

static void copy_member(json_value *to, const char *key, const json_value *from)
{
    const json_value *v = from ? json_get(from, key) : NULL;
    if (v)
        json_set(to, key, json_clone(v));
}

static void write_run_error(call_outcome *o, lang_id lang, const char *code,
                            const char *description, const char *required_action,
                            json_value *details, const json_value *receipt, const char *op_id,
                            const char *rc_id);

void outcome_already_executed(call_outcome *o, const json_value *operation,
                              const json_value *receipt, const char *tool, int read_only,
                              lang_id lang, int mcp)
{
    const char *op_id = operation ? json_get_string(operation, "operation_id") : NULL;
    const char *rc_id = receipt ? json_get_string(receipt, "receipt_id") : NULL;
    const char *st = receipt ? json_get_string(receipt, "receipt_status") : NULL;
    op_id = op_id ? op_id : (receipt ? json_get_string(receipt, "operation_id") : NULL);
    op_id = op_id ? op_id : "";
    rc_id = rc_id ? rc_id : "";
    const char *st_text = !st                        ? ""
                          : !strcmp(st, "completed") ? text_get(TEXT_RECEIPT_STATUS_COMPLETED, lang)
                          : !strcmp(st, "failed")    ? text_get(TEXT_RECEIPT_STATUS_FAILED, lang)
                                                     : st;
    char kn[161], exec[161];
    int action = !strcmp(tool, ACTION_TOOL) && receipt_action_run(receipt, kn, exec) == 0;

    json_value *details = json_new_object();
    json_set(details, "operation_id", json_new_str(op_id, strlen(op_id)));
    json_set(details, "receipt_id", json_new_str(rc_id, strlen(rc_id)));
    copy_member(details, "receipt_status", receipt);
    json_set(details, "tool_name", json_new_str(tool, strlen(tool)));
    copy_member(details, "attempt", operation);
    copy_member(details, "terminal_at", receipt);

    buf msg = BUF_INIT;
    const char *required_action = "read_outcome";
    if (action) {
        buf_printf(&msg, text_get(TEXT_ALREADY_RAN_ACTION, lang), op_id, rc_id, st_text, kn, exec);
        json_set(details, "kn_id", json_new_str(kn, strlen(kn)));
        json_set(details, "execution_id", json_new_str(exec, strlen(exec)));
        json_value *call = json_new_object();
        json_value *args = json_new_object();
        json_set(call, "name", json_new_str("get_action_execution", 20));
        json_set(args, "kn_id", json_new_str(kn, strlen(kn)));
        json_set(args, "execution_id", json_new_str(exec, strlen(exec)));
        json_set(call, "arguments", args);
        json_set(details, "next_call", call);
    } else if (read_only) {
        buf_printf(&msg, text_get(TEXT_ALREADY_RAN_READ, lang), op_id, rc_id, st_text);
        required_action = "use_new_idempotency_key";
    } else {
        buf_printf(&msg, text_get(TEXT_ALREADY_RAN_OTHER, lang), op_id, rc_id, st_text);
    }

    write_run_error(o, lang, "operation_already_executed", msg.data, required_action, details,
                    receipt, op_id, rc_id);
    buf_free(&msg);
}

/* The error of a call whose Operation exists at Trace Core (code, description, next
 * step, details), not retryable, REST 409; the receipt is attached. Takes details. */
static void write_run_error(call_outcome *o, lang_id lang, const char *code,
                            const char *description, const char *required_action,
                            json_value *details, const json_value *receipt, const char *op_id,
                            const char *rc_id)
{
    /* The one error object, with what is known of the run as details. */
    guard_error ge = {.lang = lang,
                      .code = code,
                      .description = description,
                      .details = details,
                      .required_action = required_action};
    buf_reset(&o->json);
    buf_reset(&o->json_quoted);
    guard_write_object(&o->json, &ge);
    json_free(details);

    o->status = 409;
    o->is_error = 1;
    snprintf(o->code, sizeof o->code, "%s", code);
    snprintf(o->operation_id, sizeof o->operation_id, "%s", op_id);
    snprintf(o->receipt_id, sizeof o->receipt_id, "%s", rc_id);
    buf_reset(&o->receipt_json);
    if (receipt)
        json_write(&o->receipt_json, receipt, 0);
    json_free(o->result);
    o->result = NULL;
}

void outcome_unknown(call_outcome *o, const json_value *operation, const json_value *receipt,
                     const char *tool, int read_only, lang_id lang, int mcp)
{
    const char *op_id = operation ? json_get_string(operation, "operation_id") : NULL;
    const char *rc_id = receipt ? json_get_string(receipt, "receipt_id") : NULL;
    op_id = op_id ? op_id : "";
    rc_id = rc_id ? rc_id : "";
    json_value *details = json_new_object();
    json_set(details, "operation_id", json_new_str(op_id, strlen(op_id)));
    json_set(details, "receipt_id", json_new_str(rc_id, strlen(rc_id)));
    copy_member(details, "receipt_status", receipt);
    json_set(details, "tool_name", json_new_str(tool, strlen(tool)));
    copy_member(details, "attempt", operation);
    copy_member(details, "created_at", operation);
    buf msg = BUF_INIT;
    buf_printf(&msg, text_get(read_only ? TEXT_OUTCOME_UNKNOWN_READ : TEXT_OUTCOME_UNKNOWN_OTHER, lang),
               op_id, rc_id);
    write_run_error(o, lang, "operation_outcome_unknown", msg.data,
                    read_only ? "use_new_idempotency_key" : "read_outcome", details, receipt, op_id,
                    rc_id);
    buf_free(&msg);
}
