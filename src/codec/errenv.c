/* errenv: the gateway's REST error envelope (errenv.h). */
#include "errenv.h"

#include <stdio.h>
#include <string.h>

#include "json.h"

void err_next_of(int status, err_next *out)
{
    text_status_next(status, &out->retryable, &out->retry_after_ms, &out->required_action);
}

int err_retry_after_s(const err_next *next)
{
    if (!next->retryable)
        return 0;
    int ms = next->retry_after_ms > 0 ? next->retry_after_ms : ERR_RETRY_AFTER_MS;
    return (ms + 999) / 1000;
}

static void put_member(buf *out, const char *key, const char *v)
{
    buf_printf(out, ",\"%s\":", key);
    json_write_string(out, v, strlen(v));
}

void err_write(buf *out, int status, lang_id lang, const char *code, const char *desc,
               const char *sol, const char *details, const err_next *next, const char *extra)
{
    const char *name, *sdesc, *ssol;
    char codebuf[64];
    err_next rule;
    text_status(status, lang, &name, &sdesc, &ssol);
    if (!code) {
        snprintf(codebuf, sizeof codebuf, "Public.%s", name);
        code = codebuf;
    }
    if (!next) {
        err_next_of(status, &rule);
        next = &rule;
    }
    if (!sol && !strcmp(code, "Public.Forbidden.OriginRejected")) {
        /* not a permission an administrator grants: the request itself must change */
        sol = text_get(TEXT_ERR_ORIGIN_SOLUTION, lang);
        rule = *next;
        rule.required_action = "fix_request";
        next = &rule;
    }
    buf_puts(out, "{\"code\":");
    json_write_string(out, code, strlen(code));
    put_member(out, "description", desc ? desc : sdesc);
    put_member(out, "solution", sol ? sol : ssol);
    char tr[512]; /* the gateway's own details text, in lang */
    put_member(out, "details", details ? text_detail(details, lang, tr, sizeof tr) : "");
    buf_printf(out, ",\"retryable\":%s", next->retryable ? "true" : "false");
    if (next->retryable)
        buf_printf(out, ",\"retry_after_ms\":%d",
                   next->retry_after_ms > 0 ? next->retry_after_ms : ERR_RETRY_AFTER_MS);
    if (next->required_action && *next->required_action)
        put_member(out, "required_action", next->required_action);
    if (extra && *extra) {
        buf_putc(out, ',');
        buf_puts(out, extra);
    }
    buf_putc(out, '}');
}
