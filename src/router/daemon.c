/* daemon.c - the daemon's shared context: model install, persistence in
 * the state dir, and the signature caches (daemon.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "err.h"
#include "load_vllm.h"
#include "proxy.h"
#include "refit.h"

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The state dir: created if missing; temp files of a save that was killed
 * (model.h5.tmp.PID) are removed, the model itself is untouched. */
static int prepare_state_dir(eldrd_t *d, char *err, size_t errlen)
{
    const char *dir = d->o->state_dir;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return eldr_errf(err, errlen, "--state-dir %s: cannot create: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return eldr_errf(err, errlen, "--state-dir %s: not a directory", dir);
    if ((size_t)snprintf(d->persist_path, sizeof d->persist_path, "%s/model.h5", dir) >=
        sizeof d->persist_path)
        return eldr_errf(err, errlen, "--state-dir %s: path too long", dir);
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        if (strncmp(e->d_name, "model.h5.tmp.", 13))
            continue;
        char p[PATH_MAX];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p)
            unlink(p);
    }
    if (dp)
        closedir(dp);
    return 0;
}

/* The file a start or a SIGHUP reads. */
static const char *model_file(const eldrd_t *d)
{
    if (d->persist_path[0] && file_exists(d->persist_path))
        return d->persist_path;
    return d->o->model_path;
}

static int load_file(const char *path, model_t **m, char *err, size_t errlen)
{
    if (!path)
        return eldr_errf(err, errlen, "no model: -m not given and the state dir has none");
    return model_load(path, m, err, errlen);
}

static int init_caches(eldrd_t *d, char *err, size_t errlen)
{
    d->caches = calloc((size_t)d->o->n_prefill, sizeof *d->caches);
    if (!d->caches)
        return eldr_errf(err, errlen, "out of memory for the signature caches");
    for (int i = 0; i < d->o->n_prefill; i++) {
        pcache *c = &d->caches[i];
        c->name = d->o->prefill[i];
        pthread_mutex_init(&c->lock, NULL);
        d->n_caches = i + 1;
        c->c = sigcache_new(d->L, d->E, d->o->cache_blocks, err, errlen);
        if (!c->c)
            return -1;
    }
    return 0;
}

static int init_workers(eldrd_t *d, const model_t *m, const char *path, char *err,
                        size_t errlen)
{
    d->K = m->K;
    int from_state = d->o->state_dir && strcmp(path, d->o->model_path ? d->o->model_path : "");
    if (d->o->workers && d->o->n_workers != m->K)
        return eldr_errf(err, errlen, "--workers: %d names, but the model %s%s has K = %d%s",
                         d->o->n_workers, path, from_state ? " (the state dir's: the last PUT "
                         "/v1/model, which wins over -m)" : "", m->K,
                         from_state ? "; remove it to start from -m" : "");
    const char *const *names =
        (const char *const *)(d->o->workers ? d->o->workers : m->workers);
    for (int k = 0; k < m->K; k++)
        if (!opts_name_ok(names[k]))
            return eldr_errf(err, errlen, "%s: worker name %d is not printable UTF-8 (it would "
                             "break /metrics and the JSON answers)",
                             d->o->workers ? "--workers" : path, k + 1);
    double tau = isfinite(d->o->tau) ? d->o->tau : m->tau;
    d->st = state_new(m->K, names, tau, d->o->decisions, d->o->window, err, errlen);
    if (!d->st)
        return -1;
    return d->o->refit_every > 0 ? state_online_enable(d->st, d->o->refit_every,
                                                       d->o->refit_window, d->o->refit_max_rows,
                                                       err, errlen)
                                 : 0;
}

/* --load-from vllm: the workers' /metrics URLs, a first poll, the thread. */
static int start_vllm(eldrd_t *d, char *err, size_t errlen)
{
    char **urls;
    if (vllm_resolve_urls(d->o->worker_urls, d->st->workers, d->K, &urls, err, errlen) < 0)
        return -1;
    d->vllm = vllm_start(d->st, urls, d->o->poll_ms, err, errlen);
    return d->vllm ? 0 : -1;
}

void daemon_log(const eldrd_t *d, const char *fmt, ...)
{
    if (d->o->quiet)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "eldrd: %s\n", line);   /* one write: lines do not interleave */
}

int daemon_check_security(eldrd_t *d, char *err, size_t errlen)
{
    const eldrd_opts *o = d->o;
    if (o->admin_token_file &&
        auth_read_token(o->admin_token_file, "--admin-token-file", d->auth.admin,
                        sizeof d->auth.admin, err, errlen) < 0)
        return -1;
    if (o->kv_token_file &&
        auth_read_token(o->kv_token_file, "--kv-token-file", d->auth.kv, sizeof d->auth.kv, err,
                        errlen) < 0)
        return -1;
    int loop = auth_host_is_loopback(o->host, err, errlen);
    if (loop < 0)
        return -1;
    if (!loop && !d->auth.admin[0] && !o->insecure)
        return eldr_errf(err, errlen, "--listen %s:%d is not a loopback address: anyone who "
                         "reaches it could replace the model; give --admin-token-file FILE, "
                         "or --insecure to serve it open", o->host, o->port);
    return 0;
}

void daemon_wait_for(pthread_cond_t *c, pthread_mutex_t *m, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = (double)until.tv_sec + until.tv_nsec * 1e-9 + seconds;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    pthread_cond_timedwait(c, m, &until);
}

/* --inflight-ttl: every quarter of the ttl (at most a second apart),
 * forget the requests older than the ttl. */
static void *reaper_main(void *arg)
{
    eldrd_t *d = arg;
    double ttl = d->o->inflight_ttl, period = ttl / 4 < 1 ? ttl / 4 : 1;
    pthread_mutex_lock(&d->reaper_lock);
    while (!d->reaper_stop) {
        daemon_wait_for(&d->reaper_wake, &d->reaper_lock, period);
        if (d->reaper_stop)
            break;
        pthread_mutex_unlock(&d->reaper_lock);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        long n = state_expire(d->st, (double)now.tv_sec + now.tv_nsec * 1e-9 - ttl);
        if (n > 0)
            daemon_log(d, "--inflight-ttl: %ld request%s in flight for more than %g s "
                       "forgotten (no finish came)", n, n == 1 ? "" : "s", ttl);
        pthread_mutex_lock(&d->reaper_lock);
    }
    pthread_mutex_unlock(&d->reaper_lock);
    return NULL;
}

static int start_reaper(eldrd_t *d, char *err, size_t errlen)
{
    pthread_mutex_init(&d->reaper_lock, NULL);
    pthread_cond_init(&d->reaper_wake, NULL);
    if (pthread_create(&d->reaper, NULL, reaper_main, d) != 0)
        return eldr_errf(err, errlen, "--inflight-ttl: cannot start a thread");
    d->reaper_on = 1;
    return 0;
}

static void stop_reaper(eldrd_t *d)
{
    if (!d->reaper_on)
        return;
    pthread_mutex_lock(&d->reaper_lock);
    d->reaper_stop = 1;
    pthread_cond_signal(&d->reaper_wake);
    pthread_mutex_unlock(&d->reaper_lock);
    pthread_join(d->reaper, NULL);
    pthread_cond_destroy(&d->reaper_wake);
    pthread_mutex_destroy(&d->reaper_lock);
    d->reaper_on = 0;
}

int daemon_init(eldrd_t *d, eldrd_opts *o, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->o = o;
    atomic_init(&d->draining, 0);
    atomic_init(&d->active, 0);
    mholder_init(&d->model);
    metrics_init(&d->met);
    pthread_mutex_init(&d->install_lock, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    d->started = (double)ts.tv_sec;
    if (o->state_dir && prepare_state_dir(d, err, errlen) < 0)
        return -1;
    const char *path = model_file(d);
    model_t *m;
    if (load_file(path, &m, err, errlen) < 0)
        return -1;
    d->L = m->recipe.L;
    d->E = m->recipe.E;
    if (mref_check_servable(m, m->K, err, errlen) < 0 ||
        init_workers(d, m, path, err, errlen) < 0 ||
        init_caches(d, err, errlen) < 0) {
        model_free(m);
        return -1;
    }
    if (daemon_install(d, m, path, 0, err, errlen) < 0)
        return -1;
    if (o->model_path && o->state_dir && strcmp(path, o->model_path))
        daemon_log(d, "serving %s, the state dir's model (the last PUT /v1/model), not -m %s",
                   path, o->model_path);
    if (o->inflight_ttl > 0 && start_reaper(d, err, errlen) < 0)
        return -1;
    if (o->refit_every > 0 && !(d->refit = refit_start(d, err, errlen)))
        return -1;
    if (o->load_vllm && start_vllm(d, err, errlen) < 0)
        return -1;
    if (o->proxy && !(d->proxy = proxy_start(d, err, errlen)))
        return -1;
    return 0;
}

void daemon_free(eldrd_t *d)
{
    proxy_free(d->proxy);
    d->proxy = NULL;
    refit_stop(d->refit);
    d->refit = NULL;
    stop_reaper(d);
    vllm_stop(d->vllm);
    d->vllm = NULL;
    for (int i = 0; i < d->n_caches; i++) {
        sigcache_free(d->caches[i].c);
        pthread_mutex_destroy(&d->caches[i].lock);
    }
    free(d->caches);
    state_free(d->st);
    mholder_destroy(&d->model);
    pthread_mutex_destroy(&d->install_lock);
}

int daemon_install(eldrd_t *d, model_t *m, const char *source, int persist, char *err,
                   size_t errlen)
{
    if (mref_check_servable(m, d->K, err, errlen) < 0 ||
        (m->recipe.L != d->L || m->recipe.E != d->E
             ? eldr_errf(err, errlen, "model geometry L=%d E=%d, the daemon serves L=%d E=%d",
                         m->recipe.L, m->recipe.E, d->L, d->E)
             : 0) < 0) {
        model_free(m);
        return -1;
    }
    pthread_mutex_lock(&d->install_lock);
    if (persist && d->persist_path[0] && model_save(m, d->persist_path, err, errlen) < 0) {
        atomic_fetch_add(&d->met.persist_failures, 1);
        pthread_mutex_unlock(&d->install_lock);
        model_free(m);
        return -1;
    }
    mref_t *r = mref_new(m, source, err, errlen);
    if (!r) {
        pthread_mutex_unlock(&d->install_lock);
        return -1;
    }
    mholder_swap(&d->model, r);
    state_model_changed(d->st, r);
    if (r->gen > 1)
        atomic_fetch_add(&d->met.model_swaps, 1);
    pthread_mutex_unlock(&d->install_lock);
    return 0;
}

int daemon_reload(eldrd_t *d, char *err, size_t errlen)
{
    model_t *m;
    pthread_mutex_lock(&d->install_lock);
    const char *path = model_file(d);
    int rc = load_file(path, &m, err, errlen);
    pthread_mutex_unlock(&d->install_lock);
    if (rc < 0)
        return -1;
    return daemon_install(d, m, path, 0, err, errlen);
}

int daemon_prefill_index(const eldrd_t *d, const char *name)
{
    if (!name[0])
        return 0;
    for (int i = 0; i < d->n_caches; i++)
        if (!strcmp(d->caches[i].name, name))
            return i;
    return -1;
}
