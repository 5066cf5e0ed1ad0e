/* refit.h - eldrd's online refit (--refit-every S --refit-window W; the
 * camera-ready paper's online policy, src/core/online.h): a background
 * thread that, every S seconds, refits the K centroids on the signatures
 * routed in the last W seconds (warm-started balanced K-means, then
 * Hungarian alignment so each worker keeps the traffic most like its
 * own) and installs the result as a new model generation.
 *
 * Off the routing path: the window has its own lock, which a route only
 * tries (a route that finds it taken leaves its signature out rather
 * than wait); the refit takes it to copy the window out
 * (state_online_take). The routing lock is held only at install, for the
 * pointer swap and the window bookkeeping every swap does
 * (state_model_changed). The fit
 * runs on one thread, so it takes one CPU from the HTTP threads at most.
 *
 * With a hot swap (PUT /v1/model, SIGHUP): the operator's model wins. A
 * refit that was computing when the swap landed is discarded (its base
 * is no longer current); the window and the clock start over, so the new
 * model serves a full window before its first refit. Refitted models
 * are not written to --state-dir (docs/eldrd.md says why). */
#ifndef ELDR_ROUTER_REFIT_H
#define ELDR_ROUTER_REFIT_H

#include <jansson.h>

#include "engine.h"

/* Start the thread (d->o->refit_every > 0; the state's window is on).
 * NULL with err. */
struct refitter *refit_start(engine_t *d, char *err, size_t errlen);
/* Stop and join it (a refit in progress finishes first); NULL is fine. */
void refit_stop(struct refitter *r);

/* GET /v1/snapshot's "refit" object. */
json_t *refit_json(struct refitter *r);
/* The eldr_refit* series of GET /metrics. */
void refit_metrics(struct refitter *r, strbuf *b);

/* The refit as a provider of the daemon's views (engine.h): "refit" in
 * the snapshot, its series in /metrics. */
void refit_provider(struct refitter *r, engine_provider *out);

#endif
