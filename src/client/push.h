/* push.h - a new model to a running eldrd, lined up with its workers:
 * the one piece behind `eldr push` (src/cli/cmd_push.c) and Lua's
 * Router:push (src/lua/l_attach.c).
 *
 * push_prepare reads what the router serves (GET /v1/snapshot?centroids=1:
 * its model, worker names and cluster sizes) and aligns the new model to
 * it with model_align (src/core/model_align.h: the Hungarian matching of
 * eldrd's online refit); the caller shows the plan, asks, and then
 * push_send does PUT /v1/model with the aligned model's JSON (eldr's
 * centroid JSON, the body eldrd's PUT reads). Both speak to the listener
 * that serves the admin endpoints: with eldrd --admin-listen, that one.
 * The admin token, when eldrd has one, goes with the client
 * (client_use_token_file). No printing here. */
#ifndef ELDR_PUSH_H
#define ELDR_PUSH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "model.h"
#include "model_align.h"

#define PUSH_MISMATCH MODEL_ALIGN_MISMATCH   /* L, E or K differ from the router's */

typedef struct push_plan {
    model_t *live;               /* what the router serves now */
    model_t *aligned;            /* the new model in the live order, live names: sent */
    model_align align;           /* which new cluster each live worker gets, cosines */
    int64_t live_generation;
    char live_origin[16];        /* "loaded" or "refit" ("" unknown) */
    double live_tau;             /* the router's tau now (NaN unknown) */
} push_plan;

/* Read the live model at c and align cand (not changed) to it. 0;
 * PUSH_MISMATCH with err (the geometry of both); or -1 with err (the
 * daemon's answer or the transport failure: *status, may be NULL, as
 * client_call gives it). */
int push_prepare(client_t *c, const model_t *cand, push_plan *p, long *status, char *err,
                 size_t errlen);

/* PUT /v1/model with p->aligned; *out (may be NULL) gets eldrd's answer
 * {"model_generation", "K", "dim", "persisted"}. -1 with err and
 * *status (the HTTP status, 0 no answer). */
int push_send(client_t *c, const push_plan *p, json_t **out, long *status, char *err,
              size_t errlen);

void push_plan_free(push_plan *p);

#endif
