/* principal: the authenticated caller, derived by auth from token introspection.
 * A plain value type (fixed-size strings) so that it can be copied freely. */
#ifndef CL_PRINCIPAL_H
#define CL_PRINCIPAL_H

typedef struct principal {
    char account_id[257];      /* x-account-id */
    char account_type[16];     /* "user" | "app" | "anonymous" (x-account-type) */
    char auth_method[16];      /* "oauth" | "api_key" */
    char client_id[257];       /* OAuth client id, or AppKey key_id */
    char subject_name[257];    /* display name when known */
    char tenant_id[129];       /* x-tenant-id, may be empty */
    char business_domain[129]; /* x-business-domain, may be empty */
    char key[65];              /* sha256 hex of account_type|account_id|tenant: stable
                                  identity key for sessions and scoping; never a token */
} principal;

#endif
