/* refit.c - eldrd's online refit thread (refit.h). */
#include "log.h"
#include "refit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "online.h"
#include "periodic.h"

typedef struct refitter {
    engine_t *d;
    periodic_t *thread;          /* refit_once on a clock */
    pthread_mutex_t lock;        /* the fields below */
    uint64_t refits, failures, discarded;
    double seconds_total;        /* fit + install, all refits */
    double last_seconds;
    double last_mono;            /* monotonic time of the last install, NaN none */
    double last_unix;
    uint64_t last_gen;           /* generation it made */
    int last_rows, last_iters;
    double last_mean_sim, last_max_move;
    char last_error[ELDR_ERRLEN];
} refitter;

/* The refitted model: the base's recipe, workers and provenance, the new
 * centroids, and the refit's own fit numbers and nearest shares (so the
 * drift statistics compare the live window with what the refit saw). */
static model_t *refitted_model(const model_t *base, const float *cent, const int *sizes,
                               const float *rows, int n, const online_stats *st, char *err,
                               size_t errlen)
{
    model_t *m = model_new(&base->recipe, base->k, base->K, err, errlen);
    if (!m)
        return NULL;
    int64_t sz[ROUTE_MAX_WORKERS];
    for (int k = 0; k < base->K; k++)
        sz[k] = sizes[k];
    if (model_set_workers(m, (const char *const *)base->workers, base->K, err, errlen) < 0 ||
        model_set_sizes(m, sz, err, errlen) < 0) {
        model_free(m);
        return NULL;
    }
    memcpy(m->centroids, cent, (size_t)base->K * sig_dim(&base->recipe) * sizeof *cent);
    /* its own drift baseline: the refit window's nearest centroids under
     * the new centroids, measured as the live window will be */
    if (model_measure_nearest_share(m, rows, n, err, errlen) < 0) {
        model_free(m);
        return NULL;
    }
    m->tau = base->tau;
    m->seed = base->seed;
    m->rho = base->rho;
    m->n_star = base->n_star;
    m->calib_rows = base->calib_rows;
    m->objective = st->objective;
    m->fit_rows = n;
    m->zero_rows = 0;
    m->iters = st->iterations;
    m->balanced = 1;
    memcpy(m->layer_select, base->layer_select, sizeof m->layer_select);
    memcpy(m->calib_sha256, base->calib_sha256, sizeof m->calib_sha256);
    memcpy(m->calib_file, base->calib_file, sizeof m->calib_file);
    memcpy(m->calib_split, base->calib_split, sizeof m->calib_split);
    return m;
}

/* Swap m in as a refit of base, unless another model replaced base
 * meanwhile (then 1: discarded). */
static int install(engine_t *d, const mref_t *base, model_t *m, int rows, uint64_t *gen,
                   char *err, size_t errlen)
{
    char source[160];
    snprintf(source, sizeof source, "refit of generation %llu on %d signatures",
             (unsigned long long)base->gen, rows);
    pthread_mutex_lock(&d->install_lock);
    mref_t *cur = mholder_get(&d->model);
    int stale = cur != base;
    mref_put(cur);
    if (stale) {
        pthread_mutex_unlock(&d->install_lock);
        model_free(m);
        return 1;
    }
    mref_t *r = mref_new(m, source, err, errlen);
    if (!r) {
        pthread_mutex_unlock(&d->install_lock);
        return -1;
    }
    r->refit_of = base->gen;
    r->epoch = base->epoch;
    r->refit_rows = rows;
    mholder_swap(&d->model, r);
    state_model_changed(d->st, r);
    *gen = r->gen;
    pthread_mutex_unlock(&d->install_lock);
    return 0;
}

static void note_failure(refitter *rf, const char *why)
{
    pthread_mutex_lock(&rf->lock);
    rf->failures++;
    snprintf(rf->last_error, sizeof rf->last_error, "%s", why);
    pthread_mutex_unlock(&rf->lock);
    log_msg("refit failed, keeping the current centroids: %s", why);
}

/* One look at the clock: a refit when one is due. */
static void refit_once(refitter *rf)
{
    engine_t *d = rf->d;
    mref_t *base = mholder_get(&d->model);
    float *rows = NULL, *cent = NULL;
    int n, sizes[ROUTE_MAX_WORKERS];
    char err[ELDR_ERRLEN];
    double t0 = mono_now();
    int got = state_online_take(d->st, t0, d->K, base->epoch, &rows, &n);
    if (got <= 0) {
        if (got < 0)
            note_failure(rf, "out of memory copying the window");
        mref_put(base);
        return;
    }
    online_stats st;
    model_t *m = NULL;
    uint64_t gen = 0;
    int rc = -1;
    if (!(cent = malloc((size_t)d->K * base->dim * sizeof *cent)))
        eldr_errf(err, sizeof err, "out of memory for %d centroids", d->K);
    else if (online_refit(rows, n, base->dim, base->m->centroids, d->K, 1, cent, sizes, NULL,
                          &st, err, sizeof err) == 0 &&
             (m = refitted_model(base->m, cent, sizes, rows, n, &st, err, sizeof err)))
        rc = install(d, base, m, n, &gen, err, sizeof err);
    free(rows);
    free(cent);
    mref_put(base);
    if (rc < 0) {
        note_failure(rf, err);
        return;
    }
    double t1 = mono_now();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&rf->lock);
    if (rc == 1) {
        rf->discarded++;
    } else {
        rf->refits++;
        rf->seconds_total += t1 - t0;
        rf->last_seconds = t1 - t0;
        rf->last_mono = t1;
        rf->last_unix = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
        rf->last_gen = gen;
        rf->last_rows = n;
        rf->last_iters = st.iterations;
        rf->last_mean_sim = st.mean_sim;
        rf->last_max_move = st.max_move;
        rf->last_error[0] = '\0';
    }
    pthread_mutex_unlock(&rf->lock);
}

static void refit_tick(void *arg)
{
    refit_once(arg);
}

refitter *refit_start(engine_t *d, char *err, size_t errlen)
{
    refitter *rf = calloc(1, sizeof *rf);
    if (!rf) {
        eldr_errf(err, errlen, "--refit-every: out of memory");
        return NULL;
    }
    rf->d = d;
    rf->last_mono = NAN;
    pthread_mutex_init(&rf->lock, NULL);
    /* the clock is looked at ten times a refit period (at most every
     * 100 ms), so a refit starts within that of falling due */
    double every = d->o->refit_every, period = every / 10 < 0.1 ? every / 10 : 0.1;
    if (!(rf->thread = periodic_start(period, refit_tick, rf))) {
        pthread_mutex_destroy(&rf->lock);
        free(rf);
        eldr_errf(err, errlen, "--refit-every: cannot start a thread");
        return NULL;
    }
    return rf;
}

void refit_stop(refitter *rf)
{
    if (!rf)
        return;
    periodic_stop(rf->thread);
    pthread_mutex_destroy(&rf->lock);
    free(rf);
}

json_t *refit_json(refitter *rf)
{
    const eldrd_opts *o = rf->d->o;
    double now = mono_now();
    uint64_t busy;
    int window = state_online_count(rf->d->st, now, &busy);
    pthread_mutex_lock(&rf->lock);
    int any = !isnan(rf->last_mono);
    json_t *j = json_pack("{s:f, s:f, s:i, s:i, s:I, s:I, s:I, s:f}", "every_s", o->refit_every,
                          "window_s", o->refit_window, "max_rows", o->refit_max_rows,
                          "window_signatures", window, "refits", (json_int_t)rf->refits,
                          "failures", (json_int_t)rf->failures, "discarded",
                          (json_int_t)rf->discarded, "seconds_total", rf->seconds_total);
    json_t *last = any ? json_pack("{s:I, s:f, s:f, s:f, s:i, s:i, s:f, s:f}", "generation",
                                   (json_int_t)rf->last_gen, "at", rf->last_unix, "age_s",
                                   now - rf->last_mono, "seconds", rf->last_seconds, "rows",
                                   rf->last_rows, "iterations", rf->last_iters, "mean_similarity",
                                   rf->last_mean_sim, "max_move", rf->last_max_move)
                       : json_null();
    json_t *error = rf->last_error[0] ? json_string(rf->last_error) : json_null();
    pthread_mutex_unlock(&rf->lock);
    if (j) {
        json_object_set_new(j, "busy_skipped", json_integer((json_int_t)busy));
        json_object_set_new(j, "last", last);
        json_object_set_new(j, "last_error", error);
    } else {
        json_decref(last);
        json_decref(error);
    }
    return j;
}

static void series(strbuf *b, const char *name, const char *type, const char *help, double v)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (isfinite(v))
        sb_printf(b, "%s %.9g\n", name, v);
    else
        sb_printf(b, "%s NaN\n", name);
}

void refit_metrics(refitter *rf, strbuf *b)
{
    double now = mono_now();
    uint64_t busy;
    int window = state_online_count(rf->d->st, now, &busy);
    pthread_mutex_lock(&rf->lock);
    double v[6] = {(double)rf->refits, (double)rf->failures, (double)rf->discarded,
                   rf->seconds_total, isnan(rf->last_mono) ? NAN : now - rf->last_mono,
                   rf->last_seconds};
    pthread_mutex_unlock(&rf->lock);
    series(b, "eldr_refits_total", "counter", "Online refits installed (--refit-every).", v[0]);
    series(b, "eldr_refit_failures_total", "counter", "Online refits that failed.", v[1]);
    series(b, "eldr_refits_discarded_total", "counter",
           "Online refits dropped because another model was installed meanwhile.", v[2]);
    series(b, "eldr_refit_seconds_total", "counter", "Time spent fitting and installing refits.",
           v[3]);
    series(b, "eldr_refit_last_seconds", "gauge", "Duration of the last refit.", v[5]);
    series(b, "eldr_refit_last_age_seconds", "gauge",
           "Seconds since the last refit was installed (NaN: none yet).", v[4]);
    series(b, "eldr_refit_window_signatures", "gauge", "Signatures in the refit window.",
           (double)window);
    series(b, "eldr_refit_window_busy_total", "counter",
           "Routes whose signature stayed out of the window while a refit copied it.",
           (double)busy);
}

static json_t *provider_snapshot(void *cls)
{
    return refit_json(cls);
}

static void provider_metrics(void *cls, strbuf *b)
{
    refit_metrics(cls, b);
}

void refit_provider(struct refitter *r, engine_provider *out)
{
    *out = (engine_provider){.snapshot_key = "refit", .snapshot = provider_snapshot,
                             .metrics = provider_metrics, .cls = r};
}
