/* engine.c - the decision room's state: model install, persistence in the
 * state dir, the signature caches, the pool and the providers (engine.h). */
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

#include "engine.h"
#include "err.h"
#include "kv_apply.h"
#include "log.h"
#include "pool_view.h"

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The state dir: created if missing, 0700 (the model is the fleet's
 * routing: no one else's to read); temp files of a save that was killed
 * (model.h5.tmp.PID) are removed, the model itself is untouched. A dir
 * that others may read is left as the operator made it, with a warning. */
static int prepare_state_dir(engine_t *d, char *err, size_t errlen)
{
    const char *dir = d->o->state_dir;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return eldr_errf(err, errlen, "--state-dir %s: cannot create: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return eldr_errf(err, errlen, "--state-dir %s: not a directory", dir);
    if (st.st_mode & 077)
        log_msg("warning: --state-dir %s is open to others (mode %03o); eldrd creates it 0700",
                dir, (unsigned)(st.st_mode & 0777));
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
static const char *model_file(const engine_t *d)
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

static int init_caches(engine_t *d, char *err, size_t errlen)
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
        if (!(c->kv = kv_side_new(d->o->cache_blocks, d->o->block_size)))
            return eldr_errf(err, errlen, "out of memory for the KV events' hash map");
    }
    return 0;
}

static int init_workers(engine_t *d, const model_t *m, const char *path, char *err,
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

static void free_names(char **u, int n)
{
    for (int i = 0; u && i < n; i++)
        free(u[i]);
    free(u);
}

/* --prefill/--decode: split as every eldrd name list is (opts_split_names:
 * non-empty, printable, none twice); a trailing '/' is dropped, so two
 * URLs that differ only by it are one given twice. Whether each is an
 * http://HOST:PORT URL is the upstream client's check (the proxy's). */
static int split_urls(const char *spec, const char *opt, char ***out, int *n, char *err,
                      size_t errlen)
{
    if (opts_split_names(spec, opt, out, n, err, errlen) < 0)
        return -1;
    for (int i = 0; i < *n; i++) {
        char *t = (*out)[i];
        size_t len = strlen(t);
        while (len && t[len - 1] == '/')
            t[--len] = '\0';
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= !strcmp((*out)[j], t);
        if (dup) {
            eldr_errf(err, errlen, "%s: '%s' is given twice", opt, t);
            free_names(*out, *n);
            *out = NULL;
            *n = 0;
            return -1;
        }
    }
    return 0;
}

/* The pool: in proxy mode the --prefill and --decode URLs (K of them, in
 * worker order), else the prefill worker names and the workers. */
static int init_pool(engine_t *d, char *err, size_t errlen)
{
    const eldrd_opts *o = d->o;
    if (!o->proxy) {
        int rc = pool_init(&d->pool, (const char *const *)o->prefill, o->n_prefill,
                           (const char *const *)d->st->workers, d->K, err, errlen);
        if (rc == 0)   /* the gateway picker reports the endpoints' answers here */
            pool_set_policy(&d->pool, o->eject_after, o->eject_time);
        return rc;
    }
    char **pre = NULL, **dec = NULL;
    int n_pre = 0, n_dec = 0, rc = -1;
    if (split_urls(o->prefill_urls, "--prefill", &pre, &n_pre, err, errlen) < 0 ||
        split_urls(o->decode_urls, "--decode", &dec, &n_dec, err, errlen) < 0)
        goto out;
    if (n_dec != d->K) {
        eldr_errf(err, errlen, "--decode lists %d URL%s; the model routes to K = %d decode "
                  "workers (one URL each, in worker order)", n_dec, n_dec == 1 ? "" : "s", d->K);
        goto out;
    }
    if (n_pre > 256) {
        eldr_errf(err, errlen, "--prefill: %d URLs; at most 256", n_pre);
        goto out;
    }
    rc = pool_init(&d->pool, (const char *const *)pre, n_pre, (const char *const *)dec, d->K,
                   err, errlen);
    if (rc == 0)
        pool_set_policy(&d->pool, o->eject_after, o->eject_time);
out:
    free_names(pre, n_pre);
    free_names(dec, n_dec);
    return rc;
}

/* The cost rule's estimate, kept whatever the policy (state.h), with
 * --cost's model or the documented defaults. */
static int init_cost(engine_t *d, char *err, size_t errlen)
{
    const eldrd_opts *o = d->o;
    char why[ELDR_ERRLEN];
    if (!o->cost_path)
        cost_model_default(&d->cost);
    else if (cost_model_load(o->cost_path, &d->cost, why, sizeof why) < 0)
        return eldr_errf(err, errlen, "--cost: %s", why);
    return state_cost_init(d->st, d->L, d->E, &d->cost, o->max_batch,
                           o->policy_cost ? STATE_POLICY_COST : STATE_POLICY_BAND, err, errlen);
}

/* The pool ejected decode worker k: what it held is taken as lost
 * (state_eject_worker says why). */
static void decode_ejected(void *cls, int k)
{
    engine_t *d = cls;
    long n = state_eject_worker(d->st, k);
    if (n > 0)
        log_msg("decode worker %s ejected: its %ld in-flight request%s dropped from the "
                "loads and the cost estimate", d->st->workers[k], n, n == 1 ? "" : "s");
}

int engine_top_k(const engine_t *d, const mref_t *r)
{
    return d->o->top_k > 0 ? d->o->top_k : r->m->k;
}

/* The cost rule needs the top-k of the model it reads counts for. */
static int cost_ready(const engine_t *d, const model_t *m, const char *what, char *err,
                      size_t errlen)
{
    if (d->o->top_k > 0 || m->k > 0)
        return 0;
    return eldr_errf(err, errlen, "%s: the cost rule needs the MoE router's top-k, and the "
                     "model does not give it (a reference fit JSON): start eldrd with "
                     "--top-k N", what);
}

int engine_set_policy(engine_t *d, int policy, char *err, size_t errlen)
{
    if (policy == STATE_POLICY_COST) {
        mref_t *r = mholder_get(&d->model);
        int rc = cost_ready(d, r->m, "policy cost", err, errlen);
        mref_put(r);
        if (rc < 0)
            return -1;
    }
    if (state_set_policy(d->st, policy) < 0)
        return eldr_errf(err, errlen, "policy: the cost rule is not set up");
    return 0;
}

int engine_init(engine_t *d, eldrd_opts *o, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->o = o;
    mholder_init(&d->model);
    metrics_init(&d->met);
    atomic_init(&d->draining, 0);
    pthread_mutex_init(&d->install_lock, NULL);
    pthread_mutex_init(&d->spares.lock, NULL);
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
        (o->policy_cost && cost_ready(d, m, "--policy cost", err, errlen) < 0) ||
        init_workers(d, m, path, err, errlen) < 0 || init_cost(d, err, errlen) < 0 ||
        init_caches(d, err, errlen) < 0) {
        model_free(m);
        return -1;
    }
    if (engine_install(d, m, path, 0, err, errlen) < 0)
        return -1;
    if (o->model_path && o->state_dir && strcmp(path, o->model_path))
        log_msg("serving %s, the state dir's model (the last PUT /v1/model), not -m %s",
                   path, o->model_path);
    if (init_pool(d, err, errlen) < 0)
        return -1;
    d->pool.on_decode_eject = decode_ejected;
    d->pool.on_decode_eject_cls = d;
    return 0;
}

void engine_free(engine_t *d)
{
    pool_free(&d->pool);
    for (int i = 0; i < d->n_caches; i++) {
        sigcache_free(d->caches[i].c);
        kv_side_free(d->caches[i].kv);
        pthread_mutex_destroy(&d->caches[i].lock);
    }
    free(d->caches);
    state_free(d->st);
    mholder_destroy(&d->model);
    pthread_mutex_destroy(&d->install_lock);
    for (int i = 0; i < d->spares.n; i++)
        free(d->spares.buf[i]);
    pthread_mutex_destroy(&d->spares.lock);
}

int engine_add_provider(engine_t *d, const engine_provider *p)
{
    if (d->n_providers >= ENGINE_PROVIDERS_MAX)
        return -1;
    d->providers[d->n_providers++] = *p;
    return 0;
}

int engine_install(engine_t *d, model_t *m, const char *source, int persist, char *err,
                   size_t errlen)
{
    if (mref_check_servable(m, d->K, err, errlen) < 0 ||
        (m->recipe.L != d->L || m->recipe.E != d->E
             ? eldr_errf(err, errlen, "model geometry L=%d E=%d, the daemon serves L=%d E=%d",
                         m->recipe.L, m->recipe.E, d->L, d->E)
             : 0) < 0 ||
        (state_get_policy(d->st) == STATE_POLICY_COST &&
         cost_ready(d, m, "the policy is cost", err, errlen) < 0)) {
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
    if (persist && d->persist_path[0])
        chmod(d->persist_path, 0600);   /* the owner's alone, as its dir */
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

int engine_reload(engine_t *d, char *err, size_t errlen)
{
    model_t *m;
    pthread_mutex_lock(&d->install_lock);
    const char *path = model_file(d);
    int rc = load_file(path, &m, err, errlen);
    pthread_mutex_unlock(&d->install_lock);
    if (rc < 0)
        return -1;
    return engine_install(d, m, path, 0, err, errlen);
}

int engine_prefill_index(const engine_t *d, const char *name)
{
    if (!name[0])
        return 0;
    for (int i = 0; i < d->n_caches; i++)
        if (!strcmp(d->caches[i].name, name))
            return i;
    return -1;
}

static json_t *pool_snapshot_cb(void *cls)
{
    engine_t *d = cls;
    return pool_json(&d->pool, d->st->workers, d->o->proxy);
}

static void pool_metrics_cb(void *cls, strbuf *b)
{
    pool_metrics(&((engine_t *)cls)->pool, b);
}

static json_t *pool_degraded_cb(void *cls)
{
    return pool_degraded(&((engine_t *)cls)->pool);
}

void engine_pool_provider(engine_t *d, engine_provider *out)
{
    *out = (engine_provider){.snapshot_key = "pool", .snapshot = pool_snapshot_cb,
                             .metrics = pool_metrics_cb, .degraded_key = "ejected",
                             .degraded = pool_degraded_cb, .cls = d};
}
