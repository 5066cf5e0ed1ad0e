/* capture_engine.c - a stand-in engine that answers at once, for the
 * capture benchmark (tests/bench/capture.sh; test-only, never part of
 * eldr). Python's http.server does not answer 2,000 requests a second, so
 * this is a small epoll loop that returns one precomputed vLLM answer to
 * every POST (GET /v1/models gives the model), on keep-alive connections.
 *
 *     capture_engine PORTFILE ENCODING PROMPT_TOKENS LAYERS TOP_K COMPLETION
 *
 * ENCODING: object (vLLM's base64 int16 object), lists (nested JSON
 * lists), npy (a base64 .npy over the whole sequence) or raw (SGLang's
 * meta_info buffer, int32, prompt + completion - 1 tokens). Expert ids
 * are (7 t + 3 l + 16 j) mod 128: distinct within a token's top-k for k <= 8.
 * Listens on 127.0.0.1, a free port written to PORTFILE; exits after 600 s. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "b64.h"

typedef struct conn {
    int fd;
    char *in;
    size_t inlen, incap;
    const char *out;             /* the answer being written (static) */
    size_t outlen, outoff;
} conn;

static char *answer, *models;
static size_t answer_len, models_len;

static int id_at(int t, int l, int j)
{
    return (7 * t + 3 * l + 16 * j) % 128;
}

/* base64 of tokens [t0, t1) as itemsize-byte little-endian ids, after an
 * optional .npy header */
static char *ids_b64(int t0, int t1, int L, int k, int itemsize, int npy)
{
    size_t n = (size_t)(t1 - t0) * L * k * itemsize + 128, m = 0;
    uint8_t *b = malloc(n);
    if (npy) {
        char h[118];
        int hl = snprintf(h, sizeof h, "{'descr': '<i2', 'fortran_order': False, 'shape': "
                          "(%d, %d, %d), }", t1 - t0, L, k);
        while ((10 + hl + 1) % 64)
            h[hl++] = ' ';
        h[hl++] = '\n';
        memcpy(b, "\x93NUMPY\x01\x00", 8);
        b[8] = (uint8_t)hl;
        b[9] = 0;
        memcpy(b + 10, h, (size_t)hl);
        m = 10 + (size_t)hl;
    }
    for (int t = t0; t < t1; t++)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < k; j++)
                for (int x = 0; x < itemsize; x++)
                    b[m++] = x ? 0 : (uint8_t)id_at(t, l, j);
    char *s = malloc(4 * (m + 2) / 3 + 4);
    b64_encode(b, m, s);
    free(b);
    return s;
}

static char *lists(int t0, int t1, int L, int k)
{
    size_t cap = (size_t)(t1 - t0) * L * (k * 5 + 4) + 16, n = 0;
    char *s = malloc(cap);
    n += (size_t)sprintf(s + n, "[");
    for (int t = t0; t < t1; t++) {
        n += (size_t)sprintf(s + n, "%s[", t > t0 ? "," : "");
        for (int l = 0; l < L; l++) {
            n += (size_t)sprintf(s + n, "%s[", l ? "," : "");
            for (int j = 0; j < k; j++)
                n += (size_t)sprintf(s + n, "%s%d", j ? "," : "", id_at(t, l, j));
            n += (size_t)sprintf(s + n, "]");
        }
        n += (size_t)sprintf(s + n, "]");
    }
    sprintf(s + n, "]");
    return s;
}

static char *object(int t0, int t1, int L, int k)
{
    char *d = ids_b64(t0, t1, L, k, 2, 0), *s;
    if (asprintf(&s, "{\"encoding\":\"base64\",\"dtype\":\"int16\",\"shape\":[%d,%d,%d],"
                 "\"data\":\"%s\"}", t1 - t0, L, k, d) < 0)
        exit(1);
    free(d);
    return s;
}

static char *http(const char *body)
{
    char *s;
    if (asprintf(&s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 "%zu\r\n\r\n%s", strlen(body), body) < 0)
        exit(1);
    return s;
}

static void build(const char *enc, int P, int L, int k, int C)
{
    char *body, *pr = NULL, *gen = NULL;
    const char *usage = "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}";
    char u[96];
    snprintf(u, sizeof u, usage, P, C);
    int rc;
    if (!strcmp(enc, "raw")) {
        gen = ids_b64(0, P + C - 1, L, k, 4, 0);
        rc = asprintf(&body, "{\"text\":\"x\",\"meta_info\":{\"prompt_tokens\":%d,"
                      "\"completion_tokens\":%d,\"routed_experts\":\"%s\"}}", P, C, gen);
    } else if (!strcmp(enc, "npy")) {
        gen = ids_b64(0, P + C, L, k, 2, 1);
        rc = asprintf(&body, "{\"id\":\"cmpl\",\"object\":\"text_completion\",\"choices\":[{"
                      "\"index\":0,\"text\":\"x\",\"routed_experts\":\"%s\"}],%s}", gen, u);
    } else {
        int lst = !strcmp(enc, "lists");
        pr = lst ? lists(0, P, L, k) : object(0, P, L, k);
        gen = lst ? lists(P, P + C, L, k) : object(P, P + C, L, k);
        rc = asprintf(&body, "{\"id\":\"cmpl\",\"object\":\"text_completion\","
                      "\"prompt_routed_experts\":%s,\"choices\":[{\"index\":0,\"text\":\"x\","
                      "\"routed_experts\":%s,\"finish_reason\":\"length\"}],%s}", pr, gen, u);
    }
    if (rc < 0)
        exit(1);
    answer = http(body);
    answer_len = strlen(answer);
    models = http("{\"object\":\"list\",\"data\":[{\"id\":\"bench/moe\",\"owned_by\":\"vllm\"}]}");
    models_len = strlen(models);
    free(body);
    free(pr);
    free(gen);
}

/* Whole requests in c->in: queue the answer to the first (one at a time:
 * curl sends the next only after this answer). 1 when an answer is queued. */
static int take_request(conn *c)
{
    char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - c->in) + 4, body = 0;
    for (char *p = c->in; p < end; p++)
        if ((p == c->in || p[-1] == '\n') && !strncasecmp(p, "content-length:", 15))
            body = strtoul(p + 15, NULL, 10);
    if (c->inlen < head + body)
        return 0;
    int get = !strncmp(c->in, "GET ", 4);
    c->out = get ? models : answer;
    c->outlen = get ? models_len : answer_len;
    c->outoff = 0;
    memmove(c->in, c->in + head + body, c->inlen - head - body);
    c->inlen -= head + body;
    return 1;
}

static int flush_out(conn *c)
{
    while (c->out && c->outoff < c->outlen) {
        ssize_t w = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
        if (w < 0)
            return errno == EAGAIN ? 0 : -1;
        c->outoff += (size_t)w;
    }
    c->out = NULL;
    return 0;
}

static int serve(conn *c)
{
    for (;;) {
        if (c->inlen + 65536 > c->incap) {
            c->incap = c->incap ? c->incap * 2 : 131072;
            c->in = realloc(c->in, c->incap);
        }
        ssize_t r = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
        if (r == 0)
            return -1;
        if (r < 0)
            break;
        c->inlen += (size_t)r;
    }
    if (errno != EAGAIN)
        return -1;
    while (!c->out && take_request(c))
        if (flush_out(c) < 0)
            return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: capture_engine PORTFILE ENCODING P L K C\n");
        return 2;
    }
    build(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    signal(SIGPIPE, SIG_IGN);
    alarm(600);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1024) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0)
        return perror("capture_engine"), 1;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) || rename(tmp, argv[1]))
        return perror(argv[1]), 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, evs[64];
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    c = calloc(1, sizeof *c);
                    c->fd = fd;
                    struct epoll_event ce = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            if (flush_out(c) < 0 || serve(c) < 0) {
                close(c->fd);
                free(c->in);
                free(c);
            }
        }
    }
}
