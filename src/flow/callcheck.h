/* callcheck: the pure input checks of a business call, factored out of rest.c and
 * flow.c so that they run without a server (tests/fuzz/fuzz_rest.c): the REST
 * body, the response_format choice (json or toon) and a host hint's value.
 *
 * Ownership: callcheck_rest_body hands the parsed arguments to the caller
 * (json_free); the other functions only read their inputs. */
#ifndef CL_CALLCHECK_H
#define CL_CALLCHECK_H

#include <stddef.h>

#include "json.h"
#include "texts.h"

/* POST /kn/<tool> body: empty = {}; otherwise Content-Type application/json and a
 * JSON object within max_depth (0 = the JSON default). Returns 0 with *out, or -1
 * with *status (415 or 400) and the details text for req_reply_error in err. */
int callcheck_rest_body(const char *body, size_t len, const char *content_type, size_t max_depth,
                        json_value **out, int *status, char *err, size_t errlen);

/* Picks the response format: REST's ?response_format= (query, NULL when not given)
 * wins over the response_format argument (arg, NULL when absent); none gives TOON
 * on MCP for a tool that renders it (tool_toon), else JSON. Returns 0 with *toon,
 * or -1 with the error details ("invalid response_format: ... (allowed: ...)"). */
int callcheck_format(const char *query, const json_value *arg, int mcp, int tool_toon, int *toon,
                     char *details, size_t dlen);

/* A host hint's value v (NULL = absent) named src in messages: trimmed of spaces and
 * tabs, 1-256 printable ASCII 0x21-0x7E. Returns 0 (out[0] == 0 when absent) or -1
 * with err (in lang). */
int callcheck_hint(const char *v, const char *src, lang_id lang, char *out, size_t outlen,
                   char *err, size_t errlen);

/* A host hint from either place: the header's value (header_value, NULL when the
 * request has none; named header in messages), else the string member meta_key of
 * the MCP _meta object meta (NULL when none; a non-string is an error). Then as
 * callcheck_hint. */
int callcheck_hint_pick(const char *header_value, const char *header, const json_value *meta,
                        const char *meta_key, lang_id lang, char *out, size_t outlen, char *err,
                        size_t errlen);

#endif
