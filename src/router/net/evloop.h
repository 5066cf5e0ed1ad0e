/* evloop.h - an event loop that knows no protocol (router/net).
 *
 * One thread runs it (evloop_run); everything registered on it is called
 * back on that thread. Modelled on Redis's ae.c: file events (epoll),
 * timer events, and calls posted from other threads. The upstream HTTP
 * client, libmicrohttpd's epoll fd and a front end's periodic work all
 * sit on one loop, so a proxied request never crosses threads.
 *
 * A turn (evloop_turn) is:
 *   1. the turn hooks run (ev_hook): each returns how long the loop may
 *      sleep for it (ms; -1 no limit, 0 do not sleep); they are where a
 *      front end drains queues filled on this thread and where
 *      libmicrohttpd's own timeout is read;
 *   2. ONE epoll_wait, for at most min(the hooks' limits, the next
 *      timer, max_wait_ms), 0 when calls are posted or a call on the
 *      loop's thread asked for another turn at once (evloop_again);
 *   3. the ready fds' callbacks, in epoll's order;
 *   4. the timers that are due, earliest first;
 *   5. the posted calls, in the order they were posted;
 *   6. the after-turn hooks (their return is ignored): where work that
 *      the turn's callbacks made ready goes out in the same turn (the
 *      answers of connections resumed by an upstream's callback).
 * Watches and timers live in their owners' structs (no allocation per
 * registration): an owner embeds an ev_io or ev_timer and keeps it alive
 * while it is registered or armed.
 *
 * Thread safety: evloop_post, evloop_wake and evloop_stop may be called
 * from any thread; everything else only on the loop's thread, or before
 * the loop runs / after it has stopped. */
#ifndef ELDR_ROUTER_EVLOOP_H
#define ELDR_ROUTER_EVLOOP_H

#include <stddef.h>
#include <stdint.h>

typedef struct evloop evloop;
typedef struct ev_io ev_io;
typedef struct ev_timer ev_timer;
typedef struct ev_hook ev_hook;

/* fd events: EPOLLIN, EPOLLOUT, EPOLLRDHUP, ... as <sys/epoll.h> names
 * them (level-triggered unless EPOLLET is given). */
typedef void (*ev_io_fn)(evloop *l, ev_io *w, uint32_t events);
typedef void (*ev_timer_fn)(evloop *l, ev_timer *t);
/* Returns the longest the loop may sleep for this hook, ms; -1 any. */
typedef int (*ev_hook_fn)(evloop *l, void *cls);
typedef void (*ev_call_fn)(void *cls);

struct ev_io {
    int fd;                      /* -1 when not registered */
    uint32_t events;
    ev_io_fn fn;
    void *cls;
};

struct ev_timer {
    double at;                   /* monotonic seconds it is due */
    int slot;                    /* its place in the loop's heap; -1 not armed */
    ev_timer_fn fn;
    void *cls;
};

struct ev_hook {
    ev_hook_fn fn;
    void *cls;
    ev_hook *next;               /* the loop's list */
};

/* NULL with err. */
evloop *evloop_new(char *err, size_t errlen);
/* The loop must not be running. Registered fds are not closed; armed
 * timers are disarmed; posted calls that never ran are dropped. */
void evloop_free(evloop *l);

/* The monotonic clock of timers, seconds. */
double evloop_now(void);

/* Watch fd for events (w filled by the call). -1 (errno set) when epoll
 * refuses it. */
int evloop_io_add(evloop *l, ev_io *w, int fd, uint32_t events, ev_io_fn fn, void *cls);
/* Change the events watched. -1 when epoll refuses. */
int evloop_io_mod(evloop *l, ev_io *w, uint32_t events);
/* Stop watching (before closing the fd); a no-op when not registered.
 * An event of w already returned by this turn's epoll_wait is not
 * delivered after this. */
void evloop_io_del(evloop *l, ev_io *w);

/* Initialise a timer (not armed). */
void evloop_timer_init(ev_timer *t, ev_timer_fn fn, void *cls);
/* Arm t to fire once, after `after` seconds (re-arming moves it). A
 * timer's callback may re-arm it (a periodic timer); one re-armed for
 * now or earlier fires in the next turn, not again in this one. -1 when
 * out of memory for the loop's heap (t stays disarmed; re-arming an
 * armed timer never fails). */
int evloop_timer_start(evloop *l, ev_timer *t, double after);
/* Disarm; a no-op when not armed. */
void evloop_timer_stop(evloop *l, ev_timer *t);

/* Run h->fn at the start of every turn (h filled by the call). */
void evloop_hook_add(evloop *l, ev_hook *h, ev_hook_fn fn, void *cls);
/* Run h->fn at the end of every turn (step 6). */
void evloop_after_add(evloop *l, ev_hook *h, ev_hook_fn fn, void *cls);
/* Remove a hook of either kind; a no-op when not added. */
void evloop_hook_del(evloop *l, ev_hook *h);

/* Run fn(cls) on the loop's thread, in the next turn. Thread-safe. From
 * another thread it wakes the loop (one eventfd write, only when the
 * queue was empty); from the loop's own thread no wake is needed. -1 when
 * out of memory (fn is not called). */
int evloop_post(evloop *l, ev_call_fn fn, void *cls);
/* Make a sleeping loop take a turn now. Thread-safe. */
void evloop_wake(evloop *l);
/* On the loop's thread: the next turn does not sleep. */
void evloop_again(evloop *l);

/* One turn (above), sleeping at most max_wait_ms (-1: no limit of its
 * own). Returns 0, or -1 when epoll_wait fails with other than EINTR. */
int evloop_turn(evloop *l, int max_wait_ms);
/* Turns until evloop_stop; records the calling thread as the loop's. */
int evloop_run(evloop *l);
/* Make evloop_run return after the turn it is in. Thread-safe. */
void evloop_stop(evloop *l);
/* 1 on the thread that runs the loop (inside evloop_run, or inside an
 * evloop_turn called on its own). */
int evloop_on_loop(const evloop *l);

#endif
