/* test_drift.c - the drift statistic's baseline and alarm (drift.h): the
 * nearest shares count the argmax with the lowest index on a tie; the
 * threshold is the 99% point of the TVD's sampling noise, so samples of
 * the baseline's own distribution pass it about 1% of the time (exact
 * sampler and Gaussian limit alike), a shifted distribution nearly always,
 * and the same (n, p) gives the same answer (seeded, cached). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "drift.h"
#include "rng.h"

/* The TVD of one multinomial sample of size n from q against p, drawn
 * independently of drift.c (its own generator, linear search). */
static double sample_tvd(rng_t *g, int64_t n, const double *q, const double *p, int K)
{
    int64_t cnt[16] = {0};
    for (int64_t i = 0; i < n; i++) {
        double u = rng_uniform(g), c = 0;
        int k = 0;
        while (k < K - 1 && u >= (c += q[k]))
            k++;
        cnt[k]++;
    }
    double share[16];
    for (int k = 0; k < K; k++)
        share[k] = (double)cnt[k] / (double)n;
    return drift_tvd(share, p, K);
}

/* Passes of `reps` windows of size n from q against p's threshold. */
static int passes(int64_t n, const double *q, const double *p, int K, int reps, uint64_t seed)
{
    double thr = drift_tvd_threshold(n, p, K);
    assert_true(thr > 0 && thr < 1);
    rng_t g;
    rng_seed(&g, seed);
    int over = 0;
    for (int i = 0; i < reps; i++)
        over += sample_tvd(&g, n, q, p, K) > thr;
    return over;
}

/* The case: 3 domains over K = 4, the shares of the calibration
 * rows' nearest centroids (0.312/0.294/0.305/0.089). */
static const double P4[4] = {0.312, 0.294, 0.305, 0.089};

static void test_threshold_null_exact(void **state)
{
    (void)state;
    /* 3000 windows of the default 1024, drawn exactly: about 30 pass
     * (1%); a binomial of mean 30 lies in [12, 52] with probability
     * > 0.999 */
    int over = passes(1024, P4, P4, 4, 3000, 11);
    if (over < 12 || over > 52)
        fail_msg("%d of 3000 calibration-like windows passed the threshold, expected ~30", over);
    /* a small window (coarse TVDs, the exact sampler): still at most
     * about 1% */
    over = passes(40, P4, P4, 4, 3000, 12);
    if (over > 52)
        fail_msg("%d of 3000 windows of 40 passed, expected <= ~30", over);
}

static void test_threshold_null_gauss(void **state)
{
    (void)state;
    /* above DRIFT_EXACT_MAX the Gaussian limit; exact samples test it
     * (so does test_threshold_null_exact's n = 1024) */
    const double p[3] = {0.5, 0.3, 0.2};
    int over = passes(20000, p, p, 3, 600, 13);
    if (over > 20)   /* mean 6 */
        fail_msg("%d of 600 windows of 20000 passed, expected ~6", over);
    assert_true(over >= 1 || passes(20000, p, p, 3, 600, 14) >= 1);
}

static void test_threshold_shift(void **state)
{
    (void)state;
    /* traffic of one domain only: nearly all of it on one centroid */
    const double one[4] = {0.85, 0.05, 0.05, 0.05};
    assert_int_equal(passes(1024, one, P4, 4, 200, 21), 200);
    /* a modest shift (0.08 of the mass moved; the threshold at 1024 is
     * about 0.046) */
    const double mod[4] = {0.392, 0.294, 0.305, 0.009};
    assert_true(passes(1024, mod, P4, 4, 200, 22) >= 190);
}

static void test_threshold_laws(void **state)
{
    (void)state;
    double a = drift_tvd_threshold(1024, P4, 4), b = drift_tvd_threshold(1024, P4, 4);
    assert_true(a == b);   /* seeded: one answer */
    /* sampling noise shrinks like 1/sqrt(n) */
    double t256 = drift_tvd_threshold(256, P4, 4), t4096 = drift_tvd_threshold(4096, P4, 4);
    assert_true(t256 > a && a > t4096);
    assert_true(fabs(t256 / t4096 - 4) < 0.6);
    /* the exact sampler and the Gaussian limit agree where they meet */
    double t256e = drift_tvd_threshold(DRIFT_EXACT_MAX, P4, 4),
           t257g = drift_tvd_threshold(DRIFT_EXACT_MAX + 1, P4, 4);
    assert_true(fabs(t257g - t256e) / t256e < 0.04);
    /* no threshold without a window or a distribution */
    assert_true(isnan(drift_tvd_threshold(0, P4, 4)));
    const double bad[2] = {0.5, 0.6}, neg[2] = {1.5, -0.5};
    assert_true(isnan(drift_tvd_threshold(10, bad, 2)));
    assert_true(isnan(drift_tvd_threshold(10, neg, 2)));
    /* K = 1: never any noise */
    const double one[1] = {1};
    assert_true(drift_tvd_threshold(10, one, 1) == 0);
}

static void test_nearest_shares(void **state)
{
    (void)state;
    /* centroids e0, e1, (e0 + e1)/sqrt 2 in 2-D; rows on each axis and
     * one exactly between e0 and e1 (a tie: the lowest index, 0) */
    float c[6] = {1, 0, 0, 1, (float)M_SQRT1_2, (float)M_SQRT1_2};
    float x[8] = {1, 0, 0, 1, 0.96f, 0.28f, (float)M_SQRT1_2, (float)M_SQRT1_2};
    double share[3];
    assert_int_equal(drift_nearest_shares(c, 3, 2, x, 4, share), 0);
    assert_true(share[0] == 0.5 && share[1] == 0.25 && share[2] == 0.25);
    float tie[2] = {1, 0}, c2[4] = {1, 0, 1, 0};
    assert_int_equal(drift_nearest(c2, 2, 2, tie), 0);
    assert_int_equal(drift_nearest_shares(c, 3, 2, x, 0, share), -1);
    const double a[3] = {0.5, 0.25, 0.25}, b[3] = {0.25, 0.25, 0.5};
    assert_true(fabs(drift_tvd(a, b, 3) - 0.25) < 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threshold_null_exact),
        cmocka_unit_test(test_threshold_null_gauss),
        cmocka_unit_test(test_threshold_shift),
        cmocka_unit_test(test_threshold_laws),
        cmocka_unit_test(test_nearest_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
