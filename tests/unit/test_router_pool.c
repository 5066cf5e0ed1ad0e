/* test_router_pool.c - the instance pool (src/router/engine/pool.h) and
 * the decision's eligibility mask (state_route): an ejected prefill is
 * skipped on the ring with the others keeping their prefixes, an ejected
 * decode worker is never chosen, ejections run out, and with nothing
 * ejected everything is as before (no mask at all). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "state.h"

static const char *const pre[] = {"http://p0:1", "http://p1:1", "http://p2:1", "http://p3:1"};
static const char *const dec[] = {"w0", "w1", "w2"};

static void key_of(int i, char *k, size_t n)
{
    snprintf(k, n, "prompt %d: the system prompt of tenant %d", i, i % 37);
}

static void test_ring_skips_ejected(void **state)
{
    (void)state;
    pool p;
    char err[256];
    assert_int_equal(pool_init(&p, pre, 4, dec, 3, err, sizeof err), 0);
    int64_t zero[4] = {0};
    int before[400];
    for (int i = 0; i < 400; i++) {
        char k[96];
        key_of(i, k, sizeof k);
        before[i] = pring_pick(&p.ring, k, strlen(k), zero);
        /* all eligible: the masked pick is the plain one */
        uint8_t all[4] = {1, 1, 1, 1};
        assert_int_equal(pring_pick_among(&p.ring, k, strlen(k), zero, all), before[i]);
    }
    uint8_t ok[4] = {1, 0, 1, 1};   /* p1 out */
    int moved = 0;
    for (int i = 0; i < 400; i++) {
        char k[96];
        key_of(i, k, sizeof k);
        int got = pring_pick_among(&p.ring, k, strlen(k), zero, ok);
        assert_int_not_equal(got, 1);
        if (before[i] != 1)
            assert_int_equal(got, before[i]);   /* the others keep their prefixes */
        else
            moved++;
    }
    assert_true(moved > 40);   /* p1 owned about a quarter */
    uint8_t none[4] = {0};
    assert_int_equal(pring_pick_among(&p.ring, "x", 1, zero, none), -1);
    assert_int_equal(pring_pick_among(&p.ring, "", 0, zero, ok), 0);   /* no key: least loaded */
    pool_free(&p);
}

static void test_prefill_acquire(void **state)
{
    (void)state;
    pool p;
    char err[256];
    assert_int_equal(pool_init(&p, pre, 4, dec, 3, err, sizeof err), 0);
    char k[96];
    key_of(5, k, sizeof k);
    int first = pool_prefill_acquire(&p, k, strlen(k), 100.0, -1);
    assert_true(first >= 0 && first < 4);
    assert_int_equal(atomic_load(&p.prefill[first].load), 1);
    pool_prefill_release(&p, first);
    assert_int_equal(atomic_load(&p.prefill[first].load), 0);
    pool_eject(&p, POOL_PREFILL, first, 110.0);
    assert_int_equal(atomic_load(&p.n_ejected), 1);
    int second = pool_prefill_acquire(&p, k, strlen(k), 105.0, -1);
    assert_true(second >= 0 && second != first);
    pool_prefill_release(&p, second);
    /* the ejection runs out at 110: the prompt goes home, the count clears */
    assert_int_equal(pool_prefill_acquire(&p, k, strlen(k), 110.0, -1), first);
    pool_prefill_release(&p, first);
    assert_int_equal(atomic_load(&p.n_ejected), 0);
    /* a retry: the failed instance is left out, the ring's next one takes it */
    int other = pool_prefill_acquire(&p, k, strlen(k), 150.0, first);
    assert_int_not_equal(other, first);
    assert_int_equal(other, second);   /* the same next point as an ejection gives */
    pool_prefill_release(&p, other);
    /* every one ejected: all of them again (panic), counted */
    for (int i = 0; i < 4; i++)
        pool_eject(&p, POOL_PREFILL, i, 200.0);
    assert_int_equal(pool_prefill_acquire(&p, k, strlen(k), 150.0, -1), first);
    pool_prefill_release(&p, first);
    assert_int_equal(atomic_load(&p.panics[POOL_PREFILL]), 1);
    for (int i = 0; i < 4; i++)
        pool_restore(&p, POOL_PREFILL, i);
    assert_int_equal(atomic_load(&p.n_ejected), 0);
    assert_int_equal(pool_prefill_acquire(&p, k, strlen(k), 150.0, -1), first);
    pool_free(&p);
    /* bad sizes */
    assert_int_equal(pool_init(&p, pre, 0, dec, 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "prefill"));
}

static void test_decode_mask(void **state)
{
    (void)state;
    pool p;
    char err[256];
    assert_int_equal(pool_init(&p, pre, 1, dec, 3, err, sizeof err), 0);
    uint8_t ok[3];
    assert_null(pool_decode_eligible(&p, 1.0, -1, ok));   /* nothing out: no mask */
    pool_eject(&p, POOL_DECODE, 2, 5.0);
    const uint8_t *m = pool_decode_eligible(&p, 1.0, -1, ok);
    assert_non_null(m);
    assert_int_equal(m[0], 1);
    assert_int_equal(m[1], 1);
    assert_int_equal(m[2], 0);
    assert_int_equal(pool_ejected(&p, POOL_DECODE, 2, 4.9), 1);
    assert_int_equal(pool_ejected(&p, POOL_PREFILL, 0, 4.9), 0);
    assert_null(pool_decode_eligible(&p, 5.0, -1, ok));   /* ran out */
    assert_int_equal(atomic_load(&p.n_ejected), 0);
    assert_int_equal(p.decode[2].ejections, 1);
    /* a retry leaves out the worker that failed */
    m = pool_decode_eligible(&p, 5.0, 1, ok);
    assert_non_null(m);
    assert_int_equal(m[0] + m[1] + m[2], 2);
    assert_int_equal(m[1], 0);
    /* all ejected but the one that failed: panic among the others */
    pool_eject(&p, POOL_DECODE, 0, 9.0);
    pool_eject(&p, POOL_DECODE, 2, 9.0);
    m = pool_decode_eligible(&p, 6.0, 1, ok);
    assert_non_null(m);
    assert_int_equal(m[0], 1);
    assert_int_equal(m[1], 0);
    assert_int_equal(m[2], 1);
    assert_int_equal(atomic_load(&p.panics[POOL_DECODE]), 1);
    pool_free(&p);
}

/* state_route over a mask: the excluded worker is never chosen, however
 * similar or idle; with none eligible, 503 and nothing counted. */
static void test_route_mask(void **state)
{
    (void)state;
    char err[256];
    const char *workers[] = {"w0", "w1", "w2"};
    rstate *st = state_new(3, workers, 0.1, 8, 0, err, sizeof err);
    assert_non_null(st);
    mref_t model = {.dim = 4, .gen = 1};
    state_model_changed(st, &model);
    double sim[3] = {0.9, 0.5, 0.1};
    uint8_t ok[3] = {0, 1, 1};
    route_out o;
    rb_err e;
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "m%d", i);
        route_in in = {id, &model, i % 2 ? sim : NULL, NULL, -1, 0, 0, 0, ok, -1, 0, 0, 0, NULL, 0, NULL, NULL};
        assert_int_equal(state_route(st, &in, &o, &e), 0);
        assert_int_not_equal(o.d.worker, 0);
        for (int c = 0; c < o.d.n_cand; c++)
            assert_int_not_equal(o.d.cand[c], 0);
    }
    route_in in = {"m-last", &model, sim, NULL, -1, 0, 0, 0, ok, -1, 0, 0, 0, NULL, 0, NULL, NULL};
    assert_int_equal(state_route(st, &in, &o, &e), 0);
    assert_int_equal(o.d.worker, 1);   /* the most similar eligible, min-two with w2 */
    assert_int_equal(st->inflight[0], 0);   /* 21 routes, none on w0 */
    /* explain says why: w0 ejected */
    json_t *j = state_explain_json(st, "m-last");
    assert_non_null(j);
    json_t *in0 = json_array_get(json_object_get(j, "ineligible"), 0);
    assert_string_equal(json_string_value(json_object_get(in0, "worker")), "w0");
    assert_string_equal(json_string_value(json_object_get(in0, "why")), "ejected");
    assert_int_equal(json_array_size(json_object_get(j, "ineligible")), 1);
    json_decref(j);
    /* a retry: the worker that failed it is named as such */
    uint8_t ok2[3] = {1, 0, 1};
    route_in rin = {"m-retry", &model, sim, NULL, -1, 0, 0, 0, ok2, 1, 0, 0, 0, NULL, 0, NULL, NULL};
    assert_int_equal(state_route(st, &rin, &o, &e), 0);
    j = state_explain_json(st, "m-retry");
    in0 = json_array_get(json_object_get(j, "ineligible"), 0);
    assert_string_equal(json_string_value(json_object_get(in0, "why")), "failed this request");
    assert_int_equal(json_integer_value(json_object_get(in0, "worker_index")), 1);
    json_decref(j);
    /* no mask: no key */
    route_in all = {"m-all", &model, sim, NULL, -1, 0, 0, 0, NULL, -1, 0, 0, 0, NULL, 0, NULL, NULL};
    assert_int_equal(state_route(st, &all, &o, &e), 0);
    j = state_explain_json(st, "m-all");
    assert_null(json_object_get(j, "ineligible"));
    json_decref(j);
    uint8_t none[3] = {0, 0, 0};
    route_in in2 = {"m-none", &model, sim, NULL, -1, 0, 0, 0, none, -1, 0, 0, 0, NULL, 0, NULL, NULL};
    assert_int_equal(state_route(st, &in2, &o, &e), -1);
    assert_int_equal(e.status, 503);
    assert_non_null(strstr(e.error, "no decode worker is eligible"));
    assert_int_equal(st->inflight[0] + st->inflight[1] + st->inflight[2], 23);
    state_free(st);
}

/* Passive health: eject_after failures in a row eject; a success in
 * between forgets them; the ejection doubles while the instance keeps
 * failing (one failure after an ejection ran out is enough), and a
 * success (a probe) puts it back at once and forgets the streak. */
static void test_report_policy(void **state)
{
    (void)state;
    pool p;
    char err[256];
    assert_int_equal(pool_init(&p, pre, 2, dec, 3, err, sizeof err), 0);
    pool_set_policy(&p, 3, 5.0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 10.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 10.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 1, 10.0), 0);   /* forgets */
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 10.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 10.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 10.0), 1);   /* third in a row */
    pool_health h;
    pool_get_health(&p, POOL_DECODE, 1, 11.0, &h);
    assert_int_equal(h.ejected, 1);
    assert_true(h.ejected_for > 3.99 && h.ejected_for < 4.01);   /* 5 s from 10 */
    assert_int_equal(h.failures, 5);
    /* out at 15; the next failure ejects again, for twice as long */
    assert_int_equal(pool_ejected(&p, POOL_DECODE, 1, 15.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 15.0), 1);
    pool_get_health(&p, POOL_DECODE, 1, 15.0, &h);
    assert_true(h.ejected_for > 9.99 && h.ejected_for < 10.01);
    assert_int_equal(h.ejections, 2);
    /* a probe's success: back at once, the streak forgotten */
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 1, 16.0), 0);
    assert_int_equal(pool_ejected(&p, POOL_DECODE, 1, 16.0), 0);
    assert_int_equal(atomic_load(&p.n_ejected), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 17.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, 17.0), 1);
    pool_get_health(&p, POOL_DECODE, 1, 17.0, &h);
    assert_true(h.ejected_for > 4.99 && h.ejected_for < 5.01);
    /* the growth stops at 64 x */
    double now = 17.0;
    for (int i = 0; i < 12; i++) {
        now += 400;
        assert_int_equal(pool_report(&p, POOL_DECODE, 1, 0, now), 1);
    }
    pool_get_health(&p, POOL_DECODE, 1, now, &h);
    assert_true(h.ejected_for > 319.99 && h.ejected_for < 320.01);
    /* eject_after 0: never */
    pool_set_policy(&p, 0, 5.0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(pool_report(&p, POOL_PREFILL, 0, 0, 1.0), 0);
    assert_int_equal(pool_ejected(&p, POOL_PREFILL, 0, 1.0), 0);
    pool_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_skips_ejected),
        cmocka_unit_test(test_prefill_acquire),
        cmocka_unit_test(test_decode_mask),
        cmocka_unit_test(test_route_mask),
        cmocka_unit_test(test_report_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
