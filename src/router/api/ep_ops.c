/* ep_ops.c - the operator endpoints: GET /v1/snapshot, GET /v1/explain/ID,
 * GET /v1/window, PUT /v1/model, PUT /v1/config, GET /healthz
 * (docs/http-api.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "body.h"
#include "json_in.h"
#include "snapshot.h"
#include "log.h"
#include "endpoints.h"
#include "err.h"
#include "failures.h"
#include "readiness.h"
#include "window_stream.h"

/* ?name=N as an int in [lo, hi], def when absent; -1 (and 400) when bad. */
static int query_int(const http_req *r, http_resp *out, const char *name, int def, int lo,
                     int hi, int *v)
{
    const char *s = http_query(r, name);
    *v = def;
    if (!s)
        return 0;
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < lo || x > hi) {
        http_error(out, 400, name, "query argument %s=%s is not an integer in %d..%d", name, s,
                   lo, hi);
        return -1;
    }
    *v = (int)x;
    return 0;
}

static json_t *float_rows(const float *v, int rows, size_t dim)
{
    json_t *a = json_array();
    for (int i = 0; a && i < rows; i++) {
        json_t *row = json_array();
        for (size_t j = 0; row && j < dim; j++)
            json_array_append_new(row, json_real(v[(size_t)i * dim + j]));
        json_array_append_new(a, row);
    }
    return a;
}

static json_t *model_summary(const mref_t *r, int with_centroids)
{
    const model_t *m = r->m;
    json_t *layers = json_array(), *sizes = m->sizes ? json_array() : json_null();
    for (int i = 0; i < m->recipe.n_layers; i++)
        json_array_append_new(layers, json_integer(m->recipe.layers[i]));
    for (int k = 0; m->sizes && k < m->K; k++)
        json_array_append_new(sizes, json_integer(m->sizes[k]));
    json_t *o = json_pack(
        "{s:I, s:s, s:f, s:s, s:i, s:i, s:i, s:i, s:I, s:o, s:o, s:o, s:s, s:s, s:o}",
        "generation", (json_int_t)r->gen, "source", r->source, "loaded_at", r->loaded_at,
        "variant", sig_variant_name(m->recipe.variant), "L", m->recipe.L, "E", m->recipe.E, "k",
        m->k, "K", m->K, "dim", (json_int_t)r->dim, "layer_mask", layers, "sizes", sizes, "rho",
        isfinite(m->rho) ? json_real(m->rho) : json_null(), "calib_sha256", m->calib_sha256,
        "created", m->created, "model_tau", json_real(m->tau));
    if (o) {
        json_object_set_new(o, "origin", json_string(r->refit_of ? "refit" : "loaded"));
        json_object_set_new(o, "refit_of", r->refit_of ? json_integer((json_int_t)r->refit_of)
                                                       : json_null());
        json_object_set_new(o, "epoch", json_integer((json_int_t)r->epoch));
        /* the drift baseline (model.h nearest_share), so a saved snapshot
         * pushed back keeps it */
        json_t *ns = m->nearest_share ? json_array() : json_null();
        for (int k = 0; m->nearest_share && k < m->K; k++)
            json_array_append_new(ns, json_real(m->nearest_share[k]));
        json_object_set_new(o, "nearest_share", ns);
    }
    if (o && with_centroids) {
        /* with the idf, a saved snapshot is a whole model (src/core/snapshot.h) */
        json_object_set_new(o, "centroids", float_rows(m->centroids, m->K, r->dim));
        json_object_set_new(o, "sig_idf", m->recipe.idf ? float_rows(m->recipe.idf, 1, r->dim)
                                                        : json_null());
    }
    return o;
}

static json_t *cache_summary(engine_t *d)
{
    json_t *a = json_array();
    for (int i = 0; a && i < d->n_caches; i++) {
        pcache *pc = &d->caches[i];
        sigcache_stats st;
        pthread_mutex_lock(&pc->lock);
        sigcache_get_stats(pc->c, &st);
        json_t *o = json_pack(
            "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "prefill_worker", pc->name,
            "capacity", (json_int_t)st.capacity, "entries", (json_int_t)st.entries, "hit_blocks",
            (json_int_t)pc->hit_blocks, "missing_blocks", (json_int_t)pc->missing_blocks,
            "stored_blocks", (json_int_t)pc->stored_blocks, "evictions",
            (json_int_t)st.evictions, "removals", (json_int_t)st.removals, "chain_mismatches",
            (json_int_t)st.chain_mismatches);
        pthread_mutex_unlock(&pc->lock);
        json_array_append_new(a, o);
    }
    return a;
}

void ep_snapshot(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    int cent, n;
    if (query_int(r, out, "centroids", 0, 0, 1, &cent) < 0 ||
        query_int(r, out, "decisions", 50, 0, d->o->decisions, &n) < 0)
        return;
    mref_t *m = mholder_get(&d->model);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    out->json = json_pack("{s:s, s:s, s:f, s:f, s:f, s:o, s:o, s:o, s:o, s:o}", "format",
                          "eldr-router-snapshot", "version", ELDR_VERSION, "time",
                          (double)ts.tv_sec + ts.tv_nsec * 1e-9, "uptime_s",
                          (double)ts.tv_sec - d->started, "tau", state_get_tau(d->st), "model",
                          model_summary(m, cent), "workers", state_workers_json(d->st),
                          "decisions", state_decisions_json(d->st, n), "drift",
                          state_drift_json(d->st, m), "caches", cache_summary(d));
    /* what the providers add (engine.h), over these defaults */
    if (out->json) {
        json_object_set_new(out->json, "policy",
                            json_string(state_policy_name(state_get_policy(d->st))));
        json_object_set_new(out->json, "refit", json_null());
        json_object_set_new(out->json, "load", json_pack("{s:s}", "from", "own"));
        json_object_set_new(out->json, "failures", failures_json(d));
    }
    for (int i = 0; out->json && i < d->n_providers; i++) {
        const engine_provider *p = &d->providers[i];
        if (p->snapshot && p->snapshot_key)
            json_object_set_new(out->json, p->snapshot_key, p->snapshot(p->cls));
    }
    mref_put(m);
    if (!out->json)
        http_error(out, 503, "snapshot", "out of memory");
}

void ep_explain(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    const char *id = r->path + strlen("/v1/explain/");
    if (!*id) {
        http_error(out, 400, "path", "give a request id: /v1/explain/{request_id}");
        return;
    }
    out->json = state_explain_json(d->st, id);
    if (!out->json)
        http_error(out, 404, "request_id",
                   "'%.200s' is not among the last %d decisions", id, d->o->decisions);
}

void ep_window(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    int n;
    if (query_int(r, out, "n", d->o->window, 0, d->o->window, &n) < 0)
        return;
    window_copy w;
    window_stream *s = state_window_copy(d->st, n, &w) < 0 ? NULL : window_stream_new(&w);
    if (!s) {
        http_error(out, 503, "window", "out of memory");
        return;
    }
    out->stream_read = window_stream_read;
    out->stream_free = window_stream_free;
    out->stream_ctx = s;
    out->content_type = "application/json";
}

void ep_put_model(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    char err[ELDR_ERRLEN];
    model_t *m;
    if (r->len >= 4 && !memcmp(r->body, "\x89HDF", 4)) {
        http_error(out, 415, "body",
                   "send the model as the reference centroid JSON (eldr model export)");
        return;
    }
    rb_err be;
    if (rb_json_bounds(r->body, r->len, RB_MAX_NODES, RB_MAX_CONTAINERS, RB_MAX_DEPTH, &be) < 0) {
        http_rb_error(out, &be);
        return;
    }
    if (snapshot_or_model_text(r->body, r->len, "body", &m, err, sizeof err) < 0) {
        http_error(out, 422, "body", "%s", err);
        return;
    }
    if (engine_install(d, m, "PUT /v1/model", 1, err, sizeof err) < 0) {
        http_error(out, 422, "model", "%s", err);
        return;
    }
    mref_t *cur = mholder_get(&d->model);
    log_msg("audit: PUT /v1/model from %s (%s): generation %llu, %s, K=%d, %d layers%s%s",
               r->peer, r->authed ? "admin token" : "no token required",
               (unsigned long long)cur->gen, sig_variant_name(cur->m->recipe.variant),
               cur->m->K, cur->m->recipe.n_layers, d->persist_path[0] ? ", persisted to " : "",
               d->persist_path);
    out->json = json_pack("{s:I, s:i, s:I, s:o}", "model_generation", (json_int_t)cur->gen,
                          "K", cur->m->K, "dim", (json_int_t)cur->dim, "persisted",
                          d->persist_path[0] ? json_string(d->persist_path) : json_null());
    mref_put(cur);
}

/* The decision rule's settings: GET /v1/config, and PUT's answer. */
static json_t *config_json(engine_t *d)
{
    mref_t *cur = mholder_get(&d->model);
    int top_k = engine_top_k(d, cur);
    mref_put(cur);
    const cost_model *c = &d->cost;
    return json_pack("{s:f, s:s, s:i, s:o, s:s, s:{s:f, s:f, s:f, s:f, s:f}, s:o}", "tau",
                     state_get_tau(d->st), "policy",
                     state_policy_name(state_get_policy(d->st)), "max_batch", d->o->max_batch,
                     "top_k", top_k > 0 ? json_integer(top_k) : json_null(), "top_k_source",
                     d->o->top_k > 0 ? "--top-k" : "model", "cost_model", "t0", c->t0, "a",
                     c->a, "b", c->b, "c", c->c, "d", c->d, "cost_file",
                     d->o->cost_path ? json_string(d->o->cost_path) : json_null());
}

void ep_get_config(void *ctx, const http_req *r, http_resp *out)
{
    (void)r;
    out->json = config_json(ctx);
}

void ep_put_config(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    double tau;
    int policy;
    rb_err e;
    char err[ELDR_ERRLEN];
    if (config_body_parse(r->body, r->len, &tau, &policy, &e) < 0) {
        http_rb_error(out, &e);
        return;
    }
    int old_policy = state_get_policy(d->st);
    if (policy >= 0 && engine_set_policy(d, policy, err, sizeof err) < 0) {
        http_error(out, 409, "policy", "%s", err);
        return;
    }
    double old = state_get_tau(d->st);
    if (!isnan(tau))
        state_set_tau(d->st, tau);
    mref_t *cur = mholder_get(&d->model);
    if (!isnan(tau))
        log_msg("audit: PUT /v1/config from %s (%s): tau %g -> %g (model generation %llu)",
                r->peer, r->authed ? "admin token" : "no token required", old, tau,
                (unsigned long long)cur->gen);
    if (policy >= 0)
        log_msg("audit: PUT /v1/config from %s (%s): policy %s -> %s (model generation %llu)",
                r->peer, r->authed ? "admin token" : "no token required",
                state_policy_name(old_policy), state_policy_name(policy),
                (unsigned long long)cur->gen);
    mref_put(cur);
    out->json = config_json(d);
}

/* POST /v1/inflight/clear {"worker": NAME}: forget every in-flight
 * request of that worker (lost finishes, a worker restarted). */
void ep_inflight_clear(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    json_error_t je;
    json_t *b = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &je);
    const char *name = NULL;
    if (!b || !json_is_object(b)) {
        http_error(out, 400, "body", "expected a JSON object {\"worker\": NAME}%s%s",
                   b ? "" : ": ", b ? "" : je.text);
        json_decref(b);
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        if (strcmp(key, "worker")) {
            http_error(out, 422, key, "unknown key '%.64s' (only \"worker\")", key);
            json_decref(b);
            return;
        }
    }
    if (!(v = json_object_get(b, "worker")) || !(name = json_string_value(v))) {
        http_error(out, 422, "worker", "\"worker\" must be a worker name (a string)");
        json_decref(b);
        return;
    }
    int k = -1;
    for (int i = 0; i < d->K; i++)
        if (!strcmp(d->st->workers[i], name))
            k = i;
    if (k < 0) {
        http_error(out, 404, "worker", "no decode worker named '%.64s'", name);
        json_decref(b);
        return;
    }
    long n = state_clear_worker(d->st, k);
    json_decref(b);
    if (n < 0) {
        http_error(out, 503, "worker", "out of memory clearing the in-flight table");
        return;
    }
    log_msg("audit: POST /v1/inflight/clear from %s (%s): worker %s, %ld in-flight "
               "requests forgotten", r->peer, r->authed ? "admin token" : "no token required",
               d->st->workers[k], n);
    out->json = json_pack("{s:s, s:I}", "worker", d->st->workers[k], "cleared", (json_int_t)n);
}

/* The roles readiness shows and how many of each are in rotation. */
static json_t *rotation(const readiness *r)
{
    json_t *o = json_object();
    for (int role = POOL_PREFILL; role <= POOL_DECODE; role++)
        if (r->shown[role])
            json_object_set_new(o, role == POOL_PREFILL ? "prefill" : "decode",
                                json_pack("{s:i, s:i}", "in_rotation", r->in[role], "of",
                                          r->of[role]));
    return o;
}

/* Readiness (readiness.h, the answer the picker's gRPC health gives too):
 * 503 when not ready - naming the role that has no instance in rotation,
 * with Retry-After (Kubernetes then takes the pod out of the Service), or
 * saying eldrd drains; 200 with the counts otherwise, "degraded" when
 * some instance is out. */
void ep_healthz(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    (void)r;
    readiness rd;
    readiness_get(d, &rd);
    json_t *rot = rotation(&rd);
    if (!rd.ready) {
        out->status = 503;
        if (!strcmp(rd.why, "draining")) {
            out->json = json_pack("{s:s, s:s, s:o}", "status", "draining", "message",
                                  "eldrd is draining (shutting down): it takes no new work",
                                  "in_rotation", rot);
        } else if (!strcmp(rd.why, "endpoints")) {
            out->json = json_pack("{s:s, s:s, s:s, s:o}", "status", "unavailable", "role",
                                  "decode", "message", "the endpoints file does not map onto "
                                  "the model's workers", "in_rotation", rot);
        } else {
            out->retry_after = rd.back < 1 ? 1 : (int)(rd.back + 0.999);
            out->json = json_pack("{s:s, s:s, s:s, s:o}", "status", "unavailable", "role",
                                  rd.why, "message", "no instance of this role is in rotation: "
                                  "every one is ejected after failures", "in_rotation", rot);
        }
        return;
    }
    mref_t *m = mholder_get(&d->model);
    json_t *why = json_object();
    for (int i = 0; why && i < d->n_providers; i++) {
        const engine_provider *p = &d->providers[i];
        json_t *a = p->degraded ? p->degraded(p->cls) : NULL;
        if (a && json_array_size(a) > 0 && p->degraded_key)
            json_object_set_new(why, p->degraded_key, a);
        else
            json_decref(a);
    }
    int degraded = why && json_object_size(why) > 0;
    out->json = json_pack("{s:s, s:I, s:i}", "status", degraded ? "degraded" : "ok",
                          "model_generation", (json_int_t)m->gen, "workers", d->K);
    /* still 200 when degraded: eldrd routes, on what it last knew */
    if (out->json && degraded)
        json_object_update(out->json, why);
    if (out->json && json_object_size(rot))
        json_object_set(out->json, "in_rotation", rot);
    json_decref(rot);
    json_decref(why);
    mref_put(m);
}

/* Liveness: 200 while the process runs and answers (a restart will not
 * help a daemon whose upstreams are down: that is readiness). */
void ep_livez(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    (void)r;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    out->json = json_pack("{s:s, s:f}", "status", "alive", "uptime_s",
                          (double)ts.tv_sec - d->started);
}
