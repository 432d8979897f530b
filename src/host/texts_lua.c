/* texts_lua: the text catalogue as the Lua module `cltexts` (see texts.h). The
 * tables are expanded from the same X-macro lists as the C side. */
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>

#include "texts.h"

static void set_pair(lua_State *L, const char *field, const char *zh, const char *en)
{
    lua_createtable(L, 2, 0);
    lua_pushstring(L, zh);
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, en);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, field);
}

static void add_status(lua_State *L, int status, const char *name, const char *desc_zh,
                       const char *desc_en, const char *sol_zh, const char *sol_en)
{
    lua_createtable(L, 0, 1 + LANG_COUNT);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    set_pair(L, lang_tag(LANG_ZH_CN), desc_zh, sol_zh);
    set_pair(L, lang_tag(LANG_EN_US), desc_en, sol_en);
    lua_rawseti(L, -2, status);
}

static void add_next(lua_State *L, int status, int retryable, int retry_after_ms,
                     const char *action)
{
    lua_createtable(L, 0, 3);
    lua_pushboolean(L, retryable);
    lua_setfield(L, -2, "retryable");
    if (retryable) {
        lua_pushinteger(L, retry_after_ms);
        lua_setfield(L, -2, "retry_after_ms");
    }
    lua_pushstring(L, action);
    lua_setfield(L, -2, "required_action");
    lua_rawseti(L, -2, status);
}

/* key: the C id ("RETRY_LATER"), stored lower-case ("retry_later"). */
static void add_text(lua_State *L, const char *id, const char *zh, const char *en)
{
    char key[64];
    size_t n = 0;
    for (; id[n] && n + 1 < sizeof key; n++)
        key[n] = (char)tolower((unsigned char)id[n]);
    key[n] = '\0';
    lua_createtable(L, 0, LANG_COUNT);
    lua_pushstring(L, zh);
    lua_setfield(L, -2, lang_tag(LANG_ZH_CN));
    lua_pushstring(L, en);
    lua_setfield(L, -2, lang_tag(LANG_EN_US));
    lua_setfield(L, -2, key);
}

int luaopen_cltexts(lua_State *L)
{
    lua_createtable(L, 0, 4);

    lua_createtable(L, LANG_COUNT, 0);
    for (int l = 0; l < LANG_COUNT; l++) {
        lua_pushstring(L, lang_tag((lang_id)l));
        lua_rawseti(L, -2, l + 1);
    }
    lua_setfield(L, -2, "languages");

    lua_newtable(L);
#define CL_STATUS_LUA(st, nm, dzh, den, szh, sen) add_status(L, st, #nm, dzh, den, szh, sen);
    CL_STATUS_TEXTS(CL_STATUS_LUA)
#undef CL_STATUS_LUA
    lua_setfield(L, -2, "status");

    lua_createtable(L, 0, TEXT_COUNT);
#define CL_TEXT_LUA(id, zh, en) add_text(L, #id, zh, en);
    CL_TEXTS(CL_TEXT_LUA)
#undef CL_TEXT_LUA
    lua_setfield(L, -2, "text");

    lua_newtable(L);
#define CL_NEXT_LUA(st, re, ms, act) add_next(L, st, re, ms, act);
    CL_STATUS_NEXT(CL_NEXT_LUA)
#undef CL_NEXT_LUA
    lua_setfield(L, -2, "next");
    return 1;
}
