/* failures.c - the snapshot's "failures" object (failures.h). */
#include <stdio.h>
#include <string.h>

#include "failures.h"

/* The health probes' endpoints: their 503 is readiness (a role out of
 * rotation, which the pool shows), not a client's request failing. */
static int probe_endpoint(const metrics_t *m, int e)
{
    const char *n = e < METRICS_ENDPOINTS - 1 ? m->endpoint_names[e] : NULL;
    return n && (!strcmp(n, "GET /healthz") || !strcmp(n, "GET /livez"));
}

/* Answers by status code over every endpoint but the probes' (each code
 * eldrd counts one by one, then "other"): only the codes of errors, and
 * only those seen; *probe_4xx, *probe_5xx: the probes' own. */
static json_t *by_code(const metrics_t *m, uint64_t *probe_4xx, uint64_t *probe_5xx)
{
    json_t *o = json_object();
    *probe_4xx = *probe_5xx = 0;
    for (int c = 0; o && c < METRICS_CODES; c++) {
        if (c < METRICS_CODES - 1 && metrics_codes[c] < 400)
            continue;
        uint64_t n = 0;
        for (int e = 0; e < METRICS_ENDPOINTS; e++) {
            uint64_t v = atomic_load(&m->by_endpoint[e][c]);
            if (!probe_endpoint(m, e))
                n += v;
            else if (c < METRICS_CODES - 1)
                *(metrics_codes[c] >= 500 ? probe_5xx : probe_4xx) += v;
        }
        if (!n)
            continue;
        char key[16];
        snprintf(key, sizeof key, "%d", c < METRICS_CODES - 1 ? metrics_codes[c] : 0);
        json_object_set_new(o, c < METRICS_CODES - 1 ? key : "other",
                            json_integer((json_int_t)n));
    }
    return o;
}

static json_int_t failed_total(engine_t *d)
{
    state_counts c;
    if (state_counts_copy(d->st, &c) < 0)
        return -1;
    json_int_t n = 0;
    for (int k = 0; k < c.K; k++)
        n += (json_int_t)c.failed[k];
    state_counts_free(&c);
    return n;
}

/* a - b, never below 0 (an answer is counted by endpoint a moment
 * before its class: metrics_response_at) */
static json_int_t minus(uint64_t a, uint64_t b)
{
    return a > b ? (json_int_t)(a - b) : 0;
}

json_t *failures_json(engine_t *d)
{
    const metrics_t *m = &d->met;
    json_int_t failed = failed_total(d);
    uint64_t p4, p5;
    json_t *codes = by_code(m, &p4, &p5);
    json_t *o = json_pack(
        "{s:{s:I, s:I, s:o}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:I, s:o}", "answered",
        "4xx", minus(atomic_load(&m->responses[4]), p4), "5xx",
        minus(atomic_load(&m->responses[5]), p5), "by_code", codes, "refusals", "per_ip",
        (json_int_t)metrics_refused_total(m, REFUSED_PER_IP), "max_conns",
        (json_int_t)metrics_refused_total(m, REFUSED_MAX_CONNS), "body_budget",
        (json_int_t)atomic_load(&m->body_refusals), "unauthorized",
        (json_int_t)atomic_load(&m->auth_failures), "timeouts", "header",
        (json_int_t)atomic_load(&m->header_timeouts), "request_deadline",
        (json_int_t)atomic_load(&m->deadline_cuts), "protocol_errors",
        (json_int_t)atomic_load(&m->protocol_errors), "failed_after_routing",
        failed < 0 ? json_null() : json_integer(failed));
    for (int i = 0; o && i < d->n_providers; i++)
        if (d->providers[i].failures)
            d->providers[i].failures(d->providers[i].cls, o);
    return o;
}
