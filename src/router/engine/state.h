/* state.h - the router's shared routing state: in-flight load per worker,
 * the in-flight table, tau, the ring of recent decisions, the window of
 * recent signatures (with the drift statistics over it) and the decision
 * counters.
 *
 * One mutex guards all of it; the critical section of a route is small
 * (read the loads, apply the band rule to similarities computed outside,
 * count, record). Everything expensive (parsing, the signature, the K dot
 * products, JSON) happens outside the lock. */
#ifndef ELDR_ROUTER_STATE_H
#define ELDR_ROUTER_STATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "wire.h"
#include "costpack.h"
#include "costrule.h"
#include "idmap.h"
#include "modelref.h"
#include "online.h"
#include "route.h"

#define STATE_INFLIGHT_MAX (1 << 22)  /* in-flight requests before 503 */

/* The decision rule of a route (--policy, PUT /v1/config): the band rule
 * (route.h), or the cost rule (costrule.h). */
enum { STATE_POLICY_BAND = 0, STATE_POLICY_COST = 1 };
/* "band", "cost"; parse: -1 when neither. Inline: the body parsers (and
 * their fuzz build, which links no state) read them too. */
static inline const char *state_policy_name(int policy)
{
    return policy == STATE_POLICY_COST ? "cost" : "band";
}

static inline int state_policy_parse(const char *name)
{
    return !strcmp(name, "band") ? STATE_POLICY_BAND : !strcmp(name, "cost") ? STATE_POLICY_COST
                                                                             : -1;
}

/* One decision as the ring keeps it (arrays of K). */
/* Where a route's signal came from (explain's "signal"). */
typedef enum sig_origin {
    SIG_ORIGIN_NONE = 0,         /* no signal: the no-signature rule */
    SIG_ORIGIN_BODY,             /* counts or gates in POST /v1/route */
    SIG_ORIGIN_ELDR_SIG,         /* the authors' patched engine's eldr_sig */
    SIG_ORIGIN_ROUTED            /* a stock engine's routed experts (routed.h) */
} sig_origin;

/* "none", "counts", "eldr_sig", "routed_experts" */
const char *sig_origin_name(int origin);

typedef struct drec {
    char id[RB_ID_MAX];
    uint64_t seq;
    double t;                    /* unix seconds */
    double tau;
    uint64_t model_gen;
    uint64_t model_refit_of;     /* that generation was refitted from this one; 0 loaded */
    int worker, rule, prefill;
    int finished;                /* 0 in flight, 1 finished, 2 expired (ttl), 3 cleared,
                                  * 4 dropped at its worker's ejection, 5 failed there */
    int hit_blocks, missing_blocks, stored_blocks;
    int origin, sig_rows, cached_rows;   /* the signal's (decide.h, sig_origin) */
    char note[160];              /* why the signal is absent or partial, "" */
    int has_sim, n_cand;
    double sim_max;
    double *sim;
    int64_t *load;
    int *cand;
    /* workers the decision could not use (explain says why): ejected by
     * the pool's health, or retry_of, the one that failed this request */
    uint64_t ineligible[ROUTE_MAX_WORKERS / 64];
    int n_ineligible, retry_of;
    int policy;                  /* STATE_POLICY_* the decision was made under */
    int has_cost;                /* terms hold the cost rule's terms */
    cost_terms *terms;           /* [K], allocated by the slot's first cost decision;
                                  * in a copy for a list: NULL (only cost) */
    double *cost;                /* in a copy: [K] the costs, NAN where ineligible;
                                  * NULL in the ring (terms hold them) */
} drec;

/* A signature in the window. */
typedef struct wrec {
    char id[RB_ID_MAX];
    uint64_t seq;
    int nearest;
    double sim_max;
    float *sig;                  /* [dim] */
} wrec;

typedef struct rstate {
    pthread_mutex_t lock;
    int K;
    char **workers;              /* [K] owned names */
    double tau;
    uint64_t seq;                /* decisions made */
    int64_t *inflight;           /* [K] */
    uint64_t *routed, *finished; /* [K] totals */
    uint64_t *failed;            /* [K] routes that ended in a failure there (state_fail) */
    uint64_t *expired, *cleared; /* [K] dropped by --inflight-ttl, by the admin */
    uint64_t *ejected;           /* [K] dropped when the pool ejected the worker */
    uint64_t *by_rule;           /* [K][RULE_N] */
    idmap ids;
    drec *ring;
    int ring_cap, ring_n, ring_head; /* head: next slot to write */
    wrec *win;
    int win_cap, win_n, win_head;
    size_t win_dim;
    uint64_t win_gen;            /* model generation of the window's signatures */
    double win_sim_sum;          /* drift: sum of sim_max over the window */
    int64_t *win_nearest;        /* [K] window members nearest to each centroid */
    /* --load-from vllm (load_vllm.h): the workers' own load reports. A
     * worker's routing load is rep_load + (routed - rep_base) while
     * rep_known, else its in-flight count. */
    int use_reported;
    uint8_t *rep_known;          /* [K] a report is in use */
    uint8_t *rep_stale;          /* [K] ... though the last poll failed */
    int64_t *rep_load;           /* [K] running + waiting at the last good poll */
    uint64_t *rep_base;          /* [K] routed[k] when that poll went out */
    /* --refit-every (refit.h): the online refit's window and clock
     * (online.h) on the monotonic clock, holding the signatures routed
     * under models of recipe epoch online_epoch; online NULL when off.
     * Its own lock (taken after `lock` when both are): the refit thread
     * copies the window out under it, and a route that finds it busy
     * leaves its signature out rather than wait (online_busy counts
     * those), so routes never wait for a refit. */
    pthread_mutex_t online_lock;
    uint64_t online_busy;
    online_window *online;
    online_clock online_clk;
    int online_max_rows;
    uint64_t online_epoch;
    uint64_t online_oom;         /* signatures the window had no memory for */
    /* The cost rule (state_cost_init): the policy routes decide with,
     * and the estimate of every worker's batch over the requests in
     * flight, kept at every route whatever the policy, so that a switch
     * to cost starts from a true estimate. Each in-flight entry keeps its
     * request's cells (costpack.h) to remove exactly what it added; the
     * estimate is O(K x L x E) beside them. */
    int policy;
    int cost_on;                 /* cost initialised */
    cost_state cost;
    cost_terms *terms;           /* [K] scratch: the decision's terms, for the ring */
} rstate;

rstate *state_new(int K, const char *const *workers, double tau, int ring, int window,
                  char *err, size_t errlen);
void state_free(rstate *s);

/* What a route brings into the critical section. */
typedef struct route_in {
    const char *request_id;      /* "" = generate "r<seq>" */
    const mref_t *model;
    const double *sim;           /* [K], NULL for an all-zero signature */
    float *sig;                  /* [model->dim], malloc'd; see state_route */
    int prefill;                 /* prefill worker index, -1 none */
    int hit_blocks, missing_blocks, stored_blocks;
    const uint8_t *eligible;     /* [K] workers it may go to; NULL all */
    int retry_of;                /* a retry: the worker that failed it; -1 none */
    int origin, sig_rows, cached_rows;   /* where the signal came from (decide.h) */
    const char *note;            /* why it is absent or partial; NULL none */
    int owned;                   /* eldrd finishes it itself (proxy, picker): never
                                  * expired by --inflight-ttl */
    cost_pack *cost;             /* the request's cost-rule cells (NULL: none, the empty
                                  * request); state_route keeps it with the in-flight
                                  * entry and sets NULL, else the caller frees it */
    const cost_req *creq;        /* the same request with its dense row, what a decision
                                  * and the add read (NULL: the empty request) */
} route_in;

typedef struct route_out {
    char request_id[RB_ID_MAX];
    int policy;                  /* STATE_POLICY_* the decision was made under */
    double tau;
    uint64_t seq;
    route_decision d;
} route_out;

/* Decide among the eligible workers, count the request in flight and
 * record it. -1 with e: 409 when the id is in flight already, 503 when
 * the table is full or no worker is eligible. When the window
 * keeps the signature it takes in->sig itself (a pointer swap, not a copy
 * of |S|*E floats under the lock) and leaves in its place the buffer of
 * the signature it dropped, or NULL: the caller frees in->sig after. */
int state_route(rstate *s, route_in *in, route_out *out, rb_err *e);

/* The request left its decode worker: *worker gets it. 404 if unknown. */
int state_finish(rstate *s, const char *id, int *worker, rb_err *e);
/* The same for a request that failed at its decode worker (no answer, a
 * 5xx, a timeout, a stream cut: the front end's verdict): the load drops
 * as at a finish, counted in failed[worker], its decision ends "failed". */
int state_fail(rstate *s, const char *id, int *worker, rb_err *e);

/* --inflight-ttl: forget every in-flight request routed before `before`
 * (unix seconds, the clock of the decisions): its load drops, its
 * decision is marked expired. Returns how many (-1 out of memory). */
long state_expire(rstate *s, double before);

/* The admin's clear: forget every in-flight request of worker k. */
long state_clear_worker(rstate *s, int k);

/* The pool ejected decode worker k (pool.h: it failed --eject-after
 * times in a row): its in-flight requests are taken as lost, as by the
 * admin's clear (counted in ejected[k], their decisions end "ejected"),
 * so the loads and the cost estimate agree and a worker that comes back
 * restarted is not charged for requests it no longer holds. A request
 * dropped here is out of the table: its later finish is a 404 and
 * removes nothing twice. */
long state_eject_worker(rstate *s, int k);

/* The cost rule over L layers, E experts: the cost model, the batch cap
 * and the starting policy. Before serving (not thread-safe against
 * routes); without it the state maintains no estimate and refuses the
 * cost policy. */
int state_cost_init(rstate *s, int L, int E, const cost_model *m, int max_batch, int policy,
                    char *err, size_t errlen);
int state_get_policy(rstate *s);
/* -1 when the cost policy is asked for without state_cost_init. */
int state_set_policy(rstate *s, int policy);
/* Per worker, under the lock: the estimate's expected distinct experts
 * of one decode step (all layers), its members and their prompt tokens.
 * 0 when the cost rule is off. */
int state_cost_copy(rstate *s, double *U, int64_t *members, double *kv);

double state_get_tau(rstate *s);
void state_set_tau(rstate *s, double tau);

/* --load-from vllm: turn reported loads on; the routed counts a poll
 * starts from; one worker's result (known 0: keep the last report, now
 * stale, or stay on the in-flight count when there never was one). */
void state_use_reported(rstate *s, int on);
void state_routed_counts(rstate *s, uint64_t *out);
void state_set_reported(rstate *s, int k, int known, int64_t load, uint64_t base);

/* A new model generation: the window (signatures of the old recipe) and
 * its drift sums start over; so do the online refit's window and clock
 * when the recipe epoch changed (a loaded model, not a refit). */
void state_model_changed(rstate *s, const mref_t *r);

/* ---- the online refit's window (state_online.c) ---- */

/* Turn it on: refits every `every` s over the last `window` s, at most
 * max_rows signatures kept. Before the first model is installed. */
int state_online_enable(rstate *s, double every, double window, int max_rows, char *err,
                        size_t errlen);
void state_online_free(rstate *s);
/* In a route's critical section: keep the route's signature (a copy)
 * when its model is of the current epoch and the window is not being
 * copied out right now. */
void state_online_push(rstate *s, const route_in *in);
/* A new epoch (in state_model_changed, under the lock). */
void state_online_epoch(rstate *s, const mref_t *r);
/* The refit thread, at monotonic time now: under the lock drop what is
 * older than the window and, when a refit of K workers on epoch's
 * signatures is due, start it and copy the window out (*rows malloc'd,
 * *n of them). 1 copied, 0 not due, -1 out of memory. */
int state_online_take(rstate *s, double now, int K, uint64_t epoch, float **rows, int *n);
/* Signatures in the window now (after dropping the old ones); *busy
 * (may be NULL) the routes that left theirs out while it was busy. */
int state_online_count(rstate *s, double now, uint64_t *busy);

/* The per-worker counters at one moment, copied out under the lock (a
 * few memcpy of K values), for a view built outside it; -1 out of
 * memory. workers is the state's own (fixed at state_new); rep_* are
 * copied only when use_reported. */
typedef struct state_counts {
    int K, use_reported, policy;
    double tau;
    char *const *workers;
    int64_t *inflight, *rep_load;
    uint64_t *routed, *finished, *expired, *cleared, *ejected, *rep_base, *failed;
    uint64_t *by_rule;           /* [K][RULE_N] */
    uint8_t *rep_known, *rep_stale;
} state_counts;
int state_counts_copy(rstate *s, state_counts *c);
void state_counts_free(state_counts *c);

/* JSON views (state_json.c): what each shows is copied out under the lock
 * (one consistent moment), and its JSON is built after the lock is
 * released, so that routes never wait for jansson: for 4096 decisions the
 * lock is held for the copy, a fraction of a millisecond, not for the
 * tens of milliseconds of the build. NULL out of memory. */
json_t *state_workers_json(rstate *s);                   /* per-worker loads, totals */
json_t *state_decisions_json(rstate *s, int n);          /* newest first */
json_t *state_explain_json(rstate *s, const char *id);   /* NULL: not in the ring */
/* The newest n window records (newest first) with their signatures,
 * copied out under the lock; -1 out of memory. */
typedef struct window_copy {
    uint64_t gen;                /* model generation of the signatures */
    size_t dim;
    int cap, n;
    wrec *rec;                   /* [n]; rec[i].sig points into sigs */
    float *sigs;                 /* [n][dim] */
} window_copy;
int state_window_copy(rstate *s, int n, window_copy *out);
void window_copy_free(window_copy *w);
json_t *state_drift_json(rstate *s, const mref_t *r);
/* One decision record (the ring's, or a copy of it: it reads only s's
 * workers and K, which never change, so needs no lock). */
json_t *drec_json(const rstate *s, const drec *d);

/* The evidence keys shared by a route response and a ring entry: worker,
 * worker_index, rule, tau, similarities (null without a signature),
 * sim_max, band (worker indices considered), loads (in-flight seen),
 * policy, and under the cost policy costs (ms per worker, null for one
 * it could not use; cost NULL: no "costs"). */
int decision_fields(json_t *o, char *const *workers, int K, int worker, int rule, double tau,
                    int has_sim, const double *sim, double sim_max, int n_cand,
                    const int *cand, const int64_t *load, int policy, const double *cost);

#endif
