/* capture_http.c - send the capture's requests with libcurl multi
 * (capture_http.h). */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture_http.h"
#include "capture_key.h"
#include "client.h"
#include "err.h"

#define RETRY_DELAY_S 0.2        /* times the attempt number: 0.2 s, 0.4 s */
#define POLL_MS 50               /* how soon a Ctrl-C is noticed when nothing answers */
#define PROGRESS_S 0.1

typedef struct slot {
    CURL *curl;
    int64_t job;                 /* -1: free */
    char *buf;
    size_t len, cap;
} slot;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    slot *s = arg;
    return client_buf_append(&s->buf, &s->len, &s->cap, p, size * n) < 0 ? 0 : size * n;
}

typedef struct run {
    capture_drive *d;
    CURLM *multi;
    slot *slots;
    struct curl_slist *headers;
    char url[1024];
    double t0, last_progress;
    int64_t next;                /* next job never sent */
    int64_t inflight;
    int64_t *retry;              /* queue of jobs waiting to be retried */
    int64_t nretry;
} run;

static int start(run *r, slot *s, int64_t j, char *err, size_t errlen)
{
    capture_job *job = &r->d->jobs[j];
    snprintf(r->url, sizeof r->url, "%s%s", r->d->url, job->path);
    curl_easy_setopt(s->curl, CURLOPT_URL, r->url);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, job->body);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)job->len);
    s->job = j;
    s->len = 0;
    if (job->attempts == 0)
        job->sent_s = now_s() - r->t0;
    job->attempts++;
    job->state = JOB_FLIGHT;
    if (curl_multi_add_handle(r->multi, s->curl) != CURLM_OK)
        return eldr_errf(err, errlen, "libcurl: cannot start a request");
    r->inflight++;
    return 0;
}

static slot *free_slot(run *r)
{
    for (int i = 0; i < r->d->concurrency; i++)
        if (r->slots[i].job < 0)
            return &r->slots[i];
    return NULL;
}

/* A failed attempt: retry later, or give up on the job. */
static void attempt_failed(run *r, capture_job *job, int64_t j)
{
    capture_drive *d = r->d;
    d->attempts_failed++;
    if (job->attempts <= CAPTURE_RETRIES && !(d->stop && *d->stop)) {
        job->state = JOB_PENDING;
        job->retry_at = now_s() - r->t0 + RETRY_DELAY_S * job->attempts;
        r->retry[r->nretry++] = j;
    } else {
        job->state = JOB_FAILED;
        d->failed++;
    }
}

/* One finished transfer. -1 (err) when its answer cannot be decoded. */
static int finish(run *r, CURLMsg *m, char *err, size_t errlen)
{
    slot *s = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
    if (!s)
        return 0;
    capture_drive *d = r->d;
    int64_t j = s->job;
    capture_job *job = &d->jobs[j];
    curl_multi_remove_handle(r->multi, s->curl);
    s->job = -1;
    r->inflight--;
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (m->data.result != CURLE_OK) {
        snprintf(job->error, sizeof job->error, "%s", curl_easy_strerror(m->data.result));
        attempt_failed(r, job, j);
        return 0;
    }
    if (capture_key_refused(status)) {
        /* every request would get the same: retrying is no use */
        char what[160];
        snprintf(what, sizeof what, "POST %s (request %lld)", job->path, (long long)j);
        return capture_key_error(d->url, what, status, d->auth ? d->key_file : NULL, err,
                                 errlen);
    }
    if (status < 200 || status > 299) {
        size_t n = s->len < 120 ? s->len : 120;
        for (size_t i = 0; i < n; i++)
            if (s->buf[i] == '\n' || s->buf[i] == '\r')
                s->buf[i] = ' ';
        snprintf(job->error, sizeof job->error, "HTTP %ld: %.*s", status, (int)n,
                 s->len ? s->buf : "(empty answer)");
        attempt_failed(r, job, j);
        return 0;
    }
    char e[ELDR_ERRLEN];
    if (routed_decode(s->buf ? s->buf : "", s->len, &d->hint, &job->routes, e, sizeof e) < 0)
        return eldr_errf(err, errlen, "%s%s (request %lld): %s", d->url, job->path,
                         (long long)j, e);
    if (!d->hint.L) {
        /* the first answer fixes the geometry for the others */
        d->hint.L = job->routes.L;
        d->hint.k = job->routes.k;
        d->hint.from = "the first answer";
    }
    job->state = JOB_OK;
    d->ok++;
    return 0;
}

static void report(run *r, int force)
{
    capture_drive *d = r->d;
    double t = now_s();
    if (!d->progress || (!force && t - r->last_progress < PROGRESS_S))
        return;
    r->last_progress = t;
    d->progress(d->progress_arg, d->ok + d->failed, d->n, d->attempts_failed);
}

/* Start what may start now; *wait_ms gets how long until something may. */
static int launch(run *r, long *wait_ms, char *err, size_t errlen)
{
    capture_drive *d = r->d;
    double t = now_s() - r->t0, soonest = 1e9;
    slot *s;
    int stopped = d->stop && *d->stop;
    /* retries first: they were due before the new ones */
    for (int64_t i = 0; !stopped && i < r->nretry;) {
        int64_t j = r->retry[i];
        if (d->jobs[j].retry_at > t) {
            soonest = soonest < d->jobs[j].retry_at ? soonest : d->jobs[j].retry_at;
            i++;
            continue;
        }
        if (!(s = free_slot(r)))
            break;
        r->retry[i] = r->retry[--r->nretry];
        if (start(r, s, j, err, errlen) < 0)
            return -1;
    }
    while (r->next < d->n && !stopped) {
        double due = d->rate > 0 ? (double)r->next / d->rate : 0;
        if (due > t) {
            soonest = soonest < due ? soonest : due;
            break;
        }
        if (!(s = free_slot(r)))
            break;
        if (start(r, s, r->next++, err, errlen) < 0)
            return -1;
    }
    double w = (soonest - t) * 1000;
    *wait_ms = w < 1 ? 1 : w > POLL_MS ? POLL_MS : (long)w;
    return 0;
}

static int setup(run *r, char *err, size_t errlen)
{
    capture_drive *d = r->d;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return eldr_errf(err, errlen, "libcurl: cannot initialise");
    r->multi = curl_multi_init();
    r->slots = calloc((size_t)d->concurrency, sizeof *r->slots);
    r->retry = malloc((size_t)(d->n + 1) * sizeof *r->retry);
    r->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (r->headers)
        r->headers = curl_slist_append(r->headers, "Expect:");   /* no 100-continue round trip */
    if (r->headers && r->d->auth) {
        struct curl_slist *h = curl_slist_append(r->headers, r->d->auth);
        if (!h)
            curl_slist_free_all(r->headers);
        r->headers = h;
    }
    if (!r->multi || !r->slots || !r->retry || !r->headers)
        return eldr_errf(err, errlen, "out of memory for %d connections", d->concurrency);
    curl_multi_setopt(r->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)d->concurrency);
    long timeout_ms = (long)(d->timeout_s * 1000);
    for (int i = 0; i < d->concurrency; i++) {
        slot *s = &r->slots[i];
        s->job = -1;
        if (!(s->curl = curl_easy_init()))
            return eldr_errf(err, errlen, "libcurl: cannot create a handle");
        curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, r->headers);
        curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(s->curl, CURLOPT_PRIVATE, (char *)s);
        curl_easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000);
        curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(s->curl, CURLOPT_TCP_NODELAY, 1L);
    }
    return 0;
}

static void teardown(run *r)
{
    for (int i = 0; r->slots && i < r->d->concurrency; i++) {
        slot *s = &r->slots[i];
        if (s->curl) {
            if (s->job >= 0)
                curl_multi_remove_handle(r->multi, s->curl);
            curl_easy_cleanup(s->curl);
        }
        free(s->buf);
    }
    free(r->slots);
    free(r->retry);
    curl_slist_free_all(r->headers);
    if (r->multi)
        curl_multi_cleanup(r->multi);
}

int capture_drive_run(capture_drive *d, char *err, size_t errlen)
{
    run r = {.d = d};
    d->ok = d->failed = d->unsent = d->attempts_failed = 0;
    d->interrupted = 0;
    int rc = setup(&r, err, errlen);
    r.t0 = now_s();
    r.last_progress = -1;
    while (rc == 0) {
        long wait_ms;
        if ((rc = launch(&r, &wait_ms, err, errlen)) < 0)
            break;
        int stopped = d->stop && *d->stop;
        if (r.inflight == 0 && (stopped || (r.next >= d->n && r.nretry == 0)))
            break;
        int running;
        curl_multi_perform(r.multi, &running);
        CURLMsg *m;
        int left, done = 0;
        while (rc == 0 && (m = curl_multi_info_read(r.multi, &left)))
            if (m->msg == CURLMSG_DONE) {
                rc = finish(&r, m, err, errlen);
                done++;
            }
        report(&r, 0);
        if (done)
            continue;   /* slots came free: start what may start before waiting */
        if (rc == 0 && r.inflight > 0) {
            curl_multi_poll(r.multi, NULL, 0, (int)wait_ms, NULL);
        } else if (rc == 0) {
            /* nothing in flight: sleep until the next send (paced, or a retry) */
            struct timespec ts = {0, wait_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    /* retries not started when a stop came are failures; jobs never sent are unsent */
    for (int64_t i = 0; rc == 0 && i < r.nretry; i++) {
        d->jobs[r.retry[i]].state = JOB_FAILED;
        d->failed++;
    }
    d->unsent = d->n - r.next;
    d->interrupted = d->stop && *d->stop && d->unsent > 0;
    d->seconds = now_s() - r.t0;
    if (rc == 0)
        report(&r, 1);
    teardown(&r);
    return rc;
}
