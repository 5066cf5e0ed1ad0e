/* progress.c - the rate limiter between the core's loops and a progress
 * callback (progress.h). */
#include "progress.h"

#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(progress_t *p, progress_fn fn, void *ctx)
{
    memset(p, 0, sizeof *p);
    p->fn = fn;
    p->ctx = ctx;
}

void progress_tick(progress_t *p, const char *what, int64_t done, int64_t total)
{
    if (!p || !p->fn)
        return;
    double t = now_s();
    /* a new stage and the end of one always get through: the caller sees
     * every stage start and finish even when it is faster than the limit */
    int new_stage = !p->last_what || strcmp(p->last_what, what);
    if (!new_stage && done < total && t - p->last_t < PROGRESS_MIN_INTERVAL)
        return;
    p->last_what = what;
    p->last_t = t;
    p->fn(p->ctx, what, done, total);
}
