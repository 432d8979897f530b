/* toon_lua: module "cltoon". See toon_lua.h. */
#include "toon_lua.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "json_lua.h"
#include "toon.h"
#include "toonview.h"

/* This copy's cljson.null (a light userdata address); set by luaopen_cltoon. */
static const void *own_null;

static const char *opt_field(lua_State *L, int idx, const char *a, const char *b)
{
    if (lua_getfield(L, idx, a) != LUA_TNIL)
        return a;
    lua_pop(L, 1);
    lua_getfield(L, idx, b);
    return b;
}

/* Reads the options table at idx into o; raises on a bad option (caller's bug). */
static void read_opts(lua_State *L, int idx, toon_options *o)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    const char *name = opt_field(L, idx, "indent", "indentSize");
    if (!lua_isnil(L, -1)) {
        lua_Integer n = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        if (n < 1 || n > 16)
            luaL_error(L, "cltoon: %s must be an integer from 1 to 16", name);
        o->indent = (int)n;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "delimiter") != LUA_TNIL) {
        const char *d = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(d, ",") == 0 || strcmp(d, "comma") == 0)
            o->delimiter = ',';
        else if (strcmp(d, "\t") == 0 || strcmp(d, "tab") == 0)
            o->delimiter = '\t';
        else if (strcmp(d, "|") == 0 || strcmp(d, "pipe") == 0)
            o->delimiter = '|';
        else
            luaL_error(L, "cltoon: delimiter must be \",\", \"\\t\", \"|\" (or comma, tab, pipe)");
    }
    lua_pop(L, 1);
    name = opt_field(L, idx, "key_folding", "keyFolding");
    if (!lua_isnil(L, -1)) {
        const char *f = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(f, "off") == 0)
            o->key_folding = TOON_FOLD_OFF;
        else if (strcmp(f, "safe") == 0)
            o->key_folding = TOON_FOLD_SAFE;
        else
            luaL_error(L, "cltoon: %s must be \"off\" or \"safe\"", name);
    }
    lua_pop(L, 1);
    name = opt_field(L, idx, "flatten_depth", "flattenDepth");
    if (!lua_isnil(L, -1)) {
        if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 0) {
            lua_Integer n = lua_tointeger(L, -1);
            o->flatten_depth = n > 1000000 ? 1000000 : (int)n;
        } else if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) == HUGE_VAL) {
            o->flatten_depth = TOON_FLATTEN_ALL;
        } else {
            luaL_error(L, "cltoon: %s must be a non-negative integer or math.huge", name);
        }
    }
    lua_pop(L, 1);
}

/* Encodes v (owned; freed here) and pushes text, or nil + message. */
static int push_result(lua_State *L, json_value *v, const toon_options *o, const char *err)
{
    char e2[256];
    if (!v) {
        lua_pushnil(L);
        lua_pushfstring(L, "cltoon: %s", err);
        return 2;
    }
    buf out = BUF_INIT;
    int rc = toon_encode(&out, v, o, e2, sizeof e2);
    json_free(v);
    if (rc < 0) {
        buf_free(&out);
        lua_pushnil(L);
        lua_pushfstring(L, "cltoon: %s", e2);
        return 2;
    }
    lua_pushlstring(L, out.data ? out.data : "", out.len);
    buf_free(&out);
    return 1;
}

/* 1 when package.loaded.cljson is another copy of the codec (its null differs). */
static int foreign_cljson(lua_State *L)
{
    int foreign = 0;
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "cljson") == LUA_TTABLE) {
        if (lua_getfield(L, -1, "null") == LUA_TLIGHTUSERDATA)
            foreign = lua_touserdata(L, -1) != own_null;
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return foreign;
}

/* The value at idx as a tree (NULL with err set). */
static json_value *to_value(lua_State *L, int idx, char *err, size_t errlen)
{
    if (!foreign_cljson(L))
        return cljson_to_value(L, idx, err, errlen);
    /* The other copy's values (its null) only it recognises: go through its text. */
    json_value *v = NULL;
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "cljson");
    lua_getfield(L, -1, "encode");
    lua_pushvalue(L, idx);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TSTRING) {
        snprintf(err, errlen, "%s",
                 lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "cljson.encode failed");
    } else {
        size_t len;
        const char *text = lua_tolstring(L, -1, &len);
        json_limits lim = {0, 0};
        v = json_parse(text, len, &lim, err, errlen);
    }
    lua_settop(L, top);
    return v;
}

static int l_encode(lua_State *L)
{
    luaL_checkany(L, 1);
    toon_options o;
    toon_options_init(&o);
    if (!lua_isnoneornil(L, 2))
        read_opts(L, 2, &o);
    lua_settop(L, 1);
    char err[256] = "";
    json_value *v = to_value(L, 1, err, sizeof err);
    return push_result(L, v, &o, err);
}

int cltoon_omit_rule(lua_State *L, int idx, const char *prefix, size_t prefix_len,
                     toonview_omit *o)
{
    static const char *const names[] = {"rows", "id", "identity"};
    const char **fields[] = {&o->rows, &o->id, &o->identity};
    size_t *lens[] = {&o->rows_len, &o->id_len, &o->identity_len};
    if (lua_type(L, idx) != LUA_TTABLE)
        return 0;
    idx = lua_absindex(L, idx);
    for (int i = 0; i < 3; i++) {
        int t = lua_getfield(L, idx, names[i]);
        *fields[i] = t == LUA_TSTRING ? lua_tolstring(L, -1, lens[i]) : NULL;
        lua_pop(L, 1); /* the table keeps the string */
        if (!*fields[i])
            return 0;
    }
    o->prefix = prefix;
    o->prefix_len = prefix ? prefix_len : 0;
    return 1;
}

/* view(v [, omit [, mcp]]) -> the compact JSON of the token-saving view of v and
 * the TOON text a call sends for it (mcp: compact JSON unless the view is the cheaper
 * text in tokens, tokproxy.h), or nil, err. omit: a toon_view omit_id rule with the call's prefix
 * (omit.prefix; without it the id column is left out whatever the rows hold). The
 * server applies the same code (toonview.h) to results. */
static int l_view(lua_State *L)
{
    luaL_checkany(L, 1);
    int mcp = lua_toboolean(L, 3);
    lua_settop(L, 3);
    toonview_omit omit;
    int has_omit = 0;
    if (!lua_isnoneornil(L, 2)) {
        size_t plen = 0;
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "prefix");
        const char *prefix = lua_tolstring(L, -1, &plen); /* kept on the stack */
        has_omit = cltoon_omit_rule(L, 2, prefix, plen, &omit);
        luaL_argcheck(L, has_omit, 2, "{rows = name, id = name, identity = name [, prefix = text]}");
    }
    char err[256] = "";
    json_value *v = to_value(L, 1, err, sizeof err);
    if (!v) {
        lua_pushnil(L);
        lua_pushfstring(L, "cltoon: %s", err);
        return 2;
    }
    buf json = BUF_INIT, vjson = BUF_INIT, text = BUF_INIT;
    json_write(&json, v, 0);
    json_value *view = toonview_build(v, has_omit ? &omit : NULL);
    json_write(&vjson, view, 0);
    json_free(view);
    int rc = toonview_render(&text, v, json.data, json.len, !mcp, has_omit ? &omit : NULL, err,
                             sizeof err);
    json_free(v);
    if (rc < 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "cltoon: %s", err);
    } else {
        lua_pushlstring(L, vjson.data ? vjson.data : "", vjson.len);
        lua_pushlstring(L, text.data ? text.data : "", text.len);
    }
    buf_free(&json);
    buf_free(&vjson);
    buf_free(&text);
    return 2;
}

static int l_encode_json(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    toon_options o;
    toon_options_init(&o);
    if (!lua_isnoneornil(L, 2))
        read_opts(L, 2, &o);
    char err[256] = "";
    json_value *v = json_parse(text, len, NULL, err, sizeof err);
    return push_result(L, v, &o, err);
}

int luaopen_cltoon(lua_State *L)
{
    if (!own_null) {
        json_value *n = json_new_null();
        cljson_push(L, n);
        json_free(n);
        own_null = lua_touserdata(L, -1);
        lua_pop(L, 1);
    }
    static const luaL_Reg fns[] = {
        {"encode", l_encode}, {"encode_json", l_encode_json}, {"view", l_view}, {NULL, NULL}};
    luaL_newlib(L, fns);
    return 1;
}
