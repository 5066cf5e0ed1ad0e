/* live.c - eldrd's /v1/snapshot as the dashboard's live state (live.h):
 * parsing a snapshot into a dash_live_now, the fit of the model it serves
 * (a PCA of the centroids for the scatter), the histories built from
 * successive polls, and the poller thread with its one-slot mailbox. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/client.h"
#include "dash_free.h"
#include "live.h"
#include "snapshot.h"

/* ---- parsing ---- */

static double num_or_nan(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int64_t int_or(const json_t *v, int64_t dflt)
{
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static void copy_str(char *dst, size_t n, const json_t *v, const char *dflt)
{
    const char *s = json_string_value(v);
    snprintf(dst, n, "%s", s ? s : dflt);
}

/* "2,3" from a JSON array of integers (cut to fit). */
static void int_list(char *dst, size_t n, const json_t *a, const char *sep)
{
    size_t used = 0, i;
    json_t *v;
    dst[0] = '\0';
    json_array_foreach(a, i, v) {
        if (used + 24 >= n) {
            snprintf(dst + used, n - used, "%s", "..");
            return;
        }
        used += (size_t)snprintf(dst + used, n - used, "%s%lld", i ? sep : "",
                                 (long long)int_or(v, -1));
    }
}

static void parse_rules(char *dst, size_t n, const json_t *rules)
{
    const char *k;
    json_t *v;
    size_t used = 0;
    dst[0] = '\0';
    json_object_foreach((json_t *)rules, k, v) {
        if (used + 32 >= n)
            break;
        used += (size_t)snprintf(dst + used, n - used, "%s%s %lld", used ? ", " : "", k,
                                 (long long)int_or(v, 0));
    }
}

/* dst gets one item per element of a (cut to fit, "..", like int_list):
 * item(v) writes it into a small buffer. */
static void item_list(char *dst, size_t n, const json_t *a,
                      void (*item)(const json_t *v, char *buf, size_t len))
{
    size_t used = 0, i;
    json_t *v;
    dst[0] = '\0';
    json_array_foreach(a, i, v) {
        char one[48];
        item(v, one, sizeof one);
        if (used + strlen(one) + 4 >= n) {
            snprintf(dst + used, n - used, "%s", i ? " .." : "..");
            return;
        }
        used += (size_t)snprintf(dst + used, n - used, "%s%s", i ? " " : "", one);
    }
}

/* a worker's cost, ms: null (a worker it could not use) is "-" */
static void cost_item(const json_t *v, char *buf, size_t len)
{
    if (json_is_number(v))
        snprintf(buf, len, "%.3f", json_number_value(v));
    else
        snprintf(buf, len, "-");
}

/* a worker's terms {"B", "U", "dU", ...}: "B/U/dU", or "-" */
static void terms_item(const json_t *v, char *buf, size_t len)
{
    const json_t *B = json_object_get(v, "B"), *U = json_object_get(v, "U"),
                 *dU = json_object_get(v, "dU");
    if (json_is_integer(B) && json_is_number(U) && json_is_number(dU))
        snprintf(buf, len, "%lld/%.1f/%+.1f", (long long)json_integer_value(B),
                 json_number_value(U), json_number_value(dU));
    else
        snprintf(buf, len, "-");
}

static void parse_decision(const json_t *o, dash_decision *d)
{
    copy_str(d->id, sizeof d->id, json_object_get(o, "request_id"), "?");
    d->seq = int_or(json_object_get(o, "seq"), -1);
    d->worker = (int)int_or(json_object_get(o, "worker_index"), -1);
    copy_str(d->rule, sizeof d->rule, json_object_get(o, "rule"), "?");
    d->sim_max = num_or_nan(json_object_get(o, "sim_max"));
    int_list(d->band, sizeof d->band, json_object_get(o, "band"), ",");
    int_list(d->loads, sizeof d->loads, json_object_get(o, "loads"), " ");
    d->finished = json_is_true(json_object_get(o, "finished"));
    const json_t *costs = json_object_get(o, "costs"), *terms = json_object_get(o, "cost_terms");
    d->has_cost = json_is_array(costs);
    d->costs[0] = d->terms[0] = '\0';
    if (d->has_cost)
        item_list(d->costs, sizeof d->costs, costs, cost_item);
    if (d->has_cost && json_is_array(terms))
        item_list(d->terms, sizeof d->terms, terms, terms_item);
}

static void parse_drift(const json_t *dr, dash_live_now *n)
{
    n->window = int_or(json_object_get(dr, "window"), 0);
    n->mean_sim = num_or_nan(json_object_get(dr, "mean_best_similarity"));
    n->calib_sim = num_or_nan(json_object_get(dr, "calibration_mean_similarity"));
    n->tvd = num_or_nan(json_object_get(dr, "share_tvd"));
    n->tvd_thr = num_or_nan(json_object_get(dr, "share_tvd_threshold"));
    copy_str(n->baseline, sizeof n->baseline, json_object_get(dr, "baseline"), "");
    const json_t *sh = json_object_get(dr, "share"), *cs = json_object_get(dr, "calibration_share");
    for (int k = 0; k < n->K; k++) {
        n->share[k] = num_or_nan(json_array_get(sh, (size_t)k));
        n->calib_share[k] = num_or_nan(json_array_get(cs, (size_t)k));
    }
}

/* The workers array: names, loads, totals. */
static int parse_workers(const json_t *ws, const char *where, int K_expected, dash_live_now *n,
                         char *err, size_t errlen)
{
    if (!json_is_array(ws) || json_array_size(ws) < 1)
        return eldr_errf(err, errlen, "%s: key workers: missing or empty", where);
    if (json_array_size(ws) > ROUTE_MAX_WORKERS)
        return eldr_errf(err, errlen, "%s: key workers: %zu workers, at most %d", where,
                         json_array_size(ws), ROUTE_MAX_WORKERS);
    n->K = (int)json_array_size(ws);
    if (K_expected > 0 && n->K != K_expected)
        return eldr_errf(err, errlen, "%s: key workers: %d workers, was %d", where, n->K,
                         K_expected);
    for (int k = 0; k < n->K; k++) {
        const json_t *w = json_array_get(ws, (size_t)k);
        const char *name = json_string_value(json_object_get(w, "name"));
        const json_t *inf = json_object_get(w, "inflight");
        if (!name || !json_is_integer(inf))
            return eldr_errf(err, errlen, "%s: key workers[%d]: needs a name and an "
                             "integer inflight", where, k);
        snprintf(n->names[k], sizeof n->names[k], "%s", name);
        n->inflight[k] = (int64_t)json_integer_value(inf);
        n->routed[k] = int_or(json_object_get(w, "routed"), 0);
        n->finished[k] = int_or(json_object_get(w, "finished"), 0);
        n->failed[k] = int_or(json_object_get(w, "failed"), -1);
        const char *src = json_string_value(json_object_get(w, "load_source"));
        snprintf(n->load_src[k], sizeof n->load_src[k], "%s",
                 !src ? "own" : !strcmp(src, "vllm-stale") ? "stale" : src);
        parse_rules(n->rules[k], sizeof n->rules[k], json_object_get(w, "rules"));
    }
    return 0;
}

/* An instance's "state" (pool_view.h); an older eldrd has only "ejected". */
static int inst_state(const json_t *o)
{
    const char *s = json_string_value(json_object_get(o, "state"));
    if (s && !strcmp(s, "probing"))
        return DASH_PROBING;
    if ((s && !strcmp(s, "ejected")) || (!s && json_is_true(json_object_get(o, "ejected"))))
        return DASH_EJECTED;
    return DASH_IN_ROTATION;
}

/* The pool (proxy mode, or the gateway picker): each decode worker's
 * health and URL, the prefill instances; worker k's URL from the pool
 * (the proxy's --decode), else from the picker's endpoints (ext_proc's
 * endpoints[].address of worker k). A snapshot without a pool has none. */
static void parse_pool(const json_t *snap, dash_live_now *n)
{
    const json_t *pool = json_object_get(snap, "pool"), *dec = json_object_get(pool, "decode");
    n->has_pool = json_is_array(dec) && (int)json_array_size(dec) == n->K;
    for (int k = 0; n->has_pool && k < n->K; k++) {
        const json_t *w = json_array_get(dec, (size_t)k);
        int st = inst_state(w);
        n->ejected[k] = st == DASH_EJECTED;
        n->probing[k] = st == DASH_PROBING;
        n->ejected_for[k] = num_or_nan(json_object_get(w, "ejected_for_s"));
        n->up_failures[k] = int_or(json_object_get(w, "failures"), 0);
        copy_str(n->url[k], sizeof n->url[k], json_object_get(w, "url"), "");
    }
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(json_object_get(snap, "ext_proc"), "endpoints"), i, e) {
        int64_t k = int_or(json_object_get(e, "worker"), -1);
        if (k >= 0 && k < n->K && !n->url[k][0])
            copy_str(n->url[k], sizeof n->url[k], json_object_get(e, "address"), "");
    }
    const json_t *pre = json_object_get(pool, "prefill");
    n->n_prefill = json_is_array(pre) ? (int)json_array_size(pre) : 0;
    json_array_foreach(pre, i, e) {
        int st = inst_state(e);
        n->prefill_ejected += st == DASH_EJECTED;
        if (i >= DASH_PREFILL_MAX)
            continue;
        dash_prefill *p = &n->prefill[i];
        copy_str(p->name, sizeof p->name, json_object_get(e, "name"), "?");
        p->state = st;
        p->ejected_for = num_or_nan(json_object_get(e, "ejected_for_s"));
        p->in_flight = int_or(json_object_get(e, "in_flight"), 0);
        p->failures = int_or(json_object_get(e, "failures"), 0);
    }
}

static int64_t count_at(const json_t *o, const char *key)
{
    return int_or(json_object_get(o, key), 0);
}

/* failures.answered.by_code as "502 x9, 504 x3": most first, cut to fit. */
static void code_list(char *dst, size_t n, const json_t *by)
{
    const char *keys[32];
    int64_t vals[32];
    int m = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)by, k, v) {
        if (m == 32 || !json_is_integer(v))
            continue;
        int j = m++;
        for (; j > 0 && vals[j - 1] < json_integer_value(v); j--) {
            keys[j] = keys[j - 1];
            vals[j] = vals[j - 1];
        }
        keys[j] = k;
        vals[j] = (int64_t)json_integer_value(v);
    }
    size_t used = 0;
    dst[0] = '\0';
    for (int j = 0; j < m; j++) {
        char one[48];
        snprintf(one, sizeof one, "%s%s x%lld", j ? ", " : "", keys[j], (long long)vals[j]);
        if (used + strlen(one) + 1 > n)
            break;   /* whole items only: never a number cut */
        used += (size_t)snprintf(dst + used, n - used, "%s", one);
    }
}

/* The snapshot's "failures" (docs/http-api.md). */
static void parse_failures(const json_t *f, dash_failures *o)
{
    o->known = json_is_object(f);
    if (!o->known)
        return;
    const json_t *a = json_object_get(f, "answered"), *r = json_object_get(f, "refusals"),
                 *t = json_object_get(f, "timeouts"), *px = json_object_get(f, "proxy"),
                 *ut = json_object_get(f, "upstream_timeouts"), *rt = json_object_get(f, "retries");
    o->ans_4xx = count_at(a, "4xx");
    o->ans_5xx = count_at(a, "5xx");
    code_list(o->codes, sizeof o->codes, json_object_get(a, "by_code"));
    o->per_ip = count_at(r, "per_ip");
    o->max_conns = count_at(r, "max_conns");
    o->body_budget = count_at(r, "body_budget");
    o->unauthorized = count_at(r, "unauthorized");
    o->header_timeouts = count_at(t, "header");
    o->deadline_cuts = count_at(t, "request_deadline");
    o->protocol_errors = count_at(f, "protocol_errors");
    o->failed_routed = count_at(f, "failed_after_routing");
    o->proxy = json_is_object(px);
    o->up_error = count_at(px, "upstream_error");
    o->up_timeout = count_at(px, "upstream_timeout");
    o->refused = count_at(px, "refused");
    static const char *const phase[4] = {"connect", "prefill", "decode", "idle"};
    for (int i = 0; i < 4; i++)
        o->timeouts[i] = count_at(ut, phase[i]);
    o->retries[0] = count_at(rt, "prefill");
    o->retries[1] = count_at(rt, "decode");
}

/* A snapshot into n (overwritten whole). K_expected > 0: the number of
 * workers must stay that. */
static int parse_now(const json_t *snap, const char *where, int K_expected, dash_live_now *n,
                     char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    const char *fmt = json_string_value(json_object_get(snap, "format"));
    if (!json_is_object(snap) || !fmt || strcmp(fmt, SNAPSHOT_FORMAT))
        return eldr_errf(err, errlen, "%s: key format: not \"%s\" (not an eldrd snapshot)",
                         where, SNAPSHOT_FORMAT);
    const json_t *m = json_object_get(snap, "model");
    if (!json_is_object(m))
        return eldr_errf(err, errlen, "%s: key model: missing or not an object", where);
    if (parse_workers(json_object_get(snap, "workers"), where, K_expected, n, err, errlen))
        return -1;
    parse_pool(snap, n);
    parse_failures(json_object_get(snap, "failures"), &n->fail);
    n->time = num_or_nan(json_object_get(snap, "time"));
    n->uptime_s = num_or_nan(json_object_get(snap, "uptime_s"));
    n->tau = num_or_nan(json_object_get(snap, "tau"));
    copy_str(n->policy, sizeof n->policy, json_object_get(snap, "policy"), "");
    n->generation = int_or(json_object_get(m, "generation"), 0);
    copy_str(n->variant, sizeof n->variant, json_object_get(m, "variant"), "?");
    n->rho = num_or_nan(json_object_get(m, "rho"));
    copy_str(n->load_from, sizeof n->load_from,
             json_object_get(json_object_get(snap, "load"), "from"), "own");
    const json_t *sizes = json_object_get(m, "sizes");
    for (int k = 0; k < n->K; k++)
        n->sizes[k] = int_or(json_array_get(sizes, (size_t)k), -1);
    parse_drift(json_object_get(snap, "drift"), n);
    const json_t *dec = json_object_get(snap, "decisions");
    for (size_t i = 0; i < json_array_size(dec) && n->n_dec < DASH_DEC_MAX; i++)
        parse_decision(json_array_get(dec, i), &n->dec[n->n_dec++]);
    return 0;
}

/* ---- the fit: the served model and a PCA of its centroids ---- */

static void centroid_scatter(dash_fit *f)
{
    const model_t *m = f->model;
    size_t dim = sig_dim(&m->recipe);
    pca_t p;
    char err[ELDR_ERRLEN];
    if (m->K < 2 || dim < 2) {
        snprintf(f->note, sizeof f->note, "one centroid: nothing to project");
        return;
    }
    int nc = m->K < 2 ? 1 : 2;
    if (pca_fit(m->centroids, m->K, (int)dim, nc, &p, err, sizeof err)) {
        snprintf(f->note, sizeof f->note, "%s", err);
        return;
    }
    f->cent = eldr_calloc((size_t)m->K * 2, sizeof *f->cent);
    if (!f->cent) {
        pca_free(&p);
        snprintf(f->note, sizeof f->note, "out of memory for the scatter");
        return;
    }
    for (int k = 0; k < m->K; k++)
        for (int c = 0; c < nc; c++)
            f->cent[2 * k + c] = p.scores[(size_t)k * nc + c];
    for (int c = 0; c < nc; c++)
        f->explained[c] = p.total_var > 0 ? p.var[c] / p.total_var : 0;
    pca_free(&p);
}

/* *out = NULL (and 0) when the snapshot has no centroids. */
static int build_fit(const json_t *snap, const char *where, dash_fit **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (!json_is_array(json_object_get(json_object_get(snap, "model"), "centroids")))
        return 0;
    model_t *m = NULL;
    if (snapshot_model_json(snap, where, &m, err, errlen))
        return -1;
    dash_fit *f = calloc(1, sizeof *f);
    if (f)
        f->sizes = eldr_calloc((size_t)m->K, sizeof *f->sizes);
    if (!f || !f->sizes) {
        free(f);
        model_free(m);
        return eldr_errf(err, errlen, "%s: out of memory", where);
    }
    f->model = m;
    f->origin = DASH_FIT_FILE;
    f->have_sizes = m->sizes != NULL;
    for (int k = 0; k < m->K; k++) {
        f->sizes[k] = m->sizes ? m->sizes[k] : 0;
        f->n_fit += f->sizes[k];
    }
    centroid_scatter(f);
    *out = f;
    return 0;
}

/* ---- merging a poll into the dashboard (UI thread) ---- */

static int64_t routed_total(const dash_live_now *n)
{
    int64_t t = 0;
    for (int k = 0; k < n->K; k++)
        t += n->routed[k];
    return t;
}

int live_restarted(const dash_live_now *a, const dash_live_now *b)
{
    /* Not the start time (time - uptime_s): eldrd writes `time` with 9
     * significant digits, steps of 10 s today, so it moves on one daemon.
     * uptime_s is whole seconds and only grows while the daemon lives;
     * the counters only grow too. */
    if (isfinite(a->uptime_s) && isfinite(b->uptime_s) && b->uptime_s < a->uptime_s)
        return 1;
    if (routed_total(b) < routed_total(a))
        return 1;
    int64_t fa = 0, fb = 0;
    for (int k = 0; k < a->K; k++)
        fa += a->finished[k];
    for (int k = 0; k < b->K; k++)
        fb += b->finished[k];
    if (fb < fa)
        return 1;
    if (a->n_dec > 0 && b->n_dec > 0 && b->dec[0].seq < a->dec[0].seq)
        return 1;
    return 0;
}

void live_pause(dash_live *L, int on)
{
    if (on && !L->paused) {
        L->n_frozen = L->now.n_dec;
        memcpy(L->frozen, L->now.dec, sizeof L->frozen);
    }
    L->paused = on;
}

int64_t live_newer(const dash_live *L)
{
    if (!L->paused || L->now.n_dec < 1)
        return 0;
    if (L->n_frozen < 1)
        return L->now.n_dec;
    int64_t d = L->now.dec[0].seq - L->frozen[0].seq;
    return d > 0 ? d : 0;   /* a restarted daemon counts from 0 again */
}

/* at: when the poll was taken (monotonic seconds; NaN unknown), for the
 * rate of routes between two polls. */
static void absorb(dash_live *L, const dash_live_now *n, double at)
{
    double prev_at = L->at;
    L->at = at;
    int64_t before = routed_total(&L->now), after = routed_total(n);
    int restarted = L->n_hist > 0 && live_restarted(&L->now, n);
    if (restarted) {
        L->restarts++;
        L->restart_from = L->now.uptime_s;
        L->restart_to = n->uptime_s;
    }
    double dt = at - prev_at;
    L->rate = L->n_hist > 0 && dt > 0 && after >= before && !restarted
                  ? (after - before) / dt : NAN;
    L->now = *n;
    /* histories end at the last bin: move the valid tail left by one */
    int m = L->n_hist < DASH_BINS - 1 ? L->n_hist : DASH_BINS - 1;
    for (int k = 0; k < n->K; k++) {
        memmove(L->hist[k] + DASH_BINS - 1 - m, L->hist[k] + DASH_BINS - m,
                (size_t)m * sizeof L->hist[k][0]);
        L->hist[k][DASH_BINS - 1] = (float)n->inflight[k];
    }
    memmove(L->hist_sim + DASH_BINS - 1 - m, L->hist_sim + DASH_BINS - m,
            (size_t)m * sizeof L->hist_sim[0]);
    L->hist_sim[DASH_BINS - 1] = (float)n->mean_sim;
    memmove(L->hist_restart + DASH_BINS - 1 - m, L->hist_restart + DASH_BINS - m,
            (size_t)m * sizeof L->hist_restart[0]);
    L->hist_restart[DASH_BINS - 1] = (uint8_t)restarted;
    if (L->n_hist < DASH_BINS)
        L->n_hist++;
}

static void set_fit(dash_t *d, dash_fit *f)
{
    if (!f)
        return;
    dash_fit_free(d->fit);
    d->fit = f;
    if (d->worker >= f->model->K)
        d->worker = f->model->K - 1;
}

void dash_live_free(dash_live *l)
{
    free(l);
}

/* A dash_t in live mode around its first snapshot. */
static int open_live(dash_t *d, const json_t *snap, const char *where, int attached,
                     char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->progress = -1;
    d->policy = ROUTE_ELDR;
    d->cursor = 1;
    d->live = calloc(1, sizeof *d->live);
    dash_live_now *n = malloc(sizeof *n);
    dash_fit *f = NULL;
    if (!d->live || !n) {
        free(n);
        return eldr_errf(err, errlen, "dash: out of memory");
    }
    if (parse_now(snap, where, 0, n, err, errlen) || build_fit(snap, where, &f, err, errlen)) {
        free(n);
        return -1;
    }
    if (f && f->model->K != n->K) {
        eldr_errf(err, errlen, "%s: the model has K=%d but there are %d workers", where,
                  f->model->K, n->K);
        dash_fit_free(f);
        free(n);
        return -1;
    }
    snprintf(d->live->source, sizeof d->live->source, "%s", where);
    snprintf(d->trace_name, sizeof d->trace_name, "%s", where);
    d->live->attached = attached;
    d->live->rate = NAN;
    d->live->at = NAN;
    absorb(d->live, n, NAN);
    d->live->polls = 1;
    d->tau = n->tau;
    free(n);
    set_fit(d, f);
    return 0;
}

int live_open_json(dash_t *d, const json_t *snap, const char *where, char *err, size_t errlen)
{
    return open_live(d, snap, where, 0, err, errlen);
}

int live_open_file(dash_t *d, const char *path, char *err, size_t errlen)
{
    json_error_t je;
    memset(d, 0, sizeof *d);
    json_t *snap = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!snap)
        return eldr_errf(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column,
                         je.text);
    int rc = open_live(d, snap, path, 0, err, errlen);
    json_decref(snap);
    return rc;
}

int live_absorb_json(dash_t *d, const json_t *snap, const char *where, double at, char *err,
                     size_t errlen)
{
    dash_live_now *n = malloc(sizeof *n);
    if (!n)
        return eldr_errf(err, errlen, "dash: out of memory");
    if (parse_now(snap, where, d->live->now.K, n, err, errlen)) {
        free(n);
        return -1;
    }
    absorb(d->live, n, at);
    d->live->polls++;
    d->tau = n->tau;
    free(n);
    return 0;
}

/* ---- the poller ---- */

/* One digested poll, handed from the thread to the UI. */
typedef struct poll_box {
    dash_live_now now;
    double at;                   /* monotonic time of the answer */
    dash_fit *fit;               /* a new model (generation changed); NULL: same */
} poll_box;

struct live {
    client_t *c;
    double interval_s;
    int K;
    int64_t fit_gen;             /* thread: the generation whose centroids we have */
    double uptime_s;             /* thread: the daemon's uptime at the last answer,
                                  * to see a restart (it goes back) */
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;                    /* under mu */
    poll_box *box;               /* under mu: the newest poll not yet taken */
    int64_t polls, failures;     /* under mu */
    char error[ELDR_ERRLEN];     /* under mu */
    struct timespec last_ok;     /* under mu */
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One poll: a snapshot, and the centroids again when the model changed. */
static poll_box *poll_once(live_t *l, char *err, size_t errlen)
{
    json_t *snap = NULL;
    const char *url = client_url(l->c);
    if (client_snapshot(l->c, 0, DASH_DEC_MAX, &snap, err, errlen))
        return NULL;
    poll_box *b = calloc(1, sizeof *b);
    if (!b) {
        json_decref(snap);
        eldr_errf(err, errlen, "dash: out of memory");
        return NULL;
    }
    int rc = parse_now(snap, url, l->K, &b->now, err, errlen);
    json_decref(snap);
    if (!rc) {
        /* a restarted daemon counts generations from 1 again, maybe with
         * another model file: fetch its centroids whatever the number */
        if (isfinite(l->uptime_s) && b->now.uptime_s < l->uptime_s)
            l->fit_gen = -1;
        l->uptime_s = b->now.uptime_s;
    }
    if (!rc && b->now.generation != l->fit_gen) {
        rc = client_snapshot(l->c, 1, 0, &snap, err, errlen);
        if (!rc) {
            rc = build_fit(snap, url, &b->fit, err, errlen);
            json_decref(snap);
        }
        if (!rc && b->fit && b->fit->model->K != l->K)
            rc = eldr_errf(err, errlen, "%s: the new model has K=%d, not %d", url,
                           b->fit->model->K, l->K);
        if (!rc)
            l->fit_gen = b->now.generation;
    }
    if (rc) {
        dash_fit_free(b->fit);
        free(b);
        return NULL;
    }
    return b;
}

static void *poller(void *arg)
{
    live_t *l = arg;
    char err[ELDR_ERRLEN];
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        pthread_mutex_unlock(&l->mu);
        double t0 = mono_now();
        poll_box *b = poll_once(l, err, sizeof err);
        if (b)
            b->at = mono_now();
        pthread_mutex_lock(&l->mu);
        l->polls++;
        if (b) {
            /* an untaken new fit survives its poll being overwritten */
            if (l->box && l->box->fit && !b->fit)
                b->fit = l->box->fit;
            else if (l->box)
                dash_fit_free(l->box->fit);
            free(l->box);
            l->box = b;
            l->error[0] = '\0';
            clock_gettime(CLOCK_MONOTONIC, &l->last_ok);
        } else {
            l->failures++;
            snprintf(l->error, sizeof l->error, "%s", err);
        }
        double until = t0 + l->interval_s;
        struct timespec ts = {(time_t)until, (long)((until - floor(until)) * 1e9)};
        while (!l->stop && mono_now() < until)
            if (pthread_cond_timedwait(&l->cv, &l->mu, &ts))
                break;
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int live_attach(dash_t *d, const char *url, double interval_s, double timeout_s,
                live_t **out, char *err, size_t errlen)
{
    *out = NULL;
    memset(d, 0, sizeof *d);
    live_t *l = calloc(1, sizeof *l);
    if (!l)
        return eldr_errf(err, errlen, "dash: out of memory");
    l->interval_s = interval_s;
    l->c = client_new(url, timeout_s, err, errlen);
    json_t *snap = NULL;
    if (!l->c || client_snapshot(l->c, 1, DASH_DEC_MAX, &snap, err, errlen)) {
        client_free(l->c);
        free(l);
        return -1;
    }
    int rc = open_live(d, snap, client_url(l->c), 1, err, errlen);
    json_decref(snap);
    if (rc) {
        client_free(l->c);
        free(l);
        return -1;
    }
    d->live->interval_s = interval_s;
    l->K = d->live->now.K;
    l->uptime_s = d->live->now.uptime_s;
    l->fit_gen = d->fit ? d->live->now.generation : -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->polls = 1;
    d->live->at = mono_now();
    clock_gettime(CLOCK_MONOTONIC, &l->last_ok);
    *out = l;
    return 0;
}

int live_start(live_t *l, char *err, size_t errlen)
{
    if (pthread_create(&l->th, NULL, poller, l))
        return eldr_errf(err, errlen, "dash: cannot start the poller thread");
    l->started = 1;
    return 0;
}

int live_update(live_t *l, dash_t *d)
{
    pthread_mutex_lock(&l->mu);
    poll_box *b = l->box;
    l->box = NULL;
    dash_live *L = d->live;
    L->polls = l->polls;
    L->failures = l->failures;
    snprintf(L->error, sizeof L->error, "%s", l->error);
    L->age_s = mono_now() - (l->last_ok.tv_sec + l->last_ok.tv_nsec * 1e-9);
    pthread_mutex_unlock(&l->mu);
    if (!b)
        return 0;
    absorb(L, &b->now, b->at);
    d->tau = b->now.tau;
    set_fit(d, b->fit);
    free(b);
    return 1;
}

void live_stop(live_t *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_signal(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->th, NULL);
    }
    if (l->box)
        dash_fit_free(l->box->fit);
    free(l->box);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    client_free(l->c);
    free(l);
}
