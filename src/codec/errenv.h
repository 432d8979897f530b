/* errenv: the one writer of the gateway's own REST error envelope (docs/errors.md).
 *
 *   {"code","description","solution","details","retryable"[,"retry_after_ms"]
 *    [,"required_action"][, extra members]}
 *
 * description and solution come from the text catalogue (texts.h) in the request
 * language unless given; retryable, retry_after_ms and required_action come from the
 * status's rule (CL_STATUS_NEXT) unless given. There is no "link" member: the gateway
 * has none to give. retry_after_ms is written only when retryable, and never 0.
 *
 * Ownership: nothing is kept; every string is borrowed for the call. */
#ifndef CL_ERRENV_H
#define CL_ERRENV_H

#include "texts.h"
#include "util.h"

/* The wait a retryable error asks for when its rule names none. */
#define ERR_RETRY_AFTER_MS 1000

typedef struct err_next {
    int retryable;
    int retry_after_ms;          /* > 0 when retryable */
    const char *required_action; /* machine token, or NULL / "" for none */
} err_next;

/* The rule of status (CL_STATUS_NEXT). */
void err_next_of(int status, err_next *out);

/* The Retry-After header value (whole seconds, rounded up) of next; 0 when not
 * retryable. */
int err_retry_after_s(const err_next *next);

/* Appends the envelope to out. code NULL -> "Public.<StatusName>"; desc / sol NULL ->
 * the status's catalogue texts; details NULL -> ""; next NULL -> err_next_of(status);
 * extra: raw JSON members appended after the others ("\"k\":v,..."), or NULL. */
void err_write(buf *out, int status, lang_id lang, const char *code, const char *desc,
               const char *sol, const char *details, const err_next *next, const char *extra);

#endif
