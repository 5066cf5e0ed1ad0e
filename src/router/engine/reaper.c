/* reaper.c - --inflight-ttl's thread (reaper.h). */
#include <pthread.h>
#include <stdlib.h>

#include "err.h"
#include "log.h"
#include "reaper.h"

struct reaper {
    engine_t *d;
    double ttl;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
};

static void *reaper_main(void *arg)
{
    reaper_t *r = arg;
    double ttl = r->ttl, period = ttl / 4 < 1 ? ttl / 4 : 1;
    pthread_mutex_lock(&r->lock);
    while (!r->stop) {
        wait_for(&r->wake, &r->lock, period);
        if (r->stop)
            break;
        pthread_mutex_unlock(&r->lock);
        long n = state_expire(r->d->st, wall_now() - ttl);
        if (n > 0)
            log_msg("--inflight-ttl: %ld request%s in flight for more than %g s "
                    "forgotten (no finish came)", n, n == 1 ? "" : "s", ttl);
        pthread_mutex_lock(&r->lock);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

reaper_t *reaper_start(engine_t *d, double ttl, char *err, size_t errlen)
{
    reaper_t *r = calloc(1, sizeof *r);
    if (!r) {
        eldr_errf(err, errlen, "--inflight-ttl: out of memory");
        return NULL;
    }
    r->d = d;
    r->ttl = ttl;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, NULL);
    if (pthread_create(&r->thread, NULL, reaper_main, r) != 0) {
        eldr_errf(err, errlen, "--inflight-ttl: cannot start a thread");
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

void reaper_stop(reaper_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
