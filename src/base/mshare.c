/* mshare: see mshare.h. */
#include "mshare.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct slot_head {
    uint64_t seq; /* odd while being written; 0 = never written */
    uint64_t len;
} slot_head;

struct mshare {
    int workers;
    size_t slot_bytes; /* head included */
    size_t map_bytes;
    unsigned char *map;
};

static slot_head *head_of(const mshare *m, int worker)
{
    return (slot_head *)(m->map + (size_t)worker * m->slot_bytes);
}

mshare *mshare_new(int workers, size_t slot_bytes)
{
    mshare *m;
    if (workers < 1 || slot_bytes < sizeof(slot_head) + 64)
        return NULL;
    slot_bytes = (slot_bytes + 63) & ~(size_t)63;
    m = xcalloc(1, sizeof *m);
    m->workers = workers;
    m->slot_bytes = slot_bytes;
    m->map_bytes = slot_bytes * (size_t)workers;
    m->map = mmap(NULL, m->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m->map == MAP_FAILED) {
        free(m);
        return NULL;
    }
    return m;
}

void mshare_free(mshare *m)
{
    if (!m)
        return;
    munmap(m->map, m->map_bytes);
    free(m);
}

int mshare_workers(const mshare *m)
{
    return m ? m->workers : 0;
}

void mshare_publish(mshare *m, int worker, const char *text, size_t len)
{
    if (!m || worker < 0 || worker >= m->workers)
        return;
    slot_head *h = head_of(m, worker);
    size_t room = m->slot_bytes - sizeof *h;
    if (len > room) { /* cut at the last whole line that fits */
        len = room;
        while (len > 0 && text[len - 1] != '\n')
            len--;
    }
    uint64_t seq = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, seq | 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy((unsigned char *)(h + 1), text, len);
    __atomic_store_n(&h->len, (uint64_t)len, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, (seq | 1) + 1, __ATOMIC_RELEASE);
}

int mshare_read(const mshare *m, int worker, buf *out)
{
    if (!m || worker < 0 || worker >= m->workers)
        return -1;
    const slot_head *h = head_of(m, worker);
    size_t start = out->len;
    for (int tries = 0; tries < 100; tries++) {
        uint64_t s1 = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
        if (s1 == 0)
            return -1;
        if (s1 & 1)
            continue;
        uint64_t len = __atomic_load_n(&h->len, __ATOMIC_RELAXED);
        if (len > m->slot_bytes - sizeof *h)
            continue;
        out->len = start;
        buf_append(out, (const unsigned char *)(h + 1), (size_t)len);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&h->seq, __ATOMIC_RELAXED) == s1)
            return 0;
    }
    out->len = start;
    return -1;
}
