/* identity: the identity policy of a tool's upstream request (identity.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "identity.h"

#include <stdio.h>
#include <string.h>

int identity_decide(const identity_args *a, identity *out, char *err, size_t errlen)
{
    const char *proxy = NULL;
    /* field by field: the two text buffers are large and only written when used */
    out->account_id = out->account_type = out->tenant_id = out->business_domain = NULL;
    out->authorization = NULL;
    out->proxy_id[0] = out->authz[0] = '\0';
    /* managed_proxy = <kn_id>: a read of a bound tool's published definition as the
     * network's managed proxy account (get_action_info), which may read only name,
     * description and schemas. Only GETs, on an upstream configured with
     * upstream.<name>.managed_proxy (by default the execution factory only). */
    if (a->proxy_given) {
        const char *kn = a->proxy_kn;
        if (!a->allow_managed_proxy) {
            snprintf(err, errlen,
                     "ctx.http: managed_proxy is not allowed for upstream '%s' "
                     "(upstream.%s.managed_proxy is false)",
                     a->upstream, a->upstream);
            return IDENTITY_REFUSED;
        }
        if (!kn || strcmp(a->method, "GET") || !*kn || strlen(kn) > 200) {
            snprintf(err, errlen, "ctx.http: managed_proxy is only for GETs, with a kn_id");
            return IDENTITY_REFUSED;
        }
        snprintf(out->proxy_id, sizeof out->proxy_id, "kn-proxy-%s", kn);
        proxy = out->proxy_id;
    }
    /* caller_token = true: the caller's own bearer token as Authorization, only for an
     * upstream configured with upstream.<name>.caller_token (by default the execution
     * factory's public face: PTC runs with the caller's own token). */
    if (a->token_given) {
        if (!a->allow_caller_token) {
            snprintf(err, errlen,
                     "ctx.http: caller_token is not allowed for upstream '%s' "
                     "(upstream.%s.caller_token is false)",
                     a->upstream, a->upstream);
            return IDENTITY_REFUSED;
        }
        if (!a->token_is_boolean || proxy) {
            snprintf(err, errlen, "ctx.http: caller_token must be a boolean, without managed_proxy");
            return IDENTITY_REFUSED;
        }
        if (a->token_wanted) {
            if (!a->caller_token || strlen(a->caller_token) > sizeof out->authz - 8)
                return IDENTITY_NO_TOKEN;
            snprintf(out->authz, sizeof out->authz, "Bearer %s", a->caller_token);
            out->authorization = out->authz;
        }
    }
    if (a->who) {
        out->account_id = proxy ? proxy : a->who->account_id;
        out->account_type = proxy ? "app" : a->who->account_type;
        if (a->who->tenant_id[0])
            out->tenant_id = a->who->tenant_id;
        if (a->who->business_domain[0])
            out->business_domain = a->who->business_domain;
    }
    return IDENTITY_OK;
}

void identity_wipe(identity *id)
{
    if (id->authorization) /* the token's bytes, and the NUL after them */
        explicit_bzero(id->authz, strlen(id->authz) + 1);
    id->authorization = NULL;
}
