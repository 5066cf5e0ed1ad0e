/* simdot.c - dot products of many rows against a few vectors (simdot.h).
 *
 * Layout of the work: rows in blocks of 4 (a thread owns a contiguous run
 * of blocks), vectors in groups of up to 16 (4 blocks of 4), d in chunks of
 * SIMDOT_CHUNK floats. For one row block and one vector group the kernel
 * walks the chunks, and in each chunk the 4 vector blocks: the 4 row
 * chunks (8 KB) stay in L1 while the vector chunks stream from L2. Each
 * (row, vector) pair has one vector of lane partial sums, kept in `part`
 * between chunks, so chunking changes nothing in the arithmetic: lane l of
 * pair (i, c) is the sum over j = l (mod lanes) in increasing j, and the
 * lanes are reduced in one fixed order at the end. A short block (n or k
 * not a multiple of 4) repeats its last row or vector and drops the
 * duplicate results. */
#include "simdot.h"

#include <cblas.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#define SIMDOT_ROWS 8      /* rows per block */
#define SIMDOT_CHUNK 512   /* floats of d per chunk: 8 rows x 2 KB in L1 */
#define SIMDOT_GROUP 4     /* vector blocks of 4 per group: 16 vectors */
#define SIMDOT_LANES 16    /* partial sums per pair (AVX2 uses the first 8) */
#define SIMDOT_MIN_WORK (1 << 21) /* multiply-adds worth a second thread */

/* Lane partials of one 8-row x 4-vector block: [row][vector][lane]. */
typedef float block_part[8][4][SIMDOT_LANES];

typedef void (*chunk_fn)(const float *const xr[8], const float *const vc[4], int j0, int j1,
                         block_part part);

/* AVX-512: 8 rows x 2 vectors = 16 accumulators in zmm registers for a
 * chunk (the 8 row chunks stay in L1; each vector chunk is loaded once per
 * 8 rows, which halves the L2 traffic of a 4 x 4 block). The tail of d
 * (d % 16) goes through masked loads, so the lanes past d add zero. */
#define FMA8_512(acc, v) do { \
        _Pragma("GCC unroll 8") for (int r_ = 0; r_ < 8; r_++) \
            acc[r_] = _mm512_fmadd_ps(xv[r_], v, acc[r_]); \
    } while (0)

__attribute__((target("avx512f")))
static void rows8_pair_avx512(const float *const xr[8], const float *va, const float *vb, int j0,
                              int j1, block_part part, int c)
{
    __m512 a0[8], a1[8];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        a0[r] = _mm512_loadu_ps(part[r][c]);
        a1[r] = _mm512_loadu_ps(part[r][c + 1]);
    }
    for (int j = j0; j < j1; j += 16) {
        __mmask16 m = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
        __m512 xv[8];
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++)
            xv[r] = _mm512_maskz_loadu_ps(m, xr[r] + j);
        __m512 v = _mm512_maskz_loadu_ps(m, va + j);
        FMA8_512(a0, v);
        v = _mm512_maskz_loadu_ps(m, vb + j);
        FMA8_512(a1, v);
    }
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        _mm512_storeu_ps(part[r][c], a0[r]);
        _mm512_storeu_ps(part[r][c + 1], a1[r]);
    }
}

__attribute__((target("avx512f")))
static void chunk_avx512(const float *const xr[8], const float *const vc[4], int j0, int j1,
                         block_part part)
{
    rows8_pair_avx512(xr, vc[0], vc[1], j0, j1, part, 0);
    rows8_pair_avx512(xr, vc[2], vc[3], j0, j1, part, 2);
}

/* AVX2 has 16 ymm registers: 4 rows x 2 vectors at a time (8
 * accumulators), 8 lanes; the tail of d through masked loads. */
__attribute__((target("avx2,fma")))
static void rows4_pair_avx2(const float *const xr[4], const float *va, const float *vb, int j0,
                            int j1, block_part part, int r0, int c)
{
    static const int ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256 a0[4], a1[4];
    #pragma GCC unroll 8
    for (int r = 0; r < 4; r++) {
        a0[r] = _mm256_loadu_ps(part[r0 + r][c]);
        a1[r] = _mm256_loadu_ps(part[r0 + r][c + 1]);
    }
    for (int j = j0; j < j1; j += 8) {
        int left = j1 - j < 8 ? j1 - j : 8;
        __m256i m = _mm256_loadu_si256((const __m256i *)(ones + 8 - left));
        __m256 xv[4];
        #pragma GCC unroll 8
        for (int r = 0; r < 4; r++)
            xv[r] = _mm256_maskload_ps(xr[r] + j, m);
        __m256 v = _mm256_maskload_ps(va + j, m);
        #pragma GCC unroll 8
        for (int r = 0; r < 4; r++)
            a0[r] = _mm256_fmadd_ps(xv[r], v, a0[r]);
        v = _mm256_maskload_ps(vb + j, m);
        #pragma GCC unroll 8
        for (int r = 0; r < 4; r++)
            a1[r] = _mm256_fmadd_ps(xv[r], v, a1[r]);
    }
    #pragma GCC unroll 8
    for (int r = 0; r < 4; r++) {
        _mm256_storeu_ps(part[r0 + r][c], a0[r]);
        _mm256_storeu_ps(part[r0 + r][c + 1], a1[r]);
    }
}

__attribute__((target("avx2,fma")))
static void chunk_avx2(const float *const xr[8], const float *const vc[4], int j0, int j1,
                       block_part part)
{
    for (int r0 = 0; r0 < 8; r0 += 4)
        for (int c = 0; c < 4; c += 2)
            rows4_pair_avx2(xr + r0, vc[c], vc[c + 1], j0, j1, part, r0, c);
}

/* Lanes reduced pairwise in a fixed tree: deterministic, and a little more
 * accurate than a running sum. */
static float reduce_lanes(const float *p, int lanes)
{
    float t[SIMDOT_LANES];
    memcpy(t, p, (size_t)lanes * sizeof *t);
    for (int w = lanes / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            t[l] += t[l + w];
    return t[0];
}

typedef struct job {
    chunk_fn chunk;
    int lanes;
    const float *x, *v;
    int n, d, k;
    float *out;
    size_t ldo;
    int b0, b1; /* row blocks of SIMDOT_ROWS [b0, b1) */
} job;

/* Rows 8b..8b+7 against vectors 4g0.. of one group, all of d. */
static void block_group(const job *jb, int b, int g0, int g1)
{
    block_part part[SIMDOT_GROUP];
    const float *xr[SIMDOT_ROWS], *vc[SIMDOT_GROUP][4];
    memset(part, 0, sizeof part);
    for (int r = 0; r < SIMDOT_ROWS; r++) {
        int i = SIMDOT_ROWS * b + r < jb->n ? SIMDOT_ROWS * b + r : jb->n - 1;
        xr[r] = jb->x + (size_t)i * (size_t)jb->d;
    }
    for (int g = g0; g < g1; g++)
        for (int c = 0; c < 4; c++) {
            int vi = 4 * g + c < jb->k ? 4 * g + c : jb->k - 1;
            vc[g - g0][c] = jb->v + (size_t)vi * (size_t)jb->d;
        }
    for (int j0 = 0; j0 < jb->d; j0 += SIMDOT_CHUNK) {
        int j1 = jb->d - j0 > SIMDOT_CHUNK ? j0 + SIMDOT_CHUNK : jb->d;
        for (int g = g0; g < g1; g++)
            jb->chunk(xr, vc[g - g0], j0, j1, part[g - g0]);
    }
    for (int g = g0; g < g1; g++)
        for (int c = 0; c < 4 && 4 * g + c < jb->k; c++)
            for (int r = 0; r < SIMDOT_ROWS && SIMDOT_ROWS * b + r < jb->n; r++)
                jb->out[(size_t)(4 * g + c) * jb->ldo + (size_t)(SIMDOT_ROWS * b + r)] =
                    reduce_lanes(part[g - g0][r][c], jb->lanes);
}

static void *run_job(void *arg)
{
    const job *jb = arg;
    int groups = (jb->k + 3) / 4;
    for (int b = jb->b0; b < jb->b1; b++)
        for (int g0 = 0; g0 < groups; g0 += SIMDOT_GROUP)
            block_group(jb, b, g0, g0 + SIMDOT_GROUP < groups ? g0 + SIMDOT_GROUP : groups);
    return NULL;
}

int simdot_supported(simdot_kind kind)
{
    __builtin_cpu_init();
    switch (kind) {
    case SIMDOT_AVX512: return __builtin_cpu_supports("avx512f");
    case SIMDOT_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default: return 1;
    }
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
    return n < 1 ? 1 : n > 8 ? 8 : n;
}

#define SIMDOT_MAX_THREADS 8

void simdot(simdot_kind kind, const float *x, int n, int d, const float *v, int k, float *out,
            size_t ldo, int threads)
{
    if (n <= 0 || k <= 0 || d <= 0)
        return;
    if (kind == SIMDOT_AUTO || !simdot_supported(kind))
        kind = simdot_best();
    if (kind == SIMDOT_BLAS) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, n, d, 1.0f, v, d, x, d, 0.0f,
                    out, (int)ldo);
        return;
    }
    int blocks = (n + SIMDOT_ROWS - 1) / SIMDOT_ROWS;
    if (threads <= 0)
        threads = simdot_default_threads();
    if (threads > SIMDOT_MAX_THREADS)
        threads = SIMDOT_MAX_THREADS;
    if ((double)n * d * k < SIMDOT_MIN_WORK)
        threads = 1;
    if (threads > blocks)
        threads = blocks;
    job jobs[SIMDOT_MAX_THREADS];
    pthread_t tid[SIMDOT_MAX_THREADS];
    int started[SIMDOT_MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){
            .chunk = kind == SIMDOT_AVX512 ? chunk_avx512 : chunk_avx2,
            .lanes = kind == SIMDOT_AVX512 ? 16 : 8,
            .x = x, .v = v, .n = n, .d = d, .k = k, .out = out, .ldo = ldo,
            .b0 = (int)((long long)blocks * t / threads),
            .b1 = (int)((long long)blocks * (t + 1) / threads),
        };
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tid[t], NULL, run_job, &jobs[t]) == 0;
    run_job(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else /* no thread: the caller does that share, the numbers are the same */
            run_job(&jobs[t]);
    }
}
