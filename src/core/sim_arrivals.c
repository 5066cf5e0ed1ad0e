/* sim_arrivals.c - when each request reaches its decode worker
 * (sim_internal.h): the trace's arrival_s, a seeded Poisson process, or
 * nothing (a closed loop admits the next request when one finishes). */
#include <math.h>
#include <stdlib.h>

#include "err.h"
#include "sim_internal.h"

typedef struct timed_row {
    double t;
    int64_t row;
    int32_t out;
} timed_row;

/* By time, then by trace row: a stable, total order. */
static int cmp_timed(const void *a, const void *b)
{
    const timed_row *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static int from_trace(sim_workload *w, char *err, size_t errlen)
{
    const trace_t *t = w->t;
    if (!t->arrival_s)
        return eldr_errf(err, errlen, "sim: the trace has no arrival_s; give a rate "
                         "(--rate) or a concurrency (--concurrency)");
    timed_row *tr = malloc((size_t)w->n * sizeof *tr);
    if (!tr)
        return eldr_errf(err, errlen, "sim: out of memory ordering %lld arrivals",
                         (long long)w->n);
    for (int64_t i = 0; i < w->n; i++) {
        double a = t->arrival_s[w->row[i]];
        if (!isfinite(a)) {
            free(tr);
            return eldr_errf(err, errlen, "sim: arrival_s row %lld is not finite",
                             (long long)w->row[i]);
        }
        tr[i] = (timed_row){a, w->row[i], w->out_tokens[i]};
    }
    qsort(tr, (size_t)w->n, sizeof *tr, cmp_timed);
    double t0 = w->n ? tr[0].t : 0;
    for (int64_t i = 0; i < w->n; i++) {
        w->row[i] = tr[i].row;
        w->out_tokens[i] = tr[i].out;
        w->arrival[i] = tr[i].t - t0;
    }
    free(tr);
    return 0;
}

static int poisson(sim_workload *w, char *err, size_t errlen)
{
    double rate = w->cfg.rate;
    if (!isfinite(rate) || rate <= 0)
        return eldr_errf(err, errlen, "sim: rate %g must be a positive number of requests "
                         "per second", rate);
    rng_t r;
    rng_seed_stream(&r, w->cfg.seed, SIM_SEED_ARRIVALS);
    double t = 0;
    for (int64_t i = 0; i < w->n; i++) {
        t += rng_exp(&r) / rate;
        w->arrival[i] = t;
    }
    return 0;
}

int sim_arrivals_build(sim_workload *w, char *err, size_t errlen)
{
    if (w->cfg.arrivals == SIM_ARRIVE_CLOSED) {
        if (w->cfg.concurrency < 1)
            return eldr_errf(err, errlen, "sim: concurrency %d must be >= 1",
                             w->cfg.concurrency);
        w->arrival = NULL;
        return 0;
    }
    w->arrival = malloc((size_t)(w->n ? w->n : 1) * sizeof *w->arrival);
    if (!w->arrival)
        return eldr_errf(err, errlen, "sim: out of memory for %lld arrivals",
                         (long long)w->n);
    if (w->cfg.arrivals == SIM_ARRIVE_TRACE)
        return from_trace(w, err, errlen);
    if (w->cfg.arrivals == SIM_ARRIVE_POISSON)
        return poisson(w, err, errlen);
    return eldr_errf(err, errlen, "sim: unknown arrival mode %d", (int)w->cfg.arrivals);
}

int sim_default_arrivals(sim_config *c, const trace_t *t)
{
    if (c->arrivals != SIM_ARRIVE_TRACE || t->arrival_s)
        return 0;
    c->arrivals = SIM_ARRIVE_POISSON;
    c->rate = SIM_DEFAULT_RATE;
    return 1;
}
