/* toonview: the token-saving TOON view of a tool result (toonview.h). */
#include "toonview.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokproxy.h"
#include "toon.h"

typedef struct seg {
    const char *k;
    size_t len;
} seg;

/* A table column: its name (the dotted path) and the path of its cell in a row. */
typedef struct col {
    buf name;
    seg *path;
    size_t depth;
    size_t top; /* the index of path[0] among the first row's keys */
} col;

typedef struct cols {
    col *v;
    size_t n, cap;
} cols;

/* The names an object already uses (its keys, then the side lists added). */
typedef struct names {
    seg *v;
    size_t n, cap;
    size_t borrowed; /* v[0..borrowed) are the object's keys; later ones are owned copies */
} names;

/* A column path being built (grows with the nesting it follows). */
typedef struct segs {
    seg *v;
    size_t cap;
} segs;

static int is_prim(const json_value *v)
{
    json_type t = json_typeof(v);
    return t != JSON_ARRAY && t != JSON_OBJECT;
}

static int is_record(const json_value *v)
{
    return v && json_typeof(v) == JSON_OBJECT;
}

static int is_array(const json_value *v)
{
    return v && json_typeof(v) == JSON_ARRAY;
}

/* Every key of a is a key of b, and they have as many members: 2 when b's keys are
 * a's in the same order, 1 otherwise, 0 when not. */
static int same_keys(const json_value *a, const json_value *b)
{
    size_t n = json_count(a);
    if (n != json_count(b))
        return 0;
    size_t i = 0;
    for (; i < n; i++) { /* the common case: the same keys in the same order */
        size_t ka, kb;
        const char *x = json_key_at(a, i, &ka), *y = json_key_at(b, i, &kb);
        if (ka != kb || memcmp(x, y, ka) != 0)
            break;
    }
    if (i == n)
        return 2;
    for (; i < n; i++) {
        size_t kl;
        const char *k = json_key_at(a, i, &kl);
        if (!json_get_n(b, k, kl))
            return 0;
    }
    return 1;
}

/* No two keys of obj are the same. */
static int keys_unique(const json_value *obj)
{
    size_t n = json_count(obj);
    for (size_t i = 1; i < n; i++) {
        size_t kl;
        const char *k = json_key_at(obj, i, &kl);
        for (size_t j = 0; j < i; j++) {
            size_t jl;
            const char *jk = json_key_at(obj, j, &jl);
            if (jl == kl && memcmp(jk, k, kl) == 0)
                return 0;
        }
    }
    return 1;
}

/* The member of row i named k, the first row's key j: at j itself when the row's
 * keys are the first row's, in order and unique (aligned[i]). */
static const json_value *cell(const json_value *const *rv, const unsigned char *aligned, size_t i,
                              size_t j, const char *k, size_t kl)
{
    return aligned[i] ? json_val_at(rv[i], j) : json_get_n(rv[i], k, kl);
}

static int is_ident(const char *k, size_t len)
{
    if (len == 0 || !((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_'))
        return 0;
    for (size_t i = 1; i < len; i++) {
        char c = k[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

static void cols_add(cols *cs, const seg *path, size_t depth)
{
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? cs->cap * 2 : 8;
        cs->v = xrealloc(cs->v, cs->cap * sizeof *cs->v);
    }
    col *c = &cs->v[cs->n++];
    memset(c, 0, sizeof *c);
    c->path = xmalloc(depth * sizeof *path);
    memcpy(c->path, path, depth * sizeof *path);
    c->depth = depth;
    for (size_t i = 0; i < depth; i++) {
        if (i)
            buf_putc(&c->name, '.');
        buf_append(&c->name, path[i].k, path[i].len);
    }
}

static void cols_truncate(cols *cs, size_t n)
{
    while (cs->n > n) {
        col *c = &cs->v[--cs->n];
        buf_free(&c->name);
        free(c->path);
    }
}

/* Adds the dotted columns of field path[depth-1] of rows (records one level up)
 * when every row holds a non-empty record with the same keys, all identifiers, down
 * to primitives. Returns 0, or -1 (columns added by this call removed). */
static int fold(cols *cs, const json_value **rows, size_t n, segs *path, size_t depth)
{
    seg key = path->v[depth - 1];
    size_t mark = cs->n;
    int rc = -1;
    const json_value **sub = xmalloc(n * sizeof *sub);
    for (size_t i = 0; i < n; i++) {
        sub[i] = json_get_n(rows[i], key.k, key.len);
        if (!is_record(sub[i]) || (i == 0 && json_count(sub[0]) == 0) || !same_keys(sub[0], sub[i]))
            goto out;
    }
    if (depth == path->cap) {
        path->cap *= 2;
        path->v = xrealloc(path->v, path->cap * sizeof *path->v);
    }
    for (size_t j = 0; j < json_count(sub[0]); j++) {
        size_t kl;
        const char *k = json_key_at(sub[0], j, &kl);
        if (!is_ident(k, kl))
            goto out;
        int all_prim = 1;
        for (size_t i = 0; i < n && all_prim; i++)
            all_prim = is_prim(json_get_n(sub[i], k, kl));
        path->v[depth] = (seg){k, kl};
        if (all_prim)
            cols_add(cs, path->v, depth + 1);
        else if (fold(cs, sub, n, path, depth + 1) < 0)
            goto out;
    }
    rc = 0;
out:
    if (rc < 0)
        cols_truncate(cs, mark);
    free(sub);
    return rc;
}

static int names_has(const names *t, const char *k, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].len == len && memcmp(t->v[i].k, k, len) == 0)
            return 1;
    return 0;
}

static void names_add(names *t, const char *k, size_t len)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->v = xrealloc(t->v, t->cap * sizeof *t->v);
    }
    t->v[t->n++] = (seg){k, len};
}

static json_value *view(json_value *v, const seg *omit, int take);

/* The cell of column c in row i: a copy, or with take, when the row's keys are unique
 * (aligned) and the cell is one of them, the value itself taken out of the row (a
 * repeated key can give two columns the same value: those are copied). */
static json_value *cell_of(const json_value *const *rv, const unsigned char *aligned, size_t i,
                           const col *c, int take)
{
    const seg *p = c->path;
    if (take && aligned[i] && c->depth == 1)
        return json_take_at((json_value *)rv[i], c->top);
    const json_value *x = cell(rv, aligned, i, c->top, p[0].k, p[0].len);
    for (size_t d = 1; d < c->depth; d++)
        x = json_get_n(x, p[d].k, p[d].len);
    return json_clone(x);
}

/* Appends `name` = rows as a table to out, then its side lists (their names added to
 * taken). Returns 1, or 0 with out unchanged when the rows stay a list. omit (may be
 * NULL): the name of a primitive column to leave out. take: the rows' values are
 * moved into the table instead of copied (rows is then only to be freed; only when 1
 * is returned). */
static int put_table(json_value *out, const char *name, size_t nlen, const json_value *rows,
                     names *taken, const seg *omit, int take)
{
    size_t n = json_count(rows);
    const json_value *first = json_at(rows, 0);
    const json_value **rv = xmalloc(n * sizeof *rv);
    cols cs = {0};
    seg *sides = NULL;
    size_t *side_at = NULL; /* the index of each side list's key in the first row */
    segs path = {xmalloc(4 * sizeof(seg)), 4};
    size_t nsides = 0;
    int ok = 0;
    unsigned char *aligned = xmalloc(n);
    int uniq = is_record(first) && keys_unique(first);
    for (size_t i = 0; i < n; i++) {
        rv[i] = json_at(rows, i);
        int same = i == 0 ? 2 : is_record(rv[i]) ? same_keys(first, rv[i]) : 0;
        if (!same)
            goto out;
        aligned[i] = uniq && same == 2;
    }
    size_t nk = json_count(first);
    sides = xmalloc((nk ? nk : 1) * sizeof *sides);
    side_at = xmalloc((nk ? nk : 1) * sizeof *side_at);
    for (size_t j = 0; j < nk; j++) {
        size_t kl;
        const char *k = json_key_at(first, j, &kl);
        int prim = 1;
        for (size_t i = 0; i < n && prim; i++)
            prim = is_prim(cell(rv, aligned, i, j, k, kl));
        if (memchr(k, '.', kl))
            goto out; /* a dotted key would read as a dotted column */
        path.v[0] = (seg){k, kl};
        size_t mark = cs.n;
        if (prim) {
            if (!(omit && kl == omit->len && memcmp(k, omit->k, kl) == 0))
                cols_add(&cs, path.v, 1);
        } else if (!is_ident(k, kl) || fold(&cs, rv, n, &path, 1) < 0) {
            /* a list of records keeps its own table only inside its row's record */
            for (size_t i = 0; i < n; i++) {
                const json_value *x = cell(rv, aligned, i, j, k, kl);
                if (is_array(x) && json_count(x) > 0 && is_record(json_at(x, 0)))
                    goto out;
            }
            buf side = {0};
            buf_append(&side, name, nlen);
            buf_putc(&side, '_');
            buf_append(&side, k, kl);
            int bad = names_has(taken, side.data, side.len) || !is_ident(name, nlen);
            buf_free(&side);
            if (bad)
                goto out;
            side_at[nsides] = j;
            sides[nsides++] = (seg){k, kl};
        }
        for (size_t c = mark; c < cs.n; c++)
            cs.v[c].top = j;
    }
    if (cs.n == 0)
        goto out;
    json_value *table = json_new_array();
    const char **names = xmalloc(cs.n * sizeof *names);
    size_t *nlens = xmalloc(cs.n * sizeof *nlens);
    json_value **cells = xmalloc(cs.n * sizeof *cells);
    for (size_t c = 0; c < cs.n; c++)
        names[c] = cs.v[c].name.data, nlens[c] = cs.v[c].name.len;
    for (size_t i = 0; i < n; i++) {
        for (size_t c = 0; c < cs.n; c++)
            cells[c] = cell_of(rv, aligned, i, &cs.v[c], take);
        json_push(table, json_new_object_of(cs.n, names, nlens, cells));
    }
    free(names);
    free(nlens);
    free(cells);
    json_obj_append(out, name, nlen, table);
    for (size_t s = 0; s < nsides; s++) {
        json_value *list = json_new_array();
        for (size_t i = 0; i < n; i++) {
            int mine = take && aligned[i]; /* as cell_of: taken only from a row of unique keys */
            json_value *x =
                mine ? json_take_at((json_value *)rv[i], side_at[s])
                     : (json_value *)cell(rv, aligned, i, side_at[s], sides[s].k, sides[s].len);
            json_push(list, view(x, NULL, mine));
        }
        buf side = {0};
        buf_append(&side, name, nlen);
        buf_putc(&side, '_');
        buf_append(&side, sides[s].k, sides[s].len);
        json_obj_append(out, side.data, side.len, list);
        names_add(taken, side.data, side.len); /* taken owns the bytes */
    }
    ok = 1;
out:
    cols_truncate(&cs, 0);
    free(cs.v);
    free(sides);
    free(side_at);
    free(path.v);
    free(rv);
    free(aligned);
    return ok;
}

/* The view of v: a new tree (v unchanged), or with take made of v's own values (v is
 * consumed). */
static json_value *view(json_value *v, const seg *omit, int take)
{
    if (json_typeof(v) == JSON_ARRAY) {
        json_value *a = json_new_array();
        for (size_t i = 0; i < json_count(v); i++)
            json_push(a, view(take ? json_take_at(v, i) : (json_value *)json_at(v, i), NULL, take));
        if (take)
            json_free(v);
        return a;
    }
    if (json_typeof(v) != JSON_OBJECT)
        return take ? v : json_clone(v);
    size_t n = json_count(v);
    json_value *out = json_new_object();
    names taken = {0};
    for (size_t i = 0; i < n; i++) {
        size_t kl;
        const char *k = json_key_at(v, i, &kl);
        names_add(&taken, k, kl);
    }
    taken.borrowed = n;
    for (size_t i = 0; i < n; i++) {
        size_t kl;
        const char *k = json_key_at(v, i, &kl);
        json_value *x = take ? json_take_at(v, i) : (json_value *)json_val_at(v, i);
        int done = 0;
        if (is_array(x) && json_count(x) > 0 && is_record(json_at(x, 0)))
            done = put_table(out, k, kl, x, &taken, omit, take);
        if (!done)
            json_obj_append(out, k, kl, view(x, NULL, take));
        else if (take)
            json_free(x); /* what the table left of the rows */
    }
    for (size_t i = taken.borrowed; i < taken.n; i++)
        free((char *)taken.v[i].k);
    free(taken.v);
    if (take)
        json_free(v); /* its keys were borrowed until here */
    return out;
}

/* Lua's tostring of a result value as it reads in an instance id; 0 when the value
 * has no such text (null, a container). */
static int id_text(buf *out, const json_value *v)
{
    size_t len;
    const char *s;
    char tmp[64];
    switch (json_typeof(v)) {
    case JSON_STRING:
    case JSON_NUMTEXT:
        s = json_get_str(v, &len);
        buf_append(out, s, len);
        return 1;
    case JSON_INT:
        buf_printf(out, "%" PRId64, json_get_int(v));
        return 1;
    case JSON_DOUBLE:
        snprintf(tmp, sizeof tmp, "%.14g", json_get_double(v));
        buf_puts(out, tmp);
        if (tmp[strspn(tmp, "-0123456789")] == '\0')
            buf_puts(out, ".0"); /* looks like an int */
        return 1;
    case JSON_TRUE:
        buf_puts(out, "true");
        return 1;
    case JSON_FALSE:
        buf_puts(out, "false");
        return 1;
    default:
        return 0;
    }
}

/* Every row of v's array o->rows (a non-empty list) has o->id = o->prefix + the
 * single value of its o->identity (a record or a list of one). */
static int id_implied(const json_value *v, const toonview_omit *o)
{
    const json_value *rows =
        json_typeof(v) == JSON_OBJECT ? json_get_n(v, o->rows, o->rows_len) : NULL;
    if (!is_array(rows) || json_count(rows) == 0)
        return 0;
    buf want = {0};
    int ok = 1;
    for (size_t i = 0; i < json_count(rows) && ok; i++) {
        const json_value *r = json_at(rows, i);
        const json_value *id = is_record(r) ? json_get_n(r, o->identity, o->identity_len) : NULL;
        const json_value *got = is_record(r) ? json_get_n(r, o->id, o->id_len) : NULL;
        const json_value *one = NULL;
        if (is_record(id) && json_count(id) == 1)
            one = json_val_at(id, 0);
        else if (is_array(id) && json_count(id) == 1)
            one = json_at(id, 0);
        buf_reset(&want);
        buf_append(&want, o->prefix, o->prefix_len);
        size_t glen = 0;
        const char *g = got && json_typeof(got) == JSON_STRING ? json_get_str(got, &glen) : NULL;
        ok = one && g && id_text(&want, one) && want.len == glen && memcmp(want.data, g, glen) == 0;
    }
    buf_free(&want);
    return ok;
}

static json_value *build(json_value *v, const toonview_omit *omit, int take)
{
    seg col = {omit ? omit->id : NULL, omit ? omit->id_len : 0};
    int leave_out = omit && (!omit->prefix || id_implied(v, omit));
    return view(v, leave_out ? &col : NULL, take);
}

json_value *toonview_build(const json_value *v, const toonview_omit *omit)
{
    return build((json_value *)v, omit, 0);
}

static int render(buf *out, json_value *result, int take, const char *json, size_t json_len,
                  int rest, const toonview_omit *omit, char *err, size_t errlen)
{
    json_value *v = build(result, omit, take);
    buf text = {0};
    int rc = toon_encode(&text, v, NULL, err, errlen);
    if (rc >= 0) {
        rc = 0;
        if (rest || tokproxy_prefer(text.data ? text.data : "", text.len, json, json_len))
            buf_append(out, text.data ? text.data : "", text.len);
        else
            buf_append(out, json, json_len);
    }
    buf_free(&text);
    json_free(v);
    return rc;
}

int toonview_render(buf *out, const json_value *result, const char *json, size_t json_len, int rest,
                    const toonview_omit *omit, char *err, size_t errlen)
{
    return render(out, (json_value *)result, 0, json, json_len, rest, omit, err, errlen);
}

int toonview_render_take(buf *out, json_value *result, const char *json, size_t json_len, int rest,
                         const toonview_omit *omit, char *err, size_t errlen)
{
    return render(out, result, 1, json, json_len, rest, omit, err, errlen);
}
