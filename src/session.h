/* session: Mcp-Session-Id minting and verification (SPEC §5).
 *
 * An id is "<32 hex random>.<32 hex tag>" where tag = HMAC-SHA256(secret,
 * random "|" principal key) truncated to 16 bytes. Any replica with the same
 * secret verifies an id without shared state, and an id minted for one principal
 * fails verification for every other principal. Ended sessions (DELETE) are kept
 * in a set with a TTL (memory today; the shared store when several instances run).
 *
 * Ownership: the session_ctx copies the secret. */
#ifndef CL_SESSION_H
#define CL_SESSION_H

#include <stddef.h>

#include "principal.h"

#define SESSION_ID_LEN 65 /* 32 + 1 + 32 chars */

typedef struct session_ctx session_ctx;

typedef enum { SESSION_OK, SESSION_INVALID, SESSION_ENDED } session_status;

/* secret may be NULL or empty: a random secret is generated (single instance). */
session_ctx *session_new(const char *secret, long ended_ttl_s);
void session_free(session_ctx *s);

void session_mint(session_ctx *s, const principal *who, char out[SESSION_ID_LEN + 1]);
session_status session_verify(session_ctx *s, const principal *who, const char *id);
/* Marks a verified id ended. */
void session_end(session_ctx *s, const char *id);
size_t session_ended_count(const session_ctx *s);

#endif
