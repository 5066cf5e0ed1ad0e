/* stats.c - mean and confidence interval (stats.h). */
#include "stats.h"

#include <math.h>

double stats_t975(int df)
{
    static const double table[31] = {
        NAN,   12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
        2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1)
        return NAN;
    if (df <= 30)
        return table[df];
    /* Cornish-Fisher: t = z + g1/df + g2/df^2 + g3/df^3 */
    double z = 1.959963984540054, z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
    double v = (double)df;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
           (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

void stats_mean_ci95(const double *x, int n, double *mean, double *half)
{
    *mean = *half = NAN;
    if (n < 1)
        return;
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return;
        s += x[i];
    }
    double m = s / n, ss = 0;
    for (int i = 0; i < n; i++)
        ss += (x[i] - m) * (x[i] - m);
    *mean = m;
    if (n >= 2)
        *half = stats_t975(n - 1) * sqrt(ss / (n - 1)) / sqrt((double)n);
}
