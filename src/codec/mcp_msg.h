/* mcp_msg: the pure part of MCP's JSON-RPC handling, factored out of
 * mcp.c so that it runs without a server (tests/fuzz/fuzz_mcp.c): one POST body
 * -> a validated JSON-RPC message, the tools/call and tools/list params, the
 * unknown-method error, and the error reply text. Every failure carries the exact
 * JSON-RPC code, message and HTTP status the server sends.
 *
 * Ownership: an mcp_msg owns msg and id (mcp_msg_free, also after a failure);
 * method and params point into msg. mcp_call's members point into the params
 * given. */
#ifndef CL_MCP_MSG_H
#define CL_MCP_MSG_H

#include <stddef.h>

#include "json.h"
#include "outcome.h"
#include "util.h"

typedef enum {
    MCP_MSG_REQUEST,      /* method and id: gets a result or an error */
    MCP_MSG_NOTIFICATION, /* method, no id: 202 (after the session check) */
    MCP_MSG_RESPONSE      /* a response from the client (id + result/error): 202 */
} mcp_msg_kind;

typedef struct mcp_msg {
    json_value *msg; /* the parsed body, NULL when it did not parse */
    buf id;          /* JSON text of a string or number id; empty otherwise */
    int has_id;      /* an "id" member is present (of any type) */
    mcp_msg_kind kind;
    const char *method;       /* NULL for MCP_MSG_RESPONSE */
    const json_value *params; /* an object, or NULL when absent */
    int http_status;          /* of the error reply when the result is not 0 */
    /* mcp_parse_message_meta_text: params._meta is still its JSON text (a JSON_STRING
     * holding the member's bytes) until mcp_msg_meta_parse */
    int meta_text;
    size_t max_depth;
} mcp_msg;

/* Parses and validates one POST body (max_depth 0 = the JSON default). Returns 0,
 * or the JSON-RPC error code (-32700, -32600, -32602) with the message in err and
 * out->http_status set; out->id holds the id text whenever it could be read, so the
 * error reply can echo it. Call mcp_msg_free either way. */
int mcp_parse_message(const char *body, size_t len, size_t max_depth, mcp_msg *out, char *err,
                      size_t errlen);
void mcp_msg_free(mcp_msg *m);
/* The same, but params._meta is kept as its text (checked as the parse checks it;
 * the same bodies are accepted and refused with the same errors; out->meta_text
 * set). A reader of the envelope scans the text (mcp_era); anything else needs
 * mcp_msg_meta_parse first. */
int mcp_parse_message_meta_text(const char *body, size_t len, size_t max_depth, mcp_msg *out,
                                char *err, size_t errlen);
/* Turns a kept _meta text back into its parsed value, in params (every _meta member
 * of it); clears meta_text. The tree is then what mcp_parse_message gives. */
void mcp_msg_meta_parse(mcp_msg *m);
/* The same on a params object of such a message (the members of a message the
 * request context owns): max_depth as given to the parse. */
void mcp_params_meta_parse(json_value *params, size_t max_depth);

typedef struct mcp_call {
    const char *name;       /* set as soon as it is known to be a string */
    const json_value *args; /* object, or NULL (absent or null) */
    const json_value *meta; /* object, or NULL (absent or not an object: ignored) */
} mcp_call;

/* tools/call params. Returns 0, or -32602 with the message in err (HTTP 200). */
int mcp_parse_call(const json_value *params, mcp_call *out, char *err, size_t errlen);

/* tools/list params: the pagination offset from "cursor" ("o:<n>"; 0 without one).
 * Returns 0, or -32602 with the message in err (HTTP 200). */
int mcp_parse_cursor(const json_value *params, size_t *offset, char *err, size_t errlen);

/* Returns 0 for a method the server implements, else -32601 with the message. */
int mcp_check_method(const char *method, char *err, size_t errlen);

/* Appends the JSON-RPC error reply; id_json is the id's JSON text (NULL or "" ->
 * null). A message with invalid UTF-8 is cut before it, so the reply stays JSON. */
void mcp_write_error(buf *out, const char *id_json, int code, const char *message);

/* Appends the CallToolResult of a tool call's outcome - the only place that writes
 * that shape. A result: content (one text block: the TOON text when asked and
 * rendered, else the JSON), structuredContent (the result, with bkn_receipt as its
 * last member when there is a receipt) and isError false. An error: one text block
 * holding the error object as compact JSON (bkn_receipt its last member when the
 * failed call was recorded), isError true and no structuredContent - whatever the
 * tool's outputSchema, which describes results only. Either way
 * _meta["openbkn.ai/trace-status"] = "unrecorded" when nothing was recorded. A
 * result's structuredContent is its JSON text, the receipt put in before its closing
 * brace (no tree needed). */
void mcp_write_tool_result(buf *out, const call_outcome *o);
/* The same with more members in _meta (meta_members: JSON members without braces,
 * or NULL) and more members of the result itself after it (members, or NULL). */
/* The result without its _meta, other members and closing brace (content,
 * structuredContent, isError): for a caller appending pre-encoded members when the
 * outcome has no _meta of its own (neither unrecorded nor receipt_pending). */
void mcp_write_tool_result_open(buf *out, const call_outcome *o);
void mcp_write_tool_result_ex(buf *out, const call_outcome *o, const char *meta_members,
                              const char *members);

/* Appends what Trace Core records as the output of an MCP call's attempt: the tool
 * result before any receipt - {"content":[{"type":"text","text":<the JSON
 * text>}],"isError":...} - written from the outcome's text (its quoted copy when
 * made), nothing parsed. */
void mcp_write_attempt_output(buf *out, const call_outcome *o);

#endif
