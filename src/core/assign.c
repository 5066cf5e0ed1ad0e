/* assign.c - exact balanced assignment by successive shortest paths
 * (see assign.h).
 *
 * The flow network: each point is a source of one unit with an edge to
 * every cluster (cost[i][c]); each cluster is an edge of capacity cap to
 * the sink T. Points are inserted one at a time; each insertion augments
 * one unit along a shortest path in the residual network, which keeps the
 * flow optimal for the points inserted so far (no negative cycle).
 *
 * Point nodes are never materialised. A residual path that goes from
 * cluster c back through a point j in c and on to cluster c2 means "move j
 * from c to c2" and costs cost[j][c2] - cost[j][c]; only the cheapest such
 * j matters, so for every ordered pair (c, c2) an indexed min-heap keeps
 * the points of c keyed by that difference, and top[c][c2] mirrors its
 * minimum in one dense K x K array that Dijkstra reads. Dijkstra only
 * ever leaves a full cluster (a path ends at the first cluster with room),
 * so the heaps of a cluster are built, in O(K cap), when it first becomes
 * full; until then its points are only listed. A full cluster stays full.
 * Potentials on the
 * K cluster nodes and T (Johnson's reweighting) keep reduced edge costs
 * non-negative, so plain O(K^2) Dijkstra applies; it stops as soon as T is
 * settled, and the potentials move by min(dist, dist_T), which stays valid
 * for the nodes it did not settle. There is always a cluster with room
 * (k * cap >= n), and every cluster is reachable straight from the new
 * point, so a path always exists. */
#include "assign.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

typedef struct hent {
    double key;
    int pt;
} hent;

typedef struct solver {
    const double *cost;
    int n, k, cap;
    int *cl;     /* [n] cluster of each inserted point */
    int *size;   /* [k] points in each cluster */
    hent *heap;  /* [k*k][cap]: heap (c, c2) = points of c by cost[j][c2] - cost[j][c] */
    int *pos;    /* [n*k] position of point j in heap (cl[j], c2) */
    int *members;/* [k][cap] points of a cluster whose heaps are not built yet */
    char *built; /* [k] the cluster has been full: its heaps are live */
    double *top; /* [k*k] minimum key of heap (c, c2), INFINITY when empty */
    double *pot; /* [k] potentials of the cluster nodes */
    double *dist;
    int *prev;   /* [k] previous cluster on the shortest path, -1 = the new point */
    int *via;    /* [k] the point that moves from prev[c] into c */
    char *done;
} solver;

static hent *heap_of(solver *s, int c, int c2)
{
    return s->heap + ((size_t)c * (size_t)s->k + (size_t)c2) * (size_t)s->cap;
}

static void heap_set(solver *s, hent *h, int c2, int i, hent e)
{
    h[i] = e;
    s->pos[(size_t)e.pt * (size_t)s->k + (size_t)c2] = i;
}

static void sift_up(solver *s, hent *h, int c2, int i)
{
    hent e = h[i];
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (h[parent].key <= e.key)
            break;
        heap_set(s, h, c2, i, h[parent]);
        i = parent;
    }
    heap_set(s, h, c2, i, e);
}

static void sift_down(solver *s, hent *h, int c2, int i, int count)
{
    hent e = h[i];
    for (;;) {
        int child = 2 * i + 1;
        if (child >= count)
            break;
        if (child + 1 < count && h[child + 1].key < h[child].key)
            child++;
        if (e.key <= h[child].key)
            break;
        heap_set(s, h, c2, i, h[child]);
        i = child;
    }
    heap_set(s, h, c2, i, e);
}

/* Heaps (c, c2) of a cluster that just became full, from its member list:
 * entries placed, then heapified bottom up. */
static void build_heaps(solver *s, int c)
{
    const int *mem = s->members + (size_t)c * (size_t)s->cap;
    int count = s->size[c];
    for (int c2 = 0; c2 < s->k; c2++) {
        if (c2 == c)
            continue;
        hent *h = heap_of(s, c, c2);
        for (int i = 0; i < count; i++) {
            const double *row = s->cost + (size_t)mem[i] * (size_t)s->k;
            heap_set(s, h, c2, i, (hent){row[c2] - row[c], mem[i]});
        }
        for (int i = count / 2 - 1; i >= 0; i--)
            sift_down(s, h, c2, i, count);
        s->top[(size_t)c * (size_t)s->k + (size_t)c2] = h[0].key;
    }
    s->built[c] = 1;
}

static void point_insert(solver *s, int j, int c)
{
    s->cl[j] = c;
    if (!s->built[c]) {
        s->members[(size_t)c * (size_t)s->cap + (size_t)s->size[c]++] = j;
        if (s->size[c] == s->cap)
            build_heaps(s, c);
        return;
    }
    const double *row = s->cost + (size_t)j * (size_t)s->k;
    int at = s->size[c];
    for (int c2 = 0; c2 < s->k; c2++) {
        if (c2 == c)
            continue;
        hent *h = heap_of(s, c, c2);
        h[at] = (hent){row[c2] - row[c], j};
        sift_up(s, h, c2, at);
        s->top[(size_t)c * (size_t)s->k + (size_t)c2] = h[0].key;
    }
    s->size[c]++;
}

/* Only ever from a full cluster (one on a shortest path), whose heaps are
 * built. */
static void point_remove(solver *s, int j)
{
    int c = s->cl[j];
    int last = s->size[c] - 1;
    for (int c2 = 0; c2 < s->k; c2++) {
        if (c2 == c)
            continue;
        hent *h = heap_of(s, c, c2);
        int i = s->pos[(size_t)j * (size_t)s->k + (size_t)c2];
        if (i != last) {
            /* The last entry fills the hole and may belong above or below. */
            heap_set(s, h, c2, i, h[last]);
            if (i > 0 && h[i].key < h[(i - 1) / 2].key)
                sift_up(s, h, c2, i);
            else
                sift_down(s, h, c2, i, last);
        }
        s->top[(size_t)c * (size_t)s->k + (size_t)c2] = last > 0 ? h[0].key : INFINITY;
    }
    s->size[c]--;
    s->cl[j] = -1;
}

/* Shortest path from new point i to T; then move the points along it and
 * update the potentials. Every cluster with room has the potential of T
 * (true at the start, and kept by the update below; a full cluster never
 * gets room again, since augmenting only ever adds a point to the path's
 * last cluster), so its edge to T has reduced cost 0: the first cluster
 * with room that Dijkstra settles is where the path ends, at its distance.
 * Only full clusters are ever expanded. */
static void insert_point(solver *s, int i)
{
    int k = s->k;
    const double *row = s->cost + (size_t)i * (size_t)k;
    double *pot = s->pot, *dist = s->dist;
    int last = -1; /* the cluster with room where the path ends */

    for (int c = 0; c < k; c++) {
        dist[c] = row[c] - pot[c];
        s->prev[c] = -1;
        s->done[c] = 0;
    }
    for (;;) {
        int u = -1;
        for (int c = 0; c < k; c++)
            if (!s->done[c] && (u < 0 || dist[c] < dist[u]))
                u = c;
        s->done[u] = 1;
        if (s->size[u] < s->cap) {
            last = u;
            break;
        }
        const double *tu = s->top + (size_t)u * (size_t)k;
        for (int c = 0; c < k; c++) {
            if (s->done[c] || tu[c] == INFINITY)
                continue;
            double dc = dist[u] + tu[c] + pot[u] - pot[c];
            if (dc < dist[c]) {
                dist[c] = dc;
                s->prev[c] = u;
                s->via[c] = heap_of(s, u, c)[0].pt;
            }
        }
    }
    double dist_t = dist[last];

    /* Walk back from the end: each cluster on the path receives the point
     * that leaves its predecessor; going backwards keeps every size <= cap. */
    for (int c = last; c >= 0;) {
        int from = s->prev[c];
        int pt = from < 0 ? i : s->via[c];
        if (from >= 0)
            point_remove(s, pt);
        point_insert(s, pt, c);
        c = from;
    }
    /* Johnson's update, capped at T's distance for the unsettled clusters
     * (their true distance is at least that), keeps reduced costs >= 0. */
    for (int c = 0; c < k; c++)
        pot[c] += s->done[c] ? dist[c] : dist_t;
}

static void solver_free(solver *s)
{
    free(s->cl); free(s->size); free(s->heap); free(s->pos); free(s->top); free(s->members);
    free(s->built);
    free(s->pot); free(s->dist); free(s->prev); free(s->via); free(s->done);
}

static int solver_init(solver *s, const double *cost, int n, int k, int cap)
{
    memset(s, 0, sizeof *s);
    s->cost = cost;
    s->n = n;
    s->k = k;
    s->cap = cap;
    size_t kk = (size_t)k * (size_t)k;
    s->cl = eldr_calloc((size_t)n, sizeof *s->cl);
    s->size = eldr_calloc((size_t)k, sizeof *s->size);
    s->heap = kk > SIZE_MAX / (size_t)cap ? NULL : eldr_calloc(kk * (size_t)cap, sizeof *s->heap);
    s->pos = eldr_calloc((size_t)n * (size_t)k, sizeof *s->pos);
    s->top = eldr_calloc(kk, sizeof *s->top);
    s->pot = eldr_calloc((size_t)k, sizeof *s->pot);
    s->dist = eldr_calloc((size_t)k, sizeof *s->dist);
    s->prev = eldr_calloc((size_t)k, sizeof *s->prev);
    s->via = eldr_calloc((size_t)k, sizeof *s->via);
    s->done = eldr_calloc((size_t)k, 1);
    s->members = eldr_calloc((size_t)k * (size_t)cap, sizeof *s->members);
    s->built = eldr_calloc((size_t)k, 1);
    if (!s->cl || !s->size || !s->heap || !s->pos || !s->top || !s->pot || !s->dist ||
        !s->prev || !s->via || !s->done || !s->members || !s->built) {
        solver_free(s);
        return -1;
    }
    for (size_t i = 0; i < kk; i++)
        s->top[i] = INFINITY;
    return 0;
}

int assign_balanced(const double *cost, int n, int k, int cap, int *assign,
                    double *objective, char *err, size_t errlen)
{
    if (n < 0 || k < 1)
        return eldr_errf(err, errlen, "assign: need n >= 0 points and k >= 1 clusters, got n=%d k=%d", n, k);
    if (cap < 1 || (long long)k * cap < n)
        return eldr_errf(err, errlen,
                         "assign: capacity %d per cluster x %d clusters cannot hold %d points", cap, k, n);
    /* Differences and potentials of costs this large could overflow. */
    for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
        if (!isfinite(cost[i]) || fabs(cost[i]) > 1e100)
            return eldr_errf(err, errlen, "assign: cost[%zu][%zu] = %g is not a finite cost within +-1e100",
                             i / (size_t)k, i % (size_t)k, cost[i]);
    if (cap > n)
        cap = n > 0 ? n : 1; /* more room than points changes nothing but memory */
    double kk_bytes = (double)k * k * cap * sizeof(hent) + (double)n * k * sizeof(int);
    size_t mem = eldr_phys_mem();
    if (mem && kk_bytes > (double)mem / 2)
        return eldr_errf(err, errlen, "assign: n=%d k=%d needs %.0f MB of working memory, too much",
                         n, k, kk_bytes / 1e6);

    solver s;
    if (solver_init(&s, cost, n, k, cap) < 0)
        return eldr_errf(err, errlen, "assign: out of memory for n=%d k=%d", n, k);
    for (int i = 0; i < n; i++)
        insert_point(&s, i);

    double total = 0.0;
    for (int i = 0; i < n; i++) {
        assign[i] = s.cl[i];
        total += cost[(size_t)i * (size_t)k + (size_t)s.cl[i]];
    }
    if (objective)
        *objective = total;
    solver_free(&s);
    return 0;
}
