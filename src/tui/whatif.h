/* whatif.h - the dashboard's background jobs: the initial fit and
 * simulations (open), and what-if changes (refit with a new K, or back to
 * the opened model when K returns to its K; re-simulate
 * with a new tau or policy), one at a time on one thread, so the UI never
 * blocks. The UI starts a job, polls its progress, may cancel it (the
 * K-means stops at its next check; the rest at the next stage), and takes
 * the results when it is done.
 *
 * Sharing: while a job runs it reads the dash_t's calibration trace,
 * workload, options and current fit; the UI thread must not replace those
 * until it has collected the job (whatif_collect). An open job writes the
 * whole dash_t: the UI must not read it until then. */
#ifndef ELDR_WHATIF_H
#define ELDR_WHATIF_H

#include <pthread.h>

#include "dash.h"

/* OPEN: dash_open_first (the first look). CHANGE: a new setting on the
 * lowest level's rows with one seed (bounded work, like the first look).
 * REFINE: the shown setting on every row and opts.seeds seeds
 * (dash_refine, or the cache). A cancel stops any of them within a few
 * ms: K-means at its next iteration, a simulation at its next poll. */
typedef enum whatif_kind { WHATIF_OPEN = 0, WHATIF_CHANGE, WHATIF_REFINE } whatif_kind;
/* Every job's "cancelled" rc (KMEANS_CANCELLED and SIM_CANCELLED too). */
#define WHATIF_CANCELLED (-2)

typedef struct whatif {
    pthread_t th;
    int running;                 /* started and not yet collected */
    pthread_mutex_t mu;
    int done;                    /* under mu */
    char stage[64];              /* under mu */
    double frac;                 /* under mu; < 0 unknown */
    volatile int cancel;

    /* the job */
    whatif_kind kind;
    dash_t *d;
    trace_t *t;                  /* open: taken over */
    char sha256[65];             /* open: the caller's digest, copied (the
                                  * job may outlive the caller's buffer) */
    model_t *m;
    int K;
    route_kind policy;
    double tau;

    /* the outcome */
    int rc;                      /* 0, -1 error, WHATIF_CANCELLED */
    char err[ELDR_ERRLEN];
    dash_fit *fit;               /* change: new fit (NULL: K unchanged) */
    dash_sim *cur;
    dash_sim *base[DASH_N_BASE]; /* change: new baselines when K or the rows changed */
    dash_level level;            /* change: the rows cur rests on */
    dash_refined ref;            /* refine: its results */
} whatif_t;

void whatif_init(whatif_t *w);
void whatif_destroy(whatif_t *w);

/* Start dash_open_trace(d, o, t, m) on the thread (t, m taken over). */
int whatif_start_open(whatif_t *w, dash_t *d, const dash_opts *o, trace_t *t, model_t *m);
/* Start a change to (K, policy, tau) against d's current fit; first,
 * on the caller's thread, the first look's rows and workload when d has
 * none yet (dash_first_work; -1 with w->err when that fails). */
int whatif_start_change(whatif_t *w, dash_t *d, int K, route_kind policy, double tau);
/* Start refining d's shown setting (its fit, policy and tau). */
int whatif_start_refine(whatif_t *w, dash_t *d);

/* 1 when the running job has finished (then call whatif_collect). */
int whatif_done(whatif_t *w);
void whatif_progress(whatif_t *w, char *stage, size_t n, double *frac);
void whatif_cancel(whatif_t *w);

/* Join the finished job; for a change, move its results into d (freeing
 * what they replace). Returns the job's rc; err holds its message. */
int whatif_collect(whatif_t *w);

#endif
