/* sim_activations.c - which experts each decode token activates
 * (sim_internal.h): the trace's recorded token rows, or a pool sampled
 * from the request's own count profile. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "par.h"
#include "sim_internal.h"
#include "trace_tokens.h"

int sim_sampler_init(sim_sampler *s, int E, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->id = malloc((size_t)E * sizeof *s->id);
    s->alias = malloc((size_t)E * sizeof *s->alias);
    s->prob = malloc((size_t)E * sizeof *s->prob);
    s->scaled = malloc((size_t)E * sizeof *s->scaled);
    s->work = malloc((size_t)E * sizeof *s->work);
    s->taken = calloc((size_t)E, sizeof *s->taken);
    if (!s->id || !s->alias || !s->prob || !s->scaled || !s->work || !s->taken) {
        sim_sampler_free(s);
        return eldr_errf(err, errlen, "sim: out of memory for a sampler of %d experts", E);
    }
    s->cap = E;
    return 0;
}

void sim_sampler_free(sim_sampler *s)
{
    free(s->id);
    free(s->alias);
    free(s->prob);
    free(s->scaled);
    free(s->work);
    free(s->taken);
    memset(s, 0, sizeof *s);
}

/* Vose's alias method: slot i keeps itself with probability prob[i] and
 * otherwise yields alias[i]; every slot is picked with probability 1/n,
 * so expert id[j] comes out with probability counts / total. */
int sim_sampler_load(sim_sampler *s, const uint16_t *counts, int E)
{
    /* Branch-free throughout (a draw's profile has no order a branch
     * predictor could learn), with the same arithmetic in the same order
     * as the branching textbook form, so the table is the same bit for
     * bit. Each slot is written whether or not it is kept: the writes
     * that do not count land on a free slot. */
    uint64_t total = 0;
    int n = 0;
    double *scaled = s->scaled;
    for (int e = 0; e < E; e++) {
        s->id[n] = (uint16_t)e;
        scaled[n] = (double)counts[e];
        total += counts[e];
        n += counts[e] != 0;
    }
    s->n = n;
    if (!n)
        return 0;
    double dn = n, dt = (double)total;
    for (int i = 0; i < n; i++) /* vectorised: the same rounded divisions */
        scaled[i] = scaled[i] * dn / dt;
    int *small = s->work, ns = 0, nl = n; /* small from the front, large from the back */
    for (int i = 0; i < n; i++) {
        int is_small = scaled[i] < 1.0;
        s->alias[i] = (uint16_t)i;
        small[ns] = i; /* the free slots are [ns, nl): both writes land there */
        small[nl - 1] = i;
        ns += is_small;
        nl -= !is_small;
    }
    /* Pair the top small with the first large until one list runs out.
     * The pair and their weights stay in registers from one pairing to
     * the next (a large absorbs several smalls; a large that falls below
     * 1 is the next small), instead of a round trip through small[] and
     * scaled[] that each pairing would wait on. */
    if (ns > 0 && nl < n) {
        int lo = small[--ns], hi = small[nl];
        double slo = scaled[lo], shi = scaled[hi];
        for (;;) {
            s->prob[lo] = (uint32_t)(slo * 4294967296.0);
            s->alias[lo] = (uint16_t)hi;
            shi -= 1.0 - slo;
            scaled[hi] = shi;
            if (shi < 1.0) { /* hi, now small, is the next to pair */
                nl++;
                if (nl >= n) { /* no large left: hi stays small */
                    small[ns++] = hi;
                    break;
                }
                lo = hi;
                slo = shi;
                hi = small[nl];
                shi = scaled[hi];
                continue;
            }
            if (ns == 0)
                break;
            lo = small[--ns];
            slo = scaled[lo];
        }
    }
    /* what is left holds probability 1 (up to rounding): keep itself */
    for (int i = 0; i < ns; i++)
        s->prob[small[i]] = UINT32_MAX, s->alias[small[i]] = (uint16_t)small[i];
    for (int i = nl; i < n; i++)
        s->prob[small[i]] = UINT32_MAX, s->alias[small[i]] = (uint16_t)small[i];
    return n;
}

/* k distinct ids into out[k], each id_bytes wide (a constant where it
 * is inlined, so the store is one instruction). */
static inline void draw_k(sim_sampler *s, rng_t *r, int k, void *out, int id_bytes)
{
    /* A repeat is redrawn, which makes each pick proportional among the
     * experts left. Decode counts never give one expert more than 1/k of
     * a layer's mass (a token picks k distinct experts), so redraws stay
     * few: below k * H_k draws in all even when only k experts remain.
     * A slot taken by this draw of k carries its generation in taken[],
     * so a repeat costs one look-up, not a pass over out[]. */
    uint64_t n = (uint64_t)s->n;
    if (++s->gen == 0) {
        memset(s->taken, 0, (size_t)s->cap * sizeof *s->taken);
        s->gen = 1;
    }
    uint32_t gen = s->gen;
    for (int j = 0; j < k;) {
        uint64_t x = rng_next(r);
        uint64_t slot = ((x >> 32) * n) >> 32;
        /* branch-free: whether the slot keeps itself is a coin flip */
        uint64_t keep = 0 - (uint64_t)((uint32_t)x < s->prob[slot]);
        uint64_t pick = (slot & keep) | (s->alias[slot] & ~keep);
        /* branch-free too: a repeat is written and then overwritten,
         * as whether a draw repeats is a coin flip as well */
        int fresh = s->taken[pick] != gen;
        s->taken[pick] = gen;
        if (id_bytes == 1)
            ((uint8_t *)out)[j] = (uint8_t)s->id[pick];
        else
            ((uint16_t *)out)[j] = s->id[pick];
        j += fresh;
    }
}

void sim_sampler_draw(sim_sampler *s, rng_t *r, int k, uint16_t *out)
{
    draw_k(s, r, k, out, 2);
}

/* The count profile to sample request row r from: decode counts when it
 * has decode tokens, else its prefill counts. */
static const uint16_t *profile_of(const trace_t *t, int64_t r)
{
    if (t->decode_counts && t->decode_tokens[r] > 0)
        return trace_decode_row(t, r);
    if (t->prompt_tokens[r] > 0)
        return trace_prefill_row(t, r);
    return NULL;
}

static int32_t pool_size(const sim_workload *w, int64_t i)
{
    return w->out_tokens[i] < w->cfg.sample_pool ? w->out_tokens[i] : w->cfg.sample_pool;
}

/* P token rows for request i into out[P][L][k] (ids of id_bytes), from
 * the stream (seed, trace row): the same rows whenever and wherever they
 * are drawn, whatever their width. */
static int sample_rows(const sim_workload *w, int64_t i, int32_t P, void *out, int id_bytes,
                       sim_sampler *sp, char *err, size_t errlen)
{
    int64_t r = w->row[i];
    int L = w->L, E = w->E, k = w->k;
    const uint16_t *prof = profile_of(w->t, r);
    if (!prof)
        return eldr_errf(err, errlen, "sim: request row %lld has no decode or prefill counts "
                         "to sample activations from", (long long)r);
    rng_t rng;
    rng_seed_stream(&rng, w->cfg.seed ^ SIM_SEED_TOKENS, (uint64_t)sim_key(w, i));
    for (int l = 0; l < L; l++) {
        int nz = sim_sampler_load(sp, prof + (size_t)l * E, E);
        if (nz < k)
            return eldr_errf(err, errlen, "sim: request row %lld layer %d has %d experts with "
                             "counts, fewer than top-k %d", (long long)r, l, nz, k);
        for (int32_t p = 0; p < P; p++) {
            size_t at = ((size_t)p * L + l) * k;
            if (id_bytes == 1)
                draw_k(sp, &rng, k, (uint8_t *)out + at, 1);
            else
                draw_k(sp, &rng, k, (uint16_t *)out + at, 2);
        }
    }
    return 0;
}

/* The pools of every request, sampled by several threads at once: each
 * takes the next chunk of requests and writes their rows at their own
 * offsets, so the pool is the same for any thread count. A thread stops
 * at its first failure; the lowest failing request is the one reported. */
typedef struct pool_job {
    sim_workload *w;
    pthread_mutex_t lock;
    int64_t next;              /* first request of the next chunk */
    int64_t fail_at;           /* lowest failing request, or w->n */
    char err[ELDR_ERRLEN];     /* its message */
} pool_job;

#define POOL_CHUNK 64

static void *pool_main(void *arg)
{
    pool_job *J = arg;
    sim_workload *w = J->w;
    size_t width = (size_t)w->L * w->k;
    char err[ELDR_ERRLEN];
    sim_sampler sp;
    int rc = sim_sampler_init(&sp, w->E, err, sizeof err);
    int64_t failed = rc ? 0 : -1;
    while (!rc) {
        pthread_mutex_lock(&J->lock);
        int64_t a = J->fail_at < w->n ? w->n : J->next;
        J->next = a + POOL_CHUNK;
        pthread_mutex_unlock(&J->lock);
        for (int64_t i = a; i < a + POOL_CHUNK && i < w->n && !rc; i++) {
            int64_t o = w->pool_off[i];
            rc = sample_rows(w, i, (int32_t)(w->pool_off[i + 1] - o),
                             (char *)w->pool + (size_t)o * width * w->id_bytes, w->id_bytes,
                             &sp, err, sizeof err);
            failed = rc ? i : -1;
        }
        if (a >= w->n)
            break;
    }
    sim_sampler_free(&sp);
    if (rc) {
        pthread_mutex_lock(&J->lock);
        if (failed < J->fail_at) {
            J->fail_at = failed;
            snprintf(J->err, sizeof J->err, "%s", err);
        }
        pthread_mutex_unlock(&J->lock);
    }
    return NULL;
}

size_t sim_pools_bytes(const sim_workload *w)
{
    size_t rows = 0;
    for (int64_t i = 0; !w->recorded && i < w->n; i++)
        rows += (size_t)pool_size(w, i);
    return rows * (size_t)w->L * (size_t)w->k * (size_t)w->id_bytes;
}

void sim_pools_drop(sim_workload *w)
{
    free(w->pool);
    free(w->pool_off);
    w->pool = NULL;
    w->pool_off = NULL;
}

size_t sim_pool_cache_within(size_t budget, double loaded)
{
    double room = (double)budget - loaded;
    if (room <= 0)
        return 0;
    return room < (double)SIM_DEFAULT_POOL_CACHE ? (size_t)room : SIM_DEFAULT_POOL_CACHE;
}

int sim_pools_build(sim_workload *w, char *err, size_t errlen)
{
    size_t width = (size_t)w->L * w->k, rows = 0;
    for (int64_t i = 0; i < w->n; i++)
        rows += (size_t)pool_size(w, i);
    if (sim_pools_bytes(w) > w->cfg.pool_cache)
        return 0; /* sampled on admission instead */
    w->pool = malloc(rows * width * (size_t)w->id_bytes);
    w->pool_off = malloc((size_t)(w->n + 1) * sizeof *w->pool_off);
    if (!w->pool || !w->pool_off) {
        sim_pools_drop(w);
        return eldr_errf(err, errlen, "sim: out of memory for %zu sampled token rows", rows);
    }
    w->pool_off[0] = 0;
    for (int64_t i = 0; i < w->n; i++)
        w->pool_off[i + 1] = w->pool_off[i] + pool_size(w, i);
    pool_job J = {.w = w, .fail_at = w->n};
    pthread_mutex_init(&J.lock, NULL);
    par_run(par_threads(w->cfg.threads, (w->n + POOL_CHUNK - 1) / POOL_CHUNK), pool_main, &J);
    pthread_mutex_destroy(&J.lock);
    if (J.fail_at < w->n)
        return eldr_errf(err, errlen, "%s", J.err);
    return 0;
}

int sim_tokens_open(const sim_workload *w, int64_t i, sim_tokens *s, char *err,
                    size_t errlen)
{
    memset(s, 0, sizeof *s);
    const trace_t *t = w->t;
    int64_t r = w->row[i];
    size_t width = (size_t)w->L * w->k;
    if (w->recorded && w->cfg.tokens) {   /* read from the file now */
        int32_t m = trace_tokens_count(w->cfg.tokens, r);
        if (m > 0) {
            s->id_bytes = w->id_bytes;
            s->owned = malloc((size_t)m * width * (size_t)w->id_bytes);
            if (!s->owned)
                return eldr_errf(err, errlen, "sim: out of memory for the %d token rows of "
                                 "row %lld", m, (long long)r);
            if (trace_tokens_read(w->cfg.tokens, r, trace_decode_row(t, r), s->owned,
                                  w->id_bytes, err, errlen)) {
                sim_tokens_close(s);
                return -1;
            }
            s->rows = s->owned;
            s->n_rows = m;
            return 0;
        }
    } else if (w->recorded) {
        int64_t a = t->decode_offsets[r], b = t->decode_offsets[r + 1];
        if (b > a) {
            s->rows = t->decode_experts + (size_t)a * width;
            s->n_rows = (int32_t)(b - a);
            s->id_bytes = 2;
            return 0;
        }
    }
    s->id_bytes = w->id_bytes;
    if (w->pool) {
        s->rows = (const char *)w->pool + (size_t)w->pool_off[i] * width * w->id_bytes;
        s->n_rows = (int32_t)(w->pool_off[i + 1] - w->pool_off[i]);
        return 0;
    }
    int32_t P = pool_size(w, i);
    sim_sampler sp;
    if (sim_sampler_init(&sp, w->E, err, errlen))
        return -1;
    s->owned = malloc((size_t)P * width * w->id_bytes);
    int rc = s->owned ? sample_rows(w, i, P, s->owned, w->id_bytes, &sp, err, errlen)
                      : eldr_errf(err, errlen, "sim: out of memory sampling row %lld",
                                  (long long)r);
    sim_sampler_free(&sp);
    if (rc) {
        sim_tokens_close(s);
        return -1;
    }
    s->rows = s->owned;
    s->n_rows = P;
    return 0;
}

void sim_tokens_close(sim_tokens *s)
{
    free(s->owned);
    memset(s, 0, sizeof *s);
}

/* The rows' activations, mult times each, into heat [L][E]; one body
 * per id width so that the inner loop reads its ids directly. */
#define HEAT_ROWS(T)                                                            \
    for (int32_t p = 0; p < s->n_rows; p++) {                                  \
        uint64_t mult = (uint64_t)full + (p < rem);                            \
        if (!mult)                                                             \
            break;                                                             \
        const T *row = (const T *)s->rows + (size_t)p * width;                 \
        for (int l = 0; l < L; l++)                                            \
            for (int j = 0; j < k; j++)                                        \
                heat[(size_t)l * E + row[l * k + j]] += mult;                  \
    }

void sim_tokens_heat(const sim_tokens *s, int L, int E, int k, int64_t n_tokens,
                     uint64_t *heat)
{
    if (s->n_rows <= 0 || n_tokens <= 0)
        return;
    int64_t full = n_tokens / s->n_rows, rem = n_tokens % s->n_rows;
    size_t width = (size_t)L * k;
    if (s->id_bytes == 1)
        HEAT_ROWS(uint8_t)
    else
        HEAT_ROWS(uint16_t)
}
