/* online.h - the online refit of the camera-ready paper ("eldr" there;
 * eldr-online here): every `every` seconds, refit the K worker centroids
 * on the signatures of the last `window` seconds, then give each worker
 * the new centroid nearest its old one, so worker identities persist.
 * One code path for the simulator (simulated time, sim.c) and eldrd
 * (wall time, a background thread, src/router/refit.c).
 *
 * What one refit does (as the authors' OnlineJSQRouter does; see
 * docs/simulator.md "eldr-online"):
 *   - balanced spherical K-means (kmeans.h; capacity ceil(N/K), the exact
 *     assignment) on the window's signatures, started from the CURRENT
 *     centroids (not k-means++: a refit is a warm start), at most 50
 *     rounds; a cluster left empty keeps its old centroid;
 *   - alignment: the Hungarian method on the K x K cosine distances
 *     1 - old_i . new_j (hungarian.h); worker i gets the new centroid it
 *     was matched to.
 *
 * When a refit is due (online_clock): not before one full window has
 * passed since the first signature; at least `every` seconds after the
 * previous refit started; and only with at least K signatures in the
 * window (fewer cannot make K clusters: no refit, the centroids stay).
 * All-zero signatures (a request with no counts under the layer mask)
 * never enter the window. */
#ifndef ELDR_ONLINE_H
#define ELDR_ONLINE_H

#include <stddef.h>
#include <stdint.h>

#define ONLINE_DEFAULT_EVERY 2.5      /* seconds between refits */
#define ONLINE_DEFAULT_WINDOW 5.0     /* seconds of signatures per refit */
#define ONLINE_DEFAULT_MAX_ROWS 4096  /* window capacity (signatures) */

/* A time-stamped ring of recent signatures. Time is the caller's
 * (simulated seconds, or a monotonic clock): it must not go backwards. */
typedef struct online_window {
    size_t dim;
    int max_rows;                /* the ring never holds more */
    int cap, n, head;            /* allocated slots, held, oldest slot */
    double *t;                   /* [cap] */
    float *rows;                 /* [cap][dim] */
    int64_t pushed;              /* signatures taken in */
    int64_t overflowed;          /* dropped because the ring was full */
} online_window;

/* An empty window of dim-float signatures holding at most max_rows
 * (>= 1). Slots grow on demand. -1 with err on bad input. */
int online_window_init(online_window *w, size_t dim, int max_rows, char *err, size_t errlen);
void online_window_free(online_window *w);
/* Forget every signature (a new recipe: the old ones do not compare). */
void online_window_clear(online_window *w);

/* Take signature sig (dim floats, copied) seen at time t. An all-zero
 * signature is not taken (returns 0); else 1 (the oldest is dropped
 * when the ring is full), or -1 out of memory (nothing changes). */
int online_window_push(online_window *w, double t, const float *sig);

/* Drop the signatures older than now - span (strictly: one exactly span
 * old stays). */
void online_window_evict(online_window *w, double now, double span);

/* The signatures held, oldest first, into out (n x dim, malloc'd;
 * *out = NULL when n = 0). Returns n, or -1 out of memory. */
int online_window_copy(const online_window *w, float **out);

/* When refits are due. */
typedef struct online_clock {
    double every, window;        /* seconds, > 0 */
    double first;                /* time of the first signature, NaN: none yet */
    double last;                 /* start of the last refit, NaN: none yet */
} online_clock;

/* -1 with err when every or window is not finite and > 0. */
int online_clock_init(online_clock *c, double every, double window, char *err, size_t errlen);
/* A signature entered the window at t. */
void online_clock_seen(online_clock *c, double t);
/* 1 when a refit should start at now over n_rows signatures, K workers. */
int online_clock_due(const online_clock *c, double now, int n_rows, int K);
/* A refit started at now. */
void online_clock_started(online_clock *c, double now);
/* Start over (a new recipe): no first signature, no refit yet. */
void online_clock_reset(online_clock *c);

/* What one refit found. */
typedef struct online_stats {
    int rows;                    /* signatures fitted */
    int iterations;              /* K-means rounds */
    int converged;
    double objective;            /* sum (1 - x . mu) of the fit */
    double mean_sim;             /* 1 - objective / rows */
    double align_cost;           /* summed 1 - old_i . new_perm(i) */
    double max_move;             /* largest 1 - old_i . new_i after alignment */
} online_stats;

/* One refit: K-means of the n rows (unit signatures of dim floats, n >=
 * K >= 1) warm-started from cur ([K][dim] unit rows), aligned to cur.
 * out ([K][dim]) receives the aligned centroids, sizes ([K], may be NULL)
 * the number of rows each worker's new centroid holds, perm ([K], may be
 * NULL) which fitted cluster each worker got. threads: for the
 * similarities (0 = default; the result does not depend on it). Returns
 * 0, or -1 with err (too few rows, a bad row, out of memory). */
int online_refit(const float *rows, int n, size_t dim, const float *cur, int K, int threads,
                 float *out, int *sizes, int *perm, online_stats *st, char *err,
                 size_t errlen);

/* Alignment alone: perm[i] = the row of fitted that worker i (row i of
 * cur) gets, the assignment minimising sum_i (1 - cur_i . fitted_perm(i)).
 * *cost (may be NULL) gets that sum. 0, or -1 with err. */
int online_align(const float *cur, const float *fitted, int K, size_t dim, int *perm,
                 double *cost, char *err, size_t errlen);

#endif
