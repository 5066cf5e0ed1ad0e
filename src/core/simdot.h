/* simdot.h - the similarity step of K-means: the dot products of many rows
 * against a few vectors, out[c][i] = x_i . v_c.
 *
 * This is the tall-skinny product X V^T (X: n x d, V: k x d, k small) that
 * dominates a K-means round. A general sgemm packs X into panels on every
 * call, and the OpenBLAS of Debian 12 does not recognise recent Xeons
 * (it falls back to SSE3 kernels), so eldr has its own kernel: 6 rows x 4
 * vectors of accumulators, AVX-512 or AVX2+FMA chosen at run time by the
 * CPU, d in cache-sized chunks, blocks of rows claimed by threads.
 * cblas_sgemm is the fallback on CPUs with neither (and if the kernel's
 * small workspace cannot be allocated).
 *
 * Determinism: every x_i . v_c is the same chain of float multiply-adds
 * (16 lanes along d, then a fixed lane reduction) whatever block, chunk or
 * thread computes it, and the AVX2 kernel runs the same lanes as the
 * AVX-512 one: the output does not depend on the thread count, nor on
 * which of the two kernels ran. BLAS may differ in the last bits. */
#ifndef ELDR_SIMDOT_H
#define ELDR_SIMDOT_H

#include <stddef.h>

typedef enum simdot_kind {
    SIMDOT_AUTO,    /* the best one this CPU supports */
    SIMDOT_BLAS,    /* cblas_sgemm: any CPU */
    SIMDOT_AVX2,    /* AVX2 + FMA */
    SIMDOT_AVX512   /* AVX-512F */
} simdot_kind;

/* 1 if this CPU runs that kernel (SIMDOT_AUTO and SIMDOT_BLAS: always). */
int simdot_supported(simdot_kind kind);

/* The kernel SIMDOT_AUTO picks here, and its name ("avx512", "avx2", "blas"). */
simdot_kind simdot_best(void);
const char *simdot_name(simdot_kind kind);

/* Threads SIMDOT uses when asked for 0: the CPUs this process may run on,
 * at most 8. */
int simdot_default_threads(void);

/* out[c * ldo + i] = x_i . v_c for i < n, c < k; x is n x d and v is k x d,
 * both row-major float32; ldo >= n. threads <= 0 means the default; small
 * products run on the calling thread alone, and if a thread cannot be
 * started its share runs on the caller (same numbers either way). An
 * unsupported kind falls back to SIMDOT_AUTO. n, k >= 0, d >= 1. */
void simdot(simdot_kind kind, const float *x, int n, int d, const float *v, int k, float *out,
            size_t ldo, int threads);

#endif
