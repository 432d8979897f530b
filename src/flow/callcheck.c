/* callcheck: pure input checks of a business call. See callcheck.h. */
#include "callcheck.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

int callcheck_rest_body(const char *body, size_t len, const char *content_type, size_t max_depth,
                        json_value **out, int *status, char *err, size_t errlen)
{
    *out = NULL;
    if (len && (!content_type || !str_istartswith(content_type, "application/json"))) {
        *status = 415;
        snprintf(err, errlen, "Content-Type must be application/json");
        return -1;
    }
    char perr[256];
    json_limits lim = {max_depth, 0};
    json_value *v = len ? json_parse(body, len, &lim, perr, sizeof perr) : json_new_object();
    if (!v) {
        *status = 400;
        snprintf(err, errlen, "invalid JSON body: %s", perr);
        return -1;
    }
    if (json_typeof(v) != JSON_OBJECT) {
        json_free(v);
        *status = 400;
        snprintf(err, errlen, "the body must be a JSON object of tool arguments");
        return -1;
    }
    *out = v;
    return 0;
}

int callcheck_format(const char *query, const json_value *arg, int mcp, int tool_toon, int *toon,
                     char *details, size_t dlen)
{
    char given[64] = "";
    if (!mcp && query)
        str_copy(given, sizeof given, query);
    else if (arg && json_typeof(arg) == JSON_STRING)
        str_copy(given, sizeof given, json_get_str(arg, NULL));
    else if (arg)
        snprintf(given, sizeof given, "(not a string)");
    if (!given[0]) {
        *toon = mcp && tool_toon;
        return 0;
    }
    if (!strcmp(given, "json") || (tool_toon && !strcmp(given, "toon"))) {
        *toon = !strcmp(given, "toon");
        return 0;
    }
    snprintf(details, dlen, "invalid response_format: \"%.60s\" (allowed: %s)", given,
             tool_toon ? "json, toon" : "json");
    json_utf8_scrub(details);
    return -1;
}

int callcheck_hint(const char *v, const char *src, lang_id lang, char *out, size_t outlen,
                   char *err, size_t errlen)
{
    out[0] = '\0';
    if (!v)
        return 0;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n == 0 || n > 256 || n >= outlen) {
        snprintf(err, errlen, text_get(TEXT_HINT_LENGTH, lang), src);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch < 0x21 || ch > 0x7e) {
            snprintf(err, errlen, text_get(TEXT_HINT_CHARS, lang), src);
            return -1;
        }
    }
    memcpy(out, v, n);
    out[n] = '\0';
    return 0;
}

int callcheck_hint_pick(const char *header_value, const char *header, const json_value *meta,
                        const char *meta_key, lang_id lang, char *out, size_t outlen, char *err,
                        size_t errlen)
{
    const char *v = header_value;
    const char *src = header;
    out[0] = '\0';
    if (!v && meta) {
        const json_value *m = json_get(meta, meta_key);
        src = meta_key;
        if (m && json_typeof(m) != JSON_STRING) {
            snprintf(err, errlen, text_get(TEXT_HINT_NOT_STRING, lang), src);
            return -1;
        }
        v = m ? json_get_str(m, NULL) : NULL;
    }
    return callcheck_hint(v, src, lang, out, outlen, err, errlen);
}
