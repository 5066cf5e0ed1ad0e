/* metrics.h - counters the request threads bump without a lock (atomics)
 * and the Prometheus text exposition of everything (GET /metrics). */
#ifndef ELDR_ROUTER_METRICS_H
#define ELDR_ROUTER_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#define METRICS_BUCKETS 14

/* upper bounds of eldr_route_seconds_bucket, seconds (then +Inf) */
extern const double metrics_bounds[METRICS_BUCKETS];

typedef struct metrics_t {
    atomic_uint_least64_t route_bucket[METRICS_BUCKETS + 1];
    atomic_uint_least64_t route_count;
    atomic_uint_least64_t route_ns;          /* sum of route latencies, ns */
    atomic_uint_least64_t responses[6];      /* by status class: 1xx..5xx (index 1..5) */
    atomic_uint_least64_t bad_requests;      /* 4xx answers */
    atomic_uint_least64_t kv_events;         /* events applied */
    atomic_uint_least64_t model_swaps;
    atomic_uint_least64_t auth_failures;   /* 401 answers */
} metrics_t;

void metrics_init(metrics_t *m);
/* One route answered in secs (success or not). */
void metrics_route(metrics_t *m, double secs);
void metrics_response(metrics_t *m, int status);

/* A growable text buffer for the exposition. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
    int oom;
} strbuf;
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A label value with \, " and newline escaped. */
void sb_label(strbuf *b, const char *v);

/* The histogram and counters of m, in exposition format. */
void metrics_render(const metrics_t *m, strbuf *b);

#endif
