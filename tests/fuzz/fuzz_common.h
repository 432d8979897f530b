/* fuzz_common: the property check shared by the fuzz targets. A violated property
 * aborts, which libFuzzer reports as a crash (with the input saved) and the corpus
 * replay driver turns into a failed test. */
#ifndef CL_FUZZ_COMMON_H
#define CL_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void fuzz_must(int cond, const char *target, const char *what)
{
    if (!cond) {
        fprintf(stderr, "%s: property violated: %s\n", target, what);
        abort();
    }
}

#endif
