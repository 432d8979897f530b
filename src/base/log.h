/* log: every log line of the process, one JSON object per line on stderr.
 *
 *   log_line *l = log_begin(LOG_WARN, "operation finalize failed");
 *   log_str(l, "request_id", id);
 *   log_int(l, "trace_status", status);
 *   log_end(l);
 *
 * A line starts {"ts":<wall ms>,"worker":<k>,"level":"…","role":"…","msg":"…"
 * ("worker" only in a worker of several, "role" only where one is set, e.g. the
 * master), then the members in the order they are added. Every key and string value
 * is escaped, so a quote, a backslash or a control character cannot break the line. log_end writes
 * the whole line with one write(2), so lines of different processes do not interleave.
 *
 * The process is single-threaded: log_begin hands out one reused line; a line begun
 * while another is open gets its own allocation. Ownership: the line belongs to
 * log.c; every log_begin is closed by exactly one log_end. */
#ifndef CL_LOG_H
#define CL_LOG_H

#include <stddef.h>

#include "json.h"

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

typedef struct log_line log_line;

/* Process-wide, set once at start (and again in a forked worker): the worker index
 * (-1: none, the default) and the role (a static string, or NULL: none). */
void log_set_worker(int index);
void log_set_role(const char *role);
/* Where lines go (default 2, stderr); for tests. */
void log_set_fd(int fd);

/* "debug", "info", "warn", "error" -> 0 and *out; anything else -> -1. */
int log_level_parse(const char *name, log_level *out);

log_line *log_begin(log_level level, const char *msg);
/* A string member; s == NULL adds nothing. */
void log_str(log_line *l, const char *key, const char *s);
/* A string member of the first n bytes of s (or fewer, up to its NUL). */
void log_strn(log_line *l, const char *key, const char *s, size_t n);
void log_int(log_line *l, const char *key, long long v);
void log_bool(log_line *l, const char *key, int v);
/* A member holding a copy of the JSON value v (NULL: null). */
void log_value(log_line *l, const char *key, const json_value *v);
/* Every member of the JSON object obj, in order (nothing if obj is not an object). */
void log_members(log_line *l, const json_value *obj);
/* Closes the line, writes it and gives it back. */
void log_end(log_line *l);

/* A fatal error of start-up or of the master, as one error line
 * {"level":"error","msg":"fatal","error":"<printf text>"}. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
