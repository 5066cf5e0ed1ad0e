/* test_router_cost.c - eldrd's cost rule (issue 33, items 2 and 3): the
 * router state decides exactly as the simulator does, and its per-worker
 * estimate stays true through every way a request leaves.
 *
 * Parity: eldrd's state (state_route / state_finish under the cost
 * policy, each request's cells packed with its in-flight entry) and a
 * bare core cost_state driven as src/core/sim.c drives it (cost_req_set
 * + cost_decide on the in-flight counts, cost_state_add; at a finish
 * cost_req_set again + cost_state_remove) see the same random requests
 * and finishes: the same worker every time, the same costs bit for bit.
 *
 * eldrd adds a request's dense row (as the simulator does) and removes
 * the sparse cells its in-flight entry keeps (costpack.h); the two give
 * the same products cell by cell.
 *
 * The estimate: after routes, finishes, --inflight-ttl expiry, the
 * admin's clear, a proxy retry (finish, then route again without the
 * failed worker) and an ejection (the pool's hook), every P is in [0, 1],
 * the expected U and the members are >= 0, members equal the in-flight
 * counts, the estimate equals a fresh one built from the survivors
 * (within 1e-6; byte for byte once every request is gone), and a request
 * dropped at an ejection is not removed again by its late finish. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "costpack.h"
#include "costrule.h"
#include "pool.h"
#include "rng.h"
#include "state.h"

#define NK 4
#define NL 6
#define NE 16
#define TOPK 2
#define CELLS (NL * NE)
#define MAXREQ 512

/* One request of the test's history. */
typedef struct treq {
    char id[16];
    uint16_t counts[CELLS];
    int worker;                  /* eldrd's, -1 once gone */
    int owned;                   /* never expired by the TTL */
} treq;

/* A prompt of 0..6 tokens (0: no signal) whose experts lean on one of
 * four domains, so that locality exists for the rule to see; a 1-token
 * prompt gives q = 1 cells (the sure counts). */
static void random_counts(rng_t *r, uint16_t *c)
{
    memset(c, 0, CELLS * sizeof *c);
    int tokens = (int)rng_below(r, 7), dom = (int)rng_below(r, 4);
    for (int l = 0; l < NL; l++)
        for (int t = 0; t < tokens; t++) {
            int a = -1;
            for (int j = 0; j < TOPK; j++) {
                int e;
                do
                    e = rng_uniform(r) < 0.7 ? dom * 4 + (int)rng_below(r, 4)
                                             : (int)rng_below(r, NE);
                while (e == a);
                a = e;
                c[l * NE + e]++;
            }
        }
}

static cost_model model(void)
{
    cost_model m;
    cost_model_default(&m);
    return m;
}

static rstate *new_state(int max_batch, int policy)
{
    const char *const workers[NK] = {"w0", "w1", "w2", "w3"};
    char err[256];
    rstate *st = state_new(NK, workers, 0.1, 1024, 0, err, sizeof err);
    assert_non_null(st);
    cost_model m = model();
    assert_int_equal(state_cost_init(st, NL, NE, &m, max_batch, policy, err, sizeof err), 0);
    return st;
}

static mref_t MREF = {.dim = 4, .gen = 1};

/* Route x through eldrd's state (its cells packed as decide.c does). */
static int eldrd_route(rstate *st, treq *x, const uint8_t *eligible, int retry_of,
                       route_out *o)
{
    cost_req r = {0};
    char err[256];
    int oom = 0;
    assert_int_equal(cost_req_set(&r, x->counts, NL, NE, TOPK, err, sizeof err), 0);
    cost_pack *p = cost_pack_make(&r, &oom);
    assert_int_equal(oom, 0);
    r.sparse = 0;   /* the decision and the add read the dense row */
    route_in in = {x->id, &MREF, NULL, NULL, -1, 0, 0, 0, eligible, retry_of, 0, 0, 0, NULL,
                   x->owned, p, p ? &r : NULL};
    rb_err e;
    int rc = state_route(st, &in, o, &e);
    free(in.cost);   /* NULL when the table kept it */
    cost_req_free(&r);
    assert_int_equal(rc, 0);
    return x->worker = o->d.worker;
}

static void eldrd_finish(rstate *st, treq *x)
{
    int w;
    rb_err e;
    assert_int_equal(state_finish(st, x->id, &w, &e), 0);
    assert_int_equal(w, x->worker);
    x->worker = -1;
}

/* Every cell of every worker a probability, every count sane, members
 * the in-flight counts. */
static void check_sane(rstate *st)
{
    const cost_state *c = &st->cost;
    for (int k = 0; k < NK; k++) {
        assert_true(c->members[k] >= 0);
        assert_int_equal(c->members[k], st->inflight[k]);
        assert_true(cost_state_expected_u(c, k) >= 0);
        assert_true(c->sumP[k] >= -1e-6 && c->sumP[k] <= CELLS + 1e-6);
        assert_true(c->kv[k] >= -1e-9);
        for (size_t i = 0; i < c->cells; i++) {
            size_t j = (size_t)k * c->cells + i;
            assert_true(c->P[j] >= 0.0f && c->P[j] <= 1.0f);
            assert_true(c->prod[j] >= 0 && c->prod[j] <= 1.0);
            assert_true(c->shift[j] >= 0);
        }
    }
}

/* st's estimate against a fresh one built from the requests still in
 * flight (worker >= 0): exact when none is, else within 1e-6. */
static void check_equals_survivors(rstate *st, treq *req, int n)
{
    cost_state f;
    cost_model m = model();
    char err[256];
    assert_int_equal(cost_state_init(&f, NK, NL, NE, &m, st->cost.max_batch, err, sizeof err), 0);
    cost_req r = {0};
    int alive = 0;
    for (int i = 0; i < n; i++)
        if (req[i].worker >= 0) {
            assert_int_equal(cost_req_set(&r, req[i].counts, NL, NE, TOPK, err, sizeof err), 0);
            cost_state_add(&f, req[i].worker, &r);
            alive++;
        }
    cost_req_free(&r);
    const cost_state *c = &st->cost;
    size_t n_cells = (size_t)NK * CELLS;
    if (!alive) {
        assert_memory_equal(c->prod, f.prod, n_cells * sizeof *f.prod);
        assert_memory_equal(c->shift, f.shift, n_cells * sizeof *f.shift);
        assert_memory_equal(c->sure, f.sure, n_cells * sizeof *f.sure);
        assert_memory_equal(c->P, f.P, n_cells * sizeof *f.P);
        assert_memory_equal(c->sumP, f.sumP, NK * sizeof *f.sumP);
        assert_memory_equal(c->members, f.members, NK * sizeof *f.members);
        assert_memory_equal(c->kv, f.kv, NK * sizeof *f.kv);
    }
    for (size_t i = 0; i < n_cells; i++) {
        assert_int_equal(c->sure[i], f.sure[i]);
        assert_int_equal(c->shift[i], f.shift[i]);
        assert_true(fabs(c->prod[i] - f.prod[i]) < 1e-6);
        assert_true(fabs((double)c->P[i] - f.P[i]) < 1e-6);
    }
    for (int k = 0; k < NK; k++) {
        assert_int_equal(c->members[k], f.members[k]);
        assert_true(fabs(c->sumP[k] - f.sumP[k]) < 1e-6 * CELLS);
        assert_true(fabs(c->kv[k] - f.kv[k]) < 1e-6);
    }
    cost_state_free(&f);
}

/* The simulator's way and eldrd's way over the same 400 arrivals and
 * random finishes, at a batch cap of 3 (so that full batches and their
 * wait occur too): the same worker and the same costs every time. */
static void test_parity_with_simulator(void **state)
{
    (void)state;
    rstate *st = new_state(3, STATE_POLICY_COST);
    cost_state sim;
    cost_model m = model();
    char err[256];
    assert_int_equal(cost_state_init(&sim, NK, NL, NE, &m, 3, err, sizeof err), 0);
    int64_t load[NK] = {0};
    cost_req creq = {0};
    route_decision dec;
    static treq req[MAXREQ];
    rng_t r;
    rng_seed(&r, 33);
    int n = 0, finishes = 0, nonzero_waits = 0;
    for (int step = 0; step < 400; step++) {
        treq *x = &req[n++];
        snprintf(x->id, sizeof x->id, "p%d", step);
        random_counts(&r, x->counts);
        /* the simulator's arrival */
        assert_int_equal(cost_req_set(&creq, x->counts, NL, NE, TOPK, err, sizeof err), 0);
        int want = cost_decide(&sim, &creq, load, NULL, &dec, NULL);
        cost_state_add(&sim, want, &creq);
        load[want]++;
        /* eldrd's */
        route_out o;
        int got = eldrd_route(st, x, NULL, -1, &o);
        assert_int_equal(got, want);
        assert_int_equal(o.policy, STATE_POLICY_COST);
        assert_int_equal(o.d.rule, RULE_COST);
        assert_int_equal(o.d.has_cost, 1);
        assert_memory_equal(o.d.cost, dec.cost, NK * sizeof *dec.cost);
        for (int k = 0; k < NK; k++) {
            assert_true(o.d.cost[got] <= o.d.cost[k] + 1e-9 * fabs(o.d.cost[k]));
            nonzero_waits += st->terms[k].wait > 0;
        }
        /* finishes at random, of random requests in flight */
        while (rng_uniform(&r) < 0.45) {
            int i = (int)rng_below(&r, (uint64_t)n);
            if (req[i].worker < 0)
                continue;
            int w = req[i].worker;
            assert_int_equal(cost_req_set(&creq, req[i].counts, NL, NE, TOPK, err, sizeof err),
                             0);
            cost_state_remove(&sim, w, &creq);
            load[w]--;
            eldrd_finish(st, &req[i]);
            finishes++;
        }
        if (n == MAXREQ)
            break;
    }
    assert_true(finishes > 100);
    assert_true(nonzero_waits > 0);   /* the full-batch branch was taken */
    for (int k = 0; k < NK; k++)
        assert_true(fabs(cost_state_expected_u(&sim, k) - cost_state_expected_u(&st->cost, k)) <
                    1e-9);
    cost_req_free(&creq);
    cost_state_free(&sim);
    state_free(st);
}

/* Routes under the band policy keep the estimate too, so a switch to the
 * cost policy decides on the true state; without state_cost_init the
 * cost policy is refused. */
static void test_estimate_under_band_and_switch(void **state)
{
    (void)state;
    rstate *st = new_state(256, STATE_POLICY_BAND);
    static treq req[64];
    rng_t r;
    rng_seed(&r, 7);
    route_out o;
    for (int i = 0; i < 40; i++) {
        snprintf(req[i].id, sizeof req[i].id, "b%d", i);
        random_counts(&r, req[i].counts);
        eldrd_route(st, &req[i], NULL, -1, &o);
        assert_int_equal(o.policy, STATE_POLICY_BAND);
        assert_int_equal(o.d.has_cost, 0);
        assert_int_not_equal(o.d.rule, RULE_COST);
    }
    check_sane(st);
    check_equals_survivors(st, req, 40);
    assert_int_equal(state_set_policy(st, STATE_POLICY_COST), 0);
    assert_int_equal(state_get_policy(st), STATE_POLICY_COST);
    snprintf(req[40].id, sizeof req[40].id, "c0");
    random_counts(&r, req[40].counts);
    eldrd_route(st, &req[40], NULL, -1, &o);
    assert_int_equal(o.d.rule, RULE_COST);
    check_sane(st);
    check_equals_survivors(st, req, 41);
    for (int i = 0; i < 41; i++)
        eldrd_finish(st, &req[i]);
    check_equals_survivors(st, req, 41);
    state_free(st);

    const char *const w[1] = {"solo"};
    char err[256];
    rstate *bare = state_new(1, w, 0.1, 4, 0, err, sizeof err);
    assert_int_equal(state_set_policy(bare, STATE_POLICY_COST), -1);
    assert_int_equal(state_get_policy(bare), STATE_POLICY_BAND);
    assert_int_equal(state_set_policy(bare, STATE_POLICY_BAND), 0);
    state_free(bare);
    assert_int_equal(state_policy_parse("cost"), STATE_POLICY_COST);
    assert_int_equal(state_policy_parse("band"), STATE_POLICY_BAND);
    assert_int_equal(state_policy_parse("Cost"), -1);
}

static void on_eject(void *cls, int k)
{
    state_eject_worker(cls, k);
}

/* Every way out, one after another, with the estimate checked after
 * each: finishes, a TTL expiry (owned requests survive it), a clear of
 * one worker, a proxy retry, an ejection through the pool's hook (and
 * the late finishes of what it dropped), then the rest finished. */
static void test_every_way_out(void **state)
{
    (void)state;
    rstate *st = new_state(256, STATE_POLICY_COST);
    static treq req[MAXREQ];
    rng_t r;
    rng_seed(&r, 2026);
    route_out o;
    int n = 0;
    for (; n < 120; n++) {
        snprintf(req[n].id, sizeof req[n].id, "q%d", n);
        random_counts(&r, req[n].counts);
        req[n].owned = n % 3 == 0;   /* a third are the proxy's own */
        eldrd_route(st, &req[n], NULL, -1, &o);
    }
    check_sane(st);
    check_equals_survivors(st, req, n);
    /* finishes */
    for (int i = 1; i < n; i += 7)
        eldrd_finish(st, &req[i]);
    check_sane(st);
    check_equals_survivors(st, req, n);
    /* --inflight-ttl: all but the owned ones go */
    long expired = state_expire(st, 1e18);
    long want = 0;
    for (int i = 0; i < n; i++)
        if (req[i].worker >= 0 && !req[i].owned) {
            req[i].worker = -1;
            want++;
        }
    assert_int_equal(expired, want);
    check_sane(st);
    check_equals_survivors(st, req, n);
    json_t *j = state_explain_json(st, "q2");
    assert_string_equal(json_string_value(json_object_get(j, "ended")), "expired");
    json_decref(j);
    /* more routes, then the admin clears worker 1 */
    for (; n < 200; n++) {
        snprintf(req[n].id, sizeof req[n].id, "q%d", n);
        random_counts(&r, req[n].counts);
        eldrd_route(st, &req[n], NULL, -1, &o);
    }
    long on1 = st->inflight[1];
    assert_true(on1 > 0);
    assert_int_equal(state_clear_worker(st, 1), on1);
    for (int i = 0; i < n; i++)
        if (req[i].worker == 1)
            req[i].worker = -1;
    assert_int_equal(st->cost.members[1], 0);
    assert_true(cost_state_expected_u(&st->cost, 1) == 0);
    check_sane(st);
    check_equals_survivors(st, req, n);
    /* a proxy retry: finish on the failed worker, route again without it */
    int i = n - 1;
    while (req[i].worker < 0)
        i--;
    int failed = req[i].worker;
    eldrd_finish(st, &req[i]);
    uint8_t ok[NK] = {1, 1, 1, 1};
    ok[failed] = 0;
    eldrd_route(st, &req[i], ok, failed, &o);
    assert_int_not_equal(o.d.worker, failed);
    assert_true(isnan(o.d.cost[failed]));
    check_sane(st);
    check_equals_survivors(st, req, n);
    /* an ejection, as the pool reports it (three failures in a row) */
    pool p;
    char err[256];
    const char *const pre[1] = {"p0"};
    const char *const dec[NK] = {"w0", "w1", "w2", "w3"};
    assert_int_equal(pool_init(&p, pre, 1, dec, NK, err, sizeof err), 0);
    pool_set_policy(&p, 3, 5);
    p.on_decode_eject = on_eject;
    p.on_decode_eject_cls = st;
    int ej = req[0].worker >= 0 ? req[0].worker : 2;
    long held = st->inflight[ej];
    assert_int_equal(pool_report(&p, POOL_DECODE, ej, 0, 1.0), 0);
    assert_int_equal(pool_report(&p, POOL_DECODE, ej, 0, 1.0), 0);
    assert_int_equal(st->inflight[ej], held);   /* not ejected yet: nothing dropped */
    assert_int_equal(pool_report(&p, POOL_DECODE, ej, 0, 1.0), 1);
    assert_int_equal(st->inflight[ej], 0);
    assert_int_equal((long)st->ejected[ej], held);
    check_sane(st);
    /* their late finishes are 404 and remove nothing twice */
    cost_state before = st->cost;
    double sumP[NK];
    memcpy(sumP, st->cost.sumP, sizeof sumP);
    int late = 0;
    for (int q = 0; q < n; q++)
        if (req[q].worker == ej) {
            int w;
            rb_err e;
            assert_int_equal(state_finish(st, req[q].id, &w, &e), -1);
            assert_int_equal(e.status, 404);
            req[q].worker = -1;
            late++;
        }
    assert_int_equal(late, held);
    assert_memory_equal(st->cost.sumP, sumP, sizeof sumP);
    assert_memory_equal(st->cost.members, before.members, NK * sizeof *before.members);
    check_sane(st);
    check_equals_survivors(st, req, n);
    pool_free(&p);
    /* the rest finish: nothing is left, byte for byte a fresh estimate */
    for (int q = 0; q < n; q++)
        if (req[q].worker >= 0)
            eldrd_finish(st, &req[q]);
    check_sane(st);
    check_equals_survivors(st, req, n);
    assert_int_equal(st->ids.n, 0);
    state_free(st);
}

/* The route answer's two writers agree with costs (null for an
 * ineligible worker), and explain shows the policy, the costs and the
 * terms; a request with no counts says why the rule only balanced. */
static void test_answer_and_explain(void **state)
{
    (void)state;
    rstate *st = new_state(256, STATE_POLICY_COST);
    treq a = {.id = "x1"}, b = {.id = "x2"};
    rng_t r;
    rng_seed(&r, 5);
    do
        random_counts(&r, a.counts);
    while (!a.counts[0] && !a.counts[1] && !a.counts[NE]);
    route_out o;
    eldrd_route(st, &a, NULL, -1, &o);
    uint8_t ok[NK] = {1, 0, 1, 1};
    eldrd_route(st, &b, ok, -1, &o);   /* all-zero counts: no cells */
    char *const names[NK] = {"w0", "w1", "w2", "w3"};
    route_answer_in ai = {.workers = names, .K = NK, .o = &o, .prefill_name = "default",
                          .model_gen = 1};
    json_t *jj = route_answer_json(&ai);
    assert_non_null(jj);
    char *viaj = json_dumps(jj, JSON_COMPACT | JSON_REAL_PRECISION(9));
    char *direct = route_answer_text(&ai);
    assert_non_null(direct);
    assert_string_equal(direct, viaj);
    assert_string_equal(json_string_value(json_object_get(jj, "policy")), "cost");
    assert_string_equal(json_string_value(json_object_get(jj, "rule")), "cost");
    json_t *costs = json_object_get(jj, "costs");
    assert_int_equal(json_array_size(costs), NK);
    assert_true(json_is_null(json_array_get(costs, 1)));
    free(viaj);
    free(direct);
    json_decref(jj);

    json_t *x = state_explain_json(st, "x1");
    assert_non_null(x);
    assert_string_equal(json_string_value(json_object_get(x, "policy")), "cost");
    json_t *terms = json_object_get(x, "cost_terms");
    assert_int_equal(json_array_size(terms), NK);
    int w = (int)json_integer_value(json_object_get(x, "worker_index"));
    for (int k = 0; k < NK; k++) {
        json_t *t = json_array_get(terms, (size_t)k);
        double c = json_real_value(json_object_get(t, "cost_ms"));
        assert_true(c > 0);
        assert_true(json_real_value(json_array_get(json_object_get(x, "costs"), (size_t)k)) ==
                    c);
        assert_true(json_real_value(json_array_get(json_object_get(x, "costs"), (size_t)w)) <=
                    c);
        assert_true(json_real_value(json_object_get(t, "dU")) > 0);   /* an empty batch */
    }
    assert_null(json_object_get(json_object_get(x, "signal"), "note"));
    json_decref(x);
    x = state_explain_json(st, "x2");
    assert_true(json_is_null(json_array_get(json_object_get(x, "cost_terms"), 1)));
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(x, "signal"),
                                                             "note")),
                           "no expert counts"));
    json_decref(x);
    /* under band: no costs, no terms */
    assert_int_equal(state_set_policy(st, STATE_POLICY_BAND), 0);
    treq c = {.id = "x3"};
    random_counts(&r, c.counts);
    eldrd_route(st, &c, NULL, -1, &o);
    x = state_explain_json(st, "x3");
    assert_string_equal(json_string_value(json_object_get(x, "policy")), "band");
    assert_null(json_object_get(x, "costs"));
    assert_null(json_object_get(x, "cost_terms"));
    json_decref(x);
    x = state_decisions_json(st, 3);
    assert_int_equal(json_array_size(x), 3);
    assert_null(json_object_get(json_array_get(x, 0), "costs"));
    assert_int_equal(json_array_size(json_object_get(json_array_get(x, 1), "costs")), NK);
    /* each record is an explain record: the dashboard's decisions view
     * draws the terms from the snapshot's */
    assert_int_equal(json_array_size(json_object_get(json_array_get(x, 1), "cost_terms")), NK);
    assert_null(json_object_get(json_array_get(x, 0), "cost_terms"));
    json_decref(x);
    state_free(st);
}

/* --load-from vllm: the rule's B is the routing load the band uses (the
 * report plus what was routed since), the experts still eldrd's own. */
static void test_reported_loads(void **state)
{
    (void)state;
    rstate *st = new_state(256, STATE_POLICY_COST);
    treq a = {.id = "v1"}, b = {.id = "v2"};
    rng_t r;
    rng_seed(&r, 9);
    random_counts(&r, a.counts);
    random_counts(&r, b.counts);
    route_out o;
    state_use_reported(st, 1);
    uint64_t routed[NK];
    state_routed_counts(st, routed);
    state_set_reported(st, 0, 1, 40, routed[0]);
    state_set_reported(st, 1, 1, 7, routed[1]);
    state_set_reported(st, 2, 1, 0, routed[2]);   /* w3: never reported, own count 0 */
    eldrd_route(st, &a, NULL, -1, &o);
    int64_t want[NK] = {40, 7, 0, 0};
    assert_memory_equal(o.d.load, want, sizeof want);
    for (int k = 0; k < NK; k++)
        assert_int_equal(st->terms[k].B, want[k]);
    assert_true(o.d.worker == 2 || o.d.worker == 3);   /* idle: the cheapest */
    eldrd_route(st, &b, NULL, -1, &o);
    want[a.worker]++;
    assert_memory_equal(o.d.load, want, sizeof want);
    assert_int_equal(st->cost.members[a.worker], 1);   /* the estimate: eldrd's routes */
    eldrd_finish(st, &a);
    eldrd_finish(st, &b);
    check_equals_survivors(st, &a, 1);
    state_free(st);
}

/* The pack is the request, exactly: its view gives back the arrays. */
static void test_pack_round_trip(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 11);
    uint16_t c[CELLS];
    char err[256];
    cost_req q = {0};
    int oom = 1;
    memset(c, 0, sizeof c);
    assert_int_equal(cost_req_set(&q, c, NL, NE, TOPK, err, sizeof err), 0);
    assert_null(cost_pack_make(&q, &oom));   /* no cells, no tokens: nothing to keep */
    assert_int_equal(oom, 0);
    cost_req v;
    cost_pack_view(NULL, &v);
    assert_int_equal(v.n, 0);
    assert_null(v.dense);
    assert_true(v.kv == 0);
    do
        random_counts(&r, c);
    while (!c[0] && !c[1]);
    assert_int_equal(cost_req_set(&q, c, NL, NE, TOPK, err, sizeof err), 0);
    cost_pack *p = cost_pack_make(&q, &oom);
    assert_non_null(p);
    cost_pack_view(p, &v);
    assert_int_equal(v.n, q.n);
    assert_true(v.kv == q.kv);
    assert_memory_equal(v.idx, q.idx, (size_t)q.n * sizeof *q.idx);
    assert_memory_equal(v.q, q.q, (size_t)q.n * sizeof *q.q);
    assert_int_equal(v.sparse, 1);
    assert_null(v.dense);
    assert_int_equal(cost_pack_bytes(p), 16 + 8 * (size_t)q.n);
    free(p);
    cost_req_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_with_simulator),
        cmocka_unit_test(test_estimate_under_band_and_switch),
        cmocka_unit_test(test_every_way_out),
        cmocka_unit_test(test_answer_and_explain),
        cmocka_unit_test(test_reported_loads),
        cmocka_unit_test(test_pack_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
