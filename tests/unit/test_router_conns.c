/* test_router_conns.c - the HTTP glue's connection table (http_conns.h):
 * what an address counts as (IPv4 alone, IPv6 by /64, IPv4-mapped as
 * IPv4), the per-address counts against a shadow under random opens and
 * closes (the table's deletions must keep every probe chain), the header
 * deadline on real sockets (a late one is shut down, one whose headers
 * came is not), the connection being refused at its headers found
 * among those awaiting them (conns_awaiting), the options of issue
 * 20, and the listener's series (eldr_connections_refused_total by
 * reason, open connections, the spells at --max-conns, the kernel's
 * accept queue of a real listening socket). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "http_conns.h"
#include "log.h"
#include "metrics.h"
#include "opts.h"
#include "rng.h"
#include "strbuf.h"

/* An address from its text: IPv6 when it has a colon. */
static struct sockaddr_storage addr(const char *text)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    int v6 = strchr(text, ':') != NULL;
    ss.ss_family = v6 ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(ss.ss_family, text, v6 ? (void *)&s6->sin6_addr
                                                      : (void *)&s4->sin_addr), 1);
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static void test_keys(void **state)
{
    (void)state;
    struct sockaddr_storage a = addr("10.1.2.3"), b = addr("10.1.2.4");
    struct sockaddr_storage m = addr("::ffff:10.1.2.3");
    struct sockaddr_storage p = addr("2001:db8:1:2::1"), q = addr("2001:db8:1:2:ffff::9");
    struct sockaddr_storage r = addr("2001:db8:1:3::1");
    conn_key ka = conn_key_of(SA(a)), kb = conn_key_of(SA(b)), km = conn_key_of(SA(m));
    conn_key kp = conn_key_of(SA(p)), kq = conn_key_of(SA(q)), kr = conn_key_of(SA(r));
    assert_int_equal(ka.family, 4);
    assert_true(ka.bits == 0x0a010203u);
    assert_true(ka.bits != kb.bits);
    assert_int_equal(km.family, 4);            /* mapped: the IPv4 address */
    assert_true(km.bits == ka.bits);
    assert_int_equal(kp.family, 6);
    assert_true(kp.bits == kq.bits);           /* one /64 */
    assert_true(kp.bits != kr.bits);
    assert_true(kp.bits == 0x20010db800010002ull);
    char text[64];
    conn_addr_text(SA(m), text, sizeof text);
    assert_string_equal(text, "10.1.2.3");
    conn_addr_text(SA(p), text, sizeof text);
    assert_string_equal(text, "2001:db8:1:2::1");
    conn_addr_text(NULL, text, sizeof text);
    assert_string_equal(text, "?");
}

/* Random opens and closes over few keys colliding in a small table: the
 * table admits exactly what a shadow count allows. */
static void test_counts_shadow(void **state)
{
    (void)state;
    enum { ADDRS = 120, LIMIT = 2, OPEN_MAX = 60 };   /* 256 slots: collisions */
    metrics_t met;
    metrics_init(&met);
    log_set_quiet(1);
    conns_t *t = conns_new(OPEN_MAX, LIMIT, 10, &met, "test");
    assert_non_null(t);
    int shadow[ADDRS] = {0};
    void *ctx[OPEN_MAX];
    int who[OPEN_MAX];
    int open = 0, refused = 0;
    rng_t rng;
    rng_seed(&rng, 20);
    for (int step = 0; step < 20000; step++) {
        if (open < OPEN_MAX && (open == 0 || rng_next(&rng) % 3)) {
            int a = (int)(rng_next(&rng) % ADDRS);
            char text[64];
            /* half IPv4, half IPv6 with random interface ids in one /64 */
            if (a % 2)
                snprintf(text, sizeof text, "192.0.2.%d", a);
            else
                snprintf(text, sizeof text, "2001:db8:0:%x::%x", a,
                         (unsigned)(rng_next(&rng) & 0xffff));
            struct sockaddr_storage ss = addr(text);
            int ok = conns_admit(t, SA(ss));
            assert_int_equal(ok, shadow[a] < LIMIT);
            if (!ok) {
                refused++;
                continue;
            }
            shadow[a]++;
            conns_started(t, -1, SA(ss), NULL, &ctx[open]);
            assert_non_null(ctx[open]);
            who[open++] = a;
        } else {
            int i = (int)(rng_next(&rng) % (uint64_t)open);
            conns_closed(t, &ctx[i]);
            assert_null(ctx[i]);
            shadow[who[i]]--;
            ctx[i] = ctx[open - 1];
            who[i] = who[--open];
        }
        assert_int_equal(conns_open(t), open);
    }
    assert_true(refused > 0);
    assert_int_equal((int)metrics_refused_total(&met, REFUSED_PER_IP), refused);
    int l = conns_listener(t);
    assert_int_equal(l, 0);
    assert_int_equal((int)atomic_load(&met.listeners[l].refused[REFUSED_PER_IP]), refused);
    assert_int_equal((int)atomic_load(&met.listeners[l].refused[REFUSED_MAX_CONNS]), 0);
    assert_int_equal(met.listeners[l].open, open);
    while (open > 0)
        conns_closed(t, &ctx[--open]);
    /* every count back to 0: each key takes LIMIT again */
    for (int a = 1; a < ADDRS; a += 2) {
        char text[32];
        snprintf(text, sizeof text, "192.0.2.%d", a);
        struct sockaddr_storage ss = addr(text);
        for (int k = 0; k < LIMIT; k++) {
            assert_int_equal(conns_admit(t, SA(ss)), 1);
            conns_started(t, -1, SA(ss), NULL, &ctx[0]);
            conns_closed(t, &ctx[0]);
        }
    }
    conns_free(t);
}

/* The listener's series: open connections, a spell at the limit that
 * begins when the last slot is taken and ends when one is given back,
 * the per-address refusals under the listener's name and reason, and the
 * accept queue of a listening socket, read from the kernel. */
static void test_listener_series(void **state)
{
    (void)state;
    metrics_t met;
    metrics_init(&met);
    log_set_quiet(1);
    conns_t *t = conns_new(3, 2, 10, &met, "public");
    int l = conns_listener(t);
    assert_true(l >= 0);
    struct sockaddr_storage a = addr("192.0.2.1"), b = addr("192.0.2.2");
    void *ctx[3];
    for (int i = 0; i < 3; i++) {
        const struct sockaddr *who = i < 2 ? SA(a) : SA(b);
        assert_int_equal(conns_admit(t, who), 1);
        conns_started(t, -1, who, NULL, &ctx[i]);
        assert_true(met.listeners[l].full_since < 0 || i == 2);
    }
    assert_int_equal(met.listeners[l].open, 3);
    assert_true(met.listeners[l].full_since >= 0);   /* full: a spell began */
    assert_int_equal(conns_admit(t, SA(a)), 0);      /* a holds 2 */
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    conns_closed(t, &ctx[0]);
    assert_true(met.listeners[l].full_since < 0);    /* the spell ended */
    assert_true(met.listeners[l].full_s >= 0.015 && met.listeners[l].full_s < 5);
    /* a real listening socket with two connections the kernel holds */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(lfd, 8), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
    assert_int_equal(metrics_listen_queue(lfd), 0);
    int c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_int_equal(connect(c[i], (struct sockaddr *)&sin, sizeof sin), 0);
    }
    assert_int_equal(metrics_listen_queue(lfd), 2);
    assert_int_equal(metrics_listen_queue(c[0]), 0);   /* not a listening socket */
    assert_int_equal(metrics_listen_queue(-1), 0);
    metrics_listener_fd(&met, l, lfd);
    strbuf sb = {0};
    metrics_render(&met, &sb);
    assert_false(sb.oom);
    assert_non_null(strstr(sb.s, "eldr_connections_refused_total{listener=\"public\","
                                 "reason=\"max_conns_per_ip\"} 1\n"));
    assert_non_null(strstr(sb.s, "eldr_connections_refused_total{listener=\"public\","
                                 "reason=\"max_conns\"} 0\n"));
    assert_non_null(strstr(sb.s, "eldr_listener_connections{listener=\"public\"} 2\n"));
    assert_non_null(strstr(sb.s, "eldr_listener_max_connections{listener=\"public\"} 3\n"));
    assert_non_null(strstr(sb.s, "eldr_listener_queue{listener=\"public\"} 2\n"));
    assert_non_null(strstr(sb.s, "eldr_listener_full_seconds_total{listener=\"public\"} 0.0"));
    free(sb.s);
    for (int i = 0; i < 2; i++)
        close(c[i]);
    close(lfd);
    conns_closed(t, &ctx[1]);
    conns_closed(t, &ctx[2]);
    assert_int_equal(met.listeners[l].open, 0);
    conns_free(t);
}

/* An admitted connection that never starts (libmicrohttpd failed to set
 * it up) is given back at the thread's next accept. */
static void test_reservation_given_back(void **state)
{
    (void)state;
    metrics_t met;
    metrics_init(&met);
    conns_t *t = conns_new(16, 1, 10, &met, "test");
    struct sockaddr_storage a = addr("198.51.100.7");
    assert_int_equal(conns_admit(t, SA(a)), 1);   /* never started */
    assert_int_equal(conns_admit(t, SA(a)), 1);   /* the first is given back */
    void *ctx;
    conns_started(t, -1, SA(a), NULL, &ctx);
    assert_int_equal(conns_admit(t, SA(a)), 0);
    conns_closed(t, &ctx);
    assert_int_equal(conns_admit(t, SA(a)), 1);
    conns_free(t);
}

/* The sweep shuts down the late connection (its peer reads the end) and
 * leaves the one whose headers came, and a fresh one. */
static void test_sweep(void **state)
{
    (void)state;
    metrics_t met;
    metrics_init(&met);
    log_set_quiet(1);
    conns_t *t = conns_new(16, 16, 1, &met, "test");
    struct sockaddr_storage a = addr("127.0.0.1");
    int late[2], served[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, late), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, served), 0);
    void *c1, *c2;
    conns_admit(t, SA(a));
    conns_started(t, late[0], SA(a), NULL, &c1);
    conns_admit(t, SA(a));
    conns_started(t, served[0], SA(a), NULL, &c2);
    conns_headers(c2);
    double now = mono_now();
    assert_int_equal(conns_sweep(t, now + 0.5), 0);   /* not late yet */
    assert_int_equal(conns_sweep(t, now + 1.5), 1);
    char byte;
    assert_int_equal(read(late[1], &byte, 1), 0);      /* shut down: the end */
    assert_int_equal(conns_sweep(t, now + 5), 0);      /* cut once */
    assert_int_equal((int)atomic_load(&met.header_timeouts), 1);
    /* the served one's next request has its own second */
    conns_request_done(t, c2);
    assert_int_equal(conns_sweep(t, mono_now() + 0.5), 0);
    assert_int_equal(conns_sweep(t, mono_now() + 1.5), 1);
    conns_closed(t, &c1);
    conns_closed(t, &c2);
    assert_int_equal(conns_open(t), 0);
    conns_free(t);
    close(late[0]);
    close(late[1]);
    close(served[0]);
    close(served[1]);
}

/* conns_awaiting: only connections awaiting their headers, of this
 * thread when asked, that pick accepts; two accepted is no answer. */
static int pick_marked(void *conn, void *cls)
{
    (void)cls;
    return conn && *(int *)conn;
}

typedef struct other_thread {
    conns_t *t;
    struct sockaddr_storage a;
    int *mark;
    void *ctx;
} other_thread;

static void *start_elsewhere(void *arg)
{
    other_thread *o = arg;
    conns_started(o->t, 9, SA(o->a), o->mark, &o->ctx);
    return NULL;
}

static void test_awaiting(void **state)
{
    (void)state;
    metrics_t met;
    metrics_init(&met);
    conns_t *t = conns_new(16, 16, 10, &met, "test");
    struct sockaddr_storage a = addr("127.0.0.1");
    int m1 = 0, m2 = 0, m3 = 1;
    void *c1, *c2, *conn = NULL;
    int fd = -1;
    conns_started(t, 7, SA(a), &m1, &c1);
    conns_started(t, 8, SA(a), &m2, &c2);
    assert_int_equal(conns_awaiting(t, 1, pick_marked, NULL, &conn, &fd), 0);
    m2 = 1;
    assert_int_equal(conns_awaiting(t, 1, pick_marked, NULL, &conn, &fd), 1);
    assert_ptr_equal(conn, &m2);
    assert_int_equal(fd, 8);
    m1 = 1;
    assert_int_equal(conns_awaiting(t, 1, pick_marked, NULL, &conn, &fd), -1);
    conns_headers(c1);   /* its handler runs: no longer awaiting */
    assert_int_equal(conns_awaiting(t, 1, pick_marked, NULL, &conn, &fd), 1);
    assert_int_equal(fd, 8);
    /* one started on another thread counts only without this_thread */
    other_thread o = {t, a, &m3, NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, start_elsewhere, &o), 0);
    pthread_join(th, NULL);
    assert_int_equal(conns_awaiting(t, 1, pick_marked, NULL, &conn, &fd), 1);
    assert_int_equal(conns_awaiting(t, 0, pick_marked, NULL, &conn, &fd), -1);
    conns_closed(t, &c2);
    assert_int_equal(conns_awaiting(t, 0, pick_marked, NULL, &conn, &fd), 1);
    assert_int_equal(fd, 9);
    conns_closed(t, &c1);
    conns_closed(t, &o.ctx);
    conns_free(t);
}

static void test_opts_issue20(void **state)
{
    (void)state;
    eldrd_opts o;
    char err[ELDR_ERRLEN];
    char *defaults[] = {"eldrd", "-m", "m.h5", NULL};
    assert_int_equal(opts_parse(3, defaults, &o, err, sizeof err), 0);
    assert_true(o.body_budget == 128 << 20 && o.max_kv_body == 1 << 20 &&
                o.max_model_body == 32 << 20 && o.max_body == 8 << 20);
    assert_int_equal(o.header_timeout, 10);
    assert_string_equal(o.admin_host, "");
    opts_free(&o);
    char *ok[] = {"eldrd", "-m", "m.h5", "--admin-listen", "[::1]:9001", "--header-timeout",
                  "3", "--body-budget", "67108864", "--max-model-body", "50000000", NULL};
    assert_int_equal(opts_parse(11, ok, &o, err, sizeof err), 0);
    assert_string_equal(o.admin_host, "::1");
    assert_int_equal(o.admin_port, 9001);
    assert_int_equal(o.header_timeout, 3);
    assert_true(o.body_budget == 67108864 && o.max_model_body == 50000000);
    opts_free(&o);
    static const struct {
        const char *argv[6];
        const char *says;
    } bad[] = {
        {{"eldrd", "-m", "m", "--body-budget", "16777216"}, "--max-model-body"},
        {{"eldrd", "-m", "m", "--header-timeout", "0"}, "--header-timeout"},
        {{"eldrd", "-m", "m", "--admin-listen", "::1:80"}, "--admin-listen"},
        {{"eldrd", "-m", "m", "--route-token-file", "t"}, "proxy mode"},
        {{"eldrd", "-m", "m", "--max-kv-body", "10"}, "--max-kv-body"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(opts_parse(5, (char **)bad[i].argv, &o, err, sizeof err), -1);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: '%s' does not name %s", bad[i].argv[3], err, bad[i].says);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_counts_shadow),
        cmocka_unit_test(test_listener_series),
        cmocka_unit_test(test_reservation_given_back),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_awaiting),
        cmocka_unit_test(test_opts_issue20),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
