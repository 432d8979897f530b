/* test_session: session ids are bound to the principal and the server's secret, and
 * a verified id is remembered without changing any answer: another principal, a
 * changed character, another secret or a past expiry are refused every time. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "session.h"
#include "util.h"

static principal who(const char *key)
{
    principal p;
    memset(&p, 0, sizeof p);
    str_copy(p.account_id, sizeof p.account_id, key);
    str_copy(p.key, sizeof p.key, key);
    return p;
}

static const char KEY_A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char KEY_B[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static void test_bound_and_repeatable(void)
{
    session_ctx *s = session_new("secret-one", 3600, NULL);
    session_ctx *other = session_new("secret-two", 3600, NULL);
    principal a = who(KEY_A), b = who(KEY_B);
    char id[SESSION_ID_LEN + 1];
    session_mint(s, &a, id);
    for (int round = 0; round < 3; round++) {
        CHECK(session_check_id(s, &a, id) == SESSION_OK);
        CHECK(session_check_id(s, &b, id) == SESSION_INVALID);
        CHECK(session_check_id(other, &a, id) == SESSION_INVALID);
    }
    /* every character counts, after the id was verified and before */
    static const int at[] = {0, 1, 31, 33, 40, 42, 73};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        char bad[SESSION_ID_LEN + 1];
        memcpy(bad, id, sizeof bad);
        bad[at[i]] = bad[at[i]] == '0' ? '1' : '0';
        CHECK(session_check_id(s, &a, bad) == SESSION_INVALID);
        CHECK(session_check_id(s, &a, id) == SESSION_OK);
        CHECK(session_check_id(s, &a, bad) == SESSION_INVALID);
    }
    session_free(s);
    session_free(other);
}

/* Ids whose first random bytes are equal share a remembered slot: each still
 * answers for its own principal only. */
static void test_same_slot(void)
{
    session_ctx *s = session_new("secret-one", 3600, NULL);
    principal a = who(KEY_A), b = who(KEY_B);
    char ida[SESSION_ID_LEN + 1], idb[SESSION_ID_LEN + 1];
    session_mint(s, &a, ida);
    int tries = 0;
    do
        session_mint(s, &b, idb);
    while (memcmp(ida, idb, 2) != 0 && ++tries < 100000);
    CHECK(memcmp(ida, idb, 2) == 0);
    for (int round = 0; round < 3; round++) {
        CHECK(session_check_id(s, &a, ida) == SESSION_OK);
        CHECK(session_check_id(s, &b, ida) == SESSION_INVALID);
        CHECK(session_check_id(s, &b, idb) == SESSION_OK);
        CHECK(session_check_id(s, &a, idb) == SESSION_INVALID);
    }
    session_free(s);
}

/* An id with a valid tag and a past expiry: expired on every check. */
static void test_expired(void)
{
    session_ctx *s = session_new("secret-one", 3600, NULL);
    principal a = who(KEY_A);
    unsigned char key[32], md[32];
    unsigned int klen = 0, mdlen = 0;
    EVP_Digest("secret-one", strlen("secret-one"), key, &klen, EVP_sha256(), NULL);
    char msg[256], id[SESSION_ID_LEN + 1 + 32], tag[65];
    snprintf(msg, sizeof msg, "0123456789abcdef0123456789abcdef|%08x|%s", 1000u, KEY_A);
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), md, &mdlen);
    hex_encode(md, 16, tag);
    snprintf(id, sizeof id, "0123456789abcdef0123456789abcdef.%08x.%s", 1000u, tag);
    for (int round = 0; round < 3; round++)
        CHECK(session_check_id(s, &a, id) == SESSION_EXPIRED);
    session_free(s);
}

int main(void)
{
    test_bound_and_repeatable();
    test_same_slot();
    test_expired();
    return CHECK_DONE();
}
