/* mcp_era: the edge of the MCP endpoints where the two protocol eras part. The
 * same URL serves the session era (2025-11-25 and older: initialize, then
 * Mcp-Session-Id on every request) and the stateless era (2026-07-28: every request
 * carries its protocol version and client capabilities in params._meta, and the
 * MCP-Protocol-Version, Mcp-Method and Mcp-Name headers repeat the body). This
 * module decides which era a parsed POST belongs to, runs the stateless era's
 * validation ladder (each rung's HTTP status and JSON-RPC code), and writes the
 * framing that differs: error replies that omit an unknown id and may carry data,
 * and the members every stateless result ends with. Dispatch and the tools are the
 * same for both eras (surface/mcp.c); nothing here needs a server, so it is unit
 * tested and fuzzed on its own.
 *
 * Ownership: every pointer argument is borrowed for the call; out buffers are the
 * caller's. */
#ifndef CL_MCP_ERA_H
#define CL_MCP_ERA_H

#include <stddef.h>

#include "mcp_msg.h"
#include "util.h"

#define MCP_MODERN_VERSION "2026-07-28"

/* The headers the stateless era reads (NULL when absent), as received. */
typedef struct mcp_era_headers {
    const char *protocol_version; /* MCP-Protocol-Version */
    const char *method;           /* Mcp-Method */
    const char *name;             /* Mcp-Name */
} mcp_era_headers;

typedef enum {
    MCP_ERA_LEGACY, /* the session era: initialize and Mcp-Session-Id, as before */
    MCP_ERA_MODERN  /* stateless: run mcp_era_check, no session */
} mcp_era;

/* What the stateless era reads of params._meta, found in one pass (mcp_era_read):
 * each envelope member's JSON type (-1: absent; the last of duplicates, as lookups
 * take it), the protocol version and log level strings as pointer and length (the
 * C string's length, as strcmp would see it), whether clientInfo has the strings
 * name and version, and whether other members are there. */
typedef struct mcp_era_env {
    int meta; /* params._meta is an object */
    int others;
    int pv_type, caps_type, ci_type, lv_type;
    int ci_ok;
    const char *pv, *lv;
    size_t pv_len, lv_len;
} mcp_era_env;

/* Reads the envelope of a parsed message: from the tree, or (m->meta_text) from the
 * kept _meta text. Returns 0, or -1 when the text has an escape (then parse it,
 * mcp_msg_meta_parse, and read again). Pointers borrow from m. */
int mcp_era_read(const mcp_msg *m, mcp_era_env *env);

/* Whether a protocol version names the stateless era (compared as text, as clients
 * do: a later date, or any text sorting after it, is a stateless version). */
int mcp_era_version_modern(const char *v);

/* The era of a message that parsed (not a client response): stateless when
 * params._meta claims a protocol version, or when the MCP-Protocol-Version header
 * names a stateless version; the session era otherwise. An initialize without the
 * claim but with a stateless header is refused: returns -32020 (HTTP 400) with the
 * message in err; 0 otherwise. */
int mcp_era_classify(const mcp_msg *m, const mcp_era_headers *h, const mcp_era_env *env,
                     mcp_era *era, char *err, size_t errlen);

/* The stateless era's checks of a request, in order: the _meta envelope (-32602),
 * the headers against the body (-32020), the protocol version (-32022, with data
 * {supported, requested} appended to data as JSON text), the headers that must be
 * present (-32020). Returns 0 when the request may be dispatched, else the code
 * with *http_status (always 400) and the message in err. */
int mcp_era_check(const mcp_msg *m, const mcp_era_headers *h, const mcp_era_env *env,
                  int *http_status, buf *data, char *err, size_t errlen);

/* Appends a stateless-era error reply: the id when it is known (id_json not empty;
 * never null), the code, the message, and data (JSON text) when not NULL/empty. */
void mcp_era_write_error(buf *out, const char *id_json, int code, const char *message,
                         const char *data_json);

/* The members every stateless result ends with, each preceded by a comma:
 * resultType "complete", with ttl_ms >= 0 the caching hints ttlMs and cacheScope
 * "private" (the lists depend on who asks), and _meta with serverInfo. For a result
 * without a _meta of its own. */
void mcp_era_result_tail(buf *out, long ttl_ms);
#ifndef CL_VERSION
#define CL_VERSION "0"
#endif
/* The serverInfo member of a stateless result's _meta (no comma, no braces). */
#define MCP_ERA_SERVER_INFO                                                                        \
    "\"io.modelcontextprotocol/"                                                                   \
    "serverInfo\":{\"name\":\"context-loader\",\"version\":\"" CL_VERSION "\"}"

/* Whether an MCP-Protocol-Version header (NULL: absent) names a stateless version,
 * its optional whitespace aside. */
int mcp_era_header_modern(const char *hv);

/* The result of server/discover, a JSON object without the tail: the supported
 * versions (the one stateless version; the same list -32022's data gives), the
 * capabilities (tools with listChanged, empty prompts and resources), the
 * instructions when not NULL. */
void mcp_era_discover(buf *out, const char *instructions);

/* The _meta keys of the stateless envelope. */
#define MCP_META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define MCP_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define MCP_META_SUBSCRIPTION_ID "io.modelcontextprotocol/subscriptionId"

#endif
