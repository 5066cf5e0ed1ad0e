/* pool_view.c - the pool in the daemon's views: the snapshot's "pool",
 * /metrics' eldr_upstream_* series, /healthz's "ejected" (pool.h). */
#include <jansson.h>

#include "log.h"
#include "pool.h"
#include "pool_view.h"

static const char *const role_names[2] = {"prefill", "decode"};

const char *pool_state_name(const pool_health *h)
{
    return h->ejected ? "ejected" : h->streak > 0 ? "probing" : "in_rotation";
}

static json_t *insts_json(pool *p, pool_role role, int n, char *const *workers, int urls,
                          double now)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        pool_health h;
        pool_get_health(p, role, i, now, &h);
        const pool_inst *x = role == POOL_PREFILL ? &p->prefill[i] : &p->decode[i];
        json_t *o = json_pack(
            "{s:s, s:o, s:s, s:b, s:f, s:i, s:I, s:I, s:I}", "name", x->name, "url",
            urls ? json_string(x->name) : json_null(), "state", pool_state_name(&h), "ejected",
            h.ejected, "ejected_for_s", h.ejected_for, "failures_in_a_row", h.fails, "failures",
            (json_int_t)h.failures, "ejections", (json_int_t)h.ejections, "in_flight",
            (json_int_t)(role == POOL_PREFILL ? atomic_load(&x->load) : 0));
        /* decode instance i is the model's worker i */
        if (o && role == POOL_DECODE && workers)
            json_object_set_new(o, "worker", json_string(workers[i]));
        json_array_append_new(a, o);
    }
    return a;
}

json_t *pool_json(pool *p, char *const *workers, int urls)
{
    double now = mono_now();
    return json_pack("{s:i, s:f, s:o, s:o, s:I, s:I}", "eject_after", p->eject_after,
                     "eject_time_s", p->eject_time, "prefill",
                     insts_json(p, POOL_PREFILL, p->n_prefill, NULL, urls, now), "decode",
                     insts_json(p, POOL_DECODE, p->K, workers, urls, now), "prefill_panics",
                     (json_int_t)atomic_load(&p->panics[POOL_PREFILL]), "decode_panics",
                     (json_int_t)atomic_load(&p->panics[POOL_DECODE]));
}

json_t *pool_degraded(pool *p)
{
    double now = mono_now();
    json_t *a = json_array();
    for (int r = 0; a && r < 2; r++) {
        int n = r == POOL_PREFILL ? p->n_prefill : p->K;
        for (int i = 0; i < n; i++)
            if (pool_ejected(p, (pool_role)r, i, now)) {
                char s[300];
                snprintf(s, sizeof s, "%s %s", role_names[r],
                         r == POOL_PREFILL ? p->prefill[i].name : p->decode[i].name);
                json_array_append_new(a, json_string(s));
            }
    }
    return a;
}

/* One labelled series per instance. */
static void series(pool *p, strbuf *b, const char *name, const char *help, const char *type,
                   int what, double now)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int r = 0; r < 2; r++) {
        int n = r == POOL_PREFILL ? p->n_prefill : p->K;
        for (int i = 0; i < n; i++) {
            pool_health h;
            pool_get_health(p, (pool_role)r, i, now, &h);
            unsigned long long v = what == 0 ? (unsigned long long)h.ejected
                                 : what == 1 ? h.ejections : h.failures;
            sb_printf(b, "%s{role=\"%s\",instance=\"", name, role_names[r]);
            sb_label(b, r == POOL_PREFILL ? p->prefill[i].name : p->decode[i].name);
            sb_printf(b, "\"} %llu\n", v);
        }
    }
}

void pool_metrics(pool *p, strbuf *b)
{
    double now = mono_now();
    series(p, b, "eldr_upstream_ejected", "1 while the instance is out of rotation.", "gauge", 0,
           now);
    series(p, b, "eldr_upstream_ejections_total", "Times the instance was taken out of "
           "rotation.", "counter", 1, now);
    series(p, b, "eldr_upstream_failures_total", "Failures seen of the instance (no "
           "connection, reset, 5xx, silence, failed probe).", "counter", 2, now);
    sb_printf(b, "# HELP eldr_upstream_panic_total Decisions made with every instance of a "
                 "role ejected (all of them were used).\n"
                 "# TYPE eldr_upstream_panic_total counter\n");
    for (int r = 0; r < 2; r++)
        sb_printf(b, "eldr_upstream_panic_total{role=\"%s\"} %llu\n", role_names[r],
                  (unsigned long long)atomic_load(&p->panics[r]));
}
