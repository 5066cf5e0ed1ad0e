/* sim.h - the what-if decode routing simulator: K decode workers with
 * continuous batching, one routing policy (route.h), a step-latency cost
 * model (costmodel.h). docs/simulator.md describes the event model, the
 * activations and every metric.
 *
 * Event model. A request reaches its decode worker when its prefill ends
 * (its arrival): from the trace's arrival_s, from a Poisson process, or,
 * in a closed loop, the moment an earlier request finishes. The policy
 * picks the worker on arrival; the request waits in that worker's FIFO
 * queue and joins the batch at the next step boundary when the batch
 * holds fewer than max_batch requests. Each worker steps on its own: a
 * step emits one token for every request of the batch and lasts
 * cost_step_time(U, B, kv), U_l = distinct experts the batch activates in
 * layer l, B = batch size, kv = prompt plus generated tokens of the batch.
 * A request leaves after its last token. In-flight = waiting + decoding.
 *
 * Activations. A request's token t activates the k experts per layer of
 * one token row. With token-level data (tokens/decode_experts) the rows
 * are the recorded ones, cycled when the output is longer. Otherwise a
 * pool of min(output, sample_pool) rows is drawn from the request's own
 * decode-count profile (k distinct experts per layer, successive draws
 * proportional to the counts, i.e. without replacement) and cycled; the
 * pool depends only on (seed, trace row). One step holds one token per
 * request, so the per-step distribution of U_l is exactly that of fresh
 * draws; only the repetition over a request's own lifetime differs.
 *
 * Common random numbers: arrivals, output lengths and activations come
 * from the workload, built once; every policy run on one workload sees
 * the same ones, so differences between runs are the policies' alone. */
#ifndef ELDR_SIM_H
#define ELDR_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "route.h"
#include "signature.h"
#include "trace.h"
#include "trace_tokens.h"

#define SIM_DEFAULT_MAX_BATCH 256
#define SIM_DEFAULT_SAMPLE_POOL 32
#define SIM_DEFAULT_CALIB 1000
#define SIM_DEFAULT_POOL_CACHE ((size_t)256 << 20)
/* The signatures a grid cell keeps built (grid.c): above it, at arrival */
#define SIM_DEFAULT_SIG_CACHE ((size_t)256 << 20)
/* The one arrival rule of every front end (eldr sim, sweep, advise, dash,
 * the Lua module): the trace's own arrival_s when it has them, else
 * Poisson arrivals at this rate, and the report says it was the default. */
#define SIM_DEFAULT_RATE 20.0

typedef enum sim_arrival_mode {
    SIM_ARRIVE_TRACE = 0,      /* arrival_s of the trace */
    SIM_ARRIVE_POISSON,        /* exponential gaps at `rate` */
    SIM_ARRIVE_CLOSED,         /* `concurrency` requests in the system */
} sim_arrival_mode;

typedef struct sim_config {
    int max_batch;             /* requests decoding at once per worker */
    int32_t output_tokens;     /* tokens per request; 0 = decode_tokens */
    sim_arrival_mode arrivals;
    double rate;               /* POISSON: requests per second */
    int concurrency;           /* CLOSED: requests in the system */
    uint64_t seed;             /* arrivals and sampled activations */
    int sample_pool;           /* sampled token rows per request */
    size_t pool_cache;         /* bytes of sampled rows kept in the workload
                                * (reused by every run); above it, rows
                                * are sampled on admission. 0 = never */
    size_t sig_cache;          /* bytes of float signatures kept in the
                                * workload, built once; above it each
                                * request's is built at its arrival from its
                                * prefill counts (the same floats, and the
                                * workload holds none: docs/memory.md).
                                * Default SIZE_MAX: always kept */
    cost_model cost;
    double refit_every;        /* eldr-online: seconds of simulated time between
                                * refits (online.h) */
    double refit_window;       /* eldr-online: seconds of signatures a refit sees */
    int no_heat;               /* 1: leave sim_result.heat NULL (a run's
                                * activations per worker, layer and expert:
                                * about a tenth of a run's time, read only
                                * by the dashboard and --csv) */
    trace_tokens *tokens;      /* the trace's recorded decode token rows,
                                * read from its file at each admission
                                * (trace_tokens.h) when the trace does not
                                * hold them: row r of the workload's trace
                                * is the reader's row r. Borrowed; NULL:
                                * none (the trace's own rows, or sampled) */
    int threads;               /* sampling the pools (sim_workload_init) on
                                * this many threads (par.h; <= 0: the online
                                * CPUs); the pools do not depend on it */
} sim_config;

/* max_batch 256, trace lengths, trace arrivals, seed 1, pool 32, pool
 * cache 256 MiB, the documented cost model, refits every 2.5 s over 5 s,
 * one thread. */
void sim_config_default(sim_config *c);

/* c's arrivals from the trace when it has arrival_s; else, when c asks
 * for the trace's arrivals, Poisson at SIM_DEFAULT_RATE. Returns 1 when
 * the default was applied (the caller says so), else 0. */
int sim_default_arrivals(sim_config *c, const trace_t *t);

/* Everything the policies share: the requests in arrival order, their
 * lengths, arrival times and signatures. */
typedef struct sim_workload {
    const trace_t *t;          /* borrowed: must outlive the workload */
    sim_config cfg;
    int L, E, k;
    int64_t n;                 /* requests simulated */
    int64_t *row;              /* [n] trace row, in arrival order */
    int64_t *key;              /* [n] NULL, or (sim_workload_init_rows) the
                                * request's place in the row list: the row
                                * number it would have in a copy of those
                                * rows (its activations' stream, its
                                * sim_request.row) */
    int32_t *out_tokens;       /* [n] tokens each emits (> 0) */
    double *arrival;           /* [n] ascending (open loop); NULL closed */
    int64_t n_skipped;         /* rows with no token to emit, left out */
    int64_t total_tokens;
    int recorded;              /* activations from tokens/decode_experts
                                * (held by the trace, or cfg.tokens) */
    int id_bytes;              /* width of a token row's expert id: 1
                                * (uint8_t) when E <= 256 for sampled rows
                                * and rows read by cfg.tokens, else 2
                                * (uint16_t, as the trace holds them) */
    void *pool;                /* sampled token rows, [pool_off[n]][L][k] ids
                                * of id_bytes, or NULL (recorded, or too big:
                                * sampled on admission) */
    int64_t *pool_off;         /* [n+1] request i owns [pool_off[i], [i+1]) */
    float *sig;                /* [n][dim] signatures, NULL without recipe
                                * or above cfg.sig_cache */
    const sig_recipe *recipe;  /* borrowed, when sig is built at arrival */
    size_t dim;
    int64_t n_sig_zero;        /* all-zero signatures (routed by load) */
} sim_workload;

/* Build the workload of trace t. recipe (may be NULL) gives the
 * signatures ELDR routes with (from the prefill counts). Fails, naming
 * the option or dataset, when the trace lacks what the config needs
 * (arrival_s, decode_tokens without output_tokens, counts to sample). */
int sim_workload_init(sim_workload *w, const trace_t *t, const sim_config *c,
                      const sig_recipe *recipe, char *err, size_t errlen);
/* The workload of rows[0..n_rows) of t (ascending, distinct), exactly
 * that of a trace holding a copy of those rows (trace_select), without
 * the copy: the grid's redrawn splits simulate each seed's evaluation
 * rows in place (grid.c). A bad list fails naming its first bad entry. */
int sim_workload_init_rows(sim_workload *w, const trace_t *t, const int64_t *rows,
                           int64_t n_rows, const sim_config *c, const sig_recipe *recipe,
                           char *err, size_t errlen);
/* Request i's row number as the simulator reports it and draws its
 * activations with: its place in the row list, else its trace row. */
static inline int64_t sim_key(const sim_workload *w, int64_t i)
{
    return w->key ? w->key[i] : w->row[i];
}
void sim_workload_free(sim_workload *w);

/* Bytes the workload's sampled activation pools take when kept (0 when
 * its activations are recorded): what cfg.pool_cache is weighed against. */
size_t sim_pools_bytes(const sim_workload *w);
/* Free the pools (later runs sample on admission: the same rows). */
void sim_pools_drop(sim_workload *w);
/* The pool cache a command can afford: SIM_DEFAULT_POOL_CACHE, or less
 * when `loaded` bytes of a --max-memory `budget` are taken (0 when none
 * is left): what it loads plus the pools stay within the budget. */
size_t sim_pool_cache_within(size_t budget, double loaded);

/* One simulated request, in arrival order. */
typedef struct sim_request {
    int64_t row;               /* trace row */
    int worker;
    route_rule rule;           /* why the policy sent it there */
    int32_t tokens;            /* tokens emitted (counted by the steps) */
    double arrival, start, finish; /* seconds; start = first step */
} sim_request;

/* In-flight of one worker changed to `inflight` at time t. */
typedef struct sim_point {
    double t;
    int32_t worker, inflight;
} sim_point;

/* Called at the start of every step (may be NULL): U has L entries. */
typedef void (*sim_step_fn)(void *ctx, int worker, double t, double dt, int B,
                            const int *U, int L, int64_t kv_tokens);

typedef struct sim_result {
    char policy[16];
    int K, L, E, k;
    int64_t n;
    sim_request *req;          /* [n] */

    /* per request, over requests (ms) */
    double tpot_p50_ms, tpot_p95_ms, tpot_p99_ms, tpot_mean_ms;
    double queue_p50_ms, queue_p99_ms, queue_mean_ms;
    /* per step */
    int64_t steps, tokens, activations, distinct_loaded;
    double distinct_per_step;  /* mean U_l over steps and layers */
    double reuse;              /* activations / distinct experts loaded */
    double mean_batch;         /* mean B over steps */
    /* system */
    double makespan_s;         /* last finish */
    double throughput_rps, tokens_per_s;
    double mean_in_system;     /* time average of in-flight, all workers */
    double mean_sojourn_s;     /* mean finish - arrival */
    double imbalance;          /* time average of max/mean in-flight */
    int64_t rule_count[RULE_N];
    int64_t refits;            /* eldr-online: centroid refits made */

    /* per worker */
    int64_t *served;           /* [K] requests finished */
    int64_t *worker_steps;     /* [K] */
    double *worker_busy_s;     /* [K] time spent stepping */
    double *worker_distinct;   /* [K] mean U_l per step */
    double *inflight_mean;     /* [K] time average */
    uint64_t *heat;            /* [K][L][E] activations; NULL with no_heat */
    sim_point *series;         /* in-flight change points, time order */
    int64_t n_series;
} sim_result;

/* Simulate the workload under policy p (K = p->K workers); the policy
 * must be ready (centroids for ELDR and eldr-online, which also need
 * w->sig; label shares for domain). eldr-online starts from p's
 * centroids and refits a copy of them as simulated time passes (at an
 * arrival: the request is routed first, then its signature joins the
 * window, then a refit that is due runs at once and the next arrival
 * sees its centroids); p's own centroids are left as they were. on_step/ctx may be NULL. res is filled and owned
 * by the caller (sim_result_free). Deterministic for the workload and
 * the policy's seed. */
int sim_run(const sim_workload *w, route_policy *p, sim_step_fn on_step, void *ctx,
            sim_result *res, char *err, size_t errlen);
/* The same, stopping early: *cancel (may be NULL) is read every
 * SIM_CANCEL_EVERY events (arrivals and step ends: well under a
 * millisecond of work on the reference geometry), and once it is set the
 * run frees what it made and returns SIM_CANCELLED with err "cancelled".
 * A run that is not cancelled gives exactly sim_run's result. */
#define SIM_CANCELLED (-2)
#define SIM_CANCEL_EVERY 64
int sim_run_cancel(const sim_workload *w, route_policy *p, sim_step_fn on_step, void *ctx,
                   volatile int *cancel, sim_result *res, char *err, size_t errlen);
void sim_result_free(sim_result *r);

#endif
