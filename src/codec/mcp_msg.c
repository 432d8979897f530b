/* mcp_msg: JSON-RPC message validation without a server. See mcp_msg.h. */
#include "mcp_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(mcp_msg *m, int status, int code, char *err, size_t errlen, const char *msg)
{
    m->http_status = status;
    snprintf(err, errlen, "%s", msg);
    return code;
}

/* params._meta kept as its text, every other member whole. */
static const json_keep KEEP_PARAMS[] = {{"_meta", NULL, 1}, {NULL, NULL, JSON_KEEP_REST}};
static const json_keep KEEP_MESSAGE[] = {{"params", KEEP_PARAMS, 0}, {NULL, NULL, JSON_KEEP_REST}};

static int parse_message(const char *body, size_t len, size_t max_depth, int meta_text,
                         mcp_msg *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->max_depth = max_depth;
    char perr[256];
    json_limits lim = {max_depth, 0};
    if (meta_text && body) {
        out->msg = json_parse_keep(body, len, &lim, KEEP_MESSAGE, perr, sizeof perr);
        out->meta_text = 1;
    } else {
        out->msg = json_parse(body ? body : "", len, &lim, perr, sizeof perr);
    }
    if (!out->msg) {
        out->http_status = 400;
        snprintf(err, errlen, "Parse error: %s", perr);
        return -32700;
    }
    json_type t = json_typeof(out->msg);
    if (t != JSON_OBJECT)
        return fail(out, 400, -32600, err, errlen,
                    t == JSON_ARRAY ? "Invalid Request: batches are not supported"
                                    : "Invalid Request: a JSON-RPC message must be an object");
    const json_value *id = json_get(out->msg, "id");
    out->has_id = id != NULL;
    if (id && (json_typeof(id) == JSON_STRING || json_typeof(id) == JSON_INT ||
               json_typeof(id) == JSON_NUMTEXT || json_typeof(id) == JSON_DOUBLE))
        json_write(&out->id, id, 0);
    const char *jsonrpc = json_get_string(out->msg, "jsonrpc");
    if (!jsonrpc || strcmp(jsonrpc, "2.0"))
        return fail(out, 400, -32600, err, errlen, "Invalid Request: jsonrpc must be \"2.0\"");
    if (id && !out->id.len)
        return fail(out, 400, -32600, err, errlen,
                    "Invalid Request: id must be a string or a number");
    const json_value *mv = json_get(out->msg, "method");
    if (!mv) {
        if (id && (json_get(out->msg, "result") || json_get(out->msg, "error"))) {
            out->kind = MCP_MSG_RESPONSE;
            return 0;
        }
        return fail(out, 400, -32600, err, errlen, "Invalid Request: method is required");
    }
    if (json_typeof(mv) != JSON_STRING)
        return fail(out, 400, -32600, err, errlen, "Invalid Request: method must be a string");
    out->method = json_get_str(mv, NULL);
    const json_value *params = json_get(out->msg, "params");
    if (params && json_typeof(params) != JSON_OBJECT)
        return fail(out, 200, -32602, err, errlen, "Invalid params: params must be an object");
    out->params = params;
    if (!strcmp(out->method, "initialize") && !id)
        return fail(out, 400, -32600, err, errlen,
                    "Invalid Request: initialize must be a request with an id");
    out->kind = id ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
    return 0;
}

int mcp_parse_message(const char *body, size_t len, size_t max_depth, mcp_msg *out, char *err,
                      size_t errlen)
{
    return parse_message(body, len, max_depth, 0, out, err, errlen);
}

int mcp_parse_message_meta_text(const char *body, size_t len, size_t max_depth, mcp_msg *out,
                                char *err, size_t errlen)
{
    return parse_message(body, len, max_depth, 1, out, err, errlen);
}

void mcp_params_meta_parse(json_value *params, size_t max_depth)
{
    if (!params || json_typeof(params) != JSON_OBJECT)
        return;
    /* the last _meta is the one readers see; earlier ones are parsed too, so that
     * no member keeps a text form */
    for (size_t i = 0, n = json_count(params); i < n; i++) {
        size_t klen, tlen;
        const char *k = json_key_at(params, i, &klen);
        if (klen != 5 || memcmp(k, "_meta", 5))
            continue;
        const json_value *t = json_val_at(params, i);
        const char *text = json_get_str(t, &tlen);
        json_limits lim = {max_depth, 0};
        char err[128];
        /* checked when the message was parsed: it parses */
        json_value *v = text ? json_parse(text, tlen, &lim, err, sizeof err) : NULL;
        json_obj_replace_at(params, i, v ? v : json_new_null());
    }
}

void mcp_msg_meta_parse(mcp_msg *m)
{
    if (!m->meta_text)
        return;
    m->meta_text = 0;
    if (m->msg && json_typeof(m->msg) == JSON_OBJECT)
        for (size_t i = 0, n = json_count(m->msg); i < n; i++) {
            size_t klen;
            const char *k = json_key_at(m->msg, i, &klen);
            if (klen == 6 && !memcmp(k, "params", 6))
                mcp_params_meta_parse((json_value *)json_val_at(m->msg, i), m->max_depth);
        }
}

void mcp_msg_free(mcp_msg *m)
{
    json_free(m->msg);
    buf_free(&m->id);
    m->meta_text = 0;
    m->msg = NULL;
    m->method = NULL;
    m->params = NULL;
}

int mcp_parse_call(const json_value *params, mcp_call *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!params || json_typeof(params) != JSON_OBJECT) {
        snprintf(err, errlen, "Invalid params: params must be an object with a tool name");
        return -32602;
    }
    out->name = json_get_string(params, "name");
    if (!out->name) {
        snprintf(err, errlen, "Invalid params: name must be a string");
        return -32602;
    }
    const json_value *meta = json_get(params, "_meta");
    out->meta = meta && json_typeof(meta) == JSON_OBJECT ? meta : NULL;
    const json_value *args = json_get(params, "arguments");
    if (args && json_typeof(args) != JSON_OBJECT && json_typeof(args) != JSON_NULL) {
        snprintf(err, errlen, "Invalid params: arguments must be an object");
        return -32602;
    }
    out->args = args && json_typeof(args) == JSON_OBJECT ? args : NULL;
    return 0;
}

int mcp_parse_cursor(const json_value *params, size_t *offset, char *err, size_t errlen)
{
    *offset = 0;
    const char *cursor = params ? json_get_string(params, "cursor") : NULL;
    if (params && json_get(params, "cursor") && !cursor) {
        snprintf(err, errlen, "Invalid params: cursor must be a string");
        return -32602;
    }
    if (cursor) {
        char *end = NULL;
        if (strncmp(cursor, "o:", 2) != 0 || !cursor[2] ||
            (*offset = strtoul(cursor + 2, &end, 10), *end)) {
            snprintf(err, errlen, "Invalid params: unknown cursor");
            return -32602;
        }
    }
    return 0;
}

int mcp_check_method(const char *method, char *err, size_t errlen)
{
    static const char *const KNOWN[] = {"initialize", "ping", "tools/list", "tools/call"};
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (!strcmp(method, KNOWN[i]))
            return 0;
    snprintf(err, errlen, "Method not found: %.200s", method);
    return -32601;
}

/* Length of the longest valid UTF-8 prefix of s: "%.200s" above can split a
 * character, and the reply must stay valid JSON (found by fuzz_mcp). */
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

void mcp_write_error(buf *out, const char *id_json, int code, const char *message)
{
    buf_puts(out, "{\"jsonrpc\":\"2.0\",\"id\":");
    buf_puts(out, id_json && *id_json ? id_json : "null");
    buf_printf(out, ",\"error\":{\"code\":%d,\"message\":", code);
    json_write_string(out, message, utf8_prefix(message, strlen(message)));
    buf_puts(out, "}}");
}

static void put_text(buf *out, const buf *b)
{
    json_write_string(out, b->data ? b->data : "", b->len);
}

static void put_raw(buf *out, const buf *b)
{
    if (b->len)
        buf_append(out, b->data, b->len);
}

/* The JSON text as a JSON string: the outcome's quoted copy when made, else escaped
 * here. */
static void put_json_text(buf *out, const call_outcome *o)
{
    if (o->json_quoted.len)
        put_raw(out, &o->json_quoted);
    else
        put_text(out, &o->json);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The result object's JSON text with bkn_receipt as one more member, put in before
 * its closing brace (the result's own bytes, nothing parsed or written again). -1,
 * nothing written, when the text is not an object's. */
static int put_text_with_receipt(buf *out, const buf *text, const buf *receipt)
{
    const char *s = text->data ? text->data : "";
    size_t b = 0, n = text->len;
    while (b < n && is_ws(s[b]))
        b++;
    while (n > b && is_ws(s[n - 1]))
        n--;
    if (n - b < 2 || s[b] != '{' || s[n - 1] != '}')
        return -1;
    size_t k = n - 1; /* the closing brace; k: past the last member */
    while (k > b + 1 && is_ws(s[k - 1]))
        k--;
    buf_append(out, s + b, k - b);
    buf_puts(out, k > b + 1 ? ",\"bkn_receipt\":" : "\"bkn_receipt\":");
    put_raw(out, receipt);
    buf_putc(out, '}');
    return 0;
}

/* The result object with bkn_receipt as one more member (written from the tree). */
static void put_result_with_receipt(buf *out, const json_value *result, const buf *receipt)
{
    size_t n = json_count(result);
    buf_putc(out, '{');
    for (size_t i = 0; i < n; i++) {
        size_t klen;
        const char *k = json_key_at(result, i, &klen);
        json_write_string(out, k, klen);
        buf_putc(out, ':');
        json_write(out, json_val_at(result, i), 0);
        buf_putc(out, ',');
    }
    buf_puts(out, "\"bkn_receipt\":");
    put_raw(out, receipt);
    buf_putc(out, '}');
}

/* The error object of a failed call: the text the tool or the gateway wrote, with
 * bkn_receipt as one more member when the failed call was recorded. A body that is
 * not a JSON object (nothing the gateway writes) is wrapped as {code, details}. */
static void put_error_object(buf *out, const call_outcome *o)
{
    json_value *e = json_parse(o->json.data ? o->json.data : "", o->json.len, NULL, NULL, 0);
    if (e && json_typeof(e) == JSON_OBJECT) {
        if (o->receipt_json.len)
            put_result_with_receipt(out, e, &o->receipt_json);
        else
            put_raw(out, &o->json);
    } else {
        const char *code = o->code[0] ? o->code : "tool_error";
        buf_puts(out, "{\"code\":");
        json_write_string(out, code, strlen(code));
        buf_puts(out, ",\"details\":");
        put_text(out, &o->json);
        if (o->receipt_json.len) {
            buf_puts(out, ",\"bkn_receipt\":");
            put_raw(out, &o->receipt_json);
        }
        buf_putc(out, '}');
    }
    json_free(e);
}

void mcp_write_tool_result(buf *out, const call_outcome *o)
{
    mcp_write_tool_result_ex(out, o, NULL, NULL);
}

void mcp_write_tool_result_open(buf *out, const call_outcome *o)
{
    buf_puts(out, "{\"content\":[{\"type\":\"text\",\"text\":");
    if (o->is_error) {
        /* An error result carries no structuredContent (a client validates it against
         * the tool's outputSchema, which describes results): its one text block is the
         * error object as compact JSON, receipt included. */
        buf e = {0};
        put_error_object(&e, o);
        put_text(out, &e);
        buf_free(&e);
        buf_puts(out, "}],\"isError\":true");
    } else {
        if (o->toon && o->toon_text.data)
            put_text(out, &o->toon_text);
        else
            put_json_text(out, o);
        buf_puts(out, "}],\"structuredContent\":");
        if (!o->receipt_json.len || put_text_with_receipt(out, &o->json, &o->receipt_json) < 0)
            put_raw(out, &o->json);
        buf_puts(out, ",\"isError\":false");
    }
}

void mcp_write_tool_result_ex(buf *out, const call_outcome *o, const char *meta_members,
                              const char *members)
{
    mcp_write_tool_result_open(out, o);
    if (o->unrecorded || o->receipt_pending || meta_members) {
        int any = 1;
        buf_puts(out, ",\"_meta\":{");
        if (o->unrecorded) {
            buf_puts(out, "\"openbkn.ai/trace-status\":\"unrecorded\"");
        } else if (o->receipt_pending) {
            buf_puts(out, "\"openbkn.ai/trace-status\":\"receipt_pending\","
                          "\"openbkn.ai/receipt-id\":");
            json_write_string(out, o->receipt_id, strlen(o->receipt_id));
        } else {
            any = 0;
        }
        if (meta_members) {
            if (any)
                buf_putc(out, ',');
            buf_puts(out, meta_members);
        }
        buf_putc(out, '}');
    }
    if (members) {
        buf_putc(out, ',');
        buf_puts(out, members);
    }
    buf_putc(out, '}');
}

void mcp_write_attempt_output(buf *out, const call_outcome *o)
{
    buf_puts(out, "{\"content\":[{\"type\":\"text\",\"text\":");
    put_json_text(out, o);
    buf_puts(out, o->is_error ? "}],\"isError\":true}" : "}],\"isError\":false}");
}
