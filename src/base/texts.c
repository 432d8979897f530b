/* texts: see texts.h. */
#include "texts.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char *const LANG_TAGS[LANG_COUNT] = {"zh-CN", "en-US"};

typedef struct {
    int status;
    const char *name;
    const char *desc[LANG_COUNT];
    const char *sol[LANG_COUNT];
} status_text;

static const status_text STATUS[] = {
#define CL_STATUS_ROW(st, nm, dzh, den, szh, sen) {st, #nm, {dzh, den}, {szh, sen}},
    CL_STATUS_TEXTS(CL_STATUS_ROW)
#undef CL_STATUS_ROW
};
#define STATUS_COUNT (sizeof STATUS / sizeof STATUS[0])

typedef struct {
    const char *key; /* lower-case id, the Lua key */
    const char *text[LANG_COUNT];
} free_text;

static const free_text TEXTS[TEXT_COUNT] = {
#define CL_TEXT_ROW(id, zh, en) {#id, {zh, en}},
    CL_TEXTS(CL_TEXT_ROW)
#undef CL_TEXT_ROW
};

static lang_id clamp(lang_id l)
{
    return (unsigned)l < LANG_COUNT ? l : LANG_ZH_CN;
}

const char *lang_tag(lang_id l)
{
    return LANG_TAGS[clamp(l)];
}

const char *text_get(text_id id, lang_id lang)
{
    if ((unsigned)id >= TEXT_COUNT)
        id = TEXT_CONTACT_ADMIN;
    return TEXTS[id].text[clamp(lang)];
}

static const status_text *status_entry(int status)
{
    for (size_t i = 0; i < STATUS_COUNT; i++)
        if (STATUS[i].status == status)
            return &STATUS[i];
    return NULL;
}

void text_status(int status, lang_id lang, const char **name, const char **desc, const char **sol)
{
    const status_text *e = status_entry(status);
    if (!e)
        e = status_entry(status >= 400 && status < 500 ? 400 : 500);
    lang = clamp(lang);
    *name = e->name;
    *desc = e->desc[lang];
    *sol = e->sol[lang];
}

typedef struct {
    int status, retryable, retry_after_ms;
    const char *action;
} status_next;

static const status_next NEXT[] = {
#define CL_NEXT_ROW(st, re, ms, act) {st, re, ms, act},
    CL_STATUS_NEXT(CL_NEXT_ROW)
#undef CL_NEXT_ROW
};
#define NEXT_COUNT (sizeof NEXT / sizeof NEXT[0])

static const status_next *next_entry(int status)
{
    for (size_t i = 0; i < NEXT_COUNT; i++)
        if (NEXT[i].status == status)
            return &NEXT[i];
    return NULL;
}

void text_status_next(int status, int *retryable, int *retry_after_ms, const char **action)
{
    const status_next *e = next_entry(status);
    if (!e)
        e = next_entry(status >= 400 && status < 500 ? 400 : 500);
    *retryable = e->retryable;
    *retry_after_ms = e->retryable ? e->retry_after_ms : 0;
    *action = e->action;
}

typedef struct {
    const char *token;
    const char *text[LANG_COUNT];
} action_text;

static const action_text ACTIONS[] = {
#define CL_ACTION_ROW(tok, zh, en) {#tok, {zh, en}},
    CL_ACTIONS(CL_ACTION_ROW)
#undef CL_ACTION_ROW
};

const char *text_action(const char *token, lang_id lang)
{
    for (size_t i = 0; token && i < sizeof ACTIONS / sizeof ACTIONS[0]; i++)
        if (!strcmp(ACTIONS[i].token, token))
            return ACTIONS[i].text[clamp(lang)];
    return NULL;
}

typedef struct {
    const char *code, *mcp_action, *rest_action;
    const char *desc[LANG_COUNT];
} trace_code_text;

static const trace_code_text TRACE_CODES[] = {
#define CL_TRACE_ROW(code, mcp, rest, zh, en) {#code, mcp, rest, {zh, en}},
    CL_TRACE_CODES(CL_TRACE_ROW)
#undef CL_TRACE_ROW
};

int text_trace_code(const char *code, lang_id lang, const char **desc, const char **mcp_action,
                    const char **rest_action)
{
    for (size_t i = 0; code && i < sizeof TRACE_CODES / sizeof TRACE_CODES[0]; i++)
        if (!strcmp(TRACE_CODES[i].code, code)) {
            *desc = TRACE_CODES[i].desc[clamp(lang)];
            *mcp_action = TRACE_CODES[i].mcp_action;
            *rest_action = TRACE_CODES[i].rest_action;
            return 1;
        }
    return 0;
}

typedef struct {
    char kind; /* 'e' whole text, 'p' prefix (the rest follows), 'd' prefix (the rest dropped) */
    const char *en, *zh;
} detail_text;

static const detail_text DETAILS[] = {
#define CL_DETAIL_ROW(k, en, zh) {#k[0], en, zh},
    CL_DETAILS(CL_DETAIL_ROW)
#undef CL_DETAIL_ROW
};

static const char *const JSON_DETAILS[][2] = {
#define CL_JSON_ROW(en, zh) {en, zh},
    CL_JSON_DETAILS(CL_JSON_ROW)
#undef CL_JSON_ROW
};

/* "<message> at byte N" of the JSON parser, translated into out (outlen bytes); 0
 * when s is not one. */
static int json_detail(const char *s, char *out, size_t outlen)
{
    const char *at = strstr(s, " at byte ");
    if (!at)
        return 0;
    for (size_t i = 0; i < sizeof JSON_DETAILS / sizeof JSON_DETAILS[0]; i++) {
        size_t n = strlen(JSON_DETAILS[i][0]);
        if ((size_t)(at - s) == n && !strncmp(s, JSON_DETAILS[i][0], n)) {
            snprintf(out, outlen, "第 %s 字节处%s", at + 9, JSON_DETAILS[i][1]);
            return 1;
        }
    }
    return 0;
}

const char *text_detail(const char *details, lang_id lang, char *out, size_t outlen)
{
    if (!details || clamp(lang) == LANG_EN_US || outlen == 0)
        return details;
    for (size_t i = 0; i < sizeof DETAILS / sizeof DETAILS[0]; i++) {
        const detail_text *d = &DETAILS[i];
        size_t n = strlen(d->en);
        if (d->kind == 'e' ? strcmp(details, d->en) : strncmp(details, d->en, n))
            continue;
        int w = snprintf(out, outlen, "%s", d->zh);
        if (d->kind == 'p' && w >= 0 && (size_t)w < outlen &&
            !json_detail(details + n, out + w, outlen - (size_t)w))
            snprintf(out + w, outlen - (size_t)w, "%s", details + n);
        return out;
    }
    return details;
}
