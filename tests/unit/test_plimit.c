/* Unit tests of plimit.c: the calls in flight per principal. */
#include "check.h"
#include "plimit.h"

static void test_plimit(void)
{
    plimit *p = plimit_new(2);
    CHECK(plimit_enter(p, "a") && plimit_enter(p, "a"));
    CHECK(!plimit_enter(p, "a"));
    CHECK(plimit_count(p, "a") == 2);
    CHECK(plimit_enter(p, "b"));
    plimit_leave(p, "a");
    CHECK(plimit_enter(p, "a"));
    plimit_leave(p, "a");
    plimit_leave(p, "a");
    plimit_leave(p, "b");
    CHECK(plimit_count(p, "a") == 0 && plimit_count(p, "b") == 0);
    plimit_leave(p, "unknown");
    plimit_free(p);
    plimit *unl = plimit_new(0);
    for (int i = 0; i < 100; i++)
        CHECK(plimit_enter(unl, "x"));
    plimit_free(unl);
}

int main(void)
{
    test_plimit();
    return CHECK_DONE();
}
