/* test_memory.c - what bounded memory rests on (docs/memory.md): loads of
 * a row list equal trace_select of a full load for every dataset, drop
 * flags leave out exactly their datasets, trace_keep_rows in place equals
 * trace_select, an index has vectors and no
 * matrix, bad lists are refused; chunk samples keep whole chunks, fit the
 * budget and repeat for a seed; model_fit_release gives model_fit's model
 * with the decode counts gone; sig_is_zero agrees with the built
 * signature; signatures built at arrival
 * (sim_config.sig_cache 0) route exactly as the kept matrix does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "h5util.h"
#include "model.h"
#include "route.h"
#include "sim.h"
#include "trace.h"
#include "trace_budget.h"
#include "util_tracefix.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
    (void)state;
    return tracefix_tmpdir("memory", dir, sizeof dir, path, sizeof path);
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    return 0;
}

/* A fixture with every dataset, saved: 300 rows of 4 x 8 cells are five
 * chunks of 64 rows in the count matrices. */
static trace_t *saved_fixture(void)
{
    char err[ELDR_ERRLEN];
    trace_t *t = tracefix_make(300, 4, 8, 2, 41);
    assert_non_null(t);
    if (trace_save(t, path, err, sizeof err))
        fail_msg("save: %s", err);
    return t;
}

static void expect_list_equals_select(const trace_t *t, const int64_t *rows, int64_t n)
{
    char err[ELDR_ERRLEN], why[256];
    trace_load_opts o = {.rows = rows, .n_rows = n};
    trace_t *got = NULL, *want = trace_select(t, rows, n, err, sizeof err);
    assert_non_null(want);
    if (trace_load_some(path, &o, &got, err, sizeof err))
        fail_msg("load list of %lld: %s", (long long)n, err);
    if (tracefix_diff(got, want, why, sizeof why))
        fail_msg("list of %lld rows: %s", (long long)n, why);
    trace_free(got);
    trace_free(want);
}

static void test_row_list_equals_select(void **state)
{
    (void)state;
    trace_t *t = saved_fixture();
    int64_t rows[300], n = 0;
    for (int64_t r = 0; r < 300; r++)      /* sparse: across every chunk */
        if (r % 7 == 3 || r % 11 == 0)
            rows[n++] = r;
    expect_list_equals_select(t, rows, n);
    for (n = 0; n < 40; n++)               /* contiguous, over a chunk edge */
        rows[n] = 50 + n;
    expect_list_equals_select(t, rows, n);
    rows[0] = 299;                          /* the last row alone */
    expect_list_equals_select(t, rows, 1);
    for (n = 0; n < 300; n++)
        rows[n] = n;
    expect_list_equals_select(t, rows, 300);
    expect_list_equals_select(t, rows, 0);  /* no row */
    trace_free(t);
}

/* trace_keep_rows in place equals trace_select, every dataset. */
static void test_keep_rows_equals_select(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN], why[256];
    int64_t sets[3][8] = {{0, 2, 3, 9, 50, 51, 52, 119}, {5}, {0, 1, 2, 3, 4, 5, 6, 7}};
    int64_t lens[3] = {8, 1, 8};
    for (int i = 0; i < 3; i++) {
        trace_t *t = tracefix_make(120, 4, 8, 2, 17);
        trace_t *want = trace_select(t, sets[i], lens[i], err, sizeof err);
        assert_non_null(want);
        assert_int_equal(trace_keep_rows(t, sets[i], lens[i], err, sizeof err), 0);
        if (tracefix_diff(t, want, why, sizeof why))
            fail_msg("keep set %d: %s", i, why);
        assert_int_equal(trace_validate(t, "kept", err, sizeof err), 0);
        trace_free(t);
        trace_free(want);
    }
    trace_t *t = tracefix_make(10, 4, 8, 2, 17);
    int64_t bad[] = {3, 3};
    assert_int_equal(trace_keep_rows(t, bad, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "not ascending"));
    assert_int_equal(t->n, 10);
    trace_free(t);
}

static void test_drop_flags(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = saved_fixture(), *got = NULL;
    int64_t rows[] = {1, 2, 70, 71, 200};
    trace_load_opts o = {.drop = TRACE_DROP_GATES | TRACE_DROP_IDS | TRACE_DROP_PREFILL |
                                 TRACE_DROP_PROBS,
                         .rows = rows, .n_rows = 5};
    if (trace_load_some(path, &o, &got, err, sizeof err))
        fail_msg("%s", err);
    assert_null(got->gate_prob);
    assert_null(got->gate_logit);
    assert_null(got->request_id);
    assert_null(got->prefill_experts);
    assert_null(got->block_hashes);
    assert_null(got->decode_probs);
    assert_non_null(got->decode_experts);
    assert_non_null(got->label);
    /* what is kept equals the full load's rows */
    for (int i = 0; i < 5; i++) {
        assert_memory_equal(trace_prefill_row(got, i), trace_prefill_row(t, rows[i]),
                            TRACE_CELLS(t) * sizeof(uint16_t));
        assert_memory_equal(trace_decode_row(got, i), trace_decode_row(t, rows[i]),
                            TRACE_CELLS(t) * sizeof(uint16_t));
        int64_t a = t->decode_offsets[rows[i]], b = t->decode_offsets[rows[i] + 1];
        assert_int_equal(got->decode_offsets[i + 1] - got->decode_offsets[i], b - a);
        assert_memory_equal(got->decode_experts + (size_t)got->decode_offsets[i] * 8,
                            t->decode_experts + (size_t)a * 8,
                            (size_t)(b - a) * 8 * sizeof(uint16_t));
    }
    trace_free(got);
    o = (trace_load_opts){.drop = TRACE_DROP_TOKENS};   /* every row, no token data */
    if (trace_load_some(path, &o, &got, err, sizeof err))
        fail_msg("%s", err);
    assert_null(got->decode_experts);
    assert_null(got->prefill_experts);
    assert_non_null(got->gate_prob);
    assert_int_equal(got->n, 300);
    trace_free(got);
    trace_free(t);
}

static void test_index_has_vectors_only(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = saved_fixture(), *idx = NULL;
    trace_load_opts o = {.drop = TRACE_DROP_COUNTS};
    if (trace_load_some(path, &o, &idx, err, sizeof err))
        fail_msg("%s", err);
    assert_null(idx->prefill_counts);
    assert_null(idx->decode_counts);
    assert_null(idx->gate_prob);
    assert_null(idx->decode_experts);
    assert_int_equal(idx->n, 300);
    assert_memory_equal(idx->prompt_tokens, t->prompt_tokens, 300 * sizeof(int32_t));
    assert_memory_equal(idx->decode_tokens, t->decode_tokens, 300 * sizeof(int32_t));
    assert_memory_equal(idx->label, t->label, 300 * sizeof(int32_t));
    assert_memory_equal(idx->arrival_s, t->arrival_s, 300 * sizeof(double));
    assert_string_equal(idx->request_id[299], t->request_id[299]);
    assert_int_equal(idx->n_labels, t->n_labels);
    trace_free(idx);
    trace_free(t);
}

static void test_bad_row_lists(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = saved_fixture(), *got = (trace_t *)1;
    int64_t down[] = {5, 4}, twice[] = {5, 5}, out[] = {3, 300}, neg[] = {-1};
    const int64_t *lists[] = {down, twice, out, neg};
    int64_t lens[] = {2, 2, 2, 1};
    for (int i = 0; i < 4; i++) {
        trace_load_opts o = {.rows = lists[i], .n_rows = lens[i]};
        err[0] = '\0';
        assert_int_equal(trace_load_some(path, &o, &got, err, sizeof err), -1);
        assert_null(got);
        assert_non_null(strstr(err, "not ascending inside [0, 300)"));
        assert_non_null(strstr(err, path));
    }
    trace_free(t);
}

static void test_sample_whole_chunks(void **state)
{
    (void)state;
    enum { N = 1000, CH = 21 };
    int64_t cand[N], out[N], out2[N], n = 0;
    for (int64_t r = 0; r < 3 * N; r += 3)   /* every third row of 3000 */
        cand[n++] = r;
    int64_t m = trace_sample_chunks(cand, n, CH, 100, 7, out);
    assert_true(m > 0 && m <= 100);
    assert_true(m > 100 - CH);               /* at most one chunk short */
    for (int64_t i = 1; i < m; i++)
        assert_true(out[i] > out[i - 1]);
    /* whole chunks: every candidate of a kept row's chunk is kept */
    for (int64_t i = 0; i < n; i++) {
        int in_chunk = 0, kept = 0;
        for (int64_t j = 0; j < m; j++)
            in_chunk |= out[j] / CH == cand[i] / CH, kept |= out[j] == cand[i];
        assert_int_equal(in_chunk, kept);
    }
    assert_int_equal(trace_sample_chunks(cand, n, CH, 100, 7, out2), m);
    assert_memory_equal(out, out2, (size_t)m * sizeof *out);
    int64_t m3 = trace_sample_chunks(cand, n, CH, 100, 8, out2);
    assert_true(m3 != m || memcmp(out, out2, (size_t)m * sizeof *out) != 0);
    assert_int_equal(trace_sample_chunks(cand, n, CH, n, 7, out), n);   /* all fit */
    assert_int_equal(trace_sample_chunks(cand, n, CH, 3, 7, out), 3);   /* part of one */
    assert_true(out[2] / CH == out[0] / CH);
}

static void test_row_bytes_follow_drops(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = saved_fixture();
    trace_header_t h;
    assert_int_equal(trace_read_header(path, &h, err, sizeof err), 0);
    double all = trace_row_bytes(&h, 0), counts = trace_row_bytes(&h, TRACE_DROP_TOKENS |
                                                                         TRACE_DROP_GATES |
                                                                         TRACE_DROP_IDS);
    double idx = trace_row_bytes(&h, TRACE_DROP_COUNTS | TRACE_DROP_IDS);
    assert_true(counts >= 4 * 8 * 2 * 2);          /* prefill and decode, uint16 */
    assert_true(counts < 4 * 8 * 2 * 2 + 64);
    assert_true(all > counts + 4 * 8 * 8);         /* + two float gate matrices */
    assert_true(idx < 64);
    int64_t chunk = 0;
    assert_int_equal(trace_chunk_rows(path, &chunk, err, sizeof err), 0);
    assert_int_equal(chunk, 64);
    trace_free(t);
}

static void test_fit_release_same_model(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = tracefix_make(120, 4, 8, 2, 5), *u = tracefix_make(120, 4, 8, 2, 5);
    model_fit_opts o;
    model_fit_opts_default(&o, 3);
    model_t *a = NULL, *b = NULL;
    if (model_fit(t, &o, &a, NULL, err, sizeof err))
        fail_msg("%s", err);
    /* token rows need their counts: kept */
    assert_int_equal(model_fit_release(u, &o, &b, NULL, err, sizeof err), 0);
    assert_non_null(u->decode_counts);
    model_free(b);
    free(u->decode_experts), free(u->decode_offsets), free(u->decode_probs);
    u->decode_experts = NULL, u->decode_offsets = NULL, u->decode_probs = NULL;
    if (model_fit_release(u, &o, &b, NULL, err, sizeof err))
        fail_msg("%s", err);
    assert_null(u->decode_counts);
    assert_null(u->decode_tokens);
    assert_int_equal(trace_validate(u, "released", err, sizeof err), 0);
    assert_int_equal(a->recipe.n_layers, b->recipe.n_layers);
    assert_memory_equal(a->centroids, b->centroids,
                        (size_t)a->K * sig_dim(&a->recipe) * sizeof(float));
    assert_true(a->rho == b->rho);
    model_free(a);
    model_free(b);
    trace_free(t);
    trace_free(u);
}

/* sig_is_zero says 1 exactly when sig_from_counts gives a zero signature:
 * counts only where the idf is 0, no count, a count under a weight, and
 * the plain variants and a gate. */
static void test_is_zero_matches_build(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    enum { L = 3, E = 4 };
    int layers[] = {0, 2};
    float idf_full[L * E] = {0, 0.5f, 0, 1, 9, 9, 9, 9, 0, 0, 0.25f, 0};
    uint16_t c[5][L * E] = {
        {0},                                           /* nothing */
        {2, 0, 3, 0, 7, 7, 7, 7, 1, 1, 0, 4},          /* only under idf 0 (and layer 1) */
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0},          /* one count, weight 0.25 */
        {0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0},          /* outside the mask */
        {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},          /* weight 0, counted by the others */
    };
    float gate[L * E] = {0, 0, 0, 0, 0.3f, 0, 0, 0, 0, 0, 0, 0};
    float out[2 * E];
    for (int v = SIG_COUNT; v <= SIG_GATE_PROB; v++) {
        sig_recipe r;
        assert_int_equal(sig_recipe_init(&r, (sig_variant)v, L, E, layers, 2, err, sizeof err), 0);
        if (v == SIG_COUNT_IDF)
            assert_int_equal(sig_recipe_set_idf(&r, idf_full, err, sizeof err), 0);
        for (int i = 0; i < 5; i++) {
            int built = sig_from_counts(&r, c[i], gate, out, err, sizeof err);
            assert_true(built == 0 || built == 1);
            assert_int_equal(sig_is_zero(&r, c[i], gate), built);
        }
        sig_recipe_free(&r);
    }
}

/* The same policy run on a workload with kept signatures and one that
 * builds them at arrival: the same worker for every request. */
static void test_signatures_at_arrival(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = tracefix_make(200, 4, 8, 2, 9);
    free(t->decode_experts), free(t->decode_offsets), free(t->decode_probs);
    t->decode_experts = NULL, t->decode_offsets = NULL, t->decode_probs = NULL;
    model_fit_opts fo;
    model_fit_opts_default(&fo, 4);
    model_t *m = NULL;
    if (model_fit(t, &fo, &m, NULL, err, sizeof err))
        fail_msg("%s", err);
    sim_result res[2];
    int64_t zero[2];
    for (int lazy = 0; lazy < 2; lazy++) {
        sim_config c;
        sim_config_default(&c);
        c.arrivals = SIM_ARRIVE_POISSON;
        c.rate = 50;
        c.sig_cache = lazy ? 0 : SIZE_MAX;
        sim_workload w;
        if (sim_workload_init(&w, t, &c, &m->recipe, err, sizeof err))
            fail_msg("%s", err);
        assert_true(lazy ? w.sig == NULL : w.sig != NULL);
        zero[lazy] = w.n_sig_zero;
        route_policy p;
        assert_int_equal(route_policy_init(&p, ROUTE_ELDR, m->K, 3, err, sizeof err), 0);
        assert_int_equal(route_policy_set_centroids(&p, m->centroids, w.dim, 0.1, 1, err,
                                                    sizeof err), 0);
        if (sim_run(&w, &p, NULL, NULL, &res[lazy], err, sizeof err))
            fail_msg("run: %s", err);
        route_policy_free(&p);
        sim_workload_free(&w);
    }
    assert_int_equal(zero[0], zero[1]);
    assert_int_equal(res[0].n, res[1].n);
    for (int64_t i = 0; i < res[0].n; i++) {
        assert_int_equal(res[0].req[i].worker, res[1].req[i].worker);
        assert_true(res[0].req[i].finish == res[1].req[i].finish);
    }
    assert_true(res[0].tpot_p50_ms == res[1].tpot_p50_ms);
    sim_result_free(&res[0]);
    sim_result_free(&res[1]);
    model_free(m);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_row_list_equals_select, setup, teardown),
        cmocka_unit_test(test_keep_rows_equals_select),
        cmocka_unit_test_setup_teardown(test_drop_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_has_vectors_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_row_lists, setup, teardown),
        cmocka_unit_test(test_sample_whole_chunks),
        cmocka_unit_test_setup_teardown(test_row_bytes_follow_drops, setup, teardown),
        cmocka_unit_test(test_fit_release_same_model),
        cmocka_unit_test(test_is_zero_matches_build),
        cmocka_unit_test(test_signatures_at_arrival),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
