/* whatif.c - one background job at a time on a pthread (whatif.h). */
#include <stdio.h>
#include <string.h>

#include "whatif.h"

#include "dash_free.h"
#include "dash_tokens.h"

void whatif_init(whatif_t *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
}

void whatif_destroy(whatif_t *w)
{
    pthread_mutex_destroy(&w->mu);
}

static void on_progress(void *ctx, const char *stage, double frac)
{
    whatif_t *w = ctx;
    pthread_mutex_lock(&w->mu);
    snprintf(w->stage, sizeof w->stage, "%s", stage);
    w->frac = frac;
    pthread_mutex_unlock(&w->mu);
}

static void finish(whatif_t *w, int rc)
{
    if (rc < 0)
        dash_tokens_name_err(w->d, w->err, sizeof w->err);
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->done = 1;
    pthread_mutex_unlock(&w->mu);
}

static int run_change(whatif_t *w)
{
    const dash_t *d = w->d;
    const model_t *m = d->fit->model;
    if (w->K != m->K && d->home && w->K == d->home->model->K) {
        /* back to the opened model's K: that model, not a new k-means
         * (which would give other centroids and lose the file's recipe) */
        w->fit = d->home;
        m = w->fit->model;
    } else if (w->K != m->K) {
        int rc = dash_refit(d, w->K, &w->cancel, on_progress, w, &w->fit, w->err,
                            sizeof w->err);
        if (rc)
            return rc;
        m = w->fit->model;
    }
    if (w->cancel)
        return (snprintf(w->err, sizeof w->err, "cancelled"), WHATIF_CANCELLED);
    /* bounded first: the lowest level's rows, one seed; the refine job
     * follows. The baselines again when K or the rows change. */
    w->level = dash_first_level(d);
    int with_base = w->fit || d->level != w->level;
    int rc = dash_simulate_set(d, m, w->policy, w->tau, w->level, &w->cancel, on_progress, w,
                               &w->cur, with_base ? w->base : NULL, w->err, sizeof w->err);
    return rc == SIM_CANCELLED ? WHATIF_CANCELLED : rc;
}

static void *thread_main(void *arg)
{
    whatif_t *w = arg;
    int rc;
    if (w->kind == WHATIF_OPEN) {
        dash_opts o = w->d->opts;
        rc = dash_open_first(w->d, &o, w->t, w->m, on_progress, w, w->err, sizeof w->err);
        w->t = NULL;
        w->m = NULL;
    } else if (w->kind == WHATIF_CHANGE) {
        rc = run_change(w);
    } else {
        const dash_t *d = w->d;
        rc = dash_refine(d, d->fit->model, w->policy, w->tau, &w->cancel, on_progress, w,
                         &w->ref, w->err, sizeof w->err);
        rc = rc == SIM_CANCELLED ? WHATIF_CANCELLED : rc;
    }
    finish(w, rc);
    return NULL;
}

static int start(whatif_t *w)
{
    w->done = 0;
    w->cancel = 0;
    w->rc = 0;
    w->err[0] = '\0';
    w->frac = -1;
    snprintf(w->stage, sizeof w->stage, "%s", w->kind == WHATIF_OPEN ? "opening"
                                              : w->kind == WHATIF_REFINE ? "refine" : "working");
    w->fit = NULL;
    w->cur = NULL;
    memset(w->base, 0, sizeof w->base);
    memset(&w->ref, 0, sizeof w->ref);
    if (pthread_create(&w->th, NULL, thread_main, w)) {
        snprintf(w->err, sizeof w->err, "cannot start the what-if thread");
        return -1;
    }
    w->running = 1;
    return 0;
}

int whatif_start_open(whatif_t *w, dash_t *d, const dash_opts *o, trace_t *t, model_t *m)
{
    if (w->running)
        return -1;
    w->kind = WHATIF_OPEN;
    w->d = d;
    d->opts = *o;   /* read by the thread as the options to open with */
    snprintf(w->sha256, sizeof w->sha256, "%s", o->sha256 ? o->sha256 : "");
    d->opts.sha256 = w->sha256[0] ? w->sha256 : NULL;
    w->t = t;
    w->m = m;
    return start(w);
}

int whatif_start_change(whatif_t *w, dash_t *d, int K, route_kind policy, double tau)
{
    if (w->running)
        return -1;
    /* the first look's rows and workload, when the open made none */
    if (dash_first_work(d, w->err, sizeof w->err))
        return -1;
    w->kind = WHATIF_CHANGE;
    w->d = d;
    w->K = K;
    w->policy = policy;
    w->tau = tau;
    return start(w);
}

int whatif_start_refine(whatif_t *w, dash_t *d)
{
    if (w->running || !d->cur)
        return -1;
    w->kind = WHATIF_REFINE;
    w->d = d;
    w->K = d->fit->model->K;
    w->policy = d->cur->policy;
    w->tau = d->cur->tau;
    return start(w);
}

int whatif_done(whatif_t *w)
{
    pthread_mutex_lock(&w->mu);
    int done = w->running && w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

void whatif_progress(whatif_t *w, char *stage, size_t n, double *frac)
{
    pthread_mutex_lock(&w->mu);
    snprintf(stage, n, "%s", w->stage);
    *frac = w->frac;
    pthread_mutex_unlock(&w->mu);
}

void whatif_cancel(whatif_t *w)
{
    w->cancel = 1;
}

int whatif_collect(whatif_t *w)
{
    if (!w->running)
        return -1;
    pthread_join(w->th, NULL);
    w->running = 0;
    dash_t *d = w->d;
    if (w->kind == WHATIF_OPEN || w->rc) {
        dash_fit_release(d, w->fit);
        dash_sim_free(w->cur);
        for (int i = 0; i < DASH_N_BASE; i++)
            dash_sim_free(w->base[i]);
        dash_refined_free(&w->ref);
    } else if (w->kind == WHATIF_REFINE) {
        dash_refined_apply(d, &w->ref);
        dash_trail_add(d);
    } else {
        if (w->fit) {
            dash_fit_release(d, d->fit);
            d->fit = w->fit;
        }
        for (int i = 0; w->base[0] && i < DASH_N_BASE; i++) {
            dash_sim_free(d->base[i]);
            d->base[i] = w->base[i];
        }
        dash_sim_free(d->cur);
        d->cur = w->cur;
        memset(&d->ci, 0, sizeof d->ci);   /* never the interval of another setting */
        d->level = w->level;
        d->refined = w->level == DASH_LEVEL_FULL && d->opts.seeds < 2;
        d->from_cache = 0;
        dash_trail_add(d);
    }
    w->fit = NULL;
    w->cur = NULL;
    memset(w->base, 0, sizeof w->base);
    return w->rc;
}
