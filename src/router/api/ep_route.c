/* ep_route.c - POST /v1/route, POST /v1/finish, POST /v1/kv-events
 * (docs/http-api.md). */
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "decide.h"
#include "body.h"
#include "endpoints.h"
#include "err.h"
#include "kv_apply.h"
#include "log.h"
#include "route.h"

/* The answer, direct when it can be (answer.h). */
static void route_answer(engine_t *d, const route_out *o, const cache_use *u,
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

/* In proxy mode eldrd routes its own requests: /v1/route and /v1/finish
 * are off unless --route-api or --route-token-file turns them on (anyone
 * who reached the port could otherwise pin load for ever). 1 answered. */
static int route_api_off(const engine_t *d, http_resp *out)
{
    if (!d->o->proxy || d->o->route_api || d->o->route_token_file)
        return 0;
    http_error(out, 404, "path", "in proxy mode eldrd routes its own requests: POST /v1/route "
               "and /v1/finish are off (start eldrd with --route-api, or --route-token-file)");
    return 1;
}

void ep_route(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    if (route_api_off(d, out))
        return;
    double t0 = mono_now();
    mref_t *m = mholder_get(&d->model);
    route_body b;
    rb_err e;
    cache_use u = {0};
    size_t cells = (size_t)d->L * (size_t)d->E;
    uint16_t *total = malloc(cells * sizeof *total);
    route_out *o = malloc(sizeof *o);
    uint8_t ok[ROUTE_MAX_WORKERS];
    if (!total || !o) {
        http_error(out, 503, "route", "out of memory");
    } else if (route_body_parse(r->body, r->len, d->L, d->E, &b, &e) < 0) {
        http_rb_error(out, &e);
    } else {
        u.prefill = engine_prefill_index(d, b.prefill_worker);
        u.origin = SIG_ORIGIN_BODY;
        cache_claim claim = {b.counts, b.hashes, b.n_hashes, b.cached_blocks, b.block_counts,
                             b.n_block_counts};
        if (u.prefill < 0)
            http_error(out, 404, "prefill_worker", "unknown prefill worker '%s'",
                       b.prefill_worker);
        else if (decide_check_signal(m, b.counts, b.gates, d->E, &e) < 0 ||
                 (!b.gates && decide_use_cache(d, &claim, total, &u, &e) < 0) ||
                 route_request(d, m, b.request_id, b.gates ? NULL : total, b.gates, u.prefill,
                               &u, pool_decode_eligible(&d->pool, mono_now(), -1, ok), -1, o, NULL,
                               &e) < 0)
            http_rb_error(out, &e);
        else
            route_answer(d, o, &u, &b, m->gen, out);
        route_body_free(&b);
    }
    free(total);
    free(o);
    mref_put(m);
    metrics_route(&d->met, mono_now() - (r->t_begin > 0 ? r->t_begin : t0));
}

void ep_finish(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    if (route_api_off(d, out))
        return;
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

void ep_kv_events(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    kv_batch b;
    rb_err e;
    if (kv_body_parse(r->body, r->len, &b, &e) < 0) {
        http_rb_error(out, &e);
        return;
    }
    const char *name = b.worker[0] ? b.worker : http_query(r, "worker");
    int p = engine_prefill_index(d, name ? name : "");
    if (p < 0) {
        http_error(out, 404, "worker", "unknown prefill worker '%s'", name);
        kv_batch_free(&b);
        return;
    }
    kv_applied a;
    kv_apply(d, p, b.events, b.n, &a);
    out->json = json_pack("{s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "prefill_worker",
                          d->caches[p].name, "events", b.n, "stored_events",
                          a.events[KV_STORED], "removed_events", a.events[KV_REMOVED],
                          "cleared_events", a.events[KV_CLEARED], "removed_blocks",
                          (json_int_t)a.removed_blocks, "mapped_blocks",
                          (json_int_t)a.mapped_blocks, "cache_entries", (json_int_t)a.entries);
    kv_batch_free(&b);
}
