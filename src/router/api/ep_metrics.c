/* ep_metrics.c - GET /metrics: Prometheus text exposition (version
 * 0.0.4) of decisions, loads, route latency, signature caches and drift. */
#include <dirent.h>
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "endpoints.h"
#include "kv_apply.h"

/* The counters are copied out under the routing lock and printed after
 * it (state_counts_copy): a route never waits for the formatting. */
static void worker_series(engine_t *d, strbuf *b)
{
    state_counts c;
    if (state_counts_copy(d->st, &c) < 0) {
        b->oom = 1;
        return;
    }
    sb_printf(b, "# HELP eldr_decisions_total Routing decisions by worker and rule.\n"
                 "# TYPE eldr_decisions_total counter\n");
    for (int k = 0; k < c.K; k++)
        for (int r = 0; r < RULE_N; r++) {
            uint64_t n = c.by_rule[(size_t)k * RULE_N + r];
            if (!n && r != RULE_LOCALITY)
                continue;   /* keep every worker visible, skip empty rule series */
            sb_printf(b, "eldr_decisions_total{worker=\"");
            sb_label(b, c.workers[k]);
            sb_printf(b, "\",rule=\"%s\"} %llu\n", route_rule_name((route_rule)r),
                      (unsigned long long)n);
        }
    sb_printf(b, "# HELP eldr_inflight Requests routed and not yet finished.\n"
                 "# TYPE eldr_inflight gauge\n");
    for (int k = 0; k < c.K; k++) {
        sb_printf(b, "eldr_inflight{worker=\"");
        sb_label(b, c.workers[k]);
        sb_printf(b, "\"} %lld\n", (long long)c.inflight[k]);
    }
    sb_printf(b, "# HELP eldr_finished_total Requests finished.\n"
                 "# TYPE eldr_finished_total counter\n");
    for (int k = 0; k < c.K; k++) {
        sb_printf(b, "eldr_finished_total{worker=\"");
        sb_label(b, c.workers[k]);
        sb_printf(b, "\"} %llu\n", (unsigned long long)c.finished[k]);
    }
    sb_printf(b, "# HELP eldr_failed_total Routed requests that failed at their decode worker "
                 "(no answer, a 5xx, a timeout, a stream cut; proxy mode).\n"
                 "# TYPE eldr_failed_total counter\n");
    for (int k = 0; k < c.K; k++) {
        sb_printf(b, "eldr_failed_total{worker=\"");
        sb_label(b, c.workers[k]);
        sb_printf(b, "\"} %llu\n", (unsigned long long)c.failed[k]);
    }
    static const char *const dropped[][2] = {
        {"eldr_inflight_expired_total",
         "In-flight requests forgotten after --inflight-ttl without a finish."},
        {"eldr_inflight_cleared_total", "In-flight requests cleared by POST /v1/inflight/clear."},
        {"eldr_inflight_ejected_total",
         "In-flight requests dropped when their decode worker was ejected."}};
    for (int j = 0; j < 3; j++) {
        sb_printf(b, "# HELP %s %s\n# TYPE %s counter\n", dropped[j][0], dropped[j][1],
                  dropped[j][0]);
        for (int k = 0; k < c.K; k++) {
            sb_printf(b, "%s{worker=\"", dropped[j][0]);
            sb_label(b, c.workers[k]);
            sb_printf(b, "\"} %llu\n",
                      (unsigned long long)(j == 2 ? c.ejected[k] : j ? c.cleared[k]
                                                                    : c.expired[k]));
        }
    }
    sb_printf(b, "# HELP eldr_tau Locality band width.\n# TYPE eldr_tau gauge\neldr_tau %g\n",
              c.tau);
    sb_printf(b, "# HELP eldr_policy_info The decision rule in use (1), by name.\n"
                 "# TYPE eldr_policy_info gauge\neldr_policy_info{policy=\"%s\"} 1\n",
              state_policy_name(c.policy));
    state_counts_free(&c);
}

/* The cost rule's estimate per worker (state_cost_copy): what a decision
 * under the cost policy reads, kept under every policy. */
static void cost_series(engine_t *d, strbuf *b)
{
    double U[ROUTE_MAX_WORKERS], kv[ROUTE_MAX_WORKERS];
    int64_t members[ROUTE_MAX_WORKERS];
    if (!state_cost_copy(d->st, U, members, kv))
        return;
    static const char *const what[][2] = {
        {"eldr_cost_expected_experts",
         "Expected distinct experts of one decode step of the worker's batch, all layers."},
        {"eldr_cost_members", "In-flight requests in the cost rule's estimate."},
        {"eldr_cost_kv_tokens", "Prompt tokens of those requests."}};
    for (int j = 0; j < 3; j++) {
        sb_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", what[j][0], what[j][1], what[j][0]);
        for (int k = 0; k < d->K; k++) {
            sb_printf(b, "%s{worker=\"", what[j][0]);
            sb_label(b, d->st->workers[k]);
            if (j == 1)
                sb_printf(b, "\"} %lld\n", (long long)members[k]);
            else
                sb_printf(b, "\"} %.9g\n", j ? kv[k] : U[k]);
        }
    }
}

static void cache_series(engine_t *d, strbuf *b)
{
    static const struct {
        const char *name, *type, *help;
    } series[] = {
        {"eldr_sigcache_hit_blocks_total", "counter", "Cached prefix blocks found."},
        {"eldr_sigcache_miss_blocks_total", "counter", "Cached prefix blocks not held."},
        {"eldr_sigcache_stored_blocks_total", "counter", "Block counts stored by routes."},
        {"eldr_sigcache_entries", "gauge", "Blocks held."},
        {"eldr_sigcache_evictions_total", "counter", "Blocks evicted for capacity."},
        {"eldr_sigcache_removals_total", "counter", "Blocks removed by KV events."},
    };
    for (int s = 0; s < 6; s++) {
        sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", series[s].name, series[s].help,
                  series[s].name, series[s].type);
        for (int i = 0; i < d->n_caches; i++) {
            pcache *pc = &d->caches[i];
            sigcache_stats st;
            pthread_mutex_lock(&pc->lock);
            sigcache_get_stats(pc->c, &st);
            uint64_t v[6] = {pc->hit_blocks, pc->missing_blocks, pc->stored_blocks,
                             (uint64_t)st.entries, (uint64_t)st.evictions,
                             (uint64_t)st.removals};
            pthread_mutex_unlock(&pc->lock);
            sb_printf(b, "%s{prefill=\"", series[s].name);
            sb_label(b, pc->name);
            sb_printf(b, "\"} %llu\n", (unsigned long long)v[s]);
        }
    }
}

static void gauge(strbuf *b, const char *name, const char *help, double v)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    if (isfinite(v))
        sb_printf(b, "%s %.9g\n", name, v);
    else
        sb_printf(b, "%s NaN\n", name);
}

/* A number of the drift JSON, NaN when it is null (the exposition's
 * unknown). */
static double jnum(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void drift_series(engine_t *d, strbuf *b)
{
    mref_t *m = mholder_get(&d->model);
    json_t *j = state_drift_json(d->st, m);
    gauge(b, "eldr_model_generation", "Model generation (1 + swaps).", (double)m->gen);
    mref_put(m);
    if (!j)
        return;
    gauge(b, "eldr_drift_window", "Signatures in the drift window.",
          (double)json_integer_value(json_object_get(j, "window")));
    gauge(b, "eldr_drift_mean_best_similarity", "Mean best similarity over the window.",
          jnum(j, "mean_best_similarity"));
    gauge(b, "eldr_drift_calibration_similarity", "Mean similarity of the calibration fit.",
          jnum(j, "calibration_mean_similarity"));
    gauge(b, "eldr_drift_share_tvd",
          "Total variation distance of live vs calibration nearest-centroid shares.",
          jnum(j, "share_tvd"));
    gauge(b, "eldr_drift_share_tvd_threshold",
          "99% point of the share TVD under sampling noise for the window's size.",
          jnum(j, "share_tvd_threshold"));
    sb_printf(b, "# HELP eldr_drift_share Window share nearest to each worker's centroid.\n"
                 "# TYPE eldr_drift_share gauge\n");
    json_t *share = json_object_get(j, "share");
    for (int k = 0; k < d->K; k++) {
        json_t *v = json_array_get(share, (size_t)k);
        sb_printf(b, "eldr_drift_share{worker=\"");
        sb_label(b, d->st->workers[k]);
        sb_printf(b, "\"} %.9g\n", json_is_number(v) ? json_number_value(v) : 0.0);
    }
    json_decref(j);
}

/* The process itself, in the standard names Prometheus client libraries
 * use, plus the build and the open HTTP connections. */
static void process_series(engine_t *d, strbuf *b)
{
    long page = sysconf(_SC_PAGESIZE), tck = sysconf(_SC_CLK_TCK);
    unsigned long long size = 0, rss = 0, ut = 0, st = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        /* after the ")" that ends the command name: state is field 3,
         * utime field 14, stime field 15 */
        const char *p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                         &st) != 2)
            ut = st = 0;
    }
    long fds = 0;
    DIR *dir = opendir("/proc/self/fd");
    for (struct dirent *e; dir && (e = readdir(dir));)
        fds += e->d_name[0] != '.';
    if (dir) {
        closedir(dir);
        fds--;                  /* the one opendir holds */
    }
    sb_printf(b, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                 "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes "
                 "%llu\n", rss * (unsigned long long)page);
    sb_printf(b, "# HELP process_cpu_seconds_total Total user and system CPU time in seconds.\n"
                 "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n",
              tck > 0 ? (double)(ut + st) / (double)tck : 0.0);
    sb_printf(b, "# HELP process_open_fds Number of open file descriptors.\n"
                 "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n", fds);
    sb_printf(b, "# HELP process_start_time_seconds Start time since the epoch in seconds.\n"
                 "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.0f\n",
              d->started);
    sb_printf(b, "# HELP eldr_build_info The eldrd build.\n# TYPE eldr_build_info gauge\n"
                 "eldr_build_info{version=\"%s\"} 1\n", ELDR_VERSION);
}

void ep_metrics(void *ctx, const http_req *r, http_resp *out)
{
    engine_t *d = ctx;
    (void)r;
    strbuf b = {0};
    process_series(d, &b);
    worker_series(d, &b);
    cost_series(d, &b);
    metrics_render(&d->met, &b);
    cache_series(d, &b);
    kv_metrics(d, &b);
    drift_series(d, &b);
    for (int i = 0; i < d->n_providers; i++)
        if (d->providers[i].metrics)
            d->providers[i].metrics(d->providers[i].cls, &b);
    if (b.oom) {
        free(b.s);
        http_error(out, 503, "metrics", "out of memory");
        return;
    }
    out->text = b.s;
    out->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
