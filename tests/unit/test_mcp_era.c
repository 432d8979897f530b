/* test_mcp_era: the stateless era's edge (src/codec/mcp_era.c) on fixed messages:
 * which era a message belongs to, each rung of the validation ladder with its code
 * and status in order, the Mcp-Name forms (plain, surrounding whitespace, base64),
 * the error reply without a null id, and the result tail. */
#include <string.h>

#include "check.h"
#include "json.h"
#include "mcp_era.h"

#define ENV                                                                                        \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

typedef struct {
    int code, status;
    mcp_era era;
    char err[320];
    buf data;
} verdict;

/* Parses body, classifies it and, in the stateless era, runs the ladder. */
static verdict run(const char *body, const char *pv, const char *method, const char *name)
{
    verdict v;
    memset(&v, 0, sizeof v);
    mcp_msg m;
    int rc = mcp_parse_message(body, strlen(body), 0, &m, v.err, sizeof v.err);
    CHECK(rc == 0);
    mcp_era_headers h = {pv, method, name};
    v.code = mcp_era_classify(&m, &h, &v.era, v.err, sizeof v.err);
    if (!v.code && v.era == MCP_ERA_MODERN)
        v.code = mcp_era_check(&m, &h, &v.status, &v.data, v.err, sizeof v.err);
    mcp_msg_free(&m);
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
    /* a notification needs no Mcp-Method */
    expect("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{" ENV "}}", L,
           NULL, NULL, MCP_ERA_MODERN, 0);

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
    CHECK(mcp_era_version_modern("2026-07-28") && mcp_era_version_modern("v999.0.0"));
    CHECK(!mcp_era_version_modern("2025-11-25") && !mcp_era_version_modern("1999-01-01"));
    return CHECK_DONE();
}
