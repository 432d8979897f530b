/* test_lpattern: lpattern's find/match/gmatch/gsub against the stock string library
 * of a plain Lua state (tests/unit/lpattern_diff.lua: hand-written cases, every
 * pattern error, then random patterns with a fixed seed), and the budget charging:
 * matching work reaches the charge function, and an error raised there stops the match.
 *
 * The test links lpattern.c alone; test_charge stands in for the sandbox's lvm_charge. */
#include <stdlib.h>

#include <lauxlib.h>
#include <lualib.h>

#include "check.h"
#include "lpattern.h"

static long charged;      /* units charged so far */
static long charge_limit; /* > 0: raise once charged passes it */

static void test_charge(lua_State *L, long n)
{
    charged += n;
    if (charge_limit > 0 && charged > charge_limit)
        luaL_error(L, "instruction budget exceeded");
}

/* Runs the differential script with `ours`; returns its difference count. */
static int run_differential(lua_State *L, int random_count)
{
    int ndiff = -1;
    if (luaL_loadfile(L, CL_SOURCE_DIR "/tests/unit/lpattern_diff.lua") != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        return -1;
    }
    lua_getglobal(L, "ours");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        return -1;
    }
    lua_getfield(L, -1, "run");
    lua_pushinteger(L, random_count);
    if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        return -1;
    }
    ndiff = (int)luaL_len(L, -1);
    for (int i = 1; i <= ndiff; i++) {
        lua_geti(L, -1, i);
        fprintf(stderr, "difference: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    fprintf(stderr, "%lld cases compared, %d differences\n", (long long)lua_tointeger(L, -2),
            ndiff);
    lua_settop(L, 0);
    return ndiff;
}

/* Runs code (which may use `ours`); returns its error message or NULL (static copy). */
static const char *run_code(lua_State *L, const char *code)
{
    static char msg[256];
    const char *r = NULL;
    if (luaL_dostring(L, code) != LUA_OK) {
        snprintf(msg, sizeof msg, "%s", lua_tostring(L, -1));
        r = msg;
    }
    lua_settop(L, 0);
    return r;
}

static void check_charging(lua_State *L)
{
    const char *err;
    /* a backtracking pattern: its work is charged as it goes */
    charged = 0;
    charge_limit = 0;
    err = run_code(L, "assert(ours.find(string.rep('a', 40), string.rep('a*', 4) .. 'b') == nil)");
    CHECK(err == NULL);
    CHECK(charged > 100000);
    /* and an error raised by the charge ends the match, for each function */
    const char *calls[] = {
        "ours.find(string.rep('a', 200), string.rep('a*', 6) .. 'b')",
        "ours.match(string.rep('a', 200), string.rep('a-', 6) .. 'b')",
        "for _ in ours.gmatch(string.rep('a', 200), string.rep('a*', 6) .. 'b') do end",
        "ours.gsub(string.rep('a', 200), string.rep('(a*)', 6) .. 'b', 'x')",
        "ours.find(string.rep('(', 5000), string.rep('%b()', 3))",
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        charged = 0;
        charge_limit = 100000;
        err = run_code(L, calls[i]);
        CHECK(err != NULL && strstr(err, "instruction budget exceeded") != NULL);
        CHECK(charged < 200000);
    }
    charge_limit = 0;
    /* ordinary matching charges little */
    charged = 0;
    err = run_code(L, "assert(ours.match('key = value', '(%w+)%s*=%s*(%w+)') == 'key')");
    CHECK(err == NULL);
    CHECK(charged < 2048);
}

int main(int argc, char **argv)
{
    int random_count = argc > 1 ? atoi(argv[1]) : 20000;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_newtable(L);
    lpattern_install(L, -1, test_charge);
    lua_setglobal(L, "ours");
    CHECK(run_differential(L, random_count) == 0);
    check_charging(L);
    lua_close(L);
    return CHECK_DONE();
}
