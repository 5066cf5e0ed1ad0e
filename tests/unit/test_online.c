/* test_online.c - the online refit (online.h): the window's eviction by
 * time and by capacity, zero signatures, the clock, the alignment against
 * a brute force over all permutations, identities kept through a refit
 * of permuted centroids, K = 1 against the mean written here, too few
 * signatures, an empty cluster keeping its centroid, and a refit equal to
 * K-means warm-started from the current centroids then aligned. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans.h"
#include "online.h"
#include "rng.h"

static void unit(float *v, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++)
        s += (double)v[j] * v[j];
    s = sqrt(s);
    for (int j = 0; j < d; j++)
        v[j] = (float)(v[j] / s);
}

/* K random unit centres of dimension d. */
static float *centres(int K, int d, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed);
    float *c = malloc((size_t)K * d * sizeof *c);
    assert_non_null(c);
    for (int i = 0; i < K * d; i++)
        c[i] = (float)rng_normal(&r);
    for (int i = 0; i < K; i++)
        unit(c + (size_t)i * d, d);
    return c;
}

/* n unit rows, row i near centre i % K (noise sd `noise` per entry). */
static float *around(const float *c, int K, int d, int n, double noise, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed);
    float *x = malloc((size_t)n * d * sizeof *x);
    assert_non_null(x);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] = c[(size_t)(i % K) * d + j] + (float)(noise * rng_normal(&r));
        unit(x + (size_t)i * d, d);
    }
    return x;
}

static double dotf(const float *a, const float *b, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++)
        s += (double)a[j] * b[j];
    return s;
}

static void test_window_evicts_by_time(void **state)
{
    (void)state;
    online_window w;
    char err[256];
    assert_int_equal(online_window_init(&w, 3, 1000, err, sizeof err), 0);
    for (int i = 0; i <= 10; i++) {
        float v[3] = {(float)i + 1, 0, 0};
        assert_int_equal(online_window_push(&w, (double)i, v), 1);
    }
    online_window_evict(&w, 10.0, 5.0);
    assert_int_equal(w.n, 6);    /* t = 5 (exactly 5 s old) .. 10 stay */
    float *rows;
    assert_int_equal(online_window_copy(&w, &rows), 6);
    for (int i = 0; i < 6; i++)
        assert_true(rows[(size_t)i * 3] == (float)(i + 5 + 1));   /* oldest first */
    free(rows);
    online_window_evict(&w, 100.0, 5.0);
    assert_int_equal(w.n, 0);
    assert_int_equal(online_window_copy(&w, &rows), 0);
    assert_null(rows);
    online_window_free(&w);
}

/* Past the capacity the oldest go; growing the ring keeps the order. */
static void test_window_capacity(void **state)
{
    (void)state;
    online_window w;
    char err[256];
    assert_int_equal(online_window_init(&w, 2, 150, err, sizeof err), 0);
    for (int i = 0; i < 400; i++) {
        float v[2] = {0, (float)i + 1};
        online_window_push(&w, i * 0.01, v);
        if (i == 100)            /* wrap the ring once before it grows */
            online_window_evict(&w, i * 0.01, 0.5);
    }
    assert_int_equal(w.n, 150);
    assert_int_equal(w.pushed, 400);
    float *rows;
    assert_int_equal(online_window_copy(&w, &rows), 150);
    for (int i = 0; i < 150; i++)
        assert_true(rows[(size_t)i * 2 + 1] == (float)(250 + i + 1));
    free(rows);
    online_window_free(&w);
    assert_int_equal(online_window_init(&w, 0, 1, err, sizeof err), -1);
    assert_int_equal(online_window_init(&w, 4, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "capacity"));
}

/* Zero signatures never enter; with none, no refit is due. */
static void test_zero_signatures(void **state)
{
    (void)state;
    online_window w;
    online_clock c;
    char err[256];
    assert_int_equal(online_window_init(&w, 4, 10, err, sizeof err), 0);
    assert_int_equal(online_clock_init(&c, 2.5, 5, err, sizeof err), 0);
    float z[4] = {0};
    for (int i = 0; i < 20; i++)
        assert_int_equal(online_window_push(&w, i, z), 0);
    assert_int_equal(w.n, 0);
    assert_int_equal(online_clock_due(&c, 100, w.n, 1), 0);
    float *rows = (float *)1;
    assert_int_equal(online_window_copy(&w, &rows), 0);
    assert_null(rows);
    online_stats st;
    float out[4];
    assert_int_equal(online_refit(NULL, 0, 4, z, 1, 1, out, NULL, NULL, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs at least 1"));
    online_window_free(&w);
}

static void test_clock(void **state)
{
    (void)state;
    online_clock c;
    char err[256];
    assert_int_equal(online_clock_init(&c, 0, 5, err, sizeof err), -1);
    assert_int_equal(online_clock_init(&c, 2.5, NAN, err, sizeof err), -1);
    assert_int_equal(online_clock_init(&c, 2.5, 5, err, sizeof err), 0);
    assert_int_equal(online_clock_due(&c, 10, 100, 4), 0);   /* nothing seen */
    online_clock_seen(&c, 1.0);
    online_clock_seen(&c, 2.0);                               /* first stays 1 */
    assert_int_equal(online_clock_due(&c, 5.9, 100, 4), 0);  /* first window not full */
    assert_int_equal(online_clock_due(&c, 6.0, 3, 4), 0);    /* fewer rows than K */
    assert_int_equal(online_clock_due(&c, 6.0, 4, 4), 1);
    online_clock_started(&c, 6.0);
    assert_int_equal(online_clock_due(&c, 8.4, 100, 4), 0);
    assert_int_equal(online_clock_due(&c, 8.5, 100, 4), 1);
    online_clock_reset(&c);
    assert_int_equal(online_clock_due(&c, 100, 100, 4), 0);
}

static int next_perm(int *a, int n)
{
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1])
        i--;
    if (i < 0)
        return 0;
    int j = n - 1;
    while (a[j] <= a[i])
        j--;
    int t = a[i]; a[i] = a[j]; a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l]; a[l] = a[r]; a[r] = t;
    }
    return 1;
}

/* The Hungarian alignment against every permutation (K <= 6). */
static void test_align_brute_force(void **state)
{
    (void)state;
    char err[256];
    for (int K = 1; K <= 6; K++)
        for (uint64_t seed = 1; seed <= 5; seed++) {
            int d = 7;
            float *a = centres(K, d, seed), *b = centres(K, d, seed + 100);
            int perm[6], p[6];
            double cost;
            assert_int_equal(online_align(a, b, K, (size_t)d, perm, &cost, err, sizeof err), 0);
            double best = INFINITY;
            for (int i = 0; i < K; i++)
                p[i] = i;
            do {
                double c = 0;
                for (int i = 0; i < K; i++)
                    c += 1 - dotf(a + (size_t)i * d, b + (size_t)p[i] * d, d);
                if (c < best)
                    best = c;
            } while (next_perm(p, K));
            double got = 0;
            for (int i = 0; i < K; i++)
                got += 1 - dotf(a + (size_t)i * d, b + (size_t)perm[i] * d, d);
            assert_true(fabs(got - best) < 1e-9);
            assert_true(fabs(cost - best) < 1e-6);
            free(a);
            free(b);
        }
}

/* Workers keep their identities: the current centroids are the true
 * centres in a shuffled order; after a refit on rows around the centres,
 * worker i's new centroid is still the centre it had (not the fit's
 * order, which follows the rows). */
static void test_refit_keeps_identities(void **state)
{
    (void)state;
    enum { K = 8, D = 32, N = 400 };
    char err[256];
    float *c = centres(K, D, 7);
    float *x = around(c, K, D, N, 0.05, 8);
    int shuffle[K] = {5, 2, 7, 0, 3, 6, 1, 4};
    float cur[K * D], out[K * D];
    for (int i = 0; i < K; i++) {
        memcpy(cur + i * D, c + (size_t)shuffle[i] * D, D * sizeof *cur);
        cur[i * D] += 0.2f;      /* a stale centroid: off the centre */
        unit(cur + i * D, D);
    }
    int sizes[K], perm[K];
    online_stats st;
    assert_int_equal(online_refit(x, N, D, cur, K, 1, out, sizes, perm, &st, err, sizeof err), 0);
    assert_int_equal(st.rows, N);
    for (int i = 0; i < K; i++) {
        assert_true(dotf(out + i * D, c + (size_t)shuffle[i] * D, D) > 0.99);
        assert_int_equal(sizes[i], N / K);
        assert_true(fabs(dotf(out + i * D, out + i * D, D) - 1) < 1e-5);
    }
    assert_true(st.mean_sim > 0.8);
    /* a second refit from the refitted centroids moves nothing */
    float again[K * D];
    assert_int_equal(online_refit(x, N, D, out, K, 1, again, NULL, perm, &st, err, sizeof err), 0);
    for (int i = 0; i < K; i++)
        assert_int_equal(perm[i], i);
    assert_true(st.max_move < 1e-6);
    free(c);
    free(x);
}

/* The refit is K-means warm-started from the current centroids, then
 * aligned: the same numbers by the long way round. */
static void test_refit_is_warm_kmeans(void **state)
{
    (void)state;
    enum { K = 5, D = 16, N = 123 };
    char err[256];
    float *c = centres(K, D, 21), *cur = centres(K, D, 22);
    float *x = around(c, K, D, N, 0.3, 23);
    kmeans_opts o;
    kmeans_opts_default(&o, K);
    o.init_centroids = cur;
    kmeans_result km;
    assert_int_equal(kmeans_fit(x, N, D, &o, &km, err, sizeof err), 0);
    int perm[K];
    assert_int_equal(online_align(cur, km.centroids, K, D, perm, NULL, err, sizeof err), 0);
    float out[K * D];
    int sizes[K];
    online_stats st;
    assert_int_equal(online_refit(x, N, D, cur, K, 2, out, sizes, NULL, &st, err, sizeof err), 0);
    for (int i = 0; i < K; i++) {
        assert_memory_equal(out + i * D, km.centroids + (size_t)perm[i] * D, D * sizeof *out);
        assert_int_equal(sizes[i], km.sizes[perm[i]]);
        assert_true(sizes[i] <= (N + K - 1) / K);
    }
    assert_true(fabs(st.objective - km.objective) < 1e-9);
    kmeans_result_free(&km);
    free(c); free(cur); free(x);
}

/* K = 1: the one centroid is the normalised mean of the window. */
static void test_k_one(void **state)
{
    (void)state;
    enum { D = 9, N = 50 };
    char err[256];
    float *c = centres(3, D, 31), *x = around(c, 3, D, N, 0.4, 32);
    float cur[D], out[D];
    memcpy(cur, c, sizeof cur);
    double mean[D] = {0};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            mean[j] += x[(size_t)i * D + j];
    double nrm = 0;
    for (int j = 0; j < D; j++)
        nrm += mean[j] * mean[j];
    nrm = sqrt(nrm);
    online_stats st;
    int sizes[1];
    assert_int_equal(online_refit(x, N, D, cur, 1, 1, out, sizes, NULL, &st, err, sizeof err), 0);
    assert_int_equal(sizes[0], N);
    for (int j = 0; j < D; j++)
        assert_true(fabs(out[j] - mean[j] / nrm) < 1e-6);
    free(c);
    free(x);
}

/* Fewer signatures than K: refused (the clock never asks for it). */
static void test_fewer_than_k(void **state)
{
    (void)state;
    enum { K = 4, D = 6 };
    char err[256];
    float *c = centres(K, D, 41), *x = around(c, K, D, 3, 0.1, 42);
    float out[K * D];
    online_stats st;
    assert_int_equal(online_refit(x, 3, D, c, K, 1, out, NULL, NULL, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "3 signatures"));
    online_clock clk;
    assert_int_equal(online_clock_init(&clk, 1, 1, err, sizeof err), 0);
    online_clock_seen(&clk, 0);
    assert_int_equal(online_clock_due(&clk, 10, 3, K), 0);
    assert_int_equal(online_clock_due(&clk, 10, 4, K), 1);
    free(c);
    free(x);
}

/* A worker whose centroid points away from every signature gets none
 * (the others have room) and keeps its old centroid exactly. */
static void test_empty_cluster_keeps_centroid(void **state)
{
    (void)state;
    enum { K = 3, D = 4, N = 4 };
    char err[256];
    float x[N * D] = {1, 0.1f, 0, 0,  1, -0.1f, 0, 0,  0, 0, 1, 0.1f,  0, 0, 1, -0.1f};
    for (int i = 0; i < N; i++)
        unit(x + i * D, D);
    float cur[K * D] = {1, 0, 0, 0,  0, 0, 1, 0,  -0.5f, 0, -0.5f, 0.7f};
    for (int i = 0; i < K; i++)
        unit(cur + i * D, D);
    float out[K * D];
    int sizes[K];
    online_stats st;
    assert_int_equal(online_refit(x, N, D, cur, K, 1, out, sizes, NULL, &st, err, sizeof err), 0);
    assert_int_equal(sizes[0], 2);
    assert_int_equal(sizes[1], 2);
    assert_int_equal(sizes[2], 0);
    assert_memory_equal(out + 2 * D, cur + 2 * D, D * sizeof *out);
    assert_true(dotf(out, cur, D) > 0.99 && dotf(out + D, cur + D, D) > 0.99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_evicts_by_time),
        cmocka_unit_test(test_window_capacity),
        cmocka_unit_test(test_zero_signatures),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_align_brute_force),
        cmocka_unit_test(test_refit_keeps_identities),
        cmocka_unit_test(test_refit_is_warm_kmeans),
        cmocka_unit_test(test_k_one),
        cmocka_unit_test(test_fewer_than_k),
        cmocka_unit_test(test_empty_cluster_keeps_centroid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
