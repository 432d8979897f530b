/* lvm_sandbox: the base library replacements, proxies, environments and read-only views (lvm_impl.h). */
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

/* ---- base library replacements ---- */

static int finish_pcall(lua_State *L, int status, lua_KContext extra)
{
    if (status != LUA_OK && status != LUA_YIELD) {
        if (lvm_must_rethrow(L, status))
            return lua_error(L); /* error object is on top */
        lua_pushboolean(L, 0);
        lua_pushvalue(L, -2);
        return 2;
    }
    return lua_gettop(L) - (int)extra;
}

int lvm_sb_pcall(lua_State *L)
{
    int status;
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
    return finish_pcall(L, status, 0);
}

/* xpcall's message handler runs where the error was raised, before any pcall
 * catches it: after a stop raised by the hook, Lua runs it with hooks off (the hook
 * never returned to switch them on again), so a loop in it would never be stopped.
 * The tool's handler (upvalue 1) therefore runs only for errors that are not a stop;
 * after a stop the error object goes on as it is. */
static int sb_msgh(lua_State *L)
{
    lvm *vm = lvm_of_state(L);
    if (vm && vm->cur && vm->cur->killed)
        return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

int lvm_sb_xpcall(lua_State *L)
{
    int status;
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, sb_msgh, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);
    status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, finish_pcall);
    return finish_pcall(L, status, 2);
}

/* coroutine.resume / coroutine.close catch errors too: re-raise kills. Both run
 * the coroutine's code, so it becomes the running thread meanwhile. */
int lvm_sb_cowrap_catch(lua_State *L)
{
    int n = lua_gettop(L);
    lua_State *co = lua_tothread(L, 1);
    lvm *vm = lvm_of_state(L);
    lua_State *prev;
    int rc;
    if (vm && vm->cur && vm->cur->killed) /* nothing of the tool runs after a stop */
        return luaL_error(L, "%s", lvm_kill_text(vm->cur->killed));
    prev = co ? lvm_switch_running(L, co) : NULL;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    rc = lua_pcall(L, n, LUA_MULTRET, 0);
    if (co)
        lvm_restore_running(L, prev);
    if (rc != LUA_OK) {
        lvm_must_rethrow(L, rc);
        return lua_error(L); /* argument errors of the library function */
    }
    if (lua_gettop(L) >= 2 && lua_isboolean(L, 1) && !lua_toboolean(L, 1)) {
        const char *m = lua_tostring(L, 2);
        int status = (m && strcmp(m, "not enough memory") == 0) ? LUA_ERRMEM : LUA_ERRRUN;
        if (lvm_must_rethrow(L, status)) {
            lua_pushvalue(L, 2);
            return lua_error(L);
        }
    }
    return lua_gettop(L);
}

/* coroutine.wrap's function (upvalue 1: its coroutine), written here rather than
 * the library's: that one closes a coroutine that died of an error, running its
 * pending __close handlers - after a stop raised by the hook, with hooks off for
 * good on that thread, where a loop would never be stopped. After a stop the dead
 * coroutine is left as it is (its to-be-closed variables stay open; the collector
 * frees it). The coroutine is the running thread while it runs. */
static int sb_wrapped(lua_State *L)
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int narg = lua_gettop(L), nres, status;
    lua_State *prev;
    if (!lua_checkstack(co, narg))
        return luaL_error(L, "too many arguments to resume");
    lua_xmove(L, co, narg);
    prev = lvm_switch_running(L, co);
    status = lua_resume(co, L, narg, &nres);
    lvm_restore_running(L, prev);
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            return luaL_error(L, "too many results to resume");
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    if (lvm_must_rethrow(L, status)) {
        lua_xmove(co, L, 1);
        return lua_error(L);
    }
    status = lua_status(co);
    if (status != LUA_OK && status != LUA_YIELD) { /* the coroutine died: close it */
        prev = lvm_switch_running(L, co);
#if LUA_VERSION_RELEASE_NUM >= 50406
        status = lua_closethread(co, L);
#else
        status = lua_resetthread(co);
#endif
        lvm_restore_running(L, prev);
        lua_xmove(co, L, 1);
        if (lvm_must_rethrow(L, status))
            return lua_error(L);
    } else {
        lua_xmove(co, L, 1); /* resuming failed (dead, running, too deep) */
    }
    if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

/* coroutine.running: the call's own coroutine, once a tool holds it, must not serve
 * a later call (the tool could resume or close it there), so the budget notes it. */
int lvm_sb_running(lua_State *L)
{
    lvm *vm = lvm_of_state(L);
    if (vm && vm->cur && vm->entry == L)
        vm->cur->co_exposed = 1;
    lua_pushboolean(L, lua_pushthread(L));
    return 2;
}

int lvm_sb_wrap(lua_State *L)
{
    lua_State *co;
    luaL_checktype(L, 1, LUA_TFUNCTION);
    co = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    lua_pushcclosure(L, sb_wrapped, 1);
    return 1;
}

int lvm_is_readonly(lua_State *L, int idx)
{
    int r;
    idx = lua_absindex(L, idx);
    /* A view is known by its metatable (one a tool cannot set): views, made per
     * call, stay out of the weak set, whose rehashes grow with its size. */
    if (lua_getmetatable(L, idx)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_VIEWMT);
        r = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
        if (r)
            return 1;
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_READONLY);
    lua_pushvalue(L, idx);
    r = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return r;
}

/* type(v): the base library's, with the names kept as upvalues (no C-string
 * lookup per call; tools and the runtime ask it dozens of times per call). */
int lvm_sb_type(lua_State *L)
{
    int t = lua_type(L, 1);
    luaL_argcheck(L, t != LUA_TNONE, 1, "value expected");
    lua_pushvalue(L, lua_upvalueindex(t + 1));
    return 1;
}

int lvm_sb_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (lvm_is_readonly(L, 1))
        return luaL_error(L, "attempt to modify a read-only table");
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

int lvm_sb_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (lvm_is_readonly(L, 1))
        return luaL_error(L, "cannot change the metatable of a read-only table");
    if (t == LUA_TTABLE) {
        /* raw, as Lua reads it: an __index on the metatable must not answer nil for a
         * field it adds meanwhile */
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in tools");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

void lvm_set_env_upvalue(lua_State *L, int fidx, int envidx)
{
    fidx = lua_absindex(L, fidx);
    envidx = lua_absindex(L, envidx);
    lua_pushvalue(L, envidx);
    if (!lua_setupvalue(L, fidx, 1))
        lua_pop(L, 1);
}

int lvm_sb_load(lua_State *L)
{
    size_t len;
    const char *s;
    const char *chunkname = luaL_optstring(L, 2, "=(load)");
    if (lua_type(L, 1) != LUA_TSTRING)
        return luaL_error(L, "load: only text chunks given as strings are allowed");
    if (lua_isnoneornil(L, 4))
        return luaL_error(L, "load: an explicit env table (4th argument) is required");
    luaL_checktype(L, 4, LUA_TTABLE);
    s = lua_tolstring(L, 1, &len);
    if (luaL_loadbufferx(L, s, len, chunkname, "t") != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    lvm_set_env_upvalue(L, -1, 4);
    return 1;
}

/* ---- proxies and environments ---- */

int lvm_ro_newindex(lua_State *L)
{
    return luaL_error(L, "attempt to modify a read-only table (field '%s')",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int proxy_next(lua_State *L)
{
    /* upvalue 1: the real table; arguments: (proxy, key) */
    lua_settop(L, 2);
    if (lua_next(L, lua_upvalueindex(1)))
        return 2;
    lua_pushnil(L);
    return 1;
}

static int proxy_pairs(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushcclosure(L, proxy_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static int proxy_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, lua_upvalueindex(1)));
    return 1;
}

void lvm_mark_readonly(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_READONLY);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

/* Finishes the metatable on top for the table just below it: writes go to
 * newindex (which raises), the metatable is locked, and rawset refuses the table.
 * Pops the metatable. */
void lvm_seal(lua_State *L, lua_CFunction newindex)
{
    lua_pushcfunction(L, newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lvm_mark_readonly(L, -1);
}

/* Pushes map[value at idx] (map: a registry table) and returns 1 when it is a table;
 * else pushes nothing and returns 0. */
static int map_get(lua_State *L, const void *map, int idx)
{
    idx = lua_absindex(L, idx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, map);
    lua_pushvalue(L, idx);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        lua_remove(L, -2);
        return 1;
    }
    lua_pop(L, 2);
    return 0;
}

/* map[value at k] = value at v (map: a registry table). */
static void map_set(lua_State *L, const void *map, int k, int v)
{
    k = lua_absindex(L, k);
    v = lua_absindex(L, v);
    lua_rawgetp(L, LUA_REGISTRYINDEX, map);
    lua_pushvalue(L, k);
    lua_pushvalue(L, v);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

void lvm_push_proxy(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lvm_is_readonly(L, idx)) { /* already a proxy (or an env) */
        lua_pushvalue(L, idx);
        return;
    }
    if (map_get(L, &KEY_PROXIES, idx))
        return;
    lua_newtable(L);          /* proxy */
    lua_createtable(L, 0, 5); /* its metatable */
    lua_pushvalue(L, idx);
    lua_setfield(L, -2, "__index");
    lua_pushvalue(L, idx);
    lua_pushcclosure(L, proxy_pairs, 1);
    lua_setfield(L, -2, "__pairs");
    lua_pushvalue(L, idx);
    lua_pushcclosure(L, proxy_len, 1);
    lua_setfield(L, -2, "__len");
    lvm_seal(L, lvm_ro_newindex);
    map_set(L, &KEY_PROXIES, idx, -1); /* proxies[real] = proxy */
}

/* __index of the globals copy behind every _ENV: only misses get here, since the
 * VM resolves known globals through the table itself without calling C. */
int lvm_env_unknown(lua_State *L)
{
    return luaL_error(L, "unknown global '%s'",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

int lvm_env_newindex(lua_State *L)
{
    return luaL_error(L, "assignment to global '%s' (tools define no globals; use local)",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

/* ---- read-only views (ctx) ----
 *
 * A view is an empty table with one shared metatable; KEY_VIEWS maps it to the
 * table it shows. Reads go through to that table, and a table read through a view
 * comes back as a view of it (made on first read, then the same one); writes and
 * rawset raise. Nothing is copied. A field the table lacks is asked of its own
 * metatable's __index, which may make it on first read (the runtime's lazy ctx
 * fields); the keys listed in that metatable's __lazy are made before pairs. */
static int view_real(lua_State *L, int view)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_VIEWS);
    lua_pushvalue(L, view);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    return lua_type(L, -1) == LUA_TTABLE;
}

/* Replaces the value on top with its view when it is a table that is not read-only. */
static void wrap_top(lua_State *L)
{
    if (lua_type(L, -1) != LUA_TTABLE)
        return;
    if (map_get(L, &KEY_VIEWOF, -1)) { /* read before: its view (the common case) */
        lua_remove(L, -2);
        return;
    }
    if (!lvm_is_readonly(L, -1)) {
        lvm_push_view(L, -1);
        lua_remove(L, -2);
    }
}

int lvm_view_index(lua_State *L)
{
    if (!view_real(L, 1))
        return 0;
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) == LUA_TNIL && lua_getmetatable(L, -2)) {
        /* a field the real table makes on first read (its metatable's __index) */
        lua_pop(L, 2);
        lua_pushvalue(L, 2);
        lua_gettable(L, -2);
    }
    wrap_top(L);
    return 1;
}

int lvm_view_newindex(lua_State *L)
{
    return luaL_error(L,
                      "attempt to modify a read-only table (field '%s'): ctx and its tables "
                      "are read-only; keep per-call state in locals",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int view_next(lua_State *L)
{
    /* upvalue 1: the real table; arguments: (view, key) */
    lua_settop(L, 2);
    if (!lua_next(L, lua_upvalueindex(1))) {
        lua_pushnil(L);
        return 1;
    }
    wrap_top(L);
    return 2;
}

int lvm_view_pairs(lua_State *L)
{
    if (!view_real(L, 1))
        return luaL_error(L, "not a read-only view");
    int lazy = luaL_getmetafield(L, -1, "__lazy");
    if (lazy == LUA_TTABLE) {
        /* the fields made on first read are made now, so that pairs lists them */
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            lua_gettable(L, -3);
            lua_pop(L, 1);
        }
    }
    if (lazy != LUA_TNIL)
        lua_pop(L, 1);
    lua_pushcclosure(L, view_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

int lvm_view_len(lua_State *L)
{
    lua_pushinteger(L, view_real(L, 1) ? (lua_Integer)lua_rawlen(L, -1) : 0);
    return 1;
}

void lvm_push_view(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || lvm_is_readonly(L, idx)) {
        lua_pushvalue(L, idx);
        return;
    }
    if (map_get(L, &KEY_VIEWOF, idx))
        return;
    lua_newtable(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_VIEWMT);
    lua_setmetatable(L, -2);          /* read-only by it (lvm_is_readonly) */
    map_set(L, &KEY_VIEWOF, idx, -1); /* viewof[real] = view */
    map_set(L, &KEY_VIEWS, -1, idx);  /* views[view] = real */
}

int lvm_rt_readonly(lua_State *L)
{
    luaL_checkany(L, 1);
    lvm_push_view(L, 1);
    return 1;
}

/* is_view(v): v is a view the runtime made (a tool cannot forge one). */
int lvm_rt_is_view(lua_State *L)
{
    lua_pushboolean(L, lua_type(L, 1) == LUA_TTABLE && view_real(L, 1));
    return 1;
}

/* clruntime.object_size(t) -> its number of members (raw, every key kind): one C
 * call where Lua would call next once per member just to count them. */
int lvm_rt_object_size(lua_State *L)
{
    lua_Integer n = 0;
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        n++;
    }
    lua_pushinteger(L, n);
    return 1;
}

/* clruntime.metatable(v) -> v's metatable or nil, as lua_getmetatable gives it: the
 * runtime compares metatables with cljson's marks several times per call, and
 * getmetatable's __metatable look-up costs more than the rest of the check. Only the
 * runtime's own modules reach clruntime. */
int lvm_rt_metatable(lua_State *L)
{
    luaL_checkany(L, 1);
    if (!lua_getmetatable(L, 1))
        lua_pushnil(L);
    return 1;
}
