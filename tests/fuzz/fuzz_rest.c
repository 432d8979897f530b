/* fuzz_rest: libFuzzer target for REST body handling, the path of POST /kn/<tool>
 * up to the tool: body -> callcheck_rest_body (the server's Content-Type rule and
 * nesting limit 128) -> guard_parse of bkn_context -> response_format choice ->
 * the client-invocation-id hint -> guard_strip_hints.
 *
 * Input: one selector byte, then the body.
 *   bits 0-1 Content-Type: none, application/json, application/json; charset=utf-8,
 *            text/plain;
 *   bit 2 MCP (else REST); bit 3 the tool renders TOON;
 *   bits 4-5 ?response_format=: none, "toon", "json", or the body's "q" string cut
 *            to 15 bytes as rest.c stores it.
 *
 * Properties: a refused body gets 415 (non-JSON type) or 400 with details that are
 * valid UTF-8; an accepted body is an object; guard refusals are valid UTF-8; the
 * format is TOON only for a TOON tool, defaults per surface, and a refusal's details
 * are valid UTF-8 naming the allowed values; an accepted hint is 1-256 printable
 * ASCII; no hint survives stripping. */
#include <string.h>

#include "callcheck.h"
#include "fuzz_common.h"
#include "guard.h"
#include "json.h"

#define T "fuzz_rest"

static void utf8_ok(const char *s, const char *what)
{
    fuzz_must(json_utf8_valid(s, strlen(s)), T, what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const CT[4] = {NULL, "application/json", "application/json; charset=utf-8",
                                      "text/plain"};
    if (size < 1)
        return 0;
    const char *ct = CT[data[0] & 3];
    int mcp = (data[0] >> 2) & 1, tool_toon = (data[0] >> 3) & 1, q = (data[0] >> 4) & 3;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    json_value *args = NULL;
    int status = 0;
    char err[320];
    if (callcheck_rest_body(body, len, ct, 128, &args, &status, err, sizeof err) < 0) {
        fuzz_must(args == NULL, T, "a refused body yields nothing");
        fuzz_must(status == 415 || status == 400, T, "refusals are 415 or 400");
        fuzz_must((status == 415) == (len && (!ct || strcmp(ct, "text/plain") == 0)), T,
                  "415 exactly for a non-JSON Content-Type");
        fuzz_must(err[0] != '\0', T, "a refusal has details");
        utf8_ok(err, "body refusal details are valid UTF-8");
        return 0;
    }
    fuzz_must(args && json_typeof(args) == JSON_OBJECT, T, "accepted bodies are objects");
    fuzz_must(len || json_count(args) == 0, T, "an empty body is {}");

    /* bkn_context, with kn_id from the body as flow.c takes it. */
    const char *kn = json_get_string(args, "kn_id");
    bkn_context ctx;
    guard_refusal why;
    if (guard_parse(args, kn, LANG_EN_US, &ctx, &why) == 0)
        guard_context_free(&ctx);
    else
        utf8_ok(why.message, "guard refusal messages are valid UTF-8");

    /* response_format. */
    char qbuf[16] = "";
    const char *query = NULL;
    if (q == 1)
        query = "toon";
    else if (q == 2)
        query = "json";
    else if (q == 3 && json_get_string(args, "q")) {
        snprintf(qbuf, sizeof qbuf, "%.15s", json_get_string(args, "q"));
        query = qbuf;
    }
    const json_value *arg = json_get(args, "response_format");
    int toon = -1;
    char details[200];
    if (callcheck_format(query, arg, mcp, tool_toon, &toon, details, sizeof details) == 0) {
        fuzz_must(toon == 0 || toon == 1, T, "a format is picked");
        fuzz_must(!toon || tool_toon, T, "TOON only for a tool that renders it");
        if ((mcp || !query || !*query) && !arg)
            fuzz_must(toon == (mcp && tool_toon), T, "the surface default");
    } else {
        utf8_ok(details, "format refusal details are valid UTF-8");
        fuzz_must(strstr(details, tool_toon ? "(allowed: json, toon)" : "(allowed: json)") != NULL,
                  T, "a format refusal names the allowed values");
    }

    /* The invocation hint as flow.c reads it from _meta (here: a body member). */
    const json_value *hv = json_get(args, "openbkn.ai/client-invocation-id");
    if (hv && json_typeof(hv) == JSON_STRING) {
        char hint[257], herr[200];
        if (callcheck_hint(json_get_str(hv, NULL), "openbkn.ai/client-invocation-id", LANG_EN_US,
                           hint, sizeof hint, herr, sizeof herr) == 0) {
            size_t n = strlen(hint);
            fuzz_must(n >= 1 && n <= 256, T, "a hint has 1-256 characters");
            for (size_t i = 0; i < n; i++)
                fuzz_must(hint[i] >= 0x21 && hint[i] <= 0x7e, T, "a hint is printable ASCII");
        } else {
            fuzz_must(herr[0] != '\0', T, "a hint refusal says why");
        }
    }
    guard_strip_hints(args);
    fuzz_must(json_get(args, "openbkn.ai/client-invocation-id") == NULL, T,
              "the hint is stripped from the arguments");
    json_free(args);
    return 0;
}
