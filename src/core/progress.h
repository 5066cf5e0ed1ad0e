/* progress.h - how a long core computation tells its caller how far it
 * is: a plain function pointer and a context, nothing about terminals,
 * Lua or threads (the front ends turn it into a bar, a Lua call, a
 * dashboard status line).
 *
 * The core reports through progress_tick, which rate-limits: the first
 * report of a stage, the last one (done == total) and otherwise at most
 * one every PROGRESS_MIN_INTERVAL seconds reach the callback, so a
 * callback may do slow things (draw, call Lua) without slowing the work.
 * Reports come from the thread that runs the computation, never from its
 * worker threads. */
#ifndef ELDR_PROGRESS_H
#define ELDR_PROGRESS_H

#include <stdint.h>

#define PROGRESS_MIN_INTERVAL 0.1   /* seconds between reports within a stage */

/* what: the stage ("layer selection", "k-means", ...), a static string;
 * done of total units (total > 0; done <= total). */
typedef void (*progress_fn)(void *ctx, const char *what, int64_t done, int64_t total);

typedef struct progress_t {
    progress_fn fn;              /* NULL: no reports */
    void *ctx;
    const char *last_what;       /* rate limiter state (progress_tick) */
    double last_t;
} progress_t;

/* A reporter for fn/ctx (fn may be NULL). */
void progress_init(progress_t *p, progress_fn fn, void *ctx);

/* Report, subject to the rate limit above. p or p->fn may be NULL. */
void progress_tick(progress_t *p, const char *what, int64_t done, int64_t total);

#endif
