/* check.h: a minimal assertion kit for the C unit tests. Each test binary returns
 * non-zero when any CHECK failed, so CTest reports it. */
#ifndef CL_CHECK_H
#define CL_CHECK_H

#include <stdio.h>
#include <string.h>

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

#define CHECK_DONE()                                                                    \
    (fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures),            \
     check_failures ? 1 : 0)

#endif
