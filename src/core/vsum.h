/* vsum.h - double-precision sums over float rows, vectorised: the member
 * sums, norms and objective of K-means (kmeans.c).
 *
 * K-means keeps its cluster sums in double so that adding and removing
 * rows leaves no drift; these loops are O(N D) in the first round and
 * O(K D) in every round after, and as plain scalar loops (one dependent
 * addition per element) they cost as much as the similarities. Each
 * function here is compiled for AVX-512, AVX2 and baseline x86-64 (GCC
 * target_clones, picked at load time by the CPU) over 8 independent
 * double lanes, reduced in a fixed order: the same input gives the same
 * sum on a given CPU. The two whole-matrix passes at the end split their
 * work among threads in a way that leaves every number unchanged. */
#ifndef ELDR_VSUM_H
#define ELDR_VSUM_H

/* acc[j] += sign * row[j], j < d. */
void vsum_add(double *acc, const float *row, int d, double sign);

/* sum_j a[j] * b[j]. */
double vsum_dot(const double *a, const float *b, int d);

/* sum_j a[j]^2. */
double vsum_norm2(const double *a, int d);

/* sum_j row[j]^2, in double. */
double vsum_norm2_f(const float *row, int d);

/* mu[j] = (float)(a[j] * (1 / nrm)); returns sum_j (new mu[j] - old mu[j])^2. */
double vsum_unit(float *mu, const double *a, int d, double nrm);

/* Rows moving between the member sums of a clustering: for t < m in
 * order, row i = rows[t] of x (row-major, d columns) leaves sum from[t]
 * (acc[from[t]] -= x_i; skipped when from is NULL or from[t] < 0) and
 * joins sum to[t]
 * (acc[to[t]] += x_i). Threads (0 = default, simdot.h) take blocks of
 * columns, so every sum sees its rows in list order and the result equals
 * the same vsum_add calls made one by one. */
void vsum_move_rows(double *acc, const float *x, int d, const int *rows, const int *from,
                    const int *to, int m, int threads);

/* out[i] = vsum_norm2_f(row i) for i < n, rows split among threads. */
void vsum_row_norms2(const float *x, int n, int d, double *out, int threads);

#endif
