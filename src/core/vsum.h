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
 * sum on a given CPU. */
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

/* mu[j] = (float)(a[j] / nrm); returns sum_j (new mu[j] - old mu[j])^2. */
double vsum_unit(float *mu, const double *a, int d, double nrm);

#endif
