/* test_model_align.c - a new model lined up with the live one
 * (model_align.h): the matching against a brute force over every
 * permutation (K <= 6, random noisy permutations of the live centroids
 * and unrelated ones), the applied model (rows, sizes and names in the
 * live order; the candidate untouched), a geometry or K mismatch refused
 * with MODEL_ALIGN_MISMATCH naming both, a changed mask compared over the
 * shared layers only, a changed idf and variant named, and no shared
 * layer keeping the file's order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_align.h"
#include "rng.h"

static void unit(float *v, size_t d)
{
    double s = 0;
    for (size_t j = 0; j < d; j++)
        s += (double)v[j] * v[j];
    for (size_t j = 0; j < d; j++)
        v[j] = (float)(v[j] / sqrt(s));
}

/* A count model over the given layers with random unit centroids. */
static model_t *random_model(int L, int E, int K, const int *mask, int n_mask, uint64_t seed)
{
    char err[256];
    model_t *m = model_new_raw(SIG_COUNT, L, E, 2, K, mask, n_mask, NULL, err, sizeof err);
    assert_non_null(m);
    rng_t r;
    rng_seed(&r, seed);
    size_t dim = sig_dim(&m->recipe);
    for (size_t i = 0; i < (size_t)K * dim; i++)
        m->centroids[i] = (float)fabs(rng_normal(&r));
    for (int k = 0; k < K; k++)
        unit(m->centroids + (size_t)k * dim, dim);
    return m;
}

static double dot(const float *a, const float *b, size_t d)
{
    double s = 0;
    for (size_t j = 0; j < d; j++)
        s += (double)a[j] * b[j];
    return s;
}

/* The best total cosine over every permutation of K (Heap's order by
 * recursion). */
static void best_perm(const model_t *live, const model_t *c, int *p, int at, double *best)
{
    int K = live->K;
    size_t d = sig_dim(&live->recipe);
    if (at == K) {
        double s = 0;
        for (int i = 0; i < K; i++)
            s += dot(live->centroids + (size_t)i * d, c->centroids + (size_t)p[i] * d, d);
        if (s > *best)
            *best = s;
        return;
    }
    for (int i = at; i < K; i++) {
        int t = p[at]; p[at] = p[i]; p[i] = t;
        best_perm(live, c, p, at + 1, best);
        t = p[at]; p[at] = p[i]; p[i] = t;
    }
}

static void test_matches_brute_force(void **state)
{
    (void)state;
    char err[256];
    for (int K = 1; K <= 6; K++)
        for (uint64_t seed = 1; seed <= 20; seed++) {
            int layers[3] = {0, 2, 3};
            model_t *live = random_model(4, 8, K, layers, 3, seed);
            /* half the cases: a noisy shuffle of the live centroids;
             * the others: unrelated centroids */
            model_t *c = random_model(4, 8, K, layers, 3, seed + 1000);
            size_t d = sig_dim(&live->recipe);
            int shuffle[6];
            rng_t r;
            rng_seed(&r, seed * 7 + (uint64_t)K);
            for (int i = 0; i < K; i++)
                shuffle[i] = i;
            for (int i = K - 1; i > 0; i--) {
                int j = (int)rng_below(&r, (uint64_t)i + 1), t = shuffle[i];
                shuffle[i] = shuffle[j];
                shuffle[j] = t;
            }
            if (seed % 2)
                for (int i = 0; i < K; i++) {
                    float *row = c->centroids + (size_t)shuffle[i] * d;
                    for (size_t j = 0; j < d; j++)
                        row[j] = live->centroids[(size_t)i * d + j] + 0.3f * row[j];
                    unit(row, d);
                }
            model_align a;
            assert_int_equal(model_align_plan(live, c, &a, err, sizeof err), 0);
            int p[6] = {0, 1, 2, 3, 4, 5};
            double best = -1e9, got = 0;
            best_perm(live, c, p, 0, &best);
            for (int i = 0; i < K; i++) {
                double x = dot(live->centroids + (size_t)i * d,
                               c->centroids + (size_t)a.perm[i] * d, d);
                assert_true(fabs(x - a.cos[i]) < 1e-5);
                got += x;
            }
            assert_true(fabs(got - best) < 1e-5);
            assert_true(fabs(a.cost - (K - got)) < 1e-4);
            if (seed % 2)
                for (int i = 0; i < K; i++)
                    assert_int_equal(a.perm[i], shuffle[i]);
            assert_int_equal(a.recipe_changed, 0);
            assert_int_equal(a.shared_layers, 3);
            model_free(live);
            model_free(c);
        }
}

static void test_apply_orders_rows_sizes_names(void **state)
{
    (void)state;
    char err[256];
    int all[2] = {0, 1};
    model_t *live = random_model(2, 4, 3, all, 2, 3), *c = random_model(2, 4, 3, all, 2, 4);
    const char *names[3] = {"dec-a", "dec-b", "dec-c"};
    int64_t sizes[3] = {10, 20, 30};
    assert_int_equal(model_set_workers(live, names, 3, err, sizeof err), 0);
    assert_int_equal(model_set_sizes(c, sizes, err, sizeof err), 0);
    const double near[3] = {0.5, 0.3, 0.2};
    assert_int_equal(model_set_nearest_share(c, near, err, sizeof err), 0);
    model_align a;
    assert_int_equal(model_align_plan(live, c, &a, err, sizeof err), 0);
    model_t *m = model_align_apply(live, c, &a, err, sizeof err);
    assert_non_null(m);
    size_t d = sig_dim(&c->recipe);
    for (int i = 0; i < 3; i++) {
        assert_memory_equal(m->centroids + i * d, c->centroids + (size_t)a.perm[i] * d,
                            d * sizeof(float));
        assert_int_equal(m->sizes[i], sizes[a.perm[i]]);
        assert_true(m->nearest_share[i] == near[a.perm[i]]);
        assert_string_equal(m->workers[i], names[i]);
        char own[16];
        snprintf(own, sizeof own, "w%d", i);
        assert_string_equal(c->workers[i], own);
    }
    assert_int_equal(m->recipe.variant, c->recipe.variant);
    assert_int_equal(m->k, c->k);
    model_free(m);
    model_free(live);
    model_free(c);
}

static void test_mismatch(void **state)
{
    (void)state;
    char err[256];
    int all[4] = {0, 1, 2, 3};
    model_t *live = random_model(4, 8, 4, all, 4, 1);
    model_t *k3 = random_model(4, 8, 3, all, 4, 2), *e16 = random_model(4, 16, 4, all, 4, 3);
    model_align a;
    assert_int_equal(model_align_plan(live, k3, &a, err, sizeof err), MODEL_ALIGN_MISMATCH);
    assert_non_null(strstr(err, "K=3"));
    assert_non_null(strstr(err, "serves L=4 E=8 K=4"));
    assert_int_equal(model_align_plan(live, e16, &a, err, sizeof err), MODEL_ALIGN_MISMATCH);
    assert_non_null(strstr(err, "E=16"));
    model_free(live);
    model_free(k3);
    model_free(e16);
}

/* Another mask: only the shared layers decide. The candidate's rows are
 * the live rows (shuffled) on the shared layers and noise on its own. */
static void test_changed_mask_shared_layers(void **state)
{
    (void)state;
    char err[256];
    int lm[3] = {0, 1, 2}, cm[3] = {1, 2, 3};
    int K = 4, E = 8, shuffle[4] = {2, 0, 3, 1};
    model_t *live = random_model(4, E, K, lm, 3, 11), *c = random_model(4, E, K, cm, 3, 12);
    for (int i = 0; i < K; i++) {
        float *row = c->centroids + (size_t)shuffle[i] * 3 * E;
        memcpy(row, live->centroids + (size_t)i * 3 * E + E, 2 * (size_t)E * sizeof *row);
        for (int j = 2 * E; j < 3 * E; j++)
            row[j] = 5.0f;       /* the layer only the candidate holds */
        unit(row, 3 * (size_t)E);
    }
    model_align a;
    assert_int_equal(model_align_plan(live, c, &a, err, sizeof err), 0);
    assert_int_equal(a.shared_layers, 2);
    assert_true(a.recipe_changed);
    assert_non_null(strstr(a.what_changed, "layers 0,1,2 -> 1,2,3"));
    for (int i = 0; i < K; i++) {
        assert_int_equal(a.perm[i], shuffle[i]);
        assert_true(a.cos[i] > 0.9999);   /* over layers 1 and 2 they are the same */
    }
    /* no layer in common: the file's order, said */
    int other[1] = {3}, first[1] = {0};
    model_t *x = random_model(4, E, K, other, 1, 13), *y = random_model(4, E, K, first, 1, 14);
    assert_int_equal(model_align_plan(y, x, &a, err, sizeof err), 0);
    assert_int_equal(a.shared_layers, 0);
    for (int i = 0; i < K; i++)
        assert_int_equal(a.perm[i], i);
    model_free(live);
    model_free(c);
    model_free(x);
    model_free(y);
}

static void test_variant_and_idf_named(void **state)
{
    (void)state;
    char err[256];
    float idf[2 * 4];
    for (int i = 0; i < 8; i++)
        idf[i] = 0.5f + (float)i;
    int mask[2] = {0, 1};
    model_t *live = model_new_raw(SIG_COUNT_IDF, 2, 4, 2, 2, mask, 2, idf, err, sizeof err);
    idf[3] += 1;
    model_t *c = model_new_raw(SIG_COUNT_IDF, 2, 4, 2, 2, mask, 2, idf, err, sizeof err);
    model_t *v = model_new_raw(SIG_COUNT, 2, 4, 3, 2, mask, 2, NULL, err, sizeof err);
    assert_non_null(live);
    assert_non_null(c);
    assert_non_null(v);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 8; j++)
            live->centroids[k * 8 + j] = c->centroids[k * 8 + j] =
                v->centroids[k * 8 + j] = j == k ? 1.0f : 0.0f;
    model_align a;
    assert_int_equal(model_align_plan(live, c, &a, err, sizeof err), 0);
    assert_string_equal(a.what_changed, "idf reweighted");
    assert_int_equal(model_align_plan(live, v, &a, err, sizeof err), 0);
    assert_string_equal(a.what_changed, "variant count_idf -> count; top-k 2 -> 3");
    assert_int_equal(model_align_plan(live, live, &a, err, sizeof err), 0);
    assert_int_equal(a.recipe_changed, 0);
    assert_string_equal(a.what_changed, "");
    assert_int_equal(a.moved, 0);
    model_free(live);
    model_free(c);
    model_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_brute_force),
        cmocka_unit_test(test_apply_orders_rows_sizes_names),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_changed_mask_shared_layers),
        cmocka_unit_test(test_variant_and_idf_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
