/* decide.c - the one decision path (decide.h). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blockhash.h"
#include "decide.h"
#include "err.h"
#include "route.h"

int decide_use_cache(engine_t *d, const cache_claim *b, uint16_t *total, cache_use *u,
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

int decide_check_signal(const mref_t *r, const uint16_t *counts, const float *gates, int E,
                        rb_err *e)
{
    sig_variant v = r->m->recipe.variant;
    const char *name = sig_variant_name(v);
    if (sig_variant_uses_gate(v) && !gates)
        return rb_fail(e, 422, counts ? "counts" : "gates",
                       "the served model (variant %s) routes on gate values: send \"gates\" "
                       "(base64 float32 LE [L*E], or [[layer, expert, value], ...])", name);
    if (!sig_variant_uses_gate(v) && gates)
        return rb_fail(e, 422, "gates",
                       "the served model (variant %s) routes on expert counts: send \"counts\" "
                       "or \"sparse\", not gates", name);
    for (size_t i = 0; v == SIG_GATE_PROB && i < (size_t)r->m->recipe.L * (size_t)E; i++)
        if (gates[i] < 0)
            return rb_fail(e, 422, "gates", "negative probability %g at layer %zu expert %zu",
                           (double)gates[i], i / (size_t)E, i % (size_t)E);
    return 0;
}

/* The gate values in eldr_sig (<f4 [L*E], a gate model's): finite and,
 * for probabilities, >= 0. */
static int sig_gates(const engine_t *d, const uint8_t *sig, size_t len, int probs,
                     float *gates, char *why, size_t whylen)
{
    size_t cells = (size_t)d->L * (size_t)d->E;
    if (!sig) {
        memset(gates, 0, cells * sizeof *gates);
        return 0;
    }
    if (len != cells * 4)
        return eldr_errf(why, whylen, "the prefill's eldr_sig holds %zu bytes; the gate model's "
                         "%d layers x %d experts need %zu (little-endian float32)",
                         len, d->L, d->E, cells * 4);
    for (size_t i = 0; i < cells; i++) {
        const uint8_t *b = sig + 4 * i;
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
        memcpy(&gates[i], &u, sizeof u);
        if (!isfinite(gates[i]) || (probs && gates[i] < 0))
            return eldr_errf(why, whylen, "the prefill's eldr_sig has %s %g at layer %zu "
                             "expert %zu", probs ? "a negative or non-finite probability"
                                                 : "a non-finite value",
                             (double)gates[i], i / (size_t)d->E, i % (size_t)d->E);
    }
    return 0;
}

/* The first negative count in eldr_sig, as an error. */
static int negative_count(const engine_t *d, const uint8_t *sig, size_t cells, char *why,
                          size_t whylen)
{
    size_t i = 0;
    while (i < cells && !(sig[2 * i + 1] & 0x80))
        i++;
    return eldr_errf(why, whylen, "the prefill's eldr_sig has a negative count %d at layer %zu "
                     "expert %zu", (int16_t)(sig[2 * i] | (sig[2 * i + 1] << 8)),
                     i / (size_t)d->E, i % (size_t)d->E);
}

/* The counts in eldr_sig (<i2 [L*E]) as the router's uint16 counts. A
 * count is negative when the high byte's top bit is set: on a
 * little-endian host the bytes are the counts already, and one OR over
 * them, a word at a time, tells whether any is; the scan for which runs
 * only then. */
static int sig_counts(const engine_t *d, const uint8_t *sig, size_t len, uint16_t *counts,
                      char *why, size_t whylen)
{
    size_t cells = (size_t)d->L * (size_t)d->E;
    if (!sig) {
        memset(counts, 0, cells * sizeof *counts);
        return 0;
    }
    if (len != cells * 2)
        return eldr_errf(why, whylen, "the prefill's eldr_sig holds %zu bytes; the model's "
                         "%d layers x %d experts need %zu (little-endian int16 counts)",
                         len, d->L, d->E, cells * 2);
    uint64_t any = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(counts, sig, cells * sizeof *counts);
    size_t i = 0;
    for (; i + 4 <= cells; i += 4) {   /* four counts a word */
        uint64_t w;
        memcpy(&w, counts + i, sizeof w);
        any |= w;
    }
    for (; i < cells; i++)
        any |= counts[i];
#else
    for (size_t i = 0; i < cells; i++) {
        counts[i] = (uint16_t)(sig[2 * i] | (sig[2 * i + 1] << 8));
        any |= counts[i];
    }
#endif
    return any & 0x8000800080008000ull ? negative_count(d, sig, cells, why, whylen) : 0;
}

int decide_read_sig(const engine_t *d, const mref_t *r, const uint8_t *sig, size_t len,
                    uint16_t *counts, float *gates, char *why, size_t whylen)
{
    sig_variant v = r->m->recipe.variant;
    if (sig_variant_uses_gate(v))
        return sig_gates(d, sig, len, v == SIG_GATE_PROB, gates, why, whylen);
    return sig_counts(d, sig, len, counts, why, whylen);
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

/* A buffer of dim floats: a spare of that size, else a new one. */
static float *sig_take(engine_t *d, size_t dim)
{
    sig_spares *sp = &d->spares;
    float *b = NULL;
    pthread_mutex_lock(&sp->lock);
    for (int i = sp->n - 1; i >= 0 && !b; i--)
        if (sp->dim[i] == dim) {
            b = sp->buf[i];
            sp->buf[i] = sp->buf[sp->n - 1];
            sp->dim[i] = sp->dim[sp->n - 1];
            sp->n--;
        }
    pthread_mutex_unlock(&sp->lock);
    return b ? b : malloc(dim * sizeof *b);
}

/* Keep b (dim floats) for a later route, or free it when the spares are
 * full (b NULL: nothing). */
static void sig_give(engine_t *d, float *b, size_t dim)
{
    sig_spares *sp = &d->spares;
    if (!b)
        return;
    pthread_mutex_lock(&sp->lock);
    if (sp->n < ENGINE_SIG_SPARES) {
        sp->buf[sp->n] = b;
        sp->dim[sp->n++] = dim;
        b = NULL;
    }
    pthread_mutex_unlock(&sp->lock);
    free(b);
}

/* The signal's origin for the record: u's, else dflt. */
static void signal_of(route_in *in, const cache_use *u, int dflt)
{
    in->origin = u ? u->origin : dflt;
    in->sig_rows = u ? u->rows : 0;
    in->cached_rows = u ? u->cached_rows : 0;
    in->note = u && u->note[0] ? u->note : NULL;
    in->owned = u ? u->owned : 0;
}

/* The request's cost-rule cells (costrule.h) from its counts, outside
 * the lock: r gets the dense row (what the decision and the add read),
 * *out the packed cells the in-flight entry keeps (what the remove
 * reads). NULL for none (a gate model's gates, no signal, all zero, or
 * no top-k), which the estimate counts in the load only; *use 0 then. */
static int cost_cells(const engine_t *d, const mref_t *m, const uint16_t *counts, cost_req *r,
                      int *use, cost_pack **out, rb_err *e)
{
    int k = engine_top_k(d, m), oom = 0;
    char err[ELDR_ERRLEN];
    *out = NULL;
    *use = 0;
    if (!counts || k < 1)
        return 0;
    if (cost_req_set(r, counts, d->L, d->E, k, err, sizeof err) < 0)
        return rb_fail(e, 503, "route", "%s", err);
    *out = cost_pack_make(r, &oom);
    if (oom)
        return rb_fail(e, 503, "route", "out of memory for the cost rule's cells");
    r->sparse = 0;   /* the decision and the add read the dense row */
    *use = *out != NULL;
    return 0;
}

int route_request(engine_t *d, mref_t *m, const char *request_id, const uint16_t *counts,
                  const float *gates, int prefill, const cache_use *u, const uint8_t *eligible,
                  int retry_of, route_out *o, int *no_signature, rb_err *e)
{
    cost_pack *cells;
    cost_req creq = {0};
    int use = 0;
    if (cost_cells(d, m, gates ? NULL : counts, &creq, &use, &cells, e) < 0) {
        cost_req_free(&creq);
        return -1;
    }
    float *sig = sig_take(d, m->dim);
    double sim[ROUTE_MAX_WORKERS];
    int zero = 0, rc = -1;
    if (!sig) {
        free(cells);
        cost_req_free(&creq);
        return rb_fail(e, 503, "route", "out of memory");
    }
    if (!counts && !gates) {
        zero = 1;   /* no signal: the no-signature rule */
        route_in in = {request_id, m, NULL, sig, prefill, u ? u->hit : 0, u ? u->missing : 0,
                       u ? u->stored : 0, eligible, retry_of, 0, 0, 0, NULL, 0, cells,
                       use ? &creq : NULL};
        signal_of(&in, u, SIG_ORIGIN_NONE);
        memset(sig, 0, m->dim * sizeof *sig);
        rc = state_route(d->st, &in, o, e);
        sig = in.sig;
        cells = in.cost;   /* NULL when the table kept it */
    } else if (similarities(m, counts, gates, sig, sim, &zero, e) == 0) {
        route_in in = {request_id, m, zero ? NULL : sim, sig, prefill,
                       u ? u->hit : 0, u ? u->missing : 0, u ? u->stored : 0, eligible,
                       retry_of, 0, 0, 0, NULL, 0, cells, use ? &creq : NULL};
        signal_of(&in, u, SIG_ORIGIN_BODY);
        rc = state_route(d->st, &in, o, e);
        sig = in.sig;   /* the window may have swapped it for an old one, of m's dim */
        cells = in.cost;
    }
    free(cells);
    cost_req_free(&creq);
    if (no_signature)
        *no_signature = zero;
    sig_give(d, sig, m->dim);
    return rc;
}
