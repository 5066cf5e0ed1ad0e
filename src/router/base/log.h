/* log.h - eldrd's log and clocks, for every floor.
 *
 * One line on stderr per message ("eldrd: ..."), written in one call so
 * that the lines of several threads never interleave; --quiet silences
 * it for the whole process (log_set_quiet, once, at start). The clocks:
 * the monotonic one that timeouts, deadlines and the refit window run on,
 * and a timed wait on it for the periodic threads (reaper, refit). */
#ifndef ELDR_ROUTER_LOG_H
#define ELDR_ROUTER_LOG_H

#include <pthread.h>
#include <stdatomic.h>

void log_set_quiet(int quiet);
void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 when a line of a kind may be written now: at most one a second per
 * `last` (that kind's clock), so that a hostile client's flood of
 * refusals cannot flood the log. */
int log_once_a_second(atomic_long *last);

/* Monotonic seconds. */
double mono_now(void);
/* Wall-clock (unix) seconds. */
double wall_now(void);

/* Wait on c (m held) at most `seconds`, or until signalled. */
void wait_for(pthread_cond_t *c, pthread_mutex_t *m, double seconds);

#endif
