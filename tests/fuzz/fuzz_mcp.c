/* fuzz_mcp: libFuzzer target for MCP's JSON-RPC handling (src/codec/mcp_msg.c, the pure
 * part of src/surface/mcp.c). Input: one POST body, parsed with the server's default
 * nesting limit (limits.json_max_depth = 128).
 *
 * Properties: the result is 0 or one of -32700/-32600/-32602 with the HTTP status
 * the spec gives it (400, or 200 for invalid params) and a message; the error reply
 * the server would send is valid JSON echoing the code, the message and the id; an
 * accepted message is a request (id + method), a notification (method, no id, never
 * initialize) or a client response (no method); params is an object or absent; the
 * tools/call and tools/list params checks and the unknown-method error give valid
 * replies; a result envelope around the id parses; the same body gives the same
 * answer with params._meta kept as text (mcp_parse_message_meta_text), the envelope
 * read from that text is the one read from the tree, and the text parsed back gives
 * the same tree. */
#include <string.h>

#include "fuzz_common.h"
#include "json.h"
#include "mcp_era.h"
#include "mcp_msg.h"

#define T "fuzz_mcp"

/* The reply text parses, and says code/message/id as given. */
static void check_reply(const char *id_json, int code, const char *message)
{
    buf b = BUF_INIT;
    char err[160];
    mcp_write_error(&b, id_json, code, message);
    json_value *v = json_parse(b.data, b.len, NULL, err, sizeof err);
    fuzz_must(v != NULL, T, "the error reply is valid JSON");
    const json_value *e = json_get(v, "error");
    const json_value *c = e ? json_get(e, "code") : NULL;
    fuzz_must(c && json_typeof(c) == JSON_INT && json_get_int(c) == code, T,
              "the reply carries the code");
    const char *m = json_get_string(e, "message");
    fuzz_must(m && *m, T, "the reply carries a message");
    fuzz_must(!strncmp(m, message, strlen(m)), T, "the reply message is the message (clipped)");
    buf id = BUF_INIT;
    json_write(&id, json_get(v, "id"), 0);
    fuzz_must(!strcmp(id.data, id_json && *id_json ? id_json : "null"), T,
              "the reply echoes the id");
    buf_free(&id);
    json_free(v);
    buf_free(&b);
}

static void check_call(const mcp_msg *m)
{
    char err[128];
    if (!strcmp(m->method, "tools/call")) {
        mcp_call c;
        int rc = mcp_parse_call(m->params, &c, err, sizeof err);
        fuzz_must(rc == 0 || rc == -32602, T, "tools/call params: 0 or -32602");
        if (rc) {
            check_reply(m->id.data, rc, err);
            return;
        }
        fuzz_must(c.name != NULL, T, "an accepted call has a name");
        fuzz_must(!c.args || json_typeof(c.args) == JSON_OBJECT, T, "arguments: object or none");
        fuzz_must(!c.meta || json_typeof(c.meta) == JSON_OBJECT, T, "_meta: object or none");
        buf u = BUF_INIT;
        buf_puts(&u, "Unknown tool: ");
        buf_puts(&u, c.name);
        check_reply(m->id.data, -32602, u.data);
        buf_free(&u);
    } else if (!strcmp(m->method, "tools/list")) {
        size_t off = 1;
        int rc = mcp_parse_cursor(m->params, &off, err, sizeof err);
        fuzz_must(rc == 0 || rc == -32602, T, "tools/list params: 0 or -32602");
        if (rc)
            check_reply(m->id.data, rc, err);
        else if (!m->params || !json_get(m->params, "cursor"))
            fuzz_must(off == 0, T, "no cursor, offset 0");
    } else {
        int rc = mcp_check_method(m->method, err, sizeof err);
        fuzz_must(rc == 0 || rc == -32601, T, "methods: 0 or -32601");
        if (rc)
            check_reply(m->id.data, rc, err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mcp_msg m, m2;
    char err[320], err2[320];
    int rc = mcp_parse_message((const char *)data, size, 128, &m, err, sizeof err);
    int rc2 = mcp_parse_message_meta_text((const char *)data, size, 128, &m2, err2, sizeof err2);
    fuzz_must(rc == rc2 && (rc == 0 || !strcmp(err, err2)) && m.kind == m2.kind, T,
              "the same body gives the same answer, _meta kept as text or not");
    if (rc == 0) {
        /* the envelope read from the text is the one read from the tree */
        mcp_era_env e1, e2;
        fuzz_must(mcp_era_read(&m, &e1) == 0, T, "a tree's envelope reads");
        if (mcp_era_read(&m2, &e2) == 0)
            fuzz_must(e1.meta == e2.meta && e1.others == e2.others && e1.pv_type == e2.pv_type &&
                          e1.caps_type == e2.caps_type && e1.ci_type == e2.ci_type &&
                          e1.lv_type == e2.lv_type && e1.ci_ok == e2.ci_ok &&
                          e1.pv_len == e2.pv_len && e1.lv_len == e2.lv_len &&
                          (!e1.pv || !memcmp(e1.pv, e2.pv, e1.pv_len)) &&
                          (!e1.lv || !memcmp(e1.lv, e2.lv, e1.lv_len)),
                      T, "the text and the tree give the same envelope");
        /* parsed back, the kept text is the whole parse's tree */
        mcp_msg_meta_parse(&m2);
        buf w1 = BUF_INIT, w2 = BUF_INIT;
        json_write(&w1, m.msg, 0);
        json_write(&w2, m2.msg, 0);
        fuzz_must(w1.len == w2.len && !memcmp(w1.data, w2.data, w1.len), T,
                  "the kept _meta parses to the same tree");
        buf_free(&w1);
        buf_free(&w2);
    }
    mcp_msg_free(&m2);
    if (rc) {
        fuzz_must(rc == -32700 || rc == -32600 || rc == -32602, T, "a protocol error code");
        fuzz_must(m.http_status == (rc == -32602 ? 200 : 400), T, "the status of the code");
        fuzz_must(rc != -32700 || m.msg == NULL, T, "parse errors only for unparsable bodies");
        check_reply(m.id.data, rc, err);
        mcp_msg_free(&m);
        return 0;
    }
    fuzz_must(m.msg && json_typeof(m.msg) == JSON_OBJECT, T, "an accepted message is an object");
    fuzz_must(!m.params || json_typeof(m.params) == JSON_OBJECT, T, "params: object or none");
    switch (m.kind) {
    case MCP_MSG_REQUEST:
        fuzz_must(m.method && m.has_id && m.id.len > 0, T, "a request has a method and an id");
        check_call(&m);
        {
            /* The result envelope mcp_send_result builds around the id. */
            buf r = BUF_INIT;
            buf_puts(&r, "{\"jsonrpc\":\"2.0\",\"id\":");
            buf_append(&r, m.id.data, m.id.len);
            buf_puts(&r, ",\"result\":{}}");
            json_value *v = json_parse(r.data, r.len, NULL, err, sizeof err);
            fuzz_must(v != NULL, T, "the result envelope is valid JSON");
            json_free(v);
            buf_free(&r);
        }
        break;
    case MCP_MSG_NOTIFICATION:
        fuzz_must(m.method && !m.has_id, T, "a notification has a method and no id");
        fuzz_must(strcmp(m.method, "initialize") != 0, T, "initialize is never a notification");
        break;
    case MCP_MSG_RESPONSE:
        fuzz_must(!m.method && m.has_id && m.id.len > 0, T, "a client response has an id only");
        break;
    default:
        fuzz_must(0, T, "a known kind");
    }
    mcp_msg_free(&m);
    return 0;
}
