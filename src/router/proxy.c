/* proxy.c - eldrd in the request path (proxy.h). */
#include "proxy.h"

#include <math.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "endpoints.h"
#include "err.h"
#include "proxy_msg.h"
#include "proxy_ring.h"
#include "upstream.h"

#define UPSTREAM_BODY_MAX (64LL << 20)   /* a non-streamed upstream answer */
#define IDLE_CHECK_S 0.05                 /* how often silent upstreams are looked for */

typedef enum outcome {
    PX_OK = 0,            /* decode answered, relayed */
    PX_PREFILL_ONLY,      /* the prefill ended the request */
    PX_BAD_REQUEST,       /* refused before any upstream (4xx) */
    PX_UPSTREAM_ERROR,    /* 502 */
    PX_UPSTREAM_TIMEOUT,  /* 504 */
    PX_CLIENT_GONE,       /* the client left first */
    PX_REFUSED,           /* the route was refused (409 id in flight, 503) */
    PX_N_OUTCOMES
} outcome;

static const char *const outcome_names[PX_N_OUTCOMES] = {
    "ok", "prefill_only", "bad_request", "upstream_error", "upstream_timeout", "client_gone",
    "refused"};

typedef enum role { ROLE_PREFILL = 0, ROLE_DECODE, ROLE_RELEASE } role;

typedef struct xfer {
    role role;
    proxy_t *p;
    upx *ux;                     /* the transfer upstream; NULL once it reported */
    char *body;                  /* the request body, owned */
    strbuf resp;                 /* the answer collected (prefill, decode as JSON, errors) */
    int upstream;                /* index into the prefill or decode URLs */
    int stream;                  /* a streamed decode: 2xx bytes go to the client */
    int code_ok;                 /* the answer's status is 2xx */
    double last;                 /* monotonic seconds of its last bytes (or start) */
    pxreq *r;                    /* NULL for a release */
    struct xfer *prev, *next;    /* the active list */
} xfer;

struct pxreq {
    atomic_int refs;
    pthread_mutex_t lock;
    proxy_t *p;
    struct MHD_Connection *conn; /* NULL once the connection is done */
    pm_client client;
    pm_prefill pre;
    char id[RB_ID_MAX];
    const char *path;
    int prefill;
    int worker;                  /* decode worker, -1 before the decision */
    int routed, finished;        /* in flight on the worker; finished */
    int decode_sent;
    xfer *up;                    /* the upstream transfer now (upstream thread) */
    /* toward the client, under lock */
    int ready, suspended, gone, concluded;
    int status;
    char *body;
    size_t body_len;
    int streaming;
    strbuf out;                  /* stream bytes the client has not read yet */
    size_t out_off;              /* read up to here */
    int out_done, out_error;
    pxreq *next_new, *next_cancel;
};

struct proxy {
    eldrd_t *d;
    upc *up;                     /* origins: the prefill URLs, then the decode URLs */
    pthread_t thread;
    int thread_on;
    pthread_mutex_t lock;        /* the queues and stop */
    pxreq *new_head, *new_tail, *cancel_head;
    int stop;
    atomic_int stopped;          /* refuse new requests */
    atomic_int resumed;          /* a connection was resumed: run libmicrohttpd */
    struct MHD_Daemon *mhd;      /* run from the loop (proxy_attach) */
    double mhd_ran;              /* when it last ran (monotonic s) */
    int quiesce;                 /* asked: the loop stops accepting (under lock) */
    int quiesced;                /* done; listen_fd the socket it gave back */
    MHD_socket listen_fd;
    pthread_cond_t quiet;
    char **prefill;
    int n_prefill;
    pring ring;
    atomic_llong *prefill_load;
    char **decode;
    int K;
    xfer *active;
    atomic_ullong seq;
    unsigned long long boot;
    atomic_ullong outcomes[PX_N_OUTCOMES];
    atomic_ullong no_signature;
    atomic_llong open;           /* requests between begin and conclusion */
};

/* ---- URLs -------------------------------------------------------------- */

static void free_urls(char **u, int n)
{
    for (int i = 0; i < n; i++)
        free(u[i]);
    free(u);
}

/* --prefill/--decode: split as every eldrd name list is (opts_split_names:
 * non-empty, printable, none twice); a trailing '/' is dropped, so two
 * URLs that differ only by it are one given twice. Whether each is an
 * http://HOST:PORT URL is upc_origin's check (proxy_start). */
static int split_urls(const char *spec, const char *opt, char ***out, int *n, char *err,
                      size_t errlen)
{
    if (opts_split_names(spec, opt, out, n, err, errlen) < 0)
        return -1;
    for (int i = 0; i < *n; i++) {
        char *t = (*out)[i];
        size_t len = strlen(t);
        while (len && t[len - 1] == '/')
            t[--len] = '\0';
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= !strcmp((*out)[j], t);
        if (dup) {
            eldr_errf(err, errlen, "%s: '%s' is given twice", opt, t);
            free_urls(*out, *n);
            *out = NULL;
            *n = 0;
            return -1;
        }
    }
    return 0;
}

/* ---- requests: references and the client side --------------------------- */

static void unref(pxreq *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    pm_client_free(&r->client);
    pm_prefill_free(&r->pre);
    free(r->body);
    free(r->out.s);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Resume the connection if it waits for us (r->lock held). libmicrohttpd
 * runs on the loop: it takes the connection back at its next run, which
 * the loop makes at once (p->resumed). */
static void wake(pxreq *r)
{
    if (r->suspended && r->conn) {
        r->suspended = 0;
        MHD_resume_connection(r->conn);
        atomic_store(&r->p->resumed, 1);
    }
}

static int out_append(pxreq *r, const char *s, size_t n)
{
    if (r->out_off == r->out.len)
        r->out_off = r->out.len = 0;   /* all read: start over at the front */
    sb_put(&r->out, s, n);
    return r->out.oom ? -1 : 0;
}

static char *error_json(const char *where, const char *msg, size_t *len)
{
    json_t *j = json_pack("{s:s, s:s}", "error", msg, "where", where);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    *len = s ? strlen(s) : 0;
    return s;
}

/* The request fails with status: a JSON error, or in a stream that has
 * begun, an error event and a cut (never a partial answer that looks
 * complete). */
static void fail(pxreq *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(pxreq *r, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    outcome o = status == 504 ? PX_UPSTREAM_TIMEOUT
              : status == 502 ? PX_UPSTREAM_ERROR
              : status == 409 || status == 503 ? PX_REFUSED : PX_BAD_REQUEST;
    atomic_fetch_add(&r->p->outcomes[o], 1);
    pthread_mutex_lock(&r->lock);
    if (r->streaming) {
        json_t *j = json_pack("{s:{s:s, s:i}}", "error", "message", msg, "code", status);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) {
            out_append(r, "data: ", 6);
            out_append(r, s, strlen(s));
            out_append(r, "\n\n", 2);
        }
        free(s);
        json_decref(j);
        r->out_done = r->out_error = 1;
    } else if (!r->ready) {
        r->status = status;
        r->body = error_json("upstream", msg, &r->body_len);
        r->ready = 1;
    }
    wake(r);
    pthread_mutex_unlock(&r->lock);
}

/* ---- the upstream thread ---------------------------------------------- */

static int collect(xfer *x, const char *data, size_t n)
{
    x->last = state_mono_now();
    if ((long long)(x->resp.len + n) > UPSTREAM_BODY_MAX)
        return -1;
    sb_put(&x->resp, data, n);
    return x->resp.oom ? -1 : 0;
}

/* A streamed decode: chunks go to the client as they come. An error
 * status is collected instead, for the message. */
static int relay(xfer *x, const char *data, size_t n)
{
    pxreq *r = x->r;
    x->last = state_mono_now();
    pthread_mutex_lock(&r->lock);
    if (!r->streaming) {   /* stock vLLM: the decoder's stream is the whole answer */
        r->streaming = 1;
        r->status = 200;
        r->ready = 1;
    }
    int ok = !r->gone && out_append(r, data, n) == 0;
    if (ok)
        wake(r);
    pthread_mutex_unlock(&r->lock);
    return ok ? 0 : -1;   /* -1 aborts the transfer: the client is gone */
}

static void on_status(void *cls, int status)
{
    xfer *x = cls;
    x->code_ok = status >= 200 && status < 300;
}

/* Answer bytes: a streamed decode's 2xx bytes go to the client as they
 * come; the rest (and an error status's text, for the message) is
 * collected. */
static int on_body(void *cls, const char *data, size_t n)
{
    xfer *x = cls;
    return x->stream && x->code_ok ? relay(x, data, n) : collect(x, data, n);
}

static void transfer_done(proxy_t *p, xfer *x, up_result res, int status, const char *why);

static void on_done(void *cls, up_result res, int status, const char *why)
{
    xfer *x = cls;
    x->ux = NULL;   /* the client frees it */
    transfer_done(x->p, x, res, status, why);
}

static const up_handler xfer_handler = {on_status, on_body, on_done};

static void xfer_free(proxy_t *p, xfer *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else if (p->active == x)
        p->active = x->next;
    if (x->next)
        x->next->prev = x->prev;
    if (x->ux)
        upc_cancel(p->up, x->ux);
    free(x->body);
    free(x->resp.s);
    free(x);
}

/* POST body (taken over) to an upstream: origin is its index in the
 * client (the prefill URLs, then the decode URLs), upstream its index in
 * its own list. NULL when it cannot start. */
static xfer *xfer_start(proxy_t *p, role role, int origin, const char *path, char *body,
                        pxreq *r, int upstream, int stream)
{
    xfer *x = calloc(1, sizeof *x);
    if (!x) {
        free(body);
        return NULL;
    }
    x->role = role;
    x->p = p;
    x->body = body;
    x->r = r;
    x->upstream = upstream;
    x->stream = stream;
    x->ux = upc_post(p->up, origin, path, r ? r->id : NULL, body, strlen(body), &xfer_handler,
                     x);
    if (!x->ux) {
        xfer_free(p, x);
        return NULL;
    }
    x->last = state_mono_now();
    x->next = p->active;
    if (p->active)
        p->active->prev = x;
    p->active = x;
    return x;
}

/* The prefill kept the request's KV for a decode that will not come:
 * tell a decode instance to release it (another one than the decoder
 * that could not be reached, when there is one), as the reference does.
 * Fire and forget. */
static void release_kv(proxy_t *p, pxreq *r, int avoid)
{
    char *body = pm_release_body(&r->pre);
    if (!body)
        return;
    int k = 0;
    if (avoid >= 0 && p->K > 1)
        k = avoid == 0 ? 1 : 0;
    xfer_start(p, ROLE_RELEASE, p->n_prefill + k, "/v1/kv_transfer/release", body, NULL, k,
               0);
}

/* The request is over upstream: finish its route, release KV that no
 * decode will take, and drop the upstream thread's reference. */
static void conclude(proxy_t *p, pxreq *r, int avoid)
{
    if (r->routed && !r->finished) {
        rb_err e;
        int w;
        state_finish(p->d->st, r->id, &w, &e);
        r->finished = 1;
    }
    if (r->pre.text && !r->decode_sent)   /* the prefill answered: it holds the KV */
        release_kv(p, r, avoid);
    pthread_mutex_lock(&r->lock);
    r->concluded = 1;
    pthread_mutex_unlock(&r->lock);
    atomic_fetch_sub(&p->open, 1);
    unref(r);
}

/* The gate values in eldr_sig (<f4 [L*E], a gate model's): finite and,
 * for probabilities, >= 0. */
static int sig_gates(const proxy_t *p, const pm_prefill *pre, int probs, float *gates,
                     char *why, size_t whylen)
{
    size_t cells = (size_t)p->d->L * (size_t)p->d->E;
    if (!pre->sig) {
        memset(gates, 0, cells * sizeof *gates);
        return 0;
    }
    if (pre->sig_len != cells * 4)
        return eldr_errf(why, whylen, "the prefill's eldr_sig holds %zu bytes; the gate model's "
                         "%d layers x %d experts need %zu (little-endian float32)",
                         pre->sig_len, p->d->L, p->d->E, cells * 4);
    for (size_t i = 0; i < cells; i++) {
        const uint8_t *b = pre->sig + 4 * i;
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
        memcpy(&gates[i], &u, sizeof u);
        if (!isfinite(gates[i]) || (probs && gates[i] < 0))
            return eldr_errf(why, whylen, "the prefill's eldr_sig has %s %g at layer %zu "
                             "expert %zu", probs ? "a negative or non-finite probability"
                                                 : "a non-finite value",
                             (double)gates[i], i / (size_t)p->d->E, i % (size_t)p->d->E);
    }
    return 0;
}

/* The counts in eldr_sig (<i2 [L*E]) as the router's uint16 counts. */
static int sig_counts(const proxy_t *p, const pm_prefill *pre, uint16_t *counts, char *why,
                      size_t whylen)
{
    size_t cells = (size_t)p->d->L * (size_t)p->d->E;
    if (!pre->sig) {
        memset(counts, 0, cells * sizeof *counts);
        return 0;
    }
    if (pre->sig_len != cells * 2)
        return eldr_errf(why, whylen, "the prefill's eldr_sig holds %zu bytes; the model's "
                         "%d layers x %d experts need %zu (little-endian int16 counts)",
                         pre->sig_len, p->d->L, p->d->E, cells * 2);
    for (size_t i = 0; i < cells; i++) {
        int16_t v = (int16_t)(pre->sig[2 * i] | (pre->sig[2 * i + 1] << 8));
        if (v < 0)
            return eldr_errf(why, whylen, "the prefill's eldr_sig has a negative count %d at "
                             "layer %zu expert %zu", v, i / (size_t)p->d->E,
                             i % (size_t)p->d->E);
        counts[i] = (uint16_t)v;
    }
    return 0;
}

/* Decide the decode worker from the prefill's eldr_sig: the same path as
 * POST /v1/route. The served model says how to read it: counts, or gate
 * values for a gate model (its variant can change with a hot swap). */
static int decide(proxy_t *p, pxreq *r)
{
    char why[256];
    size_t cells = (size_t)p->d->L * (size_t)p->d->E;
    mref_t *m = mholder_get(&p->d->model);
    sig_variant v = m->m->recipe.variant;
    int gate = sig_variant_uses_gate(v);
    uint16_t *counts = gate ? NULL : malloc(cells * sizeof *counts);
    float *gates = gate ? malloc(cells * sizeof *gates) : NULL;
    route_out *o = malloc(sizeof *o);
    int rc = -1;
    if ((!counts && !gates) || !o) {
        fail(r, 503, "out of memory");
    } else if ((gate ? sig_gates(p, &r->pre, v == SIG_GATE_PROB, gates, why, sizeof why)
                     : sig_counts(p, &r->pre, counts, why, sizeof why)) < 0) {
        fail(r, 502, "%s", why);
    } else {
        rb_err e;
        int nosig = 0;
        if (route_request(p->d, m, r->id, counts, gates, -1, NULL, o, &nosig, &e) < 0) {
            fail(r, e.status, "%s (%s)", e.error, e.where);
        } else {
            r->worker = o->d.worker;
            r->routed = 1;
            if (!r->pre.sig)
                atomic_fetch_add(&p->no_signature, 1);
            rc = 0;
        }
    }
    mref_put(m);
    free(counts);
    free(gates);
    free(o);
    return rc;
}

static void start_decode(proxy_t *p, pxreq *r)
{
    char *body = pm_decode_body(&r->client, &r->pre, r->id);
    r->up = body ? xfer_start(p, ROLE_DECODE, p->n_prefill + r->worker, r->path, body, r,
                              r->worker, r->client.stream)
                 : NULL;
    if (!r->up) {
        fail(r, 503, "cannot start the decode request (out of memory)");
        conclude(p, r, -1);
        return;
    }
    r->decode_sent = 1;
}

static void after_prefill(proxy_t *p, pxreq *r, xfer *x)
{
    char why[512];
    if (pm_prefill_parse(x->resp.s ? x->resp.s : "", x->resp.len, &r->client, &r->pre, why,
                         sizeof why) < 0) {
        fail(r, 502, "prefill %s: %s", p->prefill[x->upstream], why);
        conclude(p, r, -1);
        return;
    }
    pthread_mutex_lock(&r->lock);
    int gone = r->gone;
    pthread_mutex_unlock(&r->lock);
    if (gone) {
        atomic_fetch_add(&p->outcomes[PX_CLIENT_GONE], 1);
        conclude(p, r, -1);
        return;
    }
    if (r->client.stream && r->client.protocol == PM_ELDR) {
        /* the first token goes out before the decision and the KV
         * transfer: neither may move the client's time to first token */
        size_t n;
        char *ev = pm_first_events(&r->pre, &r->client, &n);
        pthread_mutex_lock(&r->lock);
        r->streaming = 1;
        r->status = 200;
        if (ev)
            out_append(r, ev, n);
        if (!r->pre.continues)
            r->out_done = 1;
        r->ready = 1;
        wake(r);
        pthread_mutex_unlock(&r->lock);
        free(ev);
        if (!ev) {
            fail(r, 503, "out of memory for the first token");
            conclude(p, r, -1);
            return;
        }
    }
    if (!r->pre.continues) {
        if (!r->client.stream) {
            size_t n;
            char *a = pm_first_answer(&r->pre, &r->client, &n);
            pthread_mutex_lock(&r->lock);
            r->status = a ? 200 : 503;
            r->body = a ? a : error_json("proxy", "out of memory", &n);
            r->body_len = n;
            r->ready = 1;
            wake(r);
            pthread_mutex_unlock(&r->lock);
        }
        atomic_fetch_add(&p->outcomes[PX_PREFILL_ONLY], 1);
        conclude(p, r, -1);
        return;
    }
    if (decide(p, r) < 0) {
        conclude(p, r, -1);
        return;
    }
    start_decode(p, r);
}

/* How the upstream transfer ended, as the client's status: 504 for
 * silence past --upstream-timeout, 502 for any other failure or a non-2xx
 * answer, 0 for success. */
static int upstream_failed(xfer *x, up_result res, int status, const char *msg, char *why,
                           size_t n, const char *what, const char *url)
{
    if (res == UP_TIMED_OUT) {
        snprintf(why, n, "%s %s did not answer in time (--upstream-timeout)", what, url);
        return 504;
    }
    if (res != UP_OK) {
        snprintf(why, n, "%s %s: %s", what, url, msg);
        return 502;
    }
    if (status < 200 || status >= 300) {
        snprintf(why, n, "%s %s answered HTTP %d: %.200s", what, url, status,
                 x->resp.s ? x->resp.s : "");
        return 502;
    }
    return 0;
}

static void transfer_done(proxy_t *p, xfer *x, up_result res, int code, const char *msg)
{
    pxreq *r = x->r;
    char why[600];
    if (x->role == ROLE_RELEASE || !r) {
        xfer_free(p, x);
        return;
    }
    r->up = NULL;
    if (x->role == ROLE_PREFILL) {
        atomic_fetch_sub(&p->prefill_load[x->upstream], 1);
        int status = upstream_failed(x, res, code, msg, why, sizeof why, "prefill",
                                     p->prefill[x->upstream]);
        if (status) {
            fail(r, status, "%s", why);
            conclude(p, r, -1);
        } else {
            after_prefill(p, r, x);
        }
        xfer_free(p, x);
        return;
    }
    /* the decode answer is over: the request leaves its worker */
    pthread_mutex_lock(&r->lock);
    int gone = r->gone;
    pthread_mutex_unlock(&r->lock);
    int status = upstream_failed(x, res, code, msg, why, sizeof why, "decode",
                                 p->decode[x->upstream]);
    if (gone) {
        atomic_fetch_add(&p->outcomes[PX_CLIENT_GONE], 1);
    } else if (status) {
        fail(r, status, "%s", why);
        /* nothing reached the decoder: the KV is released through another */
        if (res == UP_CONNECT)
            r->decode_sent = 0;
    } else {
        pthread_mutex_lock(&r->lock);
        if (r->streaming) {
            r->out_done = 1;
        } else {
            r->status = 200;
            r->body = x->resp.s ? x->resp.s : strdup("");
            r->body_len = x->resp.len;
            x->resp.s = NULL;
            r->ready = 1;
        }
        wake(r);
        pthread_mutex_unlock(&r->lock);
        atomic_fetch_add(&p->outcomes[PX_OK], 1);
    }
    conclude(p, r, x->upstream);
    xfer_free(p, x);
}

static void start_prefill(proxy_t *p, pxreq *r, char *body)
{
    r->up = body ? xfer_start(p, ROLE_PREFILL, r->prefill, r->path, body, r, r->prefill, 0)
                 : NULL;
    if (!r->up) {
        atomic_fetch_sub(&p->prefill_load[r->prefill], 1);
        fail(r, 503, "cannot start the prefill request (out of memory)");
        conclude(p, r, -1);
    }
}

/* The client left: stop what is upstream. */
static void cancel(proxy_t *p, pxreq *r)
{
    pthread_mutex_lock(&r->lock);
    int concluded = r->concluded;
    pthread_mutex_unlock(&r->lock);
    if (!concluded) {
        xfer *x = r->up;
        r->up = NULL;
        if (x) {
            if (x->role == ROLE_PREFILL)
                atomic_fetch_sub(&p->prefill_load[x->upstream], 1);
            xfer_free(p, x);
        }
        atomic_fetch_add(&p->outcomes[PX_CLIENT_GONE], 1);
        conclude(p, r, -1);
    }
    unref(r);   /* the cancel queue's reference */
}

/* Upstreams silent for --upstream-timeout seconds (no answer yet, or no
 * stream chunk since) are cut: 504. */
static void cut_silent(proxy_t *p, double now)
{
    double limit = p->d->o->upstream_timeout;
    xfer *x = p->active;
    while (x) {
        xfer *next = x->next;
        if (x->r && now - x->last > limit)
            transfer_done(p, x, UP_TIMED_OUT, 0, "");   /* frees x */
        x = next;
    }
}

/* libmicrohttpd's turn: accept, read, call on_request, send what is
 * ready (its epoll fd was readable, or its timeouts are due). */
static void run_http(void *cls)
{
    proxy_t *p = cls;
    atomic_store(&p->resumed, 0);
    MHD_run(p->mhd);
    p->mhd_ran = state_mono_now();
}

/* Stop accepting (SIGTERM), on the loop's thread, which owns the daemon. */
static void quiesce_here(proxy_t *p)
{
    MHD_socket fd = MHD_quiesce_daemon(p->mhd);
    pthread_mutex_lock(&p->lock);
    p->quiesce = 0;
    p->quiesced = 1;
    p->listen_fd = fd;
    pthread_cond_broadcast(&p->quiet);
    pthread_mutex_unlock(&p->lock);
}

/* The one event loop of proxy mode: libmicrohttpd (its epoll fd, watched
 * by the upstream client) and every upstream transfer, on one thread. A
 * proxied request then never crosses threads: no wakeup, no lock taken
 * twice, no context switch between the client's side and upstream's. */
static void *upstream_main(void *arg)
{
    proxy_t *p = arg;
    double checked = state_mono_now();
    p->mhd_ran = checked;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        pxreq *fresh = p->new_head, *gone = p->cancel_head;
        p->new_head = p->new_tail = p->cancel_head = NULL;
        int stop = p->stop, quiesce = p->quiesce;
        pthread_mutex_unlock(&p->lock);
        while (fresh) {
            pxreq *next = fresh->next_new;
            char *body = pm_prefill_body(&fresh->client, fresh->id);
            start_prefill(p, fresh, body);
            fresh = next;
        }
        while (gone) {
            pxreq *next = gone->next_cancel;
            cancel(p, gone);
            gone = next;
        }
        if (quiesce)
            quiesce_here(p);
        if (stop)
            break;
        double now = state_mono_now();
        if (now - checked >= IDLE_CHECK_S) {
            cut_silent(p, now);
            checked = now;
        }
        /* libmicrohttpd's own clock: 0 when it has work its epoll fd will
         * not signal again (edge-triggered connections still ready) */
        MHD_UNSIGNED_LONG_LONG due = IDLE_CHECK_S * 1000;
        if (MHD_get_timeout(p->mhd, &due) != MHD_YES)
            due = IDLE_CHECK_S * 1000;
        if (due == 0 || now - p->mhd_ran >= IDLE_CHECK_S) {
            run_http(p);
            if (MHD_get_timeout(p->mhd, &due) != MHD_YES)
                due = IDLE_CHECK_S * 1000;
        }
        int wait = due < IDLE_CHECK_S * 1000 ? (int)due : (int)(IDLE_CHECK_S * 1000);
        /* what libmicrohttpd just queued (proxy_begin, proxy_release run
         * inside run_http, on this thread) is taken next round, at once;
         * other threads (stop, quiesce, the side thread) wake the loop */
        pthread_mutex_lock(&p->lock);
        int pending = p->new_head || p->cancel_head || p->stop || p->quiesce;
        pthread_mutex_unlock(&p->lock);
        upc_run(p->up, pending ? 0 : wait);   /* the callbacks run here */
        if (atomic_load(&p->resumed))
            run_http(p);   /* answers are ready: out they go, now */
    }
    /* shutting down: every request still upstream fails with 503 */
    while (p->active) {
        xfer *x = p->active;
        pxreq *r = x->r;
        if (r) {
            r->up = NULL;
            if (x->role == ROLE_PREFILL)
                atomic_fetch_sub(&p->prefill_load[x->upstream], 1);
            fail(r, 503, "eldrd is shutting down");
        }
        xfer_free(p, x);
        if (r)
            conclude(p, r, -1);
    }
    return NULL;
}

/* ---- the HTTP side ---------------------------------------------------- */

static int id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= RB_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

pxreq *proxy_begin(proxy_t *p, struct MHD_Connection *c, const char *body, size_t len,
                   int chat, const char *request_id, rb_err *e)
{
    if (atomic_load(&p->stopped)) {
        rb_fail(e, 503, "proxy", "eldrd is draining (shutting down): send this request "
                "through another router");
        return NULL;
    }
    if (request_id && !id_ok(request_id)) {
        atomic_fetch_add(&p->outcomes[PX_BAD_REQUEST], 1);
        rb_fail(e, 400, "X-Request-Id", "X-Request-Id must be 1 to %d printable ASCII "
                "characters without spaces", RB_ID_MAX - 1);
        return NULL;
    }
    pxreq *r = calloc(1, sizeof *r);
    if (!r) {
        rb_fail(e, 503, "proxy", "out of memory");
        return NULL;
    }
    if (pm_client_parse(body, len, chat ? PM_CHAT : PM_COMPLETIONS, &r->client, e) < 0) {
        atomic_fetch_add(&p->outcomes[PX_BAD_REQUEST], 1);
        free(r);
        return NULL;
    }
    r->client.protocol = p->d->o->pd_vllm ? PM_VLLM : PM_ELDR;
    pthread_mutex_init(&r->lock, NULL);
    atomic_init(&r->refs, 2);    /* the connection and the upstream thread */
    r->p = p;
    r->conn = c;
    r->worker = -1;
    r->path = chat ? "/v1/chat/completions" : "/v1/completions";
    if (request_id)
        rb_copy_id(r->id, sizeof r->id, request_id);
    else
        snprintf(r->id, sizeof r->id, "px-%llx-%llu", p->boot,
                 (unsigned long long)atomic_fetch_add(&p->seq, 1) + 1);
    int64_t loads[256];
    int n = p->n_prefill < 256 ? p->n_prefill : 256;
    for (int i = 0; i < n; i++)
        loads[i] = atomic_load(&p->prefill_load[i]);
    r->prefill = pring_pick(&p->ring, r->client.key, r->client.key_len, loads);
    atomic_fetch_add(&p->prefill_load[r->prefill], 1);
    atomic_fetch_add(&p->open, 1);
    pthread_mutex_lock(&p->lock);
    if (p->new_tail)
        p->new_tail->next_new = r;
    else
        p->new_head = r;
    p->new_tail = r;
    pthread_mutex_unlock(&p->lock);
    return r;   /* queued on the loop's own thread: no wakeup */
}

void proxy_poll(pxreq *r, px_answer *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_lock(&r->lock);
    if (r->ready) {
        a->ready = 1;
        a->status = r->status;
        if (r->streaming) {
            a->stream = 1;
            a->content_type = "text/event-stream";
            atomic_fetch_add(&r->refs, 1);   /* the reader's */
        } else {
            a->body = r->body;
            a->len = r->body_len;
            a->content_type = "application/json";
            r->body = NULL;
        }
    } else if (r->conn) {
        r->suspended = 1;
        MHD_suspend_connection(r->conn);
    }
    pthread_mutex_unlock(&r->lock);
}

ssize_t proxy_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    pxreq *r = cls;
    ssize_t n = 0;
    pthread_mutex_lock(&r->lock);
    if (r->out_off < r->out.len) {
        size_t avail = r->out.len - r->out_off;
        size_t take = avail < max ? avail : max;
        memcpy(buf, r->out.s + r->out_off, take);
        r->out_off += take;
        n = (ssize_t)take;
    } else if (r->out_done) {
        n = r->out_error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    } else if (r->conn) {
        /* nothing yet: wait for the decoder's next chunk */
        r->suspended = 1;
        MHD_suspend_connection(r->conn);
    } else {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

void proxy_stream_free(void *cls)
{
    unref(cls);
}

void proxy_release(pxreq *r, int client_gone)
{
    proxy_t *p = r->p;
    pthread_mutex_lock(&r->lock);
    r->conn = NULL;
    r->suspended = 0;
    int cancel_it = client_gone && !r->concluded && !r->gone;
    if (cancel_it)
        r->gone = 1;
    pthread_mutex_unlock(&r->lock);
    if (cancel_it) {
        atomic_fetch_add(&r->refs, 1);   /* the cancel queue's */
        pthread_mutex_lock(&p->lock);
        int queued = !p->stop;           /* a stopped thread failed it already */
        if (queued) {
            r->next_cancel = p->cancel_head;
            p->cancel_head = r;
        }
        pthread_mutex_unlock(&p->lock);
        if (!queued)
            unref(r);   /* a stopped loop failed it already */
    }
    unref(r);
}

/* ---- life ------------------------------------------------------------- */

proxy_t *proxy_start(eldrd_t *d, char *err, size_t errlen)
{
    proxy_t *p = calloc(1, sizeof *p);
    if (!p) {
        eldr_errf(err, errlen, "out of memory");
        return NULL;
    }
    p->d = d;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->quiet, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    p->boot = (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
    if (split_urls(d->o->prefill_urls, "--prefill", &p->prefill, &p->n_prefill, err, errlen) <
            0 ||
        split_urls(d->o->decode_urls, "--decode", &p->decode, &p->K, err, errlen) < 0) {
        proxy_free(p);
        return NULL;
    }
    if (p->K != d->K) {
        eldr_errf(err, errlen, "--decode lists %d URL%s; the model routes to K = %d decode "
                  "workers (one URL each, in worker order)", p->K, p->K == 1 ? "" : "s", d->K);
        proxy_free(p);
        return NULL;
    }
    if (p->n_prefill > 256) {
        eldr_errf(err, errlen, "--prefill: %d URLs; at most 256", p->n_prefill);
        proxy_free(p);
        return NULL;
    }
    p->prefill_load = calloc((size_t)p->n_prefill, sizeof *p->prefill_load);
    if (!p->prefill_load ||
        pring_init(&p->ring, (const char *const *)p->prefill, p->n_prefill) < 0) {
        eldr_errf(err, errlen, "out of memory");
        proxy_free(p);
        return NULL;
    }
    if (!(p->up = upc_new(err, errlen))) {
        proxy_free(p);
        return NULL;
    }
    for (int i = 0; i < p->n_prefill + p->K; i++) {
        int pre = i < p->n_prefill;
        const char *url = pre ? p->prefill[i] : p->decode[i - p->n_prefill];
        char why[300];
        if (upc_origin(p->up, url, why, sizeof why) < 0) {
            eldr_errf(err, errlen, "%s: %s", pre ? "--prefill" : "--decode", why);
            proxy_free(p);
            return NULL;
        }
    }
    return p;
}

void proxy_resumed(proxy_t *p)
{
    atomic_store(&p->resumed, 1);
    upc_wakeup(p->up);
}

int proxy_attach(proxy_t *p, struct MHD_Daemon *mhd, char *err, size_t errlen)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD);
    p->mhd = mhd;
    if (!info || upc_watch(p->up, info->epoll_fd, run_http, p) < 0)
        return eldr_errf(err, errlen, "proxy mode: cannot watch libmicrohttpd's epoll fd");
    if (pthread_create(&p->thread, NULL, upstream_main, p) != 0)
        return eldr_errf(err, errlen, "proxy mode: cannot start the event loop thread");
    p->thread_on = 1;
    return 0;
}

int proxy_quiesce(proxy_t *p)
{
    pthread_mutex_lock(&p->lock);
    if (!p->thread_on) {
        pthread_mutex_unlock(&p->lock);
        return p->mhd ? MHD_quiesce_daemon(p->mhd) : MHD_INVALID_SOCKET;
    }
    p->quiesce = 1;
    pthread_mutex_unlock(&p->lock);
    upc_wakeup(p->up);
    pthread_mutex_lock(&p->lock);
    while (!p->quiesced)
        pthread_cond_wait(&p->quiet, &p->lock);
    MHD_socket fd = p->listen_fd;
    pthread_mutex_unlock(&p->lock);
    return fd;
}

void proxy_stop(proxy_t *p)
{
    if (!p)
        return;
    atomic_store(&p->stopped, 1);
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    if (p->thread_on) {
        upc_wakeup(p->up);
        pthread_join(p->thread, NULL);
        p->thread_on = 0;
        /* the loop is gone: the 503s of what it failed go out from here */
        for (int i = 0; i < 3; i++)
            MHD_run(p->mhd);
    }
}

void proxy_free(proxy_t *p)
{
    if (!p)
        return;
    proxy_stop(p);
    upc_free(p->up);
    pring_free(&p->ring);
    free(p->prefill_load);
    free_urls(p->prefill, p->n_prefill);
    free_urls(p->decode, p->K);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->quiet);
    free(p);
}

void proxy_metrics(proxy_t *p, strbuf *b)
{
    sb_printf(b, "# HELP eldr_proxy_requests_total Proxied requests by how they ended.\n"
                 "# TYPE eldr_proxy_requests_total counter\n");
    for (int o = 0; o < PX_N_OUTCOMES; o++)
        sb_printf(b, "eldr_proxy_requests_total{outcome=\"%s\"} %llu\n", outcome_names[o],
                  (unsigned long long)atomic_load(&p->outcomes[o]));
    sb_printf(b, "# HELP eldr_proxy_no_signature_total Proxied requests whose prefill answer "
                 "had no eldr_sig (a stock engine): routed to the least loaded worker.\n"
                 "# TYPE eldr_proxy_no_signature_total counter\n"
                 "eldr_proxy_no_signature_total %llu\n",
              (unsigned long long)atomic_load(&p->no_signature));
    sb_printf(b, "# HELP eldr_proxy_open Proxied requests not yet over upstream.\n"
                 "# TYPE eldr_proxy_open gauge\neldr_proxy_open %lld\n",
              (long long)atomic_load(&p->open));
    sb_printf(b, "# HELP eldr_proxy_prefill_inflight Requests at each prefill instance.\n"
                 "# TYPE eldr_proxy_prefill_inflight gauge\n");
    for (int i = 0; i < p->n_prefill; i++) {
        sb_printf(b, "eldr_proxy_prefill_inflight{prefill=\"");
        sb_label(b, p->prefill[i]);
        sb_printf(b, "\"} %lld\n", (long long)atomic_load(&p->prefill_load[i]));
    }
}
