/* replay.h - drive a running eldrd with a planned stream of requests:
 * each request is routed (POST /v1/route, dense counts) at its arrival
 * time and finished (POST /v1/finish) once its simulated decode time has
 * passed. The engine behind `eldr replay` (docs/replay.md).
 *
 * Timing is wall-clock, relative to the start: a few threads (one HTTP
 * connection each) take due events from one queue ordered by time, so up
 * to `concurrency` calls are in the air at once and a slow answer delays
 * only its own thread. The run is bounded: after max_seconds no new route
 * is sent, and every request still in flight is finished at once, so the
 * daemon's loads come back to where they were. A URL that answers the
 * first routes 404 does not route at all: the run stops there
 * (replay_result.not_routing). */
#ifndef ELDR_REPLAY_H
#define ELDR_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "progress.h"

#define REPLAY_MAX_WORKERS 256
#define REPLAY_RULES 8

#define REPLAY_ROUTING "routing"
#define REPLAY_DRAIN "drain"

typedef struct replay_plan {
    const char *url;             /* http://HOST:PORT of eldrd */
    int64_t n;                   /* requests */
    const double *arrive_s;      /* [n] wall seconds after the start, ascending */
    const double *decode_s;      /* [n] wall seconds between route and finish */
    const uint16_t *counts;      /* rows of cells uint16, row of request i: */
    const float *gates;          /* or, for a daemon serving a gate model, rows of
                                  * cells float32 gate values (NULL: counts) */
    const int64_t *row;          /* [n] its row in counts */
    size_t cells;                /* L * E */
    const char *id_prefix;       /* request ids: prefix + i */
    const char *auth_header;     /* "Authorization: Bearer T" on every call (eldrd
                                  * --proxy --route-token-file), or NULL */
    int concurrency;             /* threads = connections, 1..64 */
    double timeout_s;            /* per HTTP call */
    double max_seconds;          /* no new route after this */
    int K;                       /* workers (for the per-worker tally) */
    /* progress (may be NULL; progress.h, rate-limited), called by one
     * thread at a time: REPLAY_ROUTING, routes sent (or skipped) of n;
     * then REPLAY_DRAIN, requests finished of those in flight when the
     * last route went out (the wait for the decode times to run out) */
    progress_fn progress;
    void *progress_arg;
} replay_plan;

typedef struct replay_result {
    int64_t routed, finished;    /* successful calls */
    int64_t route_errors, finish_errors;
    int64_t skipped;             /* not sent: past max_seconds */
    double seconds;              /* wall time of the whole run */
    double first_route, last_route; /* wall seconds of the first/last routed answer */
    double *latency_ms;          /* [routed], ascending (owned; replay_result_free) */
    int64_t per_worker[REPLAY_MAX_WORKERS];
    char rule_name[REPLAY_RULES][24];
    int64_t rule_count[REPLAY_RULES];
    int n_rules;
    int64_t max_inflight;        /* most requests routed and not finished at once */
    char first_error[512];       /* "" when none */
    int not_routing;             /* a route was answered 404 before any succeeded: the
                                  * URL does not serve /v1/route (eldrd's admin
                                  * listener); the rest were skipped at once and
                                  * first_error is that 404 */
} replay_result;

/* Run the plan. Returns 0 when the run took place (failed calls are
 * counted in res, the first one's message kept), -1 with err when it
 * could not start (bad plan, out of memory). */
int replay_run(const replay_plan *p, replay_result *res, char *err, size_t errlen);
void replay_result_free(replay_result *res);

/* The q-quantile (0..1) of an ascending array (nearest rank); NaN when n = 0. */
double replay_quantile(const double *sorted, int64_t n, double q);

#endif
