/* metrics.c - lock-free counters and their exposition (metrics.h). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "metrics.h"

/* fine from 1 to 100 ms, where a loaded router's tail lives */
const double metrics_bounds[METRICS_BUCKETS] = {
    5e-6,  10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2e-3,   3e-3, 5e-3,
    7.5e-3, 10e-3, 15e-3, 20e-3, 30e-3, 50e-3,  75e-3,  100e-3, 250e-3, 1.0,
};

const char *const metrics_refusal_names[METRICS_REFUSALS] = {"max_conns", "max_conns_per_ip",
                                                              "setup_failed"};

const int metrics_codes[METRICS_CODES - 1] = {200, 400, 401, 404, 405, 409, 413,
                                               415, 422, 500, 502, 503, 504, 429, 431};

void metrics_init(metrics_t *m)
{
    for (int e = 0; e < METRICS_ENDPOINTS; e++) {
        m->endpoint_names[e] = NULL;
        for (int c = 0; c < METRICS_CODES; c++)
            atomic_init(&m->by_endpoint[e][c], 0);
    }
    atomic_init(&m->reload_failures, 0);
    atomic_init(&m->deadline_cuts, 0);
    atomic_init(&m->protocol_errors, 0);
    atomic_init(&m->persist_failures, 0);
    atomic_init(&m->body_bytes, 0);
    atomic_init(&m->body_refusals, 0);
    atomic_init(&m->header_timeouts, 0);
    for (int l = 0; l < METRICS_LISTENERS; l++) {
        metrics_listener *x = &m->listeners[l];
        x->name = NULL;
        x->reasons = 0;
        x->limit = 0;
        atomic_init(&x->lfd, -1);
        for (int r = 0; r < METRICS_REFUSALS; r++)
            atomic_init(&x->refused[r], 0);
        pthread_mutex_init(&x->lock, NULL);
        x->open = 0;
        x->full_s = 0;
        x->full_since = -1;
    }
    for (int i = 0; i <= METRICS_BUCKETS; i++)
        atomic_init(&m->route_bucket[i], 0);
    for (int i = 0; i < 6; i++)
        atomic_init(&m->responses[i], 0);
    atomic_init(&m->route_count, 0);
    atomic_init(&m->route_ns, 0);
    atomic_init(&m->bad_requests, 0);
    atomic_init(&m->model_swaps, 0);
    atomic_init(&m->auth_failures, 0);
}

int metrics_listener_add(metrics_t *m, const char *name, unsigned reasons, int limit)
{
    for (int l = 0; l < METRICS_LISTENERS; l++) {
        metrics_listener *x = &m->listeners[l];
        if (x->name)
            continue;
        x->name = name;
        x->reasons = reasons;
        x->limit = limit;
        return l;
    }
    return -1;
}

void metrics_refused(metrics_t *m, int l, int reason)
{
    if (l >= 0 && l < METRICS_LISTENERS && reason >= 0 && reason < METRICS_REFUSALS)
        atomic_fetch_add(&m->listeners[l].refused[reason], 1);
}

uint64_t metrics_refused_total(const metrics_t *m, int reason)
{
    uint64_t n = 0;
    for (int l = 0; reason >= 0 && reason < METRICS_REFUSALS && l < METRICS_LISTENERS; l++)
        n += atomic_load(&m->listeners[l].refused[reason]);
    return n;
}

void metrics_listener_fd(metrics_t *m, int l, int fd)
{
    if (l >= 0 && l < METRICS_LISTENERS)
        atomic_store(&m->listeners[l].lfd, fd);
}

int metrics_conn_opened(metrics_t *m, int l)
{
    if (l < 0 || l >= METRICS_LISTENERS)
        return 0;
    metrics_listener *x = &m->listeners[l];
    pthread_mutex_lock(&x->lock);
    int filled = ++x->open >= x->limit && x->full_since < 0;
    if (filled)
        x->full_since = mono_now();
    pthread_mutex_unlock(&x->lock);
    return filled;
}

void metrics_conn_closed(metrics_t *m, int l)
{
    if (l < 0 || l >= METRICS_LISTENERS)
        return;
    metrics_listener *x = &m->listeners[l];
    pthread_mutex_lock(&x->lock);
    if (--x->open < x->limit && x->full_since >= 0) {
        x->full_s += mono_now() - x->full_since;
        x->full_since = -1;
    }
    pthread_mutex_unlock(&x->lock);
}

int metrics_listen_queue(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
        ti.tcpi_state != TCP_LISTEN)
        return 0;
    /* for a listening socket, Linux reports its accept queue here
     * (tcp_get_info: tcpi_unacked = sk_ack_backlog) */
    return (int)ti.tcpi_unacked;
}

/* One gauge or counter with a value per registered listener (v[l]),
 * written with `decimals` decimals. */
static void per_listener(const metrics_t *m, strbuf *b, const char *name, const char *type,
                         const char *help, const double *v, int decimals)
{
    metrics_head(b, name, type, help);
    for (int l = 0; l < METRICS_LISTENERS; l++)
        if (m->listeners[l].name)
            sb_printf(b, "%s{listener=\"%s\"} %.*f\n", name, m->listeners[l].name, decimals,
                      v[l]);
}

/* The per-listener families: refusals by reason, open connections, the
 * limit, seconds at the limit, the kernel's accept queue. */
static void listeners_render(metrics_t *m, strbuf *b)
{
    metrics_head(b, "eldr_connections_refused_total", "counter",
                 "Connections closed at once, unread, by listener and reason: max_conns (the "
                 "listener held --max-conns), max_conns_per_ip (the address, an IPv6 /64, held "
                 "--max-conns-per-ip), setup_failed (out of memory).");
    for (int l = 0; l < METRICS_LISTENERS; l++)
        for (int r = 0; m->listeners[l].name && r < METRICS_REFUSALS; r++)
            if (m->listeners[l].reasons & 1u << r)
                sb_printf(b, "eldr_connections_refused_total{listener=\"%s\",reason=\"%s\"} "
                          "%llu\n", m->listeners[l].name, metrics_refusal_names[r],
                          (unsigned long long)atomic_load(&m->listeners[l].refused[r]));
    double open[METRICS_LISTENERS], limit[METRICS_LISTENERS], full[METRICS_LISTENERS],
        queue[METRICS_LISTENERS], now = mono_now();
    for (int l = 0; l < METRICS_LISTENERS; l++) {
        metrics_listener *x = &m->listeners[l];
        pthread_mutex_lock(&x->lock);
        open[l] = x->open;
        full[l] = x->full_s + (x->full_since >= 0 ? now - x->full_since : 0);
        pthread_mutex_unlock(&x->lock);
        limit[l] = x->limit;
        queue[l] = metrics_listen_queue(atomic_load(&x->lfd));
    }
    per_listener(m, b, "eldr_listener_connections", "gauge",
                 "Connections open now, by listener.", open, 0);
    per_listener(m, b, "eldr_listener_max_connections", "gauge",
                 "The listener's connection limit (--max-conns; the admin listener's is at most "
                 "256).", limit, 0);
    per_listener(m, b, "eldr_listener_full_seconds_total", "counter",
                 "Seconds the listener spent holding its limit: an HTTP listener's new "
                 "connections then wait in the kernel's accept queue, the ext_proc listener's "
                 "are refused.", full, 3);
    per_listener(m, b, "eldr_listener_queue", "gauge",
                 "Connections the kernel accepted that wait for eldrd to take them (the "
                 "listening socket's accept queue).", queue, 0);
}

void metrics_route(metrics_t *m, double secs)
{
    int i = 0;
    while (i < METRICS_BUCKETS && secs > metrics_bounds[i])
        i++;
    atomic_fetch_add(&m->route_bucket[i], 1);
    atomic_fetch_add(&m->route_count, 1);
    atomic_fetch_add(&m->route_ns, (uint64_t)(secs * 1e9));
}

void metrics_response_at(metrics_t *m, int endpoint, int status)
{
    int e = endpoint >= 0 && endpoint < METRICS_ENDPOINTS - 1 ? endpoint : METRICS_ENDPOINTS - 1;
    int c = METRICS_CODES - 1;
    for (int i = 0; i < METRICS_CODES - 1; i++)
        if (metrics_codes[i] == status)
            c = i;
    atomic_fetch_add(&m->by_endpoint[e][c], 1);
    metrics_response(m, status);
}

void metrics_response(metrics_t *m, int status)
{
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        atomic_fetch_add(&m->responses[cls], 1);
    if (cls == 4)
        atomic_fetch_add(&m->bad_requests, 1);
}

void metrics_head(strbuf *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_series(strbuf *b, const char *name, const char *type, const char *help,
                    uint64_t v)
{
    metrics_head(b, name, type, help);
    sb_printf(b, "%s %llu\n", name, (unsigned long long)v);
}


void metrics_render(metrics_t *m, strbuf *b)
{
    sb_printf(b, "# HELP eldr_route_seconds Time to answer POST /v1/route, from the moment "
                 "its headers were read (so a wait for a free thread counts).\n"
                 "# TYPE eldr_route_seconds histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i <= METRICS_BUCKETS; i++) {
        cum += atomic_load(&m->route_bucket[i]);
        if (i < METRICS_BUCKETS)
            sb_printf(b, "eldr_route_seconds_bucket{le=\"%g\"} %llu\n", metrics_bounds[i],
                      (unsigned long long)cum);
        else
            sb_printf(b, "eldr_route_seconds_bucket{le=\"+Inf\"} %llu\n",
                      (unsigned long long)cum);
    }
    sb_printf(b, "eldr_route_seconds_sum %.9f\n", (double)atomic_load(&m->route_ns) * 1e-9);
    sb_printf(b, "eldr_route_seconds_count %llu\n",
              (unsigned long long)atomic_load(&m->route_count));
    sb_printf(b, "# HELP eldr_http_responses_total HTTP responses by status class.\n"
                 "# TYPE eldr_http_responses_total counter\n");
    for (int c = 2; c <= 5; c++)
        sb_printf(b, "eldr_http_responses_total{class=\"%dxx\"} %llu\n", c,
                  (unsigned long long)atomic_load(&m->responses[c]));
    metrics_series(b, "eldr_auth_failures_total", "counter",
           "Requests refused 401: a token missing or wrong.",
           atomic_load(&m->auth_failures));
    sb_printf(b, "# HELP eldr_http_responses_by_endpoint_total HTTP responses by endpoint and "
                 "status code.\n# TYPE eldr_http_responses_by_endpoint_total counter\n");
    for (int e = 0; e < METRICS_ENDPOINTS; e++) {
        const char *name = e == METRICS_ENDPOINTS - 1 ? "other" : m->endpoint_names[e];
        for (int c = 0; name && c < METRICS_CODES; c++) {
            uint64_t n = atomic_load(&m->by_endpoint[e][c]);
            if (!n)
                continue;
            sb_printf(b, "eldr_http_responses_by_endpoint_total{endpoint=\"");
            sb_label(b, name);
            if (c < METRICS_CODES - 1)
                sb_printf(b, "\",code=\"%d\"} %llu\n", metrics_codes[c], (unsigned long long)n);
            else
                sb_printf(b, "\",code=\"other\"} %llu\n", (unsigned long long)n);
        }
    }
    metrics_series(b, "eldr_deadline_cuts_total", "counter",
           "Connections cut because a body took longer than --request-deadline.",
           atomic_load(&m->deadline_cuts));
    metrics_series(b, "eldr_body_bytes", "gauge",
           "Request bodies held in memory now, bytes (at most --body-budget).",
           atomic_load(&m->body_bytes));
    metrics_series(b, "eldr_body_budget_refusals_total", "counter",
           "Requests answered 503 because their body would have passed --body-budget.",
           atomic_load(&m->body_refusals));
    metrics_series(b, "eldr_header_timeouts_total", "counter",
           "Connections closed because their request headers took longer than --header-timeout.",
           atomic_load(&m->header_timeouts));
    metrics_series(b, "eldr_connections_refused_per_ip_total", "counter",
           "Connections closed at once because their address (an IPv6 /64) held "
           "--max-conns-per-ip.",
           metrics_refused_total(m, REFUSED_PER_IP));
    listeners_render(m, b);
    metrics_series(b, "eldr_http_protocol_errors_total", "counter",
           "Requests refused by the HTTP layer (libmicrohttpd) before eldrd saw them: a "
           "malformed Content-Length or chunk, headers over the memory limit. Also counted under "
           "endpoint=\"other\".",
           atomic_load(&m->protocol_errors));
    metrics_series(b, "eldr_reload_failures_total", "counter",
           "SIGHUP reloads that failed (the model was kept).",
           atomic_load(&m->reload_failures));
    metrics_series(b, "eldr_persist_failures_total", "counter",
           "PUT /v1/model refused because the state dir could not be written.",
           atomic_load(&m->persist_failures));
    metrics_series(b, "eldr_model_swaps_total", "counter",
           "Models installed after the first.",
           atomic_load(&m->model_swaps));
}

int metrics_body_take(metrics_t *m, size_t n, long long budget)
{
    uint64_t cur = atomic_load(&m->body_bytes);
    do {
        if (cur + n > (uint64_t)budget)
            return -1;
    } while (!atomic_compare_exchange_weak(&m->body_bytes, &cur, cur + n));
    return 0;
}
