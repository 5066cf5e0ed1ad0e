/* sim_internal.h - what the simulator's files share (sim.h is the public
 * contract): token sources (sim_activations.c), arrivals
 * (sim_arrivals.c), in-flight accounting and request metrics
 * (sim_metrics.c). Tests include it to check the parts alone. */
#ifndef ELDR_SIM_INTERNAL_H
#define ELDR_SIM_INTERNAL_H

#include "online.h"
#include "rng.h"
#include "sim.h"

/* Stream salts for rng_seed_stream, so arrivals and activations of one
 * seed never share draws with each other or with the policies. */
#define SIM_SEED_ARRIVALS 0x617272697665ull    /* "arrive" */
#define SIM_SEED_TOKENS 0x746f6b656e730000ull  /* "tokens" */

/* ---- activations (sim_activations.c) ---- */

/* The token rows of one request: n_rows rows of [L][k] expert ids,
 * cycled, each id_bytes wide (1: uint8_t, the sampled rows of E <= 256
 * experts; 2: uint16_t); owned is non-NULL when the rows were sampled
 * now (then freed by sim_tokens_close). */
typedef struct sim_tokens {
    const void *rows;
    int32_t n_rows;
    int id_bytes;
    void *owned;
} sim_tokens;

/* Expert id number i (row * L * k + layer * k + j) of s. */
static inline int sim_tokens_id(const sim_tokens *s, size_t i)
{
    return s->id_bytes == 1 ? ((const uint8_t *)s->rows)[i] : ((const uint16_t *)s->rows)[i];
}

/* Token rows of request i of the workload: the recorded ones (the
 * trace's own, or read from the file now by cfg.tokens and owned until
 * sim_tokens_close), the cached pool, or a pool sampled now from its
 * decode (else prefill) counts with the stream (seed, trace row). Fails
 * naming the row and layer when the counts cannot give k distinct
 * experts, and the token rows when the file's cannot be read. */
int sim_tokens_open(const sim_workload *w, int64_t i, sim_tokens *s, char *err,
                    size_t errlen);
void sim_tokens_close(sim_tokens *s);

/* Sample every request's pool once, into w->pool, when the trace has no
 * token rows and the pools fit in cfg.pool_cache bytes (so that re-runs
 * and other policies reuse them); otherwise leave w->pool NULL and let
 * sim_tokens_open sample on admission. */
int sim_pools_build(sim_workload *w, char *err, size_t errlen);

/* Add the activations of tokens [0, n_tokens) (cycling the rows) to
 * heat [L][E]. */
void sim_tokens_heat(const sim_tokens *s, int L, int E, int k, int64_t n_tokens,
                     uint64_t *heat);

/* Draws from one layer's count profile: the experts with counts > 0 and
 * a Walker/Vose alias table over them, so one draw is O(1). */
typedef struct sim_sampler {
    int n;                     /* experts with counts > 0 */
    int cap;                   /* E, the room */
    uint16_t *id;              /* [E] their ids, then the alias table: */
    uint16_t *alias;           /* [E] slot to take when the draw misses */
    uint32_t *prob;            /* [E] P(keep the slot) * 2^32 */
    double *scaled;            /* [E] scratch for the build */
    int *work;                 /* [E] scratch for the build */
    uint32_t *taken;           /* [E] draw generation that took the slot */
    uint32_t gen;              /* of the current draw of k */
} sim_sampler;

/* Room for E experts. */
int sim_sampler_init(sim_sampler *s, int E, char *err, size_t errlen);
void sim_sampler_free(sim_sampler *s);
/* Load counts[E]; returns the number of experts with counts > 0. */
int sim_sampler_load(sim_sampler *s, const uint16_t *counts, int E);
/* k distinct experts (k <= s->n) into out[k], drawn successively
 * proportional to the counts: a draw that repeats an expert already
 * taken is redrawn, which makes each pick proportional among the experts
 * left (sampling without replacement). */
void sim_sampler_draw(sim_sampler *s, rng_t *r, int k, uint16_t *out);

/* ---- arrivals (sim_arrivals.c) ---- */

/* Given w->row[0..n) in trace order: order them by arrival and fill
 * w->arrival (open loop; shifted so the first arrival is at 0 for trace
 * times), or leave it NULL (closed loop). */
int sim_arrivals_build(sim_workload *w, char *err, size_t errlen);

/* ---- in-flight accounting and metrics (sim_metrics.c) ---- */

typedef struct sim_load {
    int K;
    int64_t *inflight;         /* [K] */
    int64_t total, max;
    double last_t;
    double area_total;         /* integral of the total in-flight */
    double area_ratio;         /* integral of max/mean while total > 0 */
    double busy_t;             /* time with total > 0 */
    double *area_w;            /* [K] integral of each worker's in-flight */
    sim_point *series;         /* change points */
    int64_t n_series, cap_series;
} sim_load;

/* For K workers and at most cap change points. */
int sim_load_init(sim_load *s, int K, int64_t cap, char *err, size_t errlen);
/* Worker w's in-flight changes by delta (+1 or -1) at time t >= last. */
void sim_load_change(sim_load *s, double t, int w, int delta);
/* Integrate up to t (the end of the run). */
void sim_load_advance(sim_load *s, double t);
void sim_load_free(sim_load *s);

/* Quantile q in [0, 1] of v[n] (sorted in place), linear interpolation
 * between order statistics; NaN when n = 0. */
double sim_quantile(double *v, int64_t n, double q);

/* TPOT, queue wait and sojourn statistics from res->req. */
int sim_metrics_requests(sim_result *res, char *err, size_t errlen);

/* ---- eldr-online (sim_online.c) ---- */

/* The refit state of one eldr-online run: its window and clock
 * (online.h) in simulated time, and the centroids the policy routes on
 * (a copy of the ones it came with, refitted in place). */
typedef struct sim_online {
    online_window win;
    online_clock clk;
    route_policy *p;
    float *cur;                /* [K][dim], what p->centroids points to */
    float *next;               /* [K][dim], a refit's result */
    int64_t refits;
} sim_online;

/* Take over p's centroids (a copy) for the workload's signatures. */
int sim_online_init(sim_online *o, const sim_workload *w, route_policy *p, char *err,
                    size_t errlen);
void sim_online_free(sim_online *o);
/* A request with signature sig arrived at t (after it was routed): the
 * window takes it, and a refit that is due runs now. */
int sim_online_observe(sim_online *o, double t, const float *sig, char *err, size_t errlen);

#endif
