/* lbounded: library functions charged to the budget as they work. See lbounded.h.
 *
 * Each function does what Lua 5.4's does, in the same order (the same metamethods
 * are called, the same errors raised), with one difference: its loop stops every
 * LB_ELEMS elements or LB_BYTES bytes to charge the work done so far, so the charge
 * function can stop it (a raise: the partial result is garbage the collector frees).
 * Work that fits in one chunk charges nothing: small calls cost what they did. */
#include "lbounded.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

#include <lauxlib.h>

/* elements of a table walk between two charges */
#define LB_ELEMS 4096
/* bytes of a string fill or scan between two charges */
#define LB_BYTES ((size_t)256 << 10)
/* units charged per chunk: about what a Lua loop doing the same would execute */
#define LB_ELEM_UNITS 4
#define LB_BYTE_SHIFT 4 /* a unit per 16 bytes */
/* table.sort: comparisons between two charges; arrays up to LB_SORT_DIRECT elements
 * (without a metatable) are sorted by the stock function directly */
#define LB_SORT_EVERY 1024
#define LB_SORT_DIRECT 256

static lbounded_charge_fn charge_fn;

static void charge(lua_State *L, long units)
{
    if (charge_fn)
        charge_fn(L, units);
}

/* Counts one element of a table walk; charges every LB_ELEMS. */
static inline void count_elem(lua_State *L, lua_Integer *n)
{
    if (++*n >= LB_ELEMS) {
        *n = 0;
        charge(L, (long)LB_ELEMS * LB_ELEM_UNITS);
    }
}

/* ---- string ---- */

/* Copies n bytes from src to dst in chunks, charging each. */
static void copy_charged(lua_State *L, char *dst, const char *src, size_t n)
{
    while (n > LB_BYTES) {
        memcpy(dst, src, LB_BYTES);
        dst += LB_BYTES;
        src += LB_BYTES;
        n -= LB_BYTES;
        charge(L, (long)(LB_BYTES >> LB_BYTE_SHIFT));
    }
    memcpy(dst, src, n);
}

/* string.rep: filled by doubling copies (the stock one copies the unit n times). */
static int str_rep(lua_State *L)
{
    size_t l, lsep;
    const char *s = luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    const char *sep = luaL_optlstring(L, 3, "", &lsep);
    size_t unit, total, done;
    luaL_Buffer b;
    char *p;
    if (n <= 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    unit = l + lsep;
    if (unit < l || unit > (size_t)INT_MAX / (lua_Unsigned)n)
        return luaL_error(L, "resulting string too large");
    total = (size_t)n * unit - lsep;
    if (total == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    p = luaL_buffinitsize(L, &b, total);
    copy_charged(L, p, s, l);
    done = l;
    if (n > 1) {
        memcpy(p + l, sep, lsep);
        done = unit;
        while (done < total) { /* p[0, done) is a whole number of units */
            size_t k = done < total - done ? done : total - done;
            copy_charged(L, p + done, p, k);
            done += k;
        }
    }
    luaL_pushresultsize(&b, total);
    return 1;
}

enum { MAP_UPPER, MAP_LOWER, MAP_REVERSE };

static int str_map(lua_State *L, int how)
{
    size_t l, i = 0;
    const char *s = luaL_checklstring(L, 1, &l);
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, l);
    while (i < l) {
        size_t end = l - i > LB_BYTES ? i + LB_BYTES : l;
        switch (how) {
        case MAP_UPPER:
            for (; i < end; i++)
                p[i] = (char)toupper((unsigned char)s[i]);
            break;
        case MAP_LOWER:
            for (; i < end; i++)
                p[i] = (char)tolower((unsigned char)s[i]);
            break;
        default:
            for (; i < end; i++)
                p[i] = s[l - i - 1];
            break;
        }
        if (i < l)
            charge(L, (long)(LB_BYTES >> LB_BYTE_SHIFT));
    }
    luaL_pushresultsize(&b, l);
    return 1;
}

static int str_upper(lua_State *L)
{
    return str_map(L, MAP_UPPER);
}

static int str_lower(lua_State *L)
{
    return str_map(L, MAP_LOWER);
}

static int str_reverse(lua_State *L)
{
    return str_map(L, MAP_REVERSE);
}

void lbounded_install_string(lua_State *L, int idx, lbounded_charge_fn fn)
{
    static const luaL_Reg fns[] = {{"rep", str_rep},
                                   {"upper", str_upper},
                                   {"lower", str_lower},
                                   {"reverse", str_reverse},
                                   {NULL, NULL}};
    idx = lua_absindex(L, idx);
    charge_fn = fn;
    for (int i = 0; fns[i].name; i++) {
        lua_pushcfunction(L, fns[i].func);
        lua_setfield(L, idx, fns[i].name);
    }
}

/* ---- table ---- */

enum { TAB_R = 1, TAB_W = 2, TAB_L = 4, TAB_RW = TAB_R | TAB_W };

/* Is field key of the metatable on top (n slots below the top) set? Pushes it. */
static int meta_has(lua_State *L, const char *key, int n)
{
    lua_pushstring(L, key);
    return lua_rawget(L, -n) != LUA_TNIL;
}

/* Argument arg must be a table, or have the metamethods `what` needs. */
static void check_tab(lua_State *L, int arg, int what)
{
    if (lua_type(L, arg) == LUA_TTABLE)
        return;
    int n = 1;
    if (lua_getmetatable(L, arg) && (!(what & TAB_R) || meta_has(L, "__index", ++n)) &&
        (!(what & TAB_W) || meta_has(L, "__newindex", ++n)) &&
        (!(what & TAB_L) || meta_has(L, "__len", ++n)))
        lua_pop(L, n);
    else
        luaL_checktype(L, arg, LUA_TTABLE); /* raises */
}

static lua_Integer len_of(lua_State *L, int arg, int what)
{
    check_tab(L, arg, what | TAB_L);
    return luaL_len(L, arg);
}

static int tab_insert(lua_State *L)
{
    lua_Integer e = len_of(L, 1, TAB_RW), pos, n = 0;
    e = (lua_Integer)((lua_Unsigned)e + 1u); /* the first empty slot */
    switch (lua_gettop(L)) {
    case 2:
        pos = e;
        break;
    case 3:
        pos = luaL_checkinteger(L, 2);
        luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2, "position out of bounds");
        for (lua_Integer i = e; i > pos; i--) { /* t[i] = t[i - 1] */
            lua_geti(L, 1, i - 1);
            lua_seti(L, 1, i);
            count_elem(L, &n);
        }
        break;
    default:
        return luaL_error(L, "wrong number of arguments to 'insert'");
    }
    lua_seti(L, 1, pos);
    return 0;
}

static int tab_remove(lua_State *L)
{
    lua_Integer size = len_of(L, 1, TAB_RW), n = 0;
    lua_Integer pos = luaL_optinteger(L, 2, size);
    if (pos != size) /* Lua before 5.4.6 names argument 1 here */
        luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size,
                      LUA_VERSION_RELEASE_NUM >= 50406 ? 2 : 1, "position out of bounds");
    lua_geti(L, 1, pos); /* the result */
    for (; pos < size; pos++) { /* t[pos] = t[pos + 1] */
        lua_geti(L, 1, pos + 1);
        lua_seti(L, 1, pos);
        count_elem(L, &n);
    }
    lua_pushnil(L);
    lua_seti(L, 1, pos);
    return 1;
}

static int tab_move(lua_State *L)
{
    lua_Integer f = luaL_checkinteger(L, 2);
    lua_Integer e = luaL_checkinteger(L, 3);
    lua_Integer t = luaL_checkinteger(L, 4);
    int tt = !lua_isnoneornil(L, 5) ? 5 : 1; /* the destination */
    check_tab(L, 1, TAB_R);
    check_tab(L, tt, TAB_W);
    if (e >= f) {
        lua_Integer n, i, c = 0;
        luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
        n = e - f + 1;
        luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
        if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ))) {
            for (i = 0; i < n; i++) {
                lua_geti(L, 1, f + i);
                lua_seti(L, tt, t + i);
                count_elem(L, &c);
            }
        } else { /* overlapping, moving up: from the end */
            for (i = n - 1; i >= 0; i--) {
                lua_geti(L, 1, f + i);
                lua_seti(L, tt, t + i);
                count_elem(L, &c);
            }
        }
    }
    lua_pushvalue(L, tt);
    return 1;
}

static void concat_field(lua_State *L, luaL_Buffer *b, lua_Integer i)
{
    lua_geti(L, 1, i);
    if (!lua_isstring(L, -1))
        luaL_error(L, "invalid value (%s) at index %I in table for 'concat'", luaL_typename(L, -1),
                   (LUAI_UACINT)i);
    luaL_addvalue(b);
}

static int tab_concat(lua_State *L)
{
    luaL_Buffer b;
    lua_Integer last = len_of(L, 1, TAB_R), n = 0;
    size_t lsep;
    const char *sep = luaL_optlstring(L, 2, "", &lsep);
    lua_Integer i = luaL_optinteger(L, 3, 1);
    last = luaL_optinteger(L, 4, last);
    luaL_buffinit(L, &b);
    for (; i < last; i++) {
        concat_field(L, &b, i);
        luaL_addlstring(&b, sep, lsep);
        count_elem(L, &n);
    }
    if (i == last) /* the last value of a non-empty range */
        concat_field(L, &b, i);
    luaL_pushresult(&b);
    return 1;
}

static int tab_unpack(lua_State *L)
{
    lua_Unsigned n;
    lua_Integer i = luaL_optinteger(L, 2, 1), c = 0;
    lua_Integer e = luaL_opt(L, luaL_checkinteger, 3, luaL_len(L, 1));
    if (i > e)
        return 0;
    n = (lua_Unsigned)e - (lua_Unsigned)i; /* elements minus one (no overflow) */
    if (n >= (unsigned int)INT_MAX || !lua_checkstack(L, (int)(++n)))
        return luaL_error(L, "too many results to unpack");
    for (; i < e; i++) {
        lua_geti(L, 1, i);
        count_elem(L, &c);
    }
    lua_geti(L, 1, e);
    return (int)n;
}

/* The order function table.sort gets: the caller's (upvalue 1) or `<`, with the
 * comparisons counted. The count is per process: charges are a few per sort. */
static unsigned sort_steps;

static int sort_order(lua_State *L)
{
    if (++sort_steps >= LB_SORT_EVERY) {
        sort_steps = 0;
        charge(L, (long)LB_SORT_EVERY * LB_ELEM_UNITS);
    }
    if (lua_isnil(L, lua_upvalueindex(1))) {
        lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

/* table.sort: the stock function (upvalue 1) with a counting order function, except
 * for a small array without a metatable (bounded work, sorted directly). */
static int tab_sort(lua_State *L)
{
    int direct = lua_type(L, 1) == LUA_TTABLE && lua_rawlen(L, 1) <= LB_SORT_DIRECT;
    if (direct && lua_getmetatable(L, 1)) {
        lua_pop(L, 1);
        direct = 0;
    }
    check_tab(L, 1, TAB_RW | TAB_L); /* the stock function's first check, named 'sort' here */
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    if (!direct) {
        lua_pushvalue(L, 2);
        lua_pushcclosure(L, sort_order, 1);
        lua_replace(L, 2);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 0);
    return 0;
}

void lbounded_install_table(lua_State *L, int idx, lbounded_charge_fn fn)
{
    static const luaL_Reg fns[] = {{"insert", tab_insert}, {"remove", tab_remove},
                                   {"move", tab_move},     {"concat", tab_concat},
                                   {"unpack", tab_unpack}, {NULL, NULL}};
    idx = lua_absindex(L, idx);
    charge_fn = fn;
    for (int i = 0; fns[i].name; i++) {
        lua_pushcfunction(L, fns[i].func);
        lua_setfield(L, idx, fns[i].name);
    }
    lua_getfield(L, idx, "sort");
    lua_pushcclosure(L, tab_sort, 1);
    lua_setfield(L, idx, "sort");
}

/* ---- utf8 ---- */

#define UTF8_MAX_UNICODE 0x10FFFFu
#define UTF8_MAX_SEQ 0x7FFFFFFFu

/* Decodes the sequence at s (a NUL follows the string's last byte); returns the byte
 * after it, or NULL for an invalid sequence. strict: no surrogates, nothing past
 * U+10FFFF. */
static const char *utf8_next(const char *s, int strict)
{
    /* the smallest value a sequence of 1 + k continuation bytes may encode */
    static const unsigned long least[] = {~0ul, 0x80, 0x800, 0x10000ul, 0x200000ul,
                                          0x4000000ul};
    unsigned int c = (unsigned char)s[0];
    unsigned long v = 0;
    if (c < 0x80) {
        v = c;
    } else {
        int k = 0;
        while (c & 0x40) { /* one continuation byte per leading 1 after the first */
            unsigned int cc = (unsigned char)s[++k];
            if ((cc & 0xC0) != 0x80)
                return NULL;
            v = (v << 6) | (cc & 0x3F);
            c <<= 1;
        }
        v |= (unsigned long)(c & 0x7F) << (k * 5);
        if (k > 5 || v > UTF8_MAX_SEQ || v < least[k])
            return NULL;
        s += k;
    }
    if (strict && (v > UTF8_MAX_UNICODE || (v >= 0xD800u && v <= 0xDFFFu)))
        return NULL;
    return s + 1;
}

static lua_Integer utf8_pos(lua_Integer pos, size_t len)
{
    if (pos >= 0)
        return pos;
    if (0u - (size_t)pos > len)
        return 0;
    return (lua_Integer)len + pos + 1;
}

static int utf8_len(lua_State *L)
{
    lua_Integer n = 0;
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_Integer i = utf8_pos(luaL_optinteger(L, 2, 1), len);
    lua_Integer j = utf8_pos(luaL_optinteger(L, 3, -1), len);
    int strict = !lua_toboolean(L, 4);
    luaL_argcheck(L, 1 <= i && --i <= (lua_Integer)len, 2, "initial position out of bounds");
    luaL_argcheck(L, --j < (lua_Integer)len, 3, "final position out of bounds");
    lua_Integer next_charge = i + (lua_Integer)LB_BYTES;
    while (i <= j) {
        const char *e = utf8_next(s + i, strict);
        if (!e) {
            luaL_pushfail(L);
            lua_pushinteger(L, i + 1);
            return 2;
        }
        i = e - s;
        n++;
        if (i >= next_charge) {
            next_charge = i + (lua_Integer)LB_BYTES;
            charge(L, (long)(LB_BYTES >> LB_BYTE_SHIFT));
        }
    }
    lua_pushinteger(L, n);
    return 1;
}

void lbounded_install_utf8(lua_State *L, int idx, lbounded_charge_fn fn)
{
    idx = lua_absindex(L, idx);
    charge_fn = fn;
    lua_pushcfunction(L, utf8_len);
    lua_setfield(L, idx, "len");
}
