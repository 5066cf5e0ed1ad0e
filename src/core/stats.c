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

/* The continued fraction of the incomplete beta function (modified
 * Lentz), for x < (a + 1) / (a + b + 2). */
static double beta_cf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < tiny)
        d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        for (int k = 0; k < 2; k++) {
            d = 1 + aa * d;
            c = 1 + aa / c;
            if (fabs(d) < tiny)
                d = tiny;
            if (fabs(c) < tiny)
                c = tiny;
            d = 1 / d;
            h *= d * c;
            aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        }
        if (fabs(d * c - 1) < 1e-15)
            break;
    }
    return h;
}

/* I_x(a, b), the regularised incomplete beta function. */
static double beta_inc(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lb = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2))
        return exp(lb) * beta_cf(a, b, x) / a;
    return 1 - exp(lb) * beta_cf(b, a, 1 - x) / b;
}

/* P(T <= t) for t >= 0 */
static double t_cdf(double t, double df)
{
    return 1 - 0.5 * beta_inc(df / 2, 0.5, df / (df + t * t));
}

double stats_t_quantile(double p, int df)
{
    if (df < 1 || !(p > 0.5 && p < 1))
        return NAN;
    double lo = 0, hi = 1;
    while (t_cdf(hi, df) < p && hi < 1e12)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = (lo + hi) / 2;
        if (t_cdf(mid, df) < p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}
