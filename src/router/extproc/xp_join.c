/* xp_join.c - the picker's pending joins (xp_join.h): entries in arrival
 * order (the oldest is the one to evict and the first to expire, since
 * every entry lives the same ttl), found through two chained hash tables,
 * one per key. The stats are atomics: /metrics reads them on another
 * thread. */
#include "xp_join.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct jent {
    struct jent *older, *newer;          /* arrival order */
    struct jent *next_rid, *next_tk;     /* hash chains */
    char *rid, *tk;                      /* keys (NULL: not under that one) */
    size_t tklen;
    uint64_t hrid, htk;
    double at;
    xp_joined info;
    uint16_t counts[];
} jent;

struct xp_join {
    size_t max, cells, nb, n;
    double ttl;
    jent *oldest, *newest;
    jent **by_rid, **by_tk;              /* [nb] */
    atomic_ullong stored, by_request_id, by_transfer, evicted, expired, replaced;
    atomic_size_t pending;
};

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

xp_join *xp_join_new(size_t max, double ttl, size_t cells)
{
    if (max < 1)
        return NULL;
    xp_join *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->max = max;
    j->ttl = ttl;
    j->cells = cells;
    j->nb = 16;
    while (j->nb < 2 * max && j->nb < ((size_t)1 << 24))
        j->nb *= 2;
    j->by_rid = calloc(j->nb, sizeof *j->by_rid);
    j->by_tk = calloc(j->nb, sizeof *j->by_tk);
    if (!j->by_rid || !j->by_tk) {
        xp_join_free(j);
        return NULL;
    }
    return j;
}

static void unchain(jent **head, jent *e, int tk)
{
    for (jent **pp = head; *pp; pp = tk ? &(*pp)->next_tk : &(*pp)->next_rid)
        if (*pp == e) {
            *pp = tk ? e->next_tk : e->next_rid;
            return;
        }
}

static void drop(xp_join *j, jent *e)
{
    if (e->rid)
        unchain(&j->by_rid[e->hrid & (j->nb - 1)], e, 0);
    if (e->tk)
        unchain(&j->by_tk[e->htk & (j->nb - 1)], e, 1);
    if (e->older)
        e->older->newer = e->newer;
    else
        j->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        j->newest = e->older;
    j->n--;
    atomic_store(&j->pending, j->n);
    free(e->rid);
    free(e->tk);
    free(e);
}

void xp_join_free(xp_join *j)
{
    if (!j)
        return;
    while (j->oldest)
        drop(j, j->oldest);
    free(j->by_rid);
    free(j->by_tk);
    free(j);
}

void xp_join_expire(xp_join *j, double now)
{
    while (j->oldest && now - j->oldest->at > j->ttl) {
        drop(j, j->oldest);
        atomic_fetch_add(&j->expired, 1);
    }
}

/* The transfer key: engine, a unit separator, request (no NUL inside). */
static char *tkey(const char *engine, size_t elen, const char *request, size_t rlen, size_t *n)
{
    if (!engine || !request || (!elen && !rlen))
        return NULL;
    char *k = malloc(elen + rlen + 2);
    if (!k)
        return NULL;
    memcpy(k, engine, elen);
    k[elen] = '\x1f';
    memcpy(k + elen + 1, request, rlen);
    k[elen + 1 + rlen] = '\0';
    *n = elen + 1 + rlen;
    return k;
}

static jent *find_rid(const xp_join *j, const char *rid)
{
    uint64_t h = fnv(rid, strlen(rid));
    for (jent *e = j->by_rid[h & (j->nb - 1)]; e; e = e->next_rid)
        if (e->hrid == h && !strcmp(e->rid, rid))
            return e;
    return NULL;
}

static jent *find_tk(const xp_join *j, const char *k, size_t n)
{
    uint64_t h = fnv(k, n);
    for (jent *e = j->by_tk[h & (j->nb - 1)]; e; e = e->next_tk)
        if (e->htk == h && e->tklen == n && !memcmp(e->tk, k, n))
            return e;
    return NULL;
}

int xp_join_put(xp_join *j, const char *rid, const char *engine, size_t elen,
                const char *request, size_t rlen, const uint16_t *counts,
                const xp_joined *info, double now)
{
    xp_join_expire(j, now);
    if (rid && !*rid)
        rid = NULL;
    size_t tklen = 0;
    char *tk = tkey(engine, elen, request, rlen, &tklen);
    if (!rid && !tk)
        return engine && request && (elen || rlen) ? -1 : 0;
    jent *e = malloc(sizeof *e + j->cells * sizeof *counts);
    char *r = rid ? strdup(rid) : NULL;
    if (!e || (rid && !r)) {
        free(e);
        free(r);
        free(tk);
        return -1;
    }
    jent *old;
    while ((rid && (old = find_rid(j, rid))) || (tk && (old = find_tk(j, tk, tklen)))) {
        drop(j, old);
        atomic_fetch_add(&j->replaced, 1);
    }
    while (j->n >= j->max) {
        drop(j, j->oldest);
        atomic_fetch_add(&j->evicted, 1);
    }
    memset(e, 0, sizeof *e);
    e->rid = r;
    e->tk = tk;
    e->tklen = tklen;
    e->at = now;
    e->info = *info;
    memcpy(e->counts, counts, j->cells * sizeof *counts);
    if (r) {
        e->hrid = fnv(r, strlen(r));
        jent **h = &j->by_rid[e->hrid & (j->nb - 1)];
        e->next_rid = *h;
        *h = e;
    }
    if (tk) {
        e->htk = fnv(tk, tklen);
        jent **h = &j->by_tk[e->htk & (j->nb - 1)];
        e->next_tk = *h;
        *h = e;
    }
    e->older = j->newest;
    if (j->newest)
        j->newest->newer = e;
    else
        j->oldest = e;
    j->newest = e;
    j->n++;
    atomic_store(&j->pending, j->n);
    atomic_fetch_add(&j->stored, 1);
    return 1;
}

int xp_join_take(xp_join *j, const char *rid, const char *engine, size_t elen,
                 const char *request, size_t rlen, uint16_t *counts, xp_joined *info,
                 double now)
{
    xp_join_expire(j, now);
    jent *e = rid && *rid ? find_rid(j, rid) : NULL;
    int by = XP_JOIN_BY_REQUEST_ID;
    if (!e) {
        size_t n = 0;
        char *tk = tkey(engine, elen, request, rlen, &n);
        e = tk ? find_tk(j, tk, n) : NULL;
        free(tk);
        by = XP_JOIN_BY_TRANSFER;
    }
    if (!e)
        return 0;
    memcpy(counts, e->counts, j->cells * sizeof *counts);
    *info = e->info;
    info->by = by;
    atomic_fetch_add(by == XP_JOIN_BY_REQUEST_ID ? &j->by_request_id : &j->by_transfer, 1);
    drop(j, e);
    return 1;
}

void xp_join_get_stats(const xp_join *j, xp_join_stats *st)
{
    xp_join *m = (xp_join *)j;   /* atomic loads of a const object */
    st->stored = atomic_load(&m->stored);
    st->by_request_id = atomic_load(&m->by_request_id);
    st->by_transfer = atomic_load(&m->by_transfer);
    st->evicted = atomic_load(&m->evicted);
    st->expired = atomic_load(&m->expired);
    st->replaced = atomic_load(&m->replaced);
    st->pending = atomic_load(&m->pending);
}
