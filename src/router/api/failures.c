/* failures.c - the snapshot's "failures" object (failures.h). */
#include <stdio.h>

#include "failures.h"

/* Answers by status code over every endpoint (each code eldrd counts one
 * by one, then "other"): only the codes of errors, and only those seen. */
static json_t *by_code(const metrics_t *m)
{
    json_t *o = json_object();
    for (int c = 0; o && c < METRICS_CODES; c++) {
        if (c < METRICS_CODES - 1 && metrics_codes[c] < 400)
            continue;
        uint64_t n = 0;
        for (int e = 0; e < METRICS_ENDPOINTS; e++)
            n += atomic_load(&m->by_endpoint[e][c]);
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

json_t *failures_json(engine_t *d)
{
    const metrics_t *m = &d->met;
    json_int_t failed = failed_total(d);
    json_t *o = json_pack(
        "{s:{s:I, s:I, s:o}, s:{s:I, s:I, s:I}, s:{s:I, s:I}, s:I, s:o}", "answered", "4xx",
        (json_int_t)atomic_load(&m->responses[4]), "5xx",
        (json_int_t)atomic_load(&m->responses[5]), "by_code", by_code(m), "refusals", "per_ip",
        (json_int_t)atomic_load(&m->per_ip_refusals), "body_budget",
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
