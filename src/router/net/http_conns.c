/* http_conns.c - per-address connection counts and the header deadline
 * (http_conns.h). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http_conns.h"
#include "log.h"
#include "periodic.h"

/* One open connection. due_ms: when its request headers are due
 * (monotonic ms), 0 while a request is being served. */
typedef struct conn_entry {
    struct conn_entry *prev, *next;
    int fd;
    void *conn;                  /* libmicrohttpd's connection (opaque here) */
    pthread_t thread;            /* the thread that accepted it, which serves it */
    conn_key key;
    atomic_llong due_ms;
    char peer[48];
} conn_entry;

/* One key's count; n == 0 is a free slot. */
typedef struct key_slot {
    conn_key key;
    int n;
} key_slot;

struct conns {
    pthread_mutex_t lock;        /* the list, the counts */
    periodic_t *sweeper;
    key_slot *slots;             /* open addressing, linear probing */
    size_t mask;
    conn_entry head;             /* the list of open connections */
    int open;
    int per_ip, timeout, max_conns;
    metrics_t *met;
    int slot;                    /* the listener's slot in met */
    char listener[16];
    atomic_long last_refusal_log, last_full_log;
};

/* The reservation made by the accept policy on this thread, taken by the
 * connection's start notification (libmicrohttpd calls both on the thread
 * that accepted). One left over means that connection's set-up failed in
 * between: it is given back at the thread's next accept. */
static _Thread_local struct {
    conns_t *t;
    conn_key key;
} pending;

static long long now_ms(void)
{
    return (long long)(mono_now() * 1000.0);
}

conn_key conn_key_of(const struct sockaddr *sa)
{
    conn_key k = {0, 0};
    if (!sa)
        return k;
    if (sa->sa_family == AF_INET) {
        k.bits = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        k.family = 4;
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        const uint8_t *b = a->s6_addr;
        int mapped = IN6_IS_ADDR_V4MAPPED(a);
        for (int i = mapped ? 12 : 0; i < (mapped ? 16 : 8); i++)
            k.bits = k.bits << 8 | b[i];
        k.family = mapped ? 4 : 6;
    }
    return k;
}

void conn_addr_text(const struct sockaddr *sa, char *buf, size_t n)
{
    snprintf(buf, n, "?");
    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)n);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            inet_ntop(AF_INET, a->s6_addr + 12, buf, (socklen_t)n);
        else
            inet_ntop(AF_INET6, a, buf, (socklen_t)n);
    }
}

/* ---- the counts: a small open-addressing table ------------------------- */

static size_t key_home(const conns_t *t, conn_key k)
{
    uint64_t h = (k.bits ^ (uint64_t)k.family << 56) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & t->mask;
}

static int key_eq(conn_key a, conn_key b)
{
    return a.bits == b.bits && a.family == b.family;
}

/* k's slot, or the free slot where it would go. */
static size_t key_find(const conns_t *t, conn_key k)
{
    size_t i = key_home(t, k);
    while (t->slots[i].n && !key_eq(t->slots[i].key, k))
        i = (i + 1) & t->mask;
    return i;
}

/* One more connection for k; at most `limit` (0: no limit). 0 or -1. The
 * table holds twice the connections it may see, so it never fills. */
static int key_inc(conns_t *t, conn_key k, int limit)
{
    size_t i = key_find(t, k);
    if (limit && t->slots[i].n >= limit)
        return -1;
    t->slots[i].key = k;
    t->slots[i].n++;
    return 0;
}

/* i is free now: pull back the entries after it that probed past it
 * (backward-shift deletion keeps every probe chain unbroken). */
static void key_unhole(conns_t *t, size_t i)
{
    for (size_t j = (i + 1) & t->mask; t->slots[j].n; j = (j + 1) & t->mask) {
        size_t h = key_home(t, t->slots[j].key);
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (!stays) {
            t->slots[i] = t->slots[j];
            t->slots[j].n = 0;
            i = j;
        }
    }
}

static void key_dec(conns_t *t, conn_key k)
{
    size_t i = key_find(t, k);
    if (!t->slots[i].n || --t->slots[i].n > 0)
        return;
    key_unhole(t, i);
}

/* ---- life -------------------------------------------------------------- */

conns_t *conns_new(int max_conns, int per_ip, int header_timeout, metrics_t *met,
                   const char *listener)
{
    conns_t *t = calloc(1, sizeof *t);
    size_t cap = 64;
    while (cap < 2 * ((size_t)max_conns + 64))
        cap *= 2;
    if (!t || !(t->slots = calloc(cap, sizeof *t->slots))) {
        free(t);
        return NULL;
    }
    t->mask = cap - 1;
    t->head.prev = t->head.next = &t->head;
    t->per_ip = per_ip;
    t->timeout = header_timeout;
    t->max_conns = max_conns;
    t->met = met;
    t->slot = metrics_listener_add(met, listener, 1u << REFUSED_MAX_CONNS | 1u << REFUSED_PER_IP |
                                   1u << REFUSED_SETUP, max_conns);
    snprintf(t->listener, sizeof t->listener, "%s", listener);
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

int conns_listener(const conns_t *t)
{
    return t->slot;
}

static void sweep_now(void *arg)
{
    conns_sweep(arg, mono_now());
}

int conns_start(conns_t *t)
{
    /* a quarter of the limit, so a connection is cut at most 25% late */
    double every = t->timeout / 4.0 < 1.0 ? t->timeout / 4.0 : 1.0;
    return (t->sweeper = periodic_start(every, sweep_now, t)) ? 0 : -1;
}

void conns_free(conns_t *t)
{
    if (!t)
        return;
    periodic_stop(t->sweeper);
    if (pending.t == t)
        pending.t = NULL;
    for (conn_entry *e = t->head.next, *next; e != &t->head; e = next) {
        next = e->next;
        free(e);
    }
    pthread_mutex_destroy(&t->lock);
    free(t->slots);
    free(t);
}

/* ---- libmicrohttpd's side ------------------------------------------------ */

/* A reservation this thread made for a connection that never started. */
static void give_back_pending(void)
{
    conns_t *p = pending.t;
    if (!p)
        return;
    pending.t = NULL;
    pthread_mutex_lock(&p->lock);
    key_dec(p, pending.key);
    pthread_mutex_unlock(&p->lock);
}

static void log_refusal(conns_t *t, const struct sockaddr *sa, conn_key k)
{
    metrics_refused(t->met, t->slot, REFUSED_PER_IP);
    if (!log_once_a_second(&t->last_refusal_log))
        return;
    char peer[48];
    conn_addr_text(sa, peer, sizeof peer);
    log_msg("refused a connection from %s%s on the %s listener: it holds %d already "
            "(--max-conns-per-ip)", peer, k.family == 6 ? " (its /64)" : "", t->listener,
            t->per_ip);
}

int conns_admit(conns_t *t, const struct sockaddr *sa)
{
    conn_key k = conn_key_of(sa);
    give_back_pending();
    if (!k.family)
        return 1;
    pthread_mutex_lock(&t->lock);
    int rc = key_inc(t, k, t->per_ip);
    pthread_mutex_unlock(&t->lock);
    if (rc < 0) {
        log_refusal(t, sa, k);
        return 0;
    }
    pending.t = t;
    pending.key = k;
    return 1;
}

void conns_started(conns_t *t, int fd, const struct sockaddr *sa, void *conn, void **ctx)
{
    conn_key k = conn_key_of(sa);
    int reserved = pending.t == t && key_eq(pending.key, k);
    if (reserved)
        pending.t = NULL;
    conn_entry *e = calloc(1, sizeof *e);
    pthread_mutex_lock(&t->lock);
    if (!reserved && k.family)
        key_inc(t, k, 0);   /* no policy call saw it: counted, not refused */
    if (e) {
        e->fd = fd;
        e->conn = conn;
        e->thread = pthread_self();
        e->key = k;
        atomic_init(&e->due_ms, now_ms() + 1000LL * t->timeout);
        conn_addr_text(sa, e->peer, sizeof e->peer);
        e->next = &t->head;
        e->prev = t->head.prev;
        e->prev->next = e;
        t->head.prev = e;
        t->open++;
    } else {
        if (k.family)
            key_dec(t, k);
        shutdown(fd, SHUT_RDWR);   /* untracked would mean unlimited: close it */
    }
    pthread_mutex_unlock(&t->lock);
    *ctx = e;
    if (!e) {
        metrics_refused(t->met, t->slot, REFUSED_SETUP);
        return;
    }
    if (metrics_conn_opened(t->met, t->slot) && log_once_a_second(&t->last_full_log))
        log_msg("the %s listener holds %d connections (--max-conns): new ones wait in the "
                "kernel's accept queue until one closes (eldr_listener_queue)", t->listener,
                t->max_conns);
}

void conns_headers(void *ctx)
{
    conn_entry *e = ctx;
    if (e)
        atomic_store(&e->due_ms, 0);
}

void conns_request_done(conns_t *t, void *ctx)
{
    conn_entry *e = ctx;
    if (e)
        atomic_store(&e->due_ms, now_ms() + 1000LL * t->timeout);
}

void conns_closed(conns_t *t, void **ctx)
{
    conn_entry *e = *ctx;
    if (!e)
        return;
    pthread_mutex_lock(&t->lock);
    e->prev->next = e->next;
    e->next->prev = e->prev;
    t->open--;
    if (e->key.family)
        key_dec(t, e->key);
    pthread_mutex_unlock(&t->lock);
    free(e);
    *ctx = NULL;
    metrics_conn_closed(t->met, t->slot);
}

int conns_awaiting(conns_t *t, int this_thread, int (*pick)(void *conn, void *cls), void *cls,
                   void **conn, int *fd)
{
    int found = 0;
    pthread_t me = pthread_self();
    pthread_mutex_lock(&t->lock);
    for (conn_entry *e = t->head.next; e != &t->head; e = e->next) {
        if (!atomic_load(&e->due_ms) || (this_thread && !pthread_equal(e->thread, me)) ||
            !pick(e->conn, cls))
            continue;
        if (!found++) {
            *conn = e->conn;
            *fd = e->fd;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found > 1 ? -1 : found;
}

int conns_open(conns_t *t)
{
    pthread_mutex_lock(&t->lock);
    int n = t->open;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int conns_sweep(conns_t *t, double now)
{
    long long ms = (long long)(now * 1000.0);
    int cut = 0;
    char first[48] = "";
    pthread_mutex_lock(&t->lock);
    for (conn_entry *e = t->head.next; e != &t->head; e = e->next) {
        long long due = atomic_load(&e->due_ms);
        /* the exchange loses to a connection whose headers just came */
        if (!due || due > ms || !atomic_compare_exchange_strong(&e->due_ms, &due, 0))
            continue;
        /* libmicrohttpd sees the end of the stream and closes it; the
         * entry is still here, so the fd is still this connection's */
        shutdown(e->fd, SHUT_RDWR);
        if (!cut++)
            snprintf(first, sizeof first, "%s", e->peer);
    }
    pthread_mutex_unlock(&t->lock);
    if (cut) {
        atomic_fetch_add(&t->met->header_timeouts, (uint64_t)cut);
        log_msg("closed %d connection%s on the %s listener whose request headers took more "
                "than %d s (--header-timeout); the first from %s", cut, cut == 1 ? "" : "s",
                t->listener, t->timeout, first);
    }
    return cut;
}
