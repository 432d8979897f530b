/* toonview: the token-saving TOON view of a tool result, declared by a tool with
 * toon_view (docs/writing-tools.md, docs/toon.md).
 *
 * TOON writes an array of records as a table only when every cell is a primitive;
 * result rows usually carry a nested record or a list, so the encoder falls back to
 * one indented list item per row, every key repeated. The view keeps such arrays
 * tabular:
 *   - a nested record with the same keys (all identifiers) in every row becomes
 *     dotted columns (`identity.id`), which a decoder with path
 *     expansion turns back into the record;
 *   - a field that cannot be a cell (a list, or a record whose keys vary) leaves the
 *     table: it follows it as `<array>_<field>`, one entry per row in row order;
 *   - everything else is as in the result, views applied at every depth.
 * An array whose rows do not all have the same keys, hold lists of records, have a
 * key with a dot, or whose side name is taken stays a list of records (their own
 * arrays viewed).
 *
 * Ownership: toonview_build and toonview_render only read their inputs (toonview_build
 * returns a new tree owned by the caller, json_free); toonview_render_take consumes
 * the result it is given. */
#ifndef CL_TOONVIEW_H
#define CL_TOONVIEW_H

#include <stddef.h>

#include "json.h"
#include "util.h"

/* A tool's rule for leaving a row id column out of the view (its toon_view omit_id):
 * the primitive column `id` is left out of the tables directly under the root when
 * every row of the root's array `rows` has `id` = prefix + the text of the single
 * value of its `identity` (a record of one member, or a list of one). prefix NULL:
 * left out whatever the rows hold. The strings are the caller's (not NUL-terminated). */
typedef struct {
    const char *rows, *id, *identity, *prefix;
    size_t rows_len, id_len, identity_len, prefix_len;
} toonview_omit;

/* The view of v; omit (may be NULL): the id column rule. */
json_value *toonview_build(const json_value *v, const toonview_omit *omit);

/* Appends to out the TOON text of the view of result. rest != 0: always the view;
 * otherwise the view only when it is the cheaper text in tokens (tokproxy_prefer over
 * json, the result's compact JSON text, json_len bytes), else json itself. Returns 0, or -1
 * with err set when the view cannot be encoded (out unchanged). */
int toonview_render(buf *out, const json_value *result, const char *json, size_t json_len, int rest,
                    const toonview_omit *omit, char *err, size_t errlen);
/* toonview_render that builds the view from result's own values instead of copies:
 * result is consumed (freed), whatever is returned. The same text. */
int toonview_render_take(buf *out, json_value *result, const char *json, size_t json_len, int rest,
                         const toonview_omit *omit, char *err, size_t errlen);

#endif
