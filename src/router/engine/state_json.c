/* state_json.c - JSON views of the router state (state.h), each taken
 * under the state's lock so that it is one consistent moment. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

int decision_fields(json_t *o, char *const *workers, int K, int worker, int rule, double tau,
                    int has_sim, const double *sim, double sim_max, int n_cand,
                    const int *cand, const int64_t *load)
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
    return bad ? -1 : 0;
}

json_t *drec_json(const rstate *s, const drec *d)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    decision_fields(o, s->workers, s->K, d->worker, d->rule, d->tau, d->has_sim, d->sim,
                    d->sim_max, d->n_cand, d->cand, d->load);
    json_object_set_new(o, "request_id", json_string(d->id));
    json_object_set_new(o, "seq", json_integer((json_int_t)d->seq));
    json_object_set_new(o, "time_ms", json_integer((json_int_t)(d->t * 1e3)));
    json_object_set_new(o, "model_generation", json_integer((json_int_t)d->model_gen));
    json_object_set_new(o, "model_origin", json_string(d->model_refit_of ? "refit" : "loaded"));
    json_object_set_new(o, "model_refit_of", d->model_refit_of
                                                 ? json_integer((json_int_t)d->model_refit_of)
                                                 : json_null());
    json_object_set_new(o, "prefill_index", json_integer(d->prefill));
    static const char *const ended[] = {NULL, "finished", "expired", "cleared"};
    json_object_set_new(o, "finished", json_boolean(d->finished == 1));
    json_object_set_new(o, "ended", d->finished > 0 && d->finished < 4
                                        ? json_string(ended[d->finished]) : json_null());
    json_object_set_new(o, "cache", json_pack("{s:i, s:i, s:i}", "hit_blocks", d->hit_blocks,
                                              "missing_blocks", d->missing_blocks,
                                              "stored_blocks", d->stored_blocks));
    return o;
}

json_t *state_workers_json(rstate *s)
{
    json_t *a = json_array();
    pthread_mutex_lock(&s->lock);
    for (int k = 0; a && k < s->K; k++) {
        json_t *rules = json_object();
        for (int r = 0; rules && r < RULE_N; r++) {
            uint64_t n = s->by_rule[(size_t)k * RULE_N + r];
            if (n)
                json_object_set_new(rules, route_rule_name((route_rule)r),
                                    json_integer((json_int_t)n));
        }
        json_array_append_new(
            a, json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "name", s->workers[k],
                         "index", k, "inflight", (json_int_t)s->inflight[k], "routed",
                         (json_int_t)s->routed[k], "finished", (json_int_t)s->finished[k],
                         "expired", (json_int_t)s->expired[k], "cleared",
                         (json_int_t)s->cleared[k], "rules", rules ? rules : json_object()));
        /* with reported loads: which signal routed this worker, and what it saw */
        if (s->use_reported) {
            int known = s->rep_known[k];
            json_t *w = json_array_get(a, (size_t)k);
            json_object_set_new(w, "load_source",
                                json_string(!known ? "own" : s->rep_stale[k] ? "vllm-stale"
                                                                               : "vllm"));
            json_object_set_new(
                w, "load", json_integer(known ? s->rep_load[k] +
                                                    (json_int_t)(s->routed[k] - s->rep_base[k])
                                              : s->inflight[k]));
        }
    }
    pthread_mutex_unlock(&s->lock);
    return a;
}

json_t *state_decisions_json(rstate *s, int n)
{
    json_t *a = json_array();
    pthread_mutex_lock(&s->lock);
    for (int i = 0, j = s->ring_head; a && i < s->ring_n && i < n; i++) {
        j = (j - 1 + s->ring_cap) % s->ring_cap;
        json_array_append_new(a, drec_json(s, &s->ring[j]));
    }
    pthread_mutex_unlock(&s->lock);
    return a;
}

json_t *state_explain_json(rstate *s, const char *id)
{
    json_t *o = NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0, j = s->ring_head; i < s->ring_n; i++) {
        j = (j - 1 + s->ring_cap) % s->ring_cap;
        if (!strcmp(s->ring[j].id, id)) {
            o = drec_json(s, &s->ring[j]);
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
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
 * against the calibration (the fit's mean similarity and cluster sizes);
 * tvd = total variation distance between the two share vectors. */
json_t *state_drift_json(rstate *s, const mref_t *r)
{
    json_t *live = json_array(), *calib = r->calib_share ? json_array() : json_null();
    pthread_mutex_lock(&s->lock);
    int n = s->win_gen == r->gen ? s->win_n : 0;
    double mean = n ? s->win_sim_sum / n : NAN, tvd = r->calib_share && n ? 0 : NAN;
    for (int k = 0; k < s->K; k++) {
        double share = n ? (double)s->win_nearest[k] / n : 0;
        json_array_append_new(live, n ? json_real(share) : json_null());
        if (r->calib_share) {
            json_array_append_new(calib, json_real(r->calib_share[k]));
            if (n)
                tvd += 0.5 * fabs(share - r->calib_share[k]);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return json_pack("{s:i, s:o, s:o, s:o, s:o, s:o}", "window", n, "mean_best_similarity",
                     num_or_null(mean), "calibration_mean_similarity", num_or_null(r->calib_sim),
                     "share", live, "calibration_share", calib, "share_tvd", num_or_null(tvd));
}
