/* replay.c - the replay engine (replay.h): one queue of timed events
 * (route at arrival, finish after decode) and a few HTTP threads that
 * serve it. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "err.h"
#include "replay.h"

typedef struct event {
    double due;                  /* wall seconds after the start */
    int64_t req;
    int finish;                  /* 0 route, 1 finish */
} event;

typedef struct run {
    const replay_plan *p;
    replay_result *res;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    event *heap;                 /* min-heap on due */
    int64_t n_heap, cap_heap;
    int64_t outstanding;         /* events not yet done (a route's finish included) */
    int64_t inflight;
    int64_t done_routes;         /* routes sent or skipped (progress) */
    int64_t drain_total, drain_base; /* in flight / finished at the last route; -1 before */
    progress_t pg;
    struct timespec t0;
    atomic_int not_routing;      /* a route was answered 404 before any succeeded */
} run;

/* Under the lock, after an event: routes sent so far, then the drain. */
static void report(run *r)
{
    const replay_plan *p = r->p;
    if (!p->progress)
        return;
    if (r->done_routes < p->n) {
        progress_tick(&r->pg, REPLAY_ROUTING, r->done_routes, p->n);
        return;
    }
    int64_t finished = r->res->finished + r->res->finish_errors;
    if (r->drain_total < 0) {
        progress_tick(&r->pg, REPLAY_ROUTING, p->n, p->n);
        r->drain_total = r->inflight;
        r->drain_base = finished;
    }
    if (r->drain_total > 0)
        progress_tick(&r->pg, REPLAY_DRAIN, finished - r->drain_base, r->drain_total);
}

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void heap_push(run *r, event e)
{
    int64_t i = r->n_heap++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (r->heap[up].due <= e.due)
            break;
        r->heap[i] = r->heap[up];
        i = up;
    }
    r->heap[i] = e;
}

static event heap_pop(run *r)
{
    event top = r->heap[0], last = r->heap[--r->n_heap];
    int64_t i = 0, n = r->n_heap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && r->heap[c + 1].due < r->heap[c].due)
            c++;
        if (last.due <= r->heap[c].due)
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (n)
        r->heap[i] = last;
    return top;
}

/* When an event may run: everything due after the deadline runs at it
 * (a finish is sent, a route skipped), so a bounded run ends on time and
 * leaves nothing in flight. */
static double effective_due(const run *r, const event *e)
{
    if (!e->finish && atomic_load(&r->not_routing))
        return 0;                /* the URL does not route: skip the rest now */
    return e->due > r->p->max_seconds ? r->p->max_seconds : e->due;
}

static void keep_error(replay_result *res, const char *msg)
{
    if (!res->first_error[0])
        snprintf(res->first_error, sizeof res->first_error, "%s", msg);
}

static void tally_rule(replay_result *res, const char *rule)
{
    int i = 0;
    while (i < res->n_rules && strcmp(res->rule_name[i], rule))
        i++;
    if (i == res->n_rules) {
        if (res->n_rules == REPLAY_RULES)
            return;
        snprintf(res->rule_name[res->n_rules++], sizeof res->rule_name[0], "%s", rule);
    }
    res->rule_count[i]++;
}

/* Take the next due event (waiting for it); 0 when the run is over. */
static int next_event(run *r, event *out)
{
    for (;;) {
        if (r->outstanding == 0)
            return 0;
        if (r->n_heap == 0) {
            pthread_cond_wait(&r->wake, &r->lock);
            continue;
        }
        double due = effective_due(r, &r->heap[0]), now = since(&r->t0);
        if (due <= now) {
            *out = heap_pop(r);
            return 1;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double wait = due - now, secs = floor(wait);
        until.tv_sec += (time_t)secs;
        until.tv_nsec += (long)((wait - secs) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->wake, &r->lock, &until);
    }
}

static void do_route(run *r, client_t *c, const event *e, char *idbuf)
{
    const replay_plan *p = r->p;
    replay_result *res = r->res;
    if (e->due > p->max_seconds || since(&r->t0) > p->max_seconds ||
        atomic_load(&r->not_routing)) {
        pthread_mutex_lock(&r->lock);
        res->skipped++;
        r->done_routes++;
        r->outstanding--;
        return;
    }
    char err[ELDR_ERRLEN];
    client_routed out;
    long status = 0;
    double t = since(&r->t0);
    size_t at = (size_t)p->row[e->req] * p->cells;
    int rc = p->gates ? client_route_gates(c, idbuf, p->gates + at, p->cells, &out, NULL, &status,
                                           err, sizeof err)
                      : client_route(c, idbuf, p->counts + at, p->cells, &out, NULL, &status,
                                     err, sizeof err);
    double now = since(&r->t0), ms = (now - t) * 1e3;
    pthread_mutex_lock(&r->lock);
    r->done_routes++;
    if (rc < 0) {
        res->route_errors++;
        keep_error(res, err);
        r->outstanding--;
        /* 404 before any route succeeded: this URL has no /v1/route (eldrd's
         * admin listener, another server); every other route would be the
         * same 404, so the run stops here */
        if (status == 404 && res->routed == 0 && !atomic_load(&r->not_routing)) {
            atomic_store(&r->not_routing, 1);
            res->not_routing = 1;
            snprintf(res->first_error, sizeof res->first_error, "%s", err);
            pthread_cond_broadcast(&r->wake);
        }
        return;
    }
    if (res->routed == 0)
        res->first_route = now;
    res->last_route = now;
    res->latency_ms[res->routed++] = ms;
    if (out.worker_index >= 0 && out.worker_index < p->K)
        res->per_worker[out.worker_index]++;
    tally_rule(res, out.rule);
    if (++r->inflight > res->max_inflight)
        res->max_inflight = r->inflight;
    heap_push(r, (event){now + p->decode_s[e->req], e->req, 1});
    pthread_cond_signal(&r->wake);
}

static void do_finish(run *r, client_t *c, const char *idbuf)
{
    char err[ELDR_ERRLEN];
    int rc = client_finish(c, idbuf, NULL, NULL, err, sizeof err);
    pthread_mutex_lock(&r->lock);
    r->inflight--;
    r->outstanding--;
    if (rc < 0) {
        r->res->finish_errors++;
        keep_error(r->res, err);
    } else {
        r->res->finished++;
    }
}

static void *worker_main(void *arg)
{
    run *r = arg;
    const replay_plan *p = r->p;
    char err[ELDR_ERRLEN], idbuf[256];
    client_t *c = client_new(p->url, p->timeout_s, err, sizeof err);
    if (c && p->auth_header && client_add_header(c, p->auth_header, err, sizeof err) < 0) {
        client_free(c);
        c = NULL;
    }
    pthread_mutex_lock(&r->lock);
    event e;
    while (next_event(r, &e)) {
        pthread_mutex_unlock(&r->lock);
        snprintf(idbuf, sizeof idbuf, "%s%lld", p->id_prefix, (long long)e.req);
        if (!c) {  /* no client: every call of this thread fails alike */
            pthread_mutex_lock(&r->lock);
            if (!e.finish)
                r->done_routes++;
            *(e.finish ? &r->res->finish_errors : &r->res->route_errors) += 1;
            keep_error(r->res, err);
            r->outstanding--;
        } else if (e.finish) {
            do_finish(r, c, idbuf);
        } else {
            do_route(r, c, &e, idbuf);
        }
        /* back under the lock */
        report(r);
        if (r->outstanding == 0)
            pthread_cond_broadcast(&r->wake);
    }
    pthread_mutex_unlock(&r->lock);
    client_free(c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int check_plan(const replay_plan *p, char *err, size_t errlen)
{
    if (p->n < 0 || p->cells == 0 || !p->url || !p->counts || !p->row || !p->arrive_s ||
        !p->decode_s || !p->id_prefix)
        return eldr_errf(err, errlen, "replay: incomplete plan");
    if (p->concurrency < 1 || p->concurrency > 64)
        return eldr_errf(err, errlen, "replay: concurrency %d not in 1..64", p->concurrency);
    if (p->K < 1 || p->K > REPLAY_MAX_WORKERS)
        return eldr_errf(err, errlen, "replay: K = %d not in 1..%d", p->K, REPLAY_MAX_WORKERS);
    if (!(p->max_seconds > 0) || !(p->timeout_s > 0))
        return eldr_errf(err, errlen, "replay: time bounds must be > 0");
    for (int64_t i = 0; i < p->n; i++)
        if (!isfinite(p->arrive_s[i]) || p->arrive_s[i] < 0 || !isfinite(p->decode_s[i]) ||
            p->decode_s[i] < 0)
            return eldr_errf(err, errlen, "replay: request %lld: bad arrival or decode time",
                             (long long)i);
    return 0;
}

int replay_run(const replay_plan *p, replay_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (check_plan(p, err, errlen) < 0)
        return -1;
    run r = {.p = p, .res = res, .outstanding = p->n, .cap_heap = p->n + 1,
             .drain_total = -1};
    progress_init(&r.pg, p->progress, p->progress_arg);
    r.heap = malloc((size_t)r.cap_heap * sizeof *r.heap);
    res->latency_ms = malloc((size_t)(p->n + 1) * sizeof *res->latency_ms);
    pthread_t *th = calloc((size_t)p->concurrency, sizeof *th);
    if (!r.heap || !res->latency_ms || !th) {
        free(r.heap);
        free(th);
        replay_result_free(res);
        return eldr_errf(err, errlen, "replay: out of memory for %lld requests",
                         (long long)p->n);
    }
    /* every request is routed once and finished once: the heap never
     * holds more than n events */
    for (int64_t i = 0; i < p->n; i++)
        heap_push(&r, (event){p->arrive_s[i], i, 0});
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.wake, NULL);
    clock_gettime(CLOCK_MONOTONIC, &r.t0);
    int started = 0;
    for (; started < p->concurrency; started++)
        if (pthread_create(&th[started], NULL, worker_main, &r) != 0)
            break;
    if (started == 0) {
        /* no thread: nothing ran; say so rather than hang */
        eldr_errf(err, errlen, "replay: cannot start a thread");
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    res->seconds = since(&r.t0);
    pthread_cond_destroy(&r.wake);
    pthread_mutex_destroy(&r.lock);
    free(r.heap);
    free(th);
    if (started == 0) {
        replay_result_free(res);
        return -1;
    }
    qsort(res->latency_ms, (size_t)res->routed, sizeof *res->latency_ms, cmp_double);
    return 0;
}

void replay_result_free(replay_result *res)
{
    free(res->latency_ms);
    res->latency_ms = NULL;
}

double replay_quantile(const double *sorted, int64_t n, double q)
{
    if (n <= 0)
        return NAN;
    int64_t i = (int64_t)ceil(q * (double)n) - 1;  /* nearest rank */
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}
