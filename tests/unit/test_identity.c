/* Unit tests of identity.c: the identity policy of a tool's upstream request
 * (managed proxy account, the caller's own token, the identity headers). */
#include <string.h>

#include "check.h"
#include "identity.h"

static principal caller(void)
{
    principal p;
    memset(&p, 0, sizeof p);
    strcpy(p.account_id, "u1");
    strcpy(p.account_type, "user");
    strcpy(p.tenant_id, "t1");
    return p;
}

static identity_args base(const principal *who)
{
    identity_args a = {"factory", 1, 1, "GET", 0, NULL, 0, 0, 0, who, "tok-123"};
    return a;
}

/* Without managed_proxy or caller_token: the caller's identity, no Authorization;
 * empty tenant and business domain are not sent, and no caller sends none. */
static void test_caller(void)
{
    principal who = caller();
    identity id;
    char err[300] = "";
    identity_args a = base(&who);
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_OK);
    CHECK_STR(id.account_id, "u1");
    CHECK_STR(id.account_type, "user");
    CHECK_STR(id.tenant_id, "t1");
    CHECK(id.business_domain == NULL && id.authorization == NULL);
    a.who = NULL;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_OK);
    CHECK(id.account_id == NULL && id.account_type == NULL && id.tenant_id == NULL);
}

/* managed_proxy: GETs only, with a kn_id of 1 to 200 bytes, on an upstream that
 * allows it; the request then acts as the network's proxy app account. */
static void test_managed_proxy(void)
{
    principal who = caller();
    identity id;
    char err[300] = "";
    identity_args a = base(&who);
    a.proxy_given = 1;
    a.proxy_kn = "kn_a";
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_OK);
    CHECK_STR(id.account_id, "kn-proxy-kn_a");
    CHECK_STR(id.account_type, "app");
    CHECK_STR(id.tenant_id, "t1");
    a.method = "POST";
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    CHECK_STR(err, "ctx.http: managed_proxy is only for GETs, with a kn_id");
    a.method = "GET";
    a.proxy_kn = NULL; /* not a string */
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    a.proxy_kn = "";
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    char long_kn[202];
    memset(long_kn, 'k', 201);
    long_kn[201] = '\0';
    a.proxy_kn = long_kn;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    long_kn[200] = '\0';
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_OK);
    a.proxy_kn = "kn_a";
    a.allow_managed_proxy = 0;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    CHECK_STR(err, "ctx.http: managed_proxy is not allowed for upstream 'factory' "
                   "(upstream.factory.managed_proxy is false)");
}

/* caller_token: a boolean, not with managed_proxy, on an upstream that allows it;
 * true forwards the caller's token, or says the request carries none. */
static void test_caller_token(void)
{
    principal who = caller();
    identity id;
    char err[300] = "";
    identity_args a = base(&who);
    a.token_given = a.token_is_boolean = a.token_wanted = 1;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_OK);
    CHECK_STR(id.authorization, "Bearer tok-123");
    identity_wipe(&id);
    CHECK(id.authorization == NULL && id.authz[0] == '\0');
    a.token_wanted = 0;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_OK && !id.authorization);
    a.token_wanted = 1;
    a.caller_token = NULL;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_NO_TOKEN);
    a.caller_token = "tok-123";
    a.token_is_boolean = 0;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    CHECK_STR(err, "ctx.http: caller_token must be a boolean, without managed_proxy");
    a.token_is_boolean = 1;
    a.proxy_given = 1;
    a.proxy_kn = "kn_a";
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    a.proxy_given = 0;
    a.allow_caller_token = 0;
    CHECK(identity_decide(&a, &id, err, sizeof err) == IDENTITY_REFUSED);
    CHECK_STR(err, "ctx.http: caller_token is not allowed for upstream 'factory' "
                   "(upstream.factory.caller_token is false)");
}

int main(void)
{
    test_caller();
    test_managed_proxy();
    test_caller_token();
    return CHECK_DONE();
}
