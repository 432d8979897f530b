/* json_lua: the Lua face of the JSON codec, module "cljson" (also built as
 * cljson.so for busted).
 *
 * Lua value model:
 *   object  -> table with metatable cljson.object_mt; the key order of a decoded
 *              object is remembered (keys added later are written after the
 *              remembered ones, sorted); cljson.object() makes an empty ordered one
 *   array   -> table with metatable cljson.array_mt (so [] survives); plain tables
 *              that are sequences 1..n encode as arrays, other plain tables as objects,
 *              an empty plain table as {}
 *   null    -> cljson.null (a light userdata)
 *   int64   -> Lua integer; double -> Lua float (re-encoded shortest, 1.0 stays 1.0)
 *   numtext -> a boxed number cljson.number("123...") (table with metatable
 *              cljson.number_mt; tostring gives the text; == compares text)
 *   raw     -> (only when asked for) a userdata with metatable cljson.raw_mt holding
 *              JSON text that is exactly what the encoder writes for its value;
 *              encoded by copying it
 *
 * Lua functions: decode(text [, {max_depth=, max_size=}]) raises "cljson: msg at
 * byte N"; pdecode(...) returns value or nil, "msg at byte N"; encode(v);
 * encode_canonical(v) (sorted keys, for hashing); null; array_mt; object_mt;
 * number_mt; array(t?) and object(t?, keys?) mark tables (keys: an explicit member
 * order); number(text); keys(obj) -> key list in encode order; is_array(v),
 * is_object(v), is_number(v); tonumber(v) (boxed number -> nearest Lua number).
 * Raw values: decode options raw = "<member>" (the object rows of that array of a
 * top-level object stay raw) and drop = {names} (cut from every row); raw(text);
 * is_raw(v) -> false or the JSON type; without(v, name...) -> v without those
 * members; tostring(raw) -> its text.
 * encode raises "cljson: msg at $.path" on: cycles, depth > 512, non-finite floats,
 * invalid UTF-8 strings or keys, functions/userdata (other than null)/threads, mixed
 * or sparse tables, non-string keys in objects. See docs/json.md.
 */
#ifndef CL_JSON_LUA_H
#define CL_JSON_LUA_H

#include <lua.h>

#include "json.h"

int luaopen_cljson(lua_State *L);

/* cljson.pdecode as a lua_CFunction run on its caller's stack (slot 1: the text,
 * slot 2: the options or none): returns 1 (the value) or 2 (nil, message). For C
 * functions that would otherwise look the module up and call it (res.json). */
int cljson_pdecode(lua_State *L);

/* Pushes v (borrowed) as a Lua value following the model above. Creates the
 * module's registry entries if cljson was not opened yet. May raise a Lua memory
 * error: call it where a raise is safe (inside a protected call). */
void cljson_push(lua_State *L, const json_value *v);

/* Converts the Lua value at idx to a new json_value tree (caller owns). Runs in
 * its own lua_pcall, so it never raises; on error returns NULL and writes
 * "msg at $.path" into err. The Lua stack is left unchanged. */
json_value *cljson_to_value(lua_State *L, int idx, char *err, size_t errlen);

/* Encodes the Lua value at idx, appending to out (canonical != 0: sorted keys).
 * Never raises. Returns 0, or -1 with err (out may then hold a partial
 * append). The Lua stack is left unchanged. */
int cljson_encode(lua_State *L, int idx, buf *out, int canonical, char *err, size_t errlen);

/* The message (prefix of err) when cljson_encode_max stops at its size limit. */
#define CLJSON_TOO_LARGE "encoded text too large"
/* cljson_encode appending at most about max bytes (0 = no limit): past it, it stops
 * with -1 and err starting with CLJSON_TOO_LARGE (out is restored). */
int cljson_encode_max(lua_State *L, int idx, buf *out, int canonical, size_t max, char *err,
                      size_t errlen);

/* Both in one walk of the Lua value at idx: its text appended to out (the bytes
 * cljson_encode writes) and its tree in *tree (the value cljson_to_value returns;
 * owned by the caller). Never raises. Returns 0, or -1 with err (out restored,
 * *tree NULL). The Lua stack is left unchanged. */
int cljson_encode_both(lua_State *L, int idx, buf *out, json_value **tree, char *err,
                       size_t errlen);
/* cljson_encode_both appending at most about max bytes (0 = no limit), stopping past
 * it as cljson_encode_max does. */
int cljson_encode_both_max(lua_State *L, int idx, buf *out, json_value **tree, size_t max,
                           char *err, size_t errlen);

#endif
