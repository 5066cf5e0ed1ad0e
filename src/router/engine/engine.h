/* engine.h - the decision room's state: everything one eldrd process
 * shares between the threads of its front ends, and nothing of the front
 * ends themselves: options, the current model, the routing state, the
 * signature caches (one per prefill worker), the instance pool, the
 * metrics counters, and the providers that add their own lines to
 * /metrics, /v1/snapshot and /healthz.
 *
 * The engine does not start threads: main (the composition root) starts
 * the refit, the reaper and the load feed on it (refit.h, reaper.h,
 * load_vllm.h) and stops them before engine_free. A front end reaches the
 * decision through decide.h. */
#ifndef ELDR_ROUTER_ENGINE_H
#define ELDR_ROUTER_ENGINE_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "metrics.h"
#include "modelref.h"
#include "opts.h"
#include "pool.h"
#include "sigcache.h"
#include "state.h"
#include "costmodel.h"
#include "endpoints_file.h"
#include "strbuf.h"

/* A prefill worker's signature cache. sigcache is not thread-safe: its
 * own lock, held for a lookup-and-store only. */
typedef struct pcache {
    const char *name;            /* borrowed from the options */
    pthread_mutex_t lock;
    sigcache_t *c;
    uint64_t hit_blocks;         /* claimed cached blocks found */
    uint64_t missing_blocks;     /* claimed cached blocks not found */
    uint64_t stored_blocks;      /* block counts stored by routes */
    struct kv_side *kv;          /* KV events: hash map, counters (kv_apply.h) */
} pcache;

/* What a room outside the engine adds to the views of the whole daemon
 * (registered by main; called from whichever thread serves the view).
 * Any callback may be NULL. */
typedef struct engine_provider {
    const char *snapshot_key;    /* its key in /v1/snapshot */
    json_t *(*snapshot)(void *cls);
    void (*metrics)(void *cls, strbuf *b);
    /* /healthz: a non-empty array when degraded (its key: degraded_key),
     * else NULL or an empty array */
    const char *degraded_key;
    json_t *(*degraded)(void *cls);
    /* the snapshot's "failures" object (failures.h): the provider adds
     * its own keys (the proxy: "proxy", the upstream "timeouts") */
    void (*failures)(void *cls, json_t *into);
    void *cls;
} engine_provider;

#define ENGINE_PROVIDERS_MAX 8

/* Signature buffers to reuse (decide.c): once the decision window is
 * full, each route gets back the buffer of the signature it dropped; a
 * route takes one of these instead of allocating |S|*E floats, and gives
 * back what the window returned. */
#define ENGINE_SIG_SPARES 8
typedef struct sig_spares {
    pthread_mutex_t lock;
    float *buf[ENGINE_SIG_SPARES];
    size_t dim[ENGINE_SIG_SPARES];   /* floats in buf[i] */
    int n;
} sig_spares;

typedef struct engine {
    eldrd_opts *o;
    int K, L, E;                 /* fixed for the process's life */
    mholder model;
    rstate *st;
    pcache *caches;
    int n_caches;
    pool pool;                   /* prefill and decode instances (pool.h) */
    metrics_t met;
    /* HDF5 (serial build) is not thread-safe, and a model install must
     * persist and swap in one order: one lock for both. */
    pthread_mutex_t install_lock;
    char persist_path[PATH_MAX]; /* state-dir/model.h5, "" without --state-dir */
    double started;              /* unix seconds */
    engine_provider providers[ENGINE_PROVIDERS_MAX];
    int n_providers;             /* set before serving, read-only after */
    sig_spares spares;
    cost_model cost;             /* the cost rule's (--cost, else the defaults) */
    /* the picker's endpoints (--endpoints; borrowed, set by main before
     * serving), NULL without --ext-proc: readiness.h reads it */
    endpoints_table *ep;
    atomic_int draining;         /* SIGTERM: main sets it before the listeners drain */
} engine_t;

/* Set up from options: loads the model (the state dir's if present, else
 * -m), checks --workers against K, builds state, caches and pool. */
int engine_init(engine_t *d, eldrd_opts *o, char *err, size_t errlen);
void engine_free(engine_t *d);

/* Before serving: add a provider (copied). -1 when the table is full. */
int engine_add_provider(engine_t *d, const engine_provider *p);

/* Install m (ownership passes, also on failure) as the current model:
 * check it fits this daemon (K, L, E, a count variant), persist it to
 * the state dir when persist is set, then swap. */
int engine_install(engine_t *d, model_t *m, const char *source, int persist, char *err,
                   size_t errlen);

/* SIGHUP: reload the state dir's model.h5 if it exists, else -m. */
int engine_reload(engine_t *d, char *err, size_t errlen);

/* The pool as a provider (pool_view.h): "pool" in the snapshot, the
 * eldr_upstream_* series, "ejected" on /healthz. main registers it when a
 * front end reports health (proxy mode). */
void engine_pool_provider(engine_t *d, engine_provider *out);

/* The MoE router's top-k the cost rule reads r's counts with: --top-k,
 * else the model's (0: unknown, a reference fit JSON). */
int engine_top_k(const engine_t *d, const mref_t *r);

/* Switch the decision rule (PUT /v1/config): -1 with err when the cost
 * rule cannot read the served model's counts (no top-k). */
int engine_set_policy(engine_t *d, int policy, char *err, size_t errlen);

/* Index of a prefill worker (signature cache) by name; "" = the first;
 * -1 when unknown. */
int engine_prefill_index(const engine_t *d, const char *name);

#endif
