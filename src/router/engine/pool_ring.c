/* pool_ring.c - prefill choice by consistent hashing (pool_ring.h). */
#include "pool_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blake2b.h"

typedef struct point {
    uint64_t pos;
    int owner;
} point;

static int by_pos(const void *a, const void *b)
{
    const point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return x->owner - y->owner;   /* Python sorts (pos, index) tuples */
}

int pring_init(pring *r, const char *const *urls, int n)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->points = (size_t)n * RING_VNODES;
    point *pts = malloc(r->points * sizeof *pts);
    r->pos = malloc(r->points * sizeof *r->pos);
    r->owner = malloc(r->points * sizeof *r->owner);
    if (!pts || !r->pos || !r->owner) {
        free(pts);
        pring_free(r);
        return -1;
    }
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (int v = 0; v < RING_VNODES; v++) {
            char key[1100];
            int len = snprintf(key, sizeof key, "%s#%d", urls[i], v);
            if (len >= (int)sizeof key)
                len = (int)sizeof key - 1;
            pts[k].pos = blake2b_64(key, (size_t)len);
            pts[k++].owner = i;
        }
    qsort(pts, r->points, sizeof *pts, by_pos);
    for (size_t i = 0; i < r->points; i++) {
        r->pos[i] = pts[i].pos;
        r->owner[i] = pts[i].owner;
    }
    free(pts);
    return 0;
}

void pring_free(pring *r)
{
    free(r->pos);
    free(r->owner);
    r->pos = NULL;
    r->owner = NULL;
}

/* The least loaded eligible instance, lowest index on ties; -1 none. */
static int least_loaded(const int64_t *loads, const uint8_t *ok, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if ((!ok || ok[i]) && (best < 0 || loads[i] < loads[best]))
            best = i;
    return best;
}

int pring_pick(const pring *r, const void *key, size_t len, const int64_t *loads)
{
    return pring_pick_among(r, key, len, loads, NULL);
}

/* An ineligible owner passes its point on to the next point's owner, so
 * the other instances keep exactly their prefixes (and KV caches): only
 * the ineligible one's share moves. The mean of the load gate is over the
 * eligible instances. */
int pring_pick_among(const pring *r, const void *key, size_t len, const int64_t *loads,
                     const uint8_t *ok)
{
    int n_ok = 0;
    int64_t total = 1;
    for (int i = 0; i < r->n; i++)
        if (!ok || ok[i]) {
            n_ok++;
            total += loads[i];
        }
    if (n_ok == 0)
        return -1;
    if (len == 0)
        return least_loaded(loads, ok, r->n);
    uint64_t h = blake2b_64(key, len < RING_PREFIX_BYTES ? len : RING_PREFIX_BYTES);
    size_t lo = 0, hi = r->points;   /* first position >= h */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t at = lo < r->points ? lo : 0;
    while (ok && !ok[r->owner[at]])
        at = at + 1 < r->points ? at + 1 : 0;
    int initial = r->owner[at];
    double threshold = (double)total / n_ok * RING_LOAD_FACTOR;
    if ((double)loads[initial] <= threshold)
        return initial;
    return least_loaded(loads, ok, r->n);
}
