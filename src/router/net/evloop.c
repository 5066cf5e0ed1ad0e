/* evloop.c - an event loop that knows no protocol (evloop.h). */
#include "evloop.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 128
#define HEAP_FIRST 16
/* ev_timer.slot of a timer taken off the heap for this turn's firing
 * phase and not fired yet: stopping or re-arming it must find it in
 * l->due, not in the heap. */
#define SLOT_DUE (-2)

typedef struct call {
    ev_call_fn fn;
    void *cls;
    struct call *next;
} call;

struct evloop {
    int ep, wake;

    /* This turn's epoll_wait answer lives here, not on the stack, so that
     * evloop_io_del can drop the events of a watch not yet delivered. */
    struct epoll_event ev[MAX_EVENTS];
    int ev_n, ev_i;                 /* ev_i: the one being delivered */

    /* Armed timers: a binary min-heap on `at`. The due ones of a turn are
     * moved to `due` before any fires, so a timer re-armed for now inside
     * the phase waits for the next turn instead of looping in this one.
     * Both arrays have cap places: every armed timer is in one of them. */
    ev_timer **heap, **due;
    size_t n_heap, n_due, due_i, cap;

    ev_hook *hooks;
    ev_hook *afters;                /* the after-turn hooks */
    ev_hook *hook_next;             /* the hook phases' cursor (NULL outside them) */
    int again;

    atomic_int stop;

    pthread_mutex_t mu;             /* guards posted and posted_tail */
    call *posted, **posted_tail;
    /* posted is not empty: set and cleared under mu, read without it by
     * the loop's thread each turn (a post it misses wrote the eventfd) */
    atomic_int has_posted;
};

/* The loop this thread is running (inside evloop_run or evloop_turn):
 * per thread, so evloop_on_loop needs no shared state and several loops
 * can each have their own thread. */
static _Thread_local const evloop *running_here;

/* ---- the timer heap ----------------------------------------------------- */

static void heap_set(evloop *l, size_t i, ev_timer *t)
{
    l->heap[i] = t;
    t->slot = (int)i;
}

static void sift_up(evloop *l, size_t i)
{
    ev_timer *t = l->heap[i];
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!(t->at < l->heap[up]->at))
            break;
        heap_set(l, i, l->heap[up]);
        i = up;
    }
    heap_set(l, i, t);
}

static void sift_down(evloop *l, size_t i)
{
    ev_timer *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->n_heap)
            break;
        if (c + 1 < l->n_heap && l->heap[c + 1]->at < l->heap[c]->at)
            c++;
        if (!(l->heap[c]->at < t->at))
            break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

static void heap_remove(evloop *l, size_t i)
{
    l->heap[i]->slot = -1;
    ev_timer *last = l->heap[--l->n_heap];
    if (i == l->n_heap)
        return;
    heap_set(l, i, last);
    sift_down(l, i);
    sift_up(l, (size_t)last->slot);
}

static int heap_grow(evloop *l)
{
    size_t cap = l->cap ? 2 * l->cap : HEAP_FIRST;
    ev_timer **due = realloc(l->due, cap * sizeof *due);
    if (!due)
        return -1;
    l->due = due;
    ev_timer **heap = realloc(l->heap, cap * sizeof *heap);
    if (!heap)
        return -1;   /* due is merely larger than it needs to be */
    l->heap = heap;
    l->cap = cap;
    return 0;
}

/* Take a timer that is waiting in this turn's firing phase out of it. */
static void unpend(evloop *l, ev_timer *t)
{
    for (size_t i = l->due_i; i < l->n_due; i++)
        if (l->due[i] == t)
            l->due[i] = NULL;
    t->slot = -1;
}

static void fire_timers(evloop *l)
{
    if (!l->n_heap)
        return;
    double now = evloop_now();
    l->n_due = l->due_i = 0;
    while (l->n_heap && l->heap[0]->at <= now) {
        ev_timer *t = l->heap[0];
        heap_remove(l, 0);
        t->slot = SLOT_DUE;
        l->due[l->n_due++] = t;
    }
    while (l->due_i < l->n_due) {
        ev_timer *t = l->due[l->due_i++];
        if (!t)
            continue;   /* stopped or re-armed by an earlier callback */
        t->slot = -1;
        t->fn(l, t);
    }
    l->n_due = l->due_i = 0;
}

/* ---- the loop ----------------------------------------------------------- */

evloop *evloop_new(char *err, size_t errlen)
{
    evloop *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory for the event loop");
        return NULL;
    }
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->wake};
    if (l->ep < 0 || l->wake < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake, &ev) < 0 ||
        heap_grow(l) < 0) {
        snprintf(err, errlen, "cannot set up the event loop: %s", strerror(errno));
        if (l->ep >= 0)
            close(l->ep);
        if (l->wake >= 0)
            close(l->wake);
        free(l->heap);
        free(l->due);
        free(l);
        return NULL;
    }
    atomic_init(&l->stop, 0);
    pthread_mutex_init(&l->mu, NULL);
    l->posted_tail = &l->posted;
    return l;
}

void evloop_free(evloop *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n_heap; i++)
        l->heap[i]->slot = -1;
    call *c = l->posted;
    while (c) {
        call *next = c->next;
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&l->mu);
    close(l->ep);
    close(l->wake);
    free(l->heap);
    free(l->due);
    free(l);
}

double evloop_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- fds ---------------------------------------------------------------- */

int evloop_io_add(evloop *l, ev_io *w, int fd, uint32_t events, ev_io_fn fn, void *cls)
{
    struct epoll_event ev = {.events = events, .data.ptr = w};
    w->fd = -1;   /* so that a refused watch is one evloop_io_del ignores */
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -1;
    w->fd = fd;
    w->events = events;
    w->fn = fn;
    w->cls = cls;
    return 0;
}

int evloop_io_mod(evloop *l, ev_io *w, uint32_t events)
{
    if (w->fd < 0) {
        errno = EBADF;
        return -1;
    }
    struct epoll_event ev = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->ep, EPOLL_CTL_MOD, w->fd, &ev) < 0)
        return -1;
    w->events = events;
    return 0;
}

void evloop_io_del(evloop *l, ev_io *w)
{
    if (w->fd < 0)
        return;
    /* Fails only when the fd was closed first, which took it out of the
     * epoll set already (unless a dup of it is still open). */
    epoll_ctl(l->ep, EPOLL_CTL_DEL, w->fd, NULL);
    w->fd = -1;
    for (int i = l->ev_i + 1; i < l->ev_n; i++)
        if (l->ev[i].data.ptr == w)
            l->ev[i].data.ptr = NULL;
}

/* ---- timers ------------------------------------------------------------- */

void evloop_timer_init(ev_timer *t, ev_timer_fn fn, void *cls)
{
    t->at = 0;
    t->slot = -1;
    t->fn = fn;
    t->cls = cls;
}

int evloop_timer_start(evloop *l, ev_timer *t, double after)
{
    if (after != after)
        after = 0;   /* a NaN `at` would compare false both ways and break the heap */
    double at = evloop_now() + after;
    if (t->slot == SLOT_DUE)
        unpend(l, t);   /* its place in the heap is free: no growth needed */
    if (t->slot >= 0) {
        t->at = at;
        sift_down(l, (size_t)t->slot);
        sift_up(l, (size_t)t->slot);
        return 0;
    }
    if (l->n_heap == l->cap && heap_grow(l) < 0)
        return -1;
    t->at = at;
    heap_set(l, l->n_heap++, t);
    sift_up(l, l->n_heap - 1);
    return 0;
}

void evloop_timer_stop(evloop *l, ev_timer *t)
{
    if (t->slot == SLOT_DUE)
        unpend(l, t);
    else if (t->slot >= 0)
        heap_remove(l, (size_t)t->slot);
}

/* ---- hooks -------------------------------------------------------------- */

void evloop_hook_add(evloop *l, ev_hook *h, ev_hook_fn fn, void *cls)
{
    /* At the head: a hook added by a hook first runs in the next turn. */
    h->fn = fn;
    h->cls = cls;
    h->next = l->hooks;
    l->hooks = h;
}

void evloop_after_add(evloop *l, ev_hook *h, ev_hook_fn fn, void *cls)
{
    h->fn = fn;
    h->cls = cls;
    h->next = l->afters;
    l->afters = h;
}

static int unlink_hook(evloop *l, ev_hook **head, ev_hook *h)
{
    for (ev_hook **p = head; *p; p = &(*p)->next) {
        if (*p == h) {
            *p = h->next;
            if (l->hook_next == h)
                l->hook_next = h->next;
            h->next = NULL;
            return 1;
        }
    }
    return 0;
}

void evloop_hook_del(evloop *l, ev_hook *h)
{
    if (!unlink_hook(l, &l->hooks, h))
        unlink_hook(l, &l->afters, h);
}

/* ---- calls from other threads ------------------------------------------- */

int evloop_post(evloop *l, ev_call_fn fn, void *cls)
{
    call *c = malloc(sizeof *c);
    if (!c)
        return -1;
    c->fn = fn;
    c->cls = cls;
    c->next = NULL;
    pthread_mutex_lock(&l->mu);
    int was_empty = !l->posted;
    *l->posted_tail = c;
    l->posted_tail = &c->next;
    atomic_store(&l->has_posted, 1);
    pthread_mutex_unlock(&l->mu);
    /* The loop looks at the queue after its hooks and before it sleeps,
     * so its own thread never needs the eventfd; another thread needs it
     * only for the first call of a batch, as the loop cannot sleep while
     * the queue holds anything. */
    if (was_empty && !evloop_on_loop(l))
        evloop_wake(l);
    return 0;
}

static void run_posted(evloop *l)
{
    /* Swapped out first: calls posted by these calls wait for the next
     * turn, so a call that posts itself cannot hold the loop. */
    if (!atomic_load(&l->has_posted))
        return;
    pthread_mutex_lock(&l->mu);
    call *c = l->posted;
    l->posted = NULL;
    l->posted_tail = &l->posted;
    atomic_store(&l->has_posted, 0);
    pthread_mutex_unlock(&l->mu);
    while (c) {
        call *next = c->next;
        ev_call_fn fn = c->fn;
        void *cls = c->cls;
        free(c);
        fn(cls);
        c = next;
    }
}

void evloop_wake(evloop *l)
{
    uint64_t one = 1;
    if (write(l->wake, &one, sizeof one) < 0) {
        /* EAGAIN: the counter is full, so a wakeup is pending anyway */
    }
}

void evloop_again(evloop *l)
{
    l->again = 1;
}

/* ---- turns -------------------------------------------------------------- */

/* The shorter of two sleeps in ms, -1 being none. */
static int shorter(int a, int b)
{
    if (b < 0)
        return a;
    if (a < 0 || b < a)
        return b;
    return a;
}

/* Rounded up: a sleep that ends before the timer is due would only make
 * the loop spin until it is. */
static int ms_until(double at)
{
    double ms = (at - evloop_now()) * 1000;
    if (!(ms > 0))
        return 0;
    if (ms >= INT_MAX)
        return INT_MAX;
    int m = (int)ms;
    return m < ms ? m + 1 : m;
}

int evloop_turn(evloop *l, int max_wait_ms)
{
    const evloop *outer = running_here;
    running_here = l;

    int wait = max_wait_ms < 0 ? -1 : max_wait_ms;
    for (ev_hook *h = l->hooks; h; h = l->hook_next) {
        l->hook_next = h->next;
        wait = shorter(wait, h->fn(l, h->cls));
    }
    l->hook_next = NULL;
    if (l->n_heap)
        wait = shorter(wait, ms_until(l->heap[0]->at));
    if (l->again) {
        l->again = 0;
        wait = 0;
    }
    if (wait != 0 && atomic_load(&l->has_posted))
        wait = 0;

    int n = epoll_wait(l->ep, l->ev, MAX_EVENTS, wait);
    if (n < 0) {
        if (errno != EINTR) {
            running_here = outer;
            return -1;
        }
        n = 0;   /* a signal must not starve the timers and calls */
    }
    l->ev_n = n;
    for (l->ev_i = 0; l->ev_i < l->ev_n; l->ev_i++) {
        void *p = l->ev[l->ev_i].data.ptr;
        if (!p)
            continue;   /* its watch was deleted earlier in this turn */
        if (p == &l->wake) {
            uint64_t v;
            if (read(l->wake, &v, sizeof v) < 0) {
                /* EAGAIN: nothing to drain */
            }
            continue;
        }
        ev_io *w = p;
        w->fn(l, w, l->ev[l->ev_i].events);
    }
    l->ev_n = l->ev_i = 0;

    fire_timers(l);
    run_posted(l);
    for (ev_hook *h = l->afters; h; h = l->hook_next) {
        l->hook_next = h->next;
        h->fn(l, h->cls);
    }
    l->hook_next = NULL;

    running_here = outer;
    return 0;
}

int evloop_run(evloop *l)
{
    const evloop *outer = running_here;
    running_here = l;
    int rc = 0;
    /* Exchanged, not read: a stop ends one run, not every later one. */
    while (!atomic_exchange(&l->stop, 0)) {
        if (evloop_turn(l, -1) < 0) {
            rc = -1;
            break;
        }
    }
    running_here = outer;
    return rc;
}

void evloop_stop(evloop *l)
{
    atomic_store(&l->stop, 1);
    evloop_wake(l);
}

int evloop_on_loop(const evloop *l)
{
    return running_here == l;
}
