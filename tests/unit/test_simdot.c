/* test_simdot.c - the similarity kernel (simdot.h) and the vectorised
 * double sums (vsum.h).
 *
 * simdot against dot products in double, for every kernel this CPU runs,
 * over shapes that hit every edge of the blocking (n and k not multiples
 * of the 6-row / 4-vector blocks, d not a multiple of 16 or of the
 * 512-float chunk, d = 1); that it writes only its cells (ldo > n); that
 * its output is bit-identical for 1, 2, 3 and 8 threads, and between the
 * AVX-512 and AVX2 kernels (same lanes, same order); vsum against scalar
 * double loops, and its threaded passes bit-identical to sequential ones. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "simdot.h"
#include "vsum.h"

static float *randf(size_t count, uint64_t seed, int nonneg)
{
    rng_t r;
    rng_seed(&r, seed);
    float *a = malloc(count * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < count; i++) {
        double v = rng_normal(&r);
        a[i] = (float)(nonneg ? fabs(v) : v);
    }
    return a;
}

/* out vs sum_j x_ij v_cj in double; tolerance from sum_j |x_ij v_cj|
 * (float accumulation over d terms); cells outside [c*ldo, c*ldo+n)
 * must still hold the sentinel. */
static void check_against_double(simdot_kind kind, int n, int d, int k, int threads)
{
    size_t ldo = (size_t)n + 3;
    float *x = randf((size_t)n * d, 11 + (uint64_t)n * 7 + (uint64_t)d, 0);
    float *v = randf((size_t)k * d, 13 + (uint64_t)k, 0);
    float *out = malloc((size_t)k * ldo * sizeof *out);
    assert_non_null(out);
    for (size_t i = 0; i < (size_t)k * ldo; i++)
        out[i] = -12345.0f;
    simdot(kind, x, n, d, v, k, out, ldo, threads);
    for (int c = 0; c < k; c++) {
        for (int i = 0; i < n; i++) {
            double ref = 0, mag = 0;
            for (int j = 0; j < d; j++) {
                double t = (double)x[(size_t)i * d + j] * v[(size_t)c * d + j];
                ref += t;
                mag += fabs(t);
            }
            double got = out[(size_t)c * ldo + i];
            if (fabs(got - ref) > 1e-5 * mag + 1e-30)
                fail_msg("%s n=%d d=%d k=%d: out[%d][%d] = %.9g, double says %.9g", simdot_name(kind),
                         n, d, k, c, i, got, ref);
        }
        for (size_t i = (size_t)n; i < ldo; i++)
            assert_true(out[(size_t)c * ldo + i] == -12345.0f);
    }
    free(x);
    free(v);
    free(out);
}

static void test_against_double(void **state)
{
    (void)state;
    static const int ns[] = {1, 2, 5, 6, 7, 9, 17, 130};
    static const int ds[] = {1, 3, 15, 16, 17, 100, 512, 513, 1040};
    static const int ks[] = {1, 2, 3, 4, 5, 16, 17};
    static const simdot_kind kinds[] = {SIMDOT_AUTO, SIMDOT_BLAS, SIMDOT_AVX2, SIMDOT_AVX512};
    int ran = 0;
    for (size_t q = 0; q < sizeof kinds / sizeof *kinds; q++) {
        if (!simdot_supported(kinds[q])) {
            print_message("kernel %d not supported here: skipped\n", (int)kinds[q]);
            continue;
        }
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t b = 0; b < sizeof ds / sizeof *ds; b++)
                for (size_t c = 0; c < sizeof ks / sizeof *ks; c++, ran++)
                    check_against_double(kinds[q], ns[a], ds[b], ks[c], 2);
    }
    assert_true(ran >= 2 * 8 * 9 * 7);
    /* big enough for several threads, chunks and blocks */
    check_against_double(SIMDOT_AUTO, 1003, 1500, 13, 0);
}

/* Bit-identical for any thread count, and between AVX-512 and AVX2. */
static void test_deterministic(void **state)
{
    (void)state;
    int n = 1003, d = 1537, k = 17;
    float *x = randf((size_t)n * d, 21, 1), *v = randf((size_t)k * d, 22, 1);
    size_t cells = (size_t)n * k;
    float *one = malloc(cells * sizeof *one), *other = malloc(cells * sizeof *other);
    assert_non_null(one);
    assert_non_null(other);
    simdot(SIMDOT_AUTO, x, n, d, v, k, one, (size_t)n, 1);
    static const int threads[] = {2, 3, 8, 0};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        memset(other, 0, cells * sizeof *other);
        simdot(SIMDOT_AUTO, x, n, d, v, k, other, (size_t)n, threads[t]);
        assert_memory_equal(one, other, cells * sizeof *one);
    }
    if (simdot_supported(SIMDOT_AVX512) && simdot_supported(SIMDOT_AVX2)) {
        simdot(SIMDOT_AVX512, x, n, d, v, k, one, (size_t)n, 2);
        simdot(SIMDOT_AVX2, x, n, d, v, k, other, (size_t)n, 1);
        assert_memory_equal(one, other, cells * sizeof *one);
    } else {
        print_message("AVX-512 and AVX2 not both here: kernel equality skipped\n");
    }
    free(x); free(v); free(one); free(other);
}

static void test_empty_and_names(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, out[4] = {7, 7, 7, 7};
    simdot(SIMDOT_AUTO, x, 0, 4, x, 1, out, 4, 0);
    simdot(SIMDOT_AUTO, x, 1, 4, x, 0, out, 4, 0);
    for (int i = 0; i < 4; i++)
        assert_true(out[i] == 7.0f);
    simdot(SIMDOT_AUTO, x, 1, 4, x, 1, out, 1, 0);
    assert_true(out[0] == 30.0f);
    assert_true(simdot_supported(SIMDOT_BLAS));
    assert_true(simdot_supported(simdot_best()));
    assert_string_equal(simdot_name(SIMDOT_BLAS), "blas");
    assert_string_equal(simdot_name(SIMDOT_AUTO), simdot_name(simdot_best()));
    assert_true(simdot_default_threads() >= 1 && simdot_default_threads() <= 8);
}

static void test_vsum(void **state)
{
    (void)state;
    static const int ds[] = {1, 7, 8, 9, 63, 1537};
    for (size_t t = 0; t < sizeof ds / sizeof *ds; t++) {
        int d = ds[t];
        float *f = randf((size_t)d, 31 + (uint64_t)d, 0), *mu = randf((size_t)d, 32, 0);
        double *a = malloc((size_t)d * sizeof *a), *b = malloc((size_t)d * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        for (int j = 0; j < d; j++)
            a[j] = b[j] = j * 0.25 - 3.0;
        vsum_add(a, f, d, -1.0);
        for (int j = 0; j < d; j++) {
            b[j] += -1.0 * f[j];
            assert_true(a[j] == b[j]); /* elementwise: exact */
        }
        double dot = 0, n2 = 0, n2f = 0, mag = 0;
        for (int j = 0; j < d; j++) {
            dot += a[j] * f[j];
            mag += fabs(a[j] * f[j]);
            n2 += a[j] * a[j];
            n2f += (double)f[j] * f[j];
        }
        assert_true(fabs(vsum_dot(a, f, d) - dot) <= 1e-13 * mag);
        assert_true(fabs(vsum_norm2(a, d) - n2) <= 1e-13 * n2);
        assert_true(fabs(vsum_norm2_f(f, d) - n2f) <= 1e-13 * n2f);
        float *want = malloc((size_t)d * sizeof *want);
        assert_non_null(want);
        double move = 0, nrm = sqrt(n2), inv = 1.0 / nrm;
        for (int j = 0; j < d; j++) {
            want[j] = (float)(a[j] * inv);
            move += ((double)want[j] - mu[j]) * ((double)want[j] - mu[j]);
        }
        double got = vsum_unit(mu, a, d, nrm);
        assert_memory_equal(mu, want, (size_t)d * sizeof *mu);
        assert_true(fabs(got - move) <= 1e-12 * (move + 1e-300));
        free(f); free(mu); free(a); free(b); free(want);
    }
}

/* The threaded passes equal their sequential definitions bit for bit,
 * for any thread count: moves of rows between sums against the same
 * vsum_add calls one by one (first every row joining, then some rows
 * moving, one of them twice), norms against vsum_norm2_f per row. Sizes
 * past the one-thread threshold. */
static void test_vsum_threaded(void **state)
{
    (void)state;
    int n = 700, d = 1601, k = 5, m = 300;
    float *x = randf((size_t)n * d, 41, 0);
    int *rows = malloc((size_t)n * sizeof *rows), *from = malloc((size_t)n * sizeof *from);
    int *to = malloc((size_t)n * sizeof *to);
    double *want = calloc((size_t)k * d, sizeof *want), *got = malloc((size_t)k * d * sizeof *got);
    double *nw = malloc((size_t)n * sizeof *nw), *ng = malloc((size_t)n * sizeof *ng);
    assert_non_null(rows); assert_non_null(from); assert_non_null(to);
    assert_non_null(want); assert_non_null(got); assert_non_null(nw); assert_non_null(ng);
    rng_t r;
    rng_seed(&r, 42);
    int *group = malloc((size_t)n * sizeof *group);
    assert_non_null(group);
    for (int i = 0; i < n; i++) {
        group[i] = (int)rng_below(&r, (uint64_t)k);
        rows[i] = i;
        vsum_add(want + (size_t)group[i] * d, x + (size_t)i * d, d, 1.0);
        nw[i] = vsum_norm2_f(x + (size_t)i * d, d);
    }
    double *joined = malloc((size_t)k * d * sizeof *joined);
    assert_non_null(joined);
    memcpy(joined, want, (size_t)k * d * sizeof *joined);
    /* then m moves, in list order; row 3 moves twice */
    int *mrows = malloc((size_t)m * sizeof *mrows);
    assert_non_null(mrows);
    for (int t = 0; t < m; t++) {
        mrows[t] = t == m - 1 ? 3 : (int)rng_below(&r, (uint64_t)n);
        from[t] = group[mrows[t]];
        to[t] = (int)rng_below(&r, (uint64_t)k);
        group[mrows[t]] = to[t];
        vsum_add(want + (size_t)from[t] * d, x + (size_t)mrows[t] * d, d, -1.0);
        vsum_add(want + (size_t)to[t] * d, x + (size_t)mrows[t] * d, d, 1.0);
    }
    int *initial = malloc((size_t)n * sizeof *initial);
    assert_non_null(initial);
    rng_seed(&r, 42);
    for (int i = 0; i < n; i++)
        initial[i] = (int)rng_below(&r, (uint64_t)k);
    static const int threads[] = {1, 2, 3, 8, 0};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        memset(got, 0, (size_t)k * d * sizeof *got);
        vsum_move_rows(got, x, d, rows, NULL, initial, n, threads[t]);
        assert_memory_equal(got, joined, (size_t)k * d * sizeof *got);
        vsum_move_rows(got, x, d, mrows, from, to, m, threads[t]);
        assert_memory_equal(got, want, (size_t)k * d * sizeof *got);
        vsum_row_norms2(x, n, d, ng, threads[t]);
        assert_memory_equal(ng, nw, (size_t)n * sizeof *ng);
    }
    /* and the sums are right: one column against a plain double loop */
    for (int c = 0; c < k; c++) {
        double s = 0;
        for (int i = 0; i < n; i++)
            if (group[i] == c)
                s += x[(size_t)i * d + 1600];
        assert_true(fabs(got[(size_t)c * d + 1600] - s) <= 1e-9 * (1 + fabs(s)));
    }
    free(x); free(rows); free(from); free(to); free(want); free(got); free(nw); free(ng);
    free(group); free(joined); free(mrows); free(initial);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_double),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_empty_and_names),
        cmocka_unit_test(test_vsum),
        cmocka_unit_test(test_vsum_threaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
