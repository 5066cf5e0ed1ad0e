/* kv_sub.c - the ZMQ subscriber of vLLM's KV events (kv_sub.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "err.h"
#include "kv_apply.h"
#include "kv_msgpack.h"
#include "kv_sub.h"
#include "log.h"
#include "opts.h"

#define POLL_MS 200
#define BURST 256                /* messages taken from one socket per round */
#define SUB_HWM 100000           /* vLLM's own hwm on the PUB side */

typedef struct kvpeer {
    const char *endpoint, *replay; /* borrowed from the lists */
    void *sub, *dealer;          /* dealer: NULL until a gap needs it */
    uint64_t last;               /* last sequence applied */
    int has_last;
} kvpeer;

struct kvsub {
    engine_t *d;
    void *ctx;
    kvpeer *w;
    int n;
    char **eps, **reps;
    int n_eps, n_reps;
    pthread_t thread;
    int started;
    atomic_int stop;
    atomic_long log_clock;
};

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

/* One multipart message: its first frames (up to max) in parts, how many
 * frames it had in *nparts. -1 when nothing could be read. */
static int recv_parts(void *sock, zmq_msg_t *parts, int max, int *nparts, int flags)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, n ? 0 : flags) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < n && i < max; i++)
                zmq_msg_close(&parts[i]);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (n < max)
            parts[n] = m;
        else
            zmq_msg_close(&m);
        n++;
    }
    *nparts = n;
    return 0;
}

static void close_parts(zmq_msg_t *parts, int n, int max)
{
    for (int i = 0; i < n && i < max; i++)
        zmq_msg_close(&parts[i]);
}

/* Decode and apply one batch payload of worker p. */
static void apply_payload(kvsub_t *s, int p, const zmq_msg_t *payload)
{
    kv_batch b;
    int bad;
    char why[256];
    if (kv_msgpack_batch(zmq_msg_data((zmq_msg_t *)payload), zmq_msg_size((zmq_msg_t *)payload),
                         &b, &bad, why, sizeof why) < 0) {
        kv_note(s->d, p, KV_NOTE_BAD_MESSAGE, 1);
        if (log_once_a_second(&s->log_clock))
            log_msg("--kv-events %s (prefill %s): message dropped: %s", s->w[p].endpoint,
                    s->d->caches[p].name, why);
        return;
    }
    if (bad) {
        kv_note(s->d, p, KV_NOTE_BAD_EVENT, (uint64_t)bad);
        if (log_once_a_second(&s->log_clock))
            log_msg("--kv-events %s (prefill %s): %d bad event%s dropped, the rest applied: %s",
                    s->w[p].endpoint, s->d->caches[p].name, bad, bad > 1 ? "s" : "", why);
    }
    kv_apply(s->d, p, b.events, b.n, NULL);
    kv_batch_free(&b);
}

static void *open_socket(kvsub_t *s, int type, const char *endpoint)
{
    void *z = zmq_socket(s->ctx, type);
    if (!z)
        return NULL;
    int zero = 0, ivl = 100, ivl_max = 2000, hwm = SUB_HWM;
    int64_t maxmsg = KVSUB_MAX_MSG;
    zmq_setsockopt(z, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(z, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(z, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    zmq_setsockopt(z, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(z, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zmq_connect(z, endpoint) != 0) {
        zmq_close(z);
        return NULL;
    }
    return z;
}

/* Ask worker p's replay socket for the batches [from, seq) and apply
 * them in order. strict (a gap): the first must be `from` and none may be
 * missing; else (catching up from 0) the first the publisher still
 * buffers starts the run. 1 when the run reached seq - 1. */
static int replay_range(kvsub_t *s, int p, uint64_t from, uint64_t seq, int strict)
{
    kvpeer *w = &s->w[p];
    if (!w->replay)
        return 0;
    if (!w->dealer && !(w->dealer = open_socket(s, ZMQ_DEALER, w->replay)))
        return 0;
    uint8_t start[8];
    uint64_t want = from;
    int first = 1;
    for (int i = 0; i < 8; i++)
        start[i] = (uint8_t)(from >> (56 - 8 * i));
    if (zmq_send(w->dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(w->dealer, start, 8, ZMQ_DONTWAIT) < 0)
        goto fail;
    double end = mono_now() + KVSUB_REPLAY_SECONDS;
    for (;;) {
        double left = end - mono_now();
        zmq_pollitem_t it = {w->dealer, 0, ZMQ_POLLIN, 0};
        if (left <= 0 || zmq_poll(&it, 1, (long)(left * 1000) + 1) <= 0)
            goto fail;           /* silent: late answers must not meet the next ask */
        zmq_msg_t parts[3];
        int np;
        if (recv_parts(w->dealer, parts, 3, &np, ZMQ_DONTWAIT) < 0)
            continue;
        int done = 0;
        if (np == 3 && zmq_msg_size(&parts[1]) == 8) {
            uint64_t r = be64(zmq_msg_data(&parts[1]));
            if (r == UINT64_MAX)
                done = 1;        /* the end marker: seq -1, empty payload */
            else if (r < seq && (r == want || (!strict && first && r > want))) {
                apply_payload(s, p, &parts[2]);
                kv_note(s->d, p, KV_NOTE_REPLAYED, 1);
                want = r + 1;
                first = 0;
            }
        }
        close_parts(parts, np, 3);
        if (done)
            break;
    }
    return want == seq;
fail:
    zmq_close(w->dealer);
    w->dealer = NULL;
    return 0;
}

kvseq_step kvseq_classify(int has_last, uint64_t last, uint64_t seq)
{
    if (!has_last || seq == last + 1)
        return KVSEQ_NEXT;
    return seq <= last ? KVSEQ_RESTART : KVSEQ_GAP;
}

/* One message from worker p's publisher. */
static void take(kvsub_t *s, int p, zmq_msg_t *parts, int np)
{
    kvpeer *w = &s->w[p];
    if (np != 3 || zmq_msg_size(&parts[1]) != 8) {
        kv_note(s->d, p, KV_NOTE_BAD_MESSAGE, 1);
        if (log_once_a_second(&s->log_clock))
            log_msg("--kv-events %s (prefill %s): a message of %d frame%s, not (topic, "
                    "8-byte sequence, payload): dropped", w->endpoint, s->d->caches[p].name,
                    np, np == 1 ? "" : "s");
        return;
    }
    uint64_t seq = be64(zmq_msg_data(&parts[1]));
    kvseq_step step = kvseq_classify(w->has_last, w->last, seq);
    if (step == KVSEQ_RESTART) {
        log_msg("--kv-events %s (prefill %s): sequence %llu after %llu: the publisher "
                "restarted; its signature cache is emptied", w->endpoint, s->d->caches[p].name,
                (unsigned long long)seq, (unsigned long long)w->last);
        kv_distrust(s->d, p, KV_NOTE_RESET_RESTART);
    }
    if ((step == KVSEQ_RESTART || !w->has_last) && seq > 0 && w->replay) {
        /* joining a publisher's run late (eldrd started after it, or its
         * first batches went by while the connection came up): what it
         * still buffers of the run, so that BlockStored's hashes are known */
        (void)replay_range(s, p, 0, seq, 0);
    } else if (step == KVSEQ_GAP) {
        kv_note(s->d, p, KV_NOTE_GAP, 1);
        kv_note(s->d, p, KV_NOTE_MISSED, seq - w->last - 1);
        if (!replay_range(s, p, w->last + 1, seq, 1)) {
            log_msg("--kv-events %s (prefill %s): batches %llu..%llu lost%s; its signature "
                    "cache is emptied", w->endpoint, s->d->caches[p].name,
                    (unsigned long long)(w->last + 1), (unsigned long long)(seq - 1),
                    w->replay ? " and not replayed" : " (no --kv-events-replay)");
            kv_distrust(s->d, p, KV_NOTE_RESET_GAP);
        }
    }
    apply_payload(s, p, &parts[2]);
    w->last = seq;
    w->has_last = 1;
}

static void *run(void *arg)
{
    kvsub_t *s = arg;
    zmq_pollitem_t *items = calloc((size_t)s->n, sizeof *items);
    if (!items) {
        log_msg("--kv-events: out of memory; the subscriber stops");
        return NULL;
    }
    for (int i = 0; i < s->n; i++)
        items[i] = (zmq_pollitem_t){s->w[i].sub, 0, ZMQ_POLLIN, 0};
    while (!atomic_load(&s->stop)) {
        if (zmq_poll(items, s->n, POLL_MS) <= 0)
            continue;
        for (int i = 0; i < s->n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            for (int k = 0; k < BURST; k++) {
                zmq_msg_t parts[3];
                int np;
                if (recv_parts(s->w[i].sub, parts, 3, &np, ZMQ_DONTWAIT) < 0)
                    break;
                take(s, i, parts, np);
                close_parts(parts, np, 3);
            }
        }
    }
    free(items);
    return NULL;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void destroy(kvsub_t *s)
{
    for (int i = 0; s->w && i < s->n; i++) {
        if (s->w[i].sub)
            zmq_close(s->w[i].sub);
        if (s->w[i].dealer)
            zmq_close(s->w[i].dealer);
    }
    if (s->ctx)
        zmq_ctx_term(s->ctx);
    free(s->w);
    free_list(s->eps, s->n_eps);
    free_list(s->reps, s->n_reps);
    free(s);
}

kvsub_t *kvsub_start(engine_t *d, const char *endpoints, const char *replay, const char *topic,
                     char *err, size_t errlen)
{
    kvsub_t *s = calloc(1, sizeof *s);
    if (!s) {
        eldr_errf(err, errlen, "--kv-events: out of memory");
        return NULL;
    }
    s->d = d;
    if (opts_split_names(endpoints, "--kv-events", &s->eps, &s->n_eps, err, errlen) < 0 ||
        (replay &&
         opts_split_names(replay, "--kv-events-replay", &s->reps, &s->n_reps, err, errlen) < 0))
        goto fail;
    if (s->n_eps != d->n_caches || (replay && s->n_reps != d->n_caches)) {
        eldr_errf(err, errlen, "%s: %d endpoint%s for %d prefill worker%s (--prefill-workers; "
                  "one endpoint each, in that order)",
                  s->n_eps != d->n_caches ? "--kv-events" : "--kv-events-replay",
                  s->n_eps != d->n_caches ? s->n_eps : s->n_reps,
                  (s->n_eps != d->n_caches ? s->n_eps : s->n_reps) == 1 ? "" : "s", d->n_caches,
                  d->n_caches == 1 ? "" : "s");
        goto fail;
    }
    s->n = d->n_caches;
    if (!(s->ctx = zmq_ctx_new()) || !(s->w = calloc((size_t)s->n, sizeof *s->w))) {
        eldr_errf(err, errlen, "--kv-events: out of memory");
        goto fail;
    }
    for (int i = 0; i < s->n; i++) {
        kvpeer *w = &s->w[i];
        w->endpoint = s->eps[i];
        w->replay = replay ? s->reps[i] : NULL;
        if (!(w->sub = open_socket(s, ZMQ_SUB, w->endpoint))) {
            eldr_errf(err, errlen, "--kv-events: '%s': %s (an endpoint is tcp://HOST:PORT)",
                      w->endpoint, zmq_strerror(zmq_errno()));
            goto fail;
        }
        zmq_setsockopt(w->sub, ZMQ_SUBSCRIBE, topic, strlen(topic));
        if (w->replay) {   /* checked now, connected when a gap needs it */
            void *t = open_socket(s, ZMQ_DEALER, w->replay);
            if (!t) {
                eldr_errf(err, errlen, "--kv-events-replay: '%s': %s (an endpoint is "
                          "tcp://HOST:PORT)", w->replay, zmq_strerror(zmq_errno()));
                goto fail;
            }
            w->dealer = t;
        }
    }
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        eldr_errf(err, errlen, "--kv-events: cannot start the subscriber thread");
        goto fail;
    }
    s->started = 1;
    return s;
fail:
    destroy(s);
    return NULL;
}

void kvsub_stop(kvsub_t *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    if (s->started)
        pthread_join(s->thread, NULL);
    destroy(s);
}
