/* failures.h - what went wrong for clients, in one object: the snapshot's
 * "failures" (docs/http-api.md, "Failures"), from the counters /metrics
 * shows (metrics.h, the routing state's failed routes, and what the
 * providers add: the proxy's outcomes and timeouts). */
#ifndef ELDR_ROUTER_FAILURES_H
#define ELDR_ROUTER_FAILURES_H

#include <jansson.h>

#include "engine.h"

/* {"answered": {"4xx", "5xx", "by_code": {"401": n, ...}} (every
 *  endpoint but GET /healthz and /livez: a probe's 503 is readiness),
 *  "refusals": {"per_ip", "body_budget", "unauthorized"},
 *  "timeouts": {"header", "request_deadline"},
 *  "protocol_errors", "failed_after_routing", and the providers' keys}.
 * Every count is since the daemon started. NULL out of memory. */
json_t *failures_json(engine_t *d);

#endif
