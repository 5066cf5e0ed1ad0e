/* test_verdict.c - the one verdict (verdict.h) on hand-built grids.
 *
 * Each grid is made row by row from per-seed TPOT p50, p99 and tokens/s,
 * and the expected intervals are recomputed here from those values (paired
 * percent changes, Student t widened by Bonferroni over the candidates of
 * the fleet's K). Cases: a win; a p99 loss that vetoes a p50 win; a
 * throughput loss that vetoes it; a tie (the interval straddles the
 * margin); keep the baseline (even the best case falls short); one seed;
 * K fixed (another K's win does not count, unless fleets are compared);
 * every baseline, not only the best by mean; a win that flips with one
 * seed's split; eldr-cost as a candidate; the words every front end
 * prints. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "grid.h"
#include "stats.h"
#include "verdict.h"

#define MAXR 16
#define NS 5

typedef struct hand {
    grid_row rows[MAXR];
    double p50[MAXR][NS], p99[MAXR][NS], tps[MAXR][NS];
    grid_result r;
} hand;

static void hand_init(hand *h, int n_seeds)
{
    memset(h, 0, sizeof *h);
    h->r.rows = h->rows;
    h->r.n_seeds = n_seeds;
    h->r.first_seed = 1;
    h->r.resplit = 1;
    h->r.steady = 1;
}

/* A row of K at 60 req/s with per-seed values; p99 and tps NULL: p50 x 1.2
 * and 1000 tokens/s. Returns its index. */
static int add(hand *h, int K, route_kind kind, double tau, const double *p50, const double *p99,
               const double *tps)
{
    int i = h->r.n++;
    grid_row *g = &h->rows[i];
    int n = h->r.n_seeds;
    g->K = K;
    g->rate = 60;
    g->kind = kind;
    g->tau = tau;
    g->n_seeds = n;
    for (int s = 0; s < n; s++) {
        h->p50[i][s] = p50[s];
        h->p99[i][s] = p99 ? p99[s] : 1.2 * p50[s];
        h->tps[i][s] = tps ? tps[s] : 1000;
    }
    g->tpot_p50_ms = h->p50[i];
    g->tpot_p99_ms_seed = h->p99[i];
    g->tokens_per_s_seed = h->tps[i];
    double half;
    stats_mean_ci95(h->p50[i], n, &g->tpot_p50.mean, &half);
    g->tpot_p50.lo = g->tpot_p50.mean - half;
    g->tpot_p50.hi = g->tpot_p50.mean + half;
    g->best_baseline = -1;
    return i;
}

/* The expected corrected interval of a against b on per-seed x, y. */
static grid_stat expect(const double *x, const double *y, int n, int m)
{
    double d[NS], mean, half;
    for (int s = 0; s < n; s++)
        d[s] = 100 * (x[s] - y[s]) / y[s];
    stats_mean_ci95(d, n, &mean, &half);
    if (m > 1)
        half *= stats_t_quantile(1 - 0.025 / m, n - 1) / stats_t975(n - 1);
    return (grid_stat){mean, mean - half, mean + half};
}

static void near(double a, double b)
{
    assert_true(fabs(a - b) < 1e-9);
}

static const double JSQ[NS] = {10.0, 10.2, 9.9, 10.1, 10.0};
static const double RR[NS] = {10.1, 10.3, 10.0, 10.3, 10.1};

static void scaled(double *out, const double *in, double f)
{
    for (int s = 0; s < NS; s++)
        out[s] = in[s] * f;
}

/* jsq, then eldr at tau 0.1 with jsq's p50 times f[s] per seed (into e) */
static int jsq_and_eldr(hand *h, const double *f, double *e)
{
    for (int s = 0; s < NS; s++)
        e[s] = JSQ[s] * f[s];
    int jsq = add(h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    add(h, 4, ROUTE_ELDR, 0.1, e, NULL, NULL);
    return jsq;
}

static verdict decide(const hand *h, int K, double p99_margin, double tps_margin)
{
    verdict_opts o;
    verdict_opts_default(&o);
    o.K = K;
    if (p99_margin >= 0)
        o.p99_loss_pct = p99_margin;
    if (tps_margin >= 0)
        o.tps_loss_pct = tps_margin;
    verdict v;
    char err[ELDR_ERRLEN];
    assert_int_equal(verdict_decide(&h->r, &o, &v, err, sizeof err), 0);
    return v;
}

static void test_defaults(void **state)
{
    (void)state;
    verdict_opts o;
    verdict_opts_default(&o);
    assert_true(o.p50_gain_pct == 1.0 && o.p99_loss_pct == 5.0 && o.tps_loss_pct == 1.0);
    assert_int_equal(o.K, 0);
    grid_spec g;
    grid_spec_default(&g);   /* one default baseline set: jsq, rr, p2c */
    assert_int_equal(g.n_base, 3);
    assert_int_equal(g.baselines[0], ROUTE_JSQ);
    assert_int_equal(g.baselines[1], ROUTE_RR);
    assert_int_equal(g.baselines[2], ROUTE_P2C);
    assert_string_equal(GRID_DEFAULT_BASELINES, "jsq,rr,p2c");
}

/* tau 0.1 gains 5% on every seed against both baselines: it wins; tau 0
 * (1% slower) does not; m = 2. */
static void test_win(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    double e1[NS] = {9.50, 9.70, 9.38, 9.62, 9.49}, e0[NS];
    scaled(e0, JSQ, 1.01);
    int jsq = add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    int rr = add(&h, 4, ROUTE_RR, NAN, RR, NULL, NULL);
    add(&h, 4, ROUTE_ELDR, 0, e0, NULL, NULL);
    int t1 = add(&h, 4, ROUTE_ELDR, 0.1, e1, NULL, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_WIN);
    assert_int_equal(v.why, VERDICT_OK);
    assert_int_equal(v.row, t1);
    assert_int_equal(v.setting, t1);
    assert_int_equal(v.baseline, jsq);
    assert_int_equal(v.n_compared, 2);
    assert_int_equal(v.n_wins, 1);
    assert_int_equal(v.n_baselines, 2);
    /* the binding baseline is the one with the highest corrected bound */
    grid_stat a = expect(e1, JSQ, NS, 2), b = expect(e1, RR, NS, 2);
    grid_stat want = a.hi > b.hi ? a : b;
    assert_int_equal(v.cmp.p50_base, a.hi > b.hi ? jsq : rr);
    near(v.cmp.p50.mean, want.mean);
    near(v.cmp.p50.lo, want.lo);
    near(v.cmp.p50.hi, want.hi);
    assert_true(v.cmp.p50.hi <= -1.0);
    verdict_text t;
    verdict_words(&h.r, &v, &t);
    assert_string_equal(t.head, "use tau 0.1 at K 4");
    char p50[96];
    snprintf(p50, sizeof p50, "tau 0.1 gains TPOT p50 %+.1f%% (corrected %+.1f%% to %+.1f%%) vs %s",
             want.mean, want.lo, want.hi, a.hi > b.hi ? "jsq" : "rr");
    assert_non_null(strstr(t.reason, p50));
    assert_non_null(strstr(t.reason, "every baseline"));
    assert_null(strstr(t.reason, "settings win"));   /* one winner: no others named */
    assert_non_null(strstr(t.rule, "(jsq,rr)"));
    assert_non_null(strstr(t.rule, "Bonferroni-corrected over 2 settings"));
    assert_non_null(strstr(t.rule, "K fixed at 4"));
    assert_string_equal(verdict_answer_name(v.answer), "win");
}

/* The same p50 win, but p99 rises 8% on every seed: vetoed (keep), and
 * allowed again with a 10% p99 margin. */
static void test_p99_veto(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    double e[NS], e99[NS], j99[NS];
    scaled(e, JSQ, 0.95);
    scaled(j99, JSQ, 1.2);
    scaled(e99, j99, 1.08);
    int jsq = add(&h, 4, ROUTE_JSQ, NAN, JSQ, j99, NULL);
    int t = add(&h, 4, ROUTE_ELDR, 0.2, e, e99, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_KEEP);
    assert_int_equal(v.why, VERDICT_P99_LOSS);
    assert_int_equal(v.row, jsq);
    assert_int_equal(v.setting, t);
    near(v.cmp.p99.mean, 8.0);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_string_equal(w.head, "keep jsq at K 4");
    assert_non_null(strstr(w.reason, "its TPOT p99 may rise +8.0% vs jsq"));
    assert_non_null(strstr(w.reason, "margin +5.0%"));
    v = decide(&h, 4, 10, -1);
    assert_int_equal(v.answer, VERDICT_WIN);
}

/* The same p50 win, but 3% fewer tokens/s at steady state: vetoed. */
static void test_tps_veto(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    double e[NS], jt[NS] = {1000, 1010, 990, 1005, 995}, et[NS];
    scaled(e, JSQ, 0.95);
    scaled(et, jt, 0.97);
    int jsq = add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, jt);
    add(&h, 4, ROUTE_ELDR, 0.2, e, NULL, et);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_KEEP);
    assert_int_equal(v.why, VERDICT_TPS_LOSS);
    assert_int_equal(v.row, jsq);
    near(v.cmp.tps.mean, -3.0);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_non_null(strstr(w.reason, "its throughput may fall -3.0% vs jsq"));
    assert_string_equal(verdict_why_name(v.why), "tps_loss");
    v = decide(&h, 4, -1, 3.5);
    assert_int_equal(v.answer, VERDICT_WIN);
}

/* A mean gain of about 1.6% whose interval reaches past -1%: a tie. */
static void test_tie(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    const double f[NS] = {0.96, 0.99, 0.975, 1.0, 0.995};
    double e[NS];
    int jsq = jsq_and_eldr(&h, f, e);
    verdict v = decide(&h, 4, -1, -1);
    grid_stat want = expect(e, JSQ, NS, 1);
    assert_true(want.lo < -1 && want.hi > -1);
    assert_int_equal(v.answer, VERDICT_TIE);
    assert_int_equal(v.why, VERDICT_UNSURE);
    assert_int_equal(v.row, jsq);
    near(v.cmp.p50.hi, want.hi);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_string_equal(w.head, "tie at K 4: keep jsq");
    assert_non_null(strstr(w.reason, "the seeds cannot tell a 1.0% TPOT p50 gain from none"));
}

/* ELDR slower on every seed: keep the baseline, even the best case short. */
static void test_keep(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    double e[NS];
    scaled(e, JSQ, 1.02);
    add(&h, 4, ROUTE_RR, NAN, RR, NULL, NULL);
    int jsq = add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    int t = add(&h, 4, ROUTE_ELDR, 0.05, e, NULL, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_KEEP);
    assert_int_equal(v.why, VERDICT_NO_GAIN);
    assert_int_equal(v.row, jsq);          /* the best baseline by mean, not the first */
    assert_int_equal(v.setting, t);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_string_equal(w.head, "keep jsq at K 4");
    assert_non_null(strstr(w.reason, "no setting gains 1.0% on TPOT p50 at 60 req/s: the "
                           "closest, tau 0.05, gives +2.0%"));
}

/* One seed: no interval, no verdict however large the mean gain (not a
 * tie: nothing was weighed). */
static void test_one_seed(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, 1);
    double b[1] = {10}, e[1] = {7};
    int jsq = add(&h, 4, ROUTE_JSQ, NAN, b, NULL, NULL);
    add(&h, 4, ROUTE_ELDR, 0.1, e, NULL, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_NONE);
    assert_int_equal(v.why, VERDICT_ONE_SEED);
    assert_int_equal(v.row, jsq);
    near(v.cmp.p50.mean, -30);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_non_null(strstr(w.reason, "one seed gives no interval"));
    assert_string_equal(w.head, "no verdict at K 4");
    assert_string_equal(verdict_answer_name(v.answer), "none");
    assert_non_null(strstr(w.reason, "-30.0% vs jsq"));
}

/* K 4 cannot gain; K 8 wins. At the fleet's K 4 the answer is keep (K 8's
 * win is another fleet); comparing fleets (K 0) picks K 8, with m over
 * both K; a K with no rows is an error. */
static void test_k_fixed(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    double e4[NS], j8[NS], e8[NS];
    scaled(e4, JSQ, 1.0);
    scaled(j8, JSQ, 0.8);
    scaled(e8, j8, 0.9);
    int jsq4 = add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    add(&h, 4, ROUTE_ELDR, 0.1, e4, NULL, NULL);
    add(&h, 8, ROUTE_JSQ, NAN, j8, NULL, NULL);
    int k8 = add(&h, 8, ROUTE_ELDR, 0.1, e8, NULL, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_KEEP);
    assert_int_equal(v.row, jsq4);
    assert_int_equal(v.n_compared, 1);
    assert_int_equal(h.rows[v.row].K, 4);
    v = decide(&h, 8, -1, -1);
    assert_int_equal(v.answer, VERDICT_WIN);
    assert_int_equal(v.row, k8);
    v = decide(&h, 0, -1, -1);
    assert_int_equal(v.answer, VERDICT_WIN);
    assert_int_equal(v.row, k8);
    assert_int_equal(v.n_compared, 2);
    near(v.cmp.p50.hi, expect(e8, j8, NS, 2).hi);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_non_null(strstr(w.rule, "fleets compared"));
    verdict_opts o;
    verdict_opts_default(&o);
    o.K = 16;
    char err[ELDR_ERRLEN];
    assert_int_equal(verdict_decide(&h.r, &o, &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "no row at K 16"));
    assert_int_equal(verdict_family(&h.r, 4), 1);
    assert_int_equal(verdict_family(&h.r, 0), 2);
}

/* A sure 5% gain over jsq (the best baseline by mean) but not over rr,
 * whose seeds swing: the old best-baseline rule would have said win. */
static void test_every_baseline(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    const double e[NS] = {9.5, 9.6, 9.4, 9.5, 9.5};
    const double rr[NS] = {9.4, 11.0, 9.3, 11.0, 9.3};
    double jsq[NS];
    scaled(jsq, e, 1.05);
    int j = add(&h, 4, ROUTE_JSQ, NAN, jsq, NULL, NULL);
    int r = add(&h, 4, ROUTE_RR, NAN, rr, NULL, NULL);
    add(&h, 4, ROUTE_ELDR, 0.1, e, NULL, NULL);
    assert_true(h.rows[j].tpot_p50.mean < h.rows[r].tpot_p50.mean);
    assert_true(expect(e, jsq, NS, 1).hi < -1);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_TIE);
    assert_int_equal(v.why, VERDICT_UNSURE);
    assert_int_equal(v.cmp.p50_base, r);
    assert_int_equal(v.row, j);
}

/* Gains 10% on four seeds, loses 0.5% on the fifth: the interval still
 * clears the margin, but the answer flips with that seed's split. */
static void test_flips(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    const double f[NS] = {0.9, 0.9, 0.9, 0.9, 1.005};
    double e[NS];
    int jsq = jsq_and_eldr(&h, f, e);
    assert_true(expect(e, JSQ, NS, 1).hi <= -1);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_TIE);
    assert_int_equal(v.why, VERDICT_FLIPS);
    assert_int_equal(v.cmp.flip_seed, 4);
    assert_int_equal(v.cmp.flip_base, jsq);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_non_null(strstr(w.reason, "with seed 5 and its split jsq is as fast or faster "
                           "(10.000 vs 10.050 ms): the answer flips with the split"));
}

/* eldr-cost competes as one more setting, and wins by name. */
static void test_cost_rule(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    double e[NS], c[NS];
    scaled(e, JSQ, 0.995);
    scaled(c, JSQ, 0.96);
    add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    add(&h, 4, ROUTE_ELDR, 0.1, e, NULL, NULL);
    int cost = add(&h, 4, ROUTE_ELDR_COST, NAN, c, NULL, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_WIN);
    assert_int_equal(v.row, cost);
    assert_int_equal(v.n_compared, 2);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_string_equal(w.head, "use eldr-cost at K 4");
    assert_int_equal(v.n_wins, 1);
    /* tau 0.1 at 3% wins too: the pick is still the best worst case, and
     * the reason says it was one of two */
    hand_init(&h, NS);
    scaled(e, JSQ, 0.97);
    add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    add(&h, 4, ROUTE_ELDR, 0.1, e, NULL, NULL);
    cost = add(&h, 4, ROUTE_ELDR_COST, NAN, c, NULL, NULL);
    v = decide(&h, 4, -1, -1);
    assert_int_equal(v.row, cost);
    assert_int_equal(v.n_wins, 2);
    verdict_words(&h.r, &v, &w);
    assert_non_null(strstr(w.reason, "; 2 of 2 settings win, this one by the most at worst"));
}

/* No candidate at the fleet's K: keep its best baseline. */
static void test_no_setting(void **state)
{
    (void)state;
    hand h;
    hand_init(&h, NS);
    add(&h, 4, ROUTE_RR, NAN, RR, NULL, NULL);
    int jsq = add(&h, 4, ROUTE_JSQ, NAN, JSQ, NULL, NULL);
    verdict v = decide(&h, 4, -1, -1);
    assert_int_equal(v.answer, VERDICT_KEEP);
    assert_int_equal(v.why, VERDICT_NO_SETTING);
    assert_int_equal(v.row, jsq);
    assert_int_equal(v.setting, -1);
    verdict_text w;
    verdict_words(&h.r, &v, &w);
    assert_string_equal(w.head, "keep jsq at K 4");
    assert_non_null(strstr(w.reason, "no ELDR setting was simulated at K 4"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),       cmocka_unit_test(test_win),
        cmocka_unit_test(test_p99_veto),       cmocka_unit_test(test_tps_veto),
        cmocka_unit_test(test_tie),            cmocka_unit_test(test_keep),
        cmocka_unit_test(test_one_seed),       cmocka_unit_test(test_k_fixed),
        cmocka_unit_test(test_every_baseline), cmocka_unit_test(test_flips),
        cmocka_unit_test(test_cost_rule),      cmocka_unit_test(test_no_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
