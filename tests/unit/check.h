/* check.h: a minimal assertion kit for the C unit tests. Each test binary returns
 * non-zero when any CHECK failed, so CTest reports it. */
#ifndef CL_CHECK_H
#define CL_CHECK_H

#include <stdio.h>
#include <string.h>
#include <time.h>

static int check_failures = 0;
static int check_count = 0;
/* The named case running (a test that runs named cases sets it): failures name it. */
static const char *check_case = NULL;
#define CHECK_WHERE() (check_case ? fprintf(stderr, "[%s] ", check_case) : 0)

#define CHECK(cond)                                                                     \
    do {                                                                                \
        check_count++;                                                                  \
        if (!(cond)) {                                                                  \
            check_failures++;                                                           \
            CHECK_WHERE();                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                               \
    } while (0)

#define CHECK_STR(a, b)                                                                 \
    do {                                                                                \
        const char *check_a_ = (a), *check_b_ = (b);                                    \
        check_count++;                                                                  \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                \
            check_failures++;                                                           \
            CHECK_WHERE();                                                              \
            fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:      %s\n  expected: %s\n", \
                    __FILE__, __LINE__, check_a_ ? check_a_ : "(null)",                \
                    check_b_ ? check_b_ : "(null)");                                    \
        }                                                                               \
    } while (0)

/* Waits for an event, judged by what the test's loop did as well as by the clock.
 * check_wait_start(ms) then `while (!event && check_wait_on(&w)) <one loop turn>`:
 * the wait gives up only when at least `ms` of wall time have passed AND the loop has
 * turned at least ms / CHECK_TURN_MS times. A turn is bounded by the test's own tick
 * (a timer of CHECK_TURN_MS or less), so on an idle machine the wait lasts `ms`; on a
 * loaded one turns come further apart and the wait stretches with them: a test the
 * machine starves is not failed for the machine's slowness, while an event that never
 * comes still fails it. */
#define CHECK_TURN_MS 10

typedef struct check_wait {
    struct timespec end;
    long turns_left;
} check_wait;

static inline check_wait check_wait_start(long ms)
{
    check_wait w;
    clock_gettime(CLOCK_MONOTONIC, &w.end);
    w.end.tv_sec += ms / 1000;
    w.end.tv_nsec += (ms % 1000) * 1000000L;
    if (w.end.tv_nsec >= 1000000000L) {
        w.end.tv_sec++;
        w.end.tv_nsec -= 1000000000L;
    }
    w.turns_left = ms / CHECK_TURN_MS;
    return w;
}

/* Counts one turn; 1 while the wait goes on. */
static inline int check_wait_on(check_wait *w)
{
    struct timespec now;
    if (w->turns_left > 0)
        w->turns_left--;
    if (w->turns_left > 0)
        return 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec < w->end.tv_sec ||
           (now.tv_sec == w->end.tv_sec && now.tv_nsec < w->end.tv_nsec);
}

#define CHECK_DONE()                                                                    \
    (fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures),            \
     check_failures ? 1 : 0)

#endif
