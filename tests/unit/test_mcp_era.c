/* test_mcp_era: the stateless era's edge (src/codec/mcp_era.c) on fixed messages:
 * which era a message belongs to, each rung of the validation ladder with its code
 * and status in order, the Mcp-Name forms (plain, surrounding whitespace, base64),
 * the error reply without a null id, and the result tail. */
#include <string.h>

#include "check.h"
#include "json.h"
#include "mcp_era.h"

#define ENV_MEMBERS                                                                                \
    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                                  \
    "\"io.modelcontextprotocol/clientCapabilities\":{}"
#define ENV "\"_meta\":{" ENV_MEMBERS "}"

typedef struct {
    int code, status;
    mcp_era era;
    char err[320];
    buf data;
} verdict;

/* Parses body (text: params._meta kept as its text, read by the scan; else the
 * whole tree), classifies it and, in the stateless era, runs the ladder. */
static verdict run_as(const char *body, const char *pv, const char *method, const char *name,
                      int text)
{
    verdict v;
    memset(&v, 0, sizeof v);
    mcp_msg m;
    int rc = (text ? mcp_parse_message_meta_text : mcp_parse_message)(body, strlen(body), 0, &m,
                                                                      v.err, sizeof v.err);
    CHECK(rc == 0);
    mcp_era_env env;
    if (mcp_era_read(&m, &env) != 0) {
        CHECK(text);
        mcp_msg_meta_parse(&m);
        CHECK(mcp_era_read(&m, &env) == 0);
    }
    mcp_era_headers h = {pv, method, name};
    v.code = mcp_era_classify(&m, &h, &env, &v.era, v.err, sizeof v.err);
    if (!v.code && v.era == MCP_ERA_MODERN)
        v.code = mcp_era_check(&m, &h, &env, &v.status, &v.data, v.err, sizeof v.err);
    mcp_msg_free(&m);
    return v;
}

/* Both readings of the envelope give the same verdict, word for word. */
static verdict run(const char *body, const char *pv, const char *method, const char *name)
{
    verdict v = run_as(body, pv, method, name, 0);
    verdict t = run_as(body, pv, method, name, 1);
    CHECK(t.code == v.code && t.era == v.era && t.status == v.status);
    CHECK_STR(t.err, v.err);
    CHECK_STR(t.data.data ? t.data.data : "", v.data.data ? v.data.data : "");
    if (t.code != v.code || strcmp(t.err, v.err))
        fprintf(stderr, "  body %s: tree %d (%s), text %d (%s)\n", body, v.code, v.err, t.code,
                t.err);
    buf_free(&t.data);
    return v;
}

static void expect(const char *body, const char *pv, const char *method, const char *name,
                   mcp_era era, int code)
{
    verdict v = run(body, pv, method, name);
    CHECK(v.era == era);
    CHECK(v.code == code);
    if (v.code != code || v.era != era)
        fprintf(stderr, "  body %s: era %d code %d (%s)\n", body, v.era, v.code, v.err);
    if (code && code != -32020)
        CHECK(v.status == 400);
    buf_free(&v.data);
}

int main(void)
{
    const char *L = "2026-07-28";
    /* the era */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", NULL, NULL, NULL,
           MCP_ERA_LEGACY, 0);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", "2025-11-25", NULL, NULL,
           MCP_ERA_LEGACY, 0);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
           "\"progressToken\":1}}}",
           NULL, NULL, NULL, MCP_ERA_LEGACY, 0);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" ENV "}}", L,
           "tools/list", NULL, MCP_ERA_MODERN, 0);
    /* a stateless header without the envelope is not the session era: -32602 */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", " 2026-07-28 ", "tools/list",
           NULL, MCP_ERA_MODERN, -32602);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", "v999.0.0", "tools/list",
           NULL, MCP_ERA_MODERN, -32602);
    /* initialize under a stateless header, without the claim: -32020 */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", L, NULL, NULL,
           MCP_ERA_MODERN, -32020);
    /* rung 2: the envelope */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
           "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}",
           L, "tools/list", NULL, MCP_ERA_MODERN, -32602);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
           "\"io.modelcontextprotocol/protocolVersion\":7,"
           "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
           L, "tools/list", NULL, MCP_ERA_MODERN, -32602);
    /* rung 3 before rung 4: header and _meta disagree */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
           "\"io.modelcontextprotocol/protocolVersion\":\"v999.0.0\","
           "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
           L, "tools/list", NULL, MCP_ERA_MODERN, -32020);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" ENV "}}", L,
           "TOOLS/LIST", NULL, MCP_ERA_MODERN, -32020);
    /* rung 4: the version, with data */
    {
        verdict v = run("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                        "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"v999.0.0\","
                        "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
                        "v999.0.0", "tools/list", NULL);
        CHECK(v.code == -32022 && v.status == 400);
        CHECK_STR(v.data.data, "{\"supported\":[\"2026-07-28\"],\"requested\":\"v999.0.0\"}");
        buf_free(&v.data);
    }
    /* rung 5: headers that must be present */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" ENV "}}", NULL,
           "tools/list", NULL, MCP_ERA_MODERN, -32020);
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" ENV "}}", L, NULL,
           NULL, MCP_ERA_MODERN, -32020);
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"get_kn\"," ENV "}}";
    expect(call, L, "tools/call", NULL, MCP_ERA_MODERN, -32020);
    expect(call, L, "tools/call", "other", MCP_ERA_MODERN, -32020);
    expect(call, L, "tools/call", " \tget_kn ", MCP_ERA_MODERN, 0);
    expect(call, L, "tools/call", "=?base64?Z2V0X2tu?=", MCP_ERA_MODERN, 0);
    expect(call, L, "tools/call", "=?base64?Z2V0X2tx?=", MCP_ERA_MODERN, -32020);
    expect(call, L, "tools/call", "=?base64?!!!!?=", MCP_ERA_MODERN, -32020);
    /* a header in the encoded form is decoded, even when the body holds the same text */
    expect("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
           "\"name\":\"=?base64?Z2V0X2tu?=\"," ENV "}}",
           L, "tools/call", "=?base64?Z2V0X2tu?=", MCP_ERA_MODERN, -32020);
    expect(call, L, "tools/call", "get_kn\t", MCP_ERA_MODERN, 0);
    expect(call, L, "tools/call", "get_k", MCP_ERA_MODERN, -32020);
    expect(call, L, "tools/call", "get_knn", MCP_ERA_MODERN, -32020);
    expect(call, " 2026-07-28", " tools/call ", "get_kn", MCP_ERA_MODERN, 0);
    expect(call, "2026-07-28x", "tools/call", "get_kn", MCP_ERA_MODERN, -32020);
    /* a notification needs no Mcp-Method */
    expect("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{" ENV "}}", L,
           NULL, NULL, MCP_ERA_MODERN, 0);

    /* the envelope as text and as a tree: the same verdicts (run compares them) on
     * duplicates (the last counts), clientInfo, logLevel, whitespace, brackets and
     * quotes inside strings, escapes (the text is parsed then), _meta not an object */
    static const char *const metas[] = {
        "{\"io.modelcontextprotocol/protocolVersion\":1,"
        "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{}}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/clientCapabilities\":[]}",
        "{ \"io.modelcontextprotocol/protocolVersion\" : \"2026-07-28\" ,\n"
        "\"io.modelcontextprotocol/clientCapabilities\" :{\"a\":[\"}]\",{\"b\":\"{\"}]} ,"
        "\"io.modelcontextprotocol/clientInfo\": {\"name\":\"n\",\"version\":\"1\"} }",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"n\",\"version\":1}}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"n\",\"version\":\"1\",\"name\":null}}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/clientInfo\":[\"name\",\"version\"]}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/logLevel\":\"warning\"}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/logLevel\":\"warn\"}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/logLevel\":3}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\\u0000x\","
        "\"io.modelcontextprotocol/clientCapabilities\":{}}",
        "{\"io.modelcontextprotocol\\/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{}}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-2\","
        "\"io.modelcontextprotocol/clientCapabilities\":{}}",
        "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},\"progressToken\":-1.5e3,"
        "\"x\":[true,false,null,{}]}",
        "\"io.modelcontextprotocol/protocolVersion\"",
        "[]",
        "7",
        "{}"};
    for (size_t i = 0; i < sizeof metas / sizeof metas[0]; i++) {
        buf body = BUF_INIT;
        buf_printf(&body,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                   "\"name\":\"get_kn\",\"_meta\":%s}}",
                   metas[i]);
        verdict v = run(body.data, L, "tools/call", "get_kn");
        buf_free(&v.data);
        verdict w = run(body.data, NULL, NULL, NULL);
        buf_free(&w.data);
        buf_free(&body);
    }
    /* the kept text, parsed, is the tree the whole parse gives; others is told */
    {
        const char *body =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
            "{\"_meta\":{\"a\":1},\"name\":\"n\",\"_meta\":{\"progressToken\":\"t\"," ENV_MEMBERS
            "},\"arguments\":{\"_meta\":[1]}}}";
        mcp_msg a, t;
        char err[128];
        CHECK(mcp_parse_message(body, strlen(body), 0, &a, err, sizeof err) == 0);
        CHECK(mcp_parse_message_meta_text(body, strlen(body), 0, &t, err, sizeof err) == 0);
        CHECK(t.meta_text && !a.meta_text);
        CHECK(json_typeof(json_get(t.params, "_meta")) == JSON_STRING);
        mcp_era_env e;
        CHECK(mcp_era_read(&t, &e) == 0 && e.meta && e.others && e.pv_len == 10);
        mcp_msg_meta_parse(&t);
        CHECK(!t.meta_text);
        buf x = BUF_INIT, y = BUF_INIT;
        json_write(&x, a.msg, 0);
        json_write(&y, t.msg, 0);
        CHECK_STR(y.data, x.data);
        CHECK(mcp_era_read(&t, &e) == 0 && e.meta && e.others);
        buf_free(&x);
        buf_free(&y);
        mcp_msg_free(&a);
        mcp_msg_free(&t);
        /* the envelope alone: no others */
        const char *only = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                           "\"name\":\"n\"," ENV "}}";
        CHECK(mcp_parse_message_meta_text(only, strlen(only), 0, &t, err, sizeof err) == 0);
        CHECK(mcp_era_read(&t, &e) == 0 && e.meta && !e.others && e.caps_type == JSON_OBJECT);
        mcp_msg_free(&t);
        /* no _meta: no envelope */
        const char *none = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{}}";
        CHECK(mcp_parse_message_meta_text(none, strlen(none), 0, &t, err, sizeof err) == 0);
        CHECK(mcp_era_read(&t, &e) == 0 && !e.meta && e.pv_type < 0);
        mcp_msg_free(&t);
    }

    /* the error reply: the id when known, never null; data when given */
    buf b = BUF_INIT;
    mcp_era_write_error(&b, "", -32700, "Parse error", NULL);
    CHECK_STR(b.data,
              "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}");
    buf_reset(&b);
    mcp_era_write_error(&b, "\"x\"", -32022, "no", "{\"a\":1}");
    CHECK_STR(b.data,
              "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32022,\"message\":\"no\","
              "\"data\":{\"a\":1}}}");
    buf_reset(&b);
    mcp_era_result_tail(&b, 5);
    CHECK(strstr(b.data, ",\"resultType\":\"complete\",\"ttlMs\":5,\"cacheScope\":\"private\","
                         "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{") == b.data);
    buf_reset(&b);
    mcp_era_discover(&b, "hi");
    json_value *d = json_parse(b.data, b.len, NULL, NULL, 0);
    CHECK(d && json_get(d, "supportedVersions") && json_get(d, "capabilities"));
    json_free(d);
    buf_free(&b);
    /* the header: its optional whitespace aside, compared as a version */
    CHECK(mcp_era_header_modern("2026-07-28") && mcp_era_header_modern(" \t2026-07-28 \t"));
    CHECK(mcp_era_header_modern("2026-07-28x") && mcp_era_header_modern("2027-01-01"));
    CHECK(mcp_era_header_modern("v999.0.0") && !mcp_era_header_modern("2025-11-25"));
    CHECK(!mcp_era_header_modern(NULL) && !mcp_era_header_modern("") &&
          !mcp_era_header_modern("2026-07-2") && !mcp_era_header_modern("  "));
    CHECK(mcp_era_version_modern("2026-07-28") && mcp_era_version_modern("v999.0.0"));
    CHECK(!mcp_era_version_modern("2025-11-25") && !mcp_era_version_modern("1999-01-01"));
    return CHECK_DONE();
}
