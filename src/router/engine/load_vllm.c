/* load_vllm.c - the workers' own load reports (load_vllm.h): the
 * Prometheus text parser, the URL list, and the poller thread. */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "load_vllm.h"
#include "opts.h"

#define PAGE_MAX (4u << 20)      /* a /metrics page larger than this is refused */

/* ---- the parser ---- */

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == ':';
}

/* Past the label set starting at p ('{'), or NULL when it does not close
 * on this line. Quoted values may hold '}' and escaped quotes. */
static const char *skip_labels(const char *p, const char *end)
{
    int quoted = 0;
    for (p++; p < end && *p != '\n'; p++) {
        if (quoted && *p == '\\' && p + 1 < end)
            p++;
        else if (*p == '"')
            quoted = !quoted;
        else if (!quoted && *p == '}')
            return p + 1;
    }
    return NULL;
}

/* The sample value after the name and labels: a float, NaN or [+-]Inf. */
static int parse_value(const char *p, const char *end, double *v)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    char tok[64];
    size_t n = 0;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && n + 1 < sizeof tok)
        tok[n++] = *p++;
    tok[n] = '\0';
    if (n == 0)
        return -1;
    char *e;
    *v = strtod(tok, &e);  /* strtod takes NaN, Inf, +Inf, -Inf as well */
    return *e ? -1 : 0;
}

/* The series read, by engine (docs/eldrd.md, "Load signal"). */
enum { S_V_RUN, S_V_WAIT, S_V_KV, S_V_KV_OLD, S_S_RUN, S_S_QUEUE, S_S_PREALLOC, S_S_TRANSFER,
       S_S_KV, S_N };
static const char *const series_name[S_N] = {
    VLLM_RUNNING, VLLM_WAITING, VLLM_KV, VLLM_KV_OLD, SGLANG_RUNNING, SGLANG_QUEUE,
    SGLANG_PREALLOC, SGLANG_TRANSFER, SGLANG_KV};
/* a load series: a bad value spoils the page; a KV gauge: only itself */
static const unsigned char series_load[S_N] = {1, 1, 0, 0, 1, 1, 1, 1, 0};

static int series_of(const char *name, size_t nlen)
{
    for (int s = 0; s < S_N; s++)
        if (strlen(series_name[s]) == nlen && !memcmp(name, series_name[s], nlen))
            return s;
    return -1;
}

const char *vllm_engine_name(int engine)
{
    return engine == ENGINE_SGLANG ? "sglang" : "vllm";
}

/* The mean of a KV gauge's samples, or NaN when it has none or one is
 * not a number >= 0. */
static double kv_mean(const double *sum, const int *n, const int *bad, int s)
{
    return n[s] && !bad[s] ? sum[s] / n[s] : NAN;
}

int vllm_parse_metrics(const char *text, size_t len, vllm_report *r, char *why, size_t whylen)
{
    double sum[S_N] = {0};
    int n[S_N] = {0}, bad[S_N] = {0};
    memset(r, 0, sizeof *r);
    r->kv = NAN;
    const char *p = text, *end = text + len;
    int line = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        const char *q = p;
        p = eol + 1;
        while (q < eol && (*q == ' ' || *q == '\t'))
            q++;
        if (q == eol || *q == '#' || *q == '\r')
            continue;
        const char *name = q;
        while (q < eol && is_name_char(*q))
            q++;
        int s = series_of(name, (size_t)(q - name));
        if (s < 0)
            continue;  /* another metric: not ours to judge */
        if (q < eol && *q == '{' && !(q = skip_labels(q, eol))) {
            eldr_errf(why, whylen, "%s: unclosed label set on line %d", series_name[s], line);
            return -1;
        }
        double v;
        if (parse_value(q, eol, &v) < 0) {
            eldr_errf(why, whylen, "%s: no number on line %d", series_name[s], line);
            return -1;
        }
        if (!isfinite(v) || v < 0) {
            if (series_load[s]) {
                eldr_errf(why, whylen, "%s is %g on line %d", series_name[s], v, line);
                return -1;
            }
            bad[s] = 1;
        }
        sum[s] += v;
        n[s]++;
    }
    int is_vllm = n[S_V_RUN] || n[S_V_WAIT], is_sglang = n[S_S_RUN] || n[S_S_QUEUE];
    if (is_vllm && is_sglang) {
        eldr_errf(why, whylen, "the page has both vLLM (%s) and SGLang (%s) series",
                  n[S_V_RUN] ? VLLM_RUNNING : VLLM_WAITING,
                  n[S_S_RUN] ? SGLANG_RUNNING : SGLANG_QUEUE);
        return -1;
    }
    if (is_sglang) {
        if (!n[S_S_RUN] || !n[S_S_QUEUE]) {
            eldr_errf(why, whylen, "no %s in the page", !n[S_S_RUN] ? SGLANG_RUNNING : SGLANG_QUEUE);
            return -1;
        }
        r->engine = ENGINE_SGLANG;
        r->running = sum[S_S_RUN];
        r->waiting = sum[S_S_QUEUE] + sum[S_S_PREALLOC] + sum[S_S_TRANSFER];
        r->n_running = n[S_S_RUN];
        r->n_waiting = n[S_S_QUEUE];
        r->kv = kv_mean(sum, n, bad, S_S_KV);
        r->kv_series = n[S_S_KV] ? SGLANG_KV : NULL;
        return 0;
    }
    if (!n[S_V_RUN] || !n[S_V_WAIT]) {
        eldr_errf(why, whylen, "no %s in the page%s", !n[S_V_RUN] ? VLLM_RUNNING : VLLM_WAITING,
                  is_vllm ? "" : " (nor " SGLANG_RUNNING ")");
        return -1;
    }
    r->engine = ENGINE_VLLM;
    r->running = sum[S_V_RUN];
    r->waiting = sum[S_V_WAIT];
    r->n_running = n[S_V_RUN];
    r->n_waiting = n[S_V_WAIT];
    /* the current name first; vLLM before 0.9 had only the old one */
    int kv = n[S_V_KV] ? S_V_KV : S_V_KV_OLD;
    r->kv = kv_mean(sum, n, bad, kv);
    r->kv_series = n[kv] ? series_name[kv] : NULL;
    return 0;
}

/* ---- the URL list ---- */

void vllm_free_urls(char **urls, int K)
{
    for (int k = 0; urls && k < K; k++)
        free(urls[k]);
    free(urls);
}

static char *metrics_url(const char *u, size_t n, char *err, size_t errlen)
{
    if (n < 8 || strncmp(u, "http://", 7)) {
        eldr_errf(err, errlen, "--worker-urls: '%.*s' is not an http:// URL", (int)n, u);
        return NULL;
    }
    while (n > 7 && u[n - 1] == '/')
        n--;
    int has = n >= 8 && !strncmp(u + n - 8, "/metrics", 8);
    char *s = malloc(n + 9);
    if (!s) {
        eldr_errf(err, errlen, "--worker-urls: out of memory");
        return NULL;
    }
    memcpy(s, u, n);
    strcpy(s + n, has ? "" : "/metrics");
    return s;
}

int vllm_resolve_urls(const char *spec, char *const *workers, int K, char ***urls, char *err,
                      size_t errlen)
{
    char **items;
    int n;
    if (opts_split_names(spec, "--worker-urls", &items, &n, err, errlen) < 0)
        return -1;
    char **out = calloc((size_t)K, sizeof *out);
    int rc = out ? 0 : eldr_errf(err, errlen, "--worker-urls: out of memory");
    int named = strstr(items[0], "=") && strncmp(items[0], "http://", 7);
    if (rc == 0 && n != K)
        rc = eldr_errf(err, errlen, "--worker-urls: %d entries for %d workers", n, K);
    for (int i = 0; rc == 0 && i < n; i++) {
        const char *u = items[i];
        int k = i;
        if (named) {
            const char *eq = strchr(u, '=');
            if (!eq) {
                rc = eldr_errf(err, errlen, "--worker-urls: entry %d '%s' is not NAME=URL", i + 1, u);
                break;
            }
            for (k = 0; k < K; k++)
                if (strlen(workers[k]) == (size_t)(eq - u) && !strncmp(workers[k], u, (size_t)(eq - u)))
                    break;
            if (k == K) {
                rc = eldr_errf(err, errlen, "--worker-urls: '%.*s' is not a decode worker",
                               (int)(eq - u), u);
                break;
            }
            if (out[k]) {
                rc = eldr_errf(err, errlen, "--worker-urls: worker '%s' given twice", workers[k]);
                break;
            }
            u = eq + 1;
        }
        if (!(out[k] = metrics_url(u, strlen(u), err, errlen)))
            rc = -1;
    }
    vllm_free_urls(items, n);
    if (rc < 0) {
        vllm_free_urls(out, K);
        return -1;
    }
    *urls = out;
    return 0;
}

/* ---- the poller ---- */

/* Each worker is polled on its own clock: a transfer starts when its
 * previous one ended and --poll-ms has passed since that one started, so a
 * worker whose /metrics hangs (until its timeout) delays nobody else. */
typedef struct wpoll {
    char *url;
    CURL *h;
    char *buf;
    size_t len, cap;
    int too_big;
    int busy;                    /* a transfer is running */
    double started, next_at;     /* monotonic seconds */
    uint64_t base;               /* routed count when this transfer went out */
    /* last result, under the poller's lock */
    int known;                   /* the last poll gave a load */
    int ever;                    /* some poll did */
    double running, waiting;     /* of the last good poll */
    int engine;                  /* ENGINE_*, of the last good poll */
    double kv;                   /* KV cache usage of the last good poll (NaN unknown) */
    const char *kv_series;       /* its gauge (static), NULL none */
    double last_ok;              /* monotonic seconds, 0 never */
    double last_duration;        /* seconds the last poll took */
    uint64_t errors, polls;
    char error[200];
} wpoll;

struct vllm_poller {
    rstate *st;
    int K, poll_ms;
    long timeout_ms;
    wpoll *w;
    CURLM *multi;
    uint64_t *routed;            /* [K] scratch: routed counts */
    pthread_t th;
    int running;
    pthread_mutex_t lock;        /* the results and stop */
    int stop;
};

static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static size_t on_page(char *p, size_t size, size_t n, void *arg)
{
    wpoll *w = arg;
    size_t add = size * n;
    if (w->len + add + 1 > PAGE_MAX) {
        w->too_big = 1;
        return 0;
    }
    if (w->len + add + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 16384;
        while (cap < w->len + add + 1)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b)
            return 0;
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, add);
    w->len += add;
    return add;
}

/* One worker's page into a report, or a reason it has none. */
static int judge(wpoll *w, CURLcode rc, vllm_report *r, char *why, size_t whylen)
{
    long status = 0;
    if (w->too_big)
        return eldr_errf(why, whylen, "metrics page over %u bytes", PAGE_MAX);
    if (rc != CURLE_OK)
        return eldr_errf(why, whylen, "%s", curl_easy_strerror(rc));
    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return eldr_errf(why, whylen, "HTTP %ld", status);
    return vllm_parse_metrics(w->buf ? w->buf : "", w->len, r, why, whylen);
}

static void start_poll(vllm_poller *p, int k, double now)
{
    wpoll *w = &p->w[k];
    w->len = 0;
    w->too_big = 0;
    w->busy = 1;
    w->started = now;
    w->next_at = now + (double)p->poll_ms / 1e3;
    w->base = p->routed[k];
    curl_multi_add_handle(p->multi, w->h);
}

/* A transfer ended (rc) or was given up: record it, and hand the state
 * the report, or the news that there is none this time. */
static void finish_poll(vllm_poller *p, int k, CURLcode rc, double now)
{
    wpoll *w = &p->w[k];
    curl_multi_remove_handle(p->multi, w->h);
    w->busy = 0;
    vllm_report r = {0};
    char why[sizeof w->error];
    int ok = judge(w, rc, &r, why, sizeof why) == 0;
    pthread_mutex_lock(&p->lock);
    w->known = ok;
    w->polls++;
    w->last_duration = now - w->started;
    if (ok) {
        w->running = r.running;
        w->waiting = r.waiting;
        w->engine = r.engine;
        w->kv = r.kv;
        w->kv_series = r.kv_series;
        w->last_ok = now;
        w->ever = 1;
        w->error[0] = '\0';
    } else {
        w->errors++;
        snprintf(w->error, sizeof w->error, "%s", why);
    }
    pthread_mutex_unlock(&p->lock);
    state_set_reported(p->st, k, ok, (int64_t)llround(r.running + r.waiting), w->base);
}

/* One pass: start the transfers that are due, drive libcurl, collect
 * what ended, give up on what ran past the timeout. */
static void step(vllm_poller *p, int start_due, int wait_ms)
{
    double now = mono();
    state_routed_counts(p->st, p->routed);
    for (int k = 0; start_due && k < p->K; k++)
        if (!p->w[k].busy && now >= p->w[k].next_at)
            start_poll(p, k, now);
    int active;
    curl_multi_perform(p->multi, &active);
    CURLMsg *m;
    int left;
    now = mono();
    while ((m = curl_multi_info_read(p->multi, &left)))
        if (m->msg == CURLMSG_DONE)
            for (int k = 0; k < p->K; k++)
                if (p->w[k].busy && p->w[k].h == m->easy_handle)
                    finish_poll(p, k, m->data.result, now);
    for (int k = 0; k < p->K; k++)   /* libcurl times out first; this is a backstop */
        if (p->w[k].busy && now - p->w[k].started > (double)p->timeout_ms / 1e3 + 1)
            finish_poll(p, k, CURLE_OPERATION_TIMEDOUT, now);
    if (wait_ms > 0)
        curl_multi_poll(p->multi, NULL, 0, wait_ms, NULL);
}

static int any_busy(const vllm_poller *p)
{
    for (int k = 0; k < p->K; k++)
        if (p->w[k].busy)
            return 1;
    return 0;
}

/* Milliseconds until the next transfer is due (1..50). */
static int wait_for(const vllm_poller *p)
{
    double now = mono(), next = now + 0.05;
    for (int k = 0; k < p->K; k++)
        if (!p->w[k].busy && p->w[k].next_at < next)
            next = p->w[k].next_at;
    int ms = (int)((next - now) * 1e3);
    return ms < 1 ? 1 : ms > 50 ? 50 : ms;
}

static void *poller_main(void *arg)
{
    vllm_poller *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        step(p, 1, wait_for(p));
    }
    return NULL;
}

static void poller_free(vllm_poller *p)
{
    for (int k = 0; p->w && k < p->K; k++) {
        if (p->w[k].h) {
            if (p->w[k].busy && p->multi)
                curl_multi_remove_handle(p->multi, p->w[k].h);
            curl_easy_cleanup(p->w[k].h);
        }
        free(p->w[k].buf);
        free(p->w[k].url);
    }
    if (p->multi)
        curl_multi_cleanup(p->multi);
    pthread_mutex_destroy(&p->lock);
    free(p->w);
    free(p->routed);
    free(p);
}

vllm_poller *vllm_start(rstate *st, char **urls, int poll_ms, char *err, size_t errlen)
{
    vllm_poller *p = calloc(1, sizeof *p);
    if (!p || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(p);
        vllm_free_urls(urls, st->K);
        eldr_errf(err, errlen, "--load-from vllm: cannot start libcurl");
        return NULL;
    }
    p->st = st;
    p->K = st->K;
    p->poll_ms = poll_ms;
    p->timeout_ms = poll_ms * 2 < 500 ? 500 : poll_ms * 2 > 5000 ? 5000 : poll_ms * 2;
    pthread_mutex_init(&p->lock, NULL);
    p->w = calloc((size_t)p->K, sizeof *p->w);
    p->routed = calloc((size_t)p->K, sizeof *p->routed);
    p->multi = curl_multi_init();
    int bad = !p->w || !p->routed || !p->multi;
    for (int k = 0; k < p->K; k++) {
        if (p->w)
            p->w[k].url = urls[k];
        else
            free(urls[k]);
    }
    free(urls);
    for (int k = 0; !bad && k < p->K; k++) {
        wpoll *w = &p->w[k];
        if (!(w->h = curl_easy_init())) {
            bad = 1;
            break;
        }
        curl_easy_setopt(w->h, CURLOPT_URL, w->url);
        curl_easy_setopt(w->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w->h, CURLOPT_TIMEOUT_MS, p->timeout_ms);
        curl_easy_setopt(w->h, CURLOPT_CONNECTTIMEOUT_MS, p->timeout_ms);
        curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, on_page);
        curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
        curl_easy_setopt(w->h, CURLOPT_PROTOCOLS_STR, "http");
        snprintf(w->error, sizeof w->error, "not polled yet");
    }
    if (bad) {
        poller_free(p);
        eldr_errf(err, errlen, "--load-from vllm: out of memory");
        return NULL;
    }
    state_use_reported(st, 1);
    /* a first poll of every worker, synchronously: the first routes see
     * reported loads */
    step(p, 1, 10);
    while (any_busy(p))
        step(p, 0, 10);
    if (pthread_create(&p->th, NULL, poller_main, p) != 0) {
        state_use_reported(st, 0);
        poller_free(p);
        eldr_errf(err, errlen, "--load-from vllm: cannot start the poller thread");
        return NULL;
    }
    p->running = 1;
    return p;
}

void vllm_stop(vllm_poller *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    curl_multi_wakeup(p->multi);
    if (p->running)
        pthread_join(p->th, NULL);
    poller_free(p);
}

/* Fresh: the last poll gave a load, at most max(3 polls, 1 s) ago. */
static int fresh(const vllm_poller *p, const wpoll *w, double now)
{
    double limit = 3.0 * p->poll_ms / 1e3 > 1 ? 3.0 * p->poll_ms / 1e3 : 1;
    return w->known && w->last_ok && now - w->last_ok <= limit + (double)p->timeout_ms / 1e3;
}

json_t *vllm_json(vllm_poller *p, char *const *workers)
{
    json_t *a = json_array();
    double now = mono();
    uint64_t rounds = UINT64_MAX;
    pthread_mutex_lock(&p->lock);
    for (int k = 0; a && k < p->K; k++) {
        wpoll *w = &p->w[k];
        if (w->polls < rounds)
            rounds = w->polls;
        json_t *o = json_pack("{s:s, s:s, s:o, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, "
                              "s:o, s:o}",
                              "name", workers[k], "url", w->url, "engine",
                              w->ever ? json_string(vllm_engine_name(w->engine)) : json_null(),
                              "known", w->known, "fresh",
                              fresh(p, w, now), "running",
                              w->ever ? json_real(w->running) : json_null(), "waiting",
                              w->ever ? json_real(w->waiting) : json_null(), "reported",
                              w->ever ? json_integer(llround(w->running + w->waiting))
                                      : json_null(),
                              "kv_cache_usage",
                              w->ever && isfinite(w->kv) ? json_real(w->kv) : json_null(),
                              "kv_series",
                              w->ever && w->kv_series ? json_string(w->kv_series) : json_null(),
                              "age_s", w->last_ok ? json_real(now - w->last_ok) : json_null(),
                              "polls", (json_int_t)w->polls, "poll_errors",
                              (json_int_t)w->errors, "poll_duration_s",
                              w->polls ? json_real(w->last_duration) : json_null(), "error",
                              w->known ? json_null() : json_string(w->error));
        json_array_append_new(a, o);
    }
    json_t *o = json_pack("{s:s, s:i, s:I, s:o}", "from", "vllm", "poll_ms", p->poll_ms, "polls",
                          (json_int_t)(rounds == UINT64_MAX ? 0 : rounds), "workers", a);
    pthread_mutex_unlock(&p->lock);
    return o;
}

json_t *vllm_degraded(vllm_poller *p, char *const *workers)
{
    json_t *a = json_array();
    double now = mono();
    pthread_mutex_lock(&p->lock);
    for (int k = 0; a && k < p->K; k++)
        if (!fresh(p, &p->w[k], now))
            json_array_append_new(a, json_string(workers[k]));
    pthread_mutex_unlock(&p->lock);
    return a;
}

static void series_head(strbuf *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void vllm_metrics(vllm_poller *p, char *const *workers, strbuf *b)
{
    enum { N = 7 };
    static const char *names[N] = {"eldr_load_reported", "eldr_vllm_load",
                                   "eldr_vllm_poll_errors_total", "eldr_load_stale",
                                   "eldr_vllm_poll_age_seconds",
                                   "eldr_vllm_poll_duration_seconds",
                                   "eldr_worker_kv_cache_usage"};
    static const char *types[N] = {"gauge", "gauge", "counter", "gauge", "gauge", "gauge",
                                   "gauge"};
    static const char *helps[N] = {
        "1 when the worker's last poll gave its load.",
        "Running + waiting requests the worker reported at the last good poll "
        "(vLLM or SGLang).",
        "Polls of the worker's /metrics that gave no load.",
        "1 when the worker is routed on an old report (its last poll failed): that report "
        "plus eldrd's routes since.",
        "Seconds since the worker's last good poll (NaN: never).",
        "Seconds the worker's last poll took.",
        "The worker's KV cache usage (1 = full) at the last good poll "
        "(vllm:kv_cache_usage_perc or sglang:token_usage; NaN: not reported). Not part of "
        "the load."};
    double now = mono();
    pthread_mutex_lock(&p->lock);
    for (int s = 0; s < N; s++) {
        series_head(b, names[s], types[s], helps[s]);
        for (int k = 0; k < p->K; k++) {
            wpoll *w = &p->w[k];
            sb_printf(b, "%s{worker=\"", names[s]);
            sb_label(b, workers[k]);
            if (s == 0)
                sb_printf(b, "\"} %d\n", w->known);
            else if (s == 1 && w->last_ok)
                sb_printf(b, "\"} %.9g\n", w->running + w->waiting);
            else if (s == 2)
                sb_printf(b, "\"} %llu\n", (unsigned long long)w->errors);
            else if (s == 3)
                sb_printf(b, "\"} %d\n", !w->known && w->ever);
            else if (s == 4 && w->last_ok)
                sb_printf(b, "\"} %.3f\n", now - w->last_ok);
            else if (s == 5 && w->polls)
                sb_printf(b, "\"} %.6f\n", w->last_duration);
            else if (s == 6 && w->last_ok && isfinite(w->kv))
                sb_printf(b, "\"} %.9g\n", w->kv);
            else
                sb_printf(b, "\"} NaN\n");
        }
    }
    pthread_mutex_unlock(&p->lock);
}

static json_t *provider_snapshot(void *cls)
{
    vllm_poller *p = cls;
    return vllm_json(p, p->st->workers);
}

static void provider_metrics(void *cls, strbuf *b)
{
    vllm_poller *p = cls;
    vllm_metrics(p, p->st->workers, b);
}

static json_t *provider_degraded(void *cls)
{
    vllm_poller *p = cls;
    return vllm_degraded(p, p->st->workers);
}

void vllm_provider(vllm_poller *p, engine_provider *out)
{
    *out = (engine_provider){.snapshot_key = "load", .snapshot = provider_snapshot,
                             .metrics = provider_metrics, .degraded_key = "stale_load",
                             .degraded = provider_degraded, .cls = p};
}
