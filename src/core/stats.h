/* stats.h - summaries over repeated runs: the mean and the 95% confidence
 * interval of the mean (Student's t, the runs taken as independent). */
#ifndef ELDR_STATS_H
#define ELDR_STATS_H

/* The two-sided 95% quantile of Student's t with df degrees of freedom
 * (t_{0.975, df}); df >= 1. Exact to the 3rd decimal (table to 30, then
 * the Cornish-Fisher expansion). */
double stats_t975(int df);

/* The p quantile of Student's t with df degrees of freedom, p in
 * (0.5, 1), df >= 1: what a confidence level other than 95% needs (a
 * Bonferroni correction over m comparisons takes p = 1 - 0.025 / m).
 * Bisection on the CDF (the regularised incomplete beta function by its
 * continued fraction); within 1e-9 of scipy.stats.t.ppf. NaN outside. */
double stats_t_quantile(double p, int df);

/* Mean of x[0..n) and the half-width of its 95% confidence interval;
 * half is NaN when n < 2 (one run says nothing of the noise). Non-finite
 * values make both NaN. */
void stats_mean_ci95(const double *x, int n, double *mean, double *half);

#endif
