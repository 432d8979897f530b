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

static int eq_trimmed(const char *hv, const char *body)
{
    size_t n;
    const char *v = ows_trim(hv, &n);
    return strlen(body) == n && !memcmp(v, body, n);
}

static const json_value *envelope(const mcp_msg *m)
{
    const json_value *meta = m->params ? json_get(m->params, "_meta") : NULL;
    return meta && json_typeof(meta) == JSON_OBJECT ? meta : NULL;
}

int mcp_era_classify(const mcp_msg *m, const mcp_era_headers *h, mcp_era *era, char *err,
                     size_t errlen)
{
    const json_value *meta = envelope(m);
    int claim = meta && json_get(meta, MCP_META_PROTOCOL_VERSION) != NULL;
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

/* The _meta envelope's own checks, in one pass over its members: -32602 with the
 * message, or 0 with *pv_out set to the protocol version. */
static int check_envelope(const json_value *meta, const char **pv_out, char *err, size_t errlen)
{
    static const char *const LEVELS[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
    static const char PREFIX[] = "io.modelcontextprotocol/";
    const size_t plen = sizeof PREFIX - 1;
    const json_value *pv = NULL, *caps = NULL, *ci = NULL, *lv = NULL;
    size_t n = json_count(meta);
    for (size_t i = 0; i < n; i++) {
        size_t klen;
        const char *k = json_key_at(meta, i, &klen);
        if (klen <= plen || memcmp(k, PREFIX, plen))
            continue;
        k += plen;
        klen -= plen;
        const json_value *v = json_val_at(meta, i);
        if (klen == 15 && !memcmp(k, "protocolVersion", 15))
            pv = v;
        else if (klen == 18 && !memcmp(k, "clientCapabilities", 18))
            caps = v;
        else if (klen == 10 && !memcmp(k, "clientInfo", 10))
            ci = v;
        else if (klen == 8 && !memcmp(k, "logLevel", 8))
            lv = v;
    }
    int pv_ok = pv && json_typeof(pv) == JSON_STRING;
    int caps_ok = caps && json_typeof(caps) == JSON_OBJECT;
    if (!pv_ok || !caps_ok) {
        snprintf(err, errlen, "Invalid params: missing _meta key(s): %s%s%s",
                 pv_ok ? "" : MCP_META_PROTOCOL_VERSION " (a string)",
                 !pv_ok && !caps_ok ? ", " : "",
                 caps_ok ? "" : MCP_META_CLIENT_CAPABILITIES " (an object)");
        return -32602;
    }
    if (ci && (json_typeof(ci) != JSON_OBJECT || !json_get_string(ci, "name") ||
               !json_get_string(ci, "version"))) {
        snprintf(err, errlen,
                 "Invalid params: _meta " MCP_META_CLIENT_INFO " must be an object with the "
                 "strings name and version");
        return -32602;
    }
    if (lv) {
        const char *s = json_typeof(lv) == JSON_STRING ? json_get_str(lv, NULL) : NULL;
        size_t i = 0;
        while (s && i < sizeof LEVELS / sizeof LEVELS[0] && strcmp(s, LEVELS[i]))
            i++;
        if (!s || i == sizeof LEVELS / sizeof LEVELS[0]) {
            snprintf(err, errlen,
                     "Invalid params: _meta " MCP_META_LOG_LEVEL " must be a log level (debug, "
                     "info, notice, warning, error, critical, alert, emergency)");
            return -32602;
        }
    }
    *pv_out = json_get_str(pv, NULL);
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
    if (strlen(body_value) != n || memcmp(v, body_value, n)) {
        snprintf(err, errlen,
                 "Header mismatch: Mcp-Name header value '%.*s' does not match body %s '%.80s'",
                 (int)(n < 80 ? n : 80), v, what, body_value);
        rc = -32020;
    }
done:
    buf_free(&dec);
    return rc;
}

int mcp_era_check(const mcp_msg *m, const mcp_era_headers *h, int *http_status, buf *data,
                  char *err, size_t errlen)
{
    *http_status = 200;
    const char *pv = NULL;
    int code = check_envelope(envelope(m), &pv, err, errlen);
    if (code) {
        *http_status = 400;
        return code;
    }
    size_t n;
    const char *hv = ows_trim(h->protocol_version, &n);
    if (hv && !eq_trimmed(h->protocol_version, pv)) {
        *http_status = 400;
        snprintf(err, errlen,
                 "Header mismatch: MCP-Protocol-Version header '%.*s' does not match _meta "
                 "protocolVersion '%.60s'",
                 (int)(n < 60 ? n : 60), hv, pv);
        return -32020;
    }
    if (h->method && !eq_trimmed(h->method, m->method)) {
        size_t mn;
        const char *mv = ows_trim(h->method, &mn);
        *http_status = 400;
        snprintf(err, errlen,
                 "Header mismatch: Mcp-Method header value '%.*s' does not match body method "
                 "'%.60s'",
                 (int)(mn < 60 ? mn : 60), mv, m->method);
        return -32020;
    }
    if (strcmp(pv, MCP_MODERN_VERSION)) {
        *http_status = 400;
        snprintf(err, errlen, "Unsupported protocol version: %.60s (supported: %s)", pv,
                 MCP_MODERN_VERSION);
        buf_puts(data, "{\"supported\":[\"" MCP_MODERN_VERSION "\"],\"requested\":");
        json_write_string(data, pv, strlen(pv));
        buf_putc(data, '}');
        return -32022;
    }
    if (!hv)
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
    size_t n;
    const char *v = ows_trim(hv, &n);
    char ver[64];
    if (!v || n >= sizeof ver)
        return v != NULL && strncmp(v, MCP_MODERN_VERSION, 10) >= 0;
    memcpy(ver, v, n);
    ver[n] = '\0';
    return mcp_era_version_modern(ver);
}
