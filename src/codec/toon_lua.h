/* toon_lua: the Lua face of the TOON encoder, module "cltoon" (built into the
 * server and also as cltoon.so for busted).
 *
 * Lua functions:
 *   cltoon.encode(value [, opts]) -> text | nil, "cltoon: msg"
 *       value in the cljson model (src/codec/json_lua.h: ordered objects, array_mt, null,
 *       boxed numbers, integers, floats, strings, booleans).
 *   cltoon.encode_json(text [, opts]) -> text | nil, "cltoon: msg"
 *       JSON text in (parsed by the exact codec, so big integers stay exact).
 *   cltoon.view(value [, omit [, mcp]]) -> view JSON, text | nil, "cltoon: msg"
 *       the token-saving view (toonview.h) and the text a call sends for it; omit:
 *       { rows =, id =, identity = [, prefix =] } (cltoon_omit_rule).
 *   opts: { indent = 2, delimiter = "," | "\t" | "|" | "comma" | "tab" | "pipe",
 *           key_folding = "off" | "safe", flatten_depth = n } (the spec's camelCase
 *           names keyFolding / flattenDepth / indentSize are accepted too). A bad
 *           opts table raises (a programming error); bad data returns nil, err.
 *
 * When cltoon runs next to a separately loaded cljson.so (two copies of the codec,
 * as under busted), a value whose null sentinel comes from the other copy is
 * converted through that module's cljson.encode text; inside the server both
 * modules share one codec and the value is converted directly. */
#ifndef CL_TOON_LUA_H
#define CL_TOON_LUA_H

#include <lua.h>

#include "toonview.h"

int luaopen_cltoon(lua_State *L);

/* Reads a tool's toon_view omit_id rule, the table at idx (rows, id, identity:
 * strings), with prefix (may be NULL: the column is left out whatever the rows hold)
 * into *o. Returns 1, or 0 when idx is not such a table. The strings stay the table's
 * and prefix's (valid while they are). */
int cltoon_omit_rule(lua_State *L, int idx, const char *prefix, size_t prefix_len,
                     toonview_omit *o);

#endif
