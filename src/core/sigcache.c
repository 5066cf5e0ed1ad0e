/* sigcache.c - the signature cache (sigcache.h): an open-addressing hash
 * table from block hash to entry index, a doubly linked LRU list over the
 * entries (by index, so the counts slab can grow by realloc), and uint8
 * count rows.
 *
 * The table has at least twice as many slots as the capacity, so linear
 * probing stays short; deletion shifts the following run back instead of
 * leaving tombstones, so a cache that churns forever never degrades. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sigcache.h"

#define NIL (-1)

struct sigcache {
    int L, E;
    size_t cells;            /* L * E */
    int64_t capacity;
    /* entries [capacity] */
    uint64_t *hash, *parent;
    int64_t *prev, *next;    /* LRU list: head = most recent */
    int64_t head, tail;
    int64_t used;            /* entries ever handed out (slab rows) */
    int64_t free_head;       /* removed entries, linked through next */
    uint8_t *counts;         /* [slab_rows][cells] */
    int64_t slab_rows;
    /* table */
    int64_t *slot;           /* entry index or NIL */
    uint64_t mask;
    sigcache_stats st;
};

/* ---- creation ---- */

sigcache_t *sigcache_new(int L, int E, int64_t capacity, char *err, size_t errlen)
{
    if (L < 1 || E < 1 || L > 65535 || E > 65535) {
        eldr_errf(err, errlen, "sigcache: bad geometry L = %d, E = %d", L, E);
        return NULL;
    }
    if (capacity < 1 || capacity > ((int64_t)1 << 40)) {
        eldr_errf(err, errlen, "sigcache: capacity %lld blocks out of range (1..2^40)",
                  (long long)capacity);
        return NULL;
    }
    size_t cells = (size_t)L * (size_t)E;
    size_t phys = eldr_phys_mem();
    double need = (double)capacity * ((double)cells + 48 + 16);
    if (phys && need > (double)phys) {
        eldr_errf(err, errlen, "sigcache: %lld blocks of %d x %d counts need %.0f MB, more "
                  "than this machine's %.0f MB", (long long)capacity, L, E, need / 1e6,
                  (double)phys / 1e6);
        return NULL;
    }
    sigcache_t *c = calloc(1, sizeof *c);
    uint64_t slots = 16;
    while (slots < (uint64_t)capacity * 2)
        slots <<= 1;
    if (c) {
        c->hash = eldr_calloc((size_t)capacity, sizeof *c->hash);
        c->parent = eldr_calloc((size_t)capacity, sizeof *c->parent);
        c->prev = eldr_calloc((size_t)capacity, sizeof *c->prev);
        c->next = eldr_calloc((size_t)capacity, sizeof *c->next);
        c->slot = eldr_calloc((size_t)slots, sizeof *c->slot);
    }
    if (!c || !c->hash || !c->parent || !c->prev || !c->next || !c->slot) {
        sigcache_free(c);
        eldr_errf(err, errlen, "sigcache: out of memory for %lld blocks", (long long)capacity);
        return NULL;
    }
    for (uint64_t i = 0; i < slots; i++)
        c->slot[i] = NIL;
    c->L = L;
    c->E = E;
    c->cells = cells;
    c->capacity = capacity;
    c->mask = slots - 1;
    c->head = c->tail = c->free_head = NIL;
    c->st.capacity = capacity;
    return c;
}

void sigcache_free(sigcache_t *c)
{
    if (!c)
        return;
    free(c->hash);
    free(c->parent);
    free(c->prev);
    free(c->next);
    free(c->counts);
    free(c->slot);
    free(c);
}

/* ---- table ---- */

/* The slot holding hash h, or the empty slot where it would go. Block
 * hashes are already well mixed (fmix64), so the low bits index. */
static uint64_t probe(const sigcache_t *c, uint64_t h)
{
    uint64_t i = h & c->mask;
    while (c->slot[i] != NIL && c->hash[c->slot[i]] != h)
        i = (i + 1) & c->mask;
    return i;
}

static int64_t find(const sigcache_t *c, uint64_t h)
{
    return c->slot[probe(c, h)];
}

/* Backward-shift deletion: move later members of the probe run into the
 * hole when their home slot does not lie cyclically in (hole, j]. */
static void table_delete(sigcache_t *c, uint64_t i)
{
    uint64_t j = i;
    c->slot[i] = NIL;
    for (;;) {
        j = (j + 1) & c->mask;
        if (c->slot[j] == NIL)
            return;
        uint64_t home = c->hash[c->slot[j]] & c->mask;
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            c->slot[i] = c->slot[j];
            c->slot[j] = NIL;
            i = j;
        }
    }
}

/* ---- LRU list ---- */

static void unlink_entry(sigcache_t *c, int64_t e)
{
    if (c->prev[e] != NIL)
        c->next[c->prev[e]] = c->next[e];
    else
        c->head = c->next[e];
    if (c->next[e] != NIL)
        c->prev[c->next[e]] = c->prev[e];
    else
        c->tail = c->prev[e];
}

static void push_front(sigcache_t *c, int64_t e)
{
    c->prev[e] = NIL;
    c->next[e] = c->head;
    if (c->head != NIL)
        c->prev[c->head] = e;
    c->head = e;
    if (c->tail == NIL)
        c->tail = e;
}

static void touch(sigcache_t *c, int64_t e)
{
    if (c->head == e)
        return;
    unlink_entry(c, e);
    push_front(c, e);
}

/* Take an entry out of the table and the list, onto the free list. */
static void drop(sigcache_t *c, int64_t e)
{
    table_delete(c, probe(c, c->hash[e]));
    unlink_entry(c, e);
    c->next[e] = c->free_head;
    c->free_head = e;
    c->st.entries--;
}

/* ---- entries ---- */

/* A fresh entry index with a counts row: reuse a removed one, grow the
 * slab, or evict the least recently used. */
static int64_t new_entry(sigcache_t *c)
{
    if (c->free_head != NIL) {
        int64_t e = c->free_head;
        c->free_head = c->next[e];
        return e;
    }
    if (c->used < c->capacity) {
        if (c->used == c->slab_rows) {
            int64_t rows = c->slab_rows ? c->slab_rows * 2 : 64;
            if (rows > c->capacity)
                rows = c->capacity;
            uint8_t *p = realloc(c->counts, (size_t)rows * c->cells);
            if (!p)
                return NIL;
            c->counts = p;
            c->slab_rows = rows;
        }
        return c->used++;
    }
    int64_t e = c->tail;
    drop(c, e);
    c->st.evictions++;
    c->free_head = c->next[e];   /* drop pushed it on the free list */
    return e;
}

static uint8_t *row(const sigcache_t *c, int64_t e)
{
    return c->counts + (size_t)e * c->cells;
}

int sigcache_put(sigcache_t *c, uint64_t hash, uint64_t parent, const uint16_t *counts,
                 char *err, size_t errlen)
{
    for (size_t i = 0; i < c->cells; i++)
        if (counts[i] > SIGCACHE_MAX_BLOCK)
            return eldr_errf(err, errlen, "sigcache: block %016llx: count %u at layer %zu "
                             "expert %zu exceeds %d (block size above %d?)",
                             (unsigned long long)hash, counts[i], i / (size_t)c->E,
                             i % (size_t)c->E, SIGCACHE_MAX_BLOCK, SIGCACHE_MAX_BLOCK);
    int64_t e = find(c, hash);
    if (e != NIL) {
        if (c->parent[e] != parent)
            c->st.chain_mismatches++;
        c->st.updates++;
        touch(c, e);
    } else {
        e = new_entry(c);
        if (e == NIL)
            return eldr_errf(err, errlen, "sigcache: out of memory growing to %lld blocks",
                             (long long)(c->used + 1));
        c->hash[e] = hash;
        c->slot[probe(c, hash)] = e;
        push_front(c, e);
        c->st.entries++;
        c->st.inserts++;
    }
    c->parent[e] = parent;
    uint8_t *r = row(c, e);
    for (size_t i = 0; i < c->cells; i++)
        r[i] = (uint8_t)counts[i];
    return 0;
}

int sigcache_remove(sigcache_t *c, uint64_t hash)
{
    int64_t e = find(c, hash);
    if (e == NIL)
        return 0;
    drop(c, e);
    c->st.removals++;
    return 1;
}

int sigcache_contains(const sigcache_t *c, uint64_t hash)
{
    return find(c, hash) != NIL;
}

/* The entry of block i of a chain, or NIL when absent or re-parented. */
static int64_t chain_entry(const sigcache_t *c, const uint64_t *hashes, int64_t i,
                           uint64_t root, int *mismatch)
{
    int64_t e = find(c, hashes[i]);
    uint64_t want = i ? hashes[i - 1] : root;
    *mismatch = e != NIL && c->parent[e] != want;
    return *mismatch ? NIL : e;
}

int64_t sigcache_match(sigcache_t *c, const uint64_t *hashes, int64_t n, uint64_t root)
{
    int64_t m = 0;
    int mismatch = 0;
    while (m < n && chain_entry(c, hashes, m, root, &mismatch) != NIL)
        m++;
    c->st.lookups++;
    c->st.hit_blocks += m;
    c->st.miss_blocks += m < n;
    c->st.chain_mismatches += mismatch;
    /* deepest first, so block 0 ends up most recent: children age out
     * before the parents they need */
    for (int64_t i = m - 1; i >= 0; i--)
        touch(c, find(c, hashes[i]));
    return m;
}

int sigcache_recover(const sigcache_t *c, const uint64_t *hashes, int64_t m,
                     const uint16_t *fresh, uint16_t *out, char *err, size_t errlen)
{
    uint32_t *acc = calloc(c->cells, sizeof *acc);
    if (!acc)
        return eldr_errf(err, errlen, "sigcache: out of memory");
    for (size_t i = 0; fresh && i < c->cells; i++)
        acc[i] = fresh[i];
    for (int64_t b = 0; b < m; b++) {
        int64_t e = find(c, hashes[b]);
        if (e == NIL) {
            free(acc);
            return eldr_errf(err, errlen, "sigcache: block %lld (%016llx) is not cached",
                             (long long)b, (unsigned long long)hashes[b]);
        }
        const uint8_t *r = row(c, e);
        for (size_t i = 0; i < c->cells; i++)
            acc[i] += r[i];
    }
    for (size_t i = 0; i < c->cells; i++) {
        if (acc[i] > UINT16_MAX) {
            free(acc);
            return eldr_errf(err, errlen, "sigcache: recovered count at layer %zu expert %zu "
                             "overflows uint16", i / (size_t)c->E, i % (size_t)c->E);
        }
        out[i] = (uint16_t)acc[i];
    }
    free(acc);
    return 0;
}

int sigcache_token_counts(const uint16_t *experts, int64_t ntok, int L, int E, int k,
                          uint16_t *out, char *err, size_t errlen)
{
    memset(out, 0, (size_t)L * (size_t)E * sizeof *out);
    for (int64_t t = 0; t < ntok; t++)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < k; j++) {
                uint16_t x = experts[((size_t)t * (size_t)L + (size_t)l) * (size_t)k + (size_t)j];
                if (x >= E)
                    return eldr_errf(err, errlen, "token %lld layer %d: expert id %u >= E = %d",
                                     (long long)t, l, x, E);
                if (out[(size_t)l * (size_t)E + x] == UINT16_MAX)
                    return eldr_errf(err, errlen, "token %lld layer %d: count overflow",
                                     (long long)t, l);
                out[(size_t)l * (size_t)E + x]++;
            }
    return 0;
}

int sigcache_store_blocks(sigcache_t *c, const uint64_t *hashes, int64_t from, int64_t to,
                          uint64_t root, const uint16_t *experts, int64_t ntok, int k, int B,
                          char *err, size_t errlen)
{
    if (B < 1 || B > SIGCACHE_MAX_BLOCK)
        return eldr_errf(err, errlen, "sigcache: block size %d outside 1..%d", B,
                         SIGCACHE_MAX_BLOCK);
    if (from < 0 || to < from || to > ntok / B)
        return eldr_errf(err, errlen, "sigcache: blocks [%lld, %lld) of a %lld-token prompt: "
                         "only its %lld full blocks can be cached", (long long)from,
                         (long long)to, (long long)ntok, (long long)(ntok / B));
    uint16_t *cnt = malloc(c->cells * sizeof *cnt);
    if (!cnt)
        return eldr_errf(err, errlen, "sigcache: out of memory");
    size_t stride = (size_t)c->L * (size_t)k;
    int rc = 0;
    /* deepest first, then the cached prefix: parents end up most recent */
    for (int64_t b = to - 1; rc == 0 && b >= from; b--) {
        rc = sigcache_token_counts(experts + (size_t)b * (size_t)B * stride, B, c->L, c->E, k,
                                   cnt, err, errlen);
        if (rc == 0)
            rc = sigcache_put(c, hashes[b], b ? hashes[b - 1] : root, cnt, err, errlen);
    }
    for (int64_t b = from - 1; rc == 0 && b >= 0; b--) {
        int64_t e = find(c, hashes[b]);
        if (e != NIL)
            touch(c, e);
    }
    free(cnt);
    return rc;
}

int64_t sigcache_lru_order(const sigcache_t *c, uint64_t *out, int64_t max)
{
    int64_t n = 0;
    for (int64_t e = c->head; e != NIL && n < max; e = c->next[e])
        out[n++] = c->hash[e];
    return n;
}

void sigcache_get_stats(const sigcache_t *c, sigcache_stats *s)
{
    *s = c->st;
}
