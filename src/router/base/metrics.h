/* metrics.h - counters the request threads bump without a lock (atomics)
 * and the Prometheus text exposition of everything (GET /metrics). */
#ifndef ELDR_ROUTER_METRICS_H
#define ELDR_ROUTER_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "strbuf.h"

#define METRICS_BUCKETS 21
#define METRICS_ENDPOINTS 16     /* endpoint slots; the last is "other" */
#define METRICS_CODES 16         /* the status codes counted one by one */

/* the codes of eldr_http_responses_by_endpoint_total (then "other") */
extern const int metrics_codes[METRICS_CODES - 1];

/* upper bounds of eldr_route_seconds_bucket, seconds (then +Inf) */
extern const double metrics_bounds[METRICS_BUCKETS];

typedef struct metrics_t {
    atomic_uint_least64_t route_bucket[METRICS_BUCKETS + 1];
    atomic_uint_least64_t route_count;
    atomic_uint_least64_t route_ns;          /* sum of route latencies, ns */
    atomic_uint_least64_t responses[6];      /* by status class: 1xx..5xx (index 1..5) */
    atomic_uint_least64_t bad_requests;      /* 4xx answers */
    atomic_uint_least64_t model_swaps;
    atomic_uint_least64_t auth_failures;   /* 401 answers */
    atomic_uint_least64_t reload_failures;  /* SIGHUP reloads that failed */
    atomic_uint_least64_t deadline_cuts;    /* bodies cut at --request-deadline */
    atomic_uint_least64_t persist_failures; /* PUT /v1/model not written to the state dir */
    atomic_uint_least64_t protocol_errors;  /* answered by libmicrohttpd itself (bad framing) */
    atomic_uint_least64_t body_bytes;       /* request bodies held now, bytes (--body-budget) */
    atomic_uint_least64_t body_refusals;    /* 503: a body would have passed --body-budget */
    atomic_uint_least64_t header_timeouts;  /* connections closed at --header-timeout */
    atomic_uint_least64_t per_ip_refusals;  /* connections refused at --max-conns-per-ip */
    atomic_uint_least64_t by_endpoint[METRICS_ENDPOINTS][METRICS_CODES];
    const char *endpoint_names[METRICS_ENDPOINTS]; /* "POST /v1/route", ...; NULL unused */
} metrics_t;

void metrics_init(metrics_t *m);
/* One route answered in secs (success or not). */
void metrics_route(metrics_t *m, double secs);
void metrics_response(metrics_t *m, int status);
/* The same, also counted by endpoint (index into endpoint_names, or -1:
 * no endpoint, e.g. an unknown path) and code. */
void metrics_response_at(metrics_t *m, int endpoint, int status);

/* The histogram and counters of m, in exposition format. */
void metrics_render(const metrics_t *m, strbuf *b);

/* A family's "# HELP" and "# TYPE" lines (every family has both:
 * promtool check metrics), and with them one unlabelled value. */
void metrics_head(strbuf *b, const char *name, const char *type, const char *help);
void metrics_series(strbuf *b, const char *name, const char *type, const char *help,
                    uint64_t v);

/* --body-budget, one count for every front end that holds request bodies
 * (the HTTP glue, the gateway picker): take n bytes of it (0), or -1 and
 * nothing taken when held + n would pass budget. Give bytes back with an
 * atomic_fetch_sub on body_bytes. */
int metrics_body_take(metrics_t *m, size_t n, long long budget);

#endif
