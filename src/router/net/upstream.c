/* upstream.c - the proxy's HTTP/1.1 client (upstream.h). */
#include "upstream.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "g9.h"
#include "upstream_parse.h"

#define READ_CHUNK (64 * 1024)
#define MAX_EVENTS 256

typedef struct conn conn;

typedef struct origin {
    char host[256], port[8];
    char fixed[400];             /* "Host: ...\r\nContent-Type: ...\r\nContent-Length: " */
    size_t fixed_len;
    struct sockaddr_storage addr;
    socklen_t addr_len;          /* 0: to be resolved */
    conn *idle;                  /* kept connections, a stack */
    int n_idle;
} origin;

enum { C_CONNECTING, C_BUSY, C_IDLE };

struct conn {
    ev_io io;                    /* first: the loop hands back &io */
    int fd;                      /* -1 once closed (freed at the next turn) */
    int origin;
    int state;
    int used;                    /* has carried a whole answer before */
    int want_out;                /* EPOLLOUT is in its interest set */
    int paused;                  /* not read: the transfer's reader is full (upc_pause) */
    double idle_since;           /* monotonic s it went idle (C_IDLE) */
    upx *x;                      /* the transfer on it (C_CONNECTING, C_BUSY) */
    upa ans;
    conn *next_idle;
    conn *prev, *next;           /* every open connection */
    conn *next_dead;
};

struct upx {
    int origin;
    conn *k;
    char *head;                  /* the request line and headers */
    size_t head_len;
    const char *body;
    size_t body_len;
    size_t sent;                 /* of head + body */
    int retried;
    int status;
    up_handler h;
    void *cls;
    int failed;                  /* on the failed list: reported at the next turn */
    up_result fail_res;
    char fail_why[200];
    upx *next_failed;
};

struct upc {
    evloop *loop;
    ev_hook turn;                /* reports failed starts, frees closed connections */
    ev_timer idle_timer;         /* closes connections idle longer than idle_s */
    double idle_s;               /* 0: kept for ever */
    origin *origins;
    int n_origins;
    conn *all, *dead;
    upx *failed;                 /* transfers that could not start */
    int n_open;
    char buf[READ_CHUNK];
};

static void conn_event(evloop *l, ev_io *w, uint32_t events);
static void idle_tick(evloop *l, ev_timer *t);

/* ---- connections -------------------------------------------------------- */

static int interest(upc *c, conn *k, int out, int op)
{
    uint32_t ev = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0);
    k->want_out = out;
    if (k->paused)
        return 0;   /* not watched while paused: upc_resume adds it back */
    if (op == EPOLL_CTL_ADD)
        return evloop_io_add(c->loop, &k->io, k->fd, ev, conn_event, c);
    return evloop_io_mod(c->loop, &k->io, ev);
}

/* Close k (it leaves every list; freed at the next turn, since the
 * callback that closed it may still hold it). */
static void conn_close(upc *c, conn *k)
{
    if (k->fd < 0)
        return;
    evloop_io_del(c->loop, &k->io);
    close(k->fd);
    k->fd = -1;
    if (k->state == C_IDLE) {
        origin *o = &c->origins[k->origin];
        for (conn **pp = &o->idle; *pp; pp = &(*pp)->next_idle)
            if (*pp == k) {
                *pp = k->next_idle;
                o->n_idle--;
                break;
            }
    }
    if (k->prev)
        k->prev->next = k->next;
    else
        c->all = k->next;
    if (k->next)
        k->next->prev = k->prev;
    if (k->x)
        k->x->k = NULL;
    k->x = NULL;
    c->n_open--;
    k->next_dead = c->dead;
    c->dead = k;
}

static void free_dead(upc *c)
{
    while (c->dead) {
        conn *k = c->dead;
        c->dead = k->next_dead;
        upa_free(&k->ans);
        free(k);
    }
}

static int resolve(origin *o, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int rc = getaddrinfo(o->host, o->port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(why, whylen, "cannot resolve %.100s: %s", o->host, gai_strerror(rc));
        return -1;
    }
    memcpy(&o->addr, ai->ai_addr, ai->ai_addrlen);
    o->addr_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* A new connection to origin i, connecting. NULL with why. */
static conn *conn_open(upc *c, int i, char *why, size_t whylen)
{
    origin *o = &c->origins[i];
    if (!o->addr_len && resolve(o, why, whylen) < 0)
        return NULL;
    conn *k = calloc(1, sizeof *k);
    if (!k) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    k->origin = i;
    k->state = C_CONNECTING;
    k->fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (k->fd < 0 || setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
        (connect(k->fd, (struct sockaddr *)&o->addr, o->addr_len) < 0 && errno != EINPROGRESS) ||
        interest(c, k, 1, EPOLL_CTL_ADD) < 0) {
        snprintf(why, whylen, "cannot connect: %s", strerror(errno));
        o->addr_len = 0;   /* resolved again next time */
        if (k->fd >= 0)
            close(k->fd);
        free(k);
        return NULL;
    }
    k->next = c->all;
    if (c->all)
        c->all->prev = k;
    c->all = k;
    c->n_open++;
    return k;
}

/* ---- transfers ---------------------------------------------------------- */

static void xfer_end(upc *c, upx *x, up_result res, const char *why)
{
    (void)c;
    if (x->k) {
        x->k->x = NULL;
        x->k = NULL;
    }
    x->h.on_done(x->cls, res, x->status, why ? why : "");
    free(x->head);
    free(x);
}

/* Write what is left of x's request; EPOLLOUT while some is. */
static int send_more(upc *c, conn *k, char *why, size_t whylen)
{
    upx *x = k->x;
    size_t total = x->head_len + x->body_len;
    while (x->sent < total) {
        struct iovec iov[2];
        int n = 0;
        if (x->sent < x->head_len)
            iov[n++] = (struct iovec){x->head + x->sent, x->head_len - x->sent};
        size_t boff = x->sent > x->head_len ? x->sent - x->head_len : 0;
        if (x->body_len > boff)
            iov[n++] = (struct iovec){(char *)x->body + boff, x->body_len - boff};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return k->want_out ? 0 : interest(c, k, 1, EPOLL_CTL_MOD);
        if (w < 0) {
            snprintf(why, whylen, "sending the request: %s", strerror(errno));
            return -1;
        }
        x->sent += (size_t)w;
    }
    return k->want_out ? interest(c, k, 0, EPOLL_CTL_MOD) : 0;
}

/* Put x on a kept connection to its origin, or a new one. */
static int dispatch(upc *c, upx *x, char *why, size_t whylen)
{
    origin *o = &c->origins[x->origin];
    conn *k;
    while ((k = o->idle)) {
        o->idle = k->next_idle;
        o->n_idle--;
        k->state = C_BUSY;
        k->x = x;
        x->k = k;
        x->sent = 0;
        upa_reset(&k->ans);
        if (send_more(c, k, why, whylen) == 0)
            return 0;
        conn_close(c, k);   /* closed by the server meanwhile: the next one */
    }
    x->sent = 0;
    if (!(k = conn_open(c, x->origin, why, whylen)))
        return -1;
    k->x = x;
    x->k = k;
    return 0;   /* the request goes when the connection is made */
}

/* The transfer on k failed before any byte of its answer on a kept
 * connection: the server closed it meanwhile, so send it once more on a
 * new one. 1 when resent. */
static int resend(upc *c, conn *k)
{
    upx *x = k->x;
    if (!x || !k->used || x->retried || k->ans.seen)
        return 0;
    x->retried = 1;
    x->status = 0;
    conn_close(c, k);
    char why[256];
    if (dispatch(c, x, why, sizeof why) < 0) {
        xfer_end(c, x, UP_CONNECT, why);
        return 1;
    }
    return 1;
}

static void on_status(void *cls, int status)
{
    upx *x = cls;
    x->status = status;
    if (x->h.on_status)
        x->h.on_status(x->cls, status);
}

static int on_body(void *cls, const char *d, size_t n)
{
    upx *x = cls;
    return x->h.on_body(x->cls, d, n);
}

/* The answer on k is complete: keep the connection when it may carry
 * another (and nothing else came), then report. */
static void answered(upc *c, conn *k, int extra)
{
    upx *x = k->x;
    origin *o = &c->origins[k->origin];
    if (k->ans.keep_alive && !extra && x->sent == x->head_len + x->body_len &&
        o->n_idle < UPSTREAM_IDLE_PER_ORIGIN) {
        k->x = NULL;
        x->k = NULL;
        k->state = C_IDLE;
        k->idle_since = evloop_now();
        k->used = 1;
        k->next_idle = o->idle;
        o->idle = k;
        o->n_idle++;
        if (k->want_out)
            interest(c, k, 0, EPOLL_CTL_MOD);
    } else {
        conn_close(c, k);
    }
    xfer_end(c, x, UP_OK, NULL);
}

static void conn_failed(upc *c, conn *k, up_result res, const char *why)
{
    upx *x = k->x;
    if (res == UP_IO && resend(c, k))
        return;
    conn_close(c, k);
    if (x)
        xfer_end(c, x, res, why);
}

static void readable(upc *c, conn *k)
{
    char why[256];
    ssize_t n = recv(k->fd, c->buf, sizeof c->buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (k->state == C_IDLE) {   /* closed by the server, or bytes nobody asked for */
        conn_close(c, k);
        return;
    }
    if (n < 0) {
        snprintf(why, sizeof why, "reading the answer: %s", strerror(errno));
        conn_failed(c, k, UP_IO, why);
        return;
    }
    if (n == 0) {
        if (upa_close(&k->ans, why, sizeof why) == UPA_DONE)
            answered(c, k, 1);
        else
            conn_failed(c, k, UP_IO, why);
        return;
    }
    upx *x = k->x;
    upa_sink s = {on_status, on_body, x};
    size_t used;
    upa_rc rc = upa_feed(&k->ans, c->buf, (size_t)n, &used, &s, why, sizeof why);
    if (rc == UPA_DONE)
        answered(c, k, used < (size_t)n);
    else if (rc != UPA_MORE)
        conn_failed(c, k, rc == UPA_STOPPED ? UP_ABORTED : rc == UPA_TOO_BIG ? UP_TOO_BIG
                                                                               : UP_PROTOCOL,
                    why);
}

static void writable(upc *c, conn *k, uint32_t events)
{
    char why[256];
    if (k->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (!err && !(events & EPOLLOUT))
            return;   /* not yet */
        if (err || events & (EPOLLERR | EPOLLHUP)) {
            if (!err)
                err = ECONNREFUSED;
            snprintf(why, sizeof why, "cannot connect: %s", strerror(err));
            c->origins[k->origin].addr_len = 0;
            conn_failed(c, k, UP_CONNECT, why);
            return;
        }
        k->state = C_BUSY;
    }
    if (k->x && send_more(c, k, why, sizeof why) < 0)
        conn_failed(c, k, UP_IO, why);
}

/* ---- the API ------------------------------------------------------------ */

/* Each turn, before the loop sleeps: transfers that could not start are
 * reported (callbacks may add more: those wait for the next turn, which
 * then does not sleep), and connections closed since are freed. */
static int upc_turn(evloop *l, void *cls)
{
    (void)l;
    upc *c = cls;
    upx *f = c->failed;
    c->failed = NULL;
    while (f) {
        upx *next = f->next_failed;
        xfer_end(c, f, f->fail_res, f->fail_why);
        f = next;
    }
    free_dead(c);
    return c->failed ? 0 : -1;
}

upc *upc_new(evloop *loop, char *err, size_t errlen)
{
    upc *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->loop = loop;
    evloop_hook_add(loop, &c->turn, upc_turn, c);
    evloop_timer_init(&c->idle_timer, idle_tick, c);
    return c;
}

void upc_free(upc *c)
{
    if (!c)
        return;
    while (c->all) {
        conn *k = c->all;
        upx *x = k->x;
        conn_close(c, k);
        if (x) {
            free(x->head);
            free(x);
        }
    }
    while (c->failed) {
        upx *x = c->failed;
        c->failed = x->next_failed;
        free(x->head);
        free(x);
    }
    free_dead(c);
    evloop_hook_del(c->loop, &c->turn);
    evloop_timer_stop(c->loop, &c->idle_timer);
    free(c->origins);
    free(c);
}

int upc_origin(upc *c, const char *url, char *err, size_t errlen)
{
    const char *h = url;
    if (strncmp(h, "http://", 7)) {
        snprintf(err, errlen, "'%s' is not an http://HOST:PORT URL", url);
        return -1;
    }
    h += 7;
    size_t n = strlen(h);
    while (n && h[n - 1] == '/')
        n--;
    const char *colon = NULL;
    if (n && *h == '[') {   /* [v6]:port */
        const char *rb = memchr(h, ']', n);
        colon = rb && rb + 1 < h + n && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(h, ':', n);
    }
    const char *hs = *h == '[' ? h + 1 : h;
    size_t hl = colon ? (size_t)(colon - hs) - (*h == '[') : 0;
    size_t pl = colon ? (size_t)(h + n - colon - 1) : 0;
    int port_ok = pl >= 1 && pl <= 5 && strspn(colon + 1, "0123456789") >= pl &&
                  atoi(colon + 1) >= 1 && atoi(colon + 1) <= 65535;
    if (!colon || hl == 0 || hl >= sizeof c->origins->host || !port_ok ||
        memchr(hs, '/', hl) || memchr(colon + 1, '/', pl)) {
        snprintf(err, errlen, "'%s' is not an http://HOST:PORT URL (a host, a port from 1 to "
                 "65535, no path)", url);
        return -1;
    }
    origin *o = realloc(c->origins, (size_t)(c->n_origins + 1) * sizeof *o);
    if (!o) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->origins = o;
    o = &c->origins[c->n_origins];
    memset(o, 0, sizeof *o);
    memcpy(o->host, hs, hl);
    memcpy(o->port, colon + 1, pl);
    int v6 = memchr(hs, ':', hl) != NULL;
    o->fixed_len = (size_t)snprintf(o->fixed, sizeof o->fixed,
                                    "Host: %s%s%s:%s\r\nContent-Type: application/json\r\n"
                                    "Content-Length: ",
                                    v6 ? "[" : "", o->host, v6 ? "]" : "", o->port);
    return c->n_origins++;
}

/* method: "POST " or "GET " (with its space). */
static upx *request(upc *c, const char *method, int origin_i, const char *path,
                    const char *request_id, const char *auth, const char *body, size_t len,
                    const up_handler *h, void *cls)
{
    origin *o = &c->origins[origin_i];
    upx *x = calloc(1, sizeof *x);
    size_t pl = strlen(path), il = request_id ? strlen(request_id) : 0;
    size_t al = auth ? strlen(auth) : 0;
    size_t cap = pl + o->fixed_len + il + al + 100;
    if (!x || !(x->head = malloc(cap))) {
        free(x);
        return NULL;
    }
    /* built by hand: one request line and four to six headers, every request */
    char *w = x->head, digits[24];
    int nd = g9_int((long long)len, digits);
    size_t ml = strlen(method);
    memcpy(w, method, ml);
    memcpy(w += ml, path, pl);
    memcpy(w += pl, " HTTP/1.1\r\n", 11);
    memcpy(w += 11, o->fixed, o->fixed_len);
    w += o->fixed_len;
    memcpy(w, digits, (size_t)nd);
    w += nd;
    memcpy(w, "\r\n", 2);
    w += 2;
    if (request_id) {
        memcpy(w, "X-Request-Id: ", 14);
        memcpy(w += 14, request_id, il);
        memcpy(w += il, "\r\n", 2);
        w += 2;
    }
    if (auth) {
        memcpy(w, "Authorization: ", 15);
        memcpy(w += 15, auth, al);
        memcpy(w += al, "\r\n", 2);
        w += 2;
    }
    memcpy(w, "\r\n", 2);
    x->head_len = (size_t)(w + 2 - x->head);
    x->origin = origin_i;
    x->body = body;
    x->body_len = len;
    x->h = *h;
    x->cls = cls;
    if (dispatch(c, x, x->fail_why, sizeof x->fail_why) < 0) {
        /* reported by the loop, never from inside the caller's call */
        if (x->k)
            conn_close(c, x->k);
        x->failed = 1;
        x->fail_res = UP_CONNECT;
        x->next_failed = c->failed;
        c->failed = x;
        evloop_again(c->loop);
    }
    return x;
}

upx *upc_post(upc *c, int origin_i, const char *path, const char *request_id, const char *body,
              size_t len, const up_handler *h, void *cls)
{
    return request(c, "POST ", origin_i, path, request_id, NULL, body, len, h, cls);
}

upx *upc_post_auth(upc *c, int origin_i, const char *path, const char *request_id,
                   const char *auth, const char *body, size_t len, const up_handler *h,
                   void *cls)
{
    return request(c, "POST ", origin_i, path, request_id, auth, body, len, h, cls);
}

upx *upc_get(upc *c, int origin_i, const char *path, const up_handler *h, void *cls)
{
    return request(c, "GET ", origin_i, path, NULL, NULL, "", 0, h, cls);
}

void upc_pause(upc *c, upx *x)
{
    conn *k = x->k;
    if (!k || k->paused || k->fd < 0)
        return;
    evloop_io_del(c->loop, &k->io);
    k->paused = 1;
}

void upc_resume(upc *c, upx *x)
{
    conn *k = x->k;
    if (!k || !k->paused || k->fd < 0)
        return;
    k->paused = 0;
    if (interest(c, k, k->want_out, EPOLL_CTL_ADD) < 0) {
        /* reported by the loop, never from inside the caller's call */
        conn_close(c, k);
        x->failed = 1;
        x->fail_res = UP_IO;
        snprintf(x->fail_why, sizeof x->fail_why, "cannot watch the connection again");
        x->next_failed = c->failed;
        c->failed = x;
        evloop_again(c->loop);
    }
}

/* Idle connections past idle_s are closed: an instance's own keep-alive
 * timeout may be shorter (a request on a connection it closed is resent
 * once), but a pool that only grows holds file descriptors for ever. */
static void idle_tick(evloop *l, ev_timer *t)
{
    upc *c = t->cls;
    double now = evloop_now();
    for (int i = 0; i < c->n_origins; i++) {
        origin *o = &c->origins[i];
        conn *k = o->idle, *next;
        for (; k; k = next) {
            next = k->next_idle;
            if (now - k->idle_since >= c->idle_s)
                conn_close(c, k);
        }
    }
    evloop_timer_start(l, t, c->idle_s / 4 < 1 ? c->idle_s / 4 : 1);
}

void upc_set_idle(upc *c, double seconds)
{
    c->idle_s = seconds;
    evloop_timer_stop(c->loop, &c->idle_timer);
    if (seconds > 0)
        evloop_timer_start(c->loop, &c->idle_timer, seconds / 4 < 1 ? seconds / 4 : 1);
}

void upc_cancel(upc *c, upx *x)
{
    if (x->failed)
        for (upx **pp = &c->failed; *pp; pp = &(*pp)->next_failed)
            if (*pp == x) {
                *pp = x->next_failed;
                break;
            }
    if (x->k)
        conn_close(c, x->k);
    free(x->head);
    free(x);
}

static void conn_event(evloop *l, ev_io *w, uint32_t e)
{
    (void)l;
    upc *c = w->cls;
    conn *k = (conn *)w;
    if (k->state == C_CONNECTING || (e & EPOLLOUT && k->want_out))
        writable(c, k, e);
    if (k->fd >= 0 && k->state != C_CONNECTING && e & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR))
        readable(c, k);
}

int upc_connected(const upx *x)
{
    return x->k && x->k->state != C_CONNECTING;
}

int upc_open_connections(const upc *c)
{
    return c->n_open;
}
