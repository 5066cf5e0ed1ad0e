/* sim_prefix.h - the prefix-caching what-if of the simulator
 * (docs/simulator.md, "Prefix caching").
 *
 * When requests share prompt prefixes, the prefill worker serves the
 * cached KV blocks without computing them, so a router that reads the
 * prefill's expert counts sees only the tokens that were computed. The
 * signature cache (sigcache.h) keeps per-block counts beside the KV
 * blocks and recovers the cold-prefill counts exactly. This module
 * replays the prefill side of a workload and builds, for every request,
 * the signature ELDR would route with in three modes:
 *
 *   cold      the full prefill counts (the trace's prefill_counts): the
 *             oracle, what a router sees without prefix caching;
 *   cache     the cached blocks' counts plus the fresh counts, through
 *             sigcache_recover: must equal cold exactly;
 *   uncached  the fresh counts alone: what a router without the signature
 *             cache sees.
 *
 * Prefill model. Requests reach the prefill side in the workload's order
 * (its arrival order). P prefill workers each own one KV cache of
 * `capacity` blocks; the signature cache IS that cache's index (same keys,
 * same capacity, same LRU), so a block leaves both at once: co-indexed by
 * construction. A request goes to prefill worker i mod P (round robin) or
 * to hash(first block) mod P (prefix-aware: a group always meets its own
 * cache). Its chain of block hashes is matched against that worker's
 * cache; the first m blocks hit and are served by the KV cache; tokens
 * from m*B on are computed, and the computed full blocks are stored with
 * their counts from tokens/prefill_experts. Capacity 0 is a worker without
 * a prefix cache (m = 0 always).
 *
 * Only the signatures differ between modes: arrivals, output lengths and
 * activations are the workload's (common random numbers), so mode runs
 * differ by routing alone. Prefill time is not modelled (the arrival at the
 * decode worker is the end of prefill, as given). */
#ifndef ELDR_SIM_PREFIX_H
#define ELDR_SIM_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "signature.h"
#include "sim.h"

typedef enum sim_prefix_mode {
    SIM_PREFIX_COLD = 0,
    SIM_PREFIX_CACHE,
    SIM_PREFIX_UNCACHED,
    SIM_PREFIX_N_MODES
} sim_prefix_mode;

/* "cold", "cache", "uncached"; parse returns -1 when unknown. */
const char *sim_prefix_mode_name(sim_prefix_mode m);
int sim_prefix_mode_parse(const char *name);

/* A comma-separated list of mode names or "all" ("cold,uncached") into
 * on[m] = 1 for each mode named (on is not cleared first, so lists can be
 * merged). -1 on an unknown name, copied into bad (badlen bytes) for the
 * front end's message; 0 otherwise. The CLI's --prefix-mode and the Lua
 * prefix_mode option both read their lists here. */
int sim_prefix_modes_parse(const char *list, int on[SIM_PREFIX_N_MODES], char *bad,
                           size_t badlen);

typedef enum sim_prefill_route {
    SIM_PREFILL_RR = 0,        /* request i -> worker i mod P */
    SIM_PREFILL_PREFIX,        /* first block hash mod P (rr without a block) */
} sim_prefill_route;

/* "rr", "prefix"; parse returns -1 when unknown. */
const char *sim_prefill_route_name(sim_prefill_route r);
int sim_prefill_route_parse(const char *name);

#define SIM_PREFIX_DEFAULT_CAPACITY 4096

typedef struct sim_prefix_config {
    int64_t capacity;          /* KV blocks per prefill worker; 0 = no cache */
    int workers;               /* prefill workers P >= 1 */
    int block_size;            /* tokens per KV block (the trace's) */
    sim_prefill_route route;
} sim_prefix_config;

/* capacity 4096 blocks, 1 prefill worker, blocks of 16, round robin. */
void sim_prefix_config_default(sim_prefix_config *c);

typedef struct sim_prefix {
    sim_prefix_config cfg;
    int64_t n;                 /* the workload's requests */
    size_t dim;
    float *sig[SIM_PREFIX_N_MODES];   /* [n][dim] signatures per mode */
    int64_t n_zero[SIM_PREFIX_N_MODES]; /* all-zero signatures per mode */
    double cos_mean[SIM_PREFIX_N_MODES]; /* mean cos(sig, cold sig) */
    int32_t *hit;              /* [n] blocks served from the cache */
    int32_t *prefill_worker;   /* [n] */
    int64_t blocks, hit_blocks;       /* full prompt blocks; of them cached */
    int64_t tokens, cached_tokens;    /* prompt tokens; of them cached */
    double hit_rate;           /* hit_blocks / blocks (0 without blocks) */
    double cached_frac_mean;   /* mean over requests of cached / prompt tokens */
    int64_t evictions;         /* summed over the prefill workers' caches */
    int64_t mismatches;        /* requests whose recovered counts differ from
                                * the trace's prefill_counts (0 unless the
                                * trace's token rows contradict its counts) */
} sim_prefix;

/* Whether trace t can feed the replay: tokens/block_hashes and
 * tokens/prefill_experts present, and floor(prompt / block_size) hashes on
 * every row. Fails naming what is missing or the first row that
 * disagrees. */
int sim_prefix_check_trace(const trace_t *t, int block_size, char *err, size_t errlen);

/* Replay the prefill side of workload w (w->t must carry
 * tokens/block_hashes and tokens/prefill_experts, with floor(prompt / B)
 * hashes per request) and build the three modes' signatures with the
 * recipe (a count variant: gate values have no per-token form). Fails,
 * naming what is missing or which row disagrees. px is owned by the
 * caller: sim_prefix_free. */
int sim_prefix_build(sim_prefix *px, const sim_workload *w, const sig_recipe *recipe,
                     const sim_prefix_config *c, char *err, size_t errlen);
void sim_prefix_free(sim_prefix *px);

/* A view of w whose ELDR signatures are mode m's: a shallow copy that
 * borrows w's arrays and px's signatures (never pass it to
 * sim_workload_free; it lives as long as both). */
void sim_prefix_view(const sim_prefix *px, const sim_workload *w, sim_prefix_mode m,
                     sim_workload *view);

/* The ELDR router a mode run uses: K decode workers, its seed (ties),
 * centroids [K][dim] (dim = the px signatures'), tau and the min-two rule. */
typedef struct sim_prefix_router {
    int K;
    uint64_t seed;
    const float *centroids;
    double tau;
    int min2;
} sim_prefix_router;

/* Run ELDR on w once per mode of modes[0..n) (each at most once), seeing
 * w through that mode's signatures, into res[j] (policy "eldr-MODE"),
 * and same[j] = the share of requests res[j] sent to the worker the cold
 * run sent them to (the cold run is made for reference when cold is not
 * among modes). on_step (may be NULL) gets ctx[j] for run j. On failure
 * every res[j] is freed (zeroed) and err names the mode. Both eldr sim
 * --prefix-mode and eldr.simulate{prefix_mode} run here. */
int sim_prefix_run(const sim_prefix *px, const sim_workload *w, const int *modes, int n,
                   const sim_prefix_router *router, sim_step_fn on_step, void *const *ctx,
                   sim_result *res, double *same, char *err, size_t errlen);

/* Share of requests that two runs of one workload sent to the same
 * worker (1 for n = 0); -1 when the runs are not of one workload. */
double sim_prefix_same_worker(const sim_result *a, const sim_result *b);

#endif
