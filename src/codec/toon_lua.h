/* toon_lua: the Lua face of the TOON encoder, module "cltoon" (built into the
 * server and also as cltoon.so for busted).
 *
 * Lua functions:
 *   cltoon.encode(value [, opts]) -> text | nil, "cltoon: msg"
 *       value in the cljson model (src/codec/json_lua.h: ordered objects, array_mt, null,
 *       boxed numbers, integers, floats, strings, booleans).
 *   cltoon.encode_json(text [, opts]) -> text | nil, "cltoon: msg"
 *       JSON text in (parsed by the exact codec, so big integers stay exact).
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

int luaopen_cltoon(lua_State *L);

#endif
