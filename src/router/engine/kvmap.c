/* kvmap.c - the bounded map from engine block hashes to eldrd's (kvmap.h). */
#include <stdlib.h>

#include "kvmap.h"

typedef struct slot {
    uint64_t key, val, stamp;    /* stamp 0 = empty */
} slot;

typedef struct ring_ent {
    uint64_t key, stamp;
} ring_ent;

struct kvmap {
    slot *t;
    size_t mask;                 /* table size - 1 (a power of two >= 2 cap) */
    size_t n;
    ring_ent *ring;              /* [ring_cap = 2 cap], put order; stale entries
                                  * (a key refreshed or taken since) included */
    size_t cap, ring_cap, head, used; /* oldest at head; used entries */
    uint64_t clock, aged;
};

/* Fibonacci hashing: engine hashes may be Python hash() values of small
 * ints, not mixed at all. */
static size_t home(const kvmap *m, uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17) & m->mask;
}

kvmap *kvmap_new(size_t cap)
{
    if (cap < 1 || cap > ((size_t)1 << 40))
        return NULL;
    kvmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    size_t size = 16;
    while (size < 2 * cap)
        size *= 2;
    m->t = calloc(size, sizeof *m->t);
    m->ring = malloc(2 * cap * sizeof *m->ring);
    if (!m->t || !m->ring) {
        kvmap_free(m);
        return NULL;
    }
    m->mask = size - 1;
    m->cap = cap;
    m->ring_cap = 2 * cap;
    return m;
}

void kvmap_free(kvmap *m)
{
    if (!m)
        return;
    free(m->t);
    free(m->ring);
    free(m);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find(const kvmap *m, uint64_t key)
{
    size_t i = home(m, key);
    while (m->t[i].stamp && m->t[i].key != key)
        i = (i + 1) & m->mask;
    return i;
}

/* Backward-shift deletion: pull later members of the probe run into the
 * hole so that no lookup stops early. */
static void del_at(kvmap *m, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (!m->t[j].stamp)
            break;
        size_t h = home(m, m->t[j].key);
        /* j's entry may move back to i when i is no nearer to j than its
         * home is (cyclically) */
        if (((j - h) & m->mask) >= ((j - i) & m->mask)) {
            m->t[i] = m->t[j];
            i = j;
        }
    }
    m->t[i].stamp = 0;
    m->n--;
}

/* Drop the ring's stale entries (refreshed or taken keys): with at most
 * cap live entries in a ring of 2 cap, at least cap slots come free, so
 * the cost per put stays constant. */
static void compact(kvmap *m)
{
    size_t w = 0;
    for (size_t r = 0; r < m->used; r++) {
        ring_ent e = m->ring[(m->head + r) % m->ring_cap];
        size_t i = find(m, e.key);
        if (m->t[i].stamp == e.stamp)
            m->ring[w++] = e;
    }
    m->head = 0;
    m->used = w;
}

void kvmap_put(kvmap *m, uint64_t key, uint64_t val)
{
    size_t i = find(m, key);
    if (!m->t[i].stamp && m->n == m->cap) {
        /* full: the live entry put longest ago goes (stale ones are skipped) */
        for (;;) {
            ring_ent old = m->ring[m->head];
            m->head = (m->head + 1) % m->ring_cap;
            m->used--;
            size_t j = find(m, old.key);
            if (m->t[j].stamp == old.stamp) {
                del_at(m, j);
                m->aged++;
                break;
            }
        }
        i = find(m, key);
    }
    if (!m->t[i].stamp)
        m->n++;
    m->t[i] = (slot){.key = key, .val = val, .stamp = ++m->clock};
    if (m->used == m->ring_cap)
        compact(m);
    m->ring[(m->head + m->used) % m->ring_cap] = (ring_ent){key, m->clock};
    m->used++;
}

int kvmap_get(const kvmap *m, uint64_t key, uint64_t *val)
{
    size_t i = find(m, key);
    if (!m->t[i].stamp)
        return 0;
    *val = m->t[i].val;
    return 1;
}

int kvmap_take(kvmap *m, uint64_t key, uint64_t *val)
{
    size_t i = find(m, key);
    if (!m->t[i].stamp)
        return 0;
    *val = m->t[i].val;
    del_at(m, i);
    return 1;
}

void kvmap_clear(kvmap *m)
{
    for (size_t i = 0; i <= m->mask; i++)
        m->t[i].stamp = 0;
    m->n = m->head = m->used = 0;
}

size_t kvmap_size(const kvmap *m)
{
    return m->n;
}

uint64_t kvmap_aged(const kvmap *m)
{
    return m->aged;
}
