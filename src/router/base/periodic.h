/* periodic.h - a thread that runs one job every period, for the floors
 * that sweep something on a clock: the reaper (--inflight-ttl), the HTTP
 * glue's header deadline. Stopping wakes it at once: a stop never waits
 * out a period. */
#ifndef ELDR_ROUTER_PERIODIC_H
#define ELDR_ROUTER_PERIODIC_H

typedef struct periodic periodic_t;

/* Call fn(cls) every `period` seconds, first after one period, on a
 * thread of its own. NULL when out of memory or threads. */
periodic_t *periodic_start(double period, void (*fn)(void *cls), void *cls);
/* Stop (a job running ends first) and free; NULL is a no-op. */
void periodic_stop(periodic_t *p);

#endif
