/* uphealth: what this process has seen of each upstream - the last success, the
 * last failure with its reason and time, failures counted by reason - for
 * /health/ready and /metrics. A failure is a transport error (timeout, refused,
 * response too large, other) or a 5xx answer; 2xx-4xx are answers, so successes.
 *
 * Upstream names are the configured ones (a handful); state lives for the process.
 * Not thread-safe (the event loop is single-threaded). */
#ifndef CL_UPHEALTH_H
#define CL_UPHEALTH_H

#include <stdint.h>

#include "util.h"

/* reason: NULL for a success, else a short token ("timeout", "unreachable",
 * "response_too_large", "transport_error", "http_5xx"). at_ms: wall clock. */
void uphealth_record(const char *upstream, const char *reason, int64_t at_ms);

/* {"configured":true,"last_success":"<RFC 3339>"|null,"last_failure":...|null,
 *  "last_failure_reason":"..."|null} */
void uphealth_write_json(buf *out, const char *upstream, int configured);

/* cl_upstream_failures_total{upstream,reason} and cl_upstream_successes_total{upstream}
 * (with HELP and TYPE lines), for every upstream seen. */
void uphealth_write_metrics(buf *out);

/* Forgets everything (tests). */
void uphealth_reset(void);

#endif
