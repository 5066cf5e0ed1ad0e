/* gen_plan.c - the generator's per-request plan, drawn serially before the
 * heavy (parallel) routing: lengths, domains and mixing weights, prefix
 * group, and the arrival process with its domain bursts. */
#include <math.h>
#include <stdlib.h>

#include "err.h"
#include "gen_internal.h"

int32_t gen_length(rng_t *r, double mean, double sigma, int32_t lo)
{
    double z = rng_normal(r); /* drawn even when sigma is 0: same stream use */
    double x = mean * exp(sigma * z - 0.5 * sigma * sigma);
    x = floor(x + 0.5);
    if (x < lo)
        x = lo;
    if (x > 65535)
        x = 65535;
    return (int32_t)x;
}

/* Index drawn from weights w[0..n) (total given), skipping `skip`. */
static int draw_weighted(rng_t *r, const double *w, int n, double total, int skip)
{
    double u = rng_uniform(r) * total, acc = 0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (i == skip || w[i] <= 0)
            continue;
        acc += w[i];
        last = i;
        if (u < acc)
            return i;
    }
    return last;
}

/* The hot domain of burst period j: a stateless hash of (key, j), so a
 * long quiet gap costs nothing. */
static int hot_domain(uint64_t key, int64_t j, int D)
{
    rng_t h;
    rng_seed(&h, key ^ ((uint64_t)j * 0x9e3779b97f4a7c15ULL));
    return (int)rng_below(&h, (uint64_t)D);
}

/* --drift F: the weight factor of domain d at row r of n. A focus moves
 * evenly from domain 0 (first row) to domain D-1 (last row); domain d
 * keeps 1 - F of its weight plus F times its closeness to the focus,
 * max(0, 1 - |d - focus|), so with F = 1 only the one or two domains
 * next to the focus are drawn. */
static double drift_factor(double F, int64_t r, int64_t n, int d, int D)
{
    double focus = n > 1 ? (double)r / (double)(n - 1) * (D - 1) : 0.0;
    double near = 1.0 - fabs(d - focus);
    return 1.0 - F + F * (near > 0 ? near : 0.0);
}

static float clamp01(double x)
{
    return (float)(x < 0 ? 0 : x > 1 ? 1 : x);
}

int gen_plan(const gen_params_t *p, gen_req_t *req, double *arrival,
             char *err, size_t errlen)
{
    int D = p->domains;
    double *share = eldr_calloc((size_t)D, sizeof(double));
    double *w = eldr_calloc((size_t)D, sizeof(double));
    if (!share || !w) {
        free(share);
        free(w);
        return eldr_errf(err, errlen, "out of memory planning %d domains", D);
    }
    for (int d = 0; d < D; d++)
        share[d] = p->domain_shares ? p->domain_shares[d] : 1.0;

    rng_t ar;
    rng_seed_stream(&ar, p->seed, GEN_STREAM_ARRIVAL);
    uint64_t hot_key = rng_next(&ar);
    int bursts = arrival && p->burst_factor != 1.0;
    int prefix = p->prefix_groups > 0 ? p->prefix_blocks * p->block_size : 0;
    double t = 0;

    for (int64_t r = 0; r < p->requests; r++) {
        int hot = -1;
        if (arrival) {
            t += rng_exp(&ar) / p->arrival_rate;
            arrival[r] = t;
            if (bursts)
                hot = hot_domain(hot_key, (int64_t)floor(t / p->burst_period), D);
        }
        double total = 0;
        for (int d = 0; d < D; d++) {
            w[d] = share[d] * (d == hot ? p->burst_factor : 1.0);
            if (p->drift > 0)
                w[d] *= drift_factor(p->drift, r, p->requests, d, D);
            total += w[d];
        }
        if (total <= 0)          /* the focus sits on domains of share 0: undrifted */
            for (int d = 0; d < D; d++)
                total += w[d] = share[d] * (d == hot ? p->burst_factor : 1.0);
        gen_req_t *q = &req[r];
        rng_seed_stream(&q->rng, p->seed, (uint64_t)r);
        rng_t *rq = &q->rng;
        q->own = gen_length(rq, p->prompt_tokens, p->length_spread, 1);
        q->decode = p->decode_tokens > 0 ? gen_length(rq, p->decode_tokens, p->length_spread, 1) : 0;
        q->d1 = draw_weighted(rq, w, D, total, -1);
        q->d2 = -1;
        q->w = q->w_dec = 0;
        double rest = total - w[q->d1];
        if (rng_uniform(rq) < p->mix_prob && rest > 0) {
            q->d2 = draw_weighted(rq, w, D, rest, q->d1);
            q->w = clamp01(rng_uniform(rq) * p->mix_weight);
            q->w_dec = clamp01(q->w + 0.5 * p->decode_drift * rng_normal(rq));
        }
        q->group = -1;
        if (prefix) {
            q->group = (int32_t)rng_below(rq, (uint64_t)p->prefix_groups);
            if (q->own > 65535 - prefix)
                q->own = 65535 - prefix;
        }
        q->prompt = prefix + q->own;
    }
    free(share);
    free(w);
    return 0;
}
