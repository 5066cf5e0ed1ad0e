/* modelref.h - the daemon's current model behind a refcounted pointer.
 *
 * A request takes a reference (mholder_get), reads the model as long as
 * it likes, and drops it (mref_put); a swap replaces the holder's pointer
 * under a short lock and drops the holder's own reference. The old model
 * is freed by whoever drops the last reference, so a reader never sees
 * half a model and a swap never waits for readers. */
#ifndef ELDR_ROUTER_MODELREF_H
#define ELDR_ROUTER_MODELREF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "model.h"

typedef struct mref {
    model_t *m;                  /* owned */
    size_t dim;                  /* signature length |S|*E */
    uint64_t gen;                /* 1 for the first model, +1 per swap */
    uint64_t refit_of;           /* an online refit (refit.h) of that generation;
                                  * 0 for a loaded model (-m, PUT, SIGHUP) */
    uint64_t epoch;              /* the loaded model's generation this descends
                                  * from: one recipe, so its signatures compare */
    int refit_rows;              /* signatures the refit saw; 0 loaded */
    double *calib_share;         /* [K] the drift baseline: the model's
                                  * nearest_share, else (a model that
                                  * predates it) sizes / total; NULL when
                                  * neither is known */
    int calib_from_sizes;        /* 1: calib_share is the sizes fallback */
    double calib_sim;            /* mean similarity of the fit's points to
                                  * their centroid, NaN when unknown */
    char source[160];            /* where it came from: a path, "PUT /v1/model" */
    double loaded_at;            /* unix seconds */
    atomic_int refs;
} mref_t;

/* Wrap m (ownership passes, also on failure); one reference held. */
mref_t *mref_new(model_t *m, const char *source, char *err, size_t errlen);
void mref_put(mref_t *r);

typedef struct mholder {
    pthread_mutex_t lock;
    mref_t *cur;
    uint64_t next_gen;
} mholder;

void mholder_init(mholder *h);
/* Drops the current model. */
void mholder_destroy(mholder *h);
/* A new reference to the current model (never NULL once one is set). */
mref_t *mholder_get(mholder *h);
/* Install r (the holder takes over the caller's reference); sets r->gen,
 * and r->epoch = r->gen for a loaded model (refit_of 0). */
void mholder_swap(mholder *h, mref_t *r);

/* Whether m can replace the daemon's model: K workers (at most 256). Any
 * variant: count models route on the body's counts, gate models
 * (gate_prob, gate_logit) on its gates (docs/http-api.md). */
int mref_check_servable(const model_t *m, int K, char *err, size_t errlen);

#endif
