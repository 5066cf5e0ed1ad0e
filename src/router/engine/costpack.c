/* costpack.c - a request's cost-rule cells in one block (costpack.h). */
#include <stdlib.h>
#include <string.h>

#include "costpack.h"

/* The header, then idx[n] and q[n] (both 4-byte, so aligned). */
struct cost_pack {
    int32_t n;
    int32_t pad;
    double kv;
};

static size_t pack_size(int32_t n)
{
    return sizeof(cost_pack) + (size_t)n * (sizeof(uint32_t) + sizeof(float));
}

cost_pack *cost_pack_make(cost_req *r, int *oom)
{
    *oom = 0;
    cost_req_sparse(r);
    if (r->n <= 0 && r->kv == 0)
        return NULL;
    int32_t n = r->n > 0 ? r->n : 0;
    cost_pack *p = malloc(pack_size(n));
    if (!p) {
        *oom = 1;
        return NULL;
    }
    p->n = n;
    p->pad = 0;
    p->kv = r->kv;
    unsigned char *a = (unsigned char *)(p + 1);
    memcpy(a, r->idx, (size_t)n * sizeof(uint32_t));
    memcpy(a + (size_t)n * sizeof(uint32_t), r->q, (size_t)n * sizeof(float));
    return p;
}

void cost_pack_view(const cost_pack *p, cost_req *view)
{
    memset(view, 0, sizeof *view);
    view->sparse = 1;   /* stored cells, no dense row: what a remove reads */
    if (!p)
        return;
    unsigned char *a = (unsigned char *)(p + 1);
    view->n = view->cap = p->n;
    view->idx = (uint32_t *)a;
    view->q = (float *)(a + (size_t)p->n * sizeof(uint32_t));
    view->kv = p->kv;
}

size_t cost_pack_bytes(const cost_pack *p)
{
    return p ? pack_size(p->n) : 0;
}
