/* plimit: see plimit.h. */
#include "plimit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define PL_BUCKETS 256

typedef struct pl_entry {
    struct pl_entry *next;
    size_t n;
    char key[]; /* NUL-terminated */
} pl_entry;

struct plimit {
    size_t max;
    pl_entry *buckets[PL_BUCKETS];
};

static size_t bucket(const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % PL_BUCKETS;
}

static pl_entry **find(const plimit *p, const char *key)
{
    pl_entry **e = (pl_entry **)&p->buckets[bucket(key)];
    while (*e && strcmp((*e)->key, key))
        e = &(*e)->next;
    return e;
}

plimit *plimit_new(size_t max)
{
    plimit *p = xcalloc(1, sizeof *p);
    p->max = max;
    return p;
}

int plimit_enter(plimit *p, const char *key)
{
    pl_entry **e = find(p, key);
    if (*e && p->max && (*e)->n >= p->max)
        return 0;
    if (!*e) {
        size_t len = strlen(key);
        *e = xcalloc(1, sizeof **e + len + 1);
        memcpy((*e)->key, key, len + 1);
    }
    (*e)->n++;
    return 1;
}

void plimit_leave(plimit *p, const char *key)
{
    pl_entry **e = find(p, key), *dead = *e;
    if (!dead)
        return;
    if (--dead->n == 0) {
        *e = dead->next;
        free(dead);
    }
}

size_t plimit_count(const plimit *p, const char *key)
{
    pl_entry **e = find(p, key);
    return *e ? (*e)->n : 0;
}

void plimit_free(plimit *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < PL_BUCKETS; i++)
        while (p->buckets[i]) {
            pl_entry *e = p->buckets[i];
            p->buckets[i] = e->next;
            free(e);
        }
    free(p);
}
