/* metrics.h - counters the request threads bump without a lock (atomics)
 * and the Prometheus text exposition of everything (GET /metrics). */
#ifndef ELDR_ROUTER_METRICS_H
#define ELDR_ROUTER_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "strbuf.h"

#define METRICS_BUCKETS 21
#define METRICS_ENDPOINTS 16     /* endpoint slots; the last is "other" */
#define METRICS_CODES 16         /* the status codes counted one by one */
#define METRICS_LISTENERS 4      /* listener slots: public, admin, ext_proc */

/* Why a listener refused a connection (eldr_connections_refused_total's
 * reason label: metrics_refusal_names). */
enum {
    REFUSED_MAX_CONNS,           /* the listener held --max-conns */
    REFUSED_PER_IP,              /* the address held --max-conns-per-ip */
    REFUSED_SETUP,               /* accepted, but its state could not be made (memory) */
    METRICS_REFUSALS
};
extern const char *const metrics_refusal_names[METRICS_REFUSALS];

/* One listener's connections: refusals by reason (lock-free), open now,
 * its limit, the time spent at the limit, and its socket, whose accept
 * queue /metrics reads. The open count and the spells at the limit move
 * together under the listener's lock, once per connection (not per
 * request), so that an opening and a closing on two threads cannot leave
 * a spell begun after it ended. */
typedef struct metrics_listener {
    const char *name;            /* "public", "admin", "ext_proc"; NULL: unused slot */
    unsigned reasons;            /* the reasons it can refuse for (1u << REFUSED_*): shown */
    int limit;                   /* --max-conns (this listener's) */
    atomic_int lfd;              /* the listening socket, -1 none (closed) */
    atomic_uint_least64_t refused[METRICS_REFUSALS];
    pthread_mutex_t lock;        /* open, full_s, full_since */
    int open;                    /* connections open now */
    double full_s;               /* seconds at the limit, ended spells */
    double full_since;           /* monotonic s the current spell began; < 0 none */
} metrics_listener;

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
    metrics_listener listeners[METRICS_LISTENERS];   /* registered before serving */
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

/* Before serving: a listener's slot (its series appear in /metrics from
 * now on, zeros included, so that rate() sees them from the start):
 * name (borrowed, static), the reasons it can refuse for, its limit.
 * -1 when the slots are full. */
int metrics_listener_add(metrics_t *m, const char *name, unsigned reasons, int limit);
/* A refusal on listener l (a slot; -1: none, nothing counted). */
void metrics_refused(metrics_t *m, int l, int reason);
/* Refusals for a reason, summed over the listeners (the snapshot's
 * failures.refusals and eldr_connections_refused_per_ip_total). */
uint64_t metrics_refused_total(const metrics_t *m, int reason);
/* Its listening socket (-1: closed: the queue reads 0). */
void metrics_listener_fd(metrics_t *m, int l, int fd);
/* A connection opened / closed on listener l: the open count, and the
 * spells at the limit (one begins when open reaches the limit, ends when
 * it drops below). Returns 1 when this opening filled the listener (the
 * caller logs it). */
int metrics_conn_opened(metrics_t *m, int l);
void metrics_conn_closed(metrics_t *m, int l);
/* Connections waiting in the kernel's accept queue of fd (TCP_INFO of a
 * listening socket: Linux's sk_ack_backlog); 0 when fd is not listening. */
int metrics_listen_queue(int fd);

/* The histogram and counters of m, in exposition format (it takes the
 * listeners' locks). */
void metrics_render(metrics_t *m, strbuf *b);

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
