/* test_sim_prefix.c - the prefix-caching what-if (sim_prefix.h).
 *
 * On a generated trace with long shared prompt prefixes: the cache mode's
 * signatures equal cold ones bit for bit on every request, with real hits
 * whose count matches a brute-force oracle (a block hits iff an earlier
 * request on the same prefill worker had it, with unlimited capacity), and
 * ELDR's runs in cold and cache modes are identical; the uncached mode's
 * signatures and routing agree measurably less with cold; capacity 0
 * gives no hit and uncached == cold; a tiny capacity evicts and hits less;
 * prefix-aware prefill routing keeps every hit of one worker while round
 * robin loses some; and the refusals (no block hashes, no token rows, a
 * wrong block size, a gate variant, bad config). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gen.h"
#include "model.h"
#include "route.h"
#include "sim.h"
#include "sim_prefix.h"

static char err[ELDR_ERRLEN];

/* The shared fixture: a prefix trace split in calibration and evaluation
 * rows, a model fitted on the calibration rows, and a workload of the
 * evaluation rows (Poisson arrivals, so that routing sees real loads). */
typedef struct fixture {
    trace_t *all, *calib, *eval;
    model_t *model;
    sim_workload w;
} fixture;

static fixture F;

static trace_t *rows_of(const trace_t *t, int64_t r0, int64_t r1)
{
    int64_t *rows = malloc((size_t)(r1 - r0) * sizeof *rows);
    assert_non_null(rows);
    for (int64_t i = r0; i < r1; i++)
        rows[i - r0] = i;
    trace_t *s = trace_select(t, rows, r1 - r0, err, sizeof err);
    free(rows);
    if (!s)
        fail_msg("trace_select: %s", err);
    return s;
}

static int setup(void **state)
{
    (void)state;
    gen_params_t p;
    gen_defaults(&p);
    p.requests = 400;
    p.layers = 8;
    p.experts = 32;
    p.top_k = 4;
    p.domains = 4;
    p.prompt_tokens = 40;      /* short own part: the 6-block prefix dominates */
    p.decode_tokens = 16;
    p.prefix_groups = 10;
    p.prefix_blocks = 6;
    p.block_size = 16;
    p.tokens = 1;
    p.threads = 1;
    p.seed = 3;
    if (gen_run(&p, &F.all, err, sizeof err))
        fail_msg("gen: %s", err);
    F.calib = rows_of(F.all, 0, 150);
    F.eval = rows_of(F.all, 150, F.all->n);
    model_fit_opts o;
    model_fit_opts_default(&o, 4);
    if (model_fit(F.calib, &o, &F.model, NULL, err, sizeof err))
        fail_msg("model_fit: %s", err);
    sim_config c;
    sim_config_default(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 400;
    if (sim_workload_init(&F.w, F.eval, &c, &F.model->recipe, err, sizeof err))
        fail_msg("sim_workload_init: %s", err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sim_workload_free(&F.w);
    model_free(F.model);
    trace_free(F.all);
    trace_free(F.calib);
    trace_free(F.eval);
    return 0;
}

static void build(sim_prefix *px, int64_t capacity, int workers, sim_prefill_route route)
{
    sim_prefix_config c;
    sim_prefix_config_default(&c);
    c.capacity = capacity;
    c.workers = workers;
    c.route = route;
    if (sim_prefix_build(px, &F.w, &F.model->recipe, &c, err, sizeof err))
        fail_msg("sim_prefix_build: %s", err);
    assert_int_equal(px->n, F.w.n);
    assert_int_equal(px->mismatches, 0);
}

/* ELDR on the workload seen through mode m's signatures. */
static void run_mode(const sim_prefix *px, sim_prefix_mode m, sim_result *res)
{
    sim_workload view;
    route_policy p;
    sim_prefix_view(px, &F.w, m, &view);
    assert_int_equal(route_policy_init(&p, ROUTE_ELDR, F.model->K, 5, err, sizeof err), 0);
    assert_int_equal(route_policy_set_centroids(&p, F.model->centroids, view.dim, 0.1, 1, err,
                                                sizeof err), 0);
    if (sim_run(&view, &p, NULL, NULL, res, err, sizeof err))
        fail_msg("sim_run: %s", err);
    route_policy_free(&p);
}

static void same_run(const sim_result *a, const sim_result *b)
{
    assert_int_equal(a->n, b->n);
    for (int64_t i = 0; i < a->n; i++) {
        assert_int_equal(a->req[i].worker, b->req[i].worker);
        assert_true(a->req[i].finish == b->req[i].finish);
    }
    assert_true(a->tpot_p50_ms == b->tpot_p50_ms && a->tpot_p99_ms == b->tpot_p99_ms);
    assert_true(a->distinct_per_step == b->distinct_per_step);
    assert_true(a->queue_p99_ms == b->queue_p99_ms);
}

/* Brute force: with unlimited capacity on one cache, block i of request j
 * hits iff an earlier request had a block of the same hash (the chained
 * hash fixes the whole prefix), and the match stops at the first miss. */
static int64_t oracle_hits(const int32_t *prefill_worker, int64_t *hits_per_req)
{
    const trace_t *t = F.eval;
    int64_t total = 0;
    for (int64_t i = 0; i < F.w.n; i++) {
        int64_t r = F.w.row[i], nb = t->block_offsets[r + 1] - t->block_offsets[r];
        const uint64_t *h = t->block_hashes + t->block_offsets[r];
        int64_t m = 0;
        for (; m < nb; m++) {
            int seen = 0;
            for (int64_t j = 0; j < i && !seen; j++) {
                if (prefill_worker && prefill_worker[j] != prefill_worker[i])
                    continue;
                int64_t rj = F.w.row[j];
                for (int64_t b = t->block_offsets[rj]; b < t->block_offsets[rj + 1]; b++)
                    seen |= t->block_hashes[b] == h[m];
            }
            if (!seen)
                break;
        }
        hits_per_req[i] = m;
        total += m;
    }
    return total;
}

static void test_cache_equals_cold(void **state)
{
    (void)state;
    sim_prefix px;
    build(&px, 1 << 16, 1, SIM_PREFILL_RR);
    size_t bytes = (size_t)px.n * px.dim * sizeof(float);
    /* cold is the workload's own signatures (sig_build_batch on the trace
     * counts); cache equals it bit for bit, on every request */
    assert_memory_equal(px.sig[SIM_PREFIX_COLD], F.w.sig, bytes);
    assert_memory_equal(px.sig[SIM_PREFIX_CACHE], F.w.sig, bytes);
    assert_true(px.cos_mean[SIM_PREFIX_CACHE] > 1 - 1e-6);
    /* real hits, exactly the oracle's */
    int64_t *want = malloc((size_t)px.n * sizeof *want);
    assert_non_null(want);
    int64_t total = oracle_hits(NULL, want);
    for (int64_t i = 0; i < px.n; i++)
        assert_int_equal(px.hit[i], want[i]);
    free(want);
    assert_int_equal(px.hit_blocks, total);
    assert_true(px.hit_rate > 0.3);
    assert_int_equal(px.evictions, 0);
    assert_int_equal(px.cached_tokens, 16 * total);
    /* identical routing and metrics */
    sim_result rc, rk;
    run_mode(&px, SIM_PREFIX_COLD, &rc);
    run_mode(&px, SIM_PREFIX_CACHE, &rk);
    same_run(&rc, &rk);
    assert_true(sim_prefix_same_worker(&rc, &rk) == 1.0);
    print_message("prefix: hit rate %.3f, %.3f of prompt tokens cached\n", px.hit_rate,
                  px.cached_frac_mean);
    sim_result_free(&rc);
    sim_result_free(&rk);
    sim_prefix_free(&px);
}

static void test_uncached_agrees_less(void **state)
{
    (void)state;
    sim_prefix px;
    build(&px, 1 << 16, 1, SIM_PREFILL_RR);
    sim_result rc, rk, ru;
    run_mode(&px, SIM_PREFIX_COLD, &rc);
    run_mode(&px, SIM_PREFIX_CACHE, &rk);
    run_mode(&px, SIM_PREFIX_UNCACHED, &ru);
    double same_k = sim_prefix_same_worker(&rk, &rc), same_u = sim_prefix_same_worker(&ru, &rc);
    double cos_k = px.cos_mean[SIM_PREFIX_CACHE], cos_u = px.cos_mean[SIM_PREFIX_UNCACHED];
    print_message("agreement with cold: cache cos %.4f same %.3f; uncached cos %.4f same "
                  "%.3f; distinct/step cold %.3f uncached %.3f\n", cos_k, same_k, cos_u,
                  same_u, rc.distinct_per_step, ru.distinct_per_step);
    assert_true(cos_u < cos_k - 0.01);
    assert_true(same_u < same_k);
    assert_true(same_u < 0.9);
    /* a request with no hit has its cold signature in uncached mode too */
    int64_t nohit = 0;
    for (int64_t i = 0; i < px.n; i++)
        if (px.hit[i] == 0) {
            nohit++;
            assert_memory_equal(px.sig[SIM_PREFIX_UNCACHED] + (size_t)i * px.dim,
                                px.sig[SIM_PREFIX_COLD] + (size_t)i * px.dim,
                                px.dim * sizeof(float));
        }
    assert_true(nohit > 0 && nohit < px.n);
    sim_result_free(&rc);
    sim_result_free(&rk);
    sim_result_free(&ru);
    sim_prefix_free(&px);
}

static void test_capacity(void **state)
{
    (void)state;
    sim_prefix none, tiny, big;
    build(&none, 0, 1, SIM_PREFILL_RR);
    assert_int_equal(none.hit_blocks, 0);
    assert_true(none.hit_rate == 0 && none.cached_frac_mean == 0);
    size_t bytes = (size_t)none.n * none.dim * sizeof(float);
    assert_memory_equal(none.sig[SIM_PREFIX_UNCACHED], none.sig[SIM_PREFIX_COLD], bytes);
    assert_memory_equal(none.sig[SIM_PREFIX_CACHE], none.sig[SIM_PREFIX_COLD], bytes);
    sim_result rc, ru;
    run_mode(&none, SIM_PREFIX_COLD, &rc);
    run_mode(&none, SIM_PREFIX_UNCACHED, &ru);
    same_run(&rc, &ru);
    sim_result_free(&rc);
    sim_result_free(&ru);

    build(&tiny, 4, 1, SIM_PREFILL_RR);
    build(&big, 1 << 16, 1, SIM_PREFILL_RR);
    print_message("hit rate by capacity: 0 -> %.3f, 4 -> %.3f, 65536 -> %.3f\n",
                  none.hit_rate, tiny.hit_rate, big.hit_rate);
    assert_true(tiny.evictions > 0);
    assert_true(tiny.hit_rate < big.hit_rate);
    assert_memory_equal(tiny.sig[SIM_PREFIX_CACHE], tiny.sig[SIM_PREFIX_COLD], bytes);
    sim_prefix_free(&none);
    sim_prefix_free(&tiny);
    sim_prefix_free(&big);
}

static void test_prefill_workers(void **state)
{
    (void)state;
    sim_prefix one, rr, pre;
    build(&one, 1 << 16, 1, SIM_PREFILL_RR);
    build(&rr, 1 << 16, 3, SIM_PREFILL_RR);
    build(&pre, 1 << 16, 3, SIM_PREFILL_PREFIX);
    /* prefix routing: every request sharing a block shares block 0, so
     * it meets every earlier sharer's cache: the hits of one cache */
    assert_int_equal(pre.hit_blocks, one.hit_blocks);
    assert_true(rr.hit_blocks < one.hit_blocks);
    int64_t *want = malloc((size_t)rr.n * sizeof *want);
    assert_non_null(want);
    assert_int_equal(oracle_hits(rr.prefill_worker, want), rr.hit_blocks);
    for (int64_t i = 0; i < rr.n; i++)
        assert_int_equal(rr.prefill_worker[i], (int)(i % 3));
    free(want);
    size_t bytes = (size_t)rr.n * rr.dim * sizeof(float);
    assert_memory_equal(rr.sig[SIM_PREFIX_CACHE], rr.sig[SIM_PREFIX_COLD], bytes);
    assert_memory_equal(pre.sig[SIM_PREFIX_CACHE], pre.sig[SIM_PREFIX_COLD], bytes);
    sim_prefix_free(&one);
    sim_prefix_free(&rr);
    sim_prefix_free(&pre);
}

static void expect_refusal(const sim_workload *w, const sig_recipe *r,
                           const sim_prefix_config *c, const char *needle)
{
    sim_prefix px;
    err[0] = 0;
    assert_int_equal(sim_prefix_build(&px, w, r, c, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("expected '%s' in: %s", needle, err);
    assert_null(px.sig[SIM_PREFIX_COLD]);
}

static void test_refusals(void **state)
{
    (void)state;
    sim_prefix_config c;
    sim_prefix_config_default(&c);
    c.block_size = 8;
    expect_refusal(&F.w, &F.model->recipe, &c, "block hashes for");
    sim_prefix_config_default(&c);
    c.workers = 0;
    expect_refusal(&F.w, &F.model->recipe, &c, "prefill workers");
    sim_prefix_config_default(&c);
    c.capacity = -1;
    expect_refusal(&F.w, &F.model->recipe, &c, "negative");
    sim_prefix_config_default(&c);
    sig_recipe gate;
    assert_int_equal(sig_recipe_init(&gate, SIG_GATE_PROB, F.w.L, F.w.E, NULL, 0, err,
                                     sizeof err), 0);
    expect_refusal(&F.w, &gate, &c, "gate");
    sig_recipe_free(&gate);

    /* the same workload over a trace without block hashes, then without
     * token rows */
    sim_workload w = F.w;
    trace_t t = *F.eval;
    w.t = &t;
    t.block_hashes = NULL;
    t.block_offsets = NULL;
    expect_refusal(&w, &F.model->recipe, &c, "tokens/block_hashes");
    t = *F.eval;
    t.prefill_experts = NULL;
    t.prefill_offsets = NULL;
    expect_refusal(&w, &F.model->recipe, &c, "tokens/prefill_experts");

    assert_int_equal(sim_prefix_mode_parse("cache"), SIM_PREFIX_CACHE);
    assert_int_equal(sim_prefix_mode_parse("warm"), -1);
    assert_int_equal(sim_prefill_route_parse("prefix"), SIM_PREFILL_PREFIX);
    assert_int_equal(sim_prefill_route_parse("hash"), -1);
    assert_string_equal(sim_prefix_mode_name(SIM_PREFIX_UNCACHED), "uncached");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_equals_cold),
        cmocka_unit_test(test_uncached_agrees_less),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_prefill_workers),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
