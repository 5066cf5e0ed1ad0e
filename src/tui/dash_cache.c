/* dash_cache.c - the dashboard's result cache (dash_cache.h). An entry:
 * the magic, the key (64 hex digits), the payload's length (8 bytes),
 * the payload and its BLAKE2b-256. The payload is the header's CIs and
 * the five digested runs, each with the arrays the views draw (the
 * requests and the in-flight change points are digested already and are
 * not kept). Raw structs are fine here: an entry is read back only by
 * the build that wrote it (the key holds eldr's version, this format and
 * the structs' sizes). */
#include "dash_cache.h"
#include "dash_free.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "blake2b.h"
#include "sha256.h"
#include "version.h"

#define CACHE_MAGIC "eldr-dash-cache\n"   /* 16 bytes */
#define CACHE_FORMAT 2
#define SUM_BYTES 32
/* an entry is a few MB at most (the heat maps): anything larger is not one */
#define CACHE_MAX_PAYLOAD ((uint64_t)1 << 30)

/* DASH_CACHE_MAX_BYTES, or ELDR_CACHE_MAX_BYTES when set (for tests). */
static long long cache_max_bytes(void)
{
    const char *v = getenv("ELDR_CACHE_MAX_BYTES");
    char *end;
    long long x = v ? strtoll(v, &end, 10) : -1;
    return v && *v && !*end && x >= 0 ? x : DASH_CACHE_MAX_BYTES;
}

int dash_cache_dir(char *buf, size_t n, char *err, size_t errlen)
{
    const char *v = getenv("ELDR_CACHE_DIR");
    if (v && v[0])
        return snprintf(buf, n, "%s", v) < (int)n ? 0 : eldr_errf(err, errlen, "ELDR_CACHE_DIR "
                                                                   "is too long");
    v = getenv("XDG_CACHE_HOME");
    if (v && v[0])
        return snprintf(buf, n, "%s/eldr", v) < (int)n
                   ? 0 : eldr_errf(err, errlen, "XDG_CACHE_HOME is too long");
    v = getenv("HOME");
    if (v && v[0])
        return snprintf(buf, n, "%s/.cache/eldr", v) < (int)n
                   ? 0 : eldr_errf(err, errlen, "HOME is too long");
    return eldr_errf(err, errlen, "no cache directory: set ELDR_CACHE_DIR, XDG_CACHE_HOME "
                     "or HOME");
}

static void hex_of(const uint8_t *b, size_t n, char *out)
{
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[b[i] >> 4];
        out[2 * i + 1] = H[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The key: BLAKE2b-256 of the settings' text (n of its size bytes), in
 * hex; 0 when the text did not fit. */
static int key_of(const char *text, int n, size_t size, char key[DASH_CACHE_KEY])
{
    if (n < 0 || n >= (int)size)
        return 0;
    uint8_t k[32];
    blake2b(k, sizeof k, text, (size_t)n);
    hex_of(k, sizeof k, key);
    return 1;
}

/* dir/<name>-<key><ext>: "dash-....bin", "fit-....h5" */
static int cache_path(const char *name, const char *key, const char *ext, char *path, size_t n,
                      char *note, size_t notelen)
{
    char dir[PATH_MAX], err[ELDR_ERRLEN];
    if (dash_cache_dir(dir, sizeof dir, err, sizeof err))
        return eldr_errf(note, notelen, "cache off: %s", err);
    if (snprintf(path, n, "%s/%s-%s%s", dir, name, key, ext) >= (int)n)
        return eldr_errf(note, notelen, "cache off: the directory's name is too long");
    return 0;
}

int dash_cache_key(const dash_t *d, const model_t *m, route_kind policy, double tau,
                   char key[DASH_CACHE_KEY])
{
    key[0] = '\0';
    if (d->opts.no_cache || !d->sha256[0] || !m)
        return 0;
    size_t dim = sig_dim(&m->recipe);
    uint8_t ch[32];
    char chex[65];
    blake2b(ch, sizeof ch, m->centroids, (size_t)m->K * dim * sizeof *m->centroids);
    hex_of(ch, sizeof ch, chex);
    const sim_config *c = &d->cfg;
    const cost_model *cm = &c->cost;
    char text[1024];
    /* %a: every bit of a double */
    int n = snprintf(
        text, sizeof text,
        "eldr %s dash-cache %d sizes %zu %zu %zu|trace %s|model %s K %d variant %d dim %zu|"
        "split %d seed %llu calib %lld rows %lld|arrivals %d rate %a conc %d seed %llu "
        "batch %d out %d pool %d|cost %a %a %a %a %a|policy %d tau %a|seeds %d resplit %d",
        ELDR_VERSION, CACHE_FORMAT, sizeof(dash_ci), sizeof(sim_result), sizeof(dash_sim),
        d->sha256, chex, m->K, (int)m->recipe.variant, dim, (int)d->split_mode,
        (unsigned long long)d->split_seed, (long long)d->n_calib, (long long)d->n_rows,
        (int)c->arrivals, c->rate, c->concurrency, (unsigned long long)c->seed, c->max_batch,
        (int)c->output_tokens, c->sample_pool, cm->t0, cm->a, cm->b, cm->c, cm->d, (int)policy,
        policy == ROUTE_ELDR ? tau : 0.0, d->opts.seeds, d->all != NULL);
    return key_of(text, n, sizeof text, key);
}

static int entry_path(const char *key, char *path, size_t n, char *note, size_t notelen)
{
    return cache_path("dash", key, ".bin", path, n, note, notelen);
}

/* ---- writing ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} wbuf;

static void put(wbuf *b, const void *data, size_t len)
{
    if (b->oom || !len)
        return;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + len)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
}

static void put_sim(wbuf *b, const dash_sim *s)
{
    dash_sim h = *s;              /* the scalars; the pointers are not kept */
    h.routed = NULL;
    h.layer_distinct = h.layer_expected = NULL;
    h.inflight = h.running = NULL;
    sim_result *r = &h.res;
    r->req = NULL;
    r->served = r->worker_steps = NULL;
    r->worker_busy_s = r->worker_distinct = r->inflight_mean = NULL;
    r->heat = NULL;
    r->series = NULL;
    r->n_series = 0;
    put(b, &h, sizeof h);
    size_t K = (size_t)s->K, KL = K * s->L, KB = K * s->nbins;
    uint8_t has_heat = s->res.heat != NULL, has_served = s->res.served != NULL;
    put(b, s->routed, K * sizeof *s->routed);
    put(b, s->layer_distinct, KL * sizeof *s->layer_distinct);
    put(b, s->layer_expected, KL * sizeof *s->layer_expected);
    put(b, s->inflight, KB * sizeof *s->inflight);
    put(b, s->running, KB * sizeof *s->running);
    put(b, &has_served, 1);
    if (has_served)
        put(b, s->res.served, K * sizeof *s->res.served);
    /* the worker's zoom (balance view) reads these */
    put(b, s->res.worker_steps, K * sizeof *s->res.worker_steps);
    put(b, s->res.worker_busy_s, K * sizeof *s->res.worker_busy_s);
    put(b, s->res.worker_distinct, K * sizeof *s->res.worker_distinct);
    put(b, s->res.inflight_mean, K * sizeof *s->res.inflight_mean);
    put(b, &has_heat, 1);
    if (has_heat)
        put(b, s->res.heat, KL * s->E * sizeof *s->res.heat);
}

/* mkdir -p, owner only: the results say what the traces hold */
static int make_dirs(char *dir, char *note, size_t notelen)
{
    for (char *q = dir + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            mkdir(dir, 0700);
            *q = '/';
        }
    if (mkdir(dir, 0700) && errno != EEXIST)
        return eldr_errf(note, notelen, "cache not written: %s: %s", dir, strerror(errno));
    return 0;
}

/* An entry: magic (16 bytes), key (64 hex), extra (64 hex or zeros: the
 * fit entry's model file SHA-256), the payload's length (8), the payload
 * and its BLAKE2b-256; written atomically. */
#define ENTRY_HEAD (16 + 64 + 64 + 8)
static int write_entry(const char *path, const char *magic, const char *key, const char *extra,
                       const wbuf *b, char *err, size_t errlen)
{
    uint8_t sum[SUM_BYTES];
    char x[64];
    memset(x, 0, sizeof x);
    if (extra)
        memcpy(x, extra, 64);
    blake2b(sum, sizeof sum, b->p, b->n);
    uint64_t len = b->n;
    atomic_file a;
    int rc = atomic_file_begin(&a, path, err, errlen);
    if (!rc)
        rc = atomic_file_write(&a, magic, 16, err, errlen);
    if (!rc)
        rc = atomic_file_write(&a, key, 64, err, errlen);
    if (!rc)
        rc = atomic_file_write(&a, x, 64, err, errlen);
    if (!rc)
        rc = atomic_file_write(&a, &len, sizeof len, err, errlen);
    if (!rc)
        rc = atomic_file_write(&a, b->p, b->n, err, errlen);
    if (!rc)
        rc = atomic_file_write(&a, sum, sizeof sum, err, errlen);
    if (!rc)
        rc = atomic_file_commit(&a, err, errlen);
    else
        atomic_file_abort(&a);
    return rc;
}

/* Remove the oldest entries of dir until the rest fit in max bytes. */
typedef struct entry {
    char name[sizeof ((struct dirent *)0)->d_name];
    long long bytes;
    double mtime;
} entry;

static int by_age(const void *a, const void *b)
{
    double x = ((const entry *)a)->mtime, y = ((const entry *)b)->mtime;
    return x < y ? -1 : x > y;
}

static void prune(const char *dir, long long max)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    entry *e = NULL;
    size_t n = 0, cap = 0;
    long long total = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "dash-", 5) || len != 5 + 64 + 4 ||
            strcmp(de->d_name + len - 4, ".bin"))
            continue;
        char path[PATH_MAX + 512];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            entry *p = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof *e);
            if (!p)
                break;
            e = p;
        }
        snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
        e[n].bytes = st.st_size;
        e[n].mtime = st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
        total += st.st_size;
        n++;
    }
    closedir(dp);
    if (total > max && n) {
        qsort(e, n, sizeof *e, by_age);
        for (size_t i = 0; i < n && total > max; i++) {
            char path[PATH_MAX + 512];
            snprintf(path, sizeof path, "%s/%s", dir, e[i].name);
            if (!unlink(path))
                total -= e[i].bytes;
        }
    }
    free(e);
}

int dash_cache_store(const dash_t *d, const char *key, const dash_refined *r, char *note,
                     size_t notelen)
{
    char path[PATH_MAX + 96], err[ELDR_ERRLEN];
    if (entry_path(key, path, sizeof path, note, notelen))
        return -1;
    char dir[sizeof path];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    if (make_dirs(dir, note, notelen))
        return -1;
    wbuf b = {0};
    put(&b, &r->ci, sizeof r->ci);
    const dash_sim *sims[1 + DASH_N_BASE] = {r->cur};
    for (int i = 0; i < DASH_N_BASE; i++)
        sims[1 + i] = r->base[i];
    for (int i = 0; i < 1 + DASH_N_BASE; i++) {
        if (!sims[i]) {
            free(b.p);
            return eldr_errf(note, notelen, "cache not written: a run is missing");
        }
        put_sim(&b, sims[i]);
    }
    if (b.oom) {
        free(b.p);
        return eldr_errf(note, notelen, "cache not written: out of memory");
    }
    int rc = write_entry(path, CACHE_MAGIC, key, NULL, &b, err, sizeof err);
    free(b.p);
    (void)d;
    if (rc)
        return eldr_errf(note, notelen, "cache not written: %s", err);
    prune(dir, cache_max_bytes());
    return 0;
}

/* ---- reading ---- */

typedef struct rbuf {
    const uint8_t *p;
    size_t n, at;
    int short_read;
} rbuf;

static void get(rbuf *b, void *dst, size_t len)
{
    if (b->short_read || len > b->n - b->at) {
        b->short_read = 1;
        memset(dst, 0, len);
        return;
    }
    memcpy(dst, b->p + b->at, len);
    b->at += len;
}

/* A copy of the next len bytes, or NULL (short read, or no memory). */
static void *get_array(rbuf *b, size_t len)
{
    void *p = malloc(len ? len : 1);
    if (!p) {
        b->short_read = 1;
        return NULL;
    }
    get(b, p, len);
    if (b->short_read) {
        free(p);
        return NULL;
    }
    return p;
}

static dash_sim *get_sim(rbuf *b, const dash_t *d, const char **why)
{
    dash_sim h;
    get(b, &h, sizeof h);
    if (b->short_read)
        return (*why = "cut short", NULL);
    if (h.K < 1 || h.K > ROUTE_MAX_WORKERS || h.L != d->L || h.E != d->E ||
        h.nbins != DASH_BINS || h.res.K != h.K)
        return (*why = "a run of another shape", NULL);
    dash_sim *s = calloc(1, sizeof *s);
    if (!s)
        return (*why = "out of memory", NULL);
    *s = h;
    size_t K = (size_t)h.K, KL = K * h.L, KB = K * h.nbins;
    s->routed = get_array(b, K * sizeof *s->routed);
    s->layer_distinct = get_array(b, KL * sizeof *s->layer_distinct);
    s->layer_expected = get_array(b, KL * sizeof *s->layer_expected);
    s->inflight = get_array(b, KB * sizeof *s->inflight);
    s->running = get_array(b, KB * sizeof *s->running);
    uint8_t flag = 0;
    get(b, &flag, 1);
    if (flag == 1)
        s->res.served = get_array(b, K * sizeof *s->res.served);
    else if (flag != 0)
        b->short_read = 1;
    s->res.worker_steps = get_array(b, K * sizeof *s->res.worker_steps);
    s->res.worker_busy_s = get_array(b, K * sizeof *s->res.worker_busy_s);
    s->res.worker_distinct = get_array(b, K * sizeof *s->res.worker_distinct);
    s->res.inflight_mean = get_array(b, K * sizeof *s->res.inflight_mean);
    get(b, &flag, 1);
    if (flag == 1)
        s->res.heat = get_array(b, KL * h.E * sizeof *s->res.heat);
    else if (flag != 0)
        b->short_read = 1;
    if (b->short_read) {
        dash_sim_free(s);
        return (*why = "cut short", NULL);
    }
    return s;
}

/* The whole file, or NULL with errno set (ENOENT: a miss). */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *p = NULL;
    long len = -1;
    if (!fseek(f, 0, SEEK_END) && (len = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
        (uint64_t)len <= CACHE_MAX_PAYLOAD + 128 && (p = malloc((size_t)len + 1)) &&
        fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
        errno = EIO;
    }
    if (len < 0 && !errno)
        errno = EIO;
    fclose(f);
    *n = p ? (size_t)len : 0;
    return p;
}

/* Read and check an entry: NULL and *file set (the caller frees it) with
 * payload and len on success; a reason when it is unusable; NULL and
 * *file NULL when there is none (a miss). extra (may be NULL) gets the
 * entry's extra field as a string. */
static const char *read_entry(const char *path, const char *magic, const char *key,
                              char extra[SHA256_HEX], uint8_t **file,
                              const uint8_t **payload, size_t *len)
{
    size_t n = 0;
    errno = 0;
    *file = slurp(path, &n);
    if (!*file)
        return errno == ENOENT ? NULL : errno ? strerror(errno) : "too large";
    uint64_t plen = 0;
    if (n < ENTRY_HEAD + SUM_BYTES || memcmp(*file, magic, 16))
        return "not a cache entry";
    if (memcmp(*file + 16, key, 64))
        return "another key";
    memcpy(&plen, *file + 144, sizeof plen);
    if (plen != n - ENTRY_HEAD - SUM_BYTES)
        return "cut short";
    uint8_t sum[SUM_BYTES];
    blake2b(sum, sizeof sum, *file + ENTRY_HEAD, (size_t)plen);
    if (memcmp(sum, *file + ENTRY_HEAD + plen, SUM_BYTES))
        return "checksum mismatch";
    if (extra) {
        memcpy(extra, *file + 80, 64);
        extra[64] = '\0';
    }
    *payload = *file + ENTRY_HEAD;
    *len = (size_t)plen;
    return NULL;
}

int dash_cache_load(const dash_t *d, const char *key, dash_refined *r, char *note,
                    size_t notelen)
{
    memset(r, 0, sizeof *r);
    char path[PATH_MAX + 96];
    if (entry_path(key, path, sizeof path, note, notelen))
        return 0;
    uint8_t *file = NULL;
    const uint8_t *payload = NULL;
    size_t len = 0;
    const char *why = read_entry(path, CACHE_MAGIC, key, NULL, &file, &payload, &len);
    if (!file && !why)
        return 0;                /* a miss */
    if (!why) {
        rbuf b = {payload, len, 0, 0};
        get(&b, &r->ci, sizeof r->ci);
        dash_sim *sims[1 + DASH_N_BASE] = {0};
        for (int i = 0; i < 1 + DASH_N_BASE && !why; i++)
            sims[i] = get_sim(&b, d, &why);
        if (!why && b.at != b.n)
            why = "trailing bytes";
        if (!why && r->ci.valid && (sims[0]->K != r->ci.K || r->ci.n_seeds != d->opts.seeds))
            why = "results of another setting";
        if (why) {
            for (int i = 0; i < 1 + DASH_N_BASE; i++)
                dash_sim_free(sims[i]);
            memset(&r->ci, 0, sizeof r->ci);
        } else {
            r->cur = sims[0];
            for (int i = 0; i < DASH_N_BASE; i++)
                r->base[i] = sims[1 + i];
            r->from_cache = 1;
        }
    }
    free(file);
    if (why) {
        eldr_errf(note, notelen, "cache entry ignored (%s); recomputed: %s", why, path);
        return -1;
    }
    return 1;
}

/* ---- the default fit ---- */

#define FIT_MAGIC "eldr-dash-fit\n\0\0"   /* 16 bytes */

int dash_fit_cache_key(const dash_t *d, char key[DASH_CACHE_KEY])
{
    key[0] = '\0';
    if (d->opts.no_cache || !d->sha256[0] || !d->calib)
        return 0;
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "eldr %s dash-fit %d|trace %s name %s|split %d seed %llu calib %lld rows "
                     "%lld|K %d seed %llu|counts %d",
                     ELDR_VERSION, CACHE_FORMAT, d->sha256, d->trace_name, (int)d->split_mode,
                     (unsigned long long)d->split_seed, (long long)d->n_calib,
                     (long long)d->n_rows, d->opts.K, (unsigned long long)d->opts.seed,
                     d->calib->decode_counts != NULL);
    return key_of(text, n, sizeof text, key);
}

/* dir/fit-<key>.h5 and .bin */
static int fit_paths(const char *key, char *h5, char *bin, size_t n, char *note, size_t notelen)
{
    return cache_path("fit", key, ".h5", h5, n, note, notelen) ||
           cache_path("fit", key, ".bin", bin, n, note, notelen) ? -1 : 0;
}

int dash_fit_cache_store(const dash_t *d, const char *key, const model_t *m,
                         const model_fit_report *rep, char *note, size_t notelen)
{
    char h5[PATH_MAX + 96], bin[PATH_MAX + 96], hex[SHA256_HEX], err[ELDR_ERRLEN];
    if (fit_paths(key, h5, bin, sizeof h5, note, notelen))
        return -1;
    char dir[sizeof h5];
    snprintf(dir, sizeof dir, "%s", h5);
    *strrchr(dir, '/') = '\0';
    if (make_dirs(dir, note, notelen))
        return -1;
    if (model_save(m, h5, err, sizeof err) || sha256_file(h5, hex, err, sizeof err) < 0)
        return eldr_errf(note, notelen, "cache not written: %s", err);
    wbuf b = {0};
    int32_t L = d->L, has_curve = rep->curve && rep->order;
    int64_t n = d->calib->n;
    put(&b, &L, sizeof L);
    put(&b, &has_curve, sizeof has_curve);
    put(&b, &n, sizeof n);
    if (has_curve) {
        put(&b, rep->curve, (size_t)L * sizeof *rep->curve);
        for (int l = 0; l < L; l++) {
            int32_t v = rep->order[l];
            put(&b, &v, sizeof v);
        }
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t v = rep->assign ? rep->assign[i] : -1;
        put(&b, &v, sizeof v);
    }
    if (b.oom) {
        free(b.p);
        return eldr_errf(note, notelen, "cache not written: out of memory");
    }
    int rc = write_entry(bin, FIT_MAGIC, key, hex, &b, err, sizeof err);
    free(b.p);
    return rc ? eldr_errf(note, notelen, "cache not written: %s", err) : 0;
}

int dash_fit_cache_load(const dash_t *d, const char *key, model_t **m, model_fit_report *rep,
                        char *note, size_t notelen)
{
    *m = NULL;
    memset(rep, 0, sizeof *rep);
    char h5[PATH_MAX + 96], bin[PATH_MAX + 96], hex[SHA256_HEX], err[ELDR_ERRLEN];
    if (fit_paths(key, h5, bin, sizeof h5, note, notelen))
        return 0;
    size_t len = 0;
    const uint8_t *payload = NULL;
    char want[SHA256_HEX];
    uint8_t *file = NULL;
    const char *why = read_entry(bin, FIT_MAGIC, key, want, &file, &payload, &len);
    if (!file && !why)
        return 0;                /* a miss */
    if (!why && (sha256_file(h5, hex, err, sizeof err) < 0 || strcmp(hex, want)))
        why = "its model file is missing or another";
    if (!why) {
        rbuf b = {payload, len, 0, 0};
        int32_t L = 0, has_curve = 0;
        int64_t n = 0;
        get(&b, &L, sizeof L);
        get(&b, &has_curve, sizeof has_curve);
        get(&b, &n, sizeof n);
        if (b.short_read || L != d->L || n != d->calib->n || (has_curve != 0 && has_curve != 1))
            why = "a fit of another shape";
        else {
            rep->n_rows = n;
            if (has_curve) {
                rep->curve = get_array(&b, (size_t)L * sizeof *rep->curve);
                rep->order = calloc((size_t)L, sizeof *rep->order);
                for (int l = 0; rep->order && l < L; l++) {
                    int32_t v = -1;
                    get(&b, &v, sizeof v);
                    rep->order[l] = v;
                }
            }
            rep->assign = calloc((size_t)(n > 0 ? n : 1), sizeof *rep->assign);
            for (int64_t i = 0; rep->assign && i < n; i++) {
                int32_t v = -1;
                get(&b, &v, sizeof v);
                rep->assign[i] = v;
            }
            if (b.short_read || b.at != b.n || !rep->assign || (has_curve && !rep->order))
                why = "cut short";
        }
    }
    free(file);
    if (!why && model_load(h5, m, err, sizeof err))
        why = "its model file does not load";
    if (!why) {
        for (int64_t i = 0; i < rep->n_rows && !why; i++)
            if (rep->assign[i] < -1 || rep->assign[i] >= (*m)->K)
                why = "an assignment out of range";
        for (int l = 0; rep->order && l < d->L && !why; l++)
            if (rep->order[l] < 0 || rep->order[l] >= d->L)
                why = "a layer order out of range";
    }
    if (why) {
        model_free(*m);
        *m = NULL;
        model_fit_report_free(rep);
        memset(rep, 0, sizeof *rep);
        eldr_errf(note, notelen, "cache entry ignored (%s); fitted again: %s", why, bin);
        return -1;
    }
    return 1;
}
