/* model_align.h - a new model lined up with the one a router serves: what
 * `eldr push` and Lua's Router:push do before PUT /v1/model.
 *
 * A model fitted offline numbers its clusters in its own order; the
 * router's worker i has been serving the traffic nearest its centroid i.
 * Pushed as it is, worker 2 might get the cluster that worker 0 had, and
 * every worker's traffic would move at once. So the new centroids are
 * matched to the live workers exactly as eldrd's online refit matches
 * its refitted ones (online.h, online_align: the Hungarian method on the
 * K x K cosine distances 1 - live_i . new_j), and worker i gets the new
 * centroid it was matched to; the model goes out under the live workers'
 * names in the live order.
 *
 * When the recipe changes (another layer mask), the centroids live in
 * different spaces: they are compared over the layers both masks hold
 * (each row renormalised there), and with no layer in common the file's
 * own order is kept (the plan says so). What changed beside the
 * centroids (variant, layers, idf, top-k) is named in the plan. */
#ifndef ELDR_MODEL_ALIGN_H
#define ELDR_MODEL_ALIGN_H

#include <stddef.h>

#include "model.h"
#include "route.h"

#define MODEL_ALIGN_MISMATCH (-2)   /* L, E or K differ: nothing to align */

typedef struct model_align {
    int K;
    int perm[ROUTE_MAX_WORKERS];      /* live worker i gets row perm[i] of the new model */
    double cos[ROUTE_MAX_WORKERS];    /* cos(live_i, new_perm(i)) over the compared layers */
    double cos_as_given[ROUTE_MAX_WORKERS]; /* cos(live_i, new_i): the file's own order */
    double cost;                      /* sum_i (1 - cos[i]), what the matching minimised */
    int shared_layers;                /* layers compared (in both masks) */
    int moved;                        /* workers whose row is not their own index */
    int recipe_changed;               /* 1 when what_changed is not "" */
    char what_changed[512];           /* "variant count -> count_idf; layers ..." or "" */
} model_align;

/* The matching of cand's centroids to live's workers. 0; or
 * MODEL_ALIGN_MISMATCH with err naming the geometry (L, E, K) of both;
 * or -1 with err (K above ROUTE_MAX_WORKERS, out of memory). */
int model_align_plan(const model_t *live, const model_t *cand, model_align *a, char *err,
                     size_t errlen);

/* cand with its centroids (and sizes) in the plan's order and live's
 * worker names: the model to send. NULL with err out of memory. */
model_t *model_align_apply(const model_t *live, const model_t *cand, const model_align *a,
                           char *err, size_t errlen);

#endif
