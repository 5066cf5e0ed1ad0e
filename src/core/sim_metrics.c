/* sim_metrics.c - in-flight accounting over time and the per-request
 * statistics of a simulation run (sim_internal.h; definitions in
 * docs/simulator.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim_internal.h"

int sim_load_init(sim_load *s, int K, int64_t cap, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->K = K;
    s->inflight = calloc((size_t)K, sizeof *s->inflight);
    s->area_w = calloc((size_t)K, sizeof *s->area_w);
    s->series = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *s->series);
    s->cap_series = cap;
    if (!s->inflight || !s->area_w || !s->series) {
        sim_load_free(s);
        return eldr_errf(err, errlen, "sim: out of memory for %lld in-flight points",
                         (long long)cap);
    }
    return 0;
}

void sim_load_free(sim_load *s)
{
    free(s->inflight);
    free(s->area_w);
    free(s->series);
    memset(s, 0, sizeof *s);
}

void sim_load_advance(sim_load *s, double t)
{
    double dt = t - s->last_t;
    if (dt <= 0)
        return;
    if (s->total > 0) {
        s->area_total += (double)s->total * dt;
        /* max / mean = max * K / total */
        s->area_ratio += (double)s->max * s->K / (double)s->total * dt;
        s->busy_t += dt;
        for (int w = 0; w < s->K; w++)
            s->area_w[w] += (double)s->inflight[w] * dt;
    }
    s->last_t = t;
}

void sim_load_change(sim_load *s, double t, int w, int delta)
{
    sim_load_advance(s, t);
    int64_t before = s->inflight[w];
    s->inflight[w] += delta;
    s->total += delta;
    if (s->inflight[w] > s->max) {
        s->max = s->inflight[w];
    } else if (before == s->max && delta < 0) {
        s->max = 0;
        for (int i = 0; i < s->K; i++)
            if (s->inflight[i] > s->max)
                s->max = s->inflight[i];
    }
    if (s->n_series < s->cap_series)
        s->series[s->n_series++] = (sim_point){t, w, (int32_t)s->inflight[w]};
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sim_quantile(double *v, int64_t n, double q)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    if (i >= n - 1)
        return v[n - 1];
    double f = pos - (double)i;
    return v[i] + f * (v[i + 1] - v[i]);
}

int sim_metrics_requests(sim_result *res, char *err, size_t errlen)
{
    int64_t n = res->n;
    double *tpot = malloc((size_t)(n ? n : 1) * sizeof *tpot);
    double *wait = malloc((size_t)(n ? n : 1) * sizeof *wait);
    if (!tpot || !wait) {
        free(tpot);
        free(wait);
        return eldr_errf(err, errlen, "sim: out of memory for %lld request metrics",
                         (long long)n);
    }
    double st = 0, sw = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        const sim_request *q = &res->req[i];
        /* time per output token: the decode time (first step to last
         * token) over the tokens emitted */
        tpot[i] = (q->finish - q->start) / q->tokens * 1e3;
        wait[i] = (q->start - q->arrival) * 1e3;
        st += tpot[i];
        sw += wait[i];
        ss += q->finish - q->arrival;
    }
    res->tpot_mean_ms = n ? st / n : NAN;
    res->queue_mean_ms = n ? sw / n : NAN;
    res->mean_sojourn_s = n ? ss / n : NAN;
    res->tpot_p50_ms = sim_quantile(tpot, n, 0.50);
    res->tpot_p95_ms = sim_quantile(tpot, n, 0.95);
    res->tpot_p99_ms = sim_quantile(tpot, n, 0.99);
    res->queue_p50_ms = sim_quantile(wait, n, 0.50);
    res->queue_p99_ms = sim_quantile(wait, n, 0.99);
    free(tpot);
    free(wait);
    return 0;
}
