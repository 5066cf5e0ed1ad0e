/* test_router_xpjoin.c - the picker's pending joins (src/router/extproc/
 * xp_join.h): an entry found by the request id or by the transfer ids,
 * taken once under either key, replaced by a later prefill of the same
 * key, the oldest evicted past the bound, entries dropped after the ttl;
 * each counted. A random walk against a plain list checks the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp_join.h"

#define CELLS 6

static xp_joined info_of(int prefill)
{
    xp_joined i;
    memset(&i, 0, sizeof i);
    i.u.prefill = prefill;
    i.u.rows = 10 + prefill;
    return i;
}

static void counts_of(int seed, uint16_t *c)
{
    for (int i = 0; i < CELLS; i++)
        c[i] = (uint16_t)(seed * 7 + i);
}

static int put(xp_join *j, const char *rid, const char *eng, const char *req, int seed, double t)
{
    uint16_t c[CELLS];
    counts_of(seed, c);
    xp_joined in = info_of(seed);
    return xp_join_put(j, rid, eng, eng ? strlen(eng) : 0, req, req ? strlen(req) : 0, c, &in, t);
}

/* 1 and the seed's counts, or 0 */
static int take(xp_join *j, const char *rid, const char *eng, const char *req, double t, int *seed,
                int *by)
{
    uint16_t c[CELLS];
    xp_joined out;
    int rc = xp_join_take(j, rid, eng, eng ? strlen(eng) : 0, req, req ? strlen(req) : 0, c, &out,
                          t);
    if (rc == 1) {
        uint16_t want[CELLS];
        *seed = out.u.prefill;
        counts_of(*seed, want);
        assert_memory_equal(c, want, sizeof c);
        assert_int_equal(out.u.rows, 10 + *seed);
        *by = out.by;
    }
    return rc;
}

static void test_keys(void **state)
{
    (void)state;
    xp_join *j = xp_join_new(8, 60, CELLS);
    assert_non_null(j);
    int seed, by;
    assert_int_equal(put(j, "r1", "engA", "cmpl-r1-0", 1, 0), 1);
    assert_int_equal(put(j, "r2", "engA", "cmpl-r2-0", 2, 0), 1);
    assert_int_equal(put(j, NULL, "engB", "cmpl-x-0", 3, 0), 1);   /* no request id */
    assert_int_equal(put(j, NULL, NULL, NULL, 4, 0), 0);            /* no key: not kept */
    assert_int_equal(put(j, "", NULL, NULL, 4, 0), 0);
    /* by the request id */
    assert_int_equal(take(j, "r1", NULL, NULL, 1, &seed, &by), 1);
    assert_int_equal(seed, 1);
    assert_int_equal(by, XP_JOIN_BY_REQUEST_ID);
    /* gone under both keys */
    assert_int_equal(take(j, "r1", "engA", "cmpl-r1-0", 1, &seed, &by), 0);
    /* another request id (Envoy made a new one): the transfer ids */
    assert_int_equal(take(j, "other", "engA", "cmpl-r2-0", 1, &seed, &by), 1);
    assert_int_equal(seed, 2);
    assert_int_equal(by, XP_JOIN_BY_TRANSFER);
    assert_int_equal(take(j, "r2", NULL, NULL, 1, &seed, &by), 0);
    /* the engine is part of the key */
    assert_int_equal(take(j, NULL, "engA", "cmpl-x-0", 1, &seed, &by), 0);
    assert_int_equal(take(j, NULL, "engB", "cmpl-x-0", 1, &seed, &by), 1);
    assert_int_equal(seed, 3);
    /* a retried prefill of the same id replaces the first */
    assert_int_equal(put(j, "r5", "engA", "a", 5, 2), 1);
    assert_int_equal(put(j, "r5", "engA", "b", 6, 2), 1);
    assert_int_equal(take(j, NULL, "engA", "a", 2, &seed, &by), 0);
    assert_int_equal(take(j, "r5", NULL, NULL, 2, &seed, &by), 1);
    assert_int_equal(seed, 6);
    xp_join_stats st;
    xp_join_get_stats(j, &st);
    assert_int_equal(st.stored, 5);
    assert_int_equal(st.by_request_id, 2);
    assert_int_equal(st.by_transfer, 2);
    assert_int_equal(st.replaced, 1);
    assert_int_equal(st.pending, 0);
    xp_join_free(j);
}

static void test_bounds(void **state)
{
    (void)state;
    assert_null(xp_join_new(0, 60, CELLS));
    xp_join *j = xp_join_new(3, 10, CELLS);
    int seed, by;
    char id[16];
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "r%d", i);
        assert_int_equal(put(j, id, "e", id, i, (double)i), 1);
    }
    xp_join_stats st;
    xp_join_get_stats(j, &st);
    assert_int_equal(st.evicted, 2);   /* r0, r1: the oldest */
    assert_int_equal(st.pending, 3);
    assert_int_equal(take(j, "r0", "e", "r0", 5, &seed, &by), 0);
    assert_int_equal(take(j, "r1", NULL, NULL, 5, &seed, &by), 0);
    assert_int_equal(take(j, "r2", NULL, NULL, 5, &seed, &by), 1);
    /* at 13.5: r3 (put at 3) is 10.5 s old, expired; r4 (at 4) is 9.5 */
    assert_int_equal(take(j, "r4", NULL, NULL, 13.5, &seed, &by), 1);
    xp_join_get_stats(j, &st);
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.pending, 0);
    /* expire alone */
    assert_int_equal(put(j, "z", NULL, NULL, 9, 20), 1);
    xp_join_expire(j, 30.5);
    xp_join_get_stats(j, &st);
    assert_int_equal(st.expired, 2);
    assert_int_equal(st.pending, 0);
    xp_join_free(j);
}

/* A random walk: puts, takes and time against a plain model of the
 * entries (key, seed, time), max 16, ttl 5. */
static void test_random_walk(void **state)
{
    (void)state;
    enum { MAX = 16, IDS = 40, SLOTS = 1 << 16 };
    xp_join *j = xp_join_new(MAX, 5, CELLS);
    struct { int live, gen; double at; } m[IDS];
    memset(m, 0, sizeof m);
    /* arrival order: (id, gen); a slot whose gen is not the id's is stale */
    static int ok_id[SLOTS], ok_gen[SLOTS];
    int head = 0, tail = 0, live = 0;
    unsigned r = 12345;
    double now = 0;
    for (int step = 0; step < 20000; step++) {
        r = r * 1103515245u + 12345u;
        int k = (int)((r >> 8) % IDS), op = (int)((r >> 20) % 3), seed, by;
        char id[16], tk[16];
        snprintf(id, sizeof id, "id%d", k);
        snprintf(tk, sizeof tk, "t%d", k);
        now += ((r >> 4) % 100) / 400.0;
#define STALE(i) (!m[ok_id[i]].live || m[ok_id[i]].gen != ok_gen[i])
        while (head < tail && (STALE(head) || now - m[ok_id[head]].at > 5)) {
            if (!STALE(head))
                m[ok_id[head]].live = 0, live--;
            head++;
        }
        if (op < 2) {
            if (m[k].live)
                m[k].live = 0, live--;   /* replaced */
            while (live >= MAX) {        /* the oldest evicted */
                if (!STALE(head))
                    m[ok_id[head]].live = 0, live--;
                head++;
            }
            assert_int_equal(put(j, op ? id : NULL, "e", tk, k, now), 1);
            m[k].live = 1, m[k].gen++, m[k].at = now, live++;
            assert_true(tail < SLOTS);
            ok_id[tail] = k, ok_gen[tail++] = m[k].gen;
        } else {
            int got = take(j, id, "e", tk, now, &seed, &by);
            assert_int_equal(got, m[k].live);
            if (got) {
                assert_int_equal(seed, k);
                m[k].live = 0, live--;
            }
        }
#undef STALE
        xp_join_stats st;
        xp_join_get_stats(j, &st);
        assert_int_equal((int)st.pending, live);
    }
    xp_join_stats st;   /* the walk met every case */
    xp_join_get_stats(j, &st);
    assert_true(st.evicted > 0 && st.expired > 0 && st.replaced > 0);
    assert_true(st.by_request_id > 0 && st.by_transfer > 0);
    xp_join_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_random_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
