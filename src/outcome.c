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
    buf_free(&o->toon_text);
    json_free(o->result);
    json_free(o->receipt);
    o->result = o->receipt = NULL;
}

void outcome_refuse(call_outcome *o, int status, const char *code, const char *message,
                    int retryable, const char *required_action, int mcp)
{
    buf_reset(&o->json);
    guard_write_error(&o->json, code, message, retryable, required_action, mcp);
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
    put_str_member(out, "receipt_id", o->receipt_id, strlen(o->receipt_id));
    put_str_member(out, "operation_id", o->operation_id, strlen(o->operation_id));
    put_str_member(out, "json", o->json.data ? o->json.data : "", o->json.len);
    buf_puts(out, ",\"toon_text\":"); /* null: not rendered */
    if (o->toon_text.data)
        json_write_string(out, o->toon_text.data, o->toon_text.len);
    else
        buf_puts(out, "null");
    buf_puts(out, ",\"receipt\":");
    if (o->receipt)
        json_write(out, o->receipt, 0);
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
    copy_str(v, "receipt_id", o->receipt_id, sizeof o->receipt_id);
    copy_str(v, "operation_id", o->operation_id, sizeof o->operation_id);
    buf_reset(&o->json);
    s = json_get_str(js, &n);
    buf_append(&o->json, s, n);
    buf_free(&o->toon_text);
    if (json_typeof(tt) == JSON_STRING) {
        s = json_get_str(tt, &n);
        buf_append(&o->toon_text, s, n);
    }
    json_free(o->receipt);
    o->receipt = rc_v && json_typeof(rc_v) != JSON_NULL ? json_clone(rc_v) : NULL;
    json_free(o->result);
    o->result = NULL;
    if (o->receipt && !o->is_error) /* the MCP writer adds bkn_receipt to the tree */
        o->result = json_parse(o->json.data, o->json.len, NULL, NULL, 0);
    rc = 0;
done:
    json_free(v);
    return rc;
}
