/* reaper.c - --inflight-ttl's thread (reaper.h). */
#include <stdlib.h>

#include "err.h"
#include "log.h"
#include "periodic.h"
#include "reaper.h"

struct reaper {
    engine_t *d;
    double ttl;
    periodic_t *thread;
};

static void reap(void *arg)
{
    reaper_t *r = arg;
    long n = state_expire(r->d->st, wall_now() - r->ttl);
    if (n > 0)
        log_msg("--inflight-ttl: %ld request%s in flight for more than %g s "
                "forgotten (no finish came)", n, n == 1 ? "" : "s", r->ttl);
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
    if (!(r->thread = periodic_start(ttl / 4 < 1 ? ttl / 4 : 1, reap, r))) {
        eldr_errf(err, errlen, "--inflight-ttl: cannot start a thread");
        free(r);
        return NULL;
    }
    return r;
}

void reaper_stop(reaper_t *r)
{
    if (!r)
        return;
    periodic_stop(r->thread);
    free(r);
}
