/* grpc_srv.c - gRPC over h2c on an evloop (grpc_srv.h).
 *
 * nghttp2 does the HTTP/2 framing, flow control and HPACK; this file
 * feeds it the socket's bytes (mem_recv) and writes what it produces
 * (mem_send). A stream's answer is one nghttp2 data source that reads the
 * stream's queue of framed messages; an empty queue defers the source
 * until grpc_send resumes it; grpc_finish ends the data with the status
 * trailers. Connections whose streams got new output are flushed by one
 * after-turn hook, so a service answering from a timer or from another
 * stream's message costs no extra write per message. */
#include "grpc_srv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "g9.h"
#include "log.h"

#define GRPC_METHODS_MAX 16
#define READ_CHUNK 65536
#define READS_PER_TURN 8          /* fairness: at most this many reads a turn */
#define PATH_MAX_LEN 256

typedef struct gconn gconn;

struct grpc_stream {
    gconn *c;
    int32_t id;
    const grpc_method *m;
    void *st;                     /* the service's state */
    int opened, done, deferred, submitted, trailers_only;
    char path[PATH_MAX_LEN];
    int bad_ctype, bad_method;
    uint8_t *in;                  /* a message being received (with its 5-byte prefix) */
    size_t in_len, in_cap;
    uint8_t *out;                 /* framed messages to send */
    size_t out_off, out_len, out_cap;
    int status;
    char status_msg[512];
    grpc_stream *prev, *next;     /* the connection's streams */
};

#define OUT_SPARES 8              /* answer queues a connection keeps for its next streams */
#define OUT_SPARE_MAX (256u << 10)

struct gconn {
    grpc_srv *g;
    int fd;
    ev_io io;
    nghttp2_session *ses;
    uint8_t *wbuf;                /* produced, not yet written */
    size_t wlen, woff, wcap;
    uint8_t *spare[OUT_SPARES];   /* ended streams' answer queues, reused */
    size_t spare_cap[OUT_SPARES];
    int n_spare;
    int dirty, dead, spoke;
    ev_timer preface;             /* the first frame's deadline */
    char peer[64];
    grpc_stream *streams;
    gconn *prev, *next;           /* the server's connections */
    gconn *dnext;                 /* the dirty list */
};

struct grpc_srv {
    evloop *l;
    int lfd, port;
    ev_io lio;
    ev_hook after;
    grpc_config cfg;
    grpc_method methods[GRPC_METHODS_MAX];
    int n_methods;
    int quiescing;
    gconn *conns;
    gconn *dirty;
    atomic_long streams, nconns;
    atomic_ullong streams_total, conns_total, refused_conns, bad_frames, resets,
        preface_timeouts;
    int slot;                    /* its listener slot in cfg.met, -1 none */
    atomic_long last_refusal_log;
};

static void conn_close(gconn *c);
static void conn_flush(gconn *c);

static void mark_dirty(gconn *c)
{
    if (!c->dirty && !c->dead) {
        c->dirty = 1;
        c->dnext = c->g->dirty;
        c->g->dirty = c;
    }
}

/* grpc-message is percent-encoded (gRPC's PROTOCOL-HTTP2.md): bytes
 * outside 0x20..0x7E and '%' itself. */
static void pct_encode(const char *in, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < n; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

static void submit_trailers(grpc_stream *s)
{
    char code[24], msg[sizeof s->status_msg * 3 + 1];
    g9_int(s->status, code);   /* not snprintf: every stream ends with one */
    pct_encode(s->status_msg, msg, sizeof msg);
    nghttp2_nv nv[2] = {NV("grpc-status", code), NV("grpc-message", msg)};
    nghttp2_submit_trailer(s->c->ses, s->id, nv, msg[0] ? 2 : 1);
}

static ssize_t read_out(nghttp2_session *ses, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ses, (void)id, (void)ud;
    grpc_stream *s = src->ptr;
    size_t have = s->out_len - s->out_off;
    if (have) {
        size_t n = have < length ? have : length;
        memcpy(buf, s->out + s->out_off, n);
        s->out_off += n;
        if (s->out_off == s->out_len)
            s->out_off = s->out_len = 0;
        return (ssize_t)n;
    }
    if (s->done) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        submit_trailers(s);
        return 0;
    }
    s->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
}

/* The response headers with the data source, once. */
static void submit_head(grpc_stream *s)
{
    if (s->submitted)
        return;
    s->submitted = 1;
    nghttp2_nv nv[2] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = read_out};
    nghttp2_submit_response(s->c->ses, s->id, nv, 2, &dp);
}

/* An error before any message: Trailers-Only (one HEADERS, END_STREAM). */
static void submit_trailers_only(grpc_stream *s)
{
    char code[24], msg[sizeof s->status_msg * 3 + 1];
    g9_int(s->status, code);
    pct_encode(s->status_msg, msg, sizeof msg);
    nghttp2_nv nv[4] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                        NV("grpc-status", code), NV("grpc-message", msg)};
    s->submitted = s->trailers_only = 1;
    nghttp2_submit_response(s->c->ses, s->id, nv, msg[0] ? 4 : 3, NULL);
}

static void set_status(grpc_stream *s, int status, const char *message)
{
    size_t n = message ? strnlen(message, sizeof s->status_msg - 1) : 0;
    s->status = status;
    memcpy(s->status_msg, message ? message : "", n);
    s->status_msg[n] = '\0';
}

void grpc_finish(grpc_stream *s, int status, const char *message)
{
    if (s->done)
        return;
    s->done = 1;
    set_status(s, status, message);
    if (!s->submitted && s->out_len == s->out_off)
        submit_trailers_only(s);
    else if (!s->submitted)
        submit_head(s);
    else if (s->deferred) {
        s->deferred = 0;
        nghttp2_session_resume_data(s->c->ses, s->id);
    }
    mark_dirty(s->c);
}

/* The transport ends the stream with an error: the service is told
 * (gone) unless it is the caller, then the status goes out. */
static void stream_fail(grpc_stream *s, int status, const char *message, int tell)
{
    if (s->done)
        return;
    if (tell && s->opened && s->m->gone)
        s->m->gone(s->m->cls, s->st);
    s->st = NULL;
    s->out_off = s->out_len = 0;
    atomic_fetch_add(&s->c->g->resets, 1);
    grpc_finish(s, status, message);
}

/* A queue of at least need bytes: an ended stream's, else a new one of
 * cap bytes (*got: its size). */
static uint8_t *out_take(gconn *c, size_t need, size_t cap, size_t *got)
{
    for (int i = c->n_spare - 1; i >= 0; i--)
        if (c->spare_cap[i] >= need) {
            uint8_t *p = c->spare[i];
            *got = c->spare_cap[i];
            c->n_spare--;
            c->spare[i] = c->spare[c->n_spare];
            c->spare_cap[i] = c->spare_cap[c->n_spare];
            return p;
        }
    *got = cap;
    return malloc(cap);
}

/* Keep a queue for the connection's next streams, or free it. */
static void out_give(gconn *c, uint8_t *p, size_t cap)
{
    if (p && c->n_spare < OUT_SPARES && cap <= OUT_SPARE_MAX && !c->dead) {
        c->spare[c->n_spare] = p;
        c->spare_cap[c->n_spare++] = cap;
        return;
    }
    free(p);
}

/* Room for need more bytes at the end of s->out. The queue grows into
 * another buffer that takes only the bytes still queued (realloc would
 * copy the whole old block); one an ended stream left is taken first,
 * so that a connection's streams stop allocating once it is warm. -1
 * out of memory. */
static int out_room(grpc_stream *s, size_t need)
{
    size_t queued = s->out_len - s->out_off;
    if (s->out_len + need <= s->out_cap)
        return 0;
    if (queued + need <= s->out_cap) {
        memmove(s->out, s->out + s->out_off, queued);
    } else {
        size_t cap = s->out_cap ? s->out_cap : 4096;
        while (cap < queued + need)
            cap *= 2;
        uint8_t *o = out_take(s->c, queued + need, cap, &cap);
        if (!o)
            return -1;
        if (queued)
            memcpy(o, s->out + s->out_off, queued);
        out_give(s->c, s->out, s->out_cap);
        s->out = o;
        s->out_cap = cap;
    }
    s->out_len = queued;
    s->out_off = 0;
    return 0;
}

int grpc_sendv(grpc_stream *s, const grpc_part *parts, int n)
{
    if (s->done)
        return -1;
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += parts[i].n;
    size_t queued = s->out_len - s->out_off;
    if (queued + len + 5 > s->c->g->cfg.max_pending || len > UINT32_MAX) {
        stream_fail(s, GRPC_RESOURCE_EXHAUSTED, "the client reads too slowly: answers over the "
                    "bound of bytes queued for one stream", 0);
        return -1;
    }
    if (out_room(s, len + 5) < 0) {
        stream_fail(s, GRPC_RESOURCE_EXHAUSTED, "out of memory", 0);
        return -1;
    }
    uint8_t *p = s->out + s->out_len;
    p[0] = 0;
    p[1] = (uint8_t)(len >> 24), p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8), p[4] = (uint8_t)len;
    p += 5;
    for (int i = 0; i < n; i++) {
        if (parts[i].n)
            memcpy(p, parts[i].p, parts[i].n);
        p += parts[i].n;
    }
    s->out_len += len + 5;
    if (!s->submitted)
        submit_head(s);
    else if (s->deferred) {
        s->deferred = 0;
        nghttp2_session_resume_data(s->c->ses, s->id);
    }
    mark_dirty(s->c);
    return 0;
}

int grpc_send(grpc_stream *s, const uint8_t *msg, size_t len)
{
    grpc_part one = {msg, len};
    return grpc_sendv(s, &one, 1);
}

const char *grpc_peer(const grpc_stream *s)
{
    return s->c->peer;
}

/* ---- nghttp2's callbacks ---- */

static int on_begin_headers(nghttp2_session *ses, const nghttp2_frame *f, void *ud)
{
    gconn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    grpc_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    s->c = c;
    s->id = f->hd.stream_id;
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    atomic_fetch_add(&c->g->streams, 1);
    atomic_fetch_add(&c->g->streams_total, 1);
    nghttp2_session_set_stream_user_data(ses, s->id, s);
    return 0;
}

static int on_header(nghttp2_session *ses, const nghttp2_frame *f, const uint8_t *name,
                     size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags, (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    grpc_stream *s = nghttp2_session_get_stream_user_data(ses, f->hd.stream_id);
    if (!s)
        return 0;
    if (nl == 5 && !memcmp(name, ":path", 5)) {
        if (vl >= sizeof s->path)
            vl = sizeof s->path - 1;
        memcpy(s->path, value, vl);
        s->path[vl] = '\0';
    } else if (nl == 7 && !memcmp(name, ":method", 7)) {
        s->bad_method = !(vl == 4 && !memcmp(value, "POST", 4));
    } else if (nl == 12 && !memcmp(name, "content-type", 12)) {
        s->bad_ctype = !(vl >= 16 && !memcmp(value, "application/grpc", 16) &&
                         (vl == 16 || value[16] == '+' || value[16] == ';'));
    }
    return 0;
}

static const grpc_method *find_method(const grpc_srv *g, const char *path)
{
    for (int i = 0; i < g->n_methods; i++)
        if (!strcmp(g->methods[i].path, path))
            return &g->methods[i];
    return NULL;
}

static void stream_open(grpc_stream *s)
{
    grpc_srv *g = s->c->g;
    if (s->bad_method || s->bad_ctype) {
        set_status(s, GRPC_INTERNAL, "not a gRPC request (POST with content-type "
                   "application/grpc)");
    } else if (!(s->m = find_method(g, s->path))) {
        char msg[PATH_MAX_LEN + 32];
        snprintf(msg, sizeof msg, "unknown method %s", s->path);
        set_status(s, GRPC_UNIMPLEMENTED, msg);
    } else if (!(s->st = s->m->open(s->m->cls, s))) {
        set_status(s, GRPC_UNAVAILABLE, "the service cannot take a stream now");
    } else {
        s->opened = 1;
        return;
    }
    s->done = 1;
    submit_trailers_only(s);
}

static void stream_half_close(grpc_stream *s)
{
    if (s->done || !s->opened)
        return;
    if (s->in_len) {
        stream_fail(s, GRPC_INVALID_ARGUMENT, "the stream ended inside a message", 1);
        return;
    }
    if (s->m->half_close)
        s->m->half_close(s->m->cls, s->st, s);
}

static int on_frame_recv(nghttp2_session *ses, const nghttp2_frame *f, void *ud)
{
    gconn *c = ud;
    if (!c->spoke) {   /* the preface and a frame came: no deadline any more */
        c->spoke = 1;
        evloop_timer_stop(c->g->l, &c->preface);
    }
    grpc_stream *s = nghttp2_session_get_stream_user_data(ses, f->hd.stream_id);
    if (!s)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        stream_open(s);
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        stream_half_close(s);
    return 0;
}

/* A message's length from its 5-byte prefix at p, or -1 when the stream
 * was failed for it (compressed, or over the limit). */
static long msg_len(grpc_stream *s, const uint8_t *p)
{
    size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
    if (p[0] != 0) {
        stream_fail(s, GRPC_UNIMPLEMENTED, "compressed messages are not accepted "
                    "(eldrd offers no grpc-encoding)", 1);
        return -1;
    }
    if (n > s->c->g->cfg.max_message) {
        char msg[128];
        snprintf(msg, sizeof msg, "a message of %zu bytes is over the limit of %zu", n,
                 s->c->g->cfg.max_message);
        stream_fail(s, GRPC_RESOURCE_EXHAUSTED, msg, 1);
        return -1;
    }
    return (long)n;
}

/* Take the complete messages out of s->in; stop when the stream ends. */
static void deliver(grpc_stream *s)
{
    size_t off = 0;
    long n;
    while (!s->done && s->in_len - off >= 5 && (n = msg_len(s, s->in + off)) >= 0) {
        if (s->in_len - off - 5 < (size_t)n)
            break;
        s->m->message(s->m->cls, s->st, s, s->in + off + 5, (size_t)n);
        off += 5 + (size_t)n;
    }
    if (s->done) {
        s->in_len = 0;
        return;
    }
    memmove(s->in, s->in + off, s->in_len - off);
    s->in_len -= off;
}

/* The messages that lie whole in a chunk, nothing held before them: given
 * to the service where they lie, no copy (a message within one DATA
 * frame, the common case). Returns the bytes taken. */
static size_t deliver_whole(grpc_stream *s, const uint8_t *data, size_t len)
{
    size_t off = 0;
    long n;
    while (!s->done && !s->in_len && len - off >= 5 && (n = msg_len(s, data + off)) >= 0 &&
           len - off - 5 >= (size_t)n) {
        s->m->message(s->m->cls, s->st, s, data + off + 5, (size_t)n);
        off += 5 + (size_t)n;
    }
    return s->done ? len : off;
}

static int on_data_chunk(nghttp2_session *ses, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags, (void)ud;
    grpc_stream *s = nghttp2_session_get_stream_user_data(ses, id);
    if (!s || s->done || !s->opened)
        return 0;   /* an answered stream's late data is dropped */
    size_t limit = s->c->g->cfg.max_message + 5, whole = deliver_whole(s, data, len);
    data += whole;
    len -= whole;
    while (len && !s->done) {
        /* hold at most one message (and its prefix) at a time */
        size_t want = s->in_len < 5 ? 5 - s->in_len : 0;
        if (!want) {
            const uint8_t *p = s->in;
            size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
            want = n + 5 > limit ? 0 : n + 5 - s->in_len;
        }
        size_t take = want && want < len ? want : len;
        if (s->in_len + take > s->in_cap) {
            /* the prefix known: room for the whole message at once */
            size_t cap = s->in_len >= 5 && want ? s->in_len + want : s->in_cap ? s->in_cap : 1024;
            while (cap < s->in_len + take)
                cap *= 2;
            if (cap > limit)
                cap = limit;
            if (cap < s->in_len + take)
                cap = s->in_len + take;
            uint8_t *p = realloc(s->in, cap);
            if (!p) {
                stream_fail(s, GRPC_RESOURCE_EXHAUSTED, "out of memory", 1);
                return 0;
            }
            s->in = p;
            s->in_cap = cap;
        }
        memcpy(s->in + s->in_len, data, take);
        s->in_len += take;
        data += take;
        len -= take;
        deliver(s);
    }
    return 0;
}

static void stream_unlink_free(gconn *c, grpc_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    atomic_fetch_sub(&c->g->streams, 1);
    free(s->in);
    out_give(c, s->out, s->out_cap);
    free(s);
}

static int on_stream_close(nghttp2_session *ses, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    gconn *c = ud;
    grpc_stream *s = nghttp2_session_get_stream_user_data(ses, id);
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(ses, id, NULL);
    if (!s->done && s->opened && s->m->gone)
        s->m->gone(s->m->cls, s->st);
    stream_unlink_free(c, s);
    return 0;
}

static int on_invalid_frame(nghttp2_session *ses, const nghttp2_frame *f, int err, void *ud)
{
    (void)ses, (void)f, (void)err;
    gconn *c = ud;
    atomic_fetch_add(&c->g->bad_frames, 1);
    return 0;
}

/* ---- connections ---- */

static nghttp2_session_callbacks *callbacks(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
    return cb;
}

static void conn_close(gconn *c)
{
    grpc_srv *g = c->g;
    if (c->dead)
        return;
    c->dead = 1;
    evloop_timer_stop(g->l, &c->preface);
    evloop_io_del(g->l, &c->io);
    close(c->fd);
    /* nghttp2_session_del does not call on_stream_close: tell the
     * services of the streams still open here */
    while (c->streams) {
        grpc_stream *s = c->streams;
        if (!s->done && s->opened && s->m->gone)
            s->m->gone(s->m->cls, s->st);
        stream_unlink_free(c, s);
    }
    nghttp2_session_del(c->ses);
    c->ses = NULL;
    while (c->n_spare > 0)
        free(c->spare[--c->n_spare]);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(&g->nconns, 1);
    metrics_conn_closed(g->cfg.met, g->slot);
    free(c->wbuf);
    c->wbuf = NULL;
    /* freed after the turn (flush_dirty): a caller up the stack may
     * still look at c->dead */
    if (!c->dirty) {
        c->dirty = 1;
        c->dnext = g->dirty;
        g->dirty = c;
    }
}

/* Write what is pending; 1 when all of it went, 0 when the socket is
 * full, -1 on an error. */
static int write_pending(gconn *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        c->woff += (size_t)n;
    }
    c->woff = c->wlen = 0;
    return 1;
}

static int keep(gconn *c, const uint8_t *p, size_t n)
{
    if (c->wlen + n > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 16384;
        while (cap < c->wlen + n)
            cap *= 2;
        uint8_t *w = realloc(c->wbuf, cap);
        if (!w)
            return -1;
        c->wbuf = w;
        c->wcap = cap;
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
    return 0;
}

/* Send what nghttp2 has, as long as the socket takes it; watch for
 * EPOLLOUT while bytes wait. Closes the connection when it is over.
 * nghttp2 hands out about one frame per mem_send: the frames are gathered
 * (up to FLUSH_BATCH bytes) and go in one send, not one send a frame (a
 * pick's answer is a HEADERS and two DATA frames, its stream's end a
 * trailer; one syscall each cost more than the pick itself). */
#define FLUSH_BATCH (256u << 10)
static void conn_flush(gconn *c)
{
    if (c->dead)
        return;
    int rc = write_pending(c);
    while (rc == 1) {
        while (c->wlen < FLUSH_BATCH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->ses, &data);
            if (n < 0 || (n > 0 && keep(c, data, (size_t)n) < 0)) {
                rc = -1;
                break;
            }
            if (n == 0)
                break;
        }
        if (rc < 0 || !c->wlen)
            break;
        rc = write_pending(c);
    }
    if (rc < 0 || (rc == 1 && !c->wlen && !nghttp2_session_want_read(c->ses) &&
                   !nghttp2_session_want_write(c->ses))) {
        conn_close(c);
        return;
    }
    uint32_t ev = EPOLLIN | EPOLLRDHUP | (c->wlen ? EPOLLOUT : 0);
    if (ev != c->io.events)
        evloop_io_mod(c->g->l, &c->io, ev);
}

static void conn_read(gconn *c)
{
    uint8_t buf[READ_CHUNK];
    for (int i = 0; i < READS_PER_TURN && !c->dead; i++) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            conn_close(c);
            return;
        }
        if (nghttp2_session_mem_recv(c->ses, buf, (size_t)n) < 0) {
            /* a protocol error: nghttp2 has queued its GOAWAY; send it */
            atomic_fetch_add(&c->g->bad_frames, 1);
            conn_flush(c);
            conn_close(c);
            return;
        }
        if ((size_t)n < sizeof buf)
            return;
    }
    evloop_again(c->g->l);   /* more may be waiting: a turn at once */
}

static void conn_io(evloop *l, ev_io *w, uint32_t events)
{
    (void)l;
    gconn *c = w->cls;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        conn_read(c);
    if (!c->dead)
        conn_flush(c);
}

/* A connection that sent no frame within the preface timeout: closed
 * (a client that connects and says nothing would hold a descriptor). */
static void preface_late(evloop *l, ev_timer *t)
{
    (void)l;
    gconn *c = t->cls;
    atomic_fetch_add(&c->g->preface_timeouts, 1);
    conn_close(c);
}

/* "ip:port", "[ip6]:port", or "" for another family. */
static void peer_text(const struct sockaddr_storage *ss, char *buf, size_t n)
{
    buf[0] = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        snprintf(buf, n, "%s:%d", ip, ntohs(a->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss;
        char ip[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        snprintf(buf, n, "[%s]:%d", ip, ntohs(a->sin6_port));
    }
}

/* A connection closed at accept: counted by reason, logged at most once
 * a second (a flood of connections cannot flood the log). */
static void refuse(grpc_srv *g, int fd, const struct sockaddr_storage *ss, int reason)
{
    close(fd);
    atomic_fetch_add(&g->refused_conns, 1);
    metrics_refused(g->cfg.met, g->slot, reason);
    if (!log_once_a_second(&g->last_refusal_log))
        return;
    char peer[64];
    peer_text(ss, peer, sizeof peer);
    if (reason == REFUSED_MAX_CONNS)
        log_msg("refused a connection from %s on the %s listener: it holds %d already "
                "(--max-conns)", peer, g->cfg.listener ? g->cfg.listener : "gRPC",
                g->cfg.max_conns);
    else
        log_msg("refused a connection from %s on the %s listener: its state could not be "
                "made (out of memory)", peer, g->cfg.listener ? g->cfg.listener : "gRPC");
}

static void conn_new(grpc_srv *g, int fd, const struct sockaddr_storage *ss)
{
    gconn *c = calloc(1, sizeof *c);
    nghttp2_session_callbacks *cb = callbacks();
    if (!c || !cb || nghttp2_session_server_new(&c->ses, cb, c) != 0) {
        if (cb)
            nghttp2_session_callbacks_del(cb);
        free(c);
        refuse(g, fd, ss, REFUSED_SETUP);
        return;
    }
    nghttp2_session_callbacks_del(cb);
    c->g = g;
    c->fd = fd;
    peer_text(ss, c->peer, sizeof c->peer);
    nghttp2_settings_entry iv[2] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, g->cfg.max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    nghttp2_submit_settings(c->ses, NGHTTP2_FLAG_NONE, iv, 2);
    /* the connection's own window too: a 150 KB body in one go */
    nghttp2_session_set_local_window_size(c->ses, NGHTTP2_FLAG_NONE, 0, 4 << 20);
    if (evloop_io_add(g->l, &c->io, fd, EPOLLIN | EPOLLRDHUP, conn_io, c) < 0) {
        nghttp2_session_del(c->ses);
        free(c);
        refuse(g, fd, ss, REFUSED_SETUP);
        return;
    }
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    evloop_timer_init(&c->preface, preface_late, c);
    if (g->cfg.preface_timeout > 0)
        evloop_timer_start(g->l, &c->preface, g->cfg.preface_timeout);
    atomic_fetch_add(&g->nconns, 1);
    atomic_fetch_add(&g->conns_total, 1);
    metrics_conn_opened(g->cfg.met, g->slot);
    conn_flush(c);
}

static void on_accept(evloop *l, ev_io *w, uint32_t events)
{
    (void)l, (void)events;
    grpc_srv *g = w->cls;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(g->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;   /* EAGAIN, or EMFILE: the next turn tries again */
        if (atomic_load(&g->nconns) >= g->cfg.max_conns) {
            refuse(g, fd, &ss, REFUSED_MAX_CONNS);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn_new(g, fd, &ss);
    }
}

/* After each turn: flush the connections whose streams got output. */
static int flush_dirty(evloop *l, void *cls)
{
    (void)l;
    grpc_srv *g = cls;
    while (g->dirty) {
        gconn *c = g->dirty;
        g->dirty = c->dnext;
        c->dirty = 0;
        if (c->dead)
            free(c);
        else
            conn_flush(c);
    }
    return -1;
}

static int listen_on(grpc_srv *g, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (void *)&ss;
    struct sockaddr_in6 *a6 = (void *)&ss;
    if (inet_pton(AF_INET, g->cfg.host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)g->cfg.port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, g->cfg.host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)g->cfg.port);
        sl = sizeof *a6;
    } else {
        snprintf(err, errlen, "--ext-proc: %s is not a numeric IPv4 or IPv6 address",
                 g->cfg.host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
        snprintf(err, errlen, "--ext-proc %s:%d: %s", g->cfg.host, g->cfg.port,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    g->port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    g->lfd = fd;
    return 0;
}

grpc_srv *grpc_new(evloop *l, const grpc_config *cfg, char *err, size_t errlen)
{
    grpc_srv *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->l = l;
    g->cfg = *cfg;
    if (!g->cfg.max_message)
        g->cfg.max_message = 4u << 20;
    if (!g->cfg.max_streams)
        g->cfg.max_streams = 1024;
    if (!g->cfg.max_conns)
        g->cfg.max_conns = 1024;
    if (!g->cfg.max_pending)
        g->cfg.max_pending = 16u << 20;
    g->lfd = -1;
    g->slot = g->cfg.met ? metrics_listener_add(g->cfg.met, g->cfg.listener ? g->cfg.listener
                                                : "grpc", 1u << REFUSED_MAX_CONNS |
                                                1u << REFUSED_SETUP, g->cfg.max_conns)
                         : -1;
    if (listen_on(g, err, errlen) < 0 ||
        evloop_io_add(l, &g->lio, g->lfd, EPOLLIN, on_accept, g) < 0) {
        if (g->lfd >= 0 && !err[0])
            snprintf(err, errlen, "--ext-proc: cannot watch the listener: %s", strerror(errno));
        if (g->lfd >= 0)
            close(g->lfd);
        free(g);
        return NULL;
    }
    evloop_after_add(l, &g->after, flush_dirty, g);
    metrics_listener_fd(g->cfg.met, g->slot, g->lfd);
    return g;
}

int grpc_add_method(grpc_srv *g, const grpc_method *m)
{
    if (g->n_methods >= GRPC_METHODS_MAX)
        return -1;
    g->methods[g->n_methods++] = *m;
    return 0;
}

int grpc_port(const grpc_srv *g)
{
    return g->port;
}

void grpc_get_stats(const grpc_srv *g, grpc_stats *st)
{
    st->streams = atomic_load(&g->streams);
    st->conns = atomic_load(&g->nconns);
    st->streams_total = atomic_load(&g->streams_total);
    st->conns_total = atomic_load(&g->conns_total);
    st->refused_conns = atomic_load(&g->refused_conns);
    st->bad_frames = atomic_load(&g->bad_frames);
    st->resets = atomic_load(&g->resets);
    st->preface_timeouts = atomic_load(&g->preface_timeouts);
}

void grpc_quiesce(grpc_srv *g)
{
    if (g->quiescing)
        return;
    g->quiescing = 1;
    for (gconn *c = g->conns; c; c = c->next) {
        nghttp2_submit_goaway(c->ses, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->ses),
                              NGHTTP2_NO_ERROR, NULL, 0);
        mark_dirty(c);
    }
}

void grpc_free(grpc_srv *g)
{
    if (!g)
        return;
    while (g->conns)
        conn_close(g->conns);
    flush_dirty(g->l, g);   /* frees the closed connections still listed */
    evloop_hook_del(g->l, &g->after);
    if (g->lfd >= 0) {
        metrics_listener_fd(g->cfg.met, g->slot, -1);
        evloop_io_del(g->l, &g->lio);
        close(g->lfd);
    }
    free(g);
}
