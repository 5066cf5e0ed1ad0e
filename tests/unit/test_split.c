/* test_split.c - calibration/evaluation splits (split.h).
 *
 * Partition (every row in exactly one part, both ascending), sizes (count
 * capped at half, fraction floor, 0 = none), head = the first rows,
 * random: deterministic for a seed, different across seeds, not the
 * first rows of a label-sorted trace, and the same rows as the seeded
 * partial Fisher-Yates that Trace:split{fraction, seed} always drew
 * (an independent re-implementation here); stratified: per-label quotas
 * within one row of the exact share, adding up to the size; without
 * labels it falls back to random (and says so); split_apply's traces
 * hold the right rows; split_describe names mode, seed and sizes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "rng.h"
#include "insample.h"
#include "sha256.h"
#include "split.h"
#include "util_tracefix.h"

static char err[ELDR_ERRLEN];

static void check_partition(const split_rows *r, int64_t n)
{
    assert_int_equal(r->n_calib + r->n_eval, n);
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (int64_t i = 0; i < r->n_calib; i++) {
        assert_true(r->calib[i] >= 0 && r->calib[i] < n);
        if (i)
            assert_true(r->calib[i] > r->calib[i - 1]);
        seen[r->calib[i]]++;
    }
    for (int64_t i = 0; i < r->n_eval; i++) {
        assert_true(r->eval[i] >= 0 && r->eval[i] < n);
        if (i)
            assert_true(r->eval[i] > r->eval[i - 1]);
        seen[r->eval[i]]++;
    }
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
}

static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(split_calib_count(449, 1000, err, sizeof err), 224);
    assert_int_equal(split_calib_count(5000, 1000, err, sizeof err), 1000);
    assert_int_equal(split_calib_count(449, 0.25, err, sizeof err), 112);
    assert_int_equal(split_calib_count(449, 0, err, sizeof err), 0);
    assert_int_equal(split_calib_count(449, -1, err, sizeof err), -1);
    assert_non_null(strstr(err, "calibration split"));
    assert_int_equal(split_calib_count(449, NAN, err, sizeof err), -1);
    assert_int_equal(split_mode_parse("random"), SPLIT_RANDOM);
    assert_int_equal(split_mode_parse("head"), SPLIT_HEAD);
    assert_int_equal(split_mode_parse("stratified"), SPLIT_STRATIFIED);
    assert_int_equal(split_mode_parse("first"), -1);
    assert_int_equal(split_mode_parse(NULL), -1);
    split_spec s;
    split_spec_default(&s);
    assert_int_equal(s.mode, SPLIT_RANDOM);
    assert_int_equal(s.seed, 1);
    assert_true(s.size == 1000);
}

/* A trace sorted by label, as the shared real trace is. */
static trace_t *sorted_trace(int64_t n)
{
    trace_t *t = tracefix_make(n, 3, 8, 2, 5);
    assert_non_null(t);
    for (int64_t r = 0; r < n; r++)
        t->label[r] = (int32_t)(r * 3 / n);
    return t;
}

static void test_head_and_random(void **state)
{
    (void)state;
    trace_t *t = sorted_trace(120);
    split_spec s = {SPLIT_HEAD, 0.5, 1, 0, 0};
    split_rows h, r1, r1b, r2;
    assert_int_equal(split_make(t, &s, &h, err, sizeof err), 0);
    check_partition(&h, 120);
    assert_int_equal(h.n_calib, 60);
    for (int64_t i = 0; i < 60; i++)
        assert_int_equal(h.calib[i], i);
    s.mode = SPLIT_RANDOM;
    assert_int_equal(split_make(t, &s, &r1, err, sizeof err), 0);
    assert_int_equal(split_make(t, &s, &r1b, err, sizeof err), 0);
    s.seed = 2;
    assert_int_equal(split_make(t, &s, &r2, err, sizeof err), 0);
    check_partition(&r1, 120);
    assert_int_equal(r1.n_calib, 60);
    assert_memory_equal(r1.calib, r1b.calib, 60 * sizeof(int64_t));
    assert_memory_not_equal(r1.calib, r2.calib, 60 * sizeof(int64_t));
    assert_memory_not_equal(r1.calib, h.calib, 60 * sizeof(int64_t));
    /* every label is represented on both sides */
    int in_cal[3] = {0}, in_ev[3] = {0};
    for (int64_t i = 0; i < r1.n_calib; i++)
        in_cal[t->label[r1.calib[i]]]++;
    for (int64_t i = 0; i < r1.n_eval; i++)
        in_ev[t->label[r1.eval[i]]]++;
    for (int l = 0; l < 3; l++)
        assert_true(in_cal[l] > 0 && in_ev[l] > 0);

    /* oracle: the partial Fisher-Yates over 0..n-1 with rng_below */
    int64_t perm[120];
    char mark[120] = {0};
    for (int i = 0; i < 120; i++)
        perm[i] = i;
    rng_t rng;
    rng_seed(&rng, 1);
    for (int i = 0; i < 60; i++) {
        int64_t j = i + (int64_t)rng_below(&rng, (uint64_t)(120 - i));
        int64_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
        mark[perm[i]] = 1;
    }
    int64_t k = 0;
    for (int i = 0; i < 120; i++)
        if (mark[i])
            assert_int_equal(r1.calib[k++], i);
    assert_int_equal(k, 60);
    split_rows_free(&h);
    split_rows_free(&r1);
    split_rows_free(&r1b);
    split_rows_free(&r2);
    trace_free(t);
}

static void test_stratified(void **state)
{
    (void)state;
    trace_t *t = sorted_trace(100);        /* labels of 34, 33, 33 rows */
    int64_t cnt[3] = {0};
    for (int64_t r = 0; r < 100; r++)
        cnt[t->label[r]]++;
    double sizes[] = {10, 0.3, 0.5, 49, 1};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        split_spec s = {SPLIT_STRATIFIED, sizes[z], 7, 0, 0};
        split_rows r;
        assert_int_equal(split_make(t, &s, &r, err, sizeof err), 0);
        check_partition(&r, 100);
        assert_int_equal(r.mode, SPLIT_STRATIFIED);
        int64_t c = split_calib_count(100, sizes[z], err, sizeof err);
        assert_int_equal(r.n_calib, c);
        int64_t got[3] = {0};
        for (int64_t i = 0; i < r.n_calib; i++)
            got[t->label[r.calib[i]]]++;
        for (int l = 0; l < 3; l++) {
            double exact = (double)c * (double)cnt[l] / 100.0;
            assert_true(fabs((double)got[l] - exact) < 1.0);
        }
        split_rows_free(&r);
    }
    /* no labels: random, reported as such */
    free(t->label);
    t->label = NULL;
    split_spec s = {SPLIT_STRATIFIED, 0.5, 7, 0, 0}, sr = {SPLIT_RANDOM, 0.5, 7, 0, 0};
    split_rows a, b;
    assert_int_equal(split_make(t, &s, &a, err, sizeof err), 0);
    assert_int_equal(split_make(t, &sr, &b, err, sizeof err), 0);
    assert_int_equal(a.mode, SPLIT_RANDOM);
    assert_memory_equal(a.calib, b.calib, (size_t)a.n_calib * sizeof(int64_t));
    split_rows_free(&a);
    split_rows_free(&b);
    trace_free(t);
}

static void test_apply_and_describe(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(40, 2, 6, 2, 9);
    assert_non_null(t);
    split_spec s = {SPLIT_RANDOM, 0.25, 3, 0, 0};
    split_rows r;
    trace_t *c, *e;
    assert_int_equal(split_make(t, &s, &r, err, sizeof err), 0);
    assert_int_equal(split_apply(t, &r, &c, &e, err, sizeof err), 0);
    assert_int_equal(c->n, 10);
    assert_int_equal(e->n, 30);
    size_t cells = (size_t)t->L * t->E;
    for (int64_t i = 0; i < c->n; i++)
        assert_memory_equal(c->prefill_counts + i * cells,
                            t->prefill_counts + r.calib[i] * cells, cells * 2);
    for (int64_t i = 0; i < e->n; i++)
        assert_int_equal(e->prompt_tokens[i], t->prompt_tokens[r.eval[i]]);
    char d[160];
    split_describe(&r, d, sizeof d);
    assert_string_equal(d, "random split (seed 3): 10 calibration, 30 evaluation rows");
    trace_free(c);
    trace_free(e);
    split_rows_free(&r);

    s.mode = SPLIT_HEAD;
    assert_int_equal(split_make(t, &s, &r, err, sizeof err), 0);
    split_describe(&r, d, sizeof d);
    assert_string_equal(d, "head split: 10 calibration, 30 evaluation rows");
    split_rows_free(&r);

    s.size = 0;                            /* none: no calibration trace */
    assert_int_equal(split_make(t, &s, &r, err, sizeof err), 0);
    assert_int_equal(split_apply(t, &r, &c, &e, err, sizeof err), 0);
    assert_null(c);
    assert_int_equal(e->n, 40);
    split_describe(&r, d, sizeof d);
    assert_string_equal(d, "no split: 40 rows evaluated in-sample");
    trace_free(e);
    split_rows_free(&r);

    s.size = -3;
    assert_int_equal(split_make(t, &s, &r, err, sizeof err), -1);
    assert_null(r.calib);
    trace_free(t);
}

/* One row: the count cap leaves 0 calibration rows; K tiny. */
static void test_one_row(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(1, 2, 4, 1, 1);
    assert_non_null(t);
    split_spec s;
    split_spec_default(&s);
    split_rows r;
    assert_int_equal(split_make(t, &s, &r, err, sizeof err), 0);
    assert_int_equal(r.n_calib, 0);
    assert_int_equal(r.n_eval, 1);
    split_rows_free(&r);
    trace_free(t);
}

/* insample_rows: a model fitted on this file with a recorded split is
 * compared row by row; another file, or an unknown SHA-256, is 0; this
 * file without the record is -1 (unknown). */
static void test_insample(void **state)
{
    (void)state;
    char path[] = "/tmp/eldr-test-insample-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    trace_t *t = tracefix_make(50, 2, 6, 2, 4);
    assert_non_null(t);
    assert_int_equal(trace_save(t, path, err, sizeof err), 0);
    sig_recipe r;
    memset(&r, 0, sizeof r);
    model_t m;
    memset(&m, 0, sizeof m);
    char hex[SHA256_HEX];
    assert_int_equal(sha256_file(path, hex, err, sizeof err), 0);
    snprintf(m.calib_sha256, sizeof m.calib_sha256, "%s", hex);
    /* the model: 20 random rows (seed 3); evaluated: the rest, then all */
    split_rows mine, other;
    assert_int_equal(split_make_count(t, SPLIT_RANDOM, 3, 20, &mine, err, sizeof err), 0);
    snprintf(m.calib_split, sizeof m.calib_split, "random 20 seed 3");
    char sha[13];
    assert_int_equal(insample_rows(&m, path, t, mine.eval, mine.n_eval, sha), 0);
    assert_int_equal(strlen(sha), 12);
    int64_t all[50];
    for (int i = 0; i < 50; i++)
        all[i] = i;
    assert_int_equal(insample_rows(&m, path, t, all, 50, NULL), 20);
    /* another seed: the overlap counted by brute force */
    assert_int_equal(split_make_count(t, SPLIT_RANDOM, 4, 25, &other, err, sizeof err), 0);
    int64_t want = 0;
    for (int64_t i = 0; i < other.n_eval; i++)
        for (int64_t j = 0; j < mine.n_calib; j++)
            want += other.eval[i] == mine.calib[j];
    assert_int_equal(insample_rows(&m, path, t, other.eval, other.n_eval, NULL), want);
    snprintf(m.calib_split, sizeof m.calib_split, "all");
    assert_int_equal(insample_rows(&m, path, t, other.eval, other.n_eval, NULL), other.n_eval);
    snprintf(m.calib_split, sizeof m.calib_split, "head 10");
    assert_int_equal(insample_rows(&m, path, t, all, 50, NULL), 10);
    m.calib_split[0] = '\0';
    assert_int_equal(insample_rows(&m, path, t, all, 50, NULL), -1);
    m.calib_sha256[0] = 'x';
    assert_int_equal(insample_rows(&m, path, t, all, 50, NULL), 0);
    m.calib_sha256[0] = '\0';
    assert_int_equal(insample_rows(&m, path, t, all, 50, NULL), 0);
    split_rows_free(&mine);
    split_rows_free(&other);
    trace_free(t);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_head_and_random),
        cmocka_unit_test(test_stratified),
        cmocka_unit_test(test_apply_and_describe),
        cmocka_unit_test(test_one_row),
        cmocka_unit_test(test_insample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
