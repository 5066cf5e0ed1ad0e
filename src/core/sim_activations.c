/* sim_activations.c - which experts each decode token activates
 * (sim_internal.h): the trace's recorded token rows, or a pool sampled
 * from the request's own count profile. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim_internal.h"

/* First e with cum[e] > u (cum ascending, u < cum[E-1]). */
static int find_cum(const uint32_t *cum, int E, uint32_t u)
{
    int lo = 0, hi = E - 1;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (cum[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void sim_draw_distinct(rng_t *r, const uint32_t *cum, int E, int k, uint16_t *out)
{
    /* Drawing from all weights and redrawing on a repeat gives each pick
     * proportional among the experts left. Decode counts never give one
     * expert more than 1/k of a layer's mass (a token picks k distinct
     * experts), so the expected number of redraws stays below k * H_k. */
    for (int j = 0; j < k;) {
        int e = find_cum(cum, E, (uint32_t)rng_below(r, cum[E - 1]));
        int dup = 0;
        for (int i = 0; i < j; i++)
            dup |= out[i] == e;
        if (!dup)
            out[j++] = (uint16_t)e;
    }
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

static int sample_pool(const sim_workload *w, int64_t i, sim_tokens *s, char *err,
                       size_t errlen)
{
    const trace_t *t = w->t;
    int64_t r = w->row[i];
    int L = w->L, E = w->E, k = w->k;
    const uint16_t *prof = profile_of(t, r);
    if (!prof)
        return eldr_errf(err, errlen, "sim: request row %lld has no decode or prefill counts "
                         "to sample activations from", (long long)r);
    int32_t P = w->out_tokens[i] < w->cfg.sample_pool ? w->out_tokens[i] : w->cfg.sample_pool;
    uint32_t *cum = malloc((size_t)E * sizeof *cum);
    s->owned = malloc((size_t)P * L * k * sizeof *s->owned);
    if (!cum || !s->owned) {
        free(cum);
        sim_tokens_close(s);
        return eldr_errf(err, errlen, "sim: out of memory sampling row %lld", (long long)r);
    }
    rng_t rng;
    rng_seed_stream(&rng, w->cfg.seed ^ SIM_SEED_TOKENS, (uint64_t)r);
    for (int l = 0; l < L; l++) {
        const uint16_t *c = prof + (size_t)l * E;
        uint32_t acc = 0;
        int nz = 0;
        for (int e = 0; e < E; e++) {
            acc += c[e];
            nz += c[e] > 0;
            cum[e] = acc;
        }
        if (nz < k) {
            free(cum);
            sim_tokens_close(s);
            return eldr_errf(err, errlen, "sim: request row %lld layer %d has %d experts with "
                             "counts, fewer than top-k %d", (long long)r, l, nz, k);
        }
        for (int32_t p = 0; p < P; p++)
            sim_draw_distinct(&rng, cum, E, k, s->owned + ((size_t)p * L + l) * k);
    }
    free(cum);
    s->rows = s->owned;
    s->n_rows = P;
    return 0;
}

int sim_tokens_open(const sim_workload *w, int64_t i, sim_tokens *s, char *err,
                    size_t errlen)
{
    memset(s, 0, sizeof *s);
    const trace_t *t = w->t;
    int64_t r = w->row[i];
    if (w->recorded) {
        int64_t a = t->decode_offsets[r], b = t->decode_offsets[r + 1];
        if (b > a) {
            s->rows = t->decode_experts + (size_t)a * w->L * w->k;
            s->n_rows = (int32_t)(b - a);
            return 0;
        }
    }
    return sample_pool(w, i, s, err, errlen);
}

void sim_tokens_close(sim_tokens *s)
{
    free(s->owned);
    memset(s, 0, sizeof *s);
}

void sim_tokens_heat(const sim_tokens *s, int L, int E, int k, int64_t n_tokens,
                     uint64_t *heat)
{
    if (s->n_rows <= 0 || n_tokens <= 0)
        return;
    int64_t full = n_tokens / s->n_rows, rem = n_tokens % s->n_rows;
    size_t width = (size_t)L * k;
    for (int32_t p = 0; p < s->n_rows; p++) {
        uint64_t mult = (uint64_t)full + (p < rem);
        if (!mult)
            break;
        const uint16_t *row = s->rows + (size_t)p * width;
        for (int l = 0; l < L; l++)
            for (int j = 0; j < k; j++)
                heat[(size_t)l * E + row[l * k + j]] += mult;
    }
}
