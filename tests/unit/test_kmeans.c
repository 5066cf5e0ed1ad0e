/* test_kmeans.c - balanced spherical K-means (kmeans.h).
 *
 * Determinism (also across thread counts), the shapes K = 1 and K = N, identical rows, the capacity
 * bound, monotone objective, the unbalanced mode against a plain
 * reference written here in double, the iters = 0 assignment handle
 * against assign_balanced and the Hungarian method, cancellation, the
 * refusal of bad rows, and the real gpt-oss-20b trace (count_idf, all 24
 * layers): exactness of the assignment there too, and a balanced fit. */
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
#include "kmeans.h"
#include "rng.h"
#include "signature.h"
#include "trace.h"

/* n unit rows of dimension d around g random centres (spread = noise);
 * group sizes skewed (group of row i = floor(g * u^2)) so that plain
 * K-means would overfill some clusters. */
static float *clustered(int n, int d, int g, double noise, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed);
    double *centre = malloc((size_t)g * d * sizeof *centre);
    float *x = malloc((size_t)n * d * sizeof *x);
    assert_non_null(centre);
    assert_non_null(x);
    for (int i = 0; i < g * d; i++)
        centre[i] = rng_normal(&r);
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&r);
        int grp = (int)(g * u * u);
        double v[512], s = 0;
        assert_true(d <= 512);
        for (int j = 0; j < d; j++) {
            v[j] = centre[grp * d + j] + noise * rng_normal(&r);
            s += v[j] * v[j];
        }
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] = (float)(v[j] / sqrt(s));
    }
    free(centre);
    return x;
}

static int fit(const float *x, int n, int d, const kmeans_opts *o, kmeans_result *res)
{
    char err[ELDR_ERRLEN] = "";
    int rc = kmeans_fit(x, n, d, o, res, err, sizeof err);
    if (rc != 0)
        fail_msg("kmeans_fit: %s", err);
    return rc;
}

static double dotd(const float *a, const float *b, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++) s += (double)a[j] * b[j];
    return s;
}

static void test_deterministic(void **state)
{
    (void)state;
    int n = 400, d = 24;
    float *x = clustered(n, d, 6, 0.6, 1);
    kmeans_opts o;
    kmeans_opts_default(&o, 5);
    o.seed = 42;
    kmeans_result a, b;
    fit(x, n, d, &o, &a);
    fit(x, n, d, &o, &b);
    assert_memory_equal(a.assign, b.assign, n * sizeof(int));
    assert_memory_equal(a.centroids, b.centroids, (size_t)5 * d * sizeof(float));
    assert_true(a.objective == b.objective);
    assert_int_equal(a.iterations, b.iterations);
    kmeans_result_free(&a);
    kmeans_result_free(&b);
    free(x);
}

/* The similarities run on several threads (simdot.h); the fit must not
 * depend on how many. Large enough (n d k > 2^21) to use them, and from
 * k-means++ so that seeding goes through the kernel too. */
static void test_threads_deterministic(void **state)
{
    (void)state;
    int n = 2500, d = 96, k = 12;
    float *x = clustered(n, d, 10, 1.0, 9);
    kmeans_result base, other;
    kmeans_opts o;
    kmeans_opts_default(&o, k);
    o.seed = 7;
    o.threads = 1;
    fit(x, n, d, &o, &base);
    assert_true(base.iterations > 2);
    static const int threads[] = {2, 3, 0};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        o.threads = threads[t];
        fit(x, n, d, &o, &other);
        assert_memory_equal(base.assign, other.assign, n * sizeof(int));
        assert_memory_equal(base.centroids, other.centroids, (size_t)k * d * sizeof(float));
        assert_true(base.objective == other.objective);
        assert_int_equal(base.iterations, other.iterations);
        kmeans_result_free(&other);
    }
    kmeans_result_free(&base);
    free(x);
}

static void test_k_one(void **state)
{
    (void)state;
    int n = 101, d = 16;
    float *x = clustered(n, d, 3, 0.8, 2);
    for (int balanced = 0; balanced <= 1; balanced++) {
        kmeans_opts o;
        kmeans_opts_default(&o, 1);
        o.balanced = balanced;
        kmeans_result res;
        fit(x, n, d, &o, &res);
        double mean[16] = {0}, s = 0, obj = 0;
        for (int i = 0; i < n; i++) {
            assert_int_equal(res.assign[i], 0);
            for (int j = 0; j < d; j++) mean[j] += x[i * d + j];
        }
        for (int j = 0; j < d; j++) s += mean[j] * mean[j];
        for (int j = 0; j < d; j++)
            assert_true(fabs(res.centroids[j] - mean[j] / sqrt(s)) < 1e-6);
        for (int i = 0; i < n; i++) obj += 1 - dotd(x + i * d, res.centroids, d);
        assert_true(fabs(res.objective - obj) < 1e-9);
        assert_int_equal(res.sizes[0], n);
        assert_true(res.converged);
        kmeans_result_free(&res);
    }
    free(x);
}

static void test_k_equals_n(void **state)
{
    (void)state;
    int n = 30, d = 8;
    float *x = clustered(n, d, 30, 0.5, 3);
    for (int balanced = 0; balanced <= 1; balanced++) {
        kmeans_opts o;
        kmeans_opts_default(&o, n);
        o.balanced = balanced;
        kmeans_result res;
        fit(x, n, d, &o, &res);
        for (int c = 0; c < n; c++)
            assert_int_equal(res.sizes[c], 1);
        assert_true(res.objective < 1e-5);
        kmeans_result_free(&res);
    }
    free(x);
}

/* All rows the same: every centroid is that row, sizes balanced. */
static void test_identical_rows(void **state)
{
    (void)state;
    int n = 20, d = 6, k = 4;
    float x[20 * 6];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            x[i * d + j] = j < 4 ? 0.5f : 0.0f;
    kmeans_opts o;
    kmeans_opts_default(&o, k);
    kmeans_result res;
    fit(x, n, d, &o, &res);
    for (int c = 0; c < k; c++) {
        assert_int_equal(res.sizes[c], 5);
        for (int j = 0; j < d; j++)
            assert_true(fabs(res.centroids[c * d + j] - x[j]) < 1e-6);
    }
    assert_true(fabs(res.objective) < 1e-6);
    kmeans_result_free(&res);
}

/* Balanced sizes never exceed ceil(n/k), on skewed data where plain
 * K-means does exceed it (checked, so the test has teeth). */
static void test_capacity(void **state)
{
    (void)state;
    int shapes[][2] = {{200, 4}, {257, 8}, {99, 10}, {64, 3}, {500, 16}};
    int unbalanced_over = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int n = shapes[s][0], k = shapes[s][1], d = 12, cap = assign_default_cap(n, k);
        float *x = clustered(n, d, 3, 0.4, 10 + s);
        for (int balanced = 0; balanced <= 1; balanced++) {
            kmeans_opts o;
            kmeans_opts_default(&o, k);
            o.balanced = balanced;
            kmeans_result res;
            fit(x, n, d, &o, &res);
            int total = 0;
            for (int c = 0; c < k; c++) {
                total += res.sizes[c];
                if (balanced)
                    assert_true(res.sizes[c] <= cap);
                else if (res.sizes[c] > cap)
                    unbalanced_over = 1;
            }
            assert_int_equal(total, n);
            kmeans_result_free(&res);
        }
        free(x);
    }
    assert_true(unbalanced_over);
}

typedef struct trail {
    int n;
    int last_iter;
    double obj[64];
    volatile int *cancel;
    int cancel_at;
} trail;

static void record(void *ctx, int iter, double objective)
{
    trail *t = ctx;
    assert_int_equal(iter, t->last_iter + 1);
    t->last_iter = iter;
    if (iter < 64) t->obj[iter] = objective;
    if (t->cancel && iter == t->cancel_at) *t->cancel = 1;
}

static void test_objective_monotone(void **state)
{
    (void)state;
    int n = 600, d = 20;
    float *x = clustered(n, d, 10, 1.0, 4);
    for (int balanced = 1; balanced >= 0; balanced--)
        for (uint64_t seed = 1; seed <= 4; seed++) {
            kmeans_opts o;
            kmeans_opts_default(&o, 7);
            o.seed = seed;
            o.balanced = balanced;
            trail t = {.n = n};
            o.progress = record;
            o.progress_ctx = &t;
            kmeans_result res;
            fit(x, n, d, &o, &res);
            assert_int_equal(t.last_iter, res.iterations);
            assert_true(res.iterations >= 2);
            for (int it = 2; it <= res.iterations; it++)
                if (t.obj[it] > t.obj[it - 1] + 1e-7 * n) /* float32 similarities */
                    fail_msg("balanced=%d seed=%d: objective rose at iteration %d: %.9g -> %.9g",
                             balanced, (int)seed, it, t.obj[it - 1], t.obj[it]);
            /* the final objective (updated centroids) is no worse either */
            assert_true(res.objective <= t.obj[res.iterations] + 1e-5);
            kmeans_result_free(&res);
        }
    free(x);
}

/* Plain spherical K-means in double, straight from the definition. */
static void reference_unbalanced(const float *x, int n, int d, int k, const int *init, int iters,
                                 int *assign, double *mu)
{
    int *prev = malloc(n * sizeof *prev);
    for (int c = 0; c < k; c++)
        for (int j = 0; j < d; j++) mu[c * d + j] = x[(size_t)init[c] * d + j];
    for (int it = 1; it <= iters; it++) {
        for (int i = 0; i < n; i++) {
            int best = 0;
            double bs = -INFINITY;
            for (int c = 0; c < k; c++) {
                double s = 0;
                for (int j = 0; j < d; j++) s += x[(size_t)i * d + j] * mu[c * d + j];
                if (s > bs) { bs = s; best = c; }
            }
            assign[i] = best;
        }
        if (it > 1 && !memcmp(prev, assign, n * sizeof *prev)) break;
        memcpy(prev, assign, n * sizeof *prev);
        double move = 0;
        for (int c = 0; c < k; c++) {
            double sum[64] = {0}, s = 0, m = 0;
            int members = 0;
            for (int i = 0; i < n; i++)
                if (assign[i] == c) {
                    members++;
                    for (int j = 0; j < d; j++) sum[j] += x[(size_t)i * d + j];
                }
            if (!members) continue;
            for (int j = 0; j < d; j++) s += sum[j] * sum[j];
            for (int j = 0; j < d; j++) {
                double v = sum[j] / sqrt(s);
                m += (v - mu[c * d + j]) * (v - mu[c * d + j]);
                mu[c * d + j] = v;
            }
            if (sqrt(m) > move) move = sqrt(m);
        }
        if (move <= KMEANS_EPS) break;
    }
    free(prev);
}

static void test_unbalanced_matches_reference(void **state)
{
    (void)state;
    int n = 300, d = 16, k = 5;
    float *x = clustered(n, d, 5, 0.5, 5);
    int init[5] = {3, 50, 120, 200, 280};
    int *ref = malloc(n * sizeof *ref);
    double mu[5 * 16];
    reference_unbalanced(x, n, d, k, init, 50, ref, mu);
    kmeans_opts o;
    kmeans_opts_default(&o, k);
    o.balanced = 0;
    o.init_rows = init;
    kmeans_result res;
    fit(x, n, d, &o, &res);
    assert_memory_equal(res.assign, ref, n * sizeof *ref);
    for (int i = 0; i < k * d; i++)
        assert_true(fabs(res.centroids[i] - mu[i]) < 1e-5);
    kmeans_result_free(&res);

    /* Rows 3 and 4 identical and both initial centroids: ties go to the
     * lower index, so cluster 1 starts empty and keeps its centroid. */
    memcpy(x + 4 * d, x + 3 * d, d * sizeof *x);
    int init2[5] = {3, 4, 120, 200, 280};
    reference_unbalanced(x, n, d, k, init2, 50, ref, mu);
    o.init_rows = init2;
    o.iters = 1;
    fit(x, n, d, &o, &res);
    assert_int_equal(res.sizes[1], 0);
    assert_memory_equal(res.centroids + d, x + 3 * d, d * sizeof *x);
    kmeans_result_free(&res);
    o.iters = 50;
    fit(x, n, d, &o, &res);
    assert_memory_equal(res.assign, ref, n * sizeof *ref);
    for (int i = 0; i < k * d; i++)
        assert_true(fabs(res.centroids[i] - mu[i]) < 1e-5);
    free(ref);
    free(x);
    kmeans_result_free(&res);
}

/* iters = 0 + init_rows: the optimal balanced assignment to the given
 * centroids, equal to assign_balanced on double costs and to the
 * Hungarian method on the N x (K*cap) expansion. */
static void test_iters_zero_assignment(void **state)
{
    (void)state;
    int n = 150, d = 10, k = 4, cap = assign_default_cap(n, k);
    float *x = clustered(n, d, 2, 0.7, 6);
    int init[4] = {0, 1, 2, 3};
    kmeans_opts o;
    kmeans_opts_default(&o, k);
    o.iters = 0;
    o.init_rows = init;
    kmeans_result res;
    fit(x, n, d, &o, &res);
    assert_int_equal(res.iterations, 0);
    double *cost = malloc((size_t)n * k * sizeof *cost);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < k; c++)
            cost[i * k + c] = 1 - dotd(x + i * d, x + init[c] * d, d);
    int *a = malloc(n * sizeof *a);
    double want;
    char err[ELDR_ERRLEN];
    assert_int_equal(assign_balanced(cost, n, k, cap, a, &want, err, sizeof err), 0);
    assert_true(fabs(res.objective - want) <= 1e-6 * want);
    for (int c = 0; c < k; c++) {
        assert_true(res.sizes[c] <= cap);
        assert_memory_equal(res.centroids + c * d, x + init[c] * d, d * sizeof(float));
    }
    double *big = malloc((size_t)n * k * cap * sizeof *big);
    int *col = malloc(n * sizeof *col);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k * cap; j++) big[(size_t)i * k * cap + j] = cost[i * k + j / cap];
    double hung;
    assert_int_equal(hungarian_solve(big, n, k * cap, col, &hung, err, sizeof err), 0);
    assert_true(fabs(res.objective - hung) <= 1e-6 * hung);
    free(big); free(col); free(cost); free(a); free(x);
    kmeans_result_free(&res);
}

static void test_cancel(void **state)
{
    (void)state;
    int n = 300, d = 12;
    float *x = clustered(n, d, 8, 1.2, 7);
    volatile int flag = 1;
    kmeans_opts o;
    kmeans_opts_default(&o, 6);
    o.cancel = &flag;
    kmeans_result res;
    char err[ELDR_ERRLEN] = "";
    assert_int_equal(kmeans_fit(x, n, d, &o, &res, err, sizeof err), KMEANS_CANCELLED);
    assert_non_null(strstr(err, "cancelled"));
    assert_null(res.centroids);
    /* raised from the progress callback, as the dashboard's Esc would */
    flag = 0;
    trail t = {.n = n, .cancel = &flag, .cancel_at = 2};
    o.progress = record;
    o.progress_ctx = &t;
    o.seed = 3;
    assert_int_equal(kmeans_fit(x, n, d, &o, &res, err, sizeof err), KMEANS_CANCELLED);
    assert_non_null(strstr(err, "iteration 3"));
    assert_int_equal(t.last_iter, 2);
    assert_null(res.assign);
    free(x);
}

static void expect_refusal(const float *x, int n, int d, const kmeans_opts *o, const char *what)
{
    kmeans_result res;
    char err[ELDR_ERRLEN] = "";
    assert_int_equal(kmeans_fit(x, n, d, o, &res, err, sizeof err), -1);
    if (!strstr(err, what))
        fail_msg("error '%s' lacks '%s'", err, what);
    assert_null(res.centroids);
}

static void test_bad_input(void **state)
{
    (void)state;
    int n = 10, d = 4;
    float *x = clustered(n, d, 2, 0.5, 8);
    kmeans_opts o;
    kmeans_opts_default(&o, 3);
    expect_refusal(x, n, d, &(kmeans_opts){.k = 11, .iters = 5}, "k = 11");
    expect_refusal(x, n, d, &(kmeans_opts){.k = 0, .iters = 5}, "k = 0");
    expect_refusal(x, n, d, &(kmeans_opts){.k = 2, .iters = 0}, "needs init_rows");
    int dup[3] = {1, 4, 1}, out[3] = {1, 10, 2};
    o.init_rows = dup;
    expect_refusal(x, n, d, &o, "both row 1");
    o.init_rows = out;
    expect_refusal(x, n, d, &o, "index 10");
    o.init_rows = NULL;
    memset(x + 6 * d, 0, d * sizeof *x);
    expect_refusal(x, n, d, &o, "row 6 is all zero");
    x[6 * d] = 2.0f;
    expect_refusal(x, n, d, &o, "row 6 has L2 norm 2");
    x[6 * d] = NAN;
    expect_refusal(x, n, d, &o, "row 6 has a non-finite value at column 0");
    free(x);
}

/* The real trace: 449 requests, 24 x 32, count_idf over all layers. */
static void test_real_trace(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN], path[4096];
    const char *env = getenv("ELDR_REAL_TRACE"), *root = getenv("ROOT");
    snprintf(path, sizeof path, "%s", env ? env : "");
    if (!env)
        snprintf(path, sizeof path, "%s/../shared/data/gptoss20b-routing.h5", root ? root : ".");
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        print_message("real trace %s absent: skipped\n", path);
        skip();
    }
    fclose(probe);
    trace_t *t = NULL;
    if (trace_load(path, &t, err, sizeof err) != 0)
        fail_msg("%s", err);
    float *idf = malloc((size_t)t->L * t->E * sizeof *idf);
    sig_recipe r;
    assert_int_equal(sig_idf_fit(t, NULL, 0, idf, err, sizeof err), 0);
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT_IDF, t->L, t->E, NULL, 0, err, sizeof err), 0);
    assert_int_equal(sig_recipe_set_idf(&r, idf, err, sizeof err), 0);
    int n = (int)t->n, d = (int)sig_dim(&r), k = 8, cap = assign_default_cap(n, k);
    float *x = malloc((size_t)n * d * sizeof *x);
    int64_t nz = -1;
    assert_int_equal(sig_build_batch(t, &r, NULL, 0, x, &nz, NULL, err, sizeof err), 0);
    assert_int_equal(nz, 0);

    /* the assignment to 8 given rows equals the Hungarian optimum */
    int init[8] = {0, 57, 112, 170, 233, 301, 365, 440};
    kmeans_opts o;
    kmeans_opts_default(&o, k);
    o.iters = 0;
    o.init_rows = init;
    kmeans_result res;
    fit(x, n, d, &o, &res);
    double *big = malloc((size_t)n * k * cap * sizeof *big);
    int *col = malloc(n * sizeof *col);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k * cap; j++)
            big[(size_t)i * k * cap + j] = 1 - dotd(x + (size_t)i * d, x + (size_t)init[j / cap] * d, d);
    double hung;
    assert_int_equal(hungarian_solve(big, n, k * cap, col, &hung, err, sizeof err), 0);
    if (fabs(res.objective - hung) > 1e-6 * hung)
        fail_msg("real trace: kmeans iters=0 objective %.9g, Hungarian %.9g", res.objective, hung);
    kmeans_result_free(&res);

    /* a balanced fit: sizes within cap, better than its own start */
    kmeans_opts_default(&o, k);
    trail tr = {.n = n};
    o.progress = record;
    o.progress_ctx = &tr;
    fit(x, n, d, &o, &res);
    for (int c = 0; c < k; c++)
        assert_true(res.sizes[c] <= cap);
    assert_true(res.objective <= tr.obj[1]);
    kmeans_result_free(&res);
    free(big); free(col); free(x); free(idf);
    sig_recipe_free(&r);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_threads_deterministic),
        cmocka_unit_test(test_k_one),
        cmocka_unit_test(test_k_equals_n),
        cmocka_unit_test(test_identical_rows),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_objective_monotone),
        cmocka_unit_test(test_unbalanced_matches_reference),
        cmocka_unit_test(test_iters_zero_assignment),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_real_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
