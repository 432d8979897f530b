/* session: Mcp-Session-Id minting and verification.
 *
 * An id is "<32 hex random>.<8 hex expiry>.<32 hex tag>" where expiry is the Unix
 * second the id stops being valid (minting time + max_age_s) and tag =
 * HMAC-SHA256(secret, random "|" expiry "|" principal key) truncated to 16 bytes.
 * Any replica with the same secret verifies an id without shared state, an id
 * minted for one principal fails verification for every other principal, and no id
 * outlives its expiry, whatever the store remembers. Ended sessions (DELETE) are
 * kept in the state store under "session:ended:<random part>" until the id's
 * expiry, so with
 * a shared store (Redis) a session ended on one replica is refused on
 * every other. Checking and ending are therefore asynchronous, and a store failure
 * is reported (SESSION_UNAVAILABLE: answer a retryable 503), never taken as "not
 * ended".
 *
 * Ownership: the session_ctx copies the secret and borrows the store, which must
 * outlive it. A session_wait handle is valid until its callback has started or
 * session_cancel was called. Callbacks always run from the event loop, never
 * inside session_verify / session_end. */
#ifndef CL_SESSION_H
#define CL_SESSION_H

#include <stddef.h>

#include "principal.h"
#include "store.h"

#define SESSION_ID_LEN 74 /* 32 + 1 + 8 + 1 + 32 chars */

typedef struct session_ctx session_ctx;

typedef enum {
    SESSION_OK,
    SESSION_INVALID,     /* malformed, or not minted for this principal with our secret */
    SESSION_ENDED,       /* verify: ended; session_end: now recorded as ended */
    SESSION_UNAVAILABLE, /* the state store failed: retry later */
    SESSION_EXPIRED      /* well-formed and ours, but past the expiry it carries */
} session_status;

typedef struct session_wait session_wait;
typedef void (*session_cb)(session_status st, void *arg);

/* secret may be NULL or empty: a random secret is generated (single instance).
 * max_age_s: lifetime of a minted id (<= 0: one day). */
session_ctx *session_new(const char *secret, long max_age_s, store *st);
void session_free(session_ctx *s);

void session_mint(session_ctx *s, const principal *who, char out[SESSION_ID_LEN + 1]);
/* The same with flags carried in the id (signed with it, so a client cannot set
 * them): what the client declared at initialize that later requests need. */
#define SESSION_FLAG_ELICITATION 1u /* the client can answer elicitation/create */
void session_mint_flags(session_ctx *s, const principal *who, unsigned flags,
                        char out[SESSION_ID_LEN + 1]);
/* The flags of an id (check it first: an unchecked id's flags mean nothing). */
unsigned session_id_flags(const char *id);
/* The HMAC and expiry check alone: SESSION_OK, SESSION_INVALID or SESSION_EXPIRED. */
session_status session_check_id(session_ctx *s, const principal *who, const char *id);
/* Returns SESSION_INVALID or SESSION_EXPIRED at once (no callback) when the check fails;
 * otherwise 0 with *wait set, and cb later gets SESSION_OK, SESSION_ENDED or
 * SESSION_UNAVAILABLE. */
int session_verify(session_ctx *s, const principal *who, const char *id, session_cb cb, void *arg,
                   session_wait **wait);
/* Records a verified id as ended: cb gets SESSION_ENDED once the store has it, or
 * SESSION_UNAVAILABLE (then nothing was recorded: the client should retry). */
session_wait *session_end(session_ctx *s, const char *id, session_cb cb, void *arg);
void session_cancel(session_wait *w);

/* HMAC-SHA256 of msg with the session secret (the same key every replica sharing
 * session_secret has), 64 hex chars: for other signed tokens of the surface
 * (confirmation states). */
void session_sign(session_ctx *s, const char *msg, size_t len, char out[65]);

#endif
