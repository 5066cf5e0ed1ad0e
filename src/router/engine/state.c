/* state.c - the router's shared routing state (state.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "state.h"

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int alloc_ring(rstate *s, int n)
{
    int K = s->K;
    s->ring = calloc((size_t)n, sizeof *s->ring);
    if (!s->ring)
        return -1;
    s->ring_cap = n;
    for (int i = 0; i < n; i++) {
        drec *d = &s->ring[i];
        d->sim = calloc((size_t)K, sizeof *d->sim);
        d->load = calloc((size_t)K, sizeof *d->load);
        d->cand = calloc((size_t)K, sizeof *d->cand);
        if (!d->sim || !d->load || !d->cand)
            return -1;
    }
    return 0;
}

rstate *state_new(int K, const char *const *workers, double tau, int ring, int window,
                  char *err, size_t errlen)
{
    rstate *s = calloc(1, sizeof *s);
    if (!s) {
        eldr_errf(err, errlen, "out of memory for the router state");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->K = K;
    s->tau = tau;
    s->win_cap = window;
    int bad = idmap_init(&s->ids) < 0 || !(s->workers = calloc((size_t)K, sizeof *s->workers)) ||
              !(s->inflight = calloc((size_t)K, sizeof *s->inflight)) ||
              !(s->routed = calloc((size_t)K, sizeof *s->routed)) ||
              !(s->finished = calloc((size_t)K, sizeof *s->finished)) ||
              !(s->failed = calloc((size_t)K, sizeof *s->failed)) ||
              !(s->expired = calloc((size_t)K, sizeof *s->expired)) ||
              !(s->cleared = calloc((size_t)K, sizeof *s->cleared)) ||
              !(s->ejected = calloc((size_t)K, sizeof *s->ejected)) ||
              !(s->by_rule = calloc((size_t)K * RULE_N, sizeof *s->by_rule)) ||
              !(s->win_nearest = calloc((size_t)K, sizeof *s->win_nearest)) ||
              !(s->rep_known = calloc((size_t)K, sizeof *s->rep_known)) ||
              !(s->rep_stale = calloc((size_t)K, sizeof *s->rep_stale)) ||
              !(s->rep_load = calloc((size_t)K, sizeof *s->rep_load)) ||
              !(s->rep_base = calloc((size_t)K, sizeof *s->rep_base)) ||
              !(s->win = calloc((size_t)window, sizeof *s->win)) || alloc_ring(s, ring) < 0;
    for (int k = 0; !bad && k < K; k++)
        bad = !(s->workers[k] = strdup(workers[k]));
    if (bad) {
        state_free(s);
        eldr_errf(err, errlen, "out of memory for the router state (%d decisions, %d window)",
                  ring, window);
        return NULL;
    }
    return s;
}

void state_free(rstate *s)
{
    if (!s)
        return;
    for (int i = 0; s->ring && i < s->ring_cap; i++) {
        free(s->ring[i].sim);
        free(s->ring[i].load);
        free(s->ring[i].cand);
        free(s->ring[i].terms);
    }
    for (int i = 0; s->win && i < s->win_cap; i++)
        free(s->win[i].sig);
    for (int k = 0; s->workers && k < s->K; k++)
        free(s->workers[k]);
    free(s->ring);
    free(s->win);
    free(s->workers);
    free(s->inflight);
    free(s->routed);
    free(s->finished);
    free(s->failed);
    free(s->expired);
    free(s->cleared);
    free(s->ejected);
    free(s->terms);
    cost_state_free(&s->cost);
    free(s->by_rule);
    free(s->win_nearest);
    free(s->rep_known);
    free(s->rep_stale);
    free(s->rep_load);
    free(s->rep_base);
    idmap_free(&s->ids);
    state_online_free(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The ring keeps a cost decision's terms; a slot gets its array at its
 * first one (band decisions never pay for it). 0 when out of memory:
 * that record shows no terms. */
static int keep_terms(rstate *s, drec *r)
{
    if (!r->terms)
        r->terms = malloc((size_t)s->K * sizeof *r->terms);
    if (!r->terms)
        return 0;
    memcpy(r->terms, s->terms, (size_t)s->K * sizeof *r->terms);
    return 1;
}

static void record_decision(rstate *s, const route_in *in, const route_out *out, int no_cells)
{
    drec *r = &s->ring[s->ring_head];
    const route_decision *d = &out->d;
    rb_copy_id(r->id, sizeof r->id, out->request_id);
    r->seq = out->seq;
    r->t = unix_now();
    r->tau = out->tau;
    r->model_gen = in->model->gen;
    r->model_refit_of = in->model->refit_of;
    r->worker = d->worker;
    r->rule = (int)d->rule;
    r->prefill = in->prefill;
    r->finished = 0;
    r->hit_blocks = in->hit_blocks;
    r->missing_blocks = in->missing_blocks;
    r->stored_blocks = in->stored_blocks;
    r->origin = in->origin;
    r->sig_rows = in->sig_rows;
    r->cached_rows = in->cached_rows;
    snprintf(r->note, sizeof r->note, "%s", in->note ? in->note : "");
    r->policy = out->policy;
    r->has_cost = d->has_cost && keep_terms(s, r);
    if (d->has_cost && no_cells)   /* the rule saw no cells: say why it balanced */
        snprintf(r->note + strlen(r->note), sizeof r->note - strlen(r->note), "%s%s",
                 r->note[0] ? "; " : "", "cost rule: no expert counts, the request adds its "
                 "load only");
    r->has_sim = d->has_sim;
    r->sim_max = d->sim_max;
    r->n_cand = d->n_cand;
    for (int k = 0; k < s->K; k++) {
        r->sim[k] = d->has_sim ? d->sim[k] : 0;
        r->load[k] = d->load[k];
    }
    memcpy(r->cand, d->cand, (size_t)d->n_cand * sizeof *r->cand);
    memset(r->ineligible, 0, sizeof r->ineligible);
    r->n_ineligible = 0;
    r->retry_of = in->retry_of;
    for (int k = 0; in->eligible && k < s->K; k++)
        if (!in->eligible[k]) {
            r->ineligible[k / 64] |= 1ULL << (k % 64);
            r->n_ineligible++;
        }
    s->ring_head = (s->ring_head + 1) % s->ring_cap;
    if (s->ring_n < s->ring_cap)
        s->ring_n++;
}

/* Keep the signature in the window, replacing the oldest (and taking it
 * out of the drift sums). The slot takes the route's buffer and gives it
 * the one it held. */
static void record_window(rstate *s, route_in *in, const route_out *out)
{
    if (!in->sim || !in->sig || in->model->gen != s->win_gen || s->win_dim == 0)
        return;
    wrec *w = &s->win[s->win_head];
    if (s->win_n == s->win_cap) {
        s->win_sim_sum -= w->sim_max;
        s->win_nearest[w->nearest]--;
    } else {
        s->win_n++;
    }
    int best = 0;
    for (int k = 1; k < s->K; k++)
        if (in->sim[k] > in->sim[best])
            best = k;
    rb_copy_id(w->id, sizeof w->id, out->request_id);
    w->seq = out->seq;
    w->nearest = best;
    w->sim_max = in->sim[best];
    float *old = w->sig;   /* this model generation's dim, or NULL */
    w->sig = in->sig;
    in->sig = old;
    s->win_sim_sum += w->sim_max;
    s->win_nearest[best]++;
    s->win_head = (s->win_head + 1) % s->win_cap;
}

/* The loads a decision sees: the in-flight counts, or with reported
 * loads, each known worker's report plus what was sent it since. */
static const int64_t *routing_loads(rstate *s, int64_t *buf)
{
    if (!s->use_reported)
        return s->inflight;
    for (int k = 0; k < s->K; k++)
        buf[k] = s->rep_known[k] ? s->rep_load[k] + (int64_t)(s->routed[k] - s->rep_base[k])
                                 : s->inflight[k];
    return buf;
}

/* The band rule (or, without a signature, the least loaded), or the cost
 * rule on x, over the workers the caller may use. */
static void decide(rstate *s, const route_in *in, const cost_req *x, route_out *out)
{
    int64_t buf[ROUTE_MAX_WORKERS];
    const int64_t *load = routing_loads(s, buf);
    out->policy = s->policy;
    if (s->policy == STATE_POLICY_COST && s->cost_on)
        cost_decide(&s->cost, x, load, in->eligible, &out->d, s->terms);
    else if (in->sim)
        route_band_decide_among(in->sim, s->K, s->tau, 1, load, in->eligible, &out->d);
    else
        route_nosig_decide_among(s->K, load, in->eligible, &out->d);
}

int state_route(rstate *s, route_in *in, route_out *out, rb_err *e)
{
    pthread_mutex_lock(&s->lock);
    uint64_t seq = s->seq + 1;
    if (in->request_id[0])
        rb_copy_id(out->request_id, sizeof out->request_id, in->request_id);
    else
        snprintf(out->request_id, sizeof out->request_id, "r%llu", (unsigned long long)seq);
    if (s->ids.n >= STATE_INFLIGHT_MAX) {
        pthread_mutex_unlock(&s->lock);
        return rb_fail(e, 503, "request_id", "%d requests in flight: finish some first",
                       STATE_INFLIGHT_MAX);
    }
    cost_req none;
    cost_pack_view(NULL, &none);
    const cost_req *x = in->creq ? in->creq : &none;
    decide(s, in, x, out);
    if (out->d.worker < 0) {
        pthread_mutex_unlock(&s->lock);
        return rb_fail(e, 503, "workers", "no decode worker is eligible (all %d are ejected "
                       "or excluded)", s->K);
    }
    /* a request eldrd finishes itself is never "lost": --inflight-ttl
     * does not take it (born at +inf) */
    int rc = idmap_put(&s->ids, out->request_id, out->d.worker, seq,
                       in->owned ? INFINITY : unix_now(), in->cost);
    if (rc != 0) {
        pthread_mutex_unlock(&s->lock);
        if (rc > 0)
            return rb_fail(e, 409, "request_id", "'%.200s' is in flight already",
                           out->request_id);
        return rb_fail(e, 503, "request_id", "out of memory for the in-flight table");
    }
    int no_cells = in->cost == NULL;
    in->cost = NULL;   /* the table's now */
    if (s->cost_on)
        cost_state_add(&s->cost, out->d.worker, x);
    s->seq = seq;
    out->seq = seq;
    out->tau = s->tau;
    s->inflight[out->d.worker]++;
    s->routed[out->d.worker]++;
    s->by_rule[(size_t)out->d.worker * RULE_N + out->d.rule]++;
    record_decision(s, in, out, no_cells);
    state_online_push(s, in);  /* before the window may swap in->sig away */
    record_window(s, in, out);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Under the lock: request p left worker w; the estimate loses exactly
 * what its route added. Frees p. */
static void cost_gone(rstate *s, int w, void *p)
{
    if (s->cost_on) {
        cost_req view;
        cost_pack_view(p, &view);
        cost_state_remove(&s->cost, w, &view);
    }
    free(p);
}

/* ended: drec.finished, 1 finished or 5 failed. */
static int end_route(rstate *s, const char *id, int ended, int *worker, rb_err *e)
{
    pthread_mutex_lock(&s->lock);
    uint64_t seq = 0;
    void *pack = NULL;
    int w = idmap_take(&s->ids, id, &seq, &pack);
    if (w >= 0) {
        cost_gone(s, w, pack);
        if (s->inflight[w] > 0)   /* the table and the loads agree; never below zero */
            s->inflight[w]--;
        (ended == 5 ? s->failed : s->finished)[w]++;
        /* decision seq went to ring slot (seq - 1) mod cap, if not overwritten */
        drec *r = &s->ring[(seq - 1) % (uint64_t)s->ring_cap];
        if (r->seq == seq)
            r->finished = ended;
    }
    pthread_mutex_unlock(&s->lock);
    if (w < 0)
        return rb_fail(e, 404, "request_id", "'%.200s' is not in flight", id);
    *worker = w;
    return 0;
}

int state_finish(rstate *s, const char *id, int *worker, rb_err *e)
{
    return end_route(s, id, 1, worker, e);
}

int state_fail(rstate *s, const char *id, int *worker, rb_err *e)
{
    return end_route(s, id, 5, worker, e);
}

typedef struct drop_ctx {
    rstate *s;
    double before;               /* expire: routed before this */
    int worker;                  /* clear, eject: this worker */
    uint64_t *count;             /* s->expired, s->cleared or s->ejected */
    int ended;                   /* drec.finished: 2 expired, 3 cleared, 4 ejected */
} drop_ctx;

static int keep_young(void *ctx, int value, double born)
{
    (void)value;
    return born >= ((drop_ctx *)ctx)->before;
}

static int keep_other_worker(void *ctx, int value, double born)
{
    (void)born;
    return value != ((drop_ctx *)ctx)->worker;
}

/* The load drops as at a finish; the decision says how it ended. */
static void dropped(void *ctx, int w, uint64_t seq, void *pack)
{
    drop_ctx *c = ctx;
    cost_gone(c->s, w, pack);
    if (c->s->inflight[w] > 0)
        c->s->inflight[w]--;
    c->count[w]++;
    drec *r = &c->s->ring[(seq - 1) % (uint64_t)c->s->ring_cap];
    if (r->seq == seq)
        r->finished = c->ended;
}

long state_expire(rstate *s, double before)
{
    pthread_mutex_lock(&s->lock);
    drop_ctx c = {s, before, -1, s->expired, 2};
    long n = idmap_remove_if(&s->ids, keep_young, dropped, &c);
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Every in-flight request of worker k out, counted in count; the
 * estimate of k is then empty, and reset so (exact, as cost_state_remove
 * of the last member leaves it). */
static long drop_worker(rstate *s, int k, uint64_t *count, int ended)
{
    pthread_mutex_lock(&s->lock);
    drop_ctx c = {s, 0, k, count, ended};
    long n = idmap_remove_if(&s->ids, keep_other_worker, dropped, &c);
    if (n >= 0 && s->cost_on)
        cost_state_reset(&s->cost, k);
    pthread_mutex_unlock(&s->lock);
    return n;
}

long state_clear_worker(rstate *s, int k)
{
    return drop_worker(s, k, s->cleared, 3);
}

long state_eject_worker(rstate *s, int k)
{
    return drop_worker(s, k, s->ejected, 4);
}

int state_cost_init(rstate *s, int L, int E, const cost_model *m, int max_batch, int policy,
                    char *err, size_t errlen)
{
    if (!(s->terms = calloc((size_t)s->K, sizeof *s->terms))) {
        eldr_errf(err, errlen, "out of memory for the cost rule's terms");
        return -1;
    }
    if (cost_state_init(&s->cost, s->K, L, E, m, max_batch, err, errlen) < 0)
        return -1;
    s->cost_on = 1;
    s->policy = policy;
    return 0;
}

int state_get_policy(rstate *s)
{
    pthread_mutex_lock(&s->lock);
    int p = s->policy;
    pthread_mutex_unlock(&s->lock);
    return p;
}

int state_set_policy(rstate *s, int policy)
{
    pthread_mutex_lock(&s->lock);
    int ok = policy == STATE_POLICY_BAND || (policy == STATE_POLICY_COST && s->cost_on);
    if (ok)
        s->policy = policy;
    pthread_mutex_unlock(&s->lock);
    return ok ? 0 : -1;
}

int state_cost_copy(rstate *s, double *U, int64_t *members, double *kv)
{
    pthread_mutex_lock(&s->lock);
    int on = s->cost_on;
    for (int k = 0; on && k < s->K; k++) {
        U[k] = cost_state_expected_u(&s->cost, k);
        members[k] = s->cost.members[k];
        kv[k] = s->cost.kv[k] > 0 ? s->cost.kv[k] : 0;
    }
    pthread_mutex_unlock(&s->lock);
    return on;
}

double state_get_tau(rstate *s)
{
    pthread_mutex_lock(&s->lock);
    double t = s->tau;
    pthread_mutex_unlock(&s->lock);
    return t;
}

void state_set_tau(rstate *s, double tau)
{
    pthread_mutex_lock(&s->lock);
    s->tau = tau;
    pthread_mutex_unlock(&s->lock);
}

void state_use_reported(rstate *s, int on)
{
    pthread_mutex_lock(&s->lock);
    s->use_reported = on;
    pthread_mutex_unlock(&s->lock);
}

void state_routed_counts(rstate *s, uint64_t *out)
{
    pthread_mutex_lock(&s->lock);
    memcpy(out, s->routed, (size_t)s->K * sizeof *out);
    pthread_mutex_unlock(&s->lock);
}

void state_set_reported(rstate *s, int k, int known, int64_t load, uint64_t base)
{
    pthread_mutex_lock(&s->lock);
    if (known) {
        s->rep_known[k] = 1;
        s->rep_stale[k] = 0;
        s->rep_load[k] = load;
        s->rep_base[k] = base;
    } else if (s->rep_known[k]) {
        /* keep the last report and its base: the worker counts what it
         * last said plus every route since, never the 0 of a count that
         * started when the poll broke */
        s->rep_stale[k] = 1;
    }
    pthread_mutex_unlock(&s->lock);
}

void state_model_changed(rstate *s, const mref_t *r)
{
    pthread_mutex_lock(&s->lock);
    if (r->dim != s->win_dim)
        for (int i = 0; i < s->win_cap; i++) {
            free(s->win[i].sig);
            s->win[i].sig = NULL;
        }
    s->win_dim = r->dim;
    s->win_gen = r->gen;
    s->win_n = s->win_head = 0;
    s->win_sim_sum = 0;
    memset(s->win_nearest, 0, (size_t)s->K * sizeof *s->win_nearest);
    state_online_epoch(s, r);
    pthread_mutex_unlock(&s->lock);
}
