/* proxy.c - eldrd in the request path (proxy.h). */
#include "proxy.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "decide.h"
#include "err.h"
#include "log.h"
#include "probe.h"
#include "proxy_msg.h"
#include "upstream.h"

#define UPSTREAM_BODY_MAX (64LL << 20)   /* a non-streamed upstream answer */

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

#define PX_N_PHASES 4

static const char *const outcome_names[PX_N_OUTCOMES] = {
    "ok", "prefill_only", "bad_request", "upstream_error", "upstream_timeout", "client_gone",
    "refused"};

typedef struct pxreq pxreq;

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
    int relayed;                 /* its bytes went to the client: no retry */
    int paused;                  /* not read: the client has stream_buffer unread */
    int sse_checked;             /* a stream's first bytes were seen to be SSE */
    int too_big;                 /* its answer passed UPSTREAM_BODY_MAX */
    double last;                 /* monotonic seconds of its last bytes (or start) */
    ev_timer silence;            /* the running time limit (limit_of), from last */
    int heard;                   /* its first byte came */
    const char *timed_out;       /* the option of the limit it passed */
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
    int failed;                  /* fail() answered it: its route ends failed */
    int decode_sent;
    char *auth;                  /* the client's Authorization, forwarded; NULL: none */
    int retried_prefill, retried_decode;   /* one retry each, before the first byte */
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
    engine_t *d;
    pool *pool;                  /* the engine's: prefill ring and loads, health */
    evloop *loop;                /* everything below runs on its thread */
    http_server *http;           /* connections are suspended and resumed there */
    upc *up;                     /* origins: the prefill URLs, then the decode URLs */
    probe_t *probe;              /* --health-interval, else NULL */
    ev_hook turn;                /* takes the queues below */
    pthread_mutex_t lock;        /* the queues and stop */
    pxreq *new_head, *new_tail, *cancel_head;
    int stop;
    atomic_int stopped;          /* refuse new requests */
    pthread_cond_t quiet;        /* proxy_stop's handshake with the loop */
    int failed_all;
    int n_prefill;
    int K;
    xfer *active;
    atomic_ullong seq;
    unsigned long long boot;
    atomic_ullong outcomes[PX_N_OUTCOMES];
    atomic_ullong timeouts[PX_N_PHASES];   /* transfers cut at a limit, by phase */
    atomic_ullong no_signature;
    atomic_ullong signal[3];     /* decisions by the signal's source: eldr_sig, routed
                                  * experts, none */
    atomic_ullong retries[2];    /* by role: prefill, decode */
    atomic_llong open;           /* requests between begin and conclusion */
    /* "Bearer KEY" from --upstream-api-key-file, else "" (the client's own
     * Authorization goes upstream). A secret: never in a log or an error. */
    char up_auth[AUTH_TOKEN_MAX + 8];
};

/* ---- requests: references and the client side --------------------------- */

static void unref(pxreq *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    pm_client_free(&r->client);
    pm_prefill_free(&r->pre);
    free(r->auth);
    free(r->body);
    free(r->out.s);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Resume the connection if it waits for us (r->lock held). libmicrohttpd
 * runs on the loop: it takes the connection back at the end of this turn
 * (http.h). */
static void wake(pxreq *r)
{
    if (r->suspended && r->conn) {
        r->suspended = 0;
        http_resume(r->p->http, r->conn);
    }
}

static int out_append(pxreq *r, const char *s, size_t n)
{
    if (r->out_off == r->out.len)
        r->out_off = r->out.len = 0;   /* all read: start over at the front */
    sb_put(&r->out, s, n);
    return r->out.oom ? -1 : 0;
}

static char *error_json(int status, const char *where, const char *msg, size_t *len)
{
    json_t *j = http_error_json(status, where, msg);
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
    r->failed = 1;
    pthread_mutex_lock(&r->lock);
    if (r->streaming && !r->ready) {
        /* a stream held for its decoder (--stream-start decoder): nothing
         * went out, so the failure is a status, not an error event */
        r->streaming = 0;
        r->out.len = r->out_off = 0;
        r->out_done = 0;
    }
    if (r->streaming) {
        /* OpenAI's error object, as its clients read an SSE error event */
        json_t *j = http_error_json(status, NULL, msg);
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
        r->body = error_json(status, "upstream", msg, &r->body_len);
        r->ready = 1;
    }
    wake(r);
    pthread_mutex_unlock(&r->lock);
}

/* ---- the upstream thread ---------------------------------------------- */

static int collect(xfer *x, const char *data, size_t n)
{
    x->last = mono_now();
    if ((long long)(x->resp.len + n) > UPSTREAM_BODY_MAX) {
        x->too_big = 1;
        return -1;
    }
    sb_put(&x->resp, data, n);
    return x->resp.oom ? -1 : 0;
}

/* Does a stream begin as SSE (a field, a comment, or blank lines)? A
 * decoder that answers a stream with JSON or text is an error, which
 * the client must get as an SSE error event, not as raw bytes. */
static int looks_sse(const char *d, size_t n)
{
    size_t i = 0;
    while (i < n && (d[i] == '\n' || d[i] == '\r'))
        i++;
    if (i == n)
        return 1;   /* only line ends so far: not yet known, take it */
    static const char *const fields[] = {"data:", "event:", "id:", "retry:", ":"};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        size_t l = strlen(fields[f]);
        size_t m = n - i < l ? n - i : l;
        if (!memcmp(d + i, fields[f], m))
            return 1;
    }
    return 0;
}

/* A streamed decode: chunks go to the client as they come. An error
 * status is collected instead, for the message. When the client leaves
 * stream_buffer bytes unread the decoder is not read until it drains
 * (proxy_stream_read resumes it): a client that stops reading costs that
 * much, not the whole stream. */
static int relay(xfer *x, const char *data, size_t n)
{
    pxreq *r = x->r;
    x->last = mono_now();
    if (!x->sse_checked) {
        if (!looks_sse(data, n)) {
            x->code_ok = 0;   /* collected and failed at its end, as an error */
            return collect(x, data, n);
        }
        x->sse_checked = 1;
    }
    x->relayed = 1;
    pthread_mutex_lock(&r->lock);
    if (!r->streaming) {   /* stock vLLM: the decoder's stream is the whole answer */
        r->streaming = 1;
        r->status = 200;
        r->ready = 1;
    }
    int ok = !r->gone && out_append(r, data, n) == 0;
    int full = (long long)(r->out.len - r->out_off) >= x->p->d->o->stream_buffer;
    if (ok)
        wake(r);
    pthread_mutex_unlock(&r->lock);
    if (ok && full && x->ux) {
        x->paused = 1;
        upc_pause(x->p->up, x->ux);
    }
    return ok ? 0 : -1;   /* -1 aborts the transfer: the client is gone */
}

static double limit_of(const xfer *x, const char **option);

static void on_status(void *cls, int status)
{
    xfer *x = cls;
    x->code_ok = status >= 200 && status < 300;
    x->heard = 1;
    pxreq *r = x->r;
    if (x->role == ROLE_DECODE && x->code_ok && r) {
        /* the decoder answered: a stream held for it starts */
        pthread_mutex_lock(&r->lock);
        if (r->streaming && !r->ready) {
            r->ready = 1;
            wake(r);
        }
        pthread_mutex_unlock(&r->lock);
    }
    x->last = mono_now();
    /* the first byte's limit is over; the silence limit may be shorter */
    const char *option;
    evloop_timer_start(x->p->loop, &x->silence, limit_of(x, &option));
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
    evloop_timer_stop(p->loop, &x->silence);
    free(x->body);
    free(x->resp.s);
    free(x);
}

/* The limit running for x now, and its option: to connect; then the
 * first byte, a prefill's (its whole answer) or a decoder's; then the
 * silence between bytes once they flow (docs/reliability.md, "Timeouts"). */
static double limit_of(const xfer *x, const char **option)
{
    const eldrd_opts *o = x->p->d->o;
    if (!x->ux || !upc_connected(x->ux)) {
        *option = "--connect-timeout";
        return o->connect_timeout;
    }
    if (!x->heard) {
        *option = x->role == ROLE_PREFILL ? "--prefill-timeout" : "--decode-timeout";
        return x->role == ROLE_PREFILL ? o->prefill_timeout : o->decode_timeout;
    }
    *option = "--stream-idle-timeout";
    return o->stream_idle_timeout;
}

/* The phases of limit_of, as eldr_proxy_timeouts_total and the
 * snapshot's failures.timeouts name them. */
static const char *const phase_names[PX_N_PHASES] = {"connect", "prefill", "decode", "idle"};

static int phase_of(const char *option)
{
    return !strcmp(option, "--connect-timeout")  ? 0
         : !strcmp(option, "--prefill-timeout") ? 1
         : !strcmp(option, "--decode-timeout")  ? 2 : 3;
}

/* An upstream past its limit (limit_of) is cut: 504, retried elsewhere
 * before its first byte. The timer is moved only when it fires (bytes
 * just note their time), and re-armed when the limit changes (the first
 * byte came: the silence limit may be the shorter). */
static void silent(evloop *l, ev_timer *t)
{
    xfer *x = t->cls;
    const char *option;
    double limit = limit_of(x, &option), idle = mono_now() - x->last;
    if (x->paused)
        idle = 0;   /* waiting for the client, not for the upstream */
    if (idle < limit) {
        evloop_timer_start(l, t, limit - idle);
        return;
    }
    x->timed_out = option;
    atomic_fetch_add(&x->p->timeouts[phase_of(option)], 1);
    transfer_done(x->p, x, UP_TIMED_OUT, 0, "");   /* frees x */
}

/* POST body (taken over) to an upstream: origin is its index in the
 * client (the prefill URLs, then the decode URLs), upstream its index in
 * its own list. NULL when it cannot start. */

static xfer *xfer_start(proxy_t *p, role role, int origin, const char *path, char *body,
                        pxreq *r, const char *client_auth, int upstream, int stream)
{
    xfer *x = calloc(1, sizeof *x);
    if (!x) {
        free(body);
        return NULL;
    }
    x->role = role;
    x->p = p;
    x->silence.slot = -1;
    x->body = body;
    x->r = r;
    x->upstream = upstream;
    x->stream = stream;
    const char *auth = p->up_auth[0] ? p->up_auth : client_auth;
    x->ux = upc_post_auth(p->up, origin, path, r ? r->id : NULL, auth, body, strlen(body),
                          &xfer_handler, x);
    if (!x->ux) {
        xfer_free(p, x);
        return NULL;
    }
    x->last = mono_now();
    if (r) {
        evloop_timer_init(&x->silence, silent, x);
        /* first at the earlier of the connect and the first-byte limits:
         * a connection made at once leaves the first byte's running */
        const eldrd_opts *o = p->d->o;
        double first = role == ROLE_PREFILL ? o->prefill_timeout : o->decode_timeout;
        evloop_timer_start(p->loop, &x->silence,
                           o->connect_timeout < first ? o->connect_timeout : first);
    }
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
    xfer_start(p, ROLE_RELEASE, p->n_prefill + k, "/v1/kv_transfer/release", body, NULL,
               r->auth, k, 0);
}

/* The route of r is over at its worker, once: finished, or failed (a
 * request answered with an error is not a finished one). */
static void end_route(proxy_t *p, pxreq *r, int failed)
{
    if (!r->routed || r->finished)
        return;
    rb_err e;
    int w;
    (failed ? state_fail : state_finish)(p->d->st, r->id, &w, &e);
    r->finished = 1;
}

/* The request is over upstream: finish its route, release KV that no
 * decode will take, and drop the upstream thread's reference. */
static void conclude(proxy_t *p, pxreq *r, int avoid)
{
    end_route(p, r, r->failed);
    /* the prefill answered: it holds the KV. Only the authors' fork has a
     * release route; stock vLLM frees the blocks itself once its abort
     * timeout (VLLM_NIXL_ABORT_REQUEST_TIMEOUT) passes with no decode. */
    if (r->pre.text && !r->decode_sent && !p->d->o->pd_vllm)
        release_kv(p, r, avoid);
    pthread_mutex_lock(&r->lock);
    r->concluded = 1;
    pthread_mutex_unlock(&r->lock);
    atomic_fetch_sub(&p->open, 1);
    unref(r);
}

/* The signature cache of prefill instance i: the --prefill-workers name
 * of the same place, else the first. Sharing one is exact (a block's
 * counts follow from its tokens alone); one each mirrors each engine's
 * evictions (docs/eldrd.md, "Stock engines"). */
static int cache_of(const proxy_t *p, int i)
{
    return i >= 0 && i < p->d->n_caches ? i : 0;
}

/* The signal of a prefill answer without eldr_sig: its routed experts
 * (a stock engine), for a count model; u says where it came from. 1
 * with counts, 0 none. */
static int stock_signal(proxy_t *p, pxreq *r, int gate, uint16_t *counts, cache_use *u)
{
    memset(u, 0, sizeof *u);
    u->prefill = cache_of(p, r->prefill);
    u->owned = 1;
    if (gate) {
        snprintf(u->note, sizeof u->note, "a gate model needs eldr_sig: routed experts give "
                 "counts only");
        return 0;
    }
    int rc = decide_stock_counts(p->d, u->prefill, r->pre.text, r->pre.text_len, counts, u);
    return rc;
}

/* Decide the decode worker from the prefill's eldr_sig, else its routed
 * experts: the same path as POST /v1/route. The served model says how to
 * read it: counts, or gate values for a gate model (its variant can
 * change with a hot swap). */
static int decide(proxy_t *p, pxreq *r, int except)
{
    char why[256];
    size_t cells = (size_t)p->d->L * (size_t)p->d->E;
    mref_t *m = mholder_get(&p->d->model);
    int gate = sig_variant_uses_gate(m->m->recipe.variant);
    uint16_t *counts_buf = gate ? NULL : malloc(cells * sizeof *counts_buf);
    float *gates_buf = gate ? malloc(cells * sizeof *gates_buf) : NULL;
    uint16_t *counts = counts_buf;
    float *gates = gates_buf;
    route_out *o = malloc(sizeof *o);
    uint8_t ok[ROUTE_MAX_WORKERS];
    int rc = -1;
    if ((!counts && !gates) || !o) {
        fail(r, 503, "out of memory");
    } else if (decide_read_sig(p->d, m, r->pre.sig, r->pre.sig_len, counts, gates, why,
                               sizeof why) < 0) {
        fail(r, 502, "%s", why);
    } else {
        rb_err e;
        int nosig = 0;
        cache_use u = {.prefill = -1, .origin = SIG_ORIGIN_ELDR_SIG, .owned = 1};
        if (!r->pre.sig && !stock_signal(p, r, gate, counts, &u))
            counts = NULL, gates = NULL;   /* no signal: the no-signature rule, noted */
        if (route_request(p->d, m, r->id, counts, gates, u.prefill, &u,
                          pool_decode_eligible(p->pool, mono_now(), except, ok), except, o,
                          &nosig, &e) < 0) {
            fail(r, e.status, "%s (%s)", e.error, e.where);
        } else {
            r->worker = o->d.worker;
            r->routed = 1;
            if (nosig)
                atomic_fetch_add(&p->no_signature, 1);
            atomic_fetch_add(&p->signal[nosig ? 2 : r->pre.sig ? 0 : 1], 1);
            rc = 0;
        }
    }
    mref_put(m);
    free(counts_buf);
    free(gates_buf);
    free(o);
    return rc;
}

static void start_decode(proxy_t *p, pxreq *r)
{
    char *body = pm_decode_body(&r->client, &r->pre, r->id);
    r->up = body ? xfer_start(p, ROLE_DECODE, p->n_prefill + r->worker, r->path, body, r,
                              r->auth, r->worker, r->client.stream)
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
        fail(r, 502, "prefill %s: %s", p->pool->prefill[x->upstream].name, why);
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
        /* the first token is kept from here; it goes out (with the status)
         * once the decoder answered (--stream-start decoder), or at once,
         * before the decision and the KV transfer (prefill: neither may
         * move the client's time to first token) */
        size_t n;
        char *ev = pm_first_events(&r->pre, &r->client, &n);
        pthread_mutex_lock(&r->lock);
        r->streaming = 1;
        r->status = 200;
        if (ev)
            out_append(r, ev, n);
        if (!r->pre.continues)
            r->out_done = 1;
        r->ready = p->d->o->stream_at_prefill || !r->pre.continues;
        if (r->ready)
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
            r->body = a ? a : error_json(503, "proxy", "out of memory", &n);
            r->body_len = n;
            r->ready = 1;
            wake(r);
            pthread_mutex_unlock(&r->lock);
        }
        atomic_fetch_add(&p->outcomes[PX_PREFILL_ONLY], 1);
        conclude(p, r, -1);
        return;
    }
    if (decide(p, r, -1) < 0) {
        conclude(p, r, -1);
        return;
    }
    start_decode(p, r);
}

/* What the limit x passed means, for messages. */
static const char *timeout_what(const xfer *x)
{
    if (!x->timed_out)
        return "no answer in time";
    return !strcmp(x->timed_out, "--connect-timeout") ? "no connection in time"
         : !strcmp(x->timed_out, "--stream-idle-timeout")
               ? "silent too long between the bytes of its answer"
               : "no answer in time";
}

/* How the upstream transfer ended, as the client's status: 504 for
 * silence past --upstream-timeout, 502 for any other failure or a non-2xx
 * answer, 0 for success. */
static int upstream_failed(xfer *x, up_result res, int status, const char *msg, char *why,
                           size_t n, const char *what, const char *url)
{
    if (res == UP_TIMED_OUT) {
        snprintf(why, n, "%s %s: %s (%s)", what, url, timeout_what(x), x->timed_out);
        return 504;
    }
    if (res == UP_ABORTED && x->too_big) {
        snprintf(why, n, "%s %s: its answer is over the %lld MiB limit of an answer eldrd "
                 "reads whole (a non-streamed answer)", what, url, UPSTREAM_BODY_MAX >> 20);
        return 502;
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
    if (x->stream && !x->sse_checked && x->resp.len) {
        snprintf(why, n, "%s %s answered a stream with text that is not SSE: %.200s", what,
                 url, x->resp.s);
        return 502;
    }
    return 0;
}

/* Was it the instance's fault? No connection, a reset or an unreadable
 * answer, silence, or a 5xx before any byte went to the client; after
 * it, a reset, a truncated or malformed chunk, or silence: a stream the
 * instance broke midway counts toward its ejection like a failure before
 * it (Envoy's outlier detection on consecutive gateway errors), though it
 * cannot be retried. A 4xx is the request's fault; a client that left is
 * nobody's. */
static int instance_fault(const xfer *x, up_result res, int code)
{
    if (x->relayed)
        return res == UP_IO || res == UP_PROTOCOL || res == UP_TIMED_OUT;
    if (res == UP_OK)
        return code >= 500;
    return res == UP_CONNECT || res == UP_IO || res == UP_PROTOCOL || res == UP_TIMED_OUT;
}

static void start_prefill(proxy_t *p, pxreq *r, char *body);
static void start_decode(proxy_t *p, pxreq *r);

/* May r be sent once more for this role? Not twice, not while eldrd
 * stops, not with nowhere else to go (n instances), not for a client that
 * left. Counts the retry when it may. */
static int may_retry(proxy_t *p, pxreq *r, int *retried, pool_role role, int n)
{
    if (*retried || atomic_load(&p->stopped) || n < 2)
        return 0;
    pthread_mutex_lock(&r->lock);
    int gone = r->gone;
    pthread_mutex_unlock(&r->lock);
    if (gone)
        return 0;
    *retried = 1;
    atomic_fetch_add(&p->retries[role], 1);
    return 1;
}

/* A prefill that failed before the first byte: once more on the ring's
 * next instance (the failed one excluded). 1 when retried. */
static int retry_prefill(proxy_t *p, pxreq *r, int failed)
{
    if (!may_retry(p, r, &r->retried_prefill, POOL_PREFILL, p->n_prefill))
        return 0;
    r->prefill = pool_prefill_acquire(p->pool, r->client.key, r->client.key_len, mono_now(),
                                      failed);
    start_prefill(p, r, pm_prefill_body(&r->client, r->id));
    return 1;
}

/* A decode that failed before its first byte reached the client: the
 * route is finished and decided again without that worker (the next best
 * of the band), with the same handoff. 1 when retried (or failed there). */
static int retry_decode(proxy_t *p, pxreq *r, int failed)
{
    if (!may_retry(p, r, &r->retried_decode, POOL_DECODE, p->K))
        return 0;
    end_route(p, r, 1);   /* it failed there (decode_done said so); tried elsewhere */
    r->routed = r->finished = 0;
    if (decide(p, r, failed) < 0) {
        r->decode_sent = 0;   /* the KV goes back through another decoder */
        conclude(p, r, failed);
        return 1;
    }
    start_decode(p, r);
    return 1;
}

/* Tell the pool what instance i did for request id; log a failure after
 * the first byte (the client saw a broken stream) and an ejection, each
 * naming the request and the instance. */
static void report(proxy_t *p, pool_role role, int i, const xfer *x, int fault, up_result res,
                   int code, const char *msg, const char *id)
{
    if (res == UP_ABORTED)
        return;   /* eldrd stopped reading it (the client left, or too big) */
    const char *what = role == POOL_PREFILL ? "prefill" : "decode";
    const char *url = role == POOL_PREFILL ? p->pool->prefill[i].name : p->pool->decode[i].name;
    char tw[96];
    if (res == UP_TIMED_OUT) {   /* the limit it passed says what happened */
        snprintf(tw, sizeof tw, "%s (%s)", timeout_what(x), x->timed_out ? x->timed_out : "");
        msg = tw;
    }
    if (fault && x->relayed)
        log_msg("request %s: %s %s failed mid-stream (%s): the client's stream ends with an "
                "error event", id, what, url, msg[0] ? msg : "cut");
    double now = mono_now();
    if (!pool_report(p->pool, role, i, !fault, now))
        return;
    pool_health h;
    pool_get_health(p->pool, role, i, now, &h);
    log_msg("request %s: %s %s ejected for %.3g s (%llu failure%s in all; the last: %s)", id,
            what, url, h.ejected_for, (unsigned long long)h.failures,
            h.failures == 1 ? "" : "s", msg[0] ? msg : code ? "HTTP 5xx" : "no answer");
}

static void prefill_done(proxy_t *p, pxreq *r, xfer *x, up_result res, int code,
                         const char *msg)
{
    char why[600];
    pool_prefill_release(p->pool, x->upstream);
    int fault = instance_fault(x, res, code);
    report(p, POOL_PREFILL, x->upstream, x, fault, res, code, msg, r->id);
    int status = upstream_failed(x, res, code, msg, why, sizeof why, "prefill",
                                 p->pool->prefill[x->upstream].name);
    if (!status)
        after_prefill(p, r, x);
    else if (!(fault && !x->relayed && retry_prefill(p, r, x->upstream))) {
        fail(r, status, "%s", why);
        conclude(p, r, -1);
    }
}

static void decode_done(proxy_t *p, pxreq *r, xfer *x, up_result res, int code,
                        const char *msg)
{
    char why[600];
    pthread_mutex_lock(&r->lock);
    int gone = r->gone;
    pthread_mutex_unlock(&r->lock);
    int fault = instance_fault(x, res, code);
    int status = upstream_failed(x, res, code, msg, why, sizeof why, "decode",
                                 p->pool->decode[x->upstream].name);
    /* failed there, before the report: an ejection it causes drops the
     * worker's in-flight routes (state_eject_worker), this one with them */
    if (status && !gone)
        end_route(p, r, 1);
    report(p, POOL_DECODE, x->upstream, x, fault, res, code, msg, r->id);
    if (gone) {
        atomic_fetch_add(&p->outcomes[PX_CLIENT_GONE], 1);
    } else if (status && fault && !x->relayed && retry_decode(p, r, x->upstream)) {
        return;
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
}

static void transfer_done(proxy_t *p, xfer *x, up_result res, int code, const char *msg)
{
    pxreq *r = x->r;
    if (x->role != ROLE_RELEASE && r) {
        r->up = NULL;
        if (x->role == ROLE_PREFILL)
            prefill_done(p, r, x, res, code, msg);
        else
            decode_done(p, r, x, res, code, msg);
    }
    xfer_free(p, x);
}

static void start_prefill(proxy_t *p, pxreq *r, char *body)
{
    r->up = body ? xfer_start(p, ROLE_PREFILL, r->prefill, r->path, body, r, r->auth,
                              r->prefill, 0)
                 : NULL;
    if (!r->up) {
        pool_prefill_release(p->pool, r->prefill);
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
                pool_prefill_release(p->pool, x->upstream);
            xfer_free(p, x);
        }
        atomic_fetch_add(&p->outcomes[PX_CLIENT_GONE], 1);
        conclude(p, r, -1);
    }
    unref(r);   /* the cancel queue's reference */
}

/* Every request still upstream fails with 503 (shutting down). */
static void fail_all(proxy_t *p)
{
    while (p->active) {
        xfer *x = p->active;
        pxreq *r = x->r;
        if (r) {
            r->up = NULL;
            if (x->role == ROLE_PREFILL)
                pool_prefill_release(p->pool, x->upstream);
            fail(r, 503, "eldrd is shutting down");
        }
        xfer_free(p, x);
        if (r)
            conclude(p, r, -1);
    }
}

/* Each turn of the loop, before it sleeps: start the requests that
 * libmicrohttpd handed over (proxy_begin and proxy_release run inside
 * its run, on this thread, so no wake-up is needed) and cancel those
 * whose clients left. */
static int proxy_turn(evloop *l, void *cls)
{
    (void)l;
    proxy_t *p = cls;
    pthread_mutex_lock(&p->lock);
    pxreq *fresh = p->new_head, *gone = p->cancel_head;
    p->new_head = p->new_tail = p->cancel_head = NULL;
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
    return -1;
}

/* proxy_stop's call on the loop: what is queued goes, then everything
 * fails. */
static void stop_here(void *cls)
{
    proxy_t *p = cls;
    probe_stop(p->probe);
    p->probe = NULL;
    proxy_turn(p->loop, p);
    fail_all(p);
    pthread_mutex_lock(&p->lock);
    p->failed_all = 1;
    pthread_cond_broadcast(&p->quiet);
    pthread_mutex_unlock(&p->lock);
}

/* ---- the HTTP side ---------------------------------------------------- */

/* A role with no instance in rotation cannot serve: the client gets 503
 * with Retry-After (when the first ejection runs out) before any byte,
 * not a prefill's first token and then a stream's error event. Panic
 * routing (pool.h) stays for the requests already under way. */
static int in_rotation(proxy_t *p, rb_err *e)
{
    double now = mono_now(), back;
    for (int role = POOL_PREFILL; role <= POOL_DECODE; role++) {
        if (pool_in_rotation(p->pool, (pool_role)role, now, &back) > 0)
            continue;
        rb_fail(e, 503, role == POOL_PREFILL ? "prefill" : "decode",
                "no %s instance is in rotation (every one is ejected after failures): try "
                "again in %.0f s", role == POOL_PREFILL ? "prefill" : "decode", back + 0.5);
        e->retry_after = back < 1 ? 1 : (int)(back + 0.999);
        atomic_fetch_add(&p->outcomes[PX_REFUSED], 1);
        return 0;
    }
    return 1;
}

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

/* A client's Authorization value that can go into an upstream request
 * head as it is: printable ASCII (spaces allowed), no CR or LF. */
#define AUTH_FORWARD_MAX 4096
static int auth_value_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > AUTH_FORWARD_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

/* http_async's begin: the client's request, its body complete. */
static void *proxy_begin(void *ctx, const http_req *hr, rb_err *e)
{
    proxy_t *p = ctx;
    int chat = !strcmp(hr->path, "/v1/chat/completions");
    const char *request_id = http_header(hr, "X-Request-Id");
    const char *body = hr->body;
    size_t len = hr->len;
    struct MHD_Connection *c = hr->conn;
    if (atomic_load(&p->stopped)) {
        rb_fail(e, 503, "proxy", "eldrd is draining (shutting down): send this request "
                "through another router");
        return NULL;
    }
    if (!in_rotation(p, e))
        return NULL;
    if (request_id && !id_ok(request_id)) {
        atomic_fetch_add(&p->outcomes[PX_BAD_REQUEST], 1);
        rb_fail(e, 400, "X-Request-Id", "X-Request-Id must be 1 to %d printable ASCII "
                "characters without spaces", RB_ID_MAX - 1);
        return NULL;
    }
    if (chat && !p->d->o->pd_vllm) {
        /* The authors' prefill-first handoff resumes the decode from the
         * prompt's token ids, which a chat's messages are not; their proxy
         * refuses chat with a 400, and so does eldrd, rather than resend
         * the messages and have the decoder template them again. */
        atomic_fetch_add(&p->outcomes[PX_BAD_REQUEST], 1);
        rb_fail(e, 400, "path", "--pd-protocol eldr (the authors' prefill-first handoff) "
                "carries one text completion: send /v1/completions, or run eldrd with "
                "--pd-protocol vllm for chat");
        return NULL;
    }
    const char *auth = p->up_auth[0] ? NULL : http_header(hr, "Authorization");
    if (auth && !auth_value_ok(auth)) {
        atomic_fetch_add(&p->outcomes[PX_BAD_REQUEST], 1);
        rb_fail(e, 400, "Authorization", "the Authorization header must be 1 to %d printable "
                "ASCII characters to be forwarded", AUTH_FORWARD_MAX);
        return NULL;
    }
    pxreq *r = calloc(1, sizeof *r);
    if (!r || (auth && !(r->auth = strdup(auth)))) {
        free(r);
        rb_fail(e, 503, "proxy", "out of memory");
        return NULL;
    }
    if (pm_client_parse(body, len, chat ? PM_CHAT : PM_COMPLETIONS, &r->client, e) < 0) {
        atomic_fetch_add(&p->outcomes[PX_BAD_REQUEST], 1);
        free(r->auth);
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
    r->prefill = pool_prefill_acquire(p->pool, r->client.key, r->client.key_len, mono_now(), -1);
    if (r->prefill < 0) {
        rb_fail(e, 503, "prefill", "no prefill instance is eligible (all %d are ejected)",
                p->n_prefill);
        pm_client_free(&r->client);
        pthread_mutex_destroy(&r->lock);
        free(r->auth);
        free(r);
        return NULL;
    }
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

static ssize_t proxy_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
static void proxy_stream_free(void *cls);

/* http_async's poll: the answer when it is ready; otherwise the
 * connection waits (resumed by wake). */
static void proxy_poll(void *h, http_resp *out, int *ready)
{
    pxreq *r = h;
    *ready = 0;
    pthread_mutex_lock(&r->lock);
    if (r->ready) {
        *ready = 1;
        out->status = r->status;
        if (r->streaming) {
            out->content_type = "text/event-stream";
            out->stream_read = proxy_stream_read;
            out->stream_free = proxy_stream_free;
            out->stream_ctx = r;
            atomic_fetch_add(&r->refs, 1);   /* the reader's */
        } else {
            out->text = r->body;
            out->content_type = "application/json";
            r->body = NULL;
        }
    } else if (r->conn) {
        r->suspended = 1;
        http_suspend(r->conn);
    }
    pthread_mutex_unlock(&r->lock);
}

static ssize_t proxy_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
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
        n = r->out_error ? HTTP_STREAM_ERROR : HTTP_STREAM_END;
    } else if (r->conn) {
        /* nothing yet: wait for the decoder's next chunk */
        r->suspended = 1;
        http_suspend(r->conn);
    } else {
        n = HTTP_STREAM_ERROR;
    }
    long long unread = (long long)(r->out.len - r->out_off);
    pthread_mutex_unlock(&r->lock);
    /* libmicrohttpd reads the stream on the loop's thread, which owns the
     * upstream side: a decoder paused for this client goes on once half
     * of what it left unread is taken */
    xfer *x = r->up;
    if (x && x->paused && x->ux && unread < r->p->d->o->stream_buffer / 2) {
        x->paused = 0;
        upc_resume(r->p->up, x->ux);
    }
    return n;
}

static void proxy_stream_free(void *cls)
{
    unref(cls);
}

static void proxy_release(void *h, int client_gone)
{
    pxreq *r = h;
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

static const http_async proxy_async = {proxy_begin, proxy_poll, proxy_release};

proxy_t *proxy_start(engine_t *d, evloop *loop, http_server *http, char *err, size_t errlen)
{
    proxy_t *p = calloc(1, sizeof *p);
    if (!p) {
        eldr_errf(err, errlen, "out of memory");
        return NULL;
    }
    p->d = d;
    p->pool = &d->pool;
    p->loop = loop;
    p->http = http;
    p->n_prefill = d->pool.n_prefill;
    p->K = d->pool.K;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->quiet, NULL);
    p->boot = (unsigned long long)(wall_now() * 1e6);
    if (!(p->up = upc_new(loop, err, errlen))) {
        proxy_free(p);
        return NULL;
    }
    for (int i = 0; i < p->n_prefill + p->K; i++) {
        int pre = i < p->n_prefill;
        const char *url = pre ? p->pool->prefill[i].name : p->pool->decode[i - p->n_prefill].name;
        char why[300];
        if (upc_origin(p->up, url, why, sizeof why) < 0) {
            eldr_errf(err, errlen, "%s: %s", pre ? "--prefill" : "--decode", why);
            proxy_free(p);
            return NULL;
        }
    }
    if (d->o->upstream_key_file) {
        char key[AUTH_TOKEN_MAX];
        if (auth_read_token(d->o->upstream_key_file, "--upstream-api-key-file", key, sizeof key,
                            err, errlen) < 0) {
            proxy_free(p);
            return NULL;
        }
        snprintf(p->up_auth, sizeof p->up_auth, "Bearer %s", key);
        memset(key, 0, sizeof key);
    }
    upc_set_idle(p->up, d->o->upstream_idle);
    if (d->o->health_interval > 0 &&
        !(p->probe = probe_start(loop, p->up, p->pool, d->o->health_interval,
                                 d->o->health_path, err, errlen))) {
        proxy_free(p);
        return NULL;
    }
    evloop_hook_add(loop, &p->turn, proxy_turn, p);
    return p;
}

int proxy_register(proxy_t *p, http_server *s)
{
    static const char *const paths[] = {"/v1/completions", "/v1/chat/completions"};
    for (int i = 0; i < 2; i++) {
        http_route rt = {.method = "POST", .path = paths[i], .async = &proxy_async, .ctx = p};
        if (http_add_route(s, &rt) < 0)
            return -1;
    }
    return 0;
}

void proxy_stop(proxy_t *p, int loop_running)
{
    if (!p)
        return;
    atomic_store(&p->stopped, 1);
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    if (loop_running && evloop_post(p->loop, stop_here, p) == 0) {
        pthread_mutex_lock(&p->lock);
        while (!p->failed_all)
            pthread_cond_wait(&p->quiet, &p->lock);
        pthread_mutex_unlock(&p->lock);
    } else {
        stop_here(p);   /* the loop is not running: its thread is this one */
    }
}

void proxy_free(proxy_t *p)
{
    if (!p)
        return;
    if (p->active || p->probe)
        stop_here(p);
    if (p->up)
        evloop_hook_del(p->loop, &p->turn);
    upc_free(p->up);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->quiet);
    free(p);
}

void proxy_metrics(void *cls, strbuf *b)
{
    proxy_t *p = cls;
    sb_printf(b, "# HELP eldr_proxy_requests_total Proxied requests by how they ended.\n"
                 "# TYPE eldr_proxy_requests_total counter\n");
    for (int o = 0; o < PX_N_OUTCOMES; o++)
        sb_printf(b, "eldr_proxy_requests_total{outcome=\"%s\"} %llu\n", outcome_names[o],
                  (unsigned long long)atomic_load(&p->outcomes[o]));
    metrics_head(b, "eldr_proxy_timeouts_total", "counter",
                 "Upstream transfers cut at a limit, by phase: connect (--connect-timeout), "
                 "prefill (--prefill-timeout), decode (--decode-timeout), idle "
                 "(--stream-idle-timeout); retried or not.");
    for (int i = 0; i < PX_N_PHASES; i++)
        sb_printf(b, "eldr_proxy_timeouts_total{phase=\"%s\"} %llu\n", phase_names[i],
                  (unsigned long long)atomic_load(&p->timeouts[i]));
    sb_printf(b, "# HELP eldr_proxy_signal_total Proxied decisions by where the prompt's "
                 "signal came from: eldr_sig (the patched engine), routed_experts (a stock "
                 "engine's answer), none (least loaded).\n"
                 "# TYPE eldr_proxy_signal_total counter\n"
                 "eldr_proxy_signal_total{source=\"eldr_sig\"} %llu\n"
                 "eldr_proxy_signal_total{source=\"routed_experts\"} %llu\n"
                 "eldr_proxy_signal_total{source=\"none\"} %llu\n",
              (unsigned long long)atomic_load(&p->signal[0]),
              (unsigned long long)atomic_load(&p->signal[1]),
              (unsigned long long)atomic_load(&p->signal[2]));
    sb_printf(b, "# HELP eldr_proxy_no_signature_total Proxied requests routed without a "
                 "signal (no eldr_sig and no usable routed experts, or a signature all zero "
                 "on the mask): to the least loaded worker.\n"
                 "# TYPE eldr_proxy_no_signature_total counter\n"
                 "eldr_proxy_no_signature_total %llu\n",
              (unsigned long long)atomic_load(&p->no_signature));
    sb_printf(b, "# HELP eldr_proxy_retries_total Requests sent once more to another instance "
                 "after a failure before their first byte.\n"
                 "# TYPE eldr_proxy_retries_total counter\n"
                 "eldr_proxy_retries_total{role=\"prefill\"} %llu\n"
                 "eldr_proxy_retries_total{role=\"decode\"} %llu\n",
              (unsigned long long)atomic_load(&p->retries[POOL_PREFILL]),
              (unsigned long long)atomic_load(&p->retries[POOL_DECODE]));
    sb_printf(b, "# HELP eldr_proxy_open Proxied requests not yet over upstream.\n"
                 "# TYPE eldr_proxy_open gauge\neldr_proxy_open %lld\n",
              (long long)atomic_load(&p->open));
    sb_printf(b, "# HELP eldr_proxy_prefill_inflight Requests at each prefill instance.\n"
                 "# TYPE eldr_proxy_prefill_inflight gauge\n");
    for (int i = 0; i < p->n_prefill; i++) {
        sb_printf(b, "eldr_proxy_prefill_inflight{prefill=\"");
        sb_label(b, p->pool->prefill[i].name);
        sb_printf(b, "\"} %lld\n", (long long)atomic_load(&p->pool->prefill[i].load));
    }
}

void proxy_failures(void *cls, json_t *into)
{
    proxy_t *p = cls;
    json_t *o = json_object(), *t = json_object();
    for (int i = 0; o && i < PX_N_OUTCOMES; i++)
        json_object_set_new(o, outcome_names[i],
                            json_integer((json_int_t)atomic_load(&p->outcomes[i])));
    for (int i = 0; t && i < PX_N_PHASES; i++)
        json_object_set_new(t, phase_names[i],
                            json_integer((json_int_t)atomic_load(&p->timeouts[i])));
    json_object_set_new(into, "proxy", o ? o : json_null());
    json_object_set_new(into, "upstream_timeouts", t ? t : json_null());
    json_object_set_new(into, "retries",
                        json_pack("{s:I, s:I}", "prefill",
                                  (json_int_t)atomic_load(&p->retries[POOL_PREFILL]), "decode",
                                  (json_int_t)atomic_load(&p->retries[POOL_DECODE])));
}
