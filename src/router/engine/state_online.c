/* state_online.c - the online refit's window inside the routing state
 * (state.h): routes copy their signature in (a memcpy of |S|*E floats
 * into a preallocated slot) when the window's lock is free; the refit
 * thread (refit.c) takes that lock, never the routing lock, to drop old
 * signatures and copy the window out. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "log.h"
#include "state.h"

int state_online_enable(rstate *s, double every, double window, int max_rows, char *err,
                        size_t errlen)
{
    if (online_clock_init(&s->online_clk, every, window, err, errlen) < 0)
        return -1;
    if (max_rows < 1)
        return eldr_errf(err, errlen, "refit window capacity %d must be >= 1", max_rows);
    s->online = calloc(1, sizeof *s->online);
    if (!s->online)
        return eldr_errf(err, errlen, "out of memory for the refit window");
    pthread_mutex_init(&s->online_lock, NULL);
    s->online_max_rows = max_rows;
    return 0;
}

void state_online_free(rstate *s)
{
    if (!s->online)
        return;
    online_window_free(s->online);
    free(s->online);
    s->online = NULL;
    pthread_mutex_destroy(&s->online_lock);
}

void state_online_epoch(rstate *s, const mref_t *r)
{
    if (!s->online || r->epoch == s->online_epoch)
        return;
    /* a loaded model: its recipe (and dim) may differ, and its centroids
     * deserve a full window before the first refit */
    pthread_mutex_lock(&s->online_lock);
    online_window_free(s->online);
    online_window_init(s->online, r->dim, s->online_max_rows, NULL, 0);
    online_clock_reset(&s->online_clk);
    s->online_epoch = r->epoch;
    pthread_mutex_unlock(&s->online_lock);
}

void state_online_push(rstate *s, const route_in *in)
{
    if (!s->online || !in->sim || !in->sig)
        return;
    if (pthread_mutex_trylock(&s->online_lock) != 0) {
        s->online_busy++;        /* under the routing lock */
        return;
    }
    if (in->model->epoch == s->online_epoch && s->online->dim == in->model->dim) {
        double now = mono_now();
        online_window_evict(s->online, now, s->online_clk.window);
        int took = online_window_push(s->online, now, in->sig);
        if (took > 0)
            online_clock_seen(&s->online_clk, now);
        else if (took < 0)
            s->online_oom++;
    }
    pthread_mutex_unlock(&s->online_lock);
}

int state_online_take(rstate *s, double now, int K, uint64_t epoch, float **rows, int *n)
{
    *rows = NULL;
    *n = 0;
    int rc = 0;
    if (!s->online)
        return 0;
    pthread_mutex_lock(&s->online_lock);
    if (epoch == s->online_epoch) {
        online_window_evict(s->online, now, s->online_clk.window);
        if (online_clock_due(&s->online_clk, now, s->online->n, K)) {
            online_clock_started(&s->online_clk, now);
            *n = online_window_copy(s->online, rows);
            rc = *n < 0 ? -1 : 1;
        }
    }
    pthread_mutex_unlock(&s->online_lock);
    return rc;
}

int state_online_count(rstate *s, double now, uint64_t *busy)
{
    if (!s->online)
        return 0;
    pthread_mutex_lock(&s->online_lock);
    online_window_evict(s->online, now, s->online_clk.window);
    int n = s->online->n;
    pthread_mutex_unlock(&s->online_lock);
    if (busy) {
        pthread_mutex_lock(&s->lock);
        *busy = s->online_busy;
        pthread_mutex_unlock(&s->lock);
    }
    return n;
}
