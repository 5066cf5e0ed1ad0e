/* probe.h - active health for the proxy's instances (--health-interval):
 * every interval, GET --health-path on each prefill and decode instance
 * over the proxy's upstream client. A 2xx answer is a success (an
 * ejected instance is back in rotation at once); anything else, or no
 * answer before the next round, is a failure that counts toward ejection
 * as a failed request does (pool.h). So a dead instance is found without
 * sacrificing requests, and a revived one comes back without waiting for
 * its ejection to run out. Everything runs on the loop's thread. */
#ifndef ELDR_ROUTER_PROBE_H
#define ELDR_ROUTER_PROBE_H

#include <stddef.h>

#include "evloop.h"
#include "pool.h"
#include "upstream.h"

typedef struct probe probe_t;

/* Probe the pool's instances: prefill i at origin i of up, decode k at
 * origin n_prefill + k. The first round goes out at once. NULL with err. */
probe_t *probe_start(evloop *l, upc *up, pool *p, double interval, const char *path,
                     char *err, size_t errlen);
/* Cancel what is in flight and stop (on the loop's thread, or with the
 * loop stopped). NULL is a no-op. */
void probe_stop(probe_t *pr);

#endif
