/* test_router_views.c - the routing state's JSON views (state_json.c),
 * which copy what they show out under the lock and build their JSON
 * outside it: byte for byte the text the views gave when they were built
 * under the lock (recorded from that code on a fixed history of routes,
 * finishes, a clear, an expiry and reported loads), and the decisions of
 * a full 4096-record ring against a walk of the ring itself.
 * VIEWS_RECORD=1 prints the texts instead of checking them (how they were
 * recorded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

/* as the HTTP glue sends them (http.c) */
static char *dump(json_t *j)
{
    assert_non_null(j);
    char *t = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(j);
    assert_non_null(t);
    return t;
}

static void expect_text(json_t *j, const char *want)
{
    char *got = dump(j);
    assert_string_equal(got, want);
    free(got);
}

static void route(rstate *st, const mref_t *m, const char *id, const double *sim, int prefill,
                  int hit, const uint8_t *eligible)
{
    float *sig = malloc(m->dim * sizeof *sig);   /* the window may keep it */
    assert_non_null(sig);
    for (size_t i = 0; i < m->dim; i++)
        sig[i] = (float)hit + (float)i;
    route_in in = {id, m, sim, sig, prefill, hit, hit / 2, hit + 1, eligible, -1, 0, 0, 0, NULL, 0, NULL, NULL};
    route_out o;
    rb_err e;
    assert_int_equal(state_route(st, &in, &o, &e), 0);
    free(in.sig);
}

static void finish(rstate *st, const char *id)
{
    int w;
    rb_err e;
    assert_int_equal(state_finish(st, id, &w, &e), 0);
}

/* the ring's decision times are the clock's: fixed here, for the text */
static void fix_times(rstate *st)
{
    for (int i = 0; i < st->ring_cap; i++)
        st->ring[i].t = 1700000000.0 + st->ring[i].seq * 0.25;
}

/* A fixed history over K = 3 workers, a ring of 8 (it wraps) and a
 * window of 4: signatures and none, an eligibility mask, a refitted
 * generation, finishes, an expiry, a clear, generated ids. */
static rstate *history(mref_t *m1, mref_t *m2)
{
    const char *const workers[] = {"w0", "w1", "w\"2"};
    char err[256];
    rstate *st = state_new(3, workers, 0.05, 8, 4, err, sizeof err);
    assert_non_null(st);
    state_model_changed(st, m1);
    static const double sims[][3] = {{0.9, 0.2, 0.1},  {0.3, 0.88, 0.86}, {0.1, 0.2, 0.95},
                                     {0.5, 0.51, 0.49}, {0.7, 0.1, 0.69}, {0.33, 0.34, 0.35}};
    static const uint8_t not_w0[3] = {0, 1, 1};
    char id[16];
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof id, "a%d", i);
        route(st, m1, id, sims[i], i % 2, 3 * i, i == 4 ? not_w0 : NULL);
    }
    route(st, m1, "", NULL, -1, 0, NULL);              /* no signature, id r7 */
    finish(st, "a1");
    finish(st, "a3");
    assert_int_equal(state_expire(st, 1e18), 5);       /* a0 a2 a4 a5 r7 */
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof id, "b%d", i);
        route(st, i < 2 ? m1 : m2, id, sims[(i + 2) % 6], 1, i, NULL);
    }
    route(st, m2, "", NULL, 0, 7, NULL);               /* r12 */
    state_clear_worker(st, 1);
    route(st, m2, "c0", sims[1], -1, 0, NULL);
    finish(st, "c0");
    fix_times(st);
    return st;
}

/* Recorded from the views as they were built under the lock (before
 * issue 20): the same history must give the same text. */
static const char WORKERS[] =
    "[{\"name\":\"w0\",\"index\":0,\"inflight\":2,\"routed\":5,\"finished\":1,\"failed\":0,\"expired\":2"
    ",\"cleared\":0,\"ejected\":0,\"rules\":{\"band-jsq\":3,\"min2\":1,\"no-signature\":1}}"
    ",{\"name\":\"w1\",\"index\":1,\"inflight\":0,\"routed\":5,\"finished\":2,\"failed\":0,\"expired\":1"
    ",\"cleared\":2,\"ejected\":0,\"rules\":{\"band-jsq\":2,\"min2\":2,\"no-signature\":1}}"
    ",{\"name\":\"w\\\"2\",\"index\":2,\"inflight\":1,\"routed\":3,\"finished\":0,\"failed\":0,\"expired"
    "\":2,\"cleared\":0,\"ejected\":0,\"rules\":{\"band-jsq\":2,\"min2\":1}}]";
static const char WORKERS_REPORTED[] =
    "[{\"name\":\"w0\",\"index\":0,\"inflight\":2,\"routed\":5,\"finished\":1,\"failed\":0,\"expired\":2"
    ",\"cleared\":0,\"ejected\":0,\"rules\":{\"band-jsq\":3,\"min2\":1,\"no-signature\":1},"
    "\"load_source\":\"vllm\",\"load\":9},{\"name\":\"w1\",\"index\":1,\"inflight\":0,\"rou"
    "ted\":5,\"finished\":2,\"failed\":0,\"expired\":1,\"cleared\":2,\"ejected\":0,\"rules\":{\"band-jsq"
    "\":2,\"min2\":2,\"no-signature\":1},\"load_source\":\"vllm-stale\",\"load\":4},{\"name"
    "\":\"w\\\"2\",\"index\":2,\"inflight\":1,\"routed\":3,\"finished\":0,\"failed\":0,\"expired\":2,\"c"
    "leared\":0,\"ejected\":0,\"rules\":{\"band-jsq\":2,\"min2\":1},\"load_source\":\"own\""
    ",\"load\":1}]";
static const char DECISIONS3[] =
    "[{\"similarities\":[0.3,0.88,0.86],\"band\":[1,2],\"loads\":[2,0,1],\"worker\":\"w1\","
    "\"worker_index\":1,\"rule\":\"band-jsq\",\"tau\":0.05,\"sim_max\":0.88,\"policy\":\"ba"
    "nd\",\"request_id\":\"c0\",\"seq\":13,\"time_ms\":1700000003250,\"model_generation\":2"
    ",\"model_origin\":\"refit\",\"model_refit_of\":1,\"prefill_index\":null,\"finished\":t"
    "rue,\"ended\":\"finished\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":"
    "0},\"cache\":{\"hit_blocks\":0,\"missing_blocks\":0,\"stored_blocks\":1}},{\"similarit"
    "ies\":null,\"band\":[0,1,2],\"loads\":[2,1,1],\"worker\":\"w1\",\"worker_index\":1,\"r"
    "ule\":\"no-signature\",\"tau\":0.05,\"sim_max\":null,\"policy\":\"band\",\"request_id"
    "\":\"r12\",\"seq\":12,\"time_ms\":1700000003000,\"model_generation\":2,\"model_origin"
    "\":\"refit\",\"model_refit_of\":1,\"prefill_index\":0,\"finished\":false,\"ended\":\"c"
    "leared\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hi"
    "t_blocks\":7,\"missing_blocks\":3,\"stored_blocks\":8}},{\"similarities\":[0.33,0.34,0"
    ".35],\"band\":[0,1,2],\"loads\":[1,1,1],\"worker\":\"w0\",\"worker_index\":0,\"rule\":"
    "\"band-jsq\",\"tau\":0.05,\"sim_max\":0.35,\"policy\":\"band\",\"request_id\":\"b3\","
    "\"seq\":11,\"time_ms\":1700000002750,\"model_generation\":2,\"model_origin\":\"refit\""
    ",\"model_refit_of\":1,\"prefill_index\":1,\"finished\":false,\"ended\":null,\"signal\""
    ":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hit_blocks\":3,\"miss"
    "ing_blocks\":1,\"stored_blocks\":4}}]";
static const char DECISIONS_ALL[] =
    "[{\"similarities\":[0.3,0.88,0.86],\"band\":[1,2],\"loads\":[2,0,1],\"worker\":\"w1\","
    "\"worker_index\":1,\"rule\":\"band-jsq\",\"tau\":0.05,\"sim_max\":0.88,\"policy\":\"ba"
    "nd\",\"request_id\":\"c0\",\"seq\":13,\"time_ms\":1700000003250,\"model_generation\":2"
    ",\"model_origin\":\"refit\",\"model_refit_of\":1,\"prefill_index\":null,\"finished\":t"
    "rue,\"ended\":\"finished\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":"
    "0},\"cache\":{\"hit_blocks\":0,\"missing_blocks\":0,\"stored_blocks\":1}},{\"similarit"
    "ies\":null,\"band\":[0,1,2],\"loads\":[2,1,1],\"worker\":\"w1\",\"worker_index\":1,\"r"
    "ule\":\"no-signature\",\"tau\":0.05,\"sim_max\":null,\"policy\":\"band\",\"request_id"
    "\":\"r12\",\"seq\":12,\"time_ms\":1700000003000,\"model_generation\":2,\"model_origin"
    "\":\"refit\",\"model_refit_of\":1,\"prefill_index\":0,\"finished\":false,\"ended\":\"c"
    "leared\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hi"
    "t_blocks\":7,\"missing_blocks\":3,\"stored_blocks\":8}},{\"similarities\":[0.33,0.34,0"
    ".35],\"band\":[0,1,2],\"loads\":[1,1,1],\"worker\":\"w0\",\"worker_index\":0,\"rule\":"
    "\"band-jsq\",\"tau\":0.05,\"sim_max\":0.35,\"policy\":\"band\",\"request_id\":\"b3\","
    "\"seq\":11,\"time_ms\":1700000002750,\"model_generation\":2,\"model_origin\":\"refit\""
    ",\"model_refit_of\":1,\"prefill_index\":1,\"finished\":false,\"ended\":null,\"signal\""
    ":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hit_blocks\":3,\"miss"
    "ing_blocks\":1,\"stored_blocks\":4}},{\"similarities\":[0.7,0.1,0.69],\"band\":[0,2],"
    "\"loads\":[1,1,0],\"worker\":\"w\\\"2\",\"worker_index\":2,\"rule\":\"band-jsq\",\"tau"
    "\":0.05,\"sim_max\":0.7,\"policy\":\"band\",\"request_id\":\"b2\",\"seq\":10,\"time_ms"
    "\":1700000002500,\"model_generation\":2,\"model_origin\":\"refit\",\"model_refit_of\":"
    "1,\"prefill_index\":1,\"finished\":false,\"ended\":null,\"signal\":{\"source\":\"none"
    "\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hit_blocks\":2,\"missing_blocks\":1,\"st"
    "ored_blocks\":3}},{\"similarities\":[0.5,0.51,0.49],\"band\":[0,1,2],\"loads\":[0,1,0]"
    ",\"worker\":\"w0\",\"worker_index\":0,\"rule\":\"band-jsq\",\"tau\":0.05,\"sim_max\":0"
    ".51,\"policy\":\"band\",\"request_id\":\"b1\",\"seq\":9,\"time_ms\":1700000002250,\"mo"
    "del_generation\":1,\"model_origin\":\"loaded\",\"model_refit_of\":null,\"prefill_index"
    "\":1,\"finished\":false,\"ended\":null,\"signal\":{\"source\":\"none\",\"rows\":0,\"ca"
    "ched_rows\":0},\"cache\":{\"hit_blocks\":1,\"missing_blocks\":0,\"stored_blocks\":2}},"
    "{\"similarities\":[0.1,0.2,0.95],\"band\":[1,2],\"loads\":[0,0,0],\"worker\":\"w1\",\""
    "worker_index\":1,\"rule\":\"min2\",\"tau\":0.05,\"sim_max\":0.95,\"policy\":\"band\","
    "\"request_id\":\"b0\",\"seq\":8,\"time_ms\":1700000002000,\"model_generation\":1,\"mod"
    "el_origin\":\"loaded\",\"model_refit_of\":null,\"prefill_index\":1,\"finished\":false,"
    "\"ended\":\"cleared\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\""
    "cache\":{\"hit_blocks\":0,\"missing_blocks\":0,\"stored_blocks\":1}},{\"similarities\""
    ":null,\"band\":[0,1,2],\"loads\":[2,2,2],\"worker\":\"w0\",\"worker_index\":0,\"rule\""
    ":\"no-signature\",\"tau\":0.05,\"sim_max\":null,\"policy\":\"band\",\"request_id\":\"r"
    "7\",\"seq\":7,\"time_ms\":1700000001750,\"model_generation\":1,\"model_origin\":\"load"
    "ed\",\"model_refit_of\":null,\"prefill_index\":null,\"finished\":false,\"ended\":\"exp"
    "ired\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hit_"
    "blocks\":0,\"missing_blocks\":0,\"stored_blocks\":1}},{\"similarities\":[0.33,0.34,0.3"
    "5],\"band\":[0,1,2],\"loads\":[2,2,1],\"worker\":\"w\\\"2\",\"worker_index\":2,\"rule"
    "\":\"band-jsq\",\"tau\":0.05,\"sim_max\":0.35,\"policy\":\"band\",\"request_id\":\"a5"
    "\",\"seq\":6,\"time_ms\":1700000001500,\"model_generation\":1,\"model_origin\":\"loade"
    "d\",\"model_refit_of\":null,\"prefill_index\":1,\"finished\":false,\"ended\":\"expired"
    "\",\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"cache\":{\"hit_bloc"
    "ks\":15,\"missing_blocks\":7,\"stored_blocks\":16}}]";
static const char EXPLAIN_B1[] =
    "{\"similarities\":[0.5,0.51,0.49],\"band\":[0,1,2],\"loads\":[0,1,0],\"worker\":\"w0\""
    ",\"worker_index\":0,\"rule\":\"band-jsq\",\"tau\":0.05,\"sim_max\":0.51,\"policy\":\"b"
    "and\",\"request_id\":\"b1\",\"seq\":9,\"time_ms\":1700000002250,\"model_generation\":1"
    ",\"model_origin\":\"loaded\",\"model_refit_of\":null,\"prefill_index\":1,\"finished\":"
    "false,\"ended\":null,\"signal\":{\"source\":\"none\",\"rows\":0,\"cached_rows\":0},\"c"
    "ache\":{\"hit_blocks\":1,\"missing_blocks\":0,\"stored_blocks\":2}}";
static const char DRIFT[] =
    "{\"window\":4,\"model_generation\":1,\"mean_best_similarity\":0.6275,\"calibration_m"
    "ean_similarity\":0.8,\"share\":[0.25,0.25,0.5],\"calibration_share\":[0.5,0.3,0.2],"
    "\"share_tvd\":0.3,\"share_tvd_threshold\":0.7,\"share_tvd_exceeded\":false,\"baselin"
    "e\":\"calibration nearest-centroid shares\",\"baseline_source\":\"nearest\"}";
static const char DRIFT_NO_CALIB[] =
    "{\"window\":4,\"model_generation\":1,\"mean_best_similarity\":0.6275,\"calibration_m"
    "ean_similarity\":null,\"share\":[0.25,0.25,0.5],\"calibration_share\":null,\"share_t"
    "vd\":null,\"share_tvd_threshold\":null,\"share_tvd_exceeded\":null,\"baseline\":\"no"
    "ne (the model has neither nearest shares nor cluster sizes)\",\"baseline_source\":\""
    "none\"}";
static const char DRIFT_OTHER_GEN[] =
    "{\"window\":0,\"model_generation\":2,\"mean_best_similarity\":null,\"calibration_mea"
    "n_similarity\":0.75,\"share\":[null,null,null],\"calibration_share\":[0.5,0.3,0.2],"
    "\"share_tvd\":null,\"share_tvd_threshold\":null,\"share_tvd_exceeded\":null,\"baseli"
    "ne\":\"calibration nearest-centroid shares\",\"baseline_source\":\"nearest\"}";

static const char DRIFT_SIZES[] =
    "{\"window\":4,\"model_generation\":1,\"mean_best_similarity\":0.6275,\"calibration_m"
    "ean_similarity\":0.8,\"share\":[0.25,0.25,0.5],\"calibration_share\":[0.5,0.3,0.2],"
    "\"share_tvd\":0.3,\"share_tvd_threshold\":0.7,\"share_tvd_exceeded\":false,\"baselin"
    "e\":\"balanced sizes (model predates calibration shares)\",\"baseline_source\":\"siz"
    "es\"}";

static int recording(void)
{
    return getenv("VIEWS_RECORD") != NULL;
}

static void check(const char *name, json_t *j, const char *want)
{
    if (recording()) {
        char *t = dump(j);
        printf("%s\n%s\n", name, t);
        free(t);
        return;
    }
    expect_text(j, want);
}

static void test_views_as_recorded(void **state)
{
    (void)state;
    double calib[3] = {0.5, 0.3, 0.2};
    mref_t m1 = {.dim = 2, .gen = 1, .epoch = 1, .calib_share = calib, .calib_sim = 0.8};
    mref_t m2 = {.dim = 2, .gen = 2, .refit_of = 1, .epoch = 1, .calib_share = calib,
                 .calib_sim = 0.75};
    rstate *st = history(&m1, &m2);
    check("WORKERS", state_workers_json(st), WORKERS);
    check("DECISIONS3", state_decisions_json(st, 3), DECISIONS3);
    check("DECISIONS_ALL", state_decisions_json(st, 100), DECISIONS_ALL);
    check("EXPLAIN_B1", state_explain_json(st, "b1"), EXPLAIN_B1);
    assert_null(state_explain_json(st, "a0"));         /* fell out of the ring */
    assert_null(state_explain_json(st, "nope"));
    check("DRIFT", state_drift_json(st, &m1), DRIFT);
    mref_t bare = m1;
    bare.calib_share = NULL;
    bare.calib_sim = NAN;
    check("DRIFT_NO_CALIB", state_drift_json(st, &bare), DRIFT_NO_CALIB);
    check("DRIFT_OTHER_GEN", state_drift_json(st, &m2), DRIFT_OTHER_GEN);
    mref_t old = m1;             /* a model that predates nearest_share */
    old.calib_from_sizes = 1;
    check("DRIFT_SIZES", state_drift_json(st, &old), DRIFT_SIZES);
    state_use_reported(st, 1);
    state_set_reported(st, 0, 1, 5, 1);
    state_set_reported(st, 1, 1, 2, 3);
    state_set_reported(st, 1, 0, 0, 0);                /* w1 stale */
    check("WORKERS_REPORTED", state_workers_json(st), WORKERS_REPORTED);
    state_free(st);
}

/* The old decisions view: the ring walked newest first under the lock. */
static json_t *ring_walk(rstate *st, int n)
{
    json_t *a = json_array();
    for (int i = 0, j = st->ring_head; i < st->ring_n && i < n; i++) {
        j = (j - 1 + st->ring_cap) % st->ring_cap;
        json_array_append_new(a, drec_json(st, &st->ring[j]));
    }
    return a;
}

static void test_full_ring_as_walked(void **state)
{
    (void)state;
    const char *const workers[] = {"p", "q", "r", "s"};
    char err[256];
    rstate *st = state_new(4, workers, 0.02, 4096, 16, err, sizeof err);
    assert_non_null(st);
    mref_t m = {.dim = 2, .gen = 1, .epoch = 1, .calib_sim = NAN};
    state_model_changed(st, &m);
    uint64_t x = 88172645463325252ull;   /* xorshift64 */
    char id[16];
    for (int i = 0; i < 5000; i++) {
        double sim[4];
        for (int k = 0; k < 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sim[k] = (double)(x % 1000) / 1000;
        }
        snprintf(id, sizeof id, "x%d", i);
        route(st, &m, id, i % 9 ? sim : NULL, i % 3 - 1, i % 5, NULL);
        if (i % 4 == 0)
            finish(st, id);
    }
    fix_times(st);
    static const int ns[] = {0, 1, 50, 4095, 4096, 1 << 20};
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++) {
        char *want = dump(ring_walk(st, ns[t])), *got = dump(state_decisions_json(st, ns[t]));
        assert_string_equal(got, want);
        free(want);
        free(got);
    }
    for (int i = 4999; i > 4999 - 4096; i -= 97) {
        snprintf(id, sizeof id, "x%d", i);
        char *want = NULL;
        for (int j = 0; j < st->ring_cap && !want; j++)
            if (!strcmp(st->ring[j].id, id))
                want = dump(drec_json(st, &st->ring[j]));
        assert_non_null(want);
        char *got = dump(state_explain_json(st, id));
        assert_string_equal(got, want);
        free(want);
        free(got);
    }
    state_free(st);
}

/* A route that failed at its worker (state_fail) is counted failed, not
 * finished; its load drops as at a finish; its decision ends "failed";
 * it is out of the table (a later finish or fail is a 404). */
static void test_failed_not_finished(void **state)
{
    (void)state;
    const char *const workers[] = {"w0", "w1"};
    char err[256];
    rstate *st = state_new(2, workers, 0.05, 8, 4, err, sizeof err);
    assert_non_null(st);
    mref_t m = {.dim = 2, .gen = 1, .epoch = 1, .calib_sim = NAN};
    state_model_changed(st, &m);
    static const double sim[2] = {0.1, 0.9};
    route(st, &m, "ok", sim, -1, 0, NULL);
    route(st, &m, "bad", sim, -1, 0, NULL);
    int w0 = -1, w1 = -1;
    rb_err e;
    assert_int_equal(state_finish(st, "ok", &w0, &e), 0);
    assert_int_equal(state_fail(st, "bad", &w1, &e), 0);
    assert_int_equal(state_fail(st, "bad", &w1, &e), -1);
    assert_int_equal(e.status, 404);
    assert_int_equal(state_finish(st, "bad", &w1, &e), -1);
    json_t *ws = state_workers_json(st);
    uint64_t fin = 0, failed = 0, inflight = 0;
    for (int k = 0; k < 2; k++) {
        json_t *w = json_array_get(ws, (size_t)k);
        fin += (uint64_t)json_integer_value(json_object_get(w, "finished"));
        failed += (uint64_t)json_integer_value(json_object_get(w, "failed"));
        inflight += (uint64_t)json_integer_value(json_object_get(w, "inflight"));
    }
    assert_int_equal(fin, 1);
    assert_int_equal(failed, 1);
    assert_int_equal(inflight, 0);
    json_decref(ws);
    json_t *d = state_explain_json(st, "bad");
    assert_string_equal(json_string_value(json_object_get(d, "ended")), "failed");
    assert_false(json_is_true(json_object_get(d, "finished")));
    json_decref(d);
    d = state_explain_json(st, "ok");
    assert_string_equal(json_string_value(json_object_get(d, "ended")), "finished");
    json_decref(d);
    state_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views_as_recorded),
        cmocka_unit_test(test_full_ring_as_walked),
        cmocka_unit_test(test_failed_not_finished),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
