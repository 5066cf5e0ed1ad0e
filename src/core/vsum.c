/* vsum.c - vectorised double sums over float rows (vsum.h).
 *
 * Written with GCC vector types of 8 doubles: each clone lowers them to
 * one zmm, two ymm or four xmm registers. Lane l of a sum takes the
 * elements j = l (mod 8) below d - d % 8 in increasing j; the lanes are
 * added pairwise (l, l+4), (l, l+2), (l, l+1), then the scalar tail. */
#include "vsum.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "simdot.h"

#define VSUM_MIN_WORK (1 << 20) /* elements worth a second thread */
#define VSUM_MAX_THREADS 8
#define VSUM_COLS 512           /* columns per block of a move pass: 4 KB of each sum */

typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

#define VSUM_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))

/* Loads as macros, not functions: a v8d argument or return value in the
 * baseline clone would change the ABI. */
#define LOAD_D(v, p) memcpy(&(v), (p), sizeof(v))
#define LOAD_F(v, p) do { v8f f_; memcpy(&f_, (p), sizeof f_); (v) = __builtin_convertvector(f_, v8d); } while (0)

/* The fixed-order reduction of 8 lanes. */
static double lanes(const double *s)
{
    double t[8];
    memcpy(t, s, sizeof t);
    for (int w = 4; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            t[l] += t[l + w];
    return t[0];
}

VSUM_CLONES
void vsum_add(double *acc, const float *row, int d, double sign)
{
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d a, r;
        LOAD_D(a, acc + j);
        LOAD_F(r, row + j);
        a += sign * r;
        memcpy(acc + j, &a, sizeof a);
    }
    for (; j < d; j++)
        acc[j] += sign * row[j];
}

VSUM_CLONES
double vsum_dot(const double *a, const float *b, int d)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8)
    {
        v8d va, vb;
        LOAD_D(va, a + j);
        LOAD_F(vb, b + j);
        s += va * vb;
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++)
        t += a[j] * b[j];
    return t;
}

VSUM_CLONES
double vsum_norm2(const double *a, int d)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d v;
        LOAD_D(v, a + j);
        s += v * v;
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++)
        t += a[j] * a[j];
    return t;
}

VSUM_CLONES
double vsum_norm2_f(const float *row, int d)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d v;
        LOAD_F(v, row + j);
        s += v * v;
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++)
        t += (double)row[j] * row[j];
    return t;
}

VSUM_CLONES
double vsum_unit(float *mu, const double *a, int d, double nrm)
{
    double inv = 1.0 / nrm; /* a multiply: a divide per element costs more than the rest */
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d va, old;
        LOAD_D(va, a + j);
        LOAD_F(old, mu + j);
        v8f nu = __builtin_convertvector(va * inv, v8f);
        v8d diff = __builtin_convertvector(nu, v8d) - old;
        s += diff * diff;
        memcpy(mu + j, &nu, sizeof nu);
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++) {
        float nu = (float)(a[j] * inv);
        t += ((double)nu - mu[j]) * ((double)nu - mu[j]);
        mu[j] = nu;
    }
    return t;
}

/* Work [0, items) shared among threads that claim `grain` items at a
 * time from a counter (the caller is one of them), so a thread that the
 * shared machine does not schedule leaves its work to the others; which
 * thread does an item changes none of its numbers. */
typedef struct crew {
    void (*fn)(void *ctx, int lo, int hi);
    void *ctx;
    int items, grain;
    atomic_int next;
} crew;

static void *run_crew(void *arg)
{
    crew *cr = arg;
    for (;;) {
        int lo = atomic_fetch_add(&cr->next, cr->grain);
        if (lo >= cr->items)
            return NULL;
        cr->fn(cr->ctx, lo, lo + cr->grain < cr->items ? lo + cr->grain : cr->items);
    }
}

static void split(int items, int grain, int threads, void (*fn)(void *, int, int), void *ctx)
{
    if (threads <= 0)
        threads = simdot_default_threads();
    if (threads > VSUM_MAX_THREADS)
        threads = VSUM_MAX_THREADS;
    crew cr = {.fn = fn, .ctx = ctx, .items = items, .grain = grain};
    atomic_init(&cr.next, 0);
    pthread_t tid[VSUM_MAX_THREADS];
    int started[VSUM_MAX_THREADS] = {0};
    for (int t = 1; t < threads && (long long)t * grain < items; t++)
        started[t] = pthread_create(&tid[t], NULL, run_crew, &cr) == 0;
    run_crew(&cr);
    for (int t = 1; t < threads; t++) /* a thread that did not start left its share to us */
        if (started[t])
            pthread_join(tid[t], NULL);
}

typedef struct move_job {
    double *acc;
    const float *x;
    int d, m;
    const int *rows, *from, *to;
} move_job;

/* Column blocks [lo, hi) of VSUM_COLS: the partial rows of sums of a
 * block stay in cache while the rows stream past, and no two threads
 * write the same cache line. */
static void move_cols(void *ctx, int lo, int hi)
{
    const move_job *g = ctx;
    size_t d = (size_t)g->d;
    for (int b = lo; b < hi; b++) {
        size_t j0 = (size_t)b * VSUM_COLS;
        int len = g->d - (int)j0 < VSUM_COLS ? g->d - (int)j0 : VSUM_COLS;
        for (int t = 0; t < g->m; t++) {
            const float *row = g->x + (size_t)g->rows[t] * d + j0;
            if (g->from && g->from[t] >= 0)
                vsum_add(g->acc + (size_t)g->from[t] * d + j0, row, len, -1.0);
            vsum_add(g->acc + (size_t)g->to[t] * d + j0, row, len, 1.0);
        }
    }
}

void vsum_move_rows(double *acc, const float *x, int d, const int *rows, const int *from,
                    const int *to, int m, int threads)
{
    move_job g = {acc, x, d, m, rows, from, to};
    split((d + VSUM_COLS - 1) / VSUM_COLS, 1, (double)m * d < VSUM_MIN_WORK ? 1 : threads, move_cols, &g);
}

typedef struct norm_job {
    const float *x;
    int d;
    double *out;
} norm_job;

static void norm_rows(void *ctx, int lo, int hi)
{
    const norm_job *nj = ctx;
    for (int i = lo; i < hi; i++)
        nj->out[i] = vsum_norm2_f(nj->x + (size_t)i * (size_t)nj->d, nj->d);
}

void vsum_row_norms2(const float *x, int n, int d, double *out, int threads)
{
    norm_job nj = {x, d, out};
    split(n, 16, (double)n * d < VSUM_MIN_WORK ? 1 : threads, norm_rows, &nj);
}
