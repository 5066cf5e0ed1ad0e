/* metrics.c - lock-free counters and their exposition (metrics.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "metrics.h"

/* fine from 1 to 100 ms, where a loaded router's tail lives */
const double metrics_bounds[METRICS_BUCKETS] = {
    5e-6,  10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2e-3,   3e-3, 5e-3,
    7.5e-3, 10e-3, 15e-3, 20e-3, 30e-3, 50e-3,  75e-3,  100e-3, 250e-3, 1.0,
};

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
    atomic_init(&m->per_ip_refusals, 0);
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


void metrics_render(const metrics_t *m, strbuf *b)
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
           atomic_load(&m->per_ip_refusals));
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
