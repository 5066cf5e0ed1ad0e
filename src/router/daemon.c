/* daemon.c - the daemon's shared context: model install, persistence in
 * the state dir, and the signature caches (daemon.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "err.h"
#include "load_vllm.h"

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

static int init_workers(eldrd_t *d, const model_t *m, char *err, size_t errlen)
{
    d->K = m->K;
    if (d->o->workers && d->o->n_workers != m->K)
        return eldr_errf(err, errlen, "--workers: %d names, but the model has K = %d",
                         d->o->n_workers, m->K);
    const char *const *names =
        (const char *const *)(d->o->workers ? d->o->workers : m->workers);
    double tau = isfinite(d->o->tau) ? d->o->tau : m->tau;
    d->st = state_new(m->K, names, tau, d->o->decisions, d->o->window, err, errlen);
    return d->st ? 0 : -1;
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

int daemon_init(eldrd_t *d, eldrd_opts *o, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->o = o;
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
    if (mref_check_servable(m, m->K, err, errlen) < 0 || init_workers(d, m, err, errlen) < 0 ||
        init_caches(d, err, errlen) < 0) {
        model_free(m);
        return -1;
    }
    if (daemon_install(d, m, path, 0, err, errlen) < 0)
        return -1;
    return o->load_vllm ? start_vllm(d, err, errlen) : 0;
}

void daemon_free(eldrd_t *d)
{
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
