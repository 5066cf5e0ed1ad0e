/* pool_view.h - the pool (pool.h) as the daemon's views show it: the
 * snapshot's "pool" object, the eldr_upstream_* series of /metrics, and
 * the "ejected" list that makes /healthz degraded. */
#ifndef ELDR_ROUTER_POOL_VIEW_H
#define ELDR_ROUTER_POOL_VIEW_H

#include <jansson.h>

#include "pool.h"
#include "strbuf.h"

/* {"eject_after", "eject_time_s", "prefill": [...], "decode": [...],
 * "prefill_panics", "decode_panics"}; each instance {"name", "url" (the
 * name when urls: the proxy's --prefill/--decode URLs; else null),
 * "state" (pool_state_name), "ejected", "ejected_for_s",
 * "failures_in_a_row", "failures", "ejections", "in_flight" (prefill; 0
 * for decode, whose load is the workers')}, a decode instance also
 * "worker": workers[i], the model's worker it serves (workers NULL: no
 * such key). */
json_t *pool_json(pool *p, char *const *workers, int urls);
/* "in_rotation", "ejected" (out until its time runs out), or "probing":
 * back in rotation after an ejection without a success since, so that
 * one more failure ejects it again (pool.h). */
const char *pool_state_name(const pool_health *h);
/* ["prefill URL", "decode URL", ...]: the instances ejected now. */
json_t *pool_degraded(pool *p);
void pool_metrics(pool *p, strbuf *b);

#endif
