/* test_router_regress.c - replay of the router harnesses' corpora (the
 * /v1/route and /v1/kv-events body parsers) under the ordinary build, as
 * test_regress.c does for the core harnesses: every seed and every input
 * that once crashed, kept in tests/fuzz/corpus/<harness>/, is run through
 * the harness's own checks on every `make test` and `make asan`. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "util_replay.h"

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_kv_events.c"
#include "../fuzz/fuzz_route_body.c"

static void test_replay_route_body(void **state)
{
    (void)state;
    corpus_replay("route_body", fuzz_route_body_one);
}

static void test_replay_kv_events(void **state)
{
    (void)state;
    corpus_replay("kv_events", fuzz_kv_events_one);
}

/* The seeds are accepted (they are meant to reach deep, not to fail at
 * the first byte): a valid dense and sparse body of L=2, E=4 with the
 * same counts parse to the same cells. */
static void test_route_seed_forms_agree(void **state)
{
    (void)state;
    static const char dense[] = "{\"counts\": \"AwAAAAEAAAAAAAIAAgAAAA==\"}";
    static const char sparse[] = "{\"sparse\": [[0, 0, 3], [0, 2, 1], [1, 1, 2], [1, 2, 2]]}";
    route_body a, b;
    rb_err e;
    assert_int_equal(route_body_parse(dense, strlen(dense), 2, 4, &a, &e), 0);
    assert_int_equal(route_body_parse(sparse, strlen(sparse), 2, 4, &b, &e), 0);
    assert_memory_equal(a.counts, b.counts, 8 * sizeof *a.counts);
    assert_int_equal(a.counts[0], 3);
    route_body_free(&a);
    route_body_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_route_body),
        cmocka_unit_test(test_replay_kv_events),
        cmocka_unit_test(test_route_seed_forms_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
