/* sim_online.c - eldr-online in the simulator: the online refit
 * (online.h) driven by simulated time. A refit takes no simulated time:
 * it runs at the arrival where it falls due and the next arrival routes
 * on its centroids (in eldrd it runs beside the routes, a few ms). */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim_internal.h"

int sim_online_init(sim_online *o, const sim_workload *w, route_policy *p, char *err,
                    size_t errlen)
{
    memset(o, 0, sizeof *o);
    const sim_config *c = &w->cfg;
    if (online_clock_init(&o->clk, c->refit_every, c->refit_window, err, errlen) < 0 ||
        online_window_init(&o->win, w->dim, ONLINE_DEFAULT_MAX_ROWS, err, errlen) < 0)
        return -1;
    size_t size = (size_t)p->K * w->dim * sizeof *o->cur;
    o->cur = malloc(size);
    o->next = malloc(size);
    if (!o->cur || !o->next) {
        sim_online_free(o);
        return eldr_errf(err, errlen, "sim: out of memory for eldr-online's centroids");
    }
    memcpy(o->cur, p->centroids, size);
    o->p = p;
    p->centroids = o->cur;
    return 0;
}

void sim_online_free(sim_online *o)
{
    online_window_free(&o->win);
    free(o->cur);
    free(o->next);
    memset(o, 0, sizeof *o);
}

int sim_online_observe(sim_online *o, double t, const float *sig, char *err, size_t errlen)
{
    int K = o->p->K;
    online_window_evict(&o->win, t, o->clk.window);
    int took = online_window_push(&o->win, t, sig);
    if (took < 0)
        return eldr_errf(err, errlen, "sim: out of memory for eldr-online's window");
    if (took)
        online_clock_seen(&o->clk, t);
    if (!online_clock_due(&o->clk, t, o->win.n, K))
        return 0;
    online_clock_started(&o->clk, t);
    float *rows;
    int n = online_window_copy(&o->win, &rows);
    if (n < 0)
        return eldr_errf(err, errlen, "sim: out of memory for eldr-online's window");
    online_stats st;
    char why[ELDR_ERRLEN];
    /* one thread: grid cells already run in parallel, and the result
     * does not depend on it */
    int rc = online_refit(rows, n, o->win.dim, o->cur, K, 1, o->next, NULL, NULL, &st, why,
                          sizeof why);
    free(rows);
    if (rc < 0)
        return eldr_errf(err, errlen, "sim: eldr-online refit at t = %.3f s: %s", t, why);
    memcpy(o->cur, o->next, (size_t)K * o->win.dim * sizeof *o->cur);
    o->refits++;
    return 0;
}
