/* state_json.c - JSON views of the router state (state.h). Each copies
 * what it shows out under the state's lock, so that it is one consistent
 * moment, and builds its JSON after the lock is released: a route never
 * waits for jansson. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "drift.h"
#include "state.h"

const char *sig_origin_name(int origin)
{
    static const char *const names[] = {"none", "counts", "eldr_sig", "routed_experts"};
    return origin >= 0 && origin <= SIG_ORIGIN_ROUTED ? names[origin] : "none";
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

int decision_fields(json_t *o, char *const *workers, int K, int worker, int rule, double tau,
                    int has_sim, const double *sim, double sim_max, int n_cand,
                    const int *cand, const int64_t *load, int policy, const double *cost)
{
    json_t *sims = has_sim ? json_array() : json_null(), *band = json_array(),
           *loads = json_array();
    int bad = !sims || !band || !loads;
    for (int k = 0; !bad && k < K; k++)
        bad = (has_sim && json_array_append_new(sims, json_real(sim[k])) < 0) ||
              json_array_append_new(loads, json_integer(load[k])) < 0;
    for (int i = 0; !bad && i < n_cand; i++)
        bad = json_array_append_new(band, json_integer(cand[i])) < 0;
    if (bad) {
        json_decref(sims);
        json_decref(band);
        json_decref(loads);
        return -1;
    }
    /* json_object_set_new consumes its value even when it fails */
    bad = json_object_set_new(o, "similarities", sims) < 0;
    bad |= json_object_set_new(o, "band", band) < 0;
    bad |= json_object_set_new(o, "loads", loads) < 0;
    bad |= json_object_set_new(o, "worker", json_string(workers[worker])) < 0;
    bad |= json_object_set_new(o, "worker_index", json_integer(worker)) < 0;
    bad |= json_object_set_new(o, "rule", json_string(route_rule_name((route_rule)rule))) < 0;
    bad |= json_object_set_new(o, "tau", json_real(tau)) < 0;
    bad |= json_object_set_new(o, "sim_max", has_sim ? json_real(sim_max) : json_null()) < 0;
    bad |= json_object_set_new(o, "policy", json_string(state_policy_name(policy))) < 0;
    if (cost) {
        json_t *c = json_array();
        for (int k = 0; c && k < K; k++)
            if (json_array_append_new(c, num_or_null(cost[k])) < 0) {
                json_decref(c);
                c = NULL;
            }
        bad |= !c || json_object_set_new(o, "costs", c) < 0;
    }
    return bad ? -1 : 0;
}

/* [{"worker", "worker_index", "why"}] of the workers the decision left
 * out: "failed this request" for a retry's failed worker, else "ejected"
 * (the pool's health: docs/reliability.md, "Dead upstreams"). */
static json_t *ineligible_json(const rstate *s, const drec *d)
{
    json_t *a = json_array();
    for (int k = 0; a && k < s->K; k++)
        if (d->ineligible[k / 64] >> (k % 64) & 1)
            json_array_append_new(a, json_pack("{s:s, s:i, s:s}", "worker", s->workers[k],
                                               "worker_index", k, "why",
                                               k == d->retry_of ? "failed this request"
                                                                : "ejected"));
    return a;
}

/* A cost decision's terms per worker (null for one it could not use). */
static json_t *terms_json(const rstate *s, const drec *d)
{
    json_t *a = json_array();
    for (int k = 0; a && k < s->K; k++) {
        const cost_terms *t = &d->terms[k];
        json_array_append_new(
            a, d->ineligible[k / 64] >> (k % 64) & 1
                   ? json_null()
                   : json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "B", (json_int_t)t->B,
                               "U", t->U, "dU", t->dU, "kv", t->kv, "t_before_ms", t->t_before,
                               "t_after_ms", t->t_after, "wait_ms", t->wait, "cost_ms",
                               t->cost));
    }
    return a;
}

/* d's costs: the copy's, else from its terms (NAN where it could not go). */
static const double *costs_of(const rstate *s, const drec *d, double *buf)
{
    if (!d->has_cost)
        return NULL;
    if (d->cost)
        return d->cost;
    for (int k = 0; k < s->K; k++)
        buf[k] = d->ineligible[k / 64] >> (k % 64) & 1 ? NAN : d->terms[k].cost;
    return buf;
}

json_t *drec_json(const rstate *s, const drec *d)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    double cbuf[ROUTE_MAX_WORKERS];
    decision_fields(o, s->workers, s->K, d->worker, d->rule, d->tau, d->has_sim, d->sim,
                    d->sim_max, d->n_cand, d->cand, d->load, d->policy, costs_of(s, d, cbuf));
    if (d->has_cost && d->terms)
        json_object_set_new(o, "cost_terms", terms_json(s, d));
    json_object_set_new(o, "request_id", json_string(d->id));
    if (d->n_ineligible)
        json_object_set_new(o, "ineligible", ineligible_json(s, d));
    json_object_set_new(o, "seq", json_integer((json_int_t)d->seq));
    json_object_set_new(o, "time_ms", json_integer((json_int_t)(d->t * 1e3)));
    json_object_set_new(o, "model_generation", json_integer((json_int_t)d->model_gen));
    json_object_set_new(o, "model_origin", json_string(d->model_refit_of ? "refit" : "loaded"));
    json_object_set_new(o, "model_refit_of", d->model_refit_of
                                                 ? json_integer((json_int_t)d->model_refit_of)
                                                 : json_null());
    json_object_set_new(o, "prefill_index",
                        d->prefill >= 0 ? json_integer(d->prefill) : json_null());
    static const char *const ended[] = {NULL,      "finished", "expired",
                                        "cleared", "ejected",  "failed"};
    json_object_set_new(o, "finished", json_boolean(d->finished == 1));
    json_object_set_new(o, "ended", d->finished > 0 && d->finished < 6
                                        ? json_string(ended[d->finished]) : json_null());
    json_t *sg = json_pack("{s:s, s:i, s:i}", "source", sig_origin_name(d->origin), "rows",
                           d->sig_rows, "cached_rows", d->cached_rows);
    if (sg && d->note[0])
        json_object_set_new(sg, "note", json_string(d->note));
    json_object_set_new(o, "signal", sg);
    json_object_set_new(o, "cache", json_pack("{s:i, s:i, s:i}", "hit_blocks", d->hit_blocks,
                                              "missing_blocks", d->missing_blocks,
                                              "stored_blocks", d->stored_blocks));
    return o;
}

int state_counts_copy(rstate *s, state_counts *c)
{
    int K = s->K;   /* fixed at state_new, like the workers' names */
    memset(c, 0, sizeof *c);
    uint64_t *u = malloc((size_t)K * (9 + RULE_N) * sizeof *u);
    uint8_t *b = malloc((size_t)K * 2);
    if (!u || !b) {
        free(u);
        free(b);
        return -1;
    }
    c->K = K;
    c->workers = s->workers;
    c->inflight = (int64_t *)u;
    c->rep_load = (int64_t *)u + K;
    c->routed = u + 2 * K;
    c->finished = u + 3 * K;
    c->expired = u + 4 * K;
    c->cleared = u + 5 * K;
    c->rep_base = u + 6 * K;
    c->ejected = u + 7 * K;
    c->failed = u + 8 * K;
    c->by_rule = u + 9 * K;
    c->rep_known = b;
    c->rep_stale = b + K;
    size_t w = (size_t)K * sizeof *u;
    pthread_mutex_lock(&s->lock);
    c->tau = s->tau;
    c->policy = s->policy;
    c->use_reported = s->use_reported;
    memcpy(c->inflight, s->inflight, w);
    memcpy(c->routed, s->routed, w);
    memcpy(c->finished, s->finished, w);
    memcpy(c->expired, s->expired, w);
    memcpy(c->cleared, s->cleared, w);
    memcpy(c->ejected, s->ejected, w);
    memcpy(c->failed, s->failed, w);
    memcpy(c->by_rule, s->by_rule, w * RULE_N);
    if (c->use_reported) {
        memcpy(c->rep_load, s->rep_load, w);
        memcpy(c->rep_base, s->rep_base, w);
        memcpy(c->rep_known, s->rep_known, (size_t)K);
        memcpy(c->rep_stale, s->rep_stale, (size_t)K);
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void state_counts_free(state_counts *c)
{
    free(c->inflight);
    free(c->rep_known);
    memset(c, 0, sizeof *c);
}

json_t *state_workers_json(rstate *s)
{
    state_counts c;
    if (state_counts_copy(s, &c) < 0)
        return NULL;
    json_t *a = json_array();
    for (int k = 0; a && k < c.K; k++) {
        json_t *rules = json_object();
        for (int r = 0; rules && r < RULE_N; r++) {
            uint64_t n = c.by_rule[(size_t)k * RULE_N + r];
            if (n)
                json_object_set_new(rules, route_rule_name((route_rule)r),
                                    json_integer((json_int_t)n));
        }
        json_array_append_new(
            a, json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "name",
                         c.workers[k], "index", k, "inflight", (json_int_t)c.inflight[k],
                         "routed", (json_int_t)c.routed[k], "finished",
                         (json_int_t)c.finished[k], "failed", (json_int_t)c.failed[k], "expired", (json_int_t)c.expired[k],
                         "cleared", (json_int_t)c.cleared[k], "ejected",
                         (json_int_t)c.ejected[k], "rules", rules ? rules : json_object()));
        /* with reported loads: which signal routed this worker, and what it saw */
        if (c.use_reported) {
            int known = c.rep_known[k];
            json_t *w = json_array_get(a, (size_t)k);
            json_object_set_new(w, "load_source",
                                json_string(!known ? "own" : c.rep_stale[k] ? "vllm-stale"
                                                                            : "vllm"));
            json_object_set_new(
                w, "load", json_integer(known ? c.rep_load[k] +
                                                    (json_int_t)(c.routed[k] - c.rep_base[k])
                                              : c.inflight[k]));
        }
    }
    state_counts_free(&c);
    return a;
}

/* One ring record into a copy whose arrays are the caller's (K each):
 * cost gets a cost decision's costs, terms (NULL: not wanted) its terms. */
static void drec_copy(drec *to, const drec *from, int K, double *sim, int64_t *load, int *cand,
                      double *cost, cost_terms *terms)
{
    *to = *from;
    to->sim = memcpy(sim, from->sim, (size_t)K * sizeof *sim);
    to->load = memcpy(load, from->load, (size_t)K * sizeof *load);
    to->cand = memcpy(cand, from->cand, (size_t)from->n_cand * sizeof *cand);
    to->cost = NULL;
    to->terms = NULL;
    if (!from->has_cost)
        return;
    for (int k = 0; k < K; k++)
        cost[k] = from->ineligible[k / 64] >> (k % 64) & 1 ? NAN : from->terms[k].cost;
    to->cost = cost;
    if (terms)
        to->terms = memcpy(terms, from->terms, (size_t)K * sizeof *terms);
}

/* The newest n decisions (each an explain record, a cost decision's
 * terms too), copied out under the lock (a memcpy a record
 * and its arrays: about 0.3 ms for 4096 records of K = 4,
 * where building their JSON under the lock took 35 ms), then built
 * outside it. The memory is taken before the lock: the ring's capacity
 * is fixed. */
json_t *state_decisions_json(rstate *s, int n)
{
    int K = s->K, cap = n < s->ring_cap ? n : s->ring_cap;
    size_t m = (size_t)(cap > 0 ? cap : 1);
    drec *rec = malloc(m * sizeof *rec);
    double *sim = malloc(m * (size_t)K * sizeof *sim);
    int64_t *load = malloc(m * (size_t)K * sizeof *load);
    int *cand = malloc(m * (size_t)K * sizeof *cand);
    double *cost = malloc(m * (size_t)K * sizeof *cost);
    cost_terms *terms = malloc(m * (size_t)K * sizeof *terms);
    json_t *a = rec && sim && load && cand && cost && terms ? json_array() : NULL;
    int got = 0;
    if (a) {
        pthread_mutex_lock(&s->lock);
        for (int j = s->ring_head; got < s->ring_n && got < cap; got++) {
            size_t o = (size_t)got * (size_t)K;
            j = (j - 1 + s->ring_cap) % s->ring_cap;
            drec_copy(&rec[got], &s->ring[j], K, sim + o, load + o, cand + o, cost + o,
                      terms + o);
        }
        pthread_mutex_unlock(&s->lock);
    }
    for (int i = 0; a && i < got; i++)
        json_array_append_new(a, drec_json(s, &rec[i]));
    free(rec);
    free(sim);
    free(load);
    free(cand);
    free(cost);
    free(terms);
    return a;
}

json_t *state_explain_json(rstate *s, const char *id)
{
    double sim[ROUTE_MAX_WORKERS];
    int64_t load[ROUTE_MAX_WORKERS];
    int cand[ROUTE_MAX_WORKERS];
    double cost[ROUTE_MAX_WORKERS];
    cost_terms *terms = malloc((size_t)s->K * sizeof *terms);
    drec d;
    int found = 0;
    if (!terms)
        return NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0, j = s->ring_head; !found && i < s->ring_n; i++) {
        j = (j - 1 + s->ring_cap) % s->ring_cap;
        if (!strcmp(s->ring[j].id, id)) {
            drec_copy(&d, &s->ring[j], s->K, sim, load, cand, cost, terms);
            found = 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    json_t *o = found ? drec_json(s, &d) : NULL;
    free(terms);
    return o;
}

/* Copy the newest n window records out under the lock (one memcpy per
 * signature); the caller serialises outside it (window_stream.c): building
 * the JSON of 1024 x 2560 floats under the lock held every route for tens
 * of milliseconds. */
int state_window_copy(rstate *s, int n, window_copy *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->lock);
    int m = s->win_n < n ? s->win_n : n;
    size_t dim = s->win_dim;
    out->gen = s->win_gen;
    out->dim = dim;
    out->cap = s->win_cap;
    out->rec = calloc((size_t)(m > 0 ? m : 1), sizeof *out->rec);
    out->sigs = malloc((size_t)(m > 0 ? m : 1) * (dim ? dim : 1) * sizeof *out->sigs);
    if (out->rec && out->sigs)
        for (int i = 0, j = s->win_head; i < m; i++) {
            j = (j - 1 + s->win_cap) % s->win_cap;
            out->rec[i] = s->win[j];
            out->rec[i].sig = out->sigs + (size_t)i * dim;
            memcpy(out->rec[i].sig, s->win[j].sig, dim * sizeof *out->sigs);
        }
    pthread_mutex_unlock(&s->lock);
    if (!out->rec || !out->sigs) {
        window_copy_free(out);
        return -1;
    }
    out->n = m;
    return 0;
}

void window_copy_free(window_copy *w)
{
    free(w->rec);
    free(w->sigs);
    memset(w, 0, sizeof *w);
}

/* Drift over the window: mean best similarity and nearest-cluster shares,
 * against the calibration (the fit's mean similarity and its signatures'
 * own nearest-centroid shares, or the cluster sizes of a model that
 * predates them); tvd = total variation distance between the two share
 * vectors, threshold = its 99% point under sampling noise alone for this
 * window size (drift.h), exceeded = tvd above it. Unknown values are
 * null, never NaN; an empty window has no shares and no tvd. */
json_t *state_drift_json(rstate *s, const mref_t *r)
{
    int64_t nearest[ROUTE_MAX_WORKERS];
    double share[ROUTE_MAX_WORKERS];
    pthread_mutex_lock(&s->lock);
    int n = s->win_gen == r->gen ? s->win_n : 0;
    double sum = s->win_sim_sum;
    memcpy(nearest, s->win_nearest, (size_t)s->K * sizeof *nearest);
    pthread_mutex_unlock(&s->lock);
    json_t *live = json_array(), *calib = r->calib_share ? json_array() : json_null();
    for (int k = 0; k < s->K; k++) {
        share[k] = n ? (double)nearest[k] / n : 0;
        json_array_append_new(live, n ? json_real(share[k]) : json_null());
        if (r->calib_share)
            json_array_append_new(calib, json_real(r->calib_share[k]));
    }
    int have = r->calib_share && n;
    double mean = n ? sum / n : NAN, tvd = have ? drift_tvd(share, r->calib_share, s->K) : NAN,
           thr = have ? drift_tvd_threshold(n, r->calib_share, s->K) : NAN;
    const char *baseline = !r->calib_share ? "none (the model has neither nearest shares "
                                             "nor cluster sizes)"
                           : r->calib_from_sizes ? "balanced sizes (model predates "
                                                   "calibration shares)"
                                                 : "calibration nearest-centroid shares";
    return json_pack("{s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:s}", "window", n,
                     "model_generation", (json_int_t)r->gen, "mean_best_similarity",
                     num_or_null(mean), "calibration_mean_similarity", num_or_null(r->calib_sim),
                     "share", live, "calibration_share", calib, "share_tvd", num_or_null(tvd),
                     "share_tvd_threshold", num_or_null(thr), "share_tvd_exceeded",
                     isfinite(tvd) && isfinite(thr) ? json_boolean(tvd > thr) : json_null(),
                     "baseline", baseline, "baseline_source",
                     !r->calib_share ? "none" : r->calib_from_sizes ? "sizes" : "nearest");
}
