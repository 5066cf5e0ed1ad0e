/* test_split_count.c - split_make_count (split.h): an exact calibration
 * count with no cap, the rule that Trace:split{count | fraction} uses in
 * Lua, and its agreement with split_make.
 *
 * Oracles: the partition properties (ascending, disjoint, covering), the
 * head rule by construction, split_make's rows for the same count, and
 * per-label quotas of c * share within one row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "split.h"
#include "util_tracefix.h"

#define ERRLEN 256

static void check_partition(const split_rows *r, int64_t n, int64_t c)
{
    assert_int_equal(r->n_calib, c);
    assert_int_equal(r->n_eval, n - c);
    uint8_t *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (int64_t i = 0; i < r->n_calib; i++) {
        assert_true(r->calib[i] >= 0 && r->calib[i] < n);
        assert_true(i == 0 || r->calib[i] > r->calib[i - 1]);
        seen[r->calib[i]]++;
    }
    for (int64_t i = 0; i < r->n_eval; i++) {
        assert_true(i == 0 || r->eval[i] > r->eval[i - 1]);
        seen[r->eval[i]]++;
    }
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
}

static void test_count_no_cap(void **state)
{
    (void)state;
    char err[ERRLEN];
    trace_t *t = tracefix_make(101, 3, 8, 2, 5);
    assert_non_null(t);
    const int64_t counts[] = {0, 1, 50, 51, 90, 100, 101};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        for (int mode = 0; mode < 3; mode++) {
            split_rows r;
            assert_int_equal(split_make_count(t, (split_mode)mode, 7, counts[i], &r, err,
                                              sizeof err), 0);
            check_partition(&r, t->n, counts[i]);
            if (mode == SPLIT_HEAD)
                for (int64_t j = 0; j < r.n_calib; j++)
                    assert_int_equal(r.calib[j], j);
            split_rows_free(&r);
        }
    }
    split_rows r;
    assert_int_equal(split_make_count(t, SPLIT_RANDOM, 1, 102, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "102"));
    assert_int_equal(split_make_count(t, SPLIT_RANDOM, 1, -1, &r, err, sizeof err), -1);
    trace_free(t);
}

/* split_make is split_make_count at split_calib_count's size */
static void test_same_as_split_make(void **state)
{
    (void)state;
    char err[ERRLEN];
    trace_t *t = tracefix_make(77, 2, 8, 2, 9);
    assert_non_null(t);
    const double sizes[] = {0.3, 0.5, 10, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int mode = 0; mode < 3; mode++) {
            split_spec s = {(split_mode)mode, sizes[i], 3, 0, 0};
            split_rows a, b;
            assert_int_equal(split_make(t, &s, &a, err, sizeof err), 0);
            int64_t c = split_calib_count(t->n, sizes[i], err, sizeof err);
            assert_int_equal(split_make_count(t, s.mode, s.seed, c, &b, err, sizeof err), 0);
            assert_int_equal(a.n_calib, b.n_calib);
            assert_memory_equal(a.calib, b.calib, (size_t)a.n_calib * sizeof *a.calib);
            assert_int_equal(a.mode, b.mode);
            split_rows_free(&a);
            split_rows_free(&b);
        }
    }
    trace_free(t);
}

/* stratified with an exact count: each label's share within one row */
static void test_stratified_count(void **state)
{
    (void)state;
    char err[ERRLEN];
    trace_t *t = tracefix_make(200, 2, 8, 2, 11);
    assert_non_null(t);
    assert_true(t->label && t->n_labels >= 2);
    split_rows r;
    int64_t c = 150;           /* above the half that split_make would cap at */
    assert_int_equal(split_make_count(t, SPLIT_STRATIFIED, 4, c, &r, err, sizeof err), 0);
    check_partition(&r, t->n, c);
    assert_int_equal(r.mode, SPLIT_STRATIFIED);
    for (int l = 0; l < t->n_labels; l++) {
        int64_t all = 0, got = 0;
        for (int64_t i = 0; i < t->n; i++)
            all += t->label[i] == l;
        for (int64_t i = 0; i < r.n_calib; i++)
            got += t->label[r.calib[i]] == l;
        assert_true(fabs((double)got - (double)c * (double)all / (double)t->n) < 1.0);
    }
    split_rows_free(&r);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_no_cap),
        cmocka_unit_test(test_same_as_split_make),
        cmocka_unit_test(test_stratified_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
