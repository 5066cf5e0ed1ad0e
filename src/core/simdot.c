/* simdot.c - dot products of many rows against a few vectors (simdot.h).
 *
 * The vectors are packed once per call, and each block of 8 rows is packed
 * chunk by chunk, into layouts the kernel reads as single forward streams:
 *   vectors: per chunk of d, per pair of vectors, per step of 16 floats,
 *            the 16 floats of the first vector then those of the second;
 *   rows:    per step, the 16 floats of each of the 8 rows.
 * d is padded with zeros to a multiple of 16 (so the kernel needs no tail
 * code) and rows past n with zero rows. Packing also breaks the cache-set
 * aliasing of rows whose stride is a multiple of 4 KB (d = 1536, 6144),
 * which costs a strided kernel a third of its speed.
 *
 * The kernel holds 8 rows x 2 vectors of accumulators of 16 lanes (AVX-512:
 * 16 zmm registers; AVX2: the same lanes as two ymm halves, 2 rows at a
 * time). A chunk of packed rows (16 KB) stays in L1 while every pair of
 * vectors streams past it; lane partials wait in `part` between chunks.
 * Lane l of pair (i, c) is a fused multiply-add chain over j = l (mod 16)
 * in increasing j, and the 16 lanes are reduced in one fixed tree, so the
 * result is the same whatever block, chunk, thread or (AVX-512 or AVX2)
 * kernel computed it. */
#include "simdot.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SIMDOT_X86 1
#else
#define SIMDOT_X86 0
#endif

#define ROWS 8             /* rows per block */
#define LANES 16           /* floats per step, partial sums per pair */
#define CHUNK_STEPS 32     /* steps per chunk: 512 floats, 8 rows = 16 KB */
#define MIN_WORK (1 << 21) /* multiply-adds worth a second thread */
#define MAX_THREADS 8
#define GRAIN 2            /* row blocks a thread claims at once */

/* acc: [ROWS][2][LANES], the partials of 8 rows against one pair of
 * vectors; xs: packed rows of a chunk; vs: that pair's packed chunk.
 * pf: npf row chunks (in x itself) to prefetch, a cache line per step
 * each, so that the memory stream of the next chunk overlaps this one's
 * arithmetic instead of stalling the packing. */
typedef struct prefetch {
    const float *row[ROWS];
    int n;
} prefetch;

typedef void (*kernel_fn)(const float *xs, const float *vs, int steps, float *acc, int first,
                          const prefetch *pf);

static inline void prefetch_step(const prefetch *pf, int s)
{
    for (int t = 0; t < pf->n; t++)
        __builtin_prefetch(pf->row[t] + (size_t)s * LANES, 0, 3);
}

#if SIMDOT_X86
__attribute__((target("avx512f")))
static void kernel_avx512(const float *xs, const float *vs, int steps, float *acc, int first,
                          const prefetch *pf)
{
    __m512 a[ROWS], b[ROWS]; /* row r against the first / second vector */
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; r++) {
        a[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (r * 2 + 0) * LANES);
        b[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (r * 2 + 1) * LANES);
    }
    for (int s = 0; s < steps; s++, xs += ROWS * LANES, vs += 2 * LANES) {
        prefetch_step(pf, s);
        __m512 va = _mm512_loadu_ps(vs), vb = _mm512_loadu_ps(vs + LANES);
#pragma GCC unroll 8
        for (int r = 0; r < ROWS; r++) {
            __m512 x = _mm512_loadu_ps(xs + r * LANES);
            a[r] = _mm512_fmadd_ps(x, va, a[r]);
            b[r] = _mm512_fmadd_ps(x, vb, b[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; r++) {
        _mm512_storeu_ps(acc + (r * 2 + 0) * LANES, a[r]);
        _mm512_storeu_ps(acc + (r * 2 + 1) * LANES, b[r]);
    }
}

/* Two rows at a time: 2 rows x 2 vectors x 2 halves = 8 ymm accumulators. */
__attribute__((target("avx2,fma")))
static void rows2_avx2(const float *xs, const float *vs, int steps, float *acc, int first, int r0)
{
    __m256 a[8]; /* [row 0..1][vector 0..1][half 0..1] */
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++)
        a[t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + r0 * 2 * LANES + t * 8);
    for (int s = 0; s < steps; s++, xs += ROWS * LANES, vs += 2 * LANES) {
#pragma GCC unroll 2
        for (int r = 0; r < 2; r++) {
            __m256 xlo = _mm256_loadu_ps(xs + (r0 + r) * LANES);
            __m256 xhi = _mm256_loadu_ps(xs + (r0 + r) * LANES + 8);
            a[r * 4 + 0] = _mm256_fmadd_ps(xlo, _mm256_loadu_ps(vs), a[r * 4 + 0]);
            a[r * 4 + 1] = _mm256_fmadd_ps(xhi, _mm256_loadu_ps(vs + 8), a[r * 4 + 1]);
            a[r * 4 + 2] = _mm256_fmadd_ps(xlo, _mm256_loadu_ps(vs + 16), a[r * 4 + 2]);
            a[r * 4 + 3] = _mm256_fmadd_ps(xhi, _mm256_loadu_ps(vs + 24), a[r * 4 + 3]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++)
        _mm256_storeu_ps(acc + r0 * 2 * LANES + t * 8, a[t]);
}

__attribute__((target("avx2,fma")))
static void kernel_avx2(const float *xs, const float *vs, int steps, float *acc, int first,
                        const prefetch *pf)
{
    for (int s = 0; s < steps; s++)
        prefetch_step(pf, s);
    for (int r0 = 0; r0 < ROWS; r0 += 2)
        rows2_avx2(xs, vs, steps, acc, first, r0);
}
#endif

/* The 16 lanes added pairwise in a fixed tree. */
static float reduce_lanes(const float *p)
{
    float t[LANES];
    memcpy(t, p, sizeof t);
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            t[l] += t[l + w];
    return t[0];
}

typedef struct plan {
    kernel_fn kernel;
    const float *x;
    int n, d, k;
    int pairs, steps;   /* ceil(k/2) vector pairs, ceil(d/16) steps */
    const float *vpack; /* packed vectors, pairs * 2 * steps * LANES */
    float *out;
    size_t ldo;
} plan;

typedef struct job {
    const plan *p;
    atomic_int *next;   /* the next unclaimed row block, shared */
    int blocks;
    float *xbuf;        /* CHUNK_STEPS * ROWS * LANES */
    float *part;        /* pairs * ROWS * 2 * LANES */
} job;

/* Floats [s0, s0 + steps) * LANES of row `src` (or zeros) to dst, one
 * LANES run every `stride` floats, zero past d. */
static void pack_run(float *dst, size_t stride, const float *src, int d, int s0, int steps)
{
    for (int s = 0; s < steps; s++, dst += stride) {
        int j = (s0 + s) * LANES, have = src ? d - j : 0;
        if (have >= LANES) { /* the common case, a fixed-size copy */
            memcpy(dst, src + j, LANES * sizeof *dst);
            continue;
        }
        have = have < 0 ? 0 : have > LANES ? LANES : have;
        if (have)
            memcpy(dst, src + j, (size_t)have * sizeof *dst);
        memset(dst + have, 0, (size_t)(LANES - have) * sizeof *dst);
    }
}

/* vpack offset of pair q's chunk starting at step s0 (steps long). */
static size_t vpack_at(const plan *p, int s0, int steps, int q)
{
    return (size_t)p->pairs * 2 * LANES * (size_t)s0 + (size_t)q * 2 * LANES * (size_t)steps;
}

static void pack_vectors(const plan *p, const float *v, float *vpack)
{
    for (int s0 = 0; s0 < p->steps; s0 += CHUNK_STEPS) {
        int steps = p->steps - s0 < CHUNK_STEPS ? p->steps - s0 : CHUNK_STEPS;
        for (int c = 0; c < 2 * p->pairs; c++) {
            const float *src = c < p->k ? v + (size_t)c * (size_t)p->d : NULL;
            float *dst = vpack + vpack_at(p, s0, steps, c / 2) + (size_t)(c % 2) * LANES;
            pack_run(dst, 2 * LANES, src, p->d, s0, steps);
        }
    }
}

static void run_block(const job *jb, int b)
{
    const plan *p = jb->p;
    int i0 = b * ROWS;
    for (int s0 = 0; s0 < p->steps; s0 += CHUNK_STEPS) {
        int steps = p->steps - s0 < CHUNK_STEPS ? p->steps - s0 : CHUNK_STEPS;
        for (int r = 0; r < ROWS; r++) {
            const float *src = i0 + r < p->n ? p->x + (size_t)(i0 + r) * (size_t)p->d : NULL;
            pack_run(jb->xbuf + (size_t)r * LANES, ROWS * LANES, src, p->d, s0, steps);
        }
        /* the rows of the next chunk (or block), shared out among the pairs */
        int ns0 = s0 + CHUNK_STEPS < p->steps ? s0 + CHUNK_STEPS : 0;
        int ni0 = ns0 ? i0 : i0 + ROWS;
        prefetch pf[ROWS];
        memset(pf, 0, sizeof pf);
        for (int r = 0; r < ROWS && ni0 + r < p->n; r++) {
            prefetch *to = &pf[r % (p->pairs < ROWS ? p->pairs : ROWS)];
            to->row[to->n++] = p->x + (size_t)(ni0 + r) * (size_t)p->d + (size_t)ns0 * LANES;
        }
        for (int q = 0; q < p->pairs; q++)
            p->kernel(jb->xbuf, p->vpack + vpack_at(p, s0, steps, q), steps,
                      jb->part + (size_t)q * ROWS * 2 * LANES, s0 == 0, &pf[q < ROWS ? q : 0]);
    }
    for (int q = 0; q < p->pairs; q++)
        for (int r = 0; r < ROWS && i0 + r < p->n; r++)
            for (int h = 0; h < 2 && 2 * q + h < p->k; h++)
                p->out[(size_t)(2 * q + h) * p->ldo + (size_t)(i0 + r)] =
                    reduce_lanes(jb->part + (((size_t)q * ROWS + r) * 2 + h) * LANES);
}

/* Threads claim GRAIN blocks at a time, so a thread that the (shared)
 * machine does not schedule leaves its work to the others; who computes a
 * block does not change its numbers. */
static void *run_job(void *arg)
{
    const job *jb = arg;
    for (;;) {
        int b0 = atomic_fetch_add(jb->next, GRAIN);
        if (b0 >= jb->blocks)
            return NULL;
        for (int b = b0; b < b0 + GRAIN && b < jb->blocks; b++)
            run_block(jb, b);
    }
}

int simdot_supported(simdot_kind kind)
{
#if SIMDOT_X86
    __builtin_cpu_init();
    if (kind == SIMDOT_AVX512)
        return __builtin_cpu_supports("avx512f");
    if (kind == SIMDOT_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    if (kind == SIMDOT_AVX512 || kind == SIMDOT_AVX2)
        return 0;
#endif
    return 1;
}

simdot_kind simdot_best(void)
{
    if (simdot_supported(SIMDOT_AVX512))
        return SIMDOT_AVX512;
    if (simdot_supported(SIMDOT_AVX2))
        return SIMDOT_AVX2;
    return SIMDOT_BLAS;
}

const char *simdot_name(simdot_kind kind)
{
    if (kind == SIMDOT_AUTO)
        kind = simdot_best();
    return kind == SIMDOT_AVX512 ? "avx512" : kind == SIMDOT_AVX2 ? "avx2" : "blas";
}

int simdot_default_threads(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

static void blas_dots(const float *x, int n, int d, const float *v, int k, float *out, size_t ldo)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, n, d, 1.0f, v, d, x, d, 0.0f, out,
                (int)ldo);
}

void simdot(simdot_kind kind, const float *x, int n, int d, const float *v, int k, float *out,
            size_t ldo, int threads)
{
    if (n <= 0 || k <= 0 || d <= 0)
        return;
    if (kind == SIMDOT_AUTO || !simdot_supported(kind))
        kind = simdot_best();
    if (kind == SIMDOT_BLAS) {
        blas_dots(x, n, d, v, k, out, ldo);
        return;
    }
    plan p = {.x = x, .n = n, .d = d, .k = k, .pairs = (k + 1) / 2, .steps = (d + LANES - 1) / LANES,
              .out = out, .ldo = ldo};
#if SIMDOT_X86
    p.kernel = kind == SIMDOT_AVX512 ? kernel_avx512 : kernel_avx2;
#endif
    int blocks = (n + ROWS - 1) / ROWS;
    if (threads <= 0)
        threads = simdot_default_threads();
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if ((double)n * d * k < MIN_WORK)
        threads = 1;
    if (threads > blocks)
        threads = blocks;
    size_t vfloats = (size_t)p.pairs * 2 * LANES * (size_t)p.steps;
    size_t per_thread = (size_t)CHUNK_STEPS * ROWS * LANES + (size_t)p.pairs * ROWS * 2 * LANES;
    float *ws = malloc((vfloats + per_thread * (size_t)threads) * sizeof *ws);
    if (!ws) { /* no room to pack: the library does it in place */
        blas_dots(x, n, d, v, k, out, ldo);
        return;
    }
    pack_vectors(&p, v, ws);
    p.vpack = ws;
    job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    atomic_int next = 0;
    for (int t = 0; t < threads; t++) {
        float *own = ws + vfloats + per_thread * (size_t)t;
        jobs[t] = (job){.p = &p,
                        .next = &next,
                        .blocks = blocks,
                        .xbuf = own,
                        .part = own + (size_t)CHUNK_STEPS * ROWS * LANES};
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tid[t], NULL, run_job, &jobs[t]) == 0;
    run_job(&jobs[0]);
    for (int t = 1; t < threads; t++) /* a thread that did not start left its share to us */
        if (started[t])
            pthread_join(tid[t], NULL);
    free(ws);
}
