/* signature.c - expert signatures: recipes, IDF, one row, a batch
 * (see signature.h and docs/signatures.md).
 *
 * The work is split into a per-variant row kernel, chosen once per call, so
 * that the loop over the |S|*E cells has no branch and the compiler can
 * vectorise it. A kernel writes the raw (unnormalised) values into out and
 * sig_row sums their squares in double and scales by one global factor. */
#include "signature.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

static const char *const variant_names[SIG_N_VARIANTS] = {
    "count", "count_idf", "sqrt_count", "binary", "gate_prob", "gate_logit",
};

const char *sig_variant_name(sig_variant v)
{
    if ((int)v < 0 || v >= SIG_N_VARIANTS)
        return "unknown";
    return variant_names[v];
}

int sig_variant_parse(const char *name)
{
    if (!name)
        return -1;
    for (int v = 0; v < SIG_N_VARIANTS; v++)
        if (strcmp(name, variant_names[v]) == 0)
            return v;
    /* the reference implementation's name for the same recipe: the summed
     * prefill softmax over all experts, masked, no idf, one global norm */
    if (strcmp(name, SIG_GATE_PROB_ALL) == 0)
        return SIG_GATE_PROB;
    return -1;
}

int sig_variant_uses_gate(sig_variant v)
{
    return v == SIG_GATE_PROB || v == SIG_GATE_LOGIT;
}

/* ---- recipes ---------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int sig_recipe_init(sig_recipe *r, sig_variant v, int L, int E,
                    const int *layers, int n_layers, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if ((int)v < 0 || v >= SIG_N_VARIANTS)
        return eldr_errf(err, errlen, "signature recipe: unknown variant %d", (int)v);
    if (L < 1 || E < 1)
        return eldr_errf(err, errlen, "signature recipe: bad geometry layers=%d experts=%d", L, E);
    if (layers && n_layers < 1)
        return eldr_errf(err, errlen, "signature recipe: empty layer mask");
    int n = layers ? n_layers : L;
    if (n > L)
        return eldr_errf(err, errlen,
                         "signature recipe: layer mask has %d layers, the model has %d", n, L);
    int *own = malloc((size_t)n * sizeof *own);
    if (!own)
        return eldr_errf(err, errlen, "signature recipe: out of memory");
    for (int i = 0; i < n; i++)
        own[i] = layers ? layers[i] : i;
    qsort(own, (size_t)n, sizeof *own, cmp_int);
    for (int i = 0; i < n; i++) {
        if (own[i] < 0 || own[i] >= L) {
            int bad = own[i];
            free(own);
            return eldr_errf(err, errlen,
                             "signature recipe: layer %d out of range [0, %d)", bad, L);
        }
        if (i > 0 && own[i] == own[i - 1]) {
            int dup = own[i];
            free(own);
            return eldr_errf(err, errlen, "signature recipe: layer %d listed twice", dup);
        }
    }
    r->variant = v;
    r->L = L;
    r->E = E;
    r->n_layers = n;
    r->layers = own;
    return 0;
}

void sig_recipe_free(sig_recipe *r)
{
    if (!r)
        return;
    free(r->layers);
    free(r->idf);
    memset(r, 0, sizeof *r);
}

int sig_recipe_copy(sig_recipe *dst, const sig_recipe *src, char *err, size_t errlen)
{
    memset(dst, 0, sizeof *dst);
    if (!src || !src->layers)
        return eldr_errf(err, errlen, "signature recipe: copy of an uninitialised recipe");
    if (sig_recipe_init(dst, src->variant, src->L, src->E, src->layers, src->n_layers,
                        err, errlen))
        return -1;
    if (src->idf) {
        dst->idf = malloc(sig_dim(src) * sizeof *dst->idf);
        if (!dst->idf) {
            sig_recipe_free(dst);
            return eldr_errf(err, errlen, "signature recipe: out of memory");
        }
        memcpy(dst->idf, src->idf, sig_dim(src) * sizeof *dst->idf);
    }
    return 0;
}

/* ---- IDF ---------------------------------------------------------------- */

/* Every row index in [0, n); the first bad one named. */
static int check_rows(const trace_t *t, const int64_t *rows, int64_t nrows,
                      const char *what, char *err, size_t errlen)
{
    if (nrows < 0)
        return eldr_errf(err, errlen, "%s: negative row count %lld", what, (long long)nrows);
    if (!rows)
        return 0;
    for (int64_t i = 0; i < nrows; i++)
        if (rows[i] < 0 || rows[i] >= t->n)
            return eldr_errf(err, errlen, "%s: row %lld (entry %lld) out of range [0, %lld)",
                             what, (long long)rows[i], (long long)i, (long long)t->n);
    return 0;
}

int sig_idf_fit(const trace_t *t, const int64_t *rows, int64_t nrows,
                float *idf_full, char *err, size_t errlen)
{
    if (!t || !idf_full)
        return eldr_errf(err, errlen, "idf fit: no trace or no output");
    if (!rows)
        nrows = t->n;
    if (check_rows(t, rows, nrows, "idf fit", err, errlen))
        return -1;
    if (nrows < 1)
        return eldr_errf(err, errlen, "idf fit: no calibration rows");
    size_t cells = TRACE_CELLS(t);
    uint32_t *df = calloc(cells, sizeof *df);
    if (!df)
        return eldr_errf(err, errlen, "idf fit: out of memory for %zu cells", cells);
    for (int64_t i = 0; i < nrows; i++) {
        const uint16_t *c = trace_prefill_row(t, rows ? rows[i] : i);
        for (size_t j = 0; j < cells; j++)
            df[j] += c[j] != 0;
    }
    double top = (double)nrows + 1.0;
    for (size_t j = 0; j < cells; j++)
        idf_full[j] = (float)log(top / ((double)df[j] + 1.0));
    free(df);
    return 0;
}

int sig_recipe_set_idf(sig_recipe *r, const float *idf_full, char *err, size_t errlen)
{
    if (r->variant != SIG_COUNT_IDF)
        return eldr_errf(err, errlen, "signature recipe: variant %s has no idf weights",
                         sig_variant_name(r->variant));
    if (!idf_full)
        return eldr_errf(err, errlen, "signature recipe: no idf weights given");
    size_t E = (size_t)r->E;
    float *idf = malloc(sig_dim(r) * sizeof *idf);
    if (!idf)
        return eldr_errf(err, errlen, "signature recipe: out of memory");
    for (int i = 0; i < r->n_layers; i++) {
        const float *src = idf_full + (size_t)r->layers[i] * E;
        for (size_t e = 0; e < E; e++) {
            if (!isfinite(src[e])) {
                free(idf);
                return eldr_errf(err, errlen, "signature recipe: idf of layer %d expert %zu is not finite",
                                 r->layers[i], e);
            }
            idf[(size_t)i * E + e] = src[e];
        }
    }
    free(r->idf);
    r->idf = idf;
    return 0;
}

/* ---- row kernels ------------------------------------------------------ */

/* The helpers of the kernels and of a row's norm go into each of their
 * callers' clones (below), compiled for its target. */
#define SIG_INLINE static inline __attribute__((always_inline))

/* Cells go in blocks of BLK with a constant inner trip count: gcc -O2 (the
 * default build) unrolls those and emits SIMD for them, while its cheap
 * vectoriser leaves loops of unknown length (E) scalar. The tail loops
 * handle E % BLK. */
#define BLK 8

/* One layer's cells, n of them. restrict parameters tell gcc the arrays do
 * not overlap, which it needs to vectorise without runtime checks. */
SIG_INLINE void cells_count(const uint16_t *restrict c, float *restrict d, size_t n)
{
    size_t e = 0;
    for (; e + BLK <= n; e += BLK)
        for (size_t q = 0; q < BLK; q++)
            d[e + q] = (float)c[e + q];
    for (; e < n; e++)
        d[e] = (float)c[e];
}

SIG_INLINE void cells_sqrt(const uint16_t *restrict c, float *restrict d, size_t n)
{
    size_t e = 0;
    for (; e + BLK <= n; e += BLK)
        for (size_t q = 0; q < BLK; q++)
            d[e + q] = sqrtf((float)c[e + q]);
    for (; e < n; e++)
        d[e] = sqrtf((float)c[e]);
}

SIG_INLINE void cells_binary(const uint16_t *restrict c, float *restrict d, size_t n)
{
    size_t e = 0;
    for (; e + BLK <= n; e += BLK)
        for (size_t q = 0; q < BLK; q++)
            d[e + q] = (float)(c[e + q] != 0);
    for (; e < n; e++)
        d[e] = (float)(c[e] != 0);
}

SIG_INLINE void cells_idf(const uint16_t *restrict c, const float *restrict w, float *restrict d,
                      size_t n)
{
    size_t e = 0;
    for (; e + BLK <= n; e += BLK)
        for (size_t q = 0; q < BLK; q++)
            d[e + q] = (float)c[e + q] * w[e + q];
    for (; e < n; e++)
        d[e] = (float)c[e] * w[e];
}

/* A kernel reads the masked layers of one request (counts or gate, [L][E])
 * and writes the raw values to out[|S|*E]. The kernels and the row's norm
 * and scale are compiled for AVX2 too (picked at load time by the CPU):
 * eight cells a register instead of four, every cell the same operations
 * (no fused multiply-add), so a signature is the same to the bit on
 * either. */
typedef void (*sig_kernel)(const sig_recipe *r, const uint16_t *c, const float *g, float *out);
#define SIG_CLONES __attribute__((target_clones("avx2", "default")))

SIG_CLONES
static void k_count(const sig_recipe *r, const uint16_t *c, const float *g, float *out)
{
    (void)g;
    size_t E = (size_t)r->E;
    for (int i = 0; i < r->n_layers; i++)
        cells_count(c + (size_t)r->layers[i] * E, out + (size_t)i * E, E);
}

SIG_CLONES
static void k_sqrt_count(const sig_recipe *r, const uint16_t *c, const float *g, float *out)
{
    (void)g;
    size_t E = (size_t)r->E;
    for (int i = 0; i < r->n_layers; i++)
        cells_sqrt(c + (size_t)r->layers[i] * E, out + (size_t)i * E, E);
}

SIG_CLONES
static void k_binary(const sig_recipe *r, const uint16_t *c, const float *g, float *out)
{
    (void)g;
    size_t E = (size_t)r->E;
    for (int i = 0; i < r->n_layers; i++)
        cells_binary(c + (size_t)r->layers[i] * E, out + (size_t)i * E, E);
}

SIG_CLONES
static void k_count_idf(const sig_recipe *r, const uint16_t *c, const float *g, float *out)
{
    (void)g;
    size_t E = (size_t)r->E;
    /* r->idf row i belongs to masked layer i */
    for (int i = 0; i < r->n_layers; i++)
        cells_idf(c + (size_t)r->layers[i] * E, r->idf + (size_t)i * E, out + (size_t)i * E, E);
}

static void k_gate(const sig_recipe *r, const uint16_t *c, const float *g, float *out)
{
    (void)c;
    size_t E = (size_t)r->E;
    for (int i = 0; i < r->n_layers; i++)
        memcpy(out + (size_t)i * E, g + (size_t)r->layers[i] * E, E * sizeof *out);
}

/* Sum of squares in double, eight independent accumulators so the adds
 * pipeline and pair into SIMD (one chain would be latency bound). The
 * order is fixed, so the result does not depend on threads. For count and
 * binary the values are small integers and the double sum is exact. */
SIG_INLINE double sumsq(const float *x, size_t n)
{
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        a0 += (double)x[j] * x[j];
        a1 += (double)x[j + 1] * x[j + 1];
        a2 += (double)x[j + 2] * x[j + 2];
        a3 += (double)x[j + 3] * x[j + 3];
        a4 += (double)x[j + 4] * x[j + 4];
        a5 += (double)x[j + 5] * x[j + 5];
        a6 += (double)x[j + 6] * x[j + 6];
        a7 += (double)x[j + 7] * x[j + 7];
    }
    for (; j < n; j++)
        a0 += (double)x[j] * x[j];
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

/* out *= inv, the product taken in double. */
SIG_INLINE void scale(float *x, size_t n, double inv)
{
    size_t j = 0;
    for (; j + BLK <= n; j += BLK)
        for (size_t q = 0; q < BLK; q++)
            x[j + q] = (float)((double)x[j + q] * inv);
    for (; j < n; j++)
        x[j] = (float)((double)x[j] * inv);
}

static sig_kernel kernel_of(sig_variant v)
{
    switch (v) {
    case SIG_COUNT: return k_count;
    case SIG_COUNT_IDF: return k_count_idf;
    case SIG_SQRT_COUNT: return k_sqrt_count;
    case SIG_BINARY: return k_binary;
    case SIG_GATE_PROB:
    case SIG_GATE_LOGIT: return k_gate;
    default: return NULL;
    }
}

/* One row: kernel, then the single global scale. 0 ok, 1 zero vector
 * (out left all zero), -1 when the norm is not finite (NaN/Inf input). */
SIG_CLONES
static int sig_row(const sig_recipe *r, sig_kernel k, const uint16_t *c, const float *g,
                   float *out)
{
    size_t dim = sig_dim(r);
    k(r, c, g, out);
    double ss = sumsq(out, dim);
    if (!isfinite(ss))
        return -1;
    if (ss == 0.0) {
        memset(out, 0, dim * sizeof *out);   /* also clears any -0.0 */
        return 1;
    }
    scale(out, dim, 1.0 / sqrt(ss));
    return 0;
}

/* What a recipe needs before it can build anything. */
static int check_recipe(const sig_recipe *r, const char *what, char *err, size_t errlen)
{
    if (!r || !r->layers || r->n_layers < 1 || !kernel_of(r->variant))
        return eldr_errf(err, errlen, "%s: recipe not initialised", what);
    if (r->variant == SIG_COUNT_IDF && !r->idf)
        return eldr_errf(err, errlen, "%s: count_idf recipe has no idf weights (fit them first)",
                         what);
    return 0;
}

int sig_from_counts(const sig_recipe *r, const uint16_t *counts, const float *gate,
                    float *out, char *err, size_t errlen)
{
    if (check_recipe(r, "signature", err, errlen))
        return -1;
    int gated = sig_variant_uses_gate(r->variant);
    if (gated && !gate)
        return eldr_errf(err, errlen, "signature: variant %s needs gate values, none given",
                         sig_variant_name(r->variant));
    if (!gated && !counts)
        return eldr_errf(err, errlen, "signature: variant %s needs counts, none given",
                         sig_variant_name(r->variant));
    int rc = sig_row(r, kernel_of(r->variant), counts, gate, out);
    if (rc < 0)
        return eldr_errf(err, errlen, "signature: %s value not finite",
                         gated ? "gate" : "idf-weighted count");
    return rc;
}

int sig_is_zero(const sig_recipe *r, const uint16_t *counts, const float *gate)
{
    size_t E = (size_t)r->E;
    int gated = sig_variant_uses_gate(r->variant);
    for (int i = 0; i < r->n_layers; i++) {
        size_t at = (size_t)r->layers[i] * E;
        for (size_t e = 0; e < E; e++) {
            /* the kernels' values: a count's is zero only when the count
             * is (sqrt, binary, count), count_idf's is the float product */
            float v = gated ? gate[at + e]
                      : r->variant == SIG_COUNT_IDF ? (float)counts[at + e] * r->idf[(size_t)i * E + e]
                                                    : (float)counts[at + e];
            if (v != 0.0f)
                return 0;
        }
    }
    return 1;
}

/* ---- batch ---------------------------------------------------------------- */

typedef struct batch_job {
    const trace_t *t;
    const sig_recipe *r;
    sig_kernel k;
    const float *gate;          /* t->gate_prob / gate_logit, or NULL */
    const int64_t *rows;
    int64_t i0, i1;             /* this job's entries [i0, i1) */
    float *out;                 /* the whole matrix */
    uint8_t *zero_rows;
    int64_t n_zero;
    int64_t bad;                /* first entry with a non-finite norm, or -1 */
} batch_job;

static void *batch_run(void *arg)
{
    batch_job *b = arg;
    size_t dim = sig_dim(b->r), cells = TRACE_CELLS(b->t);
    b->n_zero = 0;
    b->bad = -1;
    for (int64_t i = b->i0; i < b->i1; i++) {
        int64_t row = b->rows ? b->rows[i] : i;
        const float *g = b->gate ? b->gate + (size_t)row * cells : NULL;
        int rc = sig_row(b->r, b->k, trace_prefill_row(b->t, row), g, b->out + (size_t)i * dim);
        if (rc < 0) {
            b->bad = i;
            return NULL;
        }
        b->n_zero += rc;
        if (b->zero_rows)
            b->zero_rows[i] = (uint8_t)rc;
    }
    return NULL;
}

/* Below this many output cells a second thread costs more than it saves. */
#define SIG_THREAD_MIN_CELLS (1 << 18)
#define SIG_MAX_THREADS 64

static int auto_threads(int64_t nrows, size_t dim)
{
    if ((double)nrows * (double)dim < SIG_THREAD_MIN_CELLS)
        return 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus >= 2 ? 2 : 1;
}

int sig_build_batch_threads(const trace_t *t, const sig_recipe *r, const int64_t *rows,
                            int64_t nrows, float *out, int64_t *n_zero, uint8_t *zero_rows,
                            int n_threads, char *err, size_t errlen)
{
    if (check_recipe(r, "signature batch", err, errlen))
        return -1;
    if (!t || !out)
        return eldr_errf(err, errlen, "signature batch: no trace or no output");
    if (t->L != r->L || t->E != r->E)
        return eldr_errf(err, errlen,
                         "signature batch: trace has %d layers x %d experts, recipe expects %d x %d",
                         t->L, t->E, r->L, r->E);
    if (!rows)
        nrows = t->n;
    if (check_rows(t, rows, nrows, "signature batch", err, errlen))
        return -1;
    const float *gate = NULL;
    if (r->variant == SIG_GATE_PROB)
        gate = t->gate_prob;
    else if (r->variant == SIG_GATE_LOGIT)
        gate = t->gate_logit;
    if (sig_variant_uses_gate(r->variant) && !gate)
        return eldr_errf(err, errlen, "signature batch: variant %s needs dataset %s, the trace has none",
                         sig_variant_name(r->variant), sig_variant_name(r->variant));
    if (n_threads < 0 || n_threads > SIG_MAX_THREADS)
        return eldr_errf(err, errlen, "signature batch: thread count %d not in [0, %d]",
                         n_threads, SIG_MAX_THREADS);
    size_t dim = sig_dim(r);
    int nt = n_threads ? n_threads : auto_threads(nrows, dim);
    if (nt > nrows)
        nt = nrows > 0 ? (int)nrows : 1;

    batch_job jobs[SIG_MAX_THREADS];
    pthread_t tid[SIG_MAX_THREADS];
    int started[SIG_MAX_THREADS] = {0};
    for (int j = 0; j < nt; j++) {
        jobs[j] = (batch_job){
            .t = t, .r = r, .k = kernel_of(r->variant), .gate = gate, .rows = rows,
            .i0 = nrows * j / nt, .i1 = nrows * (j + 1) / nt, .out = out,
            .zero_rows = zero_rows,
        };
    }
    /* Job 0 runs on this thread; a thread that fails to start runs here too. */
    for (int j = 1; j < nt; j++)
        started[j] = pthread_create(&tid[j], NULL, batch_run, &jobs[j]) == 0;
    batch_run(&jobs[0]);
    int64_t zeros = 0, bad = -1;
    for (int j = 1; j < nt; j++) {
        if (started[j])
            pthread_join(tid[j], NULL);
        else
            batch_run(&jobs[j]);
    }
    for (int j = 0; j < nt; j++) {
        zeros += jobs[j].n_zero;
        if (bad < 0 && jobs[j].bad >= 0)
            bad = jobs[j].bad;
    }
    if (bad >= 0)
        return eldr_errf(err, errlen, "signature batch: row %lld: %s value not finite",
                         (long long)(rows ? rows[bad] : bad),
                         gate ? sig_variant_name(r->variant) : "idf-weighted count");
    if (n_zero)
        *n_zero = zeros;
    return 0;
}

int sig_build_batch(const trace_t *t, const sig_recipe *r, const int64_t *rows,
                    int64_t nrows, float *out, int64_t *n_zero, uint8_t *zero_rows,
                    char *err, size_t errlen)
{
    return sig_build_batch_threads(t, r, rows, nrows, out, n_zero, zero_rows, 0, err, errlen);
}
