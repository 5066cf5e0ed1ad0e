/* test_router_upstream.c - the proxy's HTTP/1.1 client (upstream.h) and
 * its answer reader (upstream_parse.h).
 *
 * The reader: answers built here from known bodies (Content-Length,
 * chunked with random chunk sizes, extensions and trailers, read until
 * the close), fed in random pieces down to single bytes, must give back
 * exactly the body, the status and where the answer ended; each framing
 * error is refused with its own message. The client: against a small
 * server in a thread of this test (poll, one scripted behaviour at a
 * time), requests arrive with their headers and body intact, connections
 * are kept (one connection carries many requests), a kept connection the
 * server closed is replaced without losing the request, a refused
 * connection and an answer cut short are reported once each, a cancelled
 * transfer reports nothing, and 64 transfers at once all end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "upstream.h"
#include "upstream_parse.h"
#include "util_replay.h"

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_upstream_answer.c"

/* ---- the reader --------------------------------------------------------- */

typedef struct got {
    char body[70000];
    size_t len;
    int status, statuses;
    int stop_after;   /* on_body refuses once this many bytes came (0: never) */
} got;

static void got_status(void *cls, int status)
{
    got *g = cls;
    g->status = status;
    g->statuses++;
}

static int got_body(void *cls, const char *d, size_t n)
{
    got *g = cls;
    if (g->stop_after && g->len + n >= (size_t)g->stop_after)
        return -1;
    assert_true(g->len + n <= sizeof g->body);
    memcpy(g->body + g->len, d, n);
    g->len += n;
    return 0;
}

static unsigned rng_next(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

/* Feed text in pieces of 1..max bytes (max 0: whole). Returns the last
 * code; *used the bytes the answer took. */
static upa_rc feed_pieces(upa *a, const char *text, size_t n, size_t max, unsigned *seed,
                          got *g, size_t *used, char *why)
{
    upa_sink s = {got_status, got_body, g};
    upa_rc rc = UPA_MORE;
    size_t at = 0;
    while (at < n && rc == UPA_MORE) {
        size_t take = max ? rng_next(seed) % max + 1 : n;
        if (take > n - at)
            take = n - at;
        size_t u;
        rc = upa_feed(a, text + at, take, &u, &s, why, 256);
        at += u;
    }
    *used = at;
    return rc;
}

static void test_reader_random_framings(void **state)
{
    (void)state;
    static char body[20000], text[60000];
    unsigned seed = 7;
    for (int round = 0; round < 300; round++) {
        size_t blen = rng_next(&seed) % (round % 10 == 0 ? 20000 : 300);
        for (size_t i = 0; i < blen; i++)
            body[i] = (char)(rng_next(&seed) & 0xff);
        int framing = round % 3;   /* 0 length, 1 chunked, 2 until close */
        size_t n = (size_t)sprintf(text, "HTTP/1.%d %d OK\r\nX-A: b\r\n", framing == 2 ? 0 : 1,
                                   200 + round % 3);
        if (framing == 0)
            n += (size_t)sprintf(text + n, "content-LENGTH:  %zu \r\n\r\n", blen);
        else if (framing == 1)
            n += (size_t)sprintf(text + n, "Transfer-Encoding: Chunked\r\n\r\n");
        else
            n += (size_t)sprintf(text + n, "\r\n");
        if (framing == 1) {
            for (size_t at = 0; at < blen;) {
                size_t c = rng_next(&seed) % 700 + 1;
                if (c > blen - at)
                    c = blen - at;
                n += (size_t)sprintf(text + n, round % 2 ? "%zx;name=\"v\"\r\n" : "%zX\r\n", c);
                memcpy(text + n, body + at, c);
                n += c;
                n += (size_t)sprintf(text + n, "\r\n");
                at += c;
            }
            n += (size_t)sprintf(text + n, round % 4 == 1 ? "0\r\nX-T: 1\r\n\r\n" : "0\r\n\r\n");
        } else {
            memcpy(text + n, body, blen);
            n += blen;
        }
        size_t answer_len = n;
        if (framing != 2)
            n += (size_t)sprintf(text + n, "HTTP/1.1 200 OK\r\n");   /* the next answer's */
        size_t max = (size_t[]){0, 1, 3, 64, 4096}[round % 5];
        upa a = {0};
        got *g = calloc(1, sizeof *g);
        char why[256] = "";
        size_t used;
        upa_rc rc = feed_pieces(&a, text, n, max, &seed, g, &used, why);
        if (framing == 2) {
            assert_int_equal(rc, UPA_MORE);
            assert_int_equal(upa_close(&a, why, sizeof why), UPA_DONE);
            assert_int_equal(a.keep_alive, 0);
        } else {
            if (rc != UPA_DONE)
                fail_msg("round %d: %d (%s)", round, rc, why);
            assert_int_equal(used, answer_len);
            assert_int_equal(a.keep_alive, 1);
        }
        assert_int_equal(g->statuses, 1);
        assert_int_equal(g->status, 200 + round % 3);
        assert_int_equal(g->len, blen);
        assert_memory_equal(g->body, body, blen);
        upa_free(&a);
        free(g);
    }
}

static void test_reader_heads(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int status, keep_alive;
        size_t body;
    } cases[] = {
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, 1, 2},
        {"HTTP/1.1 204 No Content\r\n\r\n", 204, 1, 0},
        {"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", 200, 0,
         0},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", 200, 1, 1},
        {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 200, 0, 1},
        {"HTTP/1.1 200 OK\nContent-Length: 3\n\nabc", 200, 1, 3},   /* bare LF line ends */
        {"HTTP/1.1 503\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 503, 1, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        upa a = {0};
        got *g = calloc(1, sizeof *g);
        char why[256] = "";
        size_t used;
        unsigned seed = 1;
        upa_rc rc = feed_pieces(&a, cases[i].text, strlen(cases[i].text), 2, &seed, g, &used, why);
        if (rc != UPA_DONE || g->status != cases[i].status || a.keep_alive != cases[i].keep_alive ||
            g->len != cases[i].body)
            fail_msg("case %zu: rc %d status %d keep %d body %zu (%s)", i, rc, g->status,
                     a.keep_alive, g->len, why);
        upa_free(&a);
        free(g);
    }
}

static void test_reader_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        upa_rc rc;
        const char *why;
    } cases[] = {
        {"HTTP/2 200 OK\r\n\r\n", UPA_ERROR, "status line"},
        {"HTTP/1.1 2000 OK\r\n\r\n", UPA_ERROR, "status line"},
        {"SSH-2.0-OpenSSH\r\n\r\n", UPA_ERROR, "status line"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", UPA_ERROR,
         "two different"},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", UPA_ERROR, "Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", UPA_ERROR,
         "Content-Length"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", UPA_ERROR, "not chunked"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", UPA_ERROR,
         "both"},
        {"HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n", UPA_ERROR, "folds"},
        {"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", UPA_ERROR, "colon"},
        {"HTTP/1.1 101 Switching Protocols\r\n\r\n", UPA_ERROR, "101"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", UPA_ERROR, "hexadecimal"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", UPA_ERROR,
         "line end"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", UPA_TOO_BIG,
         "2^62"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t max = 0; max <= 1; max++) {
            upa a = {0};
            got *g = calloc(1, sizeof *g);
            char why[256] = "";
            size_t used;
            unsigned seed = 3;
            upa_rc rc = feed_pieces(&a, cases[i].text, strlen(cases[i].text), max, &seed, g,
                                    &used, why);
            if (rc != cases[i].rc || !strstr(why, cases[i].why))
                fail_msg("case %zu (pieces of %zu): wanted %d naming '%s', got %d '%s'", i, max,
                         cases[i].rc, cases[i].why, rc, why);
            upa_free(&a);
            free(g);
        }
    }
}

static void test_reader_limits_and_close(void **state)
{
    (void)state;
    char why[256];
    size_t used;
    unsigned seed = 5;
    /* a head over 64 KiB, whole and in pieces */
    size_t n = UPA_HEAD_MAX + 100;
    char *big = malloc(n);
    memcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ", 24);
    memset(big + 24, 'a', n - 24);
    memcpy(big + n - 4, "\r\n\r\n", 4);
    for (size_t max = 0; max <= 4096; max += 4096) {
        upa a = {0};
        got g = {.len = 0};
        assert_int_equal(feed_pieces(&a, big, n, max, &seed, &g, &used, why), UPA_TOO_BIG);
        assert_non_null(strstr(why, "64 KiB"));
        upa_free(&a);
    }
    free(big);
    /* closed mid-body, and before a byte */
    upa a = {0};
    got *g = calloc(1, sizeof *g);
    const char *cut = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
    assert_int_equal(feed_pieces(&a, cut, strlen(cut), 0, &seed, g, &used, why), UPA_MORE);
    assert_int_equal(upa_close(&a, why, sizeof why), UPA_ERROR);
    assert_non_null(strstr(why, "mid-answer"));
    upa_reset(&a);
    assert_int_equal(upa_close(&a, why, sizeof why), UPA_ERROR);
    assert_non_null(strstr(why, "without answering"));
    upa_free(&a);
    /* the reader stops when on_body says so */
    upa b = {0};
    memset(g, 0, sizeof *g);
    g->stop_after = 2;
    const char *t = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_int_equal(feed_pieces(&b, t, strlen(t), 0, &seed, g, &used, why), UPA_STOPPED);
    upa_free(&b);
    free(g);
}

static void test_fuzz_corpus(void **state)
{
    (void)state;
    assert_true(corpus_replay("upstream_answer", fuzz_upstream_one) >= 6);
}

/* ---- the client against a scripted server ------------------------------ */

enum { SRV_ECHO, SRV_ECHO_CLOSE, SRV_CUT, SRV_CHUNKED, SRV_SILENT };

typedef struct server {
    int lfd, port;
    atomic_int mode, stop, accepts, requests;
    char last_id[64];
    char last_head[512];         /* the last request's head, as sent */
    pthread_t th;
} server;

typedef struct sconn {
    int fd;
    char buf[65536];
    size_t len;
} sconn;

/* A request complete in c->buf: its length, or 0. */
static size_t request_len(sconn *c, size_t *body_at, size_t *body_len)
{
    char *e = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!e)
        return 0;
    *body_at = (size_t)(e + 4 - c->buf);
    char *cl = memmem(c->buf, *body_at, "Content-Length: ", 16);
    *body_len = cl ? strtoul(cl + 16, NULL, 10) : 0;
    return c->len >= *body_at + *body_len ? *body_at + *body_len : 0;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Answer one request; 1 when the connection is to be closed. */
static int serve_one(server *s, sconn *c, size_t req, size_t at, size_t blen)
{
    char head[256];
    const char *body = c->buf + at;
    snprintf(s->last_head, sizeof s->last_head, "%.*s", (int)(at < 511 ? at : 511), c->buf);
    char *id = memmem(c->buf, at, "X-Request-Id: ", 14);
    if (id) {
        size_t l = strcspn(id + 14, "\r");
        snprintf(s->last_id, sizeof s->last_id, "%.*s", (int)(l < 63 ? l : 63), id + 14);
    }
    atomic_fetch_add(&s->requests, 1);
    int mode = atomic_load(&s->mode), close_it = 0;
    if (mode == SRV_ECHO || mode == SRV_ECHO_CLOSE) {
        int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", blen);
        send_all(c->fd, head, (size_t)n);
        send_all(c->fd, body, blen);
        close_it = mode == SRV_ECHO_CLOSE;
    } else if (mode == SRV_CUT) {
        const char *t = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this";
        send_all(c->fd, t, strlen(t));
        close_it = 1;
    } else if (mode == SRV_CHUNKED) {
        send_all(c->fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 47);
        for (size_t i = 0; i < blen; i += 3) {
            size_t k = blen - i < 3 ? blen - i : 3;
            int n = snprintf(head, sizeof head, "%zx\r\n", k);
            send_all(c->fd, head, (size_t)n);
            send_all(c->fd, body + i, k);
            send_all(c->fd, "\r\n", 2);
        }
        send_all(c->fd, "0\r\n\r\n", 5);
    }   /* SRV_SILENT: never answers */
    memmove(c->buf, c->buf + req, c->len - req);
    c->len -= req;
    return close_it;
}

static void *server_main(void *arg)
{
    server *s = arg;
    sconn *cs[130] = {0};
    int n = 0;
    while (!atomic_load(&s->stop)) {
        struct pollfd pf[131];
        pf[0] = (struct pollfd){s->lfd, POLLIN, 0};
        for (int i = 0; i < n; i++)
            pf[i + 1] = (struct pollfd){cs[i]->fd, POLLIN, 0};
        if (poll(pf, (nfds_t)n + 1, 20) <= 0)
            continue;
        if (pf[0].revents & POLLIN && n < 128) {
            int fd = accept(s->lfd, NULL, NULL);
            if (fd >= 0) {
                cs[n] = calloc(1, sizeof *cs[n]);
                cs[n]->fd = fd;
                pf[++n] = (struct pollfd){fd, POLLIN, 0};   /* polled from the next round */
                atomic_fetch_add(&s->accepts, 1);
            }
        }
        for (int i = 0; i < n; i++) {
            if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) || pf[i + 1].fd != cs[i]->fd)
                continue;
            sconn *c = cs[i];
            ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
            int close_it = r <= 0;
            if (r > 0) {
                c->len += (size_t)r;
                size_t at, blen, req;
                while (!close_it && (req = request_len(c, &at, &blen)))
                    close_it = serve_one(s, c, req, at, blen);
            }
            if (close_it) {
                close(c->fd);
                free(c);
                cs[i] = cs[--n];
                pf[i + 1] = pf[n + 1];
                i--;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        close(cs[i]->fd);
        free(cs[i]);
    }
    return NULL;
}

static int server_start(server *s)
{
    memset(s, 0, sizeof *s);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(s->lfd, 256) < 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &al) < 0)
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->th, NULL, server_main, s);
}

static void server_stop(server *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

typedef struct done_t {
    int calls;
    up_result res;
    int status;
    char why[256];
    char body[4096];
    size_t len;
} done_t;

static int d_body(void *cls, const char *data, size_t n)
{
    done_t *d = cls;
    if (d->len + n > sizeof d->body)
        return -1;
    memcpy(d->body + d->len, data, n);
    d->len += n;
    return 0;
}

static void d_done(void *cls, up_result res, int status, const char *why)
{
    done_t *d = cls;
    d->calls++;
    d->res = res;
    d->status = status;
    snprintf(d->why, sizeof d->why, "%s", why);
}

static const up_handler dh = {NULL, d_body, d_done};

/* The client runs on an event loop (evloop.h); the tests turn it by
 * hand. One loop for the whole file: a client leaves it when freed. */
static evloop *test_loop(void)
{
    static evloop *l;
    char err[256];
    if (!l)
        l = evloop_new(err, sizeof err);
    assert_non_null(l);
    return l;
}

/* Run the loop until every one of n transfers reported (5 s at most). */
static void run_until(upc *c, done_t *d, int n)
{
    (void)c;   /* the loop carries it */
    for (int round = 0; round < 500; round++) {
        int all = 1;
        for (int i = 0; i < n; i++)
            all &= d[i].calls > 0;
        if (all)
            return;
        assert_int_equal(evloop_turn(test_loop(), 10), 0);
    }
    fail_msg("transfers did not end in 5 s");
}

static upc *client_for(server *s, int *origin)
{
    char err[256], url[64];
    upc *c = upc_new(test_loop(), err, sizeof err);
    assert_non_null(c);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", s->port);
    *origin = upc_origin(c, url, err, sizeof err);
    assert_int_equal(*origin, 0);
    return c;
}

static void test_client_keeps_connections(void **state)
{
    (void)state;
    server s;
    assert_int_equal(server_start(&s), 0);
    int o;
    upc *c = client_for(&s, &o);
    for (int i = 0; i < 50; i++) {
        char body[64], id[32];
        done_t d = {0};
        snprintf(body, sizeof body, "{\"n\": %d}", i);
        snprintf(id, sizeof id, "req-%d", i);
        assert_non_null(upc_post(c, o, "/v1/completions", id, body, strlen(body), &dh, &d));
        run_until(c, &d, 1);
        assert_int_equal(d.calls, 1);
        assert_int_equal(d.res, UP_OK);
        assert_int_equal(d.status, 200);
        assert_int_equal(d.len, strlen(body));
        assert_memory_equal(d.body, body, d.len);
        assert_string_equal(s.last_id, id);
        if (i == 0) {   /* the request line and headers, exactly */
            char want[256];
            snprintf(want, sizeof want, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                     "X-Request-Id: req-0\r\n\r\n", s.port, strlen(body));
            assert_string_equal(s.last_head, want);
        }
    }
    assert_int_equal(atomic_load(&s.accepts), 1);
    assert_int_equal(upc_open_connections(c), 1);
    /* an Authorization header (an engine's API key): after X-Request-Id */
    {
        done_t d = {0};
        const char *auth = "Bearer sk-0123456789abcdef";
        assert_non_null(upc_post_auth(c, o, "/v1/completions", "req-a", auth, "{}", 2, &dh, &d));
        run_until(c, &d, 1);
        assert_int_equal(d.res, UP_OK);
        char want[320];
        snprintf(want, sizeof want, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                 "Content-Type: application/json\r\nContent-Length: 2\r\n"
                 "X-Request-Id: req-a\r\nAuthorization: %s\r\n\r\n", s.port, auth);
        assert_string_equal(s.last_head, want);
    }
    /* chunked answers on the same connection */
    atomic_store(&s.mode, SRV_CHUNKED);
    const char *long_body = "{\"prompt\": \"a chunked answer, three bytes a chunk\"}";
    done_t d = {0};
    upc_post(c, o, "/x", NULL, long_body, strlen(long_body), &dh, &d);
    run_until(c, &d, 1);
    assert_int_equal(d.res, UP_OK);
    assert_int_equal(d.len, strlen(long_body));
    assert_memory_equal(d.body, long_body, d.len);
    assert_int_equal(atomic_load(&s.accepts), 1);
    upc_free(c);
    server_stop(&s);
}

static void test_client_replaces_closed_connections(void **state)
{
    (void)state;
    server s;
    assert_int_equal(server_start(&s), 0);
    atomic_store(&s.mode, SRV_ECHO_CLOSE);
    int o;
    upc *c = client_for(&s, &o);
    for (int i = 0; i < 20; i++) {
        done_t d = {0};
        upc_post(c, o, "/p", NULL, "{}", 2, &dh, &d);
        run_until(c, &d, 1);
        assert_int_equal(d.res, UP_OK);
        assert_int_equal(d.len, 2);
        if (i % 2)
            usleep(20000);   /* sometimes the close is seen while idle, sometimes not */
    }
    assert_int_equal(atomic_load(&s.requests), 20);   /* none sent twice, none lost */
    assert_int_equal(atomic_load(&s.accepts), 20);
    upc_free(c);
    server_stop(&s);
}

static void test_client_failures(void **state)
{
    (void)state;
    server s;
    assert_int_equal(server_start(&s), 0);
    int o;
    upc *c = client_for(&s, &o);
    /* an answer cut short */
    atomic_store(&s.mode, SRV_CUT);
    done_t d = {0};
    upc_post(c, o, "/p", NULL, "{}", 2, &dh, &d);
    run_until(c, &d, 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.res, UP_IO);
    assert_non_null(strstr(d.why, "mid-answer"));
    /* a cancelled transfer reports nothing and leaves no connection */
    atomic_store(&s.mode, SRV_SILENT);
    done_t q = {0};
    upx *x = upc_post(c, o, "/p", NULL, "{}", 2, &dh, &q);
    for (int i = 0; i < 10; i++)
        evloop_turn(test_loop(), 5);
    upc_cancel(c, x);
    for (int i = 0; i < 5; i++)
        evloop_turn(test_loop(), 5);
    assert_int_equal(q.calls, 0);
    assert_int_equal(upc_open_connections(c), 0);
    int port = s.port;
    upc_free(c);
    server_stop(&s);
    /* nobody listens any more: refused, reported once, by the loop */
    char err[256], url[64];
    c = upc_new(test_loop(), err, sizeof err);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    o = upc_origin(c, url, err, sizeof err);
    done_t r = {0};
    upc_post(c, o, "/p", NULL, "{}", 2, &dh, &r);
    assert_int_equal(r.calls, 0);   /* never from inside upc_post */
    run_until(c, &r, 1);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.res, UP_CONNECT);
    assert_non_null(strstr(r.why, "refused"));
    upc_free(c);
}

static void test_client_many_at_once(void **state)
{
    (void)state;
    server s;
    assert_int_equal(server_start(&s), 0);
    int o;
    upc *c = client_for(&s, &o);
    static done_t d[64];
    static char bodies[64][32];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 64; i++) {
        snprintf(bodies[i], sizeof bodies[i], "{\"i\": %d}", i);
        assert_non_null(upc_post(c, o, "/p", NULL, bodies[i], strlen(bodies[i]), &dh, &d[i]));
    }
    run_until(c, d, 64);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].res, UP_OK);
        assert_int_equal(d[i].len, strlen(bodies[i]));
        assert_memory_equal(d[i].body, bodies[i], d[i].len);
    }
    assert_int_equal(upc_open_connections(c), 64);   /* kept for the next 64 */
    upc_free(c);
    server_stop(&s);
}

/* Pooled connections idle past upc_set_idle's limit are closed; busy
 * ones are not; a GET (a health probe) goes over the same pool. */
static void test_client_idle_expiry(void **state)
{
    (void)state;
    server s;
    assert_int_equal(server_start(&s), 0);
    int o;
    upc *c = client_for(&s, &o);
    upc_set_idle(c, 0.3);
    static done_t d[4];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 4; i++)
        assert_non_null(upc_post(c, o, "/p", NULL, "{}", 2, &dh, &d[i]));
    run_until(c, d, 4);
    assert_int_equal(upc_open_connections(c), 4);
    done_t g = {0};
    assert_non_null(upc_get(c, o, "/health", &dh, &g));
    run_until(c, &g, 1);
    assert_int_equal(g.res, UP_OK);
    assert_int_equal(upc_open_connections(c), 4);   /* it took a kept one */
    double t0 = evloop_now();
    while (upc_open_connections(c) > 0 && evloop_now() - t0 < 3)
        evloop_turn(test_loop(), 50);
    assert_int_equal(upc_open_connections(c), 0);
    assert_true(evloop_now() - t0 > 0.2);   /* not before their time */
    upc_set_idle(c, 0);
    upc_free(c);
    server_stop(&s);
}

static void test_client_origins(void **state)
{
    (void)state;
    char err[256];
    upc *c = upc_new(test_loop(), err, sizeof err);
    assert_int_equal(upc_origin(c, "http://127.0.0.1:8000", err, sizeof err), 0);
    assert_int_equal(upc_origin(c, "http://[::1]:8001/", err, sizeof err), 1);
    assert_int_equal(upc_origin(c, "http://prefill-0.svc:80", err, sizeof err), 2);
    const char *bad[] = {"https://x:1", "http://x", "http://x:", "http://x:0", "http://x:65536",
                         "http://:80", "http://x:80/v1", "http://x:8a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (upc_origin(c, bad[i], err, sizeof err) != -1 || !strstr(err, "HOST:PORT"))
            fail_msg("'%s' was not refused (%s)", bad[i], err);
    }
    upc_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_random_framings),
        cmocka_unit_test(test_reader_heads),
        cmocka_unit_test(test_reader_refusals),
        cmocka_unit_test(test_reader_limits_and_close),
        cmocka_unit_test(test_fuzz_corpus),
        cmocka_unit_test(test_client_keeps_connections),
        cmocka_unit_test(test_client_replaces_closed_connections),
        cmocka_unit_test(test_client_failures),
        cmocka_unit_test(test_client_many_at_once),
        cmocka_unit_test(test_client_origins),
        cmocka_unit_test(test_client_idle_expiry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
