/* accept: content negotiation. One parser for Accept (media ranges) and one for
 * Accept-Language, with RFC 9110 q-values (see accept.h). */
#include "accept.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* q of one ";"-parameter list starting at p (at ';' or the range's end), up to the
 * next ',' or the end; *end set past it. A malformed q is 0 (not acceptable);
 * q above 1 is 1. */
static double params_q(const char *p, const char **end)
{
    double qv = 1.0;
    while (*p && *p != ',') {
        if (*p != ';') {
            p++;
            continue;
        }
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            char *e = NULL;
            qv = strtod(p + 2, &e);
            if (e == p + 2 || qv != qv || qv < 0)
                qv = 0;
            if (qv > 1)
                qv = 1;
            p = e > p + 2 ? e : p + 2;
        }
    }
    *end = p;
    return qv;
}

double accept_q(const char *accept, const char *type)
{
    const char *slash = strchr(type, '/');
    size_t tlen = strlen(type), major = slash ? (size_t)(slash - type) : 0;
    double q_best = -1.0;
    int spec_best = -1;
    for (const char *p = accept; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *r = p;
        while (*p && *p != ',' && *p != ';')
            p++;
        size_t n = (size_t)(p - r);
        while (n && (r[n - 1] == ' ' || r[n - 1] == '\t'))
            n--;
        double q = params_q(p, &p);
        int spec = -1;
        if (n == tlen && !strncasecmp(r, type, n))
            spec = 2;
        else if (major > 0 && n == major + 2 && !strncasecmp(r, type, major) &&
                 !strncmp(r + major, "/*", 2))
            spec = 1;
        else if (n == 3 && !strncmp(r, "*/*", 3))
            spec = 0;
        if (spec > spec_best) {
            spec_best = spec;
            q_best = q;
        }
    }
    return q_best;
}

int accept_admits(const char *accept, const char *type)
{
    if (!accept || !*accept)
        return 1;
    return accept_q(accept, type) > 0;
}

/* Which supported language a language range names: zh, zh-CN, zh-Hans(-...), zh_CN
 * (any zh) -> zh-CN; en, en-* -> en-US; -1 for others. */
static int lang_of_range(const char *tag, size_t n)
{
    if (n < 2 || (n > 2 && tag[2] != '-' && tag[2] != '_'))
        return -1;
    if (tolower((unsigned char)tag[0]) == 'z' && tolower((unsigned char)tag[1]) == 'h')
        return LANG_ZH_CN;
    if (tolower((unsigned char)tag[0]) == 'e' && tolower((unsigned char)tag[1]) == 'n')
        return LANG_EN_US;
    return -1;
}

/* Accept-Language with RFC 9110 q-values: per supported language the most specific
 * range that names it gives its q (so "zh-CN;q=0, zh" refuses zh-CN); "*" gives
 * its q to every language not named; q=0 (or a malformed q) refuses. The highest q
 * wins, ties keep header order, and among languages reached only through "*" the
 * deployment's default comes first. Nothing acceptable -> the default. */
lang_id lang_from_accept(const char *h, lang_id dflt)
{
    double q[LANG_COUNT];
    size_t spec[LANG_COUNT], pos[LANG_COUNT];
    double star_q = -1.0;
    size_t star_pos = 0, idx = 0;
    for (int l = 0; l < LANG_COUNT; l++) {
        q[l] = -1.0;
        spec[l] = 0;
        pos[l] = 0;
    }
    for (const char *p = h ? h : ""; *p; idx++) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *tag = p;
        while (*p && *p != ';' && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        size_t tlen = (size_t)(p - tag);
        double qv = params_q(p, &p);
        if (tlen == 1 && tag[0] == '*') {
            if (star_q < 0) {
                star_q = qv;
                star_pos = idx;
            }
            continue;
        }
        int l = lang_of_range(tag, tlen);
        if (l < 0 || tlen < spec[l])
            continue;
        if (tlen > spec[l] || q[l] < 0) {
            q[l] = qv;
            spec[l] = tlen;
            pos[l] = idx;
        }
    }
    lang_id best = dflt;
    double best_q = 0.0;
    size_t best_pos = (size_t)-1;
    for (int k = 0; k < LANG_COUNT; k++) {
        /* The default first, so that it wins ties among "*"-only languages. */
        int l = k == 0 ? (int)dflt : (k == (int)dflt ? 0 : k);
        double lq = q[l] >= 0 ? q[l] : star_q;
        size_t lp = q[l] >= 0 ? pos[l] : star_pos;
        if (lq > best_q || (lq == best_q && lq > 0 && lp < best_pos)) {
            best = (lang_id)l;
            best_q = lq;
            best_pos = lp;
        }
    }
    return best;
}
