/* lpattern: Lua 5.4 pattern matching (string.find, match, gmatch, gsub) written for
 * this project, with its work charged to the running call's budget. See lpattern.h.
 *
 * The matcher is a backtracking interpreter over the pattern text: `pm_run` walks the
 * pattern item by item, recursing only where a choice has to be undone later
 * (captures, greedy and lazy repetition, optional items). Every entry into `pm_run` and
 * every subject byte a repetition scans counts one unit of work; every LP_CHARGE_EVERY
 * units are charged through the installed charge function (lvm_charge), which raises once the
 * call's instruction budget or run-time slice is spent, so a backtracking pattern stops like any
 * Lua loop instead of holding the event loop inside one C call. Recursion is bounded by
 * LP_MAX_DEPTH ("pattern too complex"), the same bound stock Lua uses. */
#include "lpattern.h"

#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include <lauxlib.h>

/* units of matching work between two charges (about as many VM instructions) */
#define LP_CHARGE_EVERY 1024
/* nested pm_run calls allowed before "pattern too complex" */
#define LP_MAX_DEPTH 200
/* captures per pattern */
#define LP_MAX_CAPS 32

/* capture lengths that are not lengths */
#define LP_OPEN (-1)     /* '(' seen, ')' not yet */
#define LP_POSITION (-2) /* '()': a position capture */

typedef struct {
    const char *at;
    ptrdiff_t len; /* bytes, or LP_OPEN / LP_POSITION */
} pm_cap;

/* One matching run. Borrows the subject and pattern (owned by the Lua stack). */
typedef struct {
    lua_State *L;
    lpattern_charge_fn charge;
    const char *subj;     /* first subject byte */
    const char *subj_end; /* one past the last; always a NUL there (Lua strings) */
    const char *pat_end;  /* one past the pattern's last byte */
    int depth_left;
    int ncap;
    long work;
    pm_cap cap[LP_MAX_CAPS];
} pm_state;

static const char *pm_run(pm_state *m, const char *s, const char *p);

static void pm_count(pm_state *m)
{
    if (++m->work >= LP_CHARGE_EVERY) {
        long n = m->work;
        m->work = 0;
        m->charge(m->L, n); /* raises when the budget or the run-time slice is spent */
    }
}

static void pm_reset(pm_state *m)
{
    m->ncap = 0;
    m->depth_left = LP_MAX_DEPTH;
}

/* The charge function, from the calling C function's upvalue upv. */
static lpattern_charge_fn charge_of(lua_State *L, int upv)
{
    const lpattern_charge_fn *f = lua_touserdata(L, lua_upvalueindex(upv));
    return *f;
}

static void pm_init(pm_state *m, lua_State *L, const char *s, size_t ls, const char *p, size_t lp,
                    lpattern_charge_fn charge)
{
    m->L = L;
    m->charge = charge;
    m->subj = s;
    m->subj_end = s + ls;
    m->pat_end = p + lp;
    m->work = 0;
    pm_reset(m);
}

/* A 1-based, possibly negative string position made a 1-based start in [1, ...]. */
static size_t start_pos(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return len - (size_t)(-pos) + 1;
}

/* Does byte c belong to class letter k (a, d, s, ...; upper case: the complement)?
 * Any other k stands for itself. */
static int in_class(int c, int k)
{
    int yes;
    switch (tolower(k)) {
    case 'a':
        yes = isalpha(c);
        break;
    case 'c':
        yes = iscntrl(c);
        break;
    case 'd':
        yes = isdigit(c);
        break;
    case 'g':
        yes = isgraph(c);
        break;
    case 'l':
        yes = islower(c);
        break;
    case 'p':
        yes = ispunct(c);
        break;
    case 's':
        yes = isspace(c);
        break;
    case 'u':
        yes = isupper(c);
        break;
    case 'w':
        yes = isalnum(c);
        break;
    case 'x':
        yes = isxdigit(c);
        break;
    case 'z': /* the NUL byte (kept by Lua 5.4 though deprecated) */
        yes = c == 0;
        break;
    default:
        return k == c;
    }
    yes = yes != 0;
    return isupper(k) ? !yes : yes;
}

/* Is byte c in the set whose '[' is at open and whose closing ']' is at close? */
static int in_set(int c, const char *open, const char *close)
{
    const char *q = open + 1;
    int want = 1;
    if (*q == '^') {
        want = 0;
        q++;
    }
    for (; q < close; q++) {
        unsigned char here = (unsigned char)*q;
        if (here == '%') {
            q++;
            if (in_class(c, (unsigned char)*q))
                return want;
        } else if (q[1] == '-' && q + 2 < close) {
            if (here <= c && c <= (unsigned char)q[2])
                return want;
            q += 2;
        } else if (here == c) {
            return want;
        }
    }
    return !want;
}

/* One past the single-character item (literal, '.', %x or [set]) starting at p. */
static const char *item_end(pm_state *m, const char *p)
{
    if (*p == '%') {
        if (p + 1 >= m->pat_end)
            luaL_error(m->L, "malformed pattern (ends with '%%')");
        return p + 2;
    }
    if (*p != '[')
        return p + 1;
    p++;
    if (*p == '^')
        p++;
    /* the first byte of the set is taken as a member even if it is ']' */
    for (;;) {
        if (p >= m->pat_end)
            luaL_error(m->L, "malformed pattern (missing ']')");
        if (*p == '%' && p + 1 < m->pat_end)
            p += 2;
        else
            p++;
        if (*p == ']')
            return p + 1;
    }
}

/* Does the item [p, ep) match the subject byte at s (none at the end)? */
static int item_matches(const pm_state *m, const char *s, const char *p, const char *ep)
{
    int c;
    if (s >= m->subj_end)
        return 0;
    c = (unsigned char)*s;
    switch (*p) {
    case '.':
        return 1;
    case '%':
        return in_class(c, (unsigned char)p[1]);
    case '[':
        return in_set(c, p, ep - 1);
    default:
        return (unsigned char)*p == c;
    }
}

static int capture_index(pm_state *m, int digit)
{
    int i = digit - '1';
    if (i < 0 || i >= m->ncap || m->cap[i].len == LP_OPEN)
        return luaL_error(m->L, "invalid capture index %%%d", i + 1);
    return i;
}

/* %bxy at p (p points at x): one past the balanced run at s, or NULL. */
static const char *match_balanced(pm_state *m, const char *s, const char *p)
{
    int depth = 1;
    if (p + 1 >= m->pat_end)
        luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= m->subj_end || *s != p[0])
        return NULL;
    while (++s < m->subj_end) {
        pm_count(m);
        if (*s == p[1]) {
            if (--depth == 0)
                return s + 1;
        } else if (*s == p[0]) {
            depth++;
        }
    }
    return NULL;
}

/* Item [p, ep) repeated as often as possible at s, then the rest from ep + 1; gives
 * back one repetition at a time until the rest matches. */
static const char *repeat_greedy(pm_state *m, const char *s, const char *p, const char *ep)
{
    size_t n = 0;
    while (item_matches(m, s + n, p, ep)) {
        pm_count(m);
        n++;
    }
    for (;;) {
        const char *r = pm_run(m, s + n, ep + 1);
        if (r)
            return r;
        if (n == 0)
            return NULL;
        n--;
    }
}

/* Item [p, ep) repeated as rarely as possible at s before the rest from ep + 1. */
static const char *repeat_lazy(pm_state *m, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = pm_run(m, s, ep + 1);
        if (r)
            return r;
        if (!item_matches(m, s, p, ep))
            return NULL;
        s++;
    }
}

static const char *open_capture(pm_state *m, const char *s, const char *p, ptrdiff_t kind)
{
    const char *r;
    if (m->ncap >= LP_MAX_CAPS)
        luaL_error(m->L, "too many captures");
    m->cap[m->ncap].at = s;
    m->cap[m->ncap].len = kind;
    m->ncap++;
    r = pm_run(m, s, p);
    if (!r)
        m->ncap--; /* undo */
    return r;
}

static const char *close_capture(pm_state *m, const char *s, const char *p)
{
    const char *r;
    int i = m->ncap - 1;
    while (i >= 0 && m->cap[i].len != LP_OPEN)
        i--;
    if (i < 0)
        luaL_error(m->L, "invalid pattern capture");
    m->cap[i].len = s - m->cap[i].at;
    r = pm_run(m, s, p);
    if (!r)
        m->cap[i].len = LP_OPEN; /* undo */
    return r;
}

/* %1..%9: the text of an earlier capture again at s. */
static const char *match_backref(pm_state *m, const char *s, int digit)
{
    const pm_cap *c = &m->cap[capture_index(m, digit)];
    if (c->len < 0) /* a position capture has no text to repeat */
        return NULL;
    if (m->subj_end - s < c->len || memcmp(c->at, s, (size_t)c->len) != 0)
        return NULL;
    return s + c->len;
}

/* Matches the pattern from p against the subject from s: one past the match's end, or
 * NULL. Loops along the pattern; recurses where a choice may have to be undone. */
static const char *pm_run(pm_state *m, const char *s, const char *p)
{
    if (m->depth_left-- == 0)
        luaL_error(m->L, "pattern too complex");
    for (;;) {
        const char *ep;
        pm_count(m);
        if (p >= m->pat_end)
            break;
        if (*p == '(') {
            s = p[1] == ')' ? open_capture(m, s, p + 2, LP_POSITION)
                            : open_capture(m, s, p + 1, LP_OPEN);
            break;
        }
        if (*p == ')') {
            s = close_capture(m, s, p + 1);
            break;
        }
        if (*p == '$' && p + 1 == m->pat_end) {
            if (s != m->subj_end)
                s = NULL;
            break;
        }
        if (*p == '%' && p[1] == 'b') {
            s = match_balanced(m, s, p + 2);
            if (!s)
                break;
            p += 4;
            continue;
        }
        if (*p == '%' && p[1] == 'f') {
            int before, here;
            p += 2;
            if (*p != '[')
                luaL_error(m->L, "missing '[' after '%%f' in pattern");
            ep = item_end(m, p);
            before = s == m->subj ? 0 : (unsigned char)s[-1];
            here = (unsigned char)*s; /* the NUL past the end at the end */
            if (in_set(before, p, ep - 1) || !in_set(here, p, ep - 1)) {
                s = NULL;
                break;
            }
            p = ep;
            continue;
        }
        if (*p == '%' && isdigit((unsigned char)p[1])) {
            s = match_backref(m, s, (unsigned char)p[1]);
            if (!s)
                break;
            p += 2;
            continue;
        }
        /* a single-character item, maybe followed by a repetition mark */
        ep = item_end(m, p);
        if (!item_matches(m, s, p, ep)) {
            if (*ep == '*' || *ep == '?' || *ep == '-') { /* zero repetitions will do */
                p = ep + 1;
                continue;
            }
            s = NULL;
            break;
        }
        if (*ep == '?') {
            const char *r = pm_run(m, s + 1, ep + 1);
            if (r) {
                s = r;
                break;
            }
            p = ep + 1;
            continue;
        }
        if (*ep == '+') {
            s = repeat_greedy(m, s + 1, p, ep);
            break;
        }
        if (*ep == '*') {
            s = repeat_greedy(m, s, p, ep);
            break;
        }
        if (*ep == '-') {
            s = repeat_lazy(m, s, p, ep);
            break;
        }
        s++;
        p = ep;
    }
    m->depth_left++;
    return s;
}

/* Pushes capture i of the match [s, e) (i == 0 without captures: the whole match). */
static void push_capture(pm_state *m, int i, const char *s, const char *e)
{
    if (i >= m->ncap) {
        if (i != 0)
            luaL_error(m->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(m->L, s, (size_t)(e - s));
        return;
    }
    if (m->cap[i].len == LP_OPEN)
        luaL_error(m->L, "unfinished capture");
    if (m->cap[i].len == LP_POSITION)
        lua_pushinteger(m->L, (lua_Integer)(m->cap[i].at - m->subj) + 1);
    else
        lua_pushlstring(m->L, m->cap[i].at, (size_t)m->cap[i].len);
}

/* Pushes every capture (s non-NULL and none: the whole match); returns how many. */
static int push_all_captures(pm_state *m, const char *s, const char *e)
{
    int n = (m->ncap == 0 && s) ? 1 : m->ncap;
    luaL_checkstack(m->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        push_capture(m, i, s, e);
    return n;
}

/* Does the pattern use no magic byte (then find can search it as plain text)? */
static int is_plain(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++)
        if (p[i] != '\0' && strchr("^$*+?.([%-", p[i]))
            return 0;
    return 1;
}

/* First occurrence of needle in hay, or NULL. Each candidate compared costs up to
 * ln bytes: the bytes compared are charged (a unit per 16) every LP_CHARGE_EVERY
 * units, so a long needle over a long subject stops like a loop. */
static const char *find_text(lua_State *L, lpattern_charge_fn charge, const char *hay, size_t lh,
                             const char *needle, size_t ln)
{
    size_t work = 0;
    if (ln == 0)
        return hay;
    while (ln <= lh) {
        const char *c = memchr(hay, needle[0], lh - ln + 1);
        if (!c)
            return NULL;
        if (memcmp(c, needle, ln) == 0)
            return c;
        work += (size_t)(c - hay) / 16 + ln / 16 + 1;
        if (work >= LP_CHARGE_EVERY) {
            charge(L, (long)work);
            work = 0;
        }
        lh -= (size_t)(c + 1 - hay);
        hay = c + 1;
    }
    return NULL;
}

/* string.find (want_pos) and string.match. */
static int find_or_match(lua_State *L, int want_pos)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t from = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
    pm_state m;
    int anchored;
    const char *at;
    if (from > ls) {
        luaL_pushfail(L);
        return 1;
    }
    if (want_pos && (lua_toboolean(L, 4) || is_plain(p, lp))) {
        const char *hit = find_text(L, charge_of(L, 1), s + from, ls - from, p, lp);
        if (!hit) {
            luaL_pushfail(L);
            return 1;
        }
        lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
        lua_pushinteger(L, (lua_Integer)(hit - s + lp));
        return 2;
    }
    anchored = lp > 0 && *p == '^';
    if (anchored) {
        p++;
        lp--;
    }
    pm_init(&m, L, s, ls, p, lp, charge_of(L, 1));
    for (at = s + from;; at++) {
        const char *e;
        pm_reset(&m);
        e = pm_run(&m, at, p);
        if (e) {
            if (!want_pos)
                return push_all_captures(&m, at, e);
            lua_pushinteger(L, (lua_Integer)(at - s) + 1);
            lua_pushinteger(L, (lua_Integer)(e - s));
            return push_all_captures(&m, NULL, NULL) + 2;
        }
        if (anchored || at >= m.subj_end)
            break;
    }
    luaL_pushfail(L);
    return 1;
}

static int lp_find(lua_State *L)
{
    return find_or_match(L, 1);
}

static int lp_match(lua_State *L)
{
    return find_or_match(L, 0);
}

/* gmatch's position between calls: where the next search starts and where the last
 * match ended (an empty match there is skipped). */
typedef struct {
    size_t next;
    size_t last_end;
    int has_last;
} gm_pos;

/* upvalues: 1 subject, 2 pattern, 3 gm_pos, 4 the charge function */
static int gmatch_next(lua_State *L)
{
    size_t ls, lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
    gm_pos *g = lua_touserdata(L, lua_upvalueindex(3));
    pm_state m;
    pm_init(&m, L, s, ls, p, lp, charge_of(L, 4));
    for (size_t at = g->next; at <= ls; at++) {
        const char *e;
        pm_reset(&m);
        e = pm_run(&m, s + at, p);
        if (e && !(g->has_last && (size_t)(e - s) == g->last_end)) {
            g->next = g->last_end = (size_t)(e - s);
            g->has_last = 1;
            return push_all_captures(&m, s + at, e);
        }
    }
    g->next = ls + 1; /* exhausted */
    return 0;
}

static int lp_gmatch(lua_State *L)
{
    size_t ls;
    gm_pos *g;
    size_t from;
    luaL_checklstring(L, 1, &ls);
    luaL_checkstring(L, 2);
    from = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
    lua_settop(L, 2);
    g = lua_newuserdatauv(L, sizeof *g, 0);
    g->next = from > ls ? ls + 1 : from;
    g->last_end = 0;
    g->has_last = 0;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushcclosure(L, gmatch_next, 4);
    return 1;
}

/* Appends the string replacement (argument 3) for the match [s, e), expanding %0-%9
 * and %%. */
static void add_template(pm_state *m, luaL_Buffer *b, const char *s, const char *e)
{
    size_t lt;
    const char *t = lua_tolstring(m->L, 3, &lt);
    const char *t_end = t + lt;
    while (t < t_end) {
        const char *pct = memchr(t, '%', (size_t)(t_end - t));
        int k;
        if (!pct) {
            luaL_addlstring(b, t, (size_t)(t_end - t));
            break;
        }
        luaL_addlstring(b, t, (size_t)(pct - t));
        k = (unsigned char)pct[1]; /* the NUL past the end when '%' is last */
        t = pct + 2;
        if (k == '%') {
            luaL_addchar(b, '%');
        } else if (k == '0') {
            luaL_addlstring(b, s, (size_t)(e - s));
        } else if (isdigit(k)) {
            push_capture(m, k - '1', s, e);
            luaL_tolstring(m->L, -1, NULL); /* a position capture becomes its number */
            lua_remove(m->L, -2);
            luaL_addvalue(b);
        } else {
            luaL_error(m->L, "invalid use of '%c' in replacement string", '%');
        }
    }
}

/* Appends the replacement for the match [s, e) given by argument 3 of kind kind;
 * false or nil from a table or function keeps the match itself. */
static void add_replacement(pm_state *m, luaL_Buffer *b, const char *s, const char *e, int kind)
{
    lua_State *L = m->L;
    if (kind == LUA_TFUNCTION) {
        int n;
        lua_pushvalue(L, 3);
        n = push_all_captures(m, s, e);
        lua_call(L, n, 1);
    } else if (kind == LUA_TTABLE) {
        push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    } else {
        add_template(m, b, s, e);
        return;
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s));
    } else if (!lua_isstring(L, -1)) {
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    } else {
        luaL_addvalue(b);
    }
}

static int lp_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int kind = lua_type(L, 3);
    lua_Integer limit = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    const char *at = s, *last_end = NULL;
    lua_Integer count = 0;
    int anchored;
    pm_state m;
    luaL_Buffer b;
    luaL_argexpected(L,
                     kind == LUA_TNUMBER || kind == LUA_TSTRING || kind == LUA_TFUNCTION ||
                         kind == LUA_TTABLE,
                     3, "string/function/table");
    anchored = lp > 0 && *p == '^';
    if (anchored) {
        p++;
        lp--;
    }
    luaL_buffinit(L, &b);
    pm_init(&m, L, s, ls, p, lp, charge_of(L, 1));
    while (count < limit) {
        const char *e;
        pm_reset(&m);
        e = pm_run(&m, at, p);
        if (e && e != last_end) {
            count++;
            add_replacement(&m, &b, at, e, kind);
            at = last_end = e;
        } else if (at < m.subj_end) {
            luaL_addchar(&b, *at++);
        } else {
            break;
        }
        if (anchored)
            break;
    }
    luaL_addlstring(&b, at, (size_t)(m.subj_end - at));
    luaL_pushresult(&b);
    lua_pushinteger(L, count);
    return 2;
}

void lpattern_install(lua_State *L, int idx, lpattern_charge_fn charge)
{
    static const luaL_Reg fns[] = {{"find", lp_find},
                                   {"match", lp_match},
                                   {"gmatch", lp_gmatch},
                                   {"gsub", lp_gsub},
                                   {NULL, NULL}};
    idx = lua_absindex(L, idx);
    lpattern_charge_fn *box = lua_newuserdatauv(L, sizeof *box, 0); /* upvalue 1 of each */
    *box = charge;
    for (const luaL_Reg *f = fns; f->name; f++) {
        lua_pushvalue(L, -1);
        lua_pushcclosure(L, f->func, 1);
        lua_setfield(L, idx, f->name);
    }
    lua_pop(L, 1);
}
