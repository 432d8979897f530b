/* lvm: one sandboxed lua_State. See lvm.h; the module's files share lvm_impl.h. */
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

/* Registry keys (addresses are unique). */
const char KEY_LIBS = 'g';     /* allow-listed globals but require and _G */
const char KEY_READONLY = 'r'; /* weak set of tables rawset must refuse */
const char KEY_PROXIES = 'p';  /* weak real -> proxy */
const char KEY_GEN = 'n';      /* the current generation (see push_gen) */
const char KEY_LOADING = 'i';  /* sentinel for circular requires */
const char KEY_VIEWS = 'v';    /* weak view -> the table it shows */
const char KEY_VIEWOF = 'o';   /* weak table -> its view */
const char KEY_VIEWMT = 'm';   /* the metatable every view shares */

/* ---- building the state ---- */

typedef struct snap_args {
    const char *dir;
    const char *prefix;    /* module name prefix ("" or "_lib.") */
    const char *chunk_dir; /* chunkname dir ("" or "_lib/") */
    int optional;
    int compile; /* compile each file now: a runtime module that does not parse stops the
                    generation here instead of failing the first request that needs it */
} snap_args;

/* Reads every dir/<name>.lua into the sources of the generation at stack index 2:
 * sources[prefix..name] = {text, "@chunk_dir/name.lua"}. */
static int snapshot_into(lua_State *L, const snap_args *a, int gen)
{
    DIR *d = opendir(a->dir);
    struct dirent *e;
    if (!d) {
        if (a->optional && errno == ENOENT)
            return 0;
        return luaL_error(L, "%s: cannot open directory: %s", a->dir, strerror(errno));
    }
    lua_rawgeti(L, gen, GEN_SOURCES);
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char *path;
        char *text = NULL;
        size_t len = 0;
        struct stat st;
        if (n <= 4 || e->d_name[0] == '.' || strcmp(e->d_name + n - 4, ".lua") != 0)
            continue;
        path = xmalloc(strlen(a->dir) + n + 2);
        sprintf(path, "%s/%s", a->dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            read_file_max(path, LVM_MAX_SOURCE, &text, &len) != 0) {
            free(path);
            continue;
        }
        free(path);
        lua_createtable(L, 2, 0);
        lua_pushfstring(L, "@%s%s", a->chunk_dir, e->d_name);
        if (a->compile && luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t") != LUA_OK) {
            free(text);
            closedir(d);
            return luaL_error(L, "%s/%s", a->dir, lua_tostring(L, -1));
        }
        if (a->compile)
            lua_pop(L, 1);
        lua_rawseti(L, -2, 2);
        lua_pushlstring(L, text, len);
        free(text);
        lua_rawseti(L, -2, 1);
        lua_pushstring(L, a->prefix);
        lua_pushlstring(L, e->d_name, n - 4); /* module name: file name without .lua */
        lua_concat(L, 2);
        lua_insert(L, -2);
        lua_rawset(L, -3);
    }
    closedir(d);
    lua_pop(L, 1);
    return 0;
}

static int snapshot_p(lua_State *L)
{
    snap_args *a = lua_touserdata(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    return snapshot_into(L, a, lua_gettop(L));
}

static void new_weak_table(lua_State *L, const char *mode, const void *key)
{
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushstring(L, mode);
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

static const char *const BASE_ALLOWED[] = {
    "assert", "error",    "ipairs",   "next", "pairs",        "rawequal", "rawget", "rawlen",
    "select", "tonumber", "tostring", "type", "getmetatable", "_VERSION", NULL};

static void copy_fields(lua_State *L, int from, int to, const char *const *names)
{
    int i;
    for (i = 0; names[i]; i++) {
        lua_getfield(L, from, names[i]);
        lua_setfield(L, to, names[i]);
    }
}

/* Pushes a fresh copy of library lib: in a state of our own the loaded one (then
 * changed in place), in a foreign one (busted) a new table, so the host's own
 * libraries and the string metatable stay as they were. */
static void push_lib(lua_State *L, const char *name, lua_CFunction open, int own)
{
    if (own) {
        luaL_requiref(L, name, open, 0);
        return;
    }
    if (open == luaopen_string) {
        lua_pushliteral(L, "");
        lua_getmetatable(L, -1);
        lua_remove(L, -2);
        lua_pushcfunction(L, open);
        lua_call(L, 0, 1);
        lua_pushliteral(L, "");
        lua_pushvalue(L, -3);
        lua_setmetatable(L, -2); /* the host's string metatable back */
        lua_pop(L, 1);
        lua_remove(L, -2);
        return;
    }
    lua_pushcfunction(L, open);
    lua_call(L, 0, 1);
}

/* The allow-listed libraries and base functions, shared by every generation of the
 * state: KEY_LIBS (everything a chunk's globals hold but require and _G), the
 * readonly/proxy/view tables. own: the state is ours (lvm_new), not busted's. */
static void setup_libs(lua_State *L, int own)
{
    static const char *const os_allowed[] = {"time", "clock", "date", NULL};
    static const luaL_Reg libs[] = {
        {LUA_STRLIBNAME, luaopen_string},   {LUA_TABLIBNAME, luaopen_table},
        {LUA_MATHLIBNAME, luaopen_math},    {LUA_UTF8LIBNAME, luaopen_utf8},
        {LUA_COLIBNAME, luaopen_coroutine}, {NULL, NULL}};
    static const luaL_Reg view_mt[] = {{"__index", lvm_view_index},
                                       {"__newindex", lvm_view_newindex},
                                       {"__pairs", lvm_view_pairs},
                                       {"__len", lvm_view_len},
                                       {NULL, NULL}};
    int g, real, i;

    new_weak_table(L, "k", &KEY_READONLY);
    new_weak_table(L, "k", &KEY_PROXIES);
    new_weak_table(L, "k", &KEY_VIEWS);
    new_weak_table(L, "k", &KEY_VIEWOF);
    luaL_newlib(L, view_mt);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_VIEWMT);

    luaL_requiref(L, LUA_GNAME, luaopen_base, 0);
    real = lua_gettop(L);
    lua_newtable(L);
    g = lua_gettop(L);
    copy_fields(L, real, g, BASE_ALLOWED);

    for (i = 0; i < LUA_NUMTYPES; i++)
        lua_pushstring(L, lua_typename(L, i));
    lua_pushcclosure(L, lvm_sb_type, LUA_NUMTYPES);
    lua_setfield(L, g, "type");
    lua_pushcfunction(L, lvm_sb_pcall);
    lua_setfield(L, g, "pcall");
    lua_pushcfunction(L, lvm_sb_xpcall);
    lua_setfield(L, g, "xpcall");
    lua_pushcfunction(L, lvm_sb_rawset);
    lua_setfield(L, g, "rawset");
    lua_pushcfunction(L, lvm_sb_setmetatable);
    lua_setfield(L, g, "setmetatable");
    lua_pushcfunction(L, lvm_sb_load);
    lua_setfield(L, g, "load");

    for (i = 0; libs[i].name; i++) {
        push_lib(L, libs[i].name, libs[i].func, own);
        if (strcmp(libs[i].name, LUA_STRLIBNAME) == 0) {
            lpattern_install(L, -1, lvm_charge); /* pattern matching under the budget */
            lbounded_install_string(L, -1, lvm_charge);
        }
        if (strcmp(libs[i].name, LUA_TABLIBNAME) == 0)
            lbounded_install_table(L, -1, lvm_charge);
        if (strcmp(libs[i].name, LUA_UTF8LIBNAME) == 0)
            lbounded_install_utf8(L, -1, lvm_charge);
        if (strcmp(libs[i].name, LUA_COLIBNAME) == 0) {
            lua_getfield(L, -1, "resume");
            lua_pushcclosure(L, lvm_sb_cowrap_catch, 1);
            lua_setfield(L, -2, "resume");
            lua_getfield(L, -1, "close");
            lua_pushcclosure(L, lvm_sb_cowrap_catch, 1);
            lua_setfield(L, -2, "close");
            lua_pushcfunction(L, lvm_sb_wrap);
            lua_setfield(L, -2, "wrap");
            lua_pushcfunction(L, lvm_sb_running);
            lua_setfield(L, -2, "running");
        }
        lvm_push_proxy(L, -1);
        lua_setfield(L, g, libs[i].name);
        lua_pop(L, 1);
    }
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
    lua_newtable(L);
    copy_fields(L, -2, lua_gettop(L), os_allowed);
    lvm_push_proxy(L, -1);
    lua_setfield(L, g, "os");
    lua_pop(L, 2);

    if (own) {
        /* the string metatable stays reachable only as the __index of strings */
        lua_pushliteral(L, "");
        lua_getmetatable(L, -1);
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 2);
    }
    lua_pushvalue(L, g);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    lua_settop(L, real - 1);
}

/* Pushes base (KEY_LIBS) with require = fn(gen) and _G, behind a table whose misses
 * raise: what a chunk's _ENV reads through. Never reachable from Lua (_ENV's
 * metatable is locked). */
static void push_env_base(lua_State *L, int gen, lua_CFunction require)
{
    int g;
    gen = lua_absindex(L, gen);
    lua_createtable(L, 0, 32);
    g = lua_gettop(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, g);
    }
    lua_pop(L, 1);
    lua_pushvalue(L, gen);
    lua_pushcclosure(L, require, 1);
    lua_setfield(L, g, "require");
    /* _G: the same globals again, read-only (a real table behind it, so misses are nil) */
    lua_createtable(L, 0, 32);
    lua_pushnil(L);
    while (lua_next(L, g)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lvm_push_proxy(L, -1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "_G");
    lua_setfield(L, g, "_G");
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, lvm_env_unknown);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, g);
    lvm_mark_readonly(L, g);
}

/* cljson's marker metatables are the real ones (the encoder compares them by
 * identity), so their proxies hand them out as they are. Guard them: a field they
 * lack cannot be added (array_mt and object_mt have none: a tool cannot give every
 * JSON array or object an __index), rawset refuses them, and their own metatable is
 * locked. Fields they have (number_mt's __tostring, ...) stay as they are. */
static void guard_cljson_metatables(lua_State *L, int cljson)
{
    static const char *const mts[] = {"array_mt", "object_mt", "number_mt", "raw_mt", NULL};
    for (int i = 0; mts[i]; i++) {
        if (lua_getfield(L, cljson, mts[i]) == LUA_TTABLE && !lvm_is_readonly(L, -1) &&
            !lua_getmetatable(L, -1)) {
            lua_createtable(L, 0, 2);
            lvm_seal(L, lvm_ro_newindex);
        }
        lua_settop(L, cljson);
    }
}

static void preload(lua_State *L, int loaded, const char *name, lua_CFunction open)
{
    luaL_requiref(L, name, open, 0);
    lua_setfield(L, loaded, name);
}

/* Pushes clruntime.ctx_fields: the names of LVM_CTX_FIELDS in its order. */
static void push_ctx_fields(lua_State *L)
{
#define CTX_FIELD_NAME(name) #name,
    static const char *const names[] = {LVM_CTX_FIELDS(CTX_FIELD_NAME)};
#undef CTX_FIELD_NAME
    lua_createtable(L, (int)(sizeof names / sizeof names[0]), 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* Pushes a new generation: empty sources, the C modules preloaded, both envs. */
static void push_gen(lua_State *L)
{
    static const luaL_Reg runtime[] = {{"readonly", lvm_rt_readonly},
                                       {"is_view", lvm_rt_is_view},
                                       {"object_size", lvm_rt_object_size},
                                       {"metatable", lvm_rt_metatable},
                                       {NULL, NULL}};
    int gen, loaded;
    lua_createtable(L, GEN_RT_ENV, 0);
    gen = lua_gettop(L);
    lua_newtable(L);
    lua_rawseti(L, gen, GEN_SOURCES);
    lua_newtable(L);
    loaded = lua_gettop(L);
    preload(L, loaded, "cljson", luaopen_cljson);
    lua_getfield(L, loaded, "cljson");
    guard_cljson_metatables(L, lua_gettop(L));
    lua_pop(L, 1);
    preload(L, loaded, "cltoon", luaopen_cltoon);
    preload(L, loaded, "cltexts", luaopen_cltexts);
    luaL_newlib(L, runtime);
    push_ctx_fields(L);
    lua_setfield(L, -2, "ctx_fields");
    lua_setfield(L, loaded, "clruntime");
    lua_rawseti(L, gen, GEN_LOADED);
    lua_newtable(L);
    lua_rawseti(L, gen, GEN_PUBLIC);
    push_env_base(L, gen, lvm_sb_require_public);
    lua_rawseti(L, gen, GEN_TOOL_ENV);
    push_env_base(L, gen, lvm_sb_require_private);
    lua_rawseti(L, gen, GEN_RT_ENV);
}

static int setup_p(lua_State *L)
{
    setup_libs(L, 1);
    push_gen(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_GEN);

    /* Nothing sandboxed sees the real global table; empty it anyway. */
    lua_pushglobaltable(L);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, -4);
    }
    lua_pop(L, 1);
    lua_settop(L, 0);
    return 0;
}

/* ---- the sandbox as a Lua C module (clsandbox.so, for busted) ----
 *
 * clsandbox.new(lua_dir [, lib_dir]) installs the server's sandbox into the calling
 * state (its libraries once; they leave the host's own untouched) and makes a new
 * generation of lua_dir's and lib_dir's modules. It returns a table:
 *   require(name)         the runtime's private require (every lua/ module)
 *   tool_require(name)    the require tool code gets
 *   load(text, chunkname) -> function | nil, err: a tool chunk with its own _ENV
 * clsandbox.readonly(t) is the read-only view the runtime gives tools as ctx. There
 * is no budget: pcall and friends behave as in a server call that never runs out. */
static int mod_load(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *chunk = luaL_optstring(L, 2, "=(tool)");
    if (lvm_load_in(L, lua_upvalueindex(1), text, len, chunk, 0) != 0) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    return 1;
}

static int mod_new(lua_State *L)
{
    static const luaL_Reg fns[] = {{"require", lvm_sb_require_private},
                                   {"tool_require", lvm_sb_require_public},
                                   {"load", mod_load},
                                   {NULL, NULL}};
    snap_args sa;
    const char *lua_dir = luaL_checkstring(L, 1);
    const char *lib_dir = luaL_optstring(L, 2, NULL);
    int gen;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    if (lua_isnil(L, -1))
        setup_libs(L, 0);
    lua_pop(L, 1);
    push_gen(L);
    gen = lua_gettop(L);
    sa = (snap_args){lua_dir, "", "", 0, 1};
    snapshot_into(L, &sa, gen);
    if (lib_dir) {
        sa = (snap_args){lib_dir, "_lib.", "_lib/", 1, 0};
        snapshot_into(L, &sa, gen);
    }
    lua_pushvalue(L, gen);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    luaL_newlibtable(L, fns);
    lua_pushvalue(L, gen);
    luaL_setfuncs(L, fns, 1); /* each closes over the generation */
    return 1;
}

static int mod_readonly(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    if (lua_isnil(L, -1))
        setup_libs(L, 0);
    lua_settop(L, 1);
    return lvm_rt_readonly(L);
}

int luaopen_clsandbox(lua_State *L)
{
    static const luaL_Reg fns[] = {{"new", mod_new},
                                   {"readonly", mod_readonly},
                                   {"object_size", lvm_rt_object_size},
                                   {"metatable", lvm_rt_metatable},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    return 1;
}

lvm *lvm_new(const char *lua_dir, const char *lib_dir, size_t state_cap, char **err)
{
    lvm *vm = xcalloc(1, sizeof *vm);
    snap_args sa;
    *err = NULL;
    vm->cap = state_cap ? state_cap : LVM_DEFAULT_CAP;
    vm->L = lua_newstate(lvm_alloc, vm);
    if (!vm->L) {
        *err = xstrdup("cannot create a Lua state");
        goto fail;
    }
    /* Tool calls make short-lived garbage on top of a large, long-lived heap
     * (modules, schemas, catalogue): the generational collector's young collections
     * fit that shape. Incremental (pause 300, step multiplier 400) counted fewer
     * instructions with 256 calls in flight, but on the wall clock it served REST
     * reads at 16 connections about 25% slower (a larger heap, colder caches) and
     * gained nothing at 256; the pool keeps what the collector frees for the next
     * calls. */
    lua_gc(vm->L, LUA_GCGEN, 0, 0);
    if (lvm_cpcall(vm->L, setup_p, vm, err) != 0)
        goto fail;
    sa = (snap_args){lua_dir, "", "", 0, 1};
    if (lvm_cpcall(vm->L, snapshot_p, &sa, err) != 0)
        goto fail;
    if (lib_dir) {
        sa = (snap_args){lib_dir, "_lib.", "_lib/", 1, 0};
        if (lvm_cpcall(vm->L, snapshot_p, &sa, err) != 0)
            goto fail;
    }
    return vm;
fail:
    lvm_free(vm);
    return NULL;
}

void lvm_free(lvm *vm)
{
    if (!vm)
        return;
    vm->cur = NULL;
    if (vm->L)
        lua_close(vm->L);
    lvm_pool_drain(vm);
    free(vm);
}
