/* identity: the identity policy of a tool's upstream request (ctx.http): which account
 * the request acts as (the caller, or a network's managed proxy account) and whether
 * it carries the caller's own bearer token. Pure: no Lua, no I/O; call.c reads the
 * arguments and adds the headers identity_decide settles.
 *
 * Ownership: every pointer in identity_args is the caller's; identity holds its own
 * copies of the texts it builds (the proxy account id, the Authorization value) and
 * borrows the rest from the arguments. identity_wipe clears the token copy. */
#ifndef CL_IDENTITY_H
#define CL_IDENTITY_H

#include <stddef.h>

#include "principal.h"

typedef struct identity_args {
    const char *upstream;     /* the upstream's name (for error texts) */
    int allow_managed_proxy;  /* upstream.<name>.managed_proxy */
    int allow_caller_token;   /* upstream.<name>.caller_token */
    const char *method;       /* the request's method */
    int proxy_given;          /* managed_proxy = ... was given */
    const char *proxy_kn;     /* its kn_id as text (NULL: not a string or number) */
    int token_given;          /* caller_token = ... was given */
    int token_is_boolean;     /* ... as a boolean */
    int token_wanted;         /* ... true */
    const principal *who;     /* the caller (NULL: none authenticated) */
    const char *caller_token; /* the caller's bearer token (NULL: none) */
} identity_args;

typedef struct identity {
    /* the identity headers to send; NULL: not sent */
    const char *account_id, *account_type, *tenant_id, *business_domain;
    const char *authorization; /* "Bearer <the caller's token>", or NULL */
    char proxy_id[300];        /* "kn-proxy-<kn_id>" when acting as the proxy account */
    char authz[4200];
} identity;

enum {
    IDENTITY_OK = 0,
    IDENTITY_REFUSED = -1, /* a tool's mistake: err says which (ctx.http raises it) */
    IDENTITY_NO_TOKEN = 1, /* caller_token wanted but the request carries none */
};

/* Decides the identity of one request: IDENTITY_OK with *out filled, or one of the
 * other codes (err set for IDENTITY_REFUSED). */
int identity_decide(const identity_args *a, identity *out, char *err, size_t errlen);

/* Clears the copy of the caller's token in id. */
void identity_wipe(identity *id);

#endif
