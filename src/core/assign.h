/* assign.h - optimal capacity-constrained assignment of N points to K
 * clusters (the assignment step of balanced K-means, DESIGN.md section 1).
 *
 * Given an N x K cost matrix (for K-means, cost[i][c] = 1 - x_i . mu_c),
 * find the assignment of every point to one cluster, no cluster holding
 * more than cap points, that minimises the total cost. This is a
 * transportation problem with K sinks; it is solved exactly (an optimal
 * integral flow, not a greedy heuristic) by successive shortest paths over
 * the K cluster nodes, in O(N K^2 + moves * K log N) time and O(K^2 cap)
 * memory, so N = 100000, K = 16 takes a fraction of a second. The
 * reference's Hungarian method on the N x (K*cap) expansion gives the same
 * optimum in O(N^3) (hungarian.h; the tests compare the two). */
#ifndef ELDR_ASSIGN_H
#define ELDR_ASSIGN_H

#include <stddef.h>

/* The balanced capacity of K-means: ceil(n / k) (k >= 1). */
static inline int assign_default_cap(int n, int k)
{
    return n / k + (n % k != 0);
}

/* cost: row-major n x k doubles, finite and within +-1e100. Requires
 * n >= 0, k >= 1, cap >= 1 and k * cap >= n. Writes assign[n] (cluster of
 * each point, each cluster used at most cap times) and *objective (if
 * non-NULL), the total cost of that assignment. Among optimal assignments
 * the one returned is deterministic for the input. Returns 0, or -1 with
 * err (bad geometry, too little capacity, a cost out of range naming the
 * cell, out of memory). */
int assign_balanced(const double *cost, int n, int k, int cap, int *assign,
                    double *objective, char *err, size_t errlen);

#endif
