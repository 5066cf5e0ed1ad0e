/* http_side.h - a worker thread beside proxy mode's event loop.
 *
 * In proxy mode one thread runs libmicrohttpd and every upstream transfer
 * (proxy.h). A request that is not proxied (a model swap, a snapshot, a
 * route call, /metrics) must not stop that loop while it works: a PUT
 * /v1/model of a 48 x 128 x 16 model takes 50-80 ms with its fsync, and
 * every proxied request would wait that long. Such a request is handed to
 * this thread instead: its connection is suspended, the handler runs
 * here, the connection is resumed and the loop sends the answer. Jobs run
 * one at a time, in order. The HTTP glue runs two: one for every
 * synchronous route, one for the light ones (/healthz, /metrics), which
 * so never wait behind a snapshot or a model swap. */
#ifndef ELDR_ROUTER_HTTP_SIDE_H
#define ELDR_ROUTER_HTTP_SIDE_H

typedef struct side side_t;

/* A job: run(cls) on the side thread. */
typedef void (*side_fn)(void *cls);

/* NULL when the thread cannot start. */
side_t *side_start(void);
/* Queue a job; -1 when out of memory or stopped (then run it yourself). */
int side_submit(side_t *s, side_fn run, void *cls);
/* Run what is queued, then stop the thread. */
void side_stop(side_t *s);
void side_free(side_t *s);

#endif
