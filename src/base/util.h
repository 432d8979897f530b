/* util: aborting allocators, a growable byte buffer, time and random helpers.
 *
 * Ownership: a buf owns its data; buf_free releases it. buf_steal hands the data
 * (NUL-terminated) to the caller, who frees it with free(). */
#ifndef CL_UTIL_H
#define CL_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Priorities of the worker's event loop (event_base_priority_init with
 * CL_EV_PRIORITIES): every event runs at the default, CL_EV_PRIO_NORMAL; an event at
 * CL_EV_PRIO_IDLE runs only on a pass where no other event is ready. */
#define CL_EV_PRIORITIES 3
#define CL_EV_PRIO_NORMAL 1
#define CL_EV_PRIO_IDLE 2

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

typedef struct buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} buf;

#define BUF_INIT                                                                                   \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* Freed blocks of 2 to 16 kB are kept for the next buffer that grows to that size
 * (util.c), except under AddressSanitizer: there every block goes back to malloc, so
 * a use after free of a buffer is seen. BUF_REUSE says which. */
#if defined(__SANITIZE_ADDRESS__)
#define BUF_REUSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUF_REUSE 0
#endif
#endif
#ifndef BUF_REUSE
#define BUF_REUSE 1
#endif

void buf_reserve(buf *b, size_t extra);
void buf_append(buf *b, const void *data, size_t len);
void buf_puts(buf *b, const char *s);
void buf_putc(buf *b, char c);
void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_reset(buf *b); /* len = 0, keeps memory */
void buf_free(buf *b);
char *buf_steal(buf *b, size_t *len); /* never NULL; buf is left empty */

/* Reads a whole file into *text (NUL-terminated, caller frees) and its length into
 * *len. Returns -1 when it cannot be read or is longer than max bytes. */
int read_file_max(const char *path, size_t max, char **text, size_t *len);

/* Monotonic clock in milliseconds; wall clock in milliseconds since the epoch. */
int64_t now_mono_ms(void);
int64_t now_wall_ms(void);
/* Wall-clock milliseconds as RFC 3339 in UTC with milliseconds:
 * "2026-12-03T13:10:05.123Z" (24 characters and a NUL). */
void time_rfc3339(int64_t wall_ms, char out[25]);
/* url with the password of its user-info replaced by "***"
 * ("redis://app:pw@h:6379/0" -> "redis://app:***@h:6379/0"); other text as it is. */
void url_redact(const char *url, char *out, size_t outlen);

/* Cryptographically strong random bytes (OpenSSL RAND_bytes); aborts on failure. */
void random_bytes(void *out, size_t n);
/* Unpredictable-enough bytes for identifiers that are not secrets (trace and span
 * ids, request ids): xoshiro256** seeded from random_bytes, reseeded in a forked
 * child. Roughly 50 times cheaper than random_bytes per call. */
void id_random_bytes(void *out, size_t n);
/* Writes 2*n lowercase hex digits and a NUL into out (size >= 2*n+1). */
void hex_encode(const unsigned char *in, size_t n, char *out);

/* SHA-256 of data as 64 hex chars + NUL. */
void sha256_hex(const void *data, size_t len, char out[65]);

/* Copies src into dst (cap bytes, cap > 0) as snprintf(dst, cap, "%s", src) does:
 * cut to cap - 1 bytes, always terminated. */
void str_copy(char *dst, size_t cap, const char *src);

/* Case-insensitive ASCII compare helpers. */
int str_ieq(const char *a, const char *b);
int str_istartswith(const char *s, const char *prefix);

#endif
