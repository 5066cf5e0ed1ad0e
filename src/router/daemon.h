/* daemon.h - everything one eldrd process shares between its HTTP
 * threads: options, the current model, the routing state, the signature
 * caches (one per prefill worker) and the metrics. */
#ifndef ELDR_ROUTER_DAEMON_H
#define ELDR_ROUTER_DAEMON_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

struct MHD_Daemon;

#include "auth.h"
#include "metrics.h"
#include "modelref.h"
#include "opts.h"
#include "sigcache.h"
#include "state.h"

/* A prefill worker's signature cache. sigcache is not thread-safe: its
 * own lock, held for a lookup-and-store only. */
typedef struct pcache {
    const char *name;            /* borrowed from the options */
    pthread_mutex_t lock;
    sigcache_t *c;
    uint64_t hit_blocks;         /* claimed cached blocks found */
    uint64_t missing_blocks;     /* claimed cached blocks not found */
    uint64_t stored_blocks;      /* block counts stored by routes */
    uint64_t kv_stored, kv_removed, kv_cleared; /* events seen */
} pcache;

typedef struct eldrd {
    eldrd_opts *o;
    int K, L, E;                 /* fixed for the process's life */
    mholder model;
    rstate *st;
    pcache *caches;
    int n_caches;
    metrics_t met;
    /* HDF5 (serial build) is not thread-safe, and a model install must
     * persist and swap in one order: one lock for both. */
    pthread_mutex_t install_lock;
    char persist_path[PATH_MAX]; /* state-dir/model.h5, "" without --state-dir */
    double started;              /* unix seconds */
    struct vllm_poller *vllm;    /* --load-from vllm, else NULL */
    struct proxy *proxy;         /* --proxy, else NULL */
    struct side *side;           /* --proxy: where non-proxied requests run (http_side.h) */
    auth_t auth;                 /* tokens (auth.h); "" = open */
    _Atomic(struct MHD_Daemon *) mhd; /* set once serving, for /metrics */
    atomic_int draining;         /* SIGTERM: no new routes, close connections */
    atomic_int active;           /* requests between headers and completion */
    pthread_t reaper;            /* --inflight-ttl: expires lost requests */
    int reaper_on;
    pthread_mutex_t reaper_lock;
    pthread_cond_t reaper_wake;
    int reaper_stop;
    struct refitter *refit;      /* --refit-every (refit.h), else NULL */
} eldrd_t;

/* One log line on stderr ("eldrd: ..."), unless --quiet. */
void daemon_log(const eldrd_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Before serving: read the token files and apply the bind rule (a
 * non-loopback --listen needs an admin token or --insecure). -1 with err
 * (eldrd exits 2). */
int daemon_check_security(eldrd_t *d, char *err, size_t errlen);

/* Set up from options: loads the model (the state dir's if present, else
 * -m), checks --workers against K, builds state and caches. */
int daemon_init(eldrd_t *d, eldrd_opts *o, char *err, size_t errlen);
void daemon_free(eldrd_t *d);

/* Install m (ownership passes, also on failure) as the current model:
 * check it fits this daemon (K, L, E, a count variant), persist it to
 * the state dir when persist is set, then swap. */
int daemon_install(eldrd_t *d, model_t *m, const char *source, int persist, char *err,
                   size_t errlen);

/* SIGHUP: reload the state dir's model.h5 if it exists, else -m. */
int daemon_reload(eldrd_t *d, char *err, size_t errlen);

/* For the daemon's periodic threads: wait on c (m held) at most
 * `seconds`, or until signalled. */
void daemon_wait_for(pthread_cond_t *c, pthread_mutex_t *m, double seconds);

/* Index of a prefill worker by name; "" = the first; -1 when unknown. */
int daemon_prefill_index(const eldrd_t *d, const char *name);

#endif
