/* hungarian.h - the Hungarian method: a minimum-cost perfect assignment of
 * n rows to m >= n columns, each column used at most once.
 *
 * Plain O(n^2 m) (shortest augmenting paths with row/column potentials,
 * Kuhn-Munkres in the form of Jonker-Volgenant). eldr uses it where the
 * matrix is small: matching refitted centroids to the existing worker
 * identities (K x K), and as the independent oracle that the balanced
 * assignment (assign.h) is tested against on the N x (K*cap) expansion. */
#ifndef ELDR_HUNGARIAN_H
#define ELDR_HUNGARIAN_H

#include <stddef.h>

/* cost: row-major n x m doubles, all finite; 0 <= n <= m.
 * row_to_col[n] receives each row's column (distinct); *total (if non-NULL)
 * the summed cost of the assignment. Returns 0, or -1 with err on bad
 * input (n > m, non-finite cost naming the cell) or out of memory. */
int hungarian_solve(const double *cost, int n, int m, int *row_to_col,
                    double *total, char *err, size_t errlen);

#endif
