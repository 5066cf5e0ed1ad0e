/* test_assign.c - exactness of the balanced assignment (assign.h) and of
 * the Hungarian method (hungarian.h) that serves as its oracle.
 *
 * hungarian_solve is checked against brute force over all injective
 * row->column maps (n <= 7). assign_balanced is checked against brute force
 * over all capacity-respecting assignments (tiny cases) and against the
 * Hungarian method on the N x (K*cap) expansion (each cluster repeated cap
 * times), the way the reference implementation solves it, on random
 * instances with real-valued, integer (many ties) and identical costs.
 * The N = 2000 instances run when ELDR_TEST_LARGE is set (the optimised
 * build, via tests/cli/kmeans_large.sh); smaller ones always run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "err.h"
#include "hungarian.h"
#include "rng.h"

enum cost_kind { COST_UNIFORM, COST_INTEGER, COST_COSINE, COST_IDENTICAL, COST_FEW_ROWS, N_KINDS };

/* An n x k cost matrix of the given kind. */
static double *make_cost(rng_t *r, int n, int k, enum cost_kind kind)
{
    double *c = calloc((size_t)n * k + 1, sizeof *c);
    assert_non_null(c);
    if (kind == COST_COSINE) {
        /* 1 - x.mu for unit vectors in 6 dimensions, as K-means makes them */
        enum { D = 6 };
        double mu[64][D];
        assert_true(k <= 64);
        for (int a = 0; a < k; a++) {
            double s = 0;
            for (int d = 0; d < D; d++) {
                mu[a][d] = rng_normal(r);
                s += mu[a][d] * mu[a][d];
            }
            for (int d = 0; d < D; d++) mu[a][d] /= sqrt(s);
        }
        for (int i = 0; i < n; i++) {
            double x[D], s = 0;
            for (int d = 0; d < D; d++) {
                x[d] = rng_normal(r);
                s += x[d] * x[d];
            }
            for (int a = 0; a < k; a++) {
                double dot = 0;
                for (int d = 0; d < D; d++) dot += x[d] * mu[a][d];
                c[(size_t)i * k + a] = 1.0 - dot / sqrt(s);
            }
        }
        return c;
    }
    int distinct = kind == COST_IDENTICAL ? 1 : kind == COST_FEW_ROWS ? 3 : n;
    for (int i = 0; i < n; i++)
        for (int a = 0; a < k; a++) {
            if (i >= distinct) {
                c[(size_t)i * k + a] = c[(size_t)(i % distinct) * k + a];
                continue;
            }
            c[(size_t)i * k + a] = kind == COST_INTEGER || kind == COST_FEW_ROWS
                                       ? (double)rng_below(r, 4)
                                       : rng_uniform(r);
        }
    return c;
}

/* ---- brute-force oracles ---- */

static void brute_perm(const double *c, int n, int m, int row, unsigned used, double sum, double *best)
{
    if (row == n) {
        if (sum < *best) *best = sum;
        return;
    }
    for (int j = 0; j < m; j++)
        if (!(used & (1u << j)))
            brute_perm(c, n, m, row + 1, used | (1u << j), sum + c[row * m + j], best);
}

static void brute_assign(const double *c, int n, int k, int cap, int row, int *size, double sum,
                         double *best)
{
    if (row == n) {
        if (sum < *best) *best = sum;
        return;
    }
    for (int a = 0; a < k; a++)
        if (size[a] < cap) {
            size[a]++;
            brute_assign(c, n, k, cap, row + 1, size, sum + c[row * k + a], best);
            size[a]--;
        }
}

/* The reference's formulation: Hungarian on n x (k*cap), column a*cap+t
 * being slot t of cluster a. */
static double hungarian_expanded(const double *c, int n, int k, int cap)
{
    int m = k * cap;
    double *big = malloc((size_t)n * m * sizeof *big + 1);
    int *col = malloc((size_t)n * sizeof *col + 1);
    assert_non_null(big);
    assert_non_null(col);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++)
            big[(size_t)i * m + j] = c[(size_t)i * k + j / cap];
    double total = NAN;
    char err[ELDR_ERRLEN];
    assert_int_equal(hungarian_solve(big, n, m, col, &total, err, sizeof err), 0);
    free(big);
    free(col);
    return total;
}

/* Run assign_balanced and check the result is a feasible assignment whose
 * reported objective is its real cost; return that objective. */
static double checked_assign(const double *c, int n, int k, int cap)
{
    int *a = malloc((size_t)n * sizeof *a + 1);
    int *size = calloc((size_t)k, sizeof *size);
    char err[ELDR_ERRLEN] = "";
    double obj = NAN;
    assert_non_null(a);
    assert_non_null(size);
    if (assign_balanced(c, n, k, cap, a, &obj, err, sizeof err) != 0)
        fail_msg("assign_balanced n=%d k=%d cap=%d: %s", n, k, cap, err);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        assert_in_range(a[i], 0, k - 1);
        size[a[i]]++;
        sum += c[(size_t)i * k + a[i]];
    }
    for (int j = 0; j < k; j++)
        assert_true(size[j] <= cap);
    assert_true(fabs(sum - obj) <= 1e-9 * (1 + fabs(sum)));
    free(a);
    free(size);
    return obj;
}

static void expect_equal_obj(double got, double want, double rel, int n, int k, int cap, int kind)
{
    if (fabs(got - want) > rel * fmax(1.0, fabs(want)))
        fail_msg("n=%d k=%d cap=%d kind=%d: assign %.12g, oracle %.12g", n, k, cap, kind, got, want);
}

/* ---- Hungarian ---- */

static void test_hungarian_brute_force(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 11);
    char err[ELDR_ERRLEN];
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)rng_below(&r, 7);
        int m = n + (int)rng_below(&r, (uint64_t)(8 - n));
        double c[49];
        int integer = trial % 2;
        for (int i = 0; i < n * m; i++)
            c[i] = integer ? (double)rng_below(&r, 3) : rng_normal(&r) * 10;
        int col[7];
        double total;
        assert_int_equal(hungarian_solve(c, n, m, col, &total, err, sizeof err), 0);
        double best = INFINITY, sum = 0;
        brute_perm(c, n, m, 0, 0, 0, &best);
        unsigned used = 0;
        for (int i = 0; i < n; i++) {
            assert_in_range(col[i], 0, m - 1);
            assert_false(used & (1u << col[i]));
            used |= 1u << col[i];
            sum += c[i * m + col[i]];
        }
        assert_true(fabs(sum - total) < 1e-9);
        if (fabs(total - best) > 1e-9)
            fail_msg("trial %d n=%d m=%d: hungarian %.12g, brute force %.12g", trial, n, m, total, best);
    }
}

static void test_hungarian_bad_input(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN] = "";
    double c[6] = {1, 2, 3, 4, 5, 6};
    int col[3];
    double total;
    assert_int_equal(hungarian_solve(c, 3, 2, col, &total, err, sizeof err), -1);
    assert_non_null(strstr(err, "3 x 2"));
    c[4] = NAN;
    assert_int_equal(hungarian_solve(c, 2, 3, col, &total, err, sizeof err), -1);
    assert_non_null(strstr(err, "cost[1][1]"));
    assert_int_equal(hungarian_solve(c, 0, 3, col, &total, err, sizeof err), 0);
    assert_true(total == 0.0);
}

/* ---- balanced assignment ---- */

static void test_assign_brute_force(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 5);
    for (int trial = 0; trial < 600; trial++) {
        int n = (int)rng_below(&r, 8);
        int k = 1 + (int)rng_below(&r, 3);
        int cap = assign_default_cap(n > 0 ? n : 1, k) + (int)rng_below(&r, 2);
        enum cost_kind kind = (enum cost_kind)(trial % N_KINDS);
        double *c = make_cost(&r, n, k, kind);
        double best = n ? INFINITY : 0;
        int size[3] = {0, 0, 0};
        brute_assign(c, n, k, cap, 0, size, 0, &best);
        expect_equal_obj(checked_assign(c, n, k, cap), best, 1e-9, n, k, cap, kind);
        free(c);
    }
}

static void test_assign_vs_hungarian_small(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 7);
    for (int trial = 0; trial < 1500; trial++) {
        int n = 1 + (int)rng_below(&r, 60);
        int k = 1 + (int)rng_below(&r, 8);
        int cap = assign_default_cap(n, k);
        if (trial % 3 == 0)
            cap += (int)rng_below(&r, 4); /* k*cap well above n */
        enum cost_kind kind = (enum cost_kind)(trial % N_KINDS);
        double *c = make_cost(&r, n, k, kind);
        expect_equal_obj(checked_assign(c, n, k, cap), hungarian_expanded(c, n, k, cap), 1e-9,
                         n, k, cap, kind);
        free(c);
    }
}

/* k = n (one point per cluster when cap = 1), k = 1, n < k. */
static void test_assign_edge_shapes(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 3);
    int shapes[][3] = {{1, 1, 1}, {25, 25, 1}, {25, 1, 25}, {3, 8, 1}, {5, 8, 1},
                       {40, 40, 2}, {0, 4, 1}, {9, 3, 3}, {30, 30, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kind = 0; kind < N_KINDS; kind++) {
            int n = shapes[s][0], k = shapes[s][1], cap = shapes[s][2];
            double *c = make_cost(&r, n, k, (enum cost_kind)kind);
            double want = n ? hungarian_expanded(c, n, k, cap) : 0.0;
            expect_equal_obj(checked_assign(c, n, k, cap), want, 1e-9, n, k, cap, kind);
            free(c);
        }
}

/* All points identical: any balanced split is optimal; sizes are the
 * balanced ones (every cluster exactly full when k*cap == n). */
static void test_assign_identical_points(void **state)
{
    (void)state;
    int n = 48, k = 6, cap = 8;
    double *c = malloc((size_t)n * k * sizeof *c);
    assert_non_null(c);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < k; a++)
            c[i * k + a] = 0.25 * a; /* cluster 0 is everybody's favourite */
    int a[48], size[6] = {0};
    double obj;
    char err[ELDR_ERRLEN];
    assert_int_equal(assign_balanced(c, n, k, cap, a, &obj, err, sizeof err), 0);
    for (int i = 0; i < n; i++) size[a[i]]++;
    for (int j = 0; j < k; j++) assert_int_equal(size[j], cap);
    assert_true(fabs(obj - 8 * 0.25 * (0 + 1 + 2 + 3 + 4 + 5)) < 1e-12);
    free(c);
}

static void test_assign_bad_input(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN] = "";
    double c[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int a[4];
    assert_int_equal(assign_balanced(c, 4, 2, 1, a, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot hold 4 points"));
    assert_int_equal(assign_balanced(c, 4, 0, 4, a, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "k >= 1"));
    c[5] = INFINITY;
    assert_int_equal(assign_balanced(c, 4, 2, 2, a, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "cost[2][1]"));
    c[5] = -1e200;
    assert_int_equal(assign_balanced(c, 4, 2, 2, a, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "cost[2][1] = -1e+200"));
}

/* Same input, same answer (the assignment, not only its cost). */
static void test_assign_deterministic(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 9);
    int n = 500, k = 7, cap = assign_default_cap(n, k);
    double *c = make_cost(&r, n, k, COST_INTEGER);
    int *a1 = malloc(n * sizeof *a1), *a2 = malloc(n * sizeof *a2);
    char err[ELDR_ERRLEN];
    assert_int_equal(assign_balanced(c, n, k, cap, a1, NULL, err, sizeof err), 0);
    assert_int_equal(assign_balanced(c, n, k, cap, a2, NULL, err, sizeof err), 0);
    assert_memory_equal(a1, a2, n * sizeof *a1);
    free(a1); free(a2); free(c);
}

static void run_medium(int n, int k, int cap, enum cost_kind kind, uint64_t seed, double rel)
{
    rng_t r;
    rng_seed(&r, seed);
    double *c = make_cost(&r, n, k, kind);
    expect_equal_obj(checked_assign(c, n, k, cap), hungarian_expanded(c, n, k, cap), rel,
                     n, k, cap, kind);
    free(c);
}

static void test_assign_vs_hungarian_medium(void **state)
{
    (void)state;
    run_medium(300, 4, 75, COST_COSINE, 21, 1e-9);
    run_medium(250, 8, 32, COST_UNIFORM, 22, 1e-9);
    run_medium(240, 6, 40, COST_INTEGER, 23, 1e-9);
}

/* Up to N = 2000 (the bound): only with ELDR_TEST_LARGE, the
 * O(N^3) oracle being slow under the sanitizers. */
static void test_assign_vs_hungarian_large(void **state)
{
    (void)state;
    if (!getenv("ELDR_TEST_LARGE"))
        skip();
    run_medium(2000, 16, 125, COST_COSINE, 31, 1e-6);
    run_medium(2000, 5, 400, COST_UNIFORM, 32, 1e-6);
    run_medium(1500, 3, 500, COST_INTEGER, 33, 1e-6);
    run_medium(1000, 16, 63, COST_COSINE, 34, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hungarian_brute_force),
        cmocka_unit_test(test_hungarian_bad_input),
        cmocka_unit_test(test_assign_brute_force),
        cmocka_unit_test(test_assign_vs_hungarian_small),
        cmocka_unit_test(test_assign_edge_shapes),
        cmocka_unit_test(test_assign_identical_points),
        cmocka_unit_test(test_assign_bad_input),
        cmocka_unit_test(test_assign_deterministic),
        cmocka_unit_test(test_assign_vs_hungarian_medium),
        cmocka_unit_test(test_assign_vs_hungarian_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
