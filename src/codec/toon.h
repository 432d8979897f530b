/* toon: the TOON encoder (docs/toon.md; TOON specification 3.3 of @toon-format/spec,
 * byte-compatible with @toon-format/toon 2.3.1 on the 153 official encode cases).
 *
 * Encodes a json_value (src/base/json.h) as TOON text appended to a util.h buf: key
 * order from the data, inline primitive arrays, tabular arrays of uniform objects,
 * list arrays, quoting/escaping, comma/tab/pipe delimiters, indent size, and safe
 * key folding with flattenDepth. Numbers are canonical and exact:
 *   JSON_INT      its digits;
 *   JSON_DOUBLE   shortest round-trip digits, decimal form for 1e-6 <= |n| < 1e21,
 *                 else exponent form (1e-7, 1.5e+21) like the reference;
 *   JSON_NUMTEXT  rewritten on its decimal text, never via double: an integer text
 *                 stays as written (12345678901234567890123), otherwise decimal form
 *                 when 1e-6 <= |n| and the digits reach the units place or |n| < 1e21,
 *                 else exponent form with every significant digit (docs/toon.md).
 * -0 becomes 0; NaN/Infinity doubles (only possible through builders) become null.
 * Objects with duplicate keys are emitted member by member as stored.
 *
 * Ownership: toon_encode only reads v (borrowed for the call) and appends to out,
 * which stays owned by the caller. No state survives the call. */
#ifndef CL_TOON_H
#define CL_TOON_H

#include <stddef.h>

#include "json.h"
#include "util.h"

#define TOON_FLATTEN_ALL (-1) /* flatten_depth: fold whole chains (the spec's Infinity) */

typedef enum { TOON_FOLD_OFF = 0, TOON_FOLD_SAFE = 1 } toon_fold;

typedef struct toon_options {
    int indent;            /* spaces per level, 1..16; 0 means the default 2 */
    char delimiter;        /* ',', '\t' or '|'; 0 means ',' */
    toon_fold key_folding; /* default off */
    int flatten_depth;     /* max segments per folded key; TOON_FLATTEN_ALL = no limit */
    size_t max_depth;      /* container nesting limit; 0 means the default 1024 */
} toon_options;

/* Defaults: indent 2, comma, folding off, flatten_depth TOON_FLATTEN_ALL. */
void toon_options_init(toon_options *o);

/* Reads options in the spec's spelling from a JSON object (as the fixture runner
 * passes them): indent | indentSize (integer), delimiter ("," "\t" "|"), keyFolding
 * ("off" | "safe"), flattenDepth (non-negative integer; null or absent = no limit).
 * Unknown keys are ignored. o must be initialised; returns 0, or -1 with err. */
int toon_options_from_json(const json_value *opts, toon_options *o, char *err, size_t errlen);

/* Appends the TOON text of v to out (no trailing newline; an empty root object gives
 * no text). opts NULL = defaults. Returns 0, or -1 with err (invalid options, a
 * nesting deeper than max_depth, invalid UTF-8 in a string or key, an invalid
 * number text); on error out is restored to its previous length. */
int toon_encode(buf *out, const json_value *v, const toon_options *opts, char *err, size_t errlen);

#endif
