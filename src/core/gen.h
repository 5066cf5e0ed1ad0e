/* gen.h - the synthetic trace generator (`eldr gen`).
 *
 * Generates an eldr trace that behaves like a real MoE router: per token
 * and layer, k distinct experts drawn as Gumbel-top-k over the token's
 * router logits; logits built from a shared base, a few generalist experts,
 * a per-domain shift whose strength varies by layer, request-level noise,
 * and a decode drift. Requests mix two domains, have lognormal lengths,
 * optional Poisson arrivals with domain bursts, optional shared prompt
 * prefixes (identical routing of the shared tokens, chained KV block
 * hashes), optional gate sums and token-level datasets. The model and
 * every parameter are explained in docs/generator.md.
 *
 * Deterministic for a seed whatever the thread count: request r draws only
 * from rng_seed_stream(seed, r); the shared model, the arrival process and
 * each prefix group draw from their own streams. */
#ifndef ELDR_GEN_H
#define ELDR_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

#define GEN_MAX_DOMAINS 1024
#define GEN_MAX_THREADS 64

typedef struct gen_params {
    /* size and geometry */
    int64_t requests;          /* --requests */
    int layers, experts, top_k;/* --layers --experts --top-k */
    int domains;               /* --domains */
    uint64_t seed;             /* --seed */
    char model[TRACE_MODEL_MAX]; /* --model: the root attribute */

    /* router logits: z = base + generalists + s_l * shift[d] + noise */
    double base_scale;         /* --base-scale: sd of the shared base */
    int generalists;           /* --generalists: per layer */
    double generalist_bump;    /* --generalist-bump: added to their logits */
    double domain_strength;    /* --domain-strength: sd of a domain's shift at mid depth */
    double layer_floor;        /* --layer-floor: s_l at the edges, as a fraction */
    const double *domain_shares; /* --domain-shares: [domains] weights, NULL = uniform */
    double mix_prob;           /* --mix-prob: P(request has a second domain) */
    double mix_weight;         /* --mix-weight: secondary weight ~ U(0, this) */
    double request_noise;      /* --request-noise: sd of per-request logit noise */
    double decode_drift;       /* --decode-drift: sd of the decode logits' extra noise */

    /* lengths: lognormal with these means (decode 0 = no decode data) */
    double prompt_tokens;      /* --prompt-tokens */
    double decode_tokens;      /* --decode-tokens */
    double length_spread;      /* --length-spread: lognormal sigma, 0 = fixed */

    /* arrivals */
    double arrival_rate;       /* --arrival-rate: req/s, 0 = no arrival_s */
    double burst_factor;       /* --burst-factor: hot domain's share multiplier */
    double burst_period;       /* --burst-period: seconds per hot domain */
    double drift;              /* --drift: 0 none .. 1 only the domains near a focus
                                * that moves from domain 0 to domain D-1 across
                                * the trace's rows */

    /* optional outputs */
    int gate_prob, gate_logit; /* --gates / --gate-prob / --gate-logit */
    int tokens;                /* --tokens: token-level datasets */
    int prefix_groups;         /* --prefix-groups: 0 = no shared prefixes */
    int prefix_blocks;         /* --prefix-blocks: shared blocks per group */
    int block_size;            /* --block-size: tokens per KV block */

    int threads;               /* --threads */

    /* Optional progress report, called from the calling thread only, with
     * the fraction of requests done. */
    void (*progress)(double frac, void *ctx);
    void *progress_ctx;
    /* Optional: set (by a signal handler, say) to stop; every thread
     * looks at it between chunks of GEN_CHUNK requests, so a large trace
     * stops within milliseconds and gen_run returns -2 ("cancelled"). */
    volatile int *cancel;
} gen_params_t;

/* The defaults (documented in docs/generator.md and `eldr gen --help`). */
void gen_defaults(gen_params_t *p);

/* Check every parameter; the message names the flag ("--mix-prob ..."). */
int gen_check(const gen_params_t *p, char *err, size_t errlen);

/* Generate a trace; *out owned by the caller (trace_free). Returns 0,
 * -1 with err, or -2 when p->cancel was set (err says "cancelled"). */
int gen_run(const gen_params_t *p, trace_t **out, char *err, size_t errlen);

/* The name of domain d: "code", "math", ... then "domain8", ... (static
 * storage for d < 8, else written into buf). */
const char *gen_domain_name(int d, char *buf, size_t len);

/* Layer strength factor of the domain shift, in [floor, 1]:
 * floor + (1 - floor) * sin(pi * (l + 0.5) / L). */
double gen_layer_strength(int l, int L, double floor);

#endif
