/* fuzz_guard: libFuzzer target for the bkn_context rules (src/flow/guard.c).
 *
 * Input: one selector byte, then JSON text of a call's arguments.
 *   selector bits 0-1: kn_id NULL, "kn1", "kn_42" or "" ;
 *   bit 2: wrap the text as {"bkn_context": <text>} (reaches the context rules
 *   with fewer mutations); bit 3: also run guard_strip_hints on the arguments.
 *
 * Properties: an accepted context is either ad hoc (nothing set) or carries two
 * non-empty ids; causation_event_ids are sorted, unique, non-empty strings;
 * business_refs are objects of exactly ref_type/ref_id/version strings, unique,
 * at most 64; feeding the normalized context back is accepted and normalizes to
 * the same thing. A refusal has a code, actions, a 400 status and a message that
 * is valid UTF-8, and its error envelope (guard_write_error) is valid JSON on both
 * surfaces. guard_strip_hints leaves no hint key behind. */
#include <string.h>

#include "fuzz_common.h"
#include "guard.h"
#include "json.h"
#include "util.h"

#define T "fuzz_guard"

static const char *const KN[4] = {NULL, "kn1", "kn_42", ""};

static void check_refs(const json_value *refs)
{
    fuzz_must(json_typeof(refs) == JSON_ARRAY, T, "business_refs is an array");
    fuzz_must(json_count(refs) <= 64, T, "at most 64 business_refs");
    for (size_t i = 0; i < json_count(refs); i++) {
        const json_value *r = json_at(refs, i);
        fuzz_must(json_typeof(r) == JSON_OBJECT && json_count(r) == 3, T,
                  "a ref is an object of three members");
        const char *ty = json_get_string(r, "ref_type"), *id = json_get_string(r, "ref_id");
        const char *ver = json_get_string(r, "version");
        fuzz_must(ty && id && ver && *ty && *id && *ver, T, "a ref has three non-empty strings");
        for (size_t j = 0; j < i; j++) {
            const json_value *p = json_at(refs, j);
            buf a = BUF_INIT, b = BUF_INIT;
            json_write(&a, r, 1);
            json_write(&b, p, 1);
            fuzz_must(a.len != b.len || memcmp(a.data, b.data, a.len), T, "refs are unique");
            buf_free(&a);
            buf_free(&b);
        }
    }
}

static void check_context(const bkn_context *c)
{
    if (c->adhoc) {
        fuzz_must(!c->conversation_id[0] && !c->interaction_id[0] && !c->business_refs &&
                      !c->causation_event_ids,
                  T, "an ad hoc context carries nothing");
        return;
    }
    fuzz_must(c->conversation_id[0] && c->interaction_id[0], T, "a managed context has both ids");
    if (c->causation_event_ids) {
        const json_value *e = c->causation_event_ids;
        for (size_t i = 0; i < json_count(e); i++) {
            size_t n;
            fuzz_must(json_typeof(json_at(e, i)) == JSON_STRING, T, "causation ids are strings");
            const char *s = json_get_str(json_at(e, i), &n);
            fuzz_must(n > 0, T, "causation ids are non-empty");
            if (i)
                fuzz_must(strcmp(json_get_str(json_at(e, i - 1), NULL), s) < 0, T,
                          "causation ids are sorted and unique");
        }
    }
    if (c->business_refs)
        check_refs(c->business_refs);
}

/* The normalized context as call arguments again. */
static json_value *as_args(const bkn_context *c)
{
    json_value *cx = json_new_object();
    json_set(cx, "conversation_id", json_new_str(c->conversation_id, strlen(c->conversation_id)));
    json_set(cx, "interaction_id", json_new_str(c->interaction_id, strlen(c->interaction_id)));
    if (c->parent_operation_id[0])
        json_set(cx, "parent_operation_id",
                 json_new_str(c->parent_operation_id, strlen(c->parent_operation_id)));
    if (c->causation_event_ids)
        json_set(cx, "causation_event_ids", json_clone(c->causation_event_ids));
    if (c->business_refs)
        json_set(cx, "business_refs", json_clone(c->business_refs));
    json_value *args = json_new_object();
    json_set(args, "bkn_context", cx);
    return args;
}

static void same_context(const bkn_context *a, const bkn_context *b)
{
    fuzz_must(!strcmp(a->conversation_id, b->conversation_id) &&
                  !strcmp(a->interaction_id, b->interaction_id) &&
                  !strcmp(a->parent_operation_id, b->parent_operation_id),
              T, "normalization is stable (ids)");
    const json_value *pa[2] = {a->causation_event_ids, a->business_refs};
    const json_value *pb[2] = {b->causation_event_ids, b->business_refs};
    for (int i = 0; i < 2; i++) {
        fuzz_must(!pa[i] == !pb[i], T, "normalization is stable (members)");
        if (!pa[i])
            continue;
        buf x = BUF_INIT, y = BUF_INIT;
        json_write(&x, pa[i], 0);
        json_write(&y, pb[i], 0);
        fuzz_must(x.len == y.len && !memcmp(x.data, y.data, x.len), T,
                  "normalization is stable (lists)");
        buf_free(&x);
        buf_free(&y);
    }
}

static void check_refusal(const guard_refusal *w)
{
    fuzz_must(w->code && *w->code && w->mcp_action && *w->mcp_action && w->rest_action &&
                  *w->rest_action,
              T, "a refusal has a code and actions");
    fuzz_must(w->rest_status == 400, T, "refusals are 400");
    size_t n = strnlen(w->message, sizeof w->message);
    fuzz_must(n > 0 && n < sizeof w->message, T, "a refusal has a message");
    fuzz_must(json_utf8_valid(w->message, n), T, "the refusal message is valid UTF-8");
    for (int mcp = 0; mcp < 2; mcp++) {
        buf e = BUF_INIT;
        char err[160];
        guard_write_error(&e, w->lang, w->code, w->message, w->retryable,
                          mcp ? w->mcp_action : w->rest_action);
        json_value *v = json_parse(e.data, e.len, NULL, err, sizeof err);
        fuzz_must(v != NULL, T, "the error object is valid JSON");
        const char *m = json_get_string(v, "description");
        fuzz_must(m && !strcmp(m, w->message), T, "the error object carries the message");
        json_free(v);
        buf_free(&e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *kn = KN[data[0] & 3];
    char err[200];
    json_value *args;
    if (data[0] & 4) {
        buf w = BUF_INIT;
        buf_puts(&w, "{\"bkn_context\":");
        buf_append(&w, data + 1, size - 1);
        buf_putc(&w, '}');
        args = json_parse(w.data, w.len, NULL, err, sizeof err);
        buf_free(&w);
    } else {
        args = json_parse((const char *)data + 1, size - 1, NULL, err, sizeof err);
    }
    if (!args)
        return 0;
    bkn_context c;
    guard_refusal why;
    memset(&why, 0, sizeof why);
    if (guard_parse(args, kn, LANG_EN_US, &c, &why) == 0) {
        check_context(&c);
        if (!c.adhoc) {
            json_value *again = as_args(&c);
            bkn_context c2;
            guard_refusal why2;
            fuzz_must(guard_parse(again, kn, LANG_EN_US, &c2, &why2) == 0, T,
                      "the normalized context is accepted");
            same_context(&c, &c2);
            guard_context_free(&c2);
            json_free(again);
        }
        guard_context_free(&c);
    } else {
        check_refusal(&why);
        fuzz_must(!c.business_refs && !c.causation_event_ids, T, "a refusal keeps nothing");
    }
    if (data[0] & 8) {
        static const char *const HINTS[] = {
            "openbkn.ai/client-invocation-id", "openbkn.ai/host-conversation-key",
            "x-openbkn-client-invocation-id", "x-openbkn-host-conversation-key"};
        guard_strip_hints(args);
        if (json_typeof(args) == JSON_OBJECT)
            for (size_t i = 0; i < json_count(args); i++)
                for (size_t h = 0; h < 4; h++)
                    fuzz_must(!str_ieq(json_key_at(args, i, NULL), HINTS[h]), T,
                              "no hint key survives stripping");
    }
    json_free(args);
    return 0;
}
