/* reaper.h - --inflight-ttl: a thread that forgets requests in flight for
 * longer than the ttl (their finish never came: a client or an engine
 * died), so that their load does not stay on a worker for ever. Started
 * and stopped by main. */
#ifndef ELDR_ROUTER_REAPER_H
#define ELDR_ROUTER_REAPER_H

#include <stddef.h>

#include "engine.h"

typedef struct reaper reaper_t;

/* Every quarter of the ttl (at most a second apart). NULL with err. */
reaper_t *reaper_start(engine_t *d, double ttl, char *err, size_t errlen);
/* Stop and join; NULL is a no-op. */
void reaper_stop(reaper_t *r);

#endif
