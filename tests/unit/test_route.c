/* test_route.c - routing decisions (route.h).
 *
 * The band rule on hand-made similarities (ties, the min-two rule, tau = 0,
 * tau >= 2 against an independent join-shortest-queue), similarities
 * computed from centroids against a double-precision dot product, the zero
 * signature, every baseline's behaviour and determinism, the domain pools,
 * and the refusal of bad parameters. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"
#include "route.h"

static route_decision d; /* large: keep it off the stack */

static int band(const double *sim, int K, double tau, int min2, const int64_t *load)
{
    return route_band_decide(sim, K, tau, min2, load, &d);
}

static void test_band_jsq_in_band(void **state)
{
    (void)state;
    double sim[] = {0.90, 0.85, 0.50, 0.88};
    int64_t load[] = {5, 3, 0, 3};
    /* band = {0, 1, 3} (>= 0.80); 2 is idle but outside; 1 and 3 tie on
     * load: the lower index wins */
    assert_int_equal(band(sim, 4, 0.1, 1, load), 1);
    assert_int_equal(d.rule, RULE_BAND_JSQ);
    assert_int_equal(d.n_cand, 3);
    assert_int_equal(d.cand[0], 0);
    assert_int_equal(d.cand[1], 1);
    assert_int_equal(d.cand[2], 3);
    assert_true(d.has_sim);
    assert_true(fabs(d.sim_max - 0.90) < 1e-12);
    assert_int_equal(d.load[0], 5);
    assert_string_equal(route_rule_name(d.rule), "band-jsq");
}

static void test_tau0_ties_and_locality(void **state)
{
    (void)state;
    double tie[] = {0.7, 0.9, 0.9, 0.1};
    int64_t load[] = {0, 4, 2, 0};
    /* tau = 0: exactly the maximal similarities; the tie makes a band of 2 */
    assert_int_equal(band(tie, 4, 0.0, 1, load), 2);
    assert_int_equal(d.rule, RULE_BAND_JSQ);
    assert_int_equal(d.n_cand, 2);
    /* unique maximum, tau = 0: pure locality, min-two does not apply */
    double one[] = {0.7, 0.95, 0.9, 0.1};
    assert_int_equal(band(one, 4, 0.0, 1, load), 1);
    assert_int_equal(d.rule, RULE_LOCALITY);
    assert_int_equal(d.n_cand, 1);
    assert_string_equal(route_rule_name(d.rule), "locality");
}

static void test_min2(void **state)
{
    (void)state;
    double sim[] = {0.9, 0.5, 0.7, 0.2};
    int64_t load[] = {3, 0, 1, 0};
    /* band {0} alone; the second most similar (2) joins; 2 is less loaded */
    assert_int_equal(band(sim, 4, 0.1, 1, load), 2);
    assert_int_equal(d.rule, RULE_MIN2);
    assert_int_equal(d.n_cand, 2);
    assert_int_equal(d.cand[0], 0);
    assert_int_equal(d.cand[1], 2);
    /* equal loads: the lower index */
    int64_t even[] = {1, 0, 1, 0};
    assert_int_equal(band(sim, 4, 0.1, 1, even), 0);
    /* a tie for second place: the lower index joins */
    double sec[] = {0.2, 0.6, 0.9, 0.6};
    int64_t l2[] = {0, 0, 9, 0};
    assert_int_equal(band(sec, 4, 0.1, 1, l2), 1);
    assert_int_equal(d.cand[0], 1);
    assert_int_equal(d.cand[1], 2);
    /* turned off: the most similar, however loaded */
    assert_int_equal(band(sim, 4, 0.1, 0, load), 0);
    assert_int_equal(d.rule, RULE_LOCALITY);
    /* K = 1: nothing can join */
    assert_int_equal(band(sim, 1, 0.1, 1, load), 0);
    assert_int_equal(d.rule, RULE_LOCALITY);
}

/* Independent JSQ: fewest in-flight, lowest index. */
static int jsq_ref(const int64_t *load, int K)
{
    int b = 0;
    for (int k = 1; k < K; k++)
        if (load[k] < load[b])
            b = k;
    return b;
}

static void test_wide_tau_is_jsq(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 7);
    route_policy jsq;
    char err[ELDR_ERRLEN];
    for (int it = 0; it < 2000; it++) {
        int K = 1 + (int)rng_below(&r, 16);
        double sim[16];
        int64_t load[16];
        for (int k = 0; k < K; k++) {
            sim[k] = 2 * rng_uniform(&r) - 1;
            load[k] = (int64_t)rng_below(&r, 6);
        }
        sim[rng_below(&r, K)] = -1; /* the extremes of the cosine */
        sim[rng_below(&r, K)] = 1;
        double tau = it % 2 ? 2.0 : 5.0;
        int got = band(sim, K, tau, 1, load);
        assert_int_equal(got, jsq_ref(load, K));
        assert_int_equal(d.n_cand, K);
        /* the jsq baseline agrees whenever the minimum is unique */
        int nmin = 0;
        for (int k = 0; k < K; k++)
            nmin += load[k] == load[got];
        if (nmin == 1) {
            assert_int_equal(route_policy_init(&jsq, ROUTE_JSQ, K, it, err, sizeof err), 0);
            assert_int_equal(route_decide(&jsq, NULL, -1, load, &d), got);
            route_policy_free(&jsq);
        }
    }
}

/* route_dot (its AVX2 or baseline build, whichever this CPU runs) gives
 * the scalar twin's double to the bit: eight float partial sums (element
 * i into i mod 8 below n - n mod 8, each a float multiply then a float
 * add), added in double in lane order, then the tail in double. Float
 * sums depend on their order, so a build that fused, reordered or
 * widened them would differ here. */
static void test_dot_bits_against_scalar(void **state)
{
    (void)state;
    rng_t g;
    rng_seed(&g, 17);
    static float a[3000], b[3000];
    for (int it = 0; it < 400; it++) {
        size_t n = rng_below(&g, 3000);
        for (size_t i = 0; i < n; i++) {
            a[i] = (float)((double)rng_below(&g, 2000001) / 1e6 - 1.0);
            b[i] = (float)((double)rng_below(&g, 2000001) / 1e3 - 1000.0);
        }
        float acc[8] = {0};
        size_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) {
                float p = a[i + j] * b[i + j];
                acc[j] = acc[j] + p;
            }
        double want = 0;
        for (int j = 0; j < 8; j++)
            want += acc[j];
        for (; i < n; i++)
            want += (double)a[i] * b[i];
        double got = route_dot(a, b, n);
        if (memcmp(&got, &want, sizeof got))
            fail_msg("n=%zu: route_dot %.17g, scalar %.17g", n, got, want);
    }
}

static void test_eldr_centroids(void **state)
{
    (void)state;
    enum { K = 6, D = 300 };
    static float mu[K * D], sig[D];
    rng_t r;
    rng_seed(&r, 3);
    for (int k = 0; k < K; k++) {
        double s = 0;
        for (int j = 0; j < D; j++) {
            double v = rng_normal(&r);
            mu[k * D + j] = (float)v;
            s += v * v;
        }
        for (int j = 0; j < D; j++)
            mu[k * D + j] = (float)(mu[k * D + j] / sqrt(s));
    }
    /* a signature near centroid 4 */
    double s = 0;
    for (int j = 0; j < D; j++) {
        sig[j] = mu[4 * D + j] + 0.02f * (float)rng_normal(&r);
        s += (double)sig[j] * sig[j];
    }
    for (int j = 0; j < D; j++)
        sig[j] = (float)(sig[j] / sqrt(s));
    route_policy p;
    char err[ELDR_ERRLEN];
    assert_int_equal(route_policy_init(&p, ROUTE_ELDR, K, 1, err, sizeof err), 0);
    assert_int_equal(route_policy_set_centroids(&p, mu, D, 0.0, 1, err, sizeof err), 0);
    int64_t load[K] = {0};
    load[4] = 100;
    assert_int_equal(route_decide(&p, sig, -1, load, &d), 4); /* tau 0: locality */
    assert_int_equal(d.rule, RULE_LOCALITY);
    for (int k = 0; k < K; k++) {
        double dot = 0;
        for (int j = 0; j < D; j++)
            dot += (double)sig[j] * mu[k * D + j];
        assert_true(fabs(d.sim[k] - dot) < 1e-5);
    }
    /* tau 0.1 with min-two: the loaded worker 4 yields to the runner-up */
    assert_int_equal(route_policy_set_centroids(&p, mu, D, 0.1, 1, err, sizeof err), 0);
    int w = route_decide(&p, sig, -1, load, &d);
    assert_int_not_equal(w, 4);
    assert_true(d.rule == RULE_MIN2 || d.rule == RULE_BAND_JSQ);
    /* a zero signature has no locality: least loaded of all */
    static float zero[D];
    int64_t l2[K] = {3, 2, 2, 5, 1, 1};
    assert_int_equal(route_decide(&p, zero, -1, l2, &d), 4);
    assert_int_equal(d.rule, RULE_NO_SIGNATURE);
    assert_string_equal(route_rule_name(d.rule), "no-signature");
    route_policy_free(&p);
}

static void test_rr_and_random(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    route_policy p, q;
    int64_t load[5] = {9, 0, 0, 0, 0};
    assert_int_equal(route_policy_init(&p, ROUTE_RR, 5, 1, err, sizeof err), 0);
    for (int i = 0; i < 12; i++)
        assert_int_equal(route_decide(&p, NULL, -1, load, &d), i % 5);
    assert_int_equal(d.rule, RULE_RR);
    route_policy_free(&p);

    /* random ignores load, covers every worker near uniformly, and a seed
     * repeats it */
    assert_int_equal(route_policy_init(&p, ROUTE_RANDOM, 5, 42, err, sizeof err), 0);
    assert_int_equal(route_policy_init(&q, ROUTE_RANDOM, 5, 42, err, sizeof err), 0);
    int cnt[5] = {0};
    int n = 50000;
    for (int i = 0; i < n; i++) {
        int a = route_decide(&p, NULL, -1, load, &d);
        assert_int_equal(route_decide(&q, NULL, -1, load, &d), a);
        cnt[a]++;
    }
    for (int k = 0; k < 5; k++)
        assert_true(fabs(cnt[k] - n / 5.0) < 5 * sqrt(n * 0.2 * 0.8));
    route_policy_free(&p);
    route_policy_free(&q);
}

static void test_jsq_ties(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    route_policy p, q;
    int64_t load[6] = {2, 1, 3, 1, 1, 4};
    assert_int_equal(route_policy_init(&p, ROUTE_JSQ, 6, 5, err, sizeof err), 0);
    assert_int_equal(route_policy_init(&q, ROUTE_JSQ, 6, 6, err, sizeof err), 0);
    int cnt[6] = {0}, differ = 0, n = 30000;
    for (int i = 0; i < n; i++) {
        int a = route_decide(&p, NULL, -1, load, &d);
        differ += route_decide(&q, NULL, -1, load, &d) != a;
        cnt[a]++;
    }
    /* only the three least loaded, each about a third of the time */
    assert_int_equal(cnt[0] + cnt[2] + cnt[5], 0);
    for (int k = 1; k <= 4; k += k == 1 ? 2 : 1)
        assert_true(fabs(cnt[k] - n / 3.0) < 5 * sqrt(n * (1 / 3.0) * (2 / 3.0)));
    assert_true(differ > 0); /* another seed breaks ties otherwise */
    route_policy_free(&p);
    route_policy_free(&q);
}

static void test_p2c(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    route_policy p;
    int64_t load[4] = {3, 0, 2, 1};
    assert_int_equal(route_policy_init(&p, ROUTE_P2C, 4, 9, err, sizeof err), 0);
    int cnt[4] = {0}, n = 40000;
    for (int i = 0; i < n; i++) {
        int w = route_decide(&p, NULL, -1, load, &d);
        assert_int_equal(d.n_cand, 2);
        assert_true(d.cand[0] < d.cand[1]);
        int other = d.cand[0] == w ? d.cand[1] : d.cand[0];
        assert_true(d.cand[0] == w || d.cand[1] == w);
        assert_true(load[w] <= load[other]);
        cnt[w]++;
    }
    /* the most loaded never wins; the least loaded wins whenever drawn:
     * 3 of the 6 pairs, and worker 3 wins 2 of them (with 0 and 2) */
    assert_int_equal(cnt[0], 0);
    assert_true(fabs(cnt[1] - n / 2.0) < 0.02 * n);
    assert_true(fabs(cnt[3] - n / 3.0) < 0.02 * n);
    route_policy_free(&p);
    assert_int_equal(route_policy_init(&p, ROUTE_P2C, 1, 9, err, sizeof err), 0);
    assert_int_equal(route_decide(&p, NULL, -1, load, &d), 0);
    route_policy_free(&p);
}

static void test_domain_pools(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    route_policy p;
    double share[] = {0.6, 0.3, 0.1, 0.0};
    assert_int_equal(route_policy_init(&p, ROUTE_DOMAIN, 8, 1, err, sizeof err), 0);
    assert_int_equal(route_policy_set_domains(&p, share, 4, err, sizeof err), 0);
    /* 4.8, 2.4, 0.8 workers by share: 5, 2, 1 */
    assert_int_equal(p.pool_size[0], 5);
    assert_int_equal(p.pool_size[1], 2);
    assert_int_equal(p.pool_size[2], 1);
    assert_int_equal(p.pool_size[3], 0);
    assert_int_equal(p.pool_start[1], 5);
    assert_int_equal(p.pool_start[2], 7);
    int64_t load[8] = {4, 3, 3, 5, 6, 0, 1, 9};
    assert_int_equal(route_decide(&p, NULL, 0, load, &d), 1); /* JSQ in 0..4 */
    assert_int_equal(d.rule, RULE_DOMAIN);
    assert_int_equal(d.n_cand, 5);
    assert_int_equal(route_decide(&p, NULL, 1, load, &d), 5);
    assert_int_equal(route_decide(&p, NULL, 2, load, &d), 7); /* its only worker */
    assert_int_equal(route_decide(&p, NULL, 3, load, &d), 5); /* no pool */
    assert_int_equal(d.rule, RULE_UNLABELED);
    assert_int_equal(route_decide(&p, NULL, -1, load, &d), 5);
    assert_int_equal(d.rule, RULE_UNLABELED);
    route_policy_free(&p);

    /* fewer workers than labels: whole labels packed largest first onto
     * the least-loaded worker: {0.5} and {0.3, 0.2}; then 0.35 | 0.3 0.2 0.1
     * packs as {0.35, 0.1} and {0.3, 0.2} */
    double three[] = {0.3, 0.5, 0.2};
    assert_int_equal(route_policy_init(&p, ROUTE_DOMAIN, 2, 1, err, sizeof err), 0);
    assert_int_equal(route_policy_set_domains(&p, three, 3, err, sizeof err), 0);
    int64_t l2[2] = {0, 0};
    assert_int_equal(route_decide(&p, NULL, 1, l2, &d), 0);
    assert_int_equal(route_decide(&p, NULL, 0, l2, &d), 1);
    assert_int_equal(route_decide(&p, NULL, 2, l2, &d), 1);
    assert_int_equal(d.n_cand, 1);
    double four[] = {0.1, 0.3, 0.35, 0.2, 0.0};
    assert_int_equal(route_policy_set_domains(&p, four, 5, err, sizeof err), 0);
    assert_int_equal(route_decide(&p, NULL, 2, l2, &d), 0);
    assert_int_equal(route_decide(&p, NULL, 1, l2, &d), 1);
    assert_int_equal(route_decide(&p, NULL, 3, l2, &d), 1);
    assert_int_equal(route_decide(&p, NULL, 0, l2, &d), 0);
    assert_int_equal(route_decide(&p, NULL, 4, l2, &d), 0); /* no share: JSQ, index 0 */
    assert_int_equal(d.rule, RULE_UNLABELED);
    route_policy_free(&p);

    /* every label with a share keeps at least one worker however small */
    double skew[] = {0.97, 0.01, 0.01, 0.01};
    assert_int_equal(route_policy_init(&p, ROUTE_DOMAIN, 4, 1, err, sizeof err), 0);
    assert_int_equal(route_policy_set_domains(&p, skew, 4, err, sizeof err), 0);
    for (int j = 0; j < 4; j++)
        assert_int_equal(p.pool_size[j], 1);
    route_policy_free(&p);
}

static void test_bad_parameters(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    route_policy p;
    assert_int_equal(route_policy_init(&p, ROUTE_RR, 0, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "K = 0"));
    assert_int_equal(route_policy_init(&p, ROUTE_RR, ROUTE_MAX_WORKERS + 1, 1, err, sizeof err),
                     -1);
    assert_int_equal(route_policy_init(&p, ROUTE_ELDR, 2, 1, err, sizeof err), 0);
    float mu[4] = {1, 0, 0, 1};
    assert_int_equal(route_policy_set_centroids(&p, mu, 2, -0.1, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "tau"));
    assert_int_equal(route_policy_set_centroids(&p, mu, 2, NAN, 1, err, sizeof err), -1);
    route_policy_free(&p);
    assert_int_equal(route_policy_init(&p, ROUTE_DOMAIN, 2, 1, err, sizeof err), 0);
    double zero[2] = {0, 0}, neg[2] = {0.5, -1};
    assert_int_equal(route_policy_set_domains(&p, zero, 2, err, sizeof err), -1);
    assert_int_equal(route_policy_set_domains(&p, neg, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "label 1"));
    route_policy_free(&p);
    assert_int_equal(route_kind_parse("p2c"), ROUTE_P2C);
    assert_int_equal(route_kind_parse("nope"), -1);
    assert_string_equal(route_kind_name(ROUTE_DOMAIN), "domain");
    assert_true(route_kind_is_balancer(ROUTE_JSQ));
    assert_false(route_kind_is_balancer(ROUTE_ELDR));
    assert_false(route_kind_is_balancer(ROUTE_DOMAIN));
}

/* The band over eligible workers, against a brute force written from the
 * rule's text: the top, the band and the min-two second among the
 * eligible ones; least loaded of the candidates, lowest index on ties.
 * With every worker eligible it must be route_band_decide, field by
 * field. */
static int brute_band(const double *sim, int K, double tau, const int64_t *load,
                      const uint8_t *ok, int *rule)
{
    int top = -1, n_ok = 0;
    for (int k = 0; k < K; k++)
        if (ok[k]) {
            n_ok++;
            if (top < 0 || sim[k] > sim[top])
                top = k;
        }
    if (top < 0)
        return -1;
    int cand[64], n = 0;
    for (int k = 0; k < K; k++)
        if (ok[k] && sim[k] >= sim[top] - tau)
            cand[n++] = k;
    *rule = n >= 2 ? RULE_BAND_JSQ : RULE_LOCALITY;
    if (n == 1 && tau > 0 && n_ok >= 2) {
        int second = -1;
        for (int k = 0; k < K; k++)
            if (ok[k] && k != top && (second < 0 || sim[k] > sim[second]))
                second = k;
        cand[0] = top < second ? top : second;
        cand[1] = top < second ? second : top;
        n = 2;
        *rule = RULE_MIN2;
    }
    int best = cand[0];
    for (int i = 1; i < n; i++)
        if (load[cand[i]] < load[best])
            best = cand[i];
    return best;
}

static void test_band_among_eligible(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 19);
    for (int it = 0; it < 20000; it++) {
        int K = 1 + (int)rng_below(&r, 12);
        double sim[64], tau = (double)rng_below(&r, 5) / 10;
        int64_t load[64];
        uint8_t ok[64], all[64];
        for (int k = 0; k < K; k++) {
            sim[k] = (double)rng_below(&r, 7) / 7;   /* ties on purpose */
            load[k] = (int64_t)rng_below(&r, 4);
            ok[k] = rng_below(&r, 3) != 0;
            all[k] = 1;
        }
        route_decision a, b;
        int want_rule = -1;
        int want = brute_band(sim, K, tau, load, ok, &want_rule);
        int got = route_band_decide_among(sim, K, tau, 1, load, ok, &a);
        assert_int_equal(got, want);
        assert_int_equal(a.worker, want);
        if (want >= 0) {
            assert_int_equal(a.rule, want_rule);
            for (int i = 0; i < a.n_cand; i++)
                assert_true(ok[a.cand[i]]);
        }
        /* every worker eligible (a mask of ones, or NULL): the plain rule */
        route_band_decide(sim, K, tau, 1, load, &b);
        route_band_decide_among(sim, K, tau, 1, load, all, &a);
        assert_int_equal(a.worker, b.worker);
        assert_int_equal(a.rule, b.rule);
        assert_int_equal(a.n_cand, b.n_cand);
        assert_memory_equal(a.cand, b.cand, (size_t)b.n_cand * sizeof b.cand[0]);
        assert_true(a.sim_max == b.sim_max);
        route_band_decide_among(sim, K, tau, 1, load, NULL, &a);
        assert_int_equal(a.worker, b.worker);
        /* no signature: least loaded eligible, lowest index on ties */
        int ll = -1;
        for (int k = 0; k < K; k++)
            if (ok[k] && (ll < 0 || load[k] < load[ll]))
                ll = k;
        assert_int_equal(route_nosig_decide_among(K, load, ok, &a), ll);
        if (ll >= 0)
            assert_int_equal(a.rule, RULE_NO_SIGNATURE);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_band_jsq_in_band),
        cmocka_unit_test(test_tau0_ties_and_locality),
        cmocka_unit_test(test_min2),
        cmocka_unit_test(test_wide_tau_is_jsq),
        cmocka_unit_test(test_eldr_centroids),
        cmocka_unit_test(test_dot_bits_against_scalar),
        cmocka_unit_test(test_rr_and_random),
        cmocka_unit_test(test_jsq_ties),
        cmocka_unit_test(test_p2c),
        cmocka_unit_test(test_domain_pools),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_band_among_eligible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
