/* mshare: the /metrics texts of every worker, in memory the master maps before it
 * forks (MAP_SHARED), one slot per worker. Each worker publishes its own text (on a
 * timer and when it serves a scrape); whichever worker serves /metrics reads every
 * slot and merges them (metrics_merge_workers), so a scrape sees the whole service.
 *
 * A slot is a seqlock: the writer makes the sequence odd, copies, makes it even; a
 * reader retries while it is odd or changed. A text longer than the slot is cut at
 * its last whole line.
 *
 * Ownership: mshare_new's mapping lives until mshare_free (the master's, inherited by
 * the workers; never unmapped by a worker). Text read is copied into the caller's buf. */
#ifndef CL_MSHARE_H
#define CL_MSHARE_H

#include <stddef.h>

#include "util.h"

typedef struct mshare mshare;

/* workers slots of slot_bytes each (text included); NULL when mmap fails. */
mshare *mshare_new(int workers, size_t slot_bytes);
void mshare_free(mshare *m);
int mshare_workers(const mshare *m);

void mshare_publish(mshare *m, int worker, const char *text, size_t len);
/* Appends worker's last published text to out; 0, or -1 when the slot was never
 * written or stayed busy. */
int mshare_read(const mshare *m, int worker, buf *out);

#endif
