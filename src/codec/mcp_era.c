/* mcp_era: the stateless era's edge of the MCP endpoints. See mcp_era.h. */
#include "mcp_era.h"

#include <stdio.h>
#include <string.h>

#include "json.h"

int mcp_era_version_modern(const char *v)
{
    return v && strcmp(v, MCP_MODERN_VERSION) >= 0;
}

/* A header value without its leading and trailing spaces and tabs (the optional
 * whitespace HTTP allows around a field value), as a pointer and length. */
static const char *ows_trim(const char *v, size_t *len)
{
    if (!v) {
        *len = 0;
        return NULL;
    }
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    *len = n;
    return v;
}

/* Whether a header value (not NULL), its optional whitespace aside, is the n bytes
 * at s (no NUL among them). */
static int hdr_eq(const char *hv, const char *s, size_t n)
{
    while (*hv == ' ' || *hv == '\t')
        hv++;
    if (strncmp(hv, s, n))
        return 0;
    hv += n;
    while (*hv == ' ' || *hv == '\t')
        hv++;
    return *hv == '\0';
}

/* ---- the envelope ---- */

enum { K_OTHER, K_PV, K_CAPS, K_CI, K_LV };

/* Which envelope member a _meta key names. */
static int env_key(const char *k, size_t klen)
{
    static const char PREFIX[] = "io.modelcontextprotocol/";
    const size_t plen = sizeof PREFIX - 1;
    if (klen <= plen || memcmp(k, PREFIX, plen))
        return K_OTHER;
    k += plen;
    klen -= plen;
    if (klen == 15 && !memcmp(k, "protocolVersion", 15))
        return K_PV;
    if (klen == 18 && !memcmp(k, "clientCapabilities", 18))
        return K_CAPS;
    if (klen == 10 && !memcmp(k, "clientInfo", 10))
        return K_CI;
    if (klen == 8 && !memcmp(k, "logLevel", 8))
        return K_LV;
    return K_OTHER;
}

static void env_init(mcp_era_env *e)
{
    memset(e, 0, sizeof *e);
    e->pv_type = e->caps_type = e->ci_type = e->lv_type = -1;
}

static void read_tree(const json_value *meta, mcp_era_env *e)
{
    e->meta = 1;
    for (size_t i = 0, n = json_count(meta); i < n; i++) {
        size_t klen;
        const char *k = json_key_at(meta, i, &klen);
        const json_value *v = json_val_at(meta, i);
        int t = (int)json_typeof(v);
        switch (env_key(k, klen)) {
        case K_PV:
            e->pv_type = t;
            e->pv = t == JSON_STRING ? json_get_str(v, NULL) : NULL;
            e->pv_len = e->pv ? strlen(e->pv) : 0;
            break;
        case K_CAPS:
            e->caps_type = t;
            break;
        case K_CI:
            e->ci_type = t;
            e->ci_ok =
                t == JSON_OBJECT && json_get_string(v, "name") && json_get_string(v, "version");
            break;
        case K_LV:
            e->lv_type = t;
            e->lv = t == JSON_STRING ? json_get_str(v, NULL) : NULL;
            e->lv_len = e->lv ? strlen(e->lv) : 0;
            break;
        default:
            e->others = 1;
        }
    }
}

/* The text scan: over valid JSON (the parser checked it) without a backslash, so a
 * string ends at the next quote, and a value at the first ',', '}' or ']' outside
 * strings and nested values. */
static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static int text_type(char c)
{
    switch (c) {
    case '{':
        return JSON_OBJECT;
    case '[':
        return JSON_ARRAY;
    case '"':
        return JSON_STRING;
    case 't':
        return JSON_TRUE;
    case 'f':
        return JSON_FALSE;
    case 'n':
        return JSON_NULL;
    default:
        return JSON_INT; /* a number: only "not a string or an object" matters */
    }
}

/* Past the string whose opening quote is at p. */
static inline const char *past_string(const char *p, const char *end)
{
    const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
    return q ? q + 1 : end;
}

/* Past the value at p (not a string). */
static const char *past_value(const char *p, const char *end)
{
    size_t depth = 0;
    while (p < end) {
        char c = *p;
        if (c == '"') {
            p = past_string(p, end);
            continue;
        }
        if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (depth == 0)
                return p; /* a scalar's end */
            if (--depth == 0)
                return p + 1;
        } else if (c == ',' && depth == 0)
            return p;
        p++;
    }
    return p;
}

/* The key at p (its opening quote): sets *k and *klen, returns the start of its
 * value (past the ':'). */
static inline const char *key_at(const char *p, const char *end, const char **k, size_t *klen)
{
    *k = p + 1;
    const char *q = past_string(p, end);
    *klen = (size_t)(q - 1 - *k);
    while (q < end && *q != ':')
        q++;
    return ws(q + 1, end);
}

/* Past a ',' after a member, at the next key's quote; NULL at the end of the object. */
static inline const char *next_key(const char *p, const char *end)
{
    p = ws(p, end);
    if (p >= end || *p != ',')
        return NULL;
    p = ws(p + 1, end);
    return p < end && *p == '"' ? p : NULL;
}

/* clientInfo's text (the object at p): whether its last name and version members
 * are strings; returns its end. */
static const char *ci_walk(const char *p, const char *end, int *ok)
{
    int name = -1, version = -1;
    p = ws(p + 1, end);
    if (p < end && *p == '"') {
        for (const char *q = p; q; q = next_key(p, end)) {
            const char *k;
            size_t klen;
            const char *v = key_at(q, end, &k, &klen);
            if (v >= end)
                break;
            int t = text_type(*v);
            p = t == JSON_STRING ? past_string(v, end) : past_value(v, end);
            if (klen == 4 && !memcmp(k, "name", 4))
                name = t;
            else if (klen == 7 && !memcmp(k, "version", 7))
                version = t;
        }
        p = ws(p, end);
    }
    *ok = name == JSON_STRING && version == JSON_STRING;
    return p < end ? p + 1 : end; /* past '}' */
}

static int read_text(const char *t, size_t len, mcp_era_env *e)
{
    if (memchr(t, '\\', len))
        return -1;
    const char *end = t + len, *p = ws(t, end);
    if (p >= end || *p != '{')
        return 0; /* not an object: no envelope */
    e->meta = 1;
    p = ws(p + 1, end);
    if (p >= end || *p != '"')
        return 0;
    for (const char *q = p; q; q = next_key(p, end)) {
        const char *k;
        size_t klen;
        const char *v = key_at(q, end, &k, &klen);
        if (v >= end)
            break;
        int ty = text_type(*v), which = env_key(k, klen);
        if (which == K_CI && ty == JSON_OBJECT)
            p = ci_walk(v, end, &e->ci_ok);
        else
            p = ty == JSON_STRING ? past_string(v, end) : past_value(v, end);
        switch (which) {
        case K_PV:
            e->pv_type = ty;
            e->pv = ty == JSON_STRING ? v + 1 : NULL;
            e->pv_len = e->pv ? (size_t)(p - v - 2) : 0;
            break;
        case K_CAPS:
            e->caps_type = ty;
            break;
        case K_CI:
            e->ci_type = ty;
            if (ty != JSON_OBJECT)
                e->ci_ok = 0;
            break;
        case K_LV:
            e->lv_type = ty;
            e->lv = ty == JSON_STRING ? v + 1 : NULL;
            e->lv_len = e->lv ? (size_t)(p - v - 2) : 0;
            break;
        default:
            e->others = 1;
        }
    }
    return 0;
}

int mcp_era_read(const mcp_msg *m, mcp_era_env *env)
{
    env_init(env);
    const json_value *meta = m->params ? json_get(m->params, "_meta") : NULL;
    if (!meta)
        return 0;
    if (m->meta_text) {
        size_t len;
        const char *t = json_get_str(meta, &len);
        return t ? read_text(t, len, env) : 0;
    }
    if (json_typeof(meta) == JSON_OBJECT)
        read_tree(meta, env);
    return 0;
}

int mcp_era_classify(const mcp_msg *m, const mcp_era_headers *h, const mcp_era_env *env,
                     mcp_era *era, char *err, size_t errlen)
{
    int claim = env->meta && env->pv_type >= 0;
    int modern_header = mcp_era_header_modern(h->protocol_version);
    *era = claim || modern_header ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
    if (!claim && modern_header && m->method && !strcmp(m->method, "initialize")) {
        snprintf(err, errlen,
                 "Header mismatch: the stateless protocol version in MCP-Protocol-Version has "
                 "no initialize; send the request's _meta instead");
        return -32020;
    }
    return 0;
}

static int bad(int *status, char *err, size_t errlen, int code, const char *msg)
{
    *status = 400;
    snprintf(err, errlen, "%s", msg);
    return code;
}

/* The _meta envelope's own checks: -32602 with the message, or 0. */
static int check_envelope(const mcp_era_env *e, char *err, size_t errlen)
{
    static const char *const LEVELS[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
    int pv_ok = e->pv_type == JSON_STRING;
    int caps_ok = e->caps_type == JSON_OBJECT;
    if (!pv_ok || !caps_ok) {
        snprintf(err, errlen, "Invalid params: missing _meta key(s): %s%s%s",
                 pv_ok ? "" : MCP_META_PROTOCOL_VERSION " (a string)",
                 !pv_ok && !caps_ok ? ", " : "",
                 caps_ok ? "" : MCP_META_CLIENT_CAPABILITIES " (an object)");
        return -32602;
    }
    if (e->ci_type >= 0 && !e->ci_ok) {
        snprintf(err, errlen,
                 "Invalid params: _meta " MCP_META_CLIENT_INFO " must be an object with the "
                 "strings name and version");
        return -32602;
    }
    if (e->lv_type >= 0) {
        size_t i = 0;
        while (e->lv && i < sizeof LEVELS / sizeof LEVELS[0] &&
               (strlen(LEVELS[i]) != e->lv_len || memcmp(e->lv, LEVELS[i], e->lv_len)))
            i++;
        if (!e->lv || i == sizeof LEVELS / sizeof LEVELS[0]) {
            snprintf(err, errlen,
                     "Invalid params: _meta " MCP_META_LOG_LEVEL " must be a log level (debug, "
                     "info, notice, warning, error, critical, alert, emergency)");
            return -32602;
        }
    }
    return 0;
}

static int b64_digit(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 (padding optional) into out; -1 when it is not base64. */
static int b64_decode(const char *s, size_t n, buf *out)
{
    while (n && s[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return -1;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int d = b64_digit((unsigned char)s[i]);
        if (d < 0)
            return -1;
        acc = (acc << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf_putc(out, (char)((acc >> bits) & 0xff));
        }
    }
    return 0;
}

/* Mcp-Name against the body's name (or uri): 0 or -32020 with the message. */
static int check_name(const char *header, const char *body_value, const char *what, char *err,
                      size_t errlen)
{
    if (!header) {
        snprintf(err, errlen, "Header mismatch: Mcp-Name header is required (the request's %s)",
                 what);
        return -32020;
    }
    size_t blen = strlen(body_value);
    /* the value as sent, the common case (a value in the encoded form is decoded) */
    if (strncmp(body_value, "=?base64?", 9) && hdr_eq(header, body_value, blen))
        return 0;
    size_t n;
    const char *v = ows_trim(header, &n);
    buf dec = BUF_INIT;
    int rc = 0;
    if (n >= 12 && !strncmp(v, "=?base64?", 9) && !strncmp(v + n - 2, "?=", 2)) {
        if (b64_decode(v + 9, n - 11, &dec) != 0) {
            snprintf(err, errlen, "Header mismatch: Mcp-Name is not valid base64");
            rc = -32020;
            goto done;
        }
        v = dec.data ? dec.data : "";
        n = dec.len;
    }
    if (blen != n || memcmp(v, body_value, n)) {
        snprintf(err, errlen,
                 "Header mismatch: Mcp-Name header value '%.*s' does not match body %s '%.80s'",
                 (int)(n < 80 ? n : 80), v, what, body_value);
        rc = -32020;
    }
done:
    buf_free(&dec);
    return rc;
}

int mcp_era_check(const mcp_msg *m, const mcp_era_headers *h, const mcp_era_env *env,
                  int *http_status, buf *data, char *err, size_t errlen)
{
    *http_status = 200;
    int code = check_envelope(env, err, errlen);
    if (code) {
        *http_status = 400;
        return code;
    }
    const char *pv = env->pv;
    size_t pvn = env->pv_len;
    int pvshow = (int)(pvn < 60 ? pvn : 60);
    if (h->protocol_version && !hdr_eq(h->protocol_version, pv, pvn)) {
        size_t n;
        const char *hv = ows_trim(h->protocol_version, &n);
        *http_status = 400;
        snprintf(err, errlen,
                 "Header mismatch: MCP-Protocol-Version header '%.*s' does not match _meta "
                 "protocolVersion '%.*s'",
                 (int)(n < 60 ? n : 60), hv, pvshow, pv);
        return -32020;
    }
    if (h->method && !hdr_eq(h->method, m->method, strlen(m->method))) {
        size_t mn;
        const char *mv = ows_trim(h->method, &mn);
        *http_status = 400;
        snprintf(err, errlen,
                 "Header mismatch: Mcp-Method header value '%.*s' does not match body method "
                 "'%.60s'",
                 (int)(mn < 60 ? mn : 60), mv, m->method);
        return -32020;
    }
    if (pvn != sizeof MCP_MODERN_VERSION - 1 || memcmp(pv, MCP_MODERN_VERSION, pvn)) {
        *http_status = 400;
        snprintf(err, errlen, "Unsupported protocol version: %.*s (supported: %s)", pvshow, pv,
                 MCP_MODERN_VERSION);
        buf_puts(data, "{\"supported\":[\"" MCP_MODERN_VERSION "\"],\"requested\":");
        json_write_string(data, pv, pvn);
        buf_putc(data, '}');
        return -32022;
    }
    if (!h->protocol_version)
        return bad(http_status, err, errlen, -32020,
                   "Header mismatch: the MCP-Protocol-Version header is required");
    if (!h->method && m->kind == MCP_MSG_REQUEST)
        return bad(http_status, err, errlen, -32020,
                   "Header mismatch: the Mcp-Method header is required");
    const char *what = !strcmp(m->method, "resources/read") ? "uri"
                       : !strcmp(m->method, "tools/call") || !strcmp(m->method, "prompts/get")
                           ? "name"
                           : NULL;
    const char *body_value = what && m->params ? json_get_string(m->params, what) : NULL;
    if (body_value && (code = check_name(h->name, body_value, what, err, errlen)) != 0) {
        *http_status = 400;
        return code;
    }
    return 0;
}

/* Length of the longest valid UTF-8 prefix of s (a message quoting what a client
 * sent, clipped at a byte count, must stay JSON). */
static size_t utf8_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (i + k > n || !json_utf8_valid(s + i, k))
            break;
        i += k;
    }
    return i;
}

void mcp_era_write_error(buf *out, const char *id_json, int code, const char *message,
                         const char *data_json)
{
    buf_puts(out, "{\"jsonrpc\":\"2.0\",");
    if (id_json && *id_json) {
        buf_puts(out, "\"id\":");
        buf_puts(out, id_json);
        buf_putc(out, ',');
    }
    buf_printf(out, "\"error\":{\"code\":%d,\"message\":", code);
    json_write_string(out, message, utf8_prefix(message, strlen(message)));
    if (data_json && *data_json) {
        buf_puts(out, ",\"data\":");
        buf_puts(out, data_json);
    }
    buf_puts(out, "}}");
}

void mcp_era_result_tail(buf *out, long ttl_ms)
{
    static const char TAIL[] = ",\"_meta\":{" MCP_ERA_SERVER_INFO "}";
    buf_puts(out, ",\"resultType\":\"complete\"");
    if (ttl_ms >= 0)
        buf_printf(out, ",\"ttlMs\":%ld,\"cacheScope\":\"private\"", ttl_ms);
    buf_append(out, TAIL, sizeof TAIL - 1);
}

void mcp_era_discover(buf *out, const char *instructions)
{
    buf_puts(out, "{\"supportedVersions\":[\"" MCP_MODERN_VERSION "\"],"
                  "\"capabilities\":{\"tools\":{\"listChanged\":true},\"prompts\":{},"
                  "\"resources\":{}}");
    if (instructions) {
        buf_puts(out, ",\"instructions\":");
        json_write_string(out, instructions, strlen(instructions));
    }
    buf_putc(out, '}');
}

int mcp_era_header_modern(const char *hv)
{
    if (!hv)
        return 0;
    while (*hv == ' ' || *hv == '\t')
        hv++;
    /* starting with the stateless version (the common case: the version itself), it
     * sorts at or after it: no copy */
    if (!strncmp(hv, MCP_MODERN_VERSION, sizeof MCP_MODERN_VERSION - 1))
        return 1;
    size_t n;
    const char *v = ows_trim(hv, &n);
    char ver[64];
    if (!v || n >= sizeof ver)
        return v != NULL && strncmp(v, MCP_MODERN_VERSION, 10) >= 0;
    memcpy(ver, v, n);
    ver[n] = '\0';
    return mcp_era_version_modern(ver);
}
