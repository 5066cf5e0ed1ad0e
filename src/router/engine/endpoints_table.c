/* endpoints_table.c - the current endpoints and their mapping, reloaded
 * when the file changes (endpoints_file.h). A view (set + mapping +
 * lookup) is built whole off the lock and swapped in under it; readers
 * copy out under the same lock. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "endpoints_file.h"

typedef struct ep_view {
    endpoint_set set;
    int K;
    int by_name;
    int *ep_of_worker;               /* K */
    int64_t *keys;                   /* K hostport keys, ascending */
    int *worker_of_key;              /* K */
    int nP;                          /* prefill workers mapped (0: none, or no file entry) */
    int *ep_of_prefill;              /* nP */
} ep_view;

/* What stat says of the path; err: the errno of a failed stat. */
typedef struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    int err;
} file_sig;

struct endpoints_table {
    char *path;
    pthread_mutex_t lock;            /* view, stats */
    pthread_mutex_t wlock;           /* one writer: poll, remap */
    ep_view *view;
    ep_stats st;
    /* the writer's (under wlock) */
    char **workers;                  /* the workers to map onto, NULL: none named */
    int K;
    char **pworkers;                 /* the prefill workers (endpoints_table_set_prefill) */
    int nP;                          /* their number; -1 not set: prefill entries unmapped */
    char *text;                      /* the current set's file content */
    size_t tlen;
    file_sig cur, bad;               /* the file of the current set; the last refused */
    int have_bad;
};

static void view_free(ep_view *v)
{
    if (!v)
        return;
    endpoints_free(&v->set);
    free(v->ep_of_worker);
    free(v->keys);
    free(v->worker_of_key);
    free(v->ep_of_prefill);
    free(v);
}

static int key_cmp(const void *a, const void *b, void *ctx)
{
    const int64_t *keys = ctx;
    int64_t x = keys[*(const int *)a], y = keys[*(const int *)b];
    return (x > y) - (x < y);
}

/* The sorted hostport -> worker lookup of a mapped view. */
static int view_index(ep_view *v)
{
    int64_t *raw = malloc((size_t)v->K * sizeof *raw);
    int *order = malloc((size_t)v->K * sizeof *order);
    v->keys = malloc((size_t)v->K * sizeof *v->keys);
    v->worker_of_key = malloc((size_t)v->K * sizeof *v->worker_of_key);
    int ok = raw && order && v->keys && v->worker_of_key;
    for (int k = 0; ok && k < v->K; k++) {
        const char *hp = v->set.v[v->ep_of_worker[k]].hostport;
        raw[k] = endpoints_hostport_key(hp, strlen(hp));
        order[k] = k;
    }
    if (ok) {
        qsort_r(order, (size_t)v->K, sizeof *order, key_cmp, raw);
        for (int j = 0; j < v->K; j++) {
            v->keys[j] = raw[order[j]];
            v->worker_of_key[j] = order[j];
        }
    }
    free(raw);
    free(order);
    return ok ? 0 : -1;
}

static int prefill_entries(const endpoint_set *s)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += (s->v[i].roles & EP_ROLE_PREFILL) != 0;
    return n;
}

/* A view of set (taken over: emptied) mapped onto workers[K]; NULL and
 * err when it does not map (set is then freed). */
static ep_view *view_new(endpoint_set *set, char *const *workers, int K, char *const *pworkers,
                         int nP, char *err, size_t errlen)
{
    ep_view *v = calloc(1, sizeof *v);
    if (!v) {
        endpoints_free(set);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    v->set = *set;
    memset(set, 0, sizeof *set);
    v->K = K;
    v->ep_of_worker = malloc((size_t)(K > 0 ? K : 1) * sizeof *v->ep_of_worker);
    v->by_name = -1;
    if (!v->ep_of_worker)
        snprintf(err, errlen, "out of memory");
    else
        v->by_name = endpoints_map(&v->set, workers, K, v->ep_of_worker, err, errlen);
    if (v->by_name >= 0 && view_index(v) < 0) {
        snprintf(err, errlen, "out of memory");
        v->by_name = -1;
    }
    if (v->by_name >= 0 && nP > 0 && prefill_entries(&v->set) > 0) {
        /* the prefill entries map onto the prefill workers as the decode
         * ones onto the model's; a file without any leaves nP 0 */
        char note[256];
        v->ep_of_prefill = malloc((size_t)nP * sizeof *v->ep_of_prefill);
        if (!v->ep_of_prefill) {
            snprintf(err, errlen, "out of memory");
            v->by_name = -1;
        } else if (endpoints_map_role(&v->set, EP_ROLE_PREFILL, pworkers, nP, v->ep_of_prefill,
                                      note, sizeof note) < 0) {
            snprintf(err, errlen, "%s", note);
            v->by_name = -1;
        } else {
            v->nP = nP;
        }
    }
    if (v->by_name < 0) {
        view_free(v);
        return NULL;
    }
    return v;
}

static void free_workers(char **w, int K)
{
    for (int k = 0; w && k < K; k++)
        free(w[k]);
    free(w);
}

/* A copy of names[n] (NULL stays NULL) in *out; -1 out of memory. */
static int copy_names(char *const *names, int n, char ***out)
{
    char **w = NULL;
    if (names) {
        w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
        if (!w)
            return -1;
        for (int k = 0; k < n; k++)
            if (!(w[k] = strdup(names[k]))) {
                free_workers(w, k);
                return -1;
            }
    }
    *out = w;
    return 0;
}

/* Copy workers[K] (NULL stays NULL) as the ones to map onto; -1 out of
 * memory. */
static int set_workers(endpoints_table *t, char *const *workers, int K)
{
    char **w;
    if (copy_names(workers, K, &w) < 0)
        return -1;
    free_workers(t->workers, t->K);
    t->workers = w;
    t->K = K;
    return 0;
}

static void swap_in(endpoints_table *t, ep_view *v, int reload, double now)
{
    pthread_mutex_lock(&t->lock);
    ep_view *old = t->view;
    t->view = v;
    t->st.generation++;
    t->st.reloads += (uint64_t)reload;
    t->st.n = v->set.n;
    t->st.K = v->K;
    t->st.by_name = v->by_name;
    t->st.loaded_at = now;
    pthread_mutex_unlock(&t->lock);
    view_free(old);
}

static void sig_of(const char *path, file_sig *s)
{
    struct stat st;
    memset(s, 0, sizeof *s);
    if (stat(path, &st) < 0) {   /* follows symlinks: a ConfigMap's ..data swap */
        s->err = errno;
        return;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->size = st.st_size;
    s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

static int sig_eq(const file_sig *a, const file_sig *b)
{
    return a->err == b->err && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns;
}

/* Parse text onto the table's workers and swap it in: 0, or -1 and err
 * (text is then the caller's still). On success the table keeps text. */
static int take(endpoints_table *t, char *text, size_t len, int reload, double now, char *err,
                size_t errlen)
{
    endpoint_set set;
    if (endpoints_parse(text, len, t->path, &set, err, errlen) < 0)
        return -1;
    ep_view *v = view_new(&set, t->workers, t->K, t->pworkers, t->nP, err, errlen);
    if (!v)
        return -1;
    swap_in(t, v, reload, now);
    if (text != t->text) {
        free(t->text);
        t->text = text;
        t->tlen = len;
    }
    return 0;
}

endpoints_table *endpoints_table_open(const char *path, char *const *workers, int K, double now,
                                      char *err, size_t errlen)
{
    endpoints_table *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->wlock, NULL);
    t->nP = -1;
    if (!(t->path = strdup(path)) || set_workers(t, workers, K) < 0) {
        snprintf(err, errlen, "out of memory");
        endpoints_table_free(t);
        return NULL;
    }
    sig_of(path, &t->cur);
    char *text;
    size_t len;
    if (endpoints_read(path, &text, &len, err, errlen) < 0 ||
        take(t, text, len, 0, now, err, errlen) < 0) {
        if (text != t->text)
            free(text);
        endpoints_table_free(t);
        return NULL;
    }
    return t;
}

void endpoints_table_free(endpoints_table *t)
{
    if (!t)
        return;
    view_free(t->view);
    free_workers(t->workers, t->K);
    free_workers(t->pworkers, t->nP);
    free(t->text);
    free(t->path);
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->wlock);
    free(t);
}

/* A reload refused: remembered, so that the same file is not tried again. */
static int refuse(endpoints_table *t, const file_sig *s)
{
    t->bad = *s;
    t->have_bad = 1;
    pthread_mutex_lock(&t->lock);
    t->st.failed++;
    pthread_mutex_unlock(&t->lock);
    return -1;
}

static int poll_locked(endpoints_table *t, double now, char *err, size_t errlen)
{
    file_sig s;
    sig_of(t->path, &s);
    if (sig_eq(&s, &t->cur) || (t->have_bad && sig_eq(&s, &t->bad)))
        return 0;
    if (s.err) {
        snprintf(err, errlen, "%s: cannot read: %s (the previous endpoints stay)", t->path,
                 strerror(s.err));
        return refuse(t, &s);
    }
    char *text;
    size_t len;
    if (endpoints_read(t->path, &text, &len, err, errlen) < 0)
        return refuse(t, &s);
    if (len == t->tlen && memcmp(text, t->text, len) == 0) {
        free(text);   /* replaced by the same content: nothing changes */
        t->cur = s;
        t->have_bad = 0;
        return 0;
    }
    if (take(t, text, len, 1, now, err, errlen) < 0) {
        free(text);
        return refuse(t, &s);
    }
    t->cur = s;
    t->have_bad = 0;
    return 1;
}

int endpoints_table_poll(endpoints_table *t, double now, char *err, size_t errlen)
{
    pthread_mutex_lock(&t->wlock);
    int rc = poll_locked(t, now, err, errlen);
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int endpoints_table_remap(endpoints_table *t, char *const *workers, int K, char *err,
                          size_t errlen)
{
    pthread_mutex_lock(&t->wlock);
    int rc = set_workers(t, workers, K);
    if (rc < 0)
        snprintf(err, errlen, "out of memory");
    else
        rc = take(t, t->text, t->tlen, 0, t->st.loaded_at, err, errlen);
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int endpoints_table_k(endpoints_table *t)
{
    pthread_mutex_lock(&t->lock);
    int K = t->view->K;
    pthread_mutex_unlock(&t->lock);
    return K;
}

uint64_t endpoints_table_generation(endpoints_table *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t g = t->st.generation;
    pthread_mutex_unlock(&t->lock);
    return g;
}

void endpoints_table_stats(endpoints_table *t, ep_stats *out)
{
    pthread_mutex_lock(&t->lock);
    *out = t->st;
    pthread_mutex_unlock(&t->lock);
}

int endpoints_table_hostport(endpoints_table *t, int k, char out[EP_HOSTPORT_MAX])
{
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    const ep_view *v = t->view;
    if (k >= 0 && k < v->K) {
        memcpy(out, v->set.v[v->ep_of_worker[k]].hostport, EP_HOSTPORT_MAX);
        rc = 0;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static int find_key(const void *key, const void *elem)
{
    int64_t x = *(const int64_t *)key, y = *(const int64_t *)elem;
    return (x > y) - (x < y);
}

int endpoints_table_worker_of(endpoints_table *t, const char *hp, size_t len)
{
    int64_t key = endpoints_hostport_key(hp, len);
    if (key < 0)
        return -1;
    pthread_mutex_lock(&t->lock);
    const ep_view *v = t->view;
    const int64_t *hit = bsearch(&key, v->keys, (size_t)v->K, sizeof *v->keys, find_key);
    int k = hit ? v->worker_of_key[hit - v->keys] : -1;
    pthread_mutex_unlock(&t->lock);
    return k;
}

void endpoints_table_each(endpoints_table *t, void (*fn)(void *cls, int k, const endpoint *e),
                          void *cls)
{
    pthread_mutex_lock(&t->lock);
    const ep_view *v = t->view;
    for (int k = 0; k < v->K; k++)
        fn(cls, k, &v->set.v[v->ep_of_worker[k]]);
    pthread_mutex_unlock(&t->lock);
}

int endpoints_table_set_prefill(endpoints_table *t, char *const *names, int n, char *err,
                                size_t errlen)
{
    pthread_mutex_lock(&t->wlock);
    char **w;
    int rc = copy_names(names, n, &w);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
    } else {
        char **old = t->pworkers;
        int oldn = t->nP;
        t->pworkers = w;
        t->nP = n;
        rc = take(t, t->text, t->tlen, 0, t->st.loaded_at, err, errlen);
        if (rc < 0) {   /* the previous mapping stays, and so do its names */
            free_workers(w, n);
            t->pworkers = old;
            t->nP = oldn;
        } else {
            free_workers(old, oldn);
        }
    }
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int endpoints_table_n_prefill(endpoints_table *t)
{
    pthread_mutex_lock(&t->lock);
    int n = t->view->nP;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int endpoints_table_prefill_hostport(endpoints_table *t, int i, char out[EP_HOSTPORT_MAX])
{
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    const ep_view *v = t->view;
    if (i >= 0 && i < v->nP) {
        memcpy(out, v->set.v[v->ep_of_prefill[i]].hostport, EP_HOSTPORT_MAX);
        rc = 0;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int endpoints_table_subset(endpoints_table *t, const char *s, size_t len, uint8_t *mask)
{
    int64_t key = endpoints_hostport_key(s, len), hi = key;
    if (key < 0) {   /* a bare address: every port there (GIE's candidates.go) */
        if ((key = endpoints_address_key(s, len)) < 0)
            return -1;
        hi = key + 65535;
    }
    int n = 0;
    pthread_mutex_lock(&t->lock);
    const ep_view *v = t->view;
    /* the first key >= key, then along the sorted keys up to hi */
    size_t lo = 0, up = (size_t)v->K;
    while (lo < up) {
        size_t mid = (lo + up) / 2;
        if (v->keys[mid] < key)
            lo = mid + 1;
        else
            up = mid;
    }
    for (size_t j = lo; j < (size_t)v->K && v->keys[j] <= hi; j++) {
        int k = v->worker_of_key[j];
        n += !mask[k];
        mask[k] = 1;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
