/* sim_prefix.c - the prefill replay of the prefix-caching what-if
 * (sim_prefix.h): per request, match its block chain in its prefill
 * worker's cache, count the computed tokens, recover the cold counts,
 * store the computed blocks, and build the three modes' signatures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockhash.h"
#include "err.h"
#include "sigcache.h"
#include "route.h"
#include "sim_prefix.h"

static const char *const mode_names[SIM_PREFIX_N_MODES] = {"cold", "cache", "uncached"};
static const char *const route_names[] = {"rr", "prefix"};

const char *sim_prefix_mode_name(sim_prefix_mode m)
{
    return (unsigned)m < SIM_PREFIX_N_MODES ? mode_names[m] : "?";
}

int sim_prefix_mode_parse(const char *name)
{
    for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
        if (!strcmp(name, mode_names[m]))
            return m;
    return -1;
}

int sim_prefix_modes_parse(const char *list, int on[SIM_PREFIX_N_MODES], char *bad,
                           size_t badlen)
{
    for (const char *p = list; *p; p += *p == ',') {
        size_t len = strcspn(p, ",");
        char tok[16];
        int m = -1;
        if (len == 0)              /* an empty item ("cold,"): names nothing */
            continue;
        if (len < sizeof tok) {
            memcpy(tok, p, len);
            tok[len] = 0;
            m = !strcmp(tok, "all") ? SIM_PREFIX_N_MODES : sim_prefix_mode_parse(tok);
        }
        if (m < 0) {
            if (badlen)
                snprintf(bad, badlen, "%.*s", (int)len, p);
            return -1;
        }
        for (int j = 0; j < SIM_PREFIX_N_MODES; j++)
            on[j] |= m == SIM_PREFIX_N_MODES || m == j;
        p += len;
    }
    return 0;
}

const char *sim_prefill_route_name(sim_prefill_route r)
{
    return (unsigned)r < 2 ? route_names[r] : "?";
}

int sim_prefill_route_parse(const char *name)
{
    for (int r = 0; r < 2; r++)
        if (!strcmp(name, route_names[r]))
            return r;
    return -1;
}

void sim_prefix_config_default(sim_prefix_config *c)
{
    c->capacity = SIM_PREFIX_DEFAULT_CAPACITY;
    c->workers = 1;
    c->block_size = BLOCK_SIZE_DEFAULT;
    c->route = SIM_PREFILL_RR;
}

void sim_prefix_free(sim_prefix *px)
{
    if (!px)
        return;
    for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
        free(px->sig[m]);
    free(px->hit);
    free(px->prefill_worker);
    memset(px, 0, sizeof *px);
}

int sim_prefix_check_trace(const trace_t *t, int block_size, char *err, size_t errlen)
{
    if (!t->block_hashes || !t->block_offsets)
        return eldr_errf(err, errlen, "prefix what-if: the trace has no tokens/block_hashes "
                         "(write one with eldr gen --prefix-groups G --tokens)");
    if (!t->prefill_experts || !t->prefill_offsets)
        return eldr_errf(err, errlen, "prefix what-if: the trace has no "
                         "tokens/prefill_experts (token-level prefill experts are needed "
                         "to count the computed tokens)");
    if (block_size < 1 || block_size > SIGCACHE_MAX_BLOCK)
        return eldr_errf(err, errlen, "prefix what-if: block size %d outside 1..%d",
                         block_size, SIGCACHE_MAX_BLOCK);
    for (int64_t r = 0; r < t->n; r++) {
        int64_t nb = t->block_offsets[r + 1] - t->block_offsets[r];
        int32_t T = t->prompt_tokens[r];
        if (nb != T / block_size)
            return eldr_errf(err, errlen, "prefix what-if: trace row %lld has %lld block "
                             "hashes for %d prompt tokens, not %d blocks of %d tokens "
                             "(wrong --block-size?)", (long long)r, (long long)nb, T,
                             T / block_size, block_size);
    }
    return 0;
}

/* What the replay needs from the trace and the config, checked up front
 * so that a bad input fails before any work, naming what and where. */
static int check_inputs(const sim_workload *w, const sig_recipe *r,
                        const sim_prefix_config *c, char *err, size_t errlen)
{
    if (c->workers < 1)
        return eldr_errf(err, errlen, "prefix what-if: %d prefill workers (need >= 1)",
                         c->workers);
    if (c->capacity < 0)
        return eldr_errf(err, errlen, "prefix what-if: cache capacity %lld blocks is "
                         "negative", (long long)c->capacity);
    if ((unsigned)c->route > SIM_PREFILL_PREFIX)
        return eldr_errf(err, errlen, "prefix what-if: unknown prefill route %d",
                         (int)c->route);
    if (!r || r->L != w->L || r->E != w->E)
        return eldr_errf(err, errlen, "prefix what-if: the recipe does not match the "
                         "trace's %d layers x %d experts", w->L, w->E);
    if (sig_variant_uses_gate(r->variant))
        return eldr_errf(err, errlen, "prefix what-if: the signature variant %s reads gate "
                         "values, which have no per-block form; use a count variant",
                         sig_variant_name(r->variant));
    return sim_prefix_check_trace(w->t, c->block_size, err, errlen);
}

static int alloc_prefix(sim_prefix *px, size_t dim, char *err, size_t errlen)
{
    size_t n = (size_t)(px->n ? px->n : 1);
    px->dim = dim;
    for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
        px->sig[m] = eldr_calloc(n * dim, sizeof *px->sig[m]);
    px->hit = calloc(n, sizeof *px->hit);
    px->prefill_worker = calloc(n, sizeof *px->prefill_worker);
    for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
        if (!px->sig[m])
            return eldr_errf(err, errlen, "prefix what-if: out of memory for %lld x 3 "
                             "signatures of %zu floats", (long long)px->n, dim);
    if (!px->hit || !px->prefill_worker)
        return eldr_errf(err, errlen, "prefix what-if: out of memory for %lld requests",
                         (long long)px->n);
    return 0;
}

/* The prefill worker of request i. */
static int prefill_worker(const sim_prefix_config *c, int64_t i, const uint64_t *h, int64_t nb)
{
    if (c->route == SIM_PREFILL_PREFIX && nb > 0)
        return (int)(h[0] % (uint64_t)c->workers);
    return (int)(i % c->workers);
}

/* cos of two unit-or-zero vectors: their dot product; 1 when both are
 * zero (the same signature), 0 when only one is. */
static double cos_unit(const float *a, const float *b, size_t dim, int za, int zb)
{
    if (za || zb)
        return za && zb ? 1.0 : 0.0;
    double d = 0;
    for (size_t j = 0; j < dim; j++)
        d += (double)a[j] * b[j];
    return d;
}

/* Prefix err (already holding the cause) with the trace row. */
static int row_error(int64_t row, char *err, size_t errlen)
{
    char why[ELDR_ERRLEN];
    snprintf(why, sizeof why, "%s", err ? err : "");
    return eldr_errf(err, errlen, "prefix what-if: trace row %lld: %s", (long long)row, why);
}

/* Scratch of the replay. */
typedef struct replay {
    sigcache_t **cache;        /* [P], NULL entries when capacity is 0 */
    uint16_t *fresh, *recovered;   /* [L][E] */
    int zero[SIM_PREFIX_N_MODES];
} replay;

static void replay_free(replay *R, int P)
{
    if (R->cache)
        for (int p = 0; p < P; p++)
            sigcache_free(R->cache[p]);
    free(R->cache);
    free(R->fresh);
    free(R->recovered);
}

static int replay_init(replay *R, const sim_workload *w, const sim_prefix_config *c,
                       char *err, size_t errlen)
{
    size_t cells = (size_t)w->L * w->E;
    memset(R, 0, sizeof *R);
    R->cache = calloc((size_t)c->workers, sizeof *R->cache);
    R->fresh = malloc(cells * sizeof *R->fresh);
    R->recovered = malloc(cells * sizeof *R->recovered);
    if (!R->cache || !R->fresh || !R->recovered)
        return eldr_errf(err, errlen, "prefix what-if: out of memory");
    for (int p = 0; c->capacity > 0 && p < c->workers; p++)
        if (!(R->cache[p] = sigcache_new(w->L, w->E, c->capacity, err, errlen)))
            return -1;
    return 0;
}

/* Signature of one mode for request i from counts[L][E]. */
static int mode_sig(sim_prefix *px, replay *R, const sig_recipe *r, sim_prefix_mode m,
                    int64_t i, const uint16_t *counts, char *err, size_t errlen)
{
    int rc = sig_from_counts(r, counts, NULL, px->sig[m] + (size_t)i * px->dim, err, errlen);
    if (rc < 0)
        return -1;
    R->zero[m] = rc;
    px->n_zero[m] += rc;
    return 0;
}

/* One request through its prefill worker: hit, computed counts,
 * recovery, store, the three signatures and their agreement with cold. */
static int replay_one(sim_prefix *px, replay *R, const sim_workload *w,
                      const sig_recipe *r, int64_t i, char *err, size_t errlen)
{
    const trace_t *t = w->t;
    const sim_prefix_config *c = &px->cfg;
    int64_t row = w->row[i], B = c->block_size;
    const uint64_t *h = t->block_hashes + t->block_offsets[row];
    int64_t nb = t->block_offsets[row + 1] - t->block_offsets[row];
    int64_t T = t->prompt_tokens[row];
    size_t stride = (size_t)w->L * w->k, cells = (size_t)w->L * w->E;
    const uint16_t *ex = t->prefill_experts + (size_t)t->prefill_offsets[row] * stride;
    int p = prefill_worker(c, i, h, nb);
    sigcache_t *sc = R->cache[p];
    int64_t m = sc ? sigcache_match(sc, h, nb, BLOCK_HASH_ROOT) : 0;
    px->prefill_worker[i] = p;
    px->hit[i] = (int32_t)m;
    px->blocks += nb;
    px->hit_blocks += m;
    px->tokens += T;
    px->cached_tokens += m * B;
    if (T > 0)
        px->cached_frac_mean += (double)(m * B) / (double)T;

    /* the prefill computes tokens m*B .. T only */
    if (sigcache_token_counts(ex + (size_t)(m * B) * stride, T - m * B, w->L, w->E, w->k,
                              R->fresh, err, errlen) ||
        (sc && sigcache_recover(sc, h, m, R->fresh, R->recovered, err, errlen)))
        return row_error(row, err, errlen);
    const uint16_t *cold = trace_prefill_row(t, row);
    const uint16_t *cached = sc ? R->recovered : R->fresh;
    if (memcmp(cached, cold, cells * sizeof *cold))
        px->mismatches++;
    if (mode_sig(px, R, r, SIM_PREFIX_COLD, i, cold, err, errlen) ||
        mode_sig(px, R, r, SIM_PREFIX_CACHE, i, cached, err, errlen) ||
        mode_sig(px, R, r, SIM_PREFIX_UNCACHED, i, R->fresh, err, errlen))
        return row_error(row, err, errlen);
    const float *s0 = px->sig[SIM_PREFIX_COLD] + (size_t)i * px->dim;
    for (int md = 0; md < SIM_PREFIX_N_MODES; md++)
        px->cos_mean[md] += cos_unit(px->sig[md] + (size_t)i * px->dim, s0, px->dim,
                                     R->zero[md], R->zero[SIM_PREFIX_COLD]);

    /* after the prefill: its computed full blocks join the KV cache */
    if (sc && sigcache_store_blocks(sc, h, m, nb, BLOCK_HASH_ROOT, ex, T, w->k, (int)B, err,
                                    errlen))
        return row_error(row, err, errlen);
    return 0;
}

int sim_prefix_build(sim_prefix *px, const sim_workload *w, const sig_recipe *recipe,
                     const sim_prefix_config *c, char *err, size_t errlen)
{
    memset(px, 0, sizeof *px);
    if (check_inputs(w, recipe, c, err, errlen))
        return -1;
    px->cfg = *c;
    px->n = w->n;
    replay R;
    memset(&R, 0, sizeof R);
    int rc = alloc_prefix(px, sig_dim(recipe), err, errlen);
    if (!rc)
        rc = replay_init(&R, w, c, err, errlen);
    for (int64_t i = 0; !rc && i < w->n; i++)
        rc = replay_one(px, &R, w, recipe, i, err, errlen);
    if (!rc) {
        for (int p = 0; p < c->workers; p++) {
            sigcache_stats st;
            if (R.cache[p]) {
                sigcache_get_stats(R.cache[p], &st);
                px->evictions += st.evictions;
            }
        }
        double n = (double)(w->n ? w->n : 1);
        for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
            px->cos_mean[m] /= n;
        px->cached_frac_mean /= n;
        px->hit_rate = px->blocks ? (double)px->hit_blocks / (double)px->blocks : 0;
    }
    if (R.cache || R.fresh || R.recovered)
        replay_free(&R, c->workers);
    if (rc)
        sim_prefix_free(px);
    return rc;
}

void sim_prefix_view(const sim_prefix *px, const sim_workload *w, sim_prefix_mode m,
                     sim_workload *view)
{
    *view = *w;
    view->sig = px->sig[m];
    view->dim = px->dim;
    view->n_sig_zero = px->n_zero[m];
}

/* One ELDR run of mode m into res. */
static int run_mode(const sim_prefix *px, const sim_workload *w, sim_prefix_mode m,
                    const sim_prefix_router *r, sim_step_fn on_step, void *ctx,
                    sim_result *res, char *err, size_t errlen)
{
    sim_workload view;
    route_policy p;
    sim_prefix_view(px, w, m, &view);
    if (route_policy_init(&p, ROUTE_ELDR, r->K, r->seed, err, errlen))
        return -1;
    int rc = route_policy_set_centroids(&p, r->centroids, px->dim, r->tau, r->min2, err,
                                        errlen);
    if (!rc)
        rc = sim_run(&view, &p, on_step, ctx, res, err, errlen);
    route_policy_free(&p);
    if (rc) {
        char why[ELDR_ERRLEN];
        snprintf(why, sizeof why, "%s", err ? err : "");
        return eldr_errf(err, errlen, "prefix what-if, mode %s: %s", sim_prefix_mode_name(m),
                         why);
    }
    snprintf(res->policy, sizeof res->policy, "eldr-%s", sim_prefix_mode_name(m));
    return 0;
}

int sim_prefix_run(const sim_prefix *px, const sim_workload *w, const int *modes, int n,
                   const sim_prefix_router *router, sim_step_fn on_step, void *const *ctx,
                   sim_result *res, double *same, char *err, size_t errlen)
{
    sim_result cold_ref;
    const sim_result *ref = NULL;
    int rc = 0;
    memset(&cold_ref, 0, sizeof cold_ref);
    for (int j = 0; j < n; j++)
        memset(&res[j], 0, sizeof res[j]);
    for (int j = 0; !rc && j < n; j++) {
        if ((unsigned)modes[j] >= SIM_PREFIX_N_MODES)
            rc = eldr_errf(err, errlen, "prefix what-if: unknown mode %d", modes[j]);
        else
            rc = run_mode(px, w, (sim_prefix_mode)modes[j], router, on_step,
                          on_step ? ctx[j] : NULL, &res[j], err, errlen);
        if (!rc && modes[j] == SIM_PREFIX_COLD)
            ref = &res[j];
    }
    if (!rc && !ref) {
        rc = run_mode(px, w, SIM_PREFIX_COLD, router, NULL, NULL, &cold_ref, err, errlen);
        ref = &cold_ref;
    }
    for (int j = 0; !rc && j < n; j++)
        same[j] = sim_prefix_same_worker(&res[j], ref);
    sim_result_free(&cold_ref);
    for (int j = 0; rc && j < n; j++)
        sim_result_free(&res[j]);
    return rc;
}

double sim_prefix_same_worker(const sim_result *a, const sim_result *b)
{
    if (a->n != b->n)
        return -1;
    if (a->n == 0)
        return 1;
    int64_t same = 0;
    for (int64_t i = 0; i < a->n; i++) {
        if (a->req[i].row != b->req[i].row)
            return -1;
        same += a->req[i].worker == b->req[i].worker;
    }
    return (double)same / (double)a->n;
}
