/* test_router_evloop.c - the event loop (net/evloop.h).
 *
 * Fds: a readable pipe fires with EPOLLIN, a watch moved to EPOLLOUT
 * fires with it, a watch deleted by another callback of the same turn
 * never sees the event epoll already returned for it (its owner is freed
 * at once, so ASan would see a late delivery), not even when re-added at
 * once on another fd. A turn runs hooks, fds, timers, calls, in that
 * order. Timers: they fire in the
 * order they are due whatever the order they were armed in, a stopped or
 * moved timer does not fire at its old time, a timer stopped by another
 * timer of the same phase does not fire, a periodic timer fires the count
 * it asked for, a timer re-armed for now in its own callback fires once
 * per turn, and the turn's sleep ends when the next timer is due. Hooks
 * run every turn and bound the sleep. Posted calls: from another thread
 * they wake a loop asleep in evloop_run and run on its thread in the
 * order posted; 10,000 from 2 threads all run exactly once, each thread's
 * in order; calls posted by calls run in the next turn. evloop_stop from
 * another thread ends evloop_run, and evloop_free drops armed timers and
 * unrun calls without leaking. Every wait is bounded (alarm, bounded
 * loops), so a broken loop fails instead of hanging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../src/router/net/evloop.h"

#define GUARD_S 30   /* per test: SIGALRM ends a hung test, and the run */

static evloop *new_loop(void)
{
    char err[200] = "";
    evloop *l = evloop_new(err, sizeof err);
    if (!l)
        fail_msg("evloop_new: %s", err);
    return l;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0) {
    }
}

static void put_byte(int fd)
{
    assert_int_equal(write(fd, "x", 1), 1);
}

/* ---- fds ---------------------------------------------------------------- */

typedef struct io_seen {
    int calls;
    uint32_t events;
    ev_io *w;
    int on_loop;
} io_seen;

static void io_record(evloop *l, ev_io *w, uint32_t events)
{
    io_seen *s = w->cls;
    s->calls++;
    s->events = events;
    s->w = w;
    s->on_loop = evloop_on_loop(l);
}

static void test_io_in_out(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    int p[2];
    assert_int_equal(pipe(p), 0);

    io_seen s = {0};
    ev_io w;
    assert_int_equal(evloop_io_add(l, &w, p[0], EPOLLIN, io_record, &s), 0);
    assert_int_equal(w.fd, p[0]);
    assert_int_equal(w.events, EPOLLIN);

    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(s.calls, 0);   /* nothing to read yet */

    put_byte(p[1]);
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(s.calls, 1);
    assert_true(s.events & EPOLLIN);
    assert_ptr_equal(s.w, &w);
    assert_int_equal(s.on_loop, 1);   /* callbacks run "on the loop" */
    assert_int_equal(evloop_on_loop(l), 0);   /* ... but not between turns */

    /* Level-triggered: still readable, fires again. */
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(s.calls, 2);

    /* Moved to EPOLLOUT on a socket with room to write. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    io_seen so = {0};
    ev_io wo;
    assert_int_equal(evloop_io_add(l, &wo, sv[0], EPOLLIN, io_record, &so), 0);
    evloop_io_del(l, &w);
    assert_int_equal(w.fd, -1);
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(so.calls, 0);
    assert_int_equal(s.calls, 2);   /* deleted: the pipe is still readable */

    assert_int_equal(evloop_io_mod(l, &wo, EPOLLOUT), 0);
    assert_int_equal(wo.events, EPOLLOUT);
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(so.calls, 1);
    assert_true(so.events & EPOLLOUT);
    assert_false(so.events & EPOLLIN);

    /* And back to EPOLLIN: silent until the peer writes. */
    assert_int_equal(evloop_io_mod(l, &wo, EPOLLIN), 0);
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(so.calls, 1);
    put_byte(sv[1]);
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(so.calls, 2);
    assert_true(so.events & EPOLLIN);
    assert_false(so.events & EPOLLOUT);

    evloop_io_del(l, &wo);
    evloop_io_del(l, &wo);   /* a no-op the second time */
    assert_int_equal(wo.fd, -1);
    assert_int_equal(evloop_io_mod(l, &wo, EPOLLIN), -1);

    /* Refusals: a bad fd, and a regular file (epoll cannot watch it). */
    ev_io bad;
    assert_int_equal(evloop_io_add(l, &bad, -1, EPOLLIN, io_record, &s), -1);
    assert_int_equal(bad.fd, -1);
    evloop_io_del(l, &bad);
    char tmpl[] = "/tmp/evloop_test_XXXXXX";
    int reg = mkstemp(tmpl);
    assert_true(reg >= 0);
    unlink(tmpl);
    assert_int_equal(evloop_io_add(l, &bad, reg, EPOLLIN, io_record, &s), -1);
    assert_int_equal(bad.fd, -1);

    close(reg);
    close(sv[0]);
    close(sv[1]);
    close(p[0]);
    close(p[1]);
    evloop_free(l);
}

/* Two pipes readable in one turn; whichever is delivered first deletes
 * the other and frees it, so a delivery of the second would touch freed
 * memory. */
typedef struct pair_watch {
    ev_io w;
    int calls;
    struct pair_watch **other;   /* where the other lives (NULL once freed) */
} pair_watch;

static void pair_fire(evloop *l, ev_io *w, uint32_t events)
{
    pair_watch *me = w->cls;
    assert_true(events & EPOLLIN);
    me->calls++;
    pair_watch *o = *me->other;
    if (o) {
        evloop_io_del(l, &o->w);
        assert_int_equal(o->w.fd, -1);
        *me->other = NULL;
        free(o);
    }
}

static void test_io_del_in_turn(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    pair_watch *pa = calloc(1, sizeof *pa), *pb = calloc(1, sizeof *pb);
    assert_non_null(pa);
    assert_non_null(pb);
    pa->other = &pb;
    pb->other = &pa;
    assert_int_equal(evloop_io_add(l, &pa->w, a[0], EPOLLIN, pair_fire, pa), 0);
    assert_int_equal(evloop_io_add(l, &pb->w, b[0], EPOLLIN, pair_fire, pb), 0);
    put_byte(a[1]);
    put_byte(b[1]);

    assert_int_equal(evloop_turn(l, 1000), 0);
    /* Exactly one survived, it fired once, the other never did. */
    assert_true((pa == NULL) != (pb == NULL));
    pair_watch *left = pa ? pa : pb;
    assert_int_equal(left->calls, 1);

    for (int i = 0; i < 5; i++)
        assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(left->calls, 6);   /* level-triggered, still readable */

    evloop_io_del(l, &left->w);
    free(left);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    evloop_free(l);
}

/* Same, but the deleted watch is at once re-added on a third pipe: the
 * event returned for its old registration is still not delivered, and
 * the new one is, in the next turn. */
typedef struct readd {
    ev_io w;
    int calls;
    struct readd *other;
    int fd3;
} readd;

static void readd_fire(evloop *l, ev_io *w, uint32_t events)
{
    (void)events;
    readd *r = w->cls;
    r->calls++;
    readd *o = r->other;
    if (o && o->calls == 0 && o->w.fd != r->fd3) {
        evloop_io_del(l, &o->w);
        assert_int_equal(evloop_io_add(l, &o->w, r->fd3, EPOLLIN, readd_fire, o), 0);
    }
}

static void test_io_del_readd(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    int a[2], b[2], c[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    assert_int_equal(pipe(c), 0);
    readd ra = {.fd3 = c[0]}, rb = {.fd3 = c[0]};
    ra.other = &rb;
    rb.other = &ra;
    assert_int_equal(evloop_io_add(l, &ra.w, a[0], EPOLLIN, readd_fire, &ra), 0);
    assert_int_equal(evloop_io_add(l, &rb.w, b[0], EPOLLIN, readd_fire, &rb), 0);
    put_byte(a[1]);
    put_byte(b[1]);
    put_byte(c[1]);
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(ra.calls + rb.calls, 1);
    readd *first = ra.calls ? &ra : &rb, *moved = first->other;
    assert_int_equal(moved->w.fd, c[0]);
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_int_equal(moved->calls, 1);   /* now from the third pipe */
    assert_int_equal(first->calls, 2);
    evloop_io_del(l, &ra.w);
    evloop_io_del(l, &rb.w);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    close(c[0]);
    close(c[1]);
    evloop_free(l);
}

/* ---- timers ------------------------------------------------------------- */

typedef struct tlog {
    int order[16];
    int n;
} tlog;

typedef struct tnamed {
    ev_timer t;
    int id;
    tlog *log;
    ev_timer *victim;   /* stopped when this one fires */
    int free_victim;
} tnamed;

static void tnamed_fire(evloop *l, ev_timer *t)
{
    tnamed *x = t->cls;
    assert_int_equal(t->slot, -1);   /* fired: disarmed */
    assert_true(x->log->n < 16);
    x->log->order[x->log->n++] = x->id;
    if (x->victim) {
        evloop_timer_stop(l, x->victim);
        assert_int_equal(x->victim->slot, -1);
        if (x->free_victim)
            free(x->victim->cls);
    }
}

static void test_timer_order(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    tlog log = {{0}, 0};
    /* Due times in ms, armed out of order; ids are the expected rank. */
    static const int after_ms[] = {50, 10, 30, 20, 40, 25, 45, 15};
    enum { N = sizeof after_ms / sizeof after_ms[0] };
    tnamed tm[N];
    for (int i = 0; i < N; i++) {
        tm[i].log = &log;
        tm[i].victim = NULL;
        tm[i].free_victim = 0;
        evloop_timer_init(&tm[i].t, tnamed_fire, &tm[i]);
        assert_int_equal(tm[i].t.slot, -1);
    }
    for (int i = 0; i < N; i++) {
        int rank = 0;
        for (int j = 0; j < N; j++)
            rank += after_ms[j] < after_ms[i];
        tm[i].id = rank;
        assert_int_equal(evloop_timer_start(l, &tm[i].t, after_ms[i] / 1000.0), 0);
        assert_true(tm[i].t.slot >= 0);
    }
    /* One stopped, one never started, one moved later than all. */
    tnamed stopped = {.id = 100, .log = &log}, never = {.id = 101, .log = &log},
           moved = {.id = N, .log = &log};
    evloop_timer_init(&stopped.t, tnamed_fire, &stopped);
    evloop_timer_init(&never.t, tnamed_fire, &never);
    evloop_timer_init(&moved.t, tnamed_fire, &moved);
    assert_int_equal(evloop_timer_start(l, &stopped.t, 0.005), 0);
    assert_int_equal(evloop_timer_start(l, &moved.t, 0.001), 0);
    evloop_timer_stop(l, &stopped.t);
    assert_int_equal(stopped.t.slot, -1);
    evloop_timer_stop(l, &stopped.t);   /* a no-op the second time */
    evloop_timer_stop(l, &never.t);
    assert_int_equal(evloop_timer_start(l, &moved.t, 0.060), 0);

    sleep_ms(90);   /* all due: one turn fires them all, in order */
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(log.n, N + 1);
    for (int i = 0; i <= N; i++)
        assert_int_equal(log.order[i], i);
    for (int i = 0; i < N; i++)
        assert_int_equal(tm[i].t.slot, -1);
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(log.n, N + 1);
    evloop_free(l);
}

/* Many timers, armed in a shuffled order of due time, fired over
 * several turns and past the heap's first growth: the order of firing is
 * the order of due time (`at`, as arming itself takes time), each fires
 * once, and the stopped ones (every tenth) never fire. */
enum { NMANY = 200 };
static int many_fired[NMANY], many_n;
static double many_at[NMANY];

static void fire_many(evloop *l, ev_timer *t)
{
    (void)l;
    assert_true(many_n < NMANY);
    many_at[many_n] = t->at;
    many_fired[many_n++] = (int)(intptr_t)t->cls;
}

static void test_timer_order_many(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    static int perm[NMANY];
    static ev_timer t[NMANY];
    for (int i = 0; i < NMANY; i++)
        perm[i] = i;
    srand(7);
    for (int i = NMANY - 1; i > 0; i--) {
        int j = rand() % (i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i < NMANY; i++) {
        evloop_timer_init(&t[i], fire_many, (void *)(intptr_t)perm[i]);
        assert_int_equal(evloop_timer_start(l, &t[i], perm[i] * 0.0002), 0);
    }
    for (int i = 0; i < NMANY; i++)
        if (perm[i] % 10 == 9)
            evloop_timer_stop(l, &t[i]);
    many_n = 0;
    int want = NMANY - NMANY / 10, turns = 0;
    for (; turns < 1000 && many_n < want; turns++)
        assert_int_equal(evloop_turn(l, 100), 0);
    assert_int_equal(many_n, want);
    assert_true(turns > 1);   /* spread over 40 ms: not all in one turn */
    static int seen[NMANY];
    memset(seen, 0, sizeof seen);
    for (int i = 1; i < many_n; i++)
        assert_true(many_at[i - 1] <= many_at[i]);
    for (int i = 0; i < many_n; i++) {
        assert_true(many_fired[i] % 10 != 9);
        assert_int_equal(seen[many_fired[i]]++, 0);
    }
    evloop_free(l);
}

/* A timer stopped (and its owner freed) by an earlier timer of the same
 * firing phase does not fire; one re-armed later by it fires later. */
static void test_timer_stop_in_phase(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    tlog log = {{0}, 0};
    tnamed *victim = calloc(1, sizeof *victim);
    assert_non_null(victim);
    victim->id = 9;
    victim->log = &log;
    tnamed killer = {.id = 1, .log = &log, .victim = &victim->t, .free_victim = 1};
    tnamed after = {.id = 2, .log = &log};
    evloop_timer_init(&killer.t, tnamed_fire, &killer);
    evloop_timer_init(&victim->t, tnamed_fire, victim);
    evloop_timer_init(&after.t, tnamed_fire, &after);
    assert_int_equal(evloop_timer_start(l, &killer.t, 0.001), 0);
    assert_int_equal(evloop_timer_start(l, &victim->t, 0.002), 0);
    assert_int_equal(evloop_timer_start(l, &after.t, 0.003), 0);
    sleep_ms(20);
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.order[0], 1);
    assert_int_equal(log.order[1], 2);
    evloop_free(l);
}

typedef struct periodic {
    ev_timer t;
    int count, limit;
    double every;
} periodic;

static void periodic_fire(evloop *l, ev_timer *t)
{
    periodic *p = t->cls;
    p->count++;
    if (p->count < p->limit)
        assert_int_equal(evloop_timer_start(l, t, p->every), 0);
}

static void test_timer_periodic(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    periodic p = {.count = 0, .limit = 10, .every = 0.005};
    evloop_timer_init(&p.t, periodic_fire, &p);
    assert_int_equal(evloop_timer_start(l, &p.t, p.every), 0);
    int turns = 0;
    double t0 = evloop_now();
    while (p.count < p.limit && turns < 1000) {
        assert_int_equal(evloop_turn(l, 1000), 0);
        turns++;
    }
    assert_int_equal(p.count, p.limit);
    assert_true(evloop_now() - t0 < 5.0);
    assert_int_equal(p.t.slot, -1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(evloop_turn(l, 10), 0);
    assert_int_equal(p.count, p.limit);
    evloop_free(l);
}

/* Re-armed for now (or the past) in its own callback: once per turn. */
static void test_timer_rearm_now(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    periodic p = {.count = 0, .limit = 1 << 30, .every = 0};
    periodic q = {.count = 0, .limit = 1 << 30, .every = -1.0};
    evloop_timer_init(&p.t, periodic_fire, &p);
    evloop_timer_init(&q.t, periodic_fire, &q);
    assert_int_equal(evloop_timer_start(l, &p.t, 0), 0);
    assert_int_equal(evloop_timer_start(l, &q.t, -1.0), 0);
    for (int i = 1; i <= 5; i++) {
        double t0 = evloop_now();
        assert_int_equal(evloop_turn(l, 5000), 0);   /* due at once: no sleep */
        assert_true(evloop_now() - t0 < 2.0);
        assert_int_equal(p.count, i);
        assert_int_equal(q.count, i);
    }
    evloop_timer_stop(l, &p.t);
    evloop_timer_stop(l, &q.t);
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(p.count, 5);
    assert_int_equal(q.count, 5);
    evloop_free(l);
}

static void count_fire(evloop *l, ev_timer *t)
{
    (void)l;
    ++*(int *)t->cls;
}

static void test_timer_bounds_sleep(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    int fired = 0;
    ev_timer t;
    evloop_timer_init(&t, count_fire, &fired);

    /* max_wait 5000 ms and no limit of its own: the timer's 20 ms wins. */
    static const int limits[] = {5000, -1};
    for (size_t k = 0; k < 2; k++) {
        fired = 0;
        assert_int_equal(evloop_timer_start(l, &t, 0.020), 0);
        double t0 = evloop_now();
        for (int i = 0; i < 5 && !fired; i++)
            assert_int_equal(evloop_turn(l, limits[k]), 0);
        assert_int_equal(fired, 1);
        assert_true(evloop_now() - t0 < 2.0);
    }

    /* A far timer does not stop max_wait_ms from ending the turn. */
    assert_int_equal(evloop_timer_start(l, &t, 3600), 0);
    double t0 = evloop_now();
    assert_int_equal(evloop_turn(l, 10), 0);
    assert_true(evloop_now() - t0 < 2.0);
    assert_int_equal(fired, 1);
    evloop_free(l);   /* with t still armed */
    assert_int_equal(t.slot, -1);
}

/* ---- hooks -------------------------------------------------------------- */

typedef struct hook_st {
    ev_hook h;
    int calls, limit;
    ev_hook *del;   /* deleted when this runs (may be itself) */
} hook_st;

static int hook_fn(evloop *l, void *cls)
{
    hook_st *s = cls;
    s->calls++;
    if (s->del) {
        evloop_hook_del(l, s->del);
        s->del = NULL;
    }
    return s->limit;
}

static void test_hooks(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    hook_st zero = {.limit = 0}, any = {.limit = -1};
    evloop_hook_add(l, &any.h, hook_fn, &any);
    evloop_hook_add(l, &zero.h, hook_fn, &zero);
    double t0 = evloop_now();
    for (int i = 1; i <= 20; i++) {
        assert_int_equal(evloop_turn(l, 5000), 0);
        assert_int_equal(zero.calls, i);
        assert_int_equal(any.calls, i);
    }
    assert_true(evloop_now() - t0 < 2.0);

    /* A limit of 30 ms: the turn sleeps, but not for 5 s. */
    zero.limit = 30;
    t0 = evloop_now();
    assert_int_equal(evloop_turn(l, 5000), 0);
    assert_true(evloop_now() - t0 < 2.0);
    assert_int_equal(zero.calls, 21);
    zero.limit = 0;

    /* A hook deleting itself, and one deleting another not yet run. */
    hook_st self = {.limit = -1}, other = {.limit = -1}, killer = {.limit = -1};
    evloop_hook_add(l, &self.h, hook_fn, &self);
    self.del = &self.h;
    evloop_hook_add(l, &other.h, hook_fn, &other);
    evloop_hook_add(l, &killer.h, hook_fn, &killer);   /* the newest runs first */
    killer.del = &other.h;
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(killer.calls, 1);
    assert_int_equal(self.calls, 1);
    assert_int_equal(zero.calls, 22);
    assert_int_equal(any.calls, 22);
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(killer.calls, 2);
    assert_int_equal(self.calls, 1);
    assert_int_equal(zero.calls, 23);
    assert_int_equal(any.calls, 23);
    assert_int_equal(other.calls, 0);   /* deleted before its turn came */

    evloop_hook_del(l, &zero.h);
    evloop_hook_del(l, &zero.h);   /* not on the list: a no-op */
    assert_int_equal(evloop_turn(l, 0), 0);
    assert_int_equal(zero.calls, 23);
    assert_int_equal(any.calls, 24);
    assert_int_equal(other.calls, 0);
    evloop_free(l);
}

/* evloop_again from a callback: the next turn does not sleep. */
static void again_fire(evloop *l, ev_timer *t)
{
    (void)t;
    evloop_again(l);
}

static void test_again(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    ev_timer t;
    evloop_timer_init(&t, again_fire, NULL);
    assert_int_equal(evloop_timer_start(l, &t, 0), 0);
    assert_int_equal(evloop_turn(l, 0), 0);
    double t0 = evloop_now();
    assert_int_equal(evloop_turn(l, 5000), 0);
    assert_true(evloop_now() - t0 < 2.0);
    evloop_free(l);
}

/* ---- the order of a turn ------------------------------------------------- */

typedef struct seq {
    char s[16];
    int n;
    evloop *l;
} seq;

static void seq_add(seq *q, char c)
{
    assert_true(q->n < 15);
    q->s[q->n++] = c;
    q->s[q->n] = '\0';
}

static void seq_io(evloop *l, ev_io *w, uint32_t events)
{
    (void)l;
    (void)events;
    seq_add(w->cls, 'i');
}

static void seq_timer(evloop *l, ev_timer *t)
{
    (void)l;
    seq_add(t->cls, 't');
}

static void seq_call2(void *cls)
{
    seq_add(cls, 'q');
}

static void seq_call(void *cls)
{
    seq *q = cls;
    seq_add(q, 'p');
    assert_int_equal(evloop_on_loop(q->l), 1);
    assert_int_equal(evloop_post(q->l, seq_call2, q), 0);   /* runs next turn */
}

static int seq_hook(evloop *l, void *cls)
{
    (void)l;
    seq_add(cls, 'h');
    return -1;
}

static void test_turn_order(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    seq q = {.n = 0, .l = l};
    int p[2];
    assert_int_equal(pipe(p), 0);
    ev_io w;
    ev_timer t;
    ev_hook h;
    assert_int_equal(evloop_io_add(l, &w, p[0], EPOLLIN, seq_io, &q), 0);
    evloop_timer_init(&t, seq_timer, &q);
    assert_int_equal(evloop_timer_start(l, &t, 0), 0);
    assert_int_equal(evloop_post(l, seq_call, &q), 0);   /* posted first, runs last */
    evloop_hook_add(l, &h, seq_hook, &q);
    put_byte(p[1]);
    assert_int_equal(evloop_turn(l, 1000), 0);
    assert_string_equal(q.s, "hitp");
    evloop_io_del(l, &w);
    evloop_hook_del(l, &h);
    /* The call posted by a call runs now, without a sleep. */
    double t0 = evloop_now();
    assert_int_equal(evloop_turn(l, 5000), 0);
    assert_true(evloop_now() - t0 < 2.0);
    assert_string_equal(q.s, "hitpq");
    close(p[0]);
    close(p[1]);
    evloop_free(l);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct runner {
    evloop *l;
    pthread_t tid;
    atomic_int done;
    int rc;
} runner;

static void *run_thread(void *arg)
{
    runner *r = arg;
    r->rc = evloop_run(r->l);
    atomic_store(&r->done, 1);
    return NULL;
}

static void runner_start(runner *r, evloop *l)
{
    r->l = l;
    r->rc = -2;
    atomic_init(&r->done, 0);
    assert_int_equal(pthread_create(&r->tid, NULL, run_thread, r), 0);
}

/* Stop the loop and join it, within a bounded wait. */
static void runner_stop(runner *r)
{
    evloop_stop(r->l);
    for (int i = 0; i < 5000 && !atomic_load(&r->done); i++)
        sleep_ms(1);
    assert_int_equal(atomic_load(&r->done), 1);
    assert_int_equal(pthread_join(r->tid, NULL), 0);
    assert_int_equal(r->rc, 0);
}

enum { NCALL = 200 };

typedef struct xcall {
    evloop *l;
    pthread_t loop_tid;
    int order[NCALL];
    atomic_int n;
    int on_loop, on_thread;
} xcall;

typedef struct xitem {
    xcall *x;
    int i;
} xitem;

static void xcall_fn(void *cls)
{
    xitem *it = cls;
    xcall *x = it->x;
    int n = atomic_load(&x->n);
    x->order[n] = it->i;
    x->on_loop += evloop_on_loop(x->l);
    x->on_thread += pthread_equal(pthread_self(), x->loop_tid) != 0;
    atomic_store(&x->n, n + 1);
}

static void test_post_wakes_run(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    runner r;
    static xcall x;
    static xitem it[NCALL];
    memset(&x, 0, sizeof x);
    x.l = l;
    atomic_init(&x.n, 0);
    runner_start(&r, l);
    x.loop_tid = r.tid;
    sleep_ms(50);   /* the loop is asleep in epoll_wait, without a timeout */
    assert_int_equal(evloop_on_loop(l), 0);

    for (int i = 0; i < NCALL; i++) {
        it[i] = (xitem){&x, i};
        assert_int_equal(evloop_post(l, xcall_fn, &it[i]), 0);
        if (i % 50 == 49)
            sleep_ms(5);   /* several batches, each needing its own wake */
    }
    for (int i = 0; i < 5000 && atomic_load(&x.n) < NCALL; i++)
        sleep_ms(1);
    int got = atomic_load(&x.n);
    runner_stop(&r);
    assert_int_equal(got, NCALL);
    for (int i = 0; i < NCALL; i++)
        assert_int_equal(x.order[i], i);
    assert_int_equal(x.on_loop, NCALL);
    assert_int_equal(x.on_thread, NCALL);
    evloop_free(l);
}

enum { NPOSTER = 2, PER_POSTER = 5000 };

typedef struct pcount {
    int runs[NPOSTER][PER_POSTER];
    int last[NPOSTER];
    int out_of_order;
    atomic_int total;
} pcount;

typedef struct pitem {
    pcount *c;
    int poster, seq;
} pitem;

static pitem pitems[NPOSTER][PER_POSTER];

static void pcount_fn(void *cls)
{
    pitem *it = cls;
    pcount *c = it->c;
    c->runs[it->poster][it->seq]++;
    if (it->seq != c->last[it->poster] + 1)
        c->out_of_order++;
    c->last[it->poster] = it->seq;
    atomic_fetch_add(&c->total, 1);
}

typedef struct poster {
    evloop *l;
    pcount *c;
    int id, failed;
} poster;

static void *poster_thread(void *arg)
{
    poster *p = arg;
    for (int i = 0; i < PER_POSTER; i++) {
        pitems[p->id][i] = (pitem){p->c, p->id, i};
        if (evloop_post(p->l, pcount_fn, &pitems[p->id][i]) < 0)
            p->failed++;
    }
    return NULL;
}

static void test_post_many(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();
    static pcount c;
    memset(&c, 0, sizeof c);
    for (int p = 0; p < NPOSTER; p++)
        c.last[p] = -1;
    atomic_init(&c.total, 0);
    runner r;
    runner_start(&r, l);
    poster ps[NPOSTER];
    pthread_t tids[NPOSTER];
    for (int p = 0; p < NPOSTER; p++) {
        ps[p] = (poster){l, &c, p, 0};
        assert_int_equal(pthread_create(&tids[p], NULL, poster_thread, &ps[p]), 0);
    }
    for (int p = 0; p < NPOSTER; p++) {
        assert_int_equal(pthread_join(tids[p], NULL), 0);
        assert_int_equal(ps[p].failed, 0);
    }
    for (int i = 0; i < 10000 && atomic_load(&c.total) < NPOSTER * PER_POSTER; i++)
        sleep_ms(1);
    runner_stop(&r);
    assert_int_equal(atomic_load(&c.total), NPOSTER * PER_POSTER);
    for (int p = 0; p < NPOSTER; p++)
        for (int i = 0; i < PER_POSTER; i++)
            assert_int_equal(c.runs[p][i], 1);
    assert_int_equal(c.out_of_order, 0);
    evloop_free(l);
}

static void stop_fire(evloop *l, ev_timer *t)
{
    ++*(int *)t->cls;
    evloop_stop(l);
}

static void test_stop(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop *l = new_loop();

    /* From another thread, while the loop sleeps with no timeout. */
    runner r;
    runner_start(&r, l);
    sleep_ms(30);
    assert_int_equal(atomic_load(&r.done), 0);
    runner_stop(&r);

    /* A second run on the same loop, stopped from a callback on it. */
    int fired = 0;
    ev_timer t;
    evloop_timer_init(&t, stop_fire, &fired);
    assert_int_equal(evloop_timer_start(l, &t, 0.010), 0);
    assert_int_equal(evloop_run(l), 0);
    assert_int_equal(fired, 1);
    assert_int_equal(evloop_on_loop(l), 0);

    /* A stop before the run ends the run it comes before. */
    evloop_stop(l);
    assert_int_equal(evloop_run(l), 0);
    evloop_free(l);
}

/* ---- freeing ------------------------------------------------------------ */

static void never_call(void *cls)
{
    ++*(int *)cls;
}

static void never_fire(evloop *l, ev_timer *t)
{
    (void)l;
    ++*(int *)t->cls;
}

static void test_free_drops(void **state)
{
    (void)state;
    alarm(GUARD_S);
    evloop_free(NULL);
    evloop *l = new_loop();
    int calls = 0, fires = 0;
    enum { NT = 100 };   /* past the heap's first size */
    ev_timer t[NT];
    for (int i = 0; i < NT; i++) {
        evloop_timer_init(&t[i], never_fire, &fires);
        assert_int_equal(evloop_timer_start(l, &t[i], 3600 + i), 0);
    }
    for (int i = 0; i < 1000; i++)
        assert_int_equal(evloop_post(l, never_call, &calls), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    ev_io w;
    io_seen s = {0};
    assert_int_equal(evloop_io_add(l, &w, p[0], EPOLLIN, io_record, &s), 0);
    evloop_free(l);
    assert_int_equal(calls, 0);
    assert_int_equal(fires, 0);
    for (int i = 0; i < NT; i++)
        assert_int_equal(t[i].slot, -1);
    /* The fd is the owner's: still open. */
    assert_int_equal(fcntl(p[0], F_GETFD) >= 0, 1);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_in_out),         cmocka_unit_test(test_io_del_in_turn),
        cmocka_unit_test(test_io_del_readd),      cmocka_unit_test(test_timer_order),
        cmocka_unit_test(test_timer_order_many),  cmocka_unit_test(test_timer_stop_in_phase),
        cmocka_unit_test(test_timer_periodic),    cmocka_unit_test(test_timer_rearm_now),
        cmocka_unit_test(test_timer_bounds_sleep), cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_again),             cmocka_unit_test(test_turn_order),
        cmocka_unit_test(test_post_wakes_run),    cmocka_unit_test(test_post_many),
        cmocka_unit_test(test_stop),              cmocka_unit_test(test_free_drops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
