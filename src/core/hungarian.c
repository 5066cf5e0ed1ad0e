/* hungarian.c - O(n^2 m) Hungarian method (see hungarian.h).
 *
 * Rows are added one at a time; for each, a Dijkstra-like scan over the
 * columns with potentials u (rows) and v (columns) finds the shortest
 * augmenting path in reduced costs, then the path is flipped. Reduced
 * costs stay non-negative, so every partial assignment is optimal for the
 * rows it covers and the last one is optimal for all. Index 0 of the
 * column arrays is a virtual column holding the row being inserted. */
#include "hungarian.h"

#include <math.h>
#include <stdlib.h>

#include "err.h"

int hungarian_solve(const double *cost, int n, int m, int *row_to_col,
                    double *total, char *err, size_t errlen)
{
    if (n < 0 || m < 0 || n > m)
        return eldr_errf(err, errlen, "hungarian: need 0 <= rows <= columns, got %d x %d", n, m);
    for (size_t i = 0; i < (size_t)n * (size_t)m; i++)
        if (!isfinite(cost[i]))
            return eldr_errf(err, errlen, "hungarian: cost[%zu][%zu] is not finite",
                             i / (size_t)m, i % (size_t)m);
    if (n == 0) {
        if (total)
            *total = 0.0;
        return 0;
    }

    double *u = eldr_calloc((size_t)n + 1, sizeof *u);
    double *v = eldr_calloc((size_t)m + 1, sizeof *v);
    double *minv = eldr_calloc((size_t)m + 1, sizeof *minv);
    int *p = eldr_calloc((size_t)m + 1, sizeof *p);     /* column -> row (1-based), 0 = free */
    int *way = eldr_calloc((size_t)m + 1, sizeof *way); /* previous column on the path */
    char *used = eldr_calloc((size_t)m + 1, 1);
    if (!u || !v || !minv || !p || !way || !used) {
        free(u); free(v); free(minv); free(p); free(way); free(used);
        return eldr_errf(err, errlen, "hungarian: out of memory for %d x %d", n, m);
    }

    for (int i = 1; i <= n; i++) {
        p[0] = i;
        int j0 = 0;
        for (int j = 0; j <= m; j++) {
            minv[j] = INFINITY;
            used[j] = 0;
        }
        do {
            /* Grow the tree by the column with the least reduced distance. */
            used[j0] = 1;
            int i0 = p[j0], j1 = 0;
            double delta = INFINITY;
            const double *row = cost + (size_t)(i0 - 1) * (size_t)m;
            for (int j = 1; j <= m; j++) {
                if (used[j])
                    continue;
                double cur = row[j - 1] - u[i0] - v[j];
                if (cur < minv[j]) {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if (minv[j] < delta) {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for (int j = 0; j <= m; j++) {
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
        } while (p[j0] != 0);
        /* Flip the path back to the virtual column. */
        do {
            int j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0);
    }

    double sum = 0.0;
    for (int j = 1; j <= m; j++)
        if (p[j]) {
            row_to_col[p[j] - 1] = j - 1;
            sum += cost[(size_t)(p[j] - 1) * (size_t)m + (size_t)(j - 1)];
        }
    if (total)
        *total = sum;
    free(u); free(v); free(minv); free(p); free(way); free(used);
    return 0;
}
