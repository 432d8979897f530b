/* lvm_gen: generations, their module sources and caches, and the two requires (lvm_impl.h). */
#define _GNU_SOURCE /* gettid, SIGEV_THREAD_ID */
#include "lvm_impl.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "json_lua.h"
#include "lbounded.h"
#include "lpattern.h"
#include "texts.h"
#include "toon_lua.h"
#include "util.h"

/* ---- generations: module sources, caches and the two requires ----
 *
 * A generation is one Lua table (GEN_* slots) that the requires and chunk loaders
 * carry as an upvalue: the server makes one per state; the busted module makes one
 * per sandbox. KEY_GEN names the state's current one for the C API. */

/* The runtime's modules tool code may require, and the fields each shows; the rest
 * of lua/ (host, contract, schema, ...) stays private to the runtime. Kept in step
 * with docs/writing-tools.md. */
static const char *const PUBLIC_CATALOG[] = {
    "text", "error_text", "status_name", "default_language", "languages", NULL};
static const char *const PUBLIC_ERRORS[] = {
    "UPSTREAM_CODES", "RETRY_AFTER_MS", "body_of", "envelope", "from_status",
    "transport",      "upstream",       "next_of", "link",     "platform",
    "is_2xx",         "bad_gateway",    "json_of", "fetch",    NULL};
static const char *const PUBLIC_PTC[] = {
    "timeout_schema", "output_schema", "blank_error", "wrap_code",
    "stub_for",       "execute",       "result",      NULL};
static const char *const PUBLIC_SQLGUARD[] = {"check", NULL};
static const struct {
    const char *name;
    const char *const *fields;
} PUBLIC_MODULES[] = {{"catalog", PUBLIC_CATALOG},
                      {"errors", PUBLIC_ERRORS},
                      {"ptc", PUBLIC_PTC},
                      {"sqlguard", PUBLIC_SQLGUARD},
                      {NULL, NULL}};

/* Library names require gives back (the allow-listed tables themselves). */
static const char *const BUILTIN_MODULES[] = {"string",    "table", "math", "utf8",
                                              "coroutine", "os",    NULL};
/* C modules tool code may require; cltexts and clruntime stay with the runtime. */
static const char *const PUBLIC_C_MODULES[] = {"cljson", "cltoon", NULL};

static int in_list(const char *const *list, const char *name)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

static int is_lib_name(const char *name)
{
    return strncmp(name, "_lib.", 5) == 0;
}

/* Pushes a fresh _ENV for one chunk of generation gen: a tool chunk's (tool code
 * and tools/_lib) or a runtime chunk's (lua/). */
static void push_env(lua_State *L, int gen, int runtime)
{
    gen = lua_absindex(L, gen);
    lua_newtable(L);
    lua_createtable(L, 0, 3);
    lua_rawgeti(L, gen, runtime ? GEN_RT_ENV : GEN_TOOL_ENV);
    lua_setfield(L, -2, "__index");
    lvm_seal(L, lvm_env_newindex);
}

int lvm_load_in(lua_State *L, int gen, const char *text, size_t len, const char *chunkname,
                   int runtime)
{
    gen = lua_absindex(L, gen);
    if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK)
        return -1;
    push_env(L, gen, runtime);
    lvm_set_env_upvalue(L, -2, -1);
    lua_pop(L, 1);
    return 0;
}

int lvm_load(lua_State *L, const char *text, size_t len, const char *chunkname)
{
    int rc;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    rc = lvm_load_in(L, -1, text, len, chunkname, 0);
    lua_remove(L, -2);
    return rc;
}

/* Pushes the raw value of module name in generation gen, loading it once. */
static void require_in(lua_State *L, int gen, const char *name)
{
    int t;
    const char *text;
    const char *chunk;
    size_t len;

    gen = lua_absindex(L, gen);
    if (in_list(BUILTIN_MODULES, name)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
        lua_getfield(L, -1, name);
        lua_remove(L, -2);
        return;
    }
    lua_rawgeti(L, gen, GEN_LOADED);
    t = lua_getfield(L, -1, name);
    if (t == LUA_TLIGHTUSERDATA && lua_touserdata(L, -1) == (void *)&KEY_LOADING)
        luaL_error(L, "circular require of module '%s'", name);
    if (t != LUA_TNIL) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    lua_rawgeti(L, gen, GEN_SOURCES);
    if (lua_getfield(L, -1, name) != LUA_TTABLE)
        luaL_error(L,
                   "module '%s' not found (only lua/ and tools/_lib/ modules, cljson and "
                   "cltoon can be required)",
                   name);
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    text = lua_tolstring(L, -2, &len);
    chunk = lua_tostring(L, -1);
    if (lvm_load_in(L, gen, text, len, chunk, !is_lib_name(name)) != 0)
        lua_error(L);
    /* stack: loaded, sources, src, text, chunk, fn */
    lua_pushlightuserdata(L, (void *)&KEY_LOADING);
    lua_setfield(L, -7, name);
    lua_pushstring(L, name);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        lua_pushnil(L);
        lua_setfield(L, -7, name); /* forget the sentinel, keep the error */
        lua_error(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -7, name);
    lua_replace(L, -6);
    lua_pop(L, 4);
}

void lvm_require(lua_State *L, const char *name)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    require_in(L, -1, name);
    lua_remove(L, -2);
}

/* Pushes a read-only copy of the value at idx: tables are copied (nested ones
 * too, down to a few levels) and shown through proxies, other values as they are. */
static void push_frozen(lua_State *L, int idx, int depth)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || depth > 8 || lvm_is_readonly(L, idx)) {
        lua_pushvalue(L, idx);
        return;
    }
    luaL_checkstack(L, 6, NULL);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        push_frozen(L, -1, depth + 1);
        lua_remove(L, -2);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lvm_push_proxy(L, -1);
    lua_remove(L, -2);
}

/* Pushes the facade of public runtime module name (cached per generation). */
static void push_facade(lua_State *L, int gen, const char *name, const char *const *fields)
{
    gen = lua_absindex(L, gen);
    lua_rawgeti(L, gen, GEN_PUBLIC);
    if (lua_getfield(L, -1, name) == LUA_TTABLE) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    require_in(L, gen, name);
    lua_newtable(L);
    for (int i = 0; fields[i]; i++) {
        if (lua_type(L, -2) == LUA_TTABLE)
            lua_getfield(L, -2, fields[i]);
        else
            lua_pushnil(L);
        push_frozen(L, -1, 0);
        lua_remove(L, -2);
        lua_setfield(L, -2, fields[i]);
    }
    lvm_push_proxy(L, -1);
    lua_replace(L, -3); /* facades, proxy, table */
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    lua_remove(L, -2);
}

/* require for runtime chunks (lua/): every module of the generation. Upvalue 1: gen. */
int lvm_sb_require_private(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    require_in(L, lua_upvalueindex(1), name);
    if (lua_type(L, -1) == LUA_TTABLE)
        lvm_push_proxy(L, -1);
    return 1;
}

/* require for tool chunks (tools/ and tools/_lib/): the public modules only, each
 * through a read-only proxy. Upvalue 1: gen. */
int lvm_sb_require_public(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    int i;
    for (i = 0; PUBLIC_MODULES[i].name; i++) {
        if (strcmp(name, PUBLIC_MODULES[i].name) == 0) {
            push_facade(L, lua_upvalueindex(1), name, PUBLIC_MODULES[i].fields);
            return 1;
        }
    }
    if (!in_list(BUILTIN_MODULES, name) && !in_list(PUBLIC_C_MODULES, name) && !is_lib_name(name)) {
        lua_rawgeti(L, lua_upvalueindex(1), GEN_SOURCES);
        int runtime = lua_getfield(L, -1, name) == LUA_TTABLE || strcmp(name, "cltexts") == 0 ||
                      strcmp(name, "clruntime") == 0;
        lua_pop(L, 2);
        if (runtime)
            return luaL_error(L,
                              "module '%s' is private to the runtime (tool code may require "
                              "cljson, cltoon, _lib.<name>, catalog, errors, ptc and sqlguard)",
                              name);
        return luaL_error(L,
                          "module '%s' not found (tool code may require cljson, cltoon, "
                          "_lib.<name>, catalog, errors, ptc and sqlguard)",
                          name);
    }
    require_in(L, lua_upvalueindex(1), name);
    if (lua_type(L, -1) == LUA_TTABLE)
        lvm_push_proxy(L, -1);
    return 1;
}
