/* plimit: calls in flight per principal, so that one runaway agent cannot take every
 * slot of the event loop and the upstreams (limits.max_calls_per_principal).
 *
 * A count per identity key, kept only while it is above zero. Per process: with
 * several workers each counts its own calls (a principal may have up to workers x
 * the limit in flight across the instance).
 *
 * Ownership: the caller owns the plimit (plimit_free); keys are copied. */
#ifndef CL_PLIMIT_H
#define CL_PLIMIT_H

#include <stddef.h>

typedef struct plimit plimit;

/* max: calls in flight allowed per key; 0 = no limit. */
plimit *plimit_new(size_t max);
/* 1 and counts the call when key has fewer than max in flight; 0 (nothing counted)
 * when it already has max. */
int plimit_enter(plimit *p, const char *key);
/* Ends a call plimit_enter admitted. */
void plimit_leave(plimit *p, const char *key);
size_t plimit_count(const plimit *p, const char *key);
void plimit_free(plimit *p);

#endif
