/* ep_route.c - POST /v1/route, POST /v1/finish, POST /v1/kv-events
 * (docs/http-api.md). */
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "blockhash.h"
#include "endpoints.h"
#include "err.h"
#include "route.h"

/* Add the cached prefix to the computed counts (total = cached blocks +
 * counts) and store the newly computed blocks. Claimed-cached blocks the
 * signature cache does not hold are reported as missing, never invented. */
static int use_cache(eldrd_t *d, const route_body *b, uint16_t *total, cache_use *u,
                     rb_err *e)
{
    size_t cells = (size_t)d->L * (size_t)d->E;
    memcpy(total, b->counts, cells * sizeof *total);
    if (b->n_hashes == 0)
        return 0;
    pcache *pc = &d->caches[u->prefill];
    char err[ELDR_ERRLEN];
    const char *where = "counts";
    pthread_mutex_lock(&pc->lock);
    int64_t m = sigcache_match(pc->c, b->hashes, b->cached_blocks, BLOCK_HASH_ROOT);
    int rc = sigcache_recover(pc->c, b->hashes, m, b->counts, total, err, sizeof err);
    if (rc == 0)
        where = "block_counts";
    for (int j = 0; rc == 0 && j < b->n_block_counts; j++) {
        int i = b->cached_blocks + j;
        uint64_t parent = i ? b->hashes[i - 1] : BLOCK_HASH_ROOT;
        rc = sigcache_put(pc->c, b->hashes[i], parent, b->block_counts + (size_t)j * cells, err,
                          sizeof err);
        u->stored += rc == 0;
    }
    u->hit = (int)m;
    u->missing = b->cached_blocks - (int)m;
    pc->hit_blocks += (uint64_t)u->hit;
    pc->missing_blocks += (uint64_t)u->missing;
    pc->stored_blocks += (uint64_t)u->stored;
    pthread_mutex_unlock(&pc->lock);
    if (rc < 0)
        return rb_fail(e, 422, where, "%s", err);
    return 0;
}

/* The body must carry what the served model's variant reads: a gate
 * model's request sends gates (probabilities are never negative), every
 * other model's counts. 422 otherwise, naming what to send. */
static int check_signal(const mref_t *r, const route_body *b, int E, rb_err *e)
{
    sig_variant v = r->m->recipe.variant;
    const char *name = sig_variant_name(v);
    if (sig_variant_uses_gate(v) && !b->gates)
        return rb_fail(e, 422, b->counts ? "counts" : "gates",
                       "the served model (variant %s) routes on gate values: send \"gates\" "
                       "(base64 float32 LE [L*E], or [[layer, expert, value], ...])", name);
    if (!sig_variant_uses_gate(v) && b->gates)
        return rb_fail(e, 422, "gates",
                       "the served model (variant %s) routes on expert counts: send \"counts\" "
                       "or \"sparse\", not gates", name);
    for (size_t i = 0; v == SIG_GATE_PROB && i < (size_t)r->m->recipe.L * (size_t)E; i++)
        if (b->gates[i] < 0)
            return rb_fail(e, 422, "gates", "negative probability %g at layer %zu expert %zu",
                           (double)b->gates[i], i / (size_t)E, i % (size_t)E);
    return 0;
}

/* Signature and similarities outside the lock; *zero when no signature.
 * total: the counts (count models), gates: the gate values (gate models). */
static int similarities(const mref_t *r, const uint16_t *total, const float *gates, float *sig,
                        double *sim, int *zero, rb_err *e)
{
    char err[ELDR_ERRLEN];
    int rc = sig_from_counts(&r->m->recipe, gates ? NULL : total, gates, sig, err, sizeof err);
    if (rc < 0)
        return rb_fail(e, 500, "model", "%s", err);
    *zero = rc == 1;
    if (*zero)
        return 0;
    for (int k = 0; k < r->m->K; k++)
        sim[k] = route_dot(r->m->centroids + (size_t)k * r->dim, sig, r->dim);
    return 0;
}

/* The answer, direct when it can be (answer.h). */
static void route_answer(eldrd_t *d, const route_out *o, const cache_use *u,
                         const route_body *b, uint64_t gen, http_resp *out)
{
    route_answer_in a = {d->st->workers, d->K, o, d->caches[u->prefill].name, b->n_hashes,
                         *u, gen};
    if ((out->text = route_answer_text(&a))) {
        out->content_type = "application/json";
        return;
    }
    if (!(out->json = route_answer_json(&a)))
        http_error(out, 503, "route", "out of memory for the answer");
}

int route_request(eldrd_t *d, mref_t *m, const char *request_id, const uint16_t *counts,
                  const float *gates, int prefill, const cache_use *u, route_out *o,
                  int *no_signature, rb_err *e)
{
    float *sig = malloc(m->dim * sizeof *sig);
    double sim[ROUTE_MAX_WORKERS];
    int zero = 0, rc = -1;
    if (!sig)
        return rb_fail(e, 503, "route", "out of memory");
    if (similarities(m, counts, gates, sig, sim, &zero, e) == 0) {
        route_in in = {request_id, m, zero ? NULL : sim, sig, prefill,
                       u ? u->hit : 0, u ? u->missing : 0, u ? u->stored : 0};
        rc = state_route(d->st, &in, o, e);
        sig = in.sig;   /* the window may have swapped it for an old one */
    }
    if (no_signature)
        *no_signature = zero;
    free(sig);
    return rc;
}

void ep_route(eldrd_t *d, const http_req *r, http_resp *out)
{
    double t0 = state_mono_now();
    mref_t *m = mholder_get(&d->model);
    route_body b;
    rb_err e;
    cache_use u = {0};
    size_t cells = (size_t)d->L * (size_t)d->E;
    uint16_t *total = malloc(cells * sizeof *total);
    route_out *o = malloc(sizeof *o);
    if (!total || !o) {
        http_error(out, 503, "route", "out of memory");
    } else if (route_body_parse(r->body, r->len, d->L, d->E, &b, &e) < 0) {
        http_rb_error(out, &e);
    } else {
        u.prefill = daemon_prefill_index(d, b.prefill_worker);
        if (u.prefill < 0)
            http_error(out, 404, "prefill_worker", "unknown prefill worker '%s'",
                       b.prefill_worker);
        else if (check_signal(m, &b, d->E, &e) < 0 ||
                 (!b.gates && use_cache(d, &b, total, &u, &e) < 0) ||
                 route_request(d, m, b.request_id, b.gates ? NULL : total, b.gates, u.prefill,
                               &u, o, NULL, &e) < 0)
            http_rb_error(out, &e);
        else
            route_answer(d, o, &u, &b, m->gen, out);
        route_body_free(&b);
    }
    free(total);
    free(o);
    mref_put(m);
    metrics_route(&d->met, state_mono_now() - (r->t_begin > 0 ? r->t_begin : t0));
}

void ep_finish(eldrd_t *d, const http_req *r, http_resp *out)
{
    char id[RB_ID_MAX];
    rb_err e;
    int w;
    if (finish_body_parse(r->body, r->len, id, &e) < 0 || state_finish(d->st, id, &w, &e) < 0) {
        http_rb_error(out, &e);
        return;
    }
    if ((out->text = finish_answer_text(id, d->st->workers[w], w)))
        out->content_type = "application/json";
    else
        out->json = finish_answer_json(id, d->st->workers[w], w);
}

/* Apply one event to a prefill worker's cache (its lock held). */
static void apply_event(pcache *pc, const kv_event *ev, int64_t *removed)
{
    switch (ev->kind) {
    case KV_STORED:
        pc->kv_stored += (uint64_t)ev->n;  /* the KV cache holds them; counts come with routes */
        break;
    case KV_REMOVED:
        for (int i = 0; i < ev->n; i++)
            *removed += sigcache_remove(pc->c, ev->hashes[i]);
        pc->kv_removed += (uint64_t)ev->n;
        break;
    case KV_CLEARED: {
        /* drop every block: walk the LRU order in slices */
        uint64_t h[256];
        int64_t n;
        while ((n = sigcache_lru_order(pc->c, h, 256)) > 0)
            for (int64_t i = 0; i < n; i++)
                *removed += sigcache_remove(pc->c, h[i]);
        pc->kv_cleared++;
        break;
    }
    }
}

void ep_kv_events(eldrd_t *d, const http_req *r, http_resp *out)
{
    kv_batch b;
    rb_err e;
    if (kv_body_parse(r->body, r->len, &b, &e) < 0) {
        http_rb_error(out, &e);
        return;
    }
    const char *name = b.worker[0] ? b.worker : http_query(r, "worker");
    int p = daemon_prefill_index(d, name ? name : "");
    if (p < 0) {
        http_error(out, 404, "worker", "unknown prefill worker '%s'", name);
        kv_batch_free(&b);
        return;
    }
    pcache *pc = &d->caches[p];
    int64_t removed = 0;
    int counts[3] = {0, 0, 0};
    pthread_mutex_lock(&pc->lock);
    for (int i = 0; i < b.n; i++) {
        apply_event(pc, &b.events[i], &removed);
        counts[b.events[i].kind]++;
    }
    sigcache_stats st;
    sigcache_get_stats(pc->c, &st);
    pthread_mutex_unlock(&pc->lock);
    atomic_fetch_add(&d->met.kv_events, (uint64_t)b.n);
    out->json = json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:I}", "prefill_worker", pc->name,
                          "events", b.n, "stored_events", counts[KV_STORED], "removed_events",
                          counts[KV_REMOVED], "cleared_events", counts[KV_CLEARED],
                          "removed_blocks", (json_int_t)removed, "cache_entries",
                          (json_int_t)st.entries);
    kv_batch_free(&b);
}
