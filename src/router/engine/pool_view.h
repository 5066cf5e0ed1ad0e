/* pool_view.h - the pool (pool.h) as the daemon's views show it: the
 * snapshot's "pool" object, the eldr_upstream_* series of /metrics, and
 * the "ejected" list that makes /healthz degraded. */
#ifndef ELDR_ROUTER_POOL_VIEW_H
#define ELDR_ROUTER_POOL_VIEW_H

#include <jansson.h>

#include "pool.h"
#include "strbuf.h"

/* {"eject_after", "eject_time_s", "prefill": [...], "decode": [...],
 * "prefill_panics", "decode_panics"}; each instance {"name", "ejected",
 * "ejected_for_s", "failures_in_a_row", "failures", "ejections",
 * "in_flight" (prefill; 0 for decode, whose load is the workers')}. */
json_t *pool_json(pool *p);
/* ["prefill URL", "decode URL", ...]: the instances ejected now. */
json_t *pool_degraded(pool *p);
void pool_metrics(pool *p, strbuf *b);

#endif
