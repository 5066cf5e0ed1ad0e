/* layersel.c - greedy forward layer selection with incremental per-pair
 * dot products (see layersel.h for the method and the identity used). */
#include "layersel.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "rank.h"

#define LAYERSEL_MAX_THREADS 8

struct layersel_ctx {
    int L, E;
    int64_t n_req, P;
    const int32_t *pi, *pj;   /* the pairs (borrowed) */
    double *dec_dist;         /* [P] */
    rank_ref ref;             /* decode distances, ranked once */
    double *dot;              /* [L][P] per-layer pair dot products */
    double *sq;               /* [L][n_req] per-layer squared norms */
    int threads;
    volatile int *cancel;     /* polled before each greedy step; may be NULL */
    progress_fn progress;     /* told after each greedy step; may be NULL */
    void *progress_ctx;
};

void layersel_set_cancel(layersel_ctx *c, volatile int *cancel)
{
    c->cancel = cancel;
}

void layersel_set_progress(layersel_ctx *c, progress_fn fn, void *ctx)
{
    c->progress = fn;
    c->progress_ctx = ctx;
}

static int pick_threads(int threads)
{
    if (threads > 0)
        return threads < LAYERSEL_MAX_THREADS ? threads : LAYERSEL_MAX_THREADS;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        return 1;
    return cpus < LAYERSEL_MAX_THREADS ? (int)cpus : LAYERSEL_MAX_THREADS;
}

/* Run fn(arg_k) for k in [0, nt) on nt threads (arg 0 on this one); a
 * thread that cannot start runs here instead, so the work is always done. */
static void run_parallel(void *(*fn)(void *), void *args, size_t arg_size, int nt)
{
    pthread_t tid[LAYERSEL_MAX_THREADS];
    int started[LAYERSEL_MAX_THREADS] = {0};
    for (int k = 1; k < nt; k++)
        started[k] = pthread_create(&tid[k], NULL, fn, (char *)args + (size_t)k * arg_size) == 0;
    fn(args);
    for (int k = 1; k < nt; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            fn((char *)args + (size_t)k * arg_size);
    }
}

/* ---- precomputation ------------------------------------------------------ */

typedef struct prep_job {
    layersel_ctx *c;
    const trace_t *t;
    const rho_pairs *pr;
    const rho_decode_norms *dn;
    sig_variant v;
    const float *idf_full;
    int tid, nt;
    double *vals;           /* [n_req][E] scratch: one layer of every request */
    int64_t bad_row;        /* first non-finite value, or -1 */
    int bad_layer;
} prep_job;

static void *prep_run(void *arg)
{
    prep_job *j = arg;
    layersel_ctx *c = j->c;
    size_t E = (size_t)c->E;
    j->bad_row = -1;
    /* this thread's share of the decode distances, then its layers */
    rho_decode_dist_range(j->t, j->pr, j->dn, c->P * j->tid / j->nt, c->P * (j->tid + 1) / j->nt,
                          c->dec_dist);
    for (int l = j->tid; l < c->L; l += j->nt) {
        double *sq = c->sq + (size_t)l * (size_t)c->n_req;
        const float *idf_row = j->idf_full ? j->idf_full + (size_t)l * E : NULL;
        for (int64_t r = 0; r < c->n_req; r++) {
            double *row = j->vals + (size_t)r * E;
            if (rho_layer_values(j->t, j->v, idf_row, r, l, row)) {
                j->bad_row = r;
                j->bad_layer = l;
                return NULL;
            }
            sq[r] = rho_dot(row, row, E);
        }
        double *dot = c->dot + (size_t)l * (size_t)c->P;
        int64_t p = 0;
        for (; p + 4 <= c->P; p += 4) {
            const double *a[4], *b[4];
            for (int q = 0; q < 4; q++) {
                a[q] = j->vals + (size_t)c->pi[p + q] * E;
                b[q] = j->vals + (size_t)c->pj[p + q] * E;
            }
            rho_dot_x4(a, b, E, dot + p);
        }
        for (; p < c->P; p++)
            dot[p] = rho_dot(j->vals + (size_t)c->pi[p] * E, j->vals + (size_t)c->pj[p] * E, E);
    }
    return NULL;
}

static int check_inputs(const trace_t *t, sig_variant v, const float *idf_full,
                        const rho_pairs *pr, char *err, size_t errlen)
{
    if ((int)v < 0 || v >= SIG_N_VARIANTS)
        return eldr_errf(err, errlen, "layer selection: unknown variant %d", (int)v);
    if (!t->decode_counts)
        return eldr_errf(err, errlen, "rho needs decode_counts, which the trace lacks");
    if (v == SIG_COUNT_IDF && !idf_full)
        return eldr_errf(err, errlen, "layer selection: count_idf needs idf weights (fit them first)");
    if ((v == SIG_GATE_PROB && !t->gate_prob) || (v == SIG_GATE_LOGIT && !t->gate_logit))
        return eldr_errf(err, errlen, "layer selection: variant %s needs dataset %s, the trace has none",
                         sig_variant_name(v), sig_variant_name(v));
    if (pr->n < 2)
        return eldr_errf(err, errlen, "layer selection: rho needs at least 2 pairs, got %lld",
                         (long long)pr->n);
    for (int64_t p = 0; p < pr->n; p++)
        if (pr->i[p] < 0 || pr->i[p] >= t->n || pr->j[p] < 0 || pr->j[p] >= t->n)
            return eldr_errf(err, errlen, "layer selection: pair %lld (%d, %d) out of range [0, %lld)",
                             (long long)p, pr->i[p], pr->j[p], (long long)t->n);
    return 0;
}

layersel_ctx *layersel_prepare(const trace_t *t, sig_variant v, const float *idf_full,
                               const rho_pairs *pr, int threads, char *err, size_t errlen)
{
    if (check_inputs(t, v, idf_full, pr, err, errlen))
        return NULL;
    int nt = pick_threads(threads);
    if (nt > t->L)
        nt = t->L;
    double need = 8.0 * ((double)t->L * (double)pr->n + (double)t->L * (double)t->n
                         + (double)nt * (double)t->n * t->E + 4.0 * (double)pr->n);
    size_t mem = eldr_phys_mem();
    if (mem && need > (double)mem / 2) {
        eldr_errf(err, errlen,
                  "layer selection: %lld pairs x %d layers need %.1f GiB, more than half of "
                  "this machine's memory; use fewer pairs", (long long)pr->n, t->L,
                  need / 1073741824.0);
        return NULL;
    }
    layersel_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        eldr_errf(err, errlen, "layer selection: out of memory");
        return NULL;
    }
    c->L = t->L;
    c->E = t->E;
    c->n_req = t->n;
    c->P = pr->n;
    c->pi = pr->i;
    c->pj = pr->j;
    c->threads = pick_threads(threads);
    c->dec_dist = eldr_calloc((size_t)c->P, sizeof *c->dec_dist);
    c->dot = eldr_calloc((size_t)c->L * (size_t)c->P, sizeof *c->dot);
    c->sq = eldr_calloc((size_t)c->L * (size_t)c->n_req, sizeof *c->sq);
    prep_job jobs[LAYERSEL_MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    rho_decode_norms dn = {0};
    int ok = c->dec_dist && c->dot && c->sq;
    for (int k = 0; ok && k < nt; k++) {
        jobs[k] = (prep_job){.c = c, .t = t, .pr = pr, .dn = &dn, .v = v, .idf_full = idf_full,
                             .tid = k, .nt = nt};
        jobs[k].vals = eldr_calloc((size_t)t->n * (size_t)t->E, sizeof(double));
        ok = jobs[k].vals != NULL;
    }
    if (!ok) {
        eldr_errf(err, errlen, "layer selection: out of memory for %lld pairs x %d layers",
                  (long long)c->P, c->L);
        goto fail;
    }
    if (rho_decode_norms_init(t, &dn, err, errlen))
        goto fail;
    run_parallel(prep_run, jobs, sizeof jobs[0], nt);
    for (int k = 0; k < nt; k++)
        if (jobs[k].bad_row >= 0) {
            eldr_errf(err, errlen, "layer selection: %s value of row %lld layer %d is not finite",
                      v == SIG_COUNT_IDF ? "idf-weighted count" : sig_variant_name(v),
                      (long long)jobs[k].bad_row, jobs[k].bad_layer);
            goto fail;
        }
    if (rank_ref_init(&c->ref, c->dec_dist, (size_t)c->P, err, errlen))
        goto fail;
    for (int k = 0; k < nt; k++)
        free(jobs[k].vals);
    rho_decode_norms_free(&dn);
    return c;
fail:
    for (int k = 0; k < nt; k++)
        free(jobs[k].vals);
    rho_decode_norms_free(&dn);
    layersel_free(c);
    return NULL;
}

void layersel_free(layersel_ctx *c)
{
    if (!c)
        return;
    free(c->dec_dist);
    rank_ref_free(&c->ref);
    free(c->dot);
    free(c->sq);
    free(c);
}

const double *layersel_decode_dist(const layersel_ctx *c)
{
    return c->dec_dist;
}

/* ---- evaluation ------------------------------------------------------------ */

/* Sort keys (rho_grid_key) of the signature distances of every pair for
 * running sums (cum_dot, cum_sq) plus layer l (l < 0: the sums alone),
 * with their least and greatest; the distances themselves go to dist when
 * non-NULL. inv is [n_req] scratch. A zero norm gives inv 0, hence cos 0
 * and distance 1 (rho.h). */
typedef struct pair_keys {
    uint64_t *key;    /* [P] */
    uint64_t min, max;
} pair_keys;

static void pair_dist(const layersel_ctx *c, const double *cum_dot, const double *cum_sq,
                      int l, double *inv, pair_keys *k, double *dist)
{
    const double *sq = l >= 0 ? c->sq + (size_t)l * (size_t)c->n_req : NULL;
    const double *dot = l >= 0 ? c->dot + (size_t)l * (size_t)c->P : NULL;
    for (int64_t r = 0; r < c->n_req; r++) {
        double s = cum_sq[r] + (sq ? sq[r] : 0);
        inv[r] = s > 0 ? 1.0 / sqrt(s) : 0.0;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int64_t p = 0; p < c->P; p++) {
        double d = cum_dot[p] + (dot ? dot[p] : 0);
        uint64_t key = rho_grid_key(1.0 - d * inv[c->pi[p]] * inv[c->pj[p]]);
        k->key[p] = key;
        lo = key < lo ? key : lo;
        hi = key > hi ? key : hi;
    }
    k->min = lo;
    k->max = hi;
    if (dist)
        for (int64_t p = 0; p < c->P; p++) {
            double d = cum_dot[p] + (dot ? dot[p] : 0);
            dist[p] = rho_grid(1.0 - d * inv[c->pi[p]] * inv[c->pj[p]]);
        }
}

static double pair_rho(const layersel_ctx *c, const pair_keys *k, rank_work *w)
{
    return rank_ref_spearman_keys(&c->ref, k->key, k->min, k->max, w);
}

int layersel_rho_mask(const layersel_ctx *c, const int *layers, int n, double *dist_out,
                      double *rho, char *err, size_t errlen)
{
    double *cum_dot = eldr_calloc((size_t)c->P, sizeof *cum_dot);
    double *cum_sq = eldr_calloc((size_t)c->n_req, sizeof *cum_sq);
    double *inv = eldr_calloc((size_t)c->n_req, sizeof *inv);
    pair_keys k = {.key = eldr_calloc((size_t)c->P, sizeof *k.key)};
    unsigned char *seen = eldr_calloc((size_t)c->L, 1);
    rank_work w = {0};
    int rc = -1;
    if (!cum_dot || !cum_sq || !inv || !k.key || !seen) {
        eldr_errf(err, errlen, "layer selection: out of memory");
        goto out;
    }
    if (n < 1) {
        eldr_errf(err, errlen, "layer selection: empty layer set");
        goto out;
    }
    for (int k = 0; k < n; k++) {
        int l = layers[k];
        if (l < 0 || l >= c->L || seen[l]) {
            eldr_errf(err, errlen, "layer selection: layer %d %s", l,
                      l < 0 || l >= c->L ? "out of range" : "listed twice");
            goto out;
        }
        seen[l] = 1;
        const double *dot = c->dot + (size_t)l * (size_t)c->P;
        const double *sq = c->sq + (size_t)l * (size_t)c->n_req;
        for (int64_t p = 0; p < c->P; p++)
            cum_dot[p] += dot[p];
        for (int64_t r = 0; r < c->n_req; r++)
            cum_sq[r] += sq[r];
    }
    if (rank_work_init(&w, (size_t)c->P, err, errlen))
        goto out;
    pair_dist(c, cum_dot, cum_sq, -1, inv, &k, dist_out);
    *rho = pair_rho(c, &k, &w);
    rc = 0;
out:
    rank_work_free(&w);
    free(cum_dot);
    free(cum_sq);
    free(inv);
    free(k.key);
    free(seen);
    return rc;
}

/* ---- greedy -------------------------------------------------------------------- */

/* A step evaluates its candidates in two rounds: first bounds on every
 * candidate's rho (rank_ref_spearman_bounds, no sort), then the exact rho
 * of only those whose upper bound reaches the best lower bound; the
 * others cannot win (nor tie) and keep NaN. At 30000 pairs about one
 * candidate in ten needs the exact rho. The choice is the one exact
 * evaluation of every candidate would make. */
typedef struct cand_job {
    const layersel_ctx *c;
    const double *cum_dot, *cum_sq;
    const int *cands;       /* candidate layers of this step */
    int n_cands;
    const int *todo;        /* exact round: candidate indices to evaluate, or NULL */
    double *cand_lo, *cand_hi, *cand_rho;   /* [n_cands] */
    int tid, nt;
    double *inv;            /* scratch [n_req] */
    pair_keys keys;         /* scratch [P] */
    rank_work w;
} cand_job;

static void *cand_run(void *arg)
{
    cand_job *j = arg;
    for (int q = j->tid; q < j->n_cands; q += j->nt) {
        int k = j->todo ? j->todo[q] : q;
        pair_dist(j->c, j->cum_dot, j->cum_sq, j->cands[k], j->inv, &j->keys, NULL);
        if (j->todo)
            j->cand_rho[k] = pair_rho(j->c, &j->keys, &j->w);
        else
            rank_ref_spearman_bounds(&j->c->ref, j->keys.key, j->keys.min, j->keys.max, &j->w,
                                     &j->cand_lo[k], &j->cand_hi[k]);
    }
    return NULL;
}

/* Run one round of cand_run over n items on up to nt threads. */
static void run_round(cand_job *jobs, int nt, int n, const int *todo)
{
    for (int k = 0; k < nt; k++) {
        jobs[k].n_cands = n;
        jobs[k].todo = todo;
    }
    if (n > 0)
        run_parallel(cand_run, jobs, sizeof jobs[0], nt < n ? nt : n);
}

/* Candidates [0, n) of a step: bounds, then exact rho where a bound
 * leaves the question open; cand_rho ends NaN for the rest. */
static void eval_step(cand_job *jobs, int nt, int n, double *lo, double *hi, double *rho,
                      int *todo)
{
    run_round(jobs, nt, n, NULL);
    double best_lo = NAN;
    for (int k = 0; k < n; k++)
        if (!isnan(lo[k]) && !(best_lo >= lo[k]))
            best_lo = lo[k];
    int m = 0;
    for (int k = 0; k < n; k++) {
        rho[k] = NAN;
        if (!isnan(hi[k]) && hi[k] >= best_lo)
            todo[m++] = k;
    }
    run_round(jobs, nt, m, todo);
}

/* a beats b: defined beats undefined, then larger */
static int better(double a, double b)
{
    if (isnan(a))
        return 0;
    return isnan(b) || a > b;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int layersel_greedy(const layersel_ctx *c, layersel_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int L = c->L, nt = c->threads < L ? c->threads : L;
    double *cum_dot = eldr_calloc((size_t)c->P, sizeof *cum_dot);
    double *cum_sq = eldr_calloc((size_t)c->n_req, sizeof *cum_sq);
    int *cands = eldr_calloc((size_t)L, sizeof *cands), *todo = eldr_calloc((size_t)L, sizeof *todo);
    double *cand_rho = eldr_calloc((size_t)L, sizeof *cand_rho);
    double *cand_lo = eldr_calloc((size_t)L, sizeof *cand_lo);
    double *cand_hi = eldr_calloc((size_t)L, sizeof *cand_hi);
    unsigned char *used = eldr_calloc((size_t)L, 1);
    out->order = eldr_calloc((size_t)L, sizeof *out->order);
    out->curve = eldr_calloc((size_t)L, sizeof *out->curve);
    cand_job jobs[LAYERSEL_MAX_THREADS];
    memset(jobs, 0, sizeof jobs);
    int ok = cum_dot && cum_sq && cands && todo && cand_rho && cand_lo && cand_hi && used
             && out->order && out->curve;
    for (int k = 0; ok && k < nt; k++) {
        jobs[k] = (cand_job){.c = c, .cum_dot = cum_dot, .cum_sq = cum_sq, .cands = cands,
                             .cand_lo = cand_lo, .cand_hi = cand_hi, .cand_rho = cand_rho,
                             .tid = k, .nt = nt};
        jobs[k].inv = eldr_calloc((size_t)c->n_req, sizeof(double));
        jobs[k].keys.key = eldr_calloc((size_t)c->P, sizeof(uint64_t));
        ok = jobs[k].inv && jobs[k].keys.key
             && rank_work_init(&jobs[k].w, (size_t)c->P, NULL, 0) == 0;
    }
    int rc = -1;
    if (!ok) {
        eldr_errf(err, errlen, "layer selection: out of memory for %lld pairs", (long long)c->P);
        goto out;
    }
    out->L = L;
    progress_t pg;
    progress_init(&pg, c->progress, c->progress_ctx);
    for (int step = 0; step < L; step++) {
        progress_tick(&pg, LAYERSEL_WHAT, step, L);
        if (c->cancel && *c->cancel) {
            eldr_errf(err, errlen, "layer selection: cancelled after %d of %d steps", step, L);
            rc = LAYERSEL_CANCELLED;
            goto out;
        }
        int n = 0;
        for (int l = 0; l < L; l++)
            if (!used[l])
                cands[n++] = l;
        eval_step(jobs, nt, n, cand_lo, cand_hi, cand_rho, todo);
        int best = 0;   /* candidates ascend, so ties keep the lower layer */
        for (int k = 1; k < n; k++)
            if (better(cand_rho[k], cand_rho[best]))
                best = k;
        int l = cands[best];
        used[l] = 1;
        out->order[step] = l;
        out->curve[step] = cand_rho[best];
        const double *dot = c->dot + (size_t)l * (size_t)c->P;
        const double *sq = c->sq + (size_t)l * (size_t)c->n_req;
        for (int64_t p = 0; p < c->P; p++)
            cum_dot[p] += dot[p];
        for (int64_t r = 0; r < c->n_req; r++)
            cum_sq[r] += sq[r];
    }
    progress_tick(&pg, LAYERSEL_WHAT, L, L);
    int peak = -1;
    for (int s = 0; s < L; s++)
        if (!isnan(out->curve[s]) && (peak < 0 || out->curve[s] > out->curve[peak]))
            peak = s;
    if (peak < 0) {
        eldr_errf(err, errlen, "layer selection: rho is undefined for every layer set "
                  "(the distances of all %lld pairs are equal)", (long long)c->P);
        goto out;
    }
    out->n_star = peak + 1;
    out->rho = out->curve[peak];
    out->mask = eldr_calloc((size_t)out->n_star, sizeof *out->mask);
    if (!out->mask) {
        eldr_errf(err, errlen, "layer selection: out of memory");
        goto out;
    }
    memcpy(out->mask, out->order, (size_t)out->n_star * sizeof *out->mask);
    qsort(out->mask, (size_t)out->n_star, sizeof *out->mask, cmp_int);
    rc = 0;
out:
    for (int k = 0; k < nt; k++) {
        free(jobs[k].inv);
        free(jobs[k].keys.key);
        rank_work_free(&jobs[k].w);
    }
    free(cum_dot);
    free(cum_sq);
    free(cands);
    free(todo);
    free(cand_rho);
    free(cand_lo);
    free(cand_hi);
    free(used);
    if (rc)
        layersel_result_free(out);
    return rc;
}

void layersel_result_free(layersel_result *r)
{
    free(r->order);
    free(r->curve);
    free(r->mask);
    memset(r, 0, sizeof *r);
}

int layersel_run(const trace_t *t, sig_variant v, const float *idf_full,
                 const rho_pairs *pr, int threads, volatile int *cancel,
                 layersel_result *out, char *err, size_t errlen)
{
    return layersel_run_progress(t, v, idf_full, pr, threads, cancel, NULL, NULL, out, err,
                                 errlen);
}

int layersel_run_progress(const trace_t *t, sig_variant v, const float *idf_full,
                          const rho_pairs *pr, int threads, volatile int *cancel,
                          progress_fn fn, void *fn_ctx, layersel_result *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof *out);
    layersel_ctx *c = layersel_prepare(t, v, idf_full, pr, threads, err, errlen);
    if (!c)
        return -1;
    layersel_set_cancel(c, cancel);
    layersel_set_progress(c, fn, fn_ctx);
    int rc = layersel_greedy(c, out, err, errlen);
    layersel_free(c);
    return rc;
}
