/* costpack.h - one in-flight request's cost-rule cells (costrule.h's
 * cost_req, its sparse form) packed into a single malloc'd block, to live
 * with its entry in the in-flight table (idmap.h) until the request
 * leaves.
 *
 * The router state must remove from the estimate exactly what it added
 * (cost_state_remove of the same q), so the block keeps the request's
 * own cells, not its counts: 8 bytes per cell the prompt touched (index,
 * q) and 16 of header. A request with no cells and no tokens (no signal,
 * a gate model) needs none: NULL stands for it. */
#ifndef ELDR_ROUTER_COSTPACK_H
#define ELDR_ROUTER_COSTPACK_H

#include "costrule.h"

typedef struct cost_pack cost_pack;

/* A copy of r's cells (cost_req_sparse runs on r first) in one block
 * (free with free()); NULL for an empty r (*oom 0) or when out of memory
 * (*oom 1). */
cost_pack *cost_pack_make(cost_req *r, int *oom);

/* A read-only sparse cost_req over p's cells (p NULL: the empty
 * request), what cost_state_remove takes (a large one goes through the
 * core's vectorised path: costrule.c scatters it); it borrows p, which
 * must outlive it. */
void cost_pack_view(const cost_pack *p, cost_req *view);

/* Bytes p holds (0 for NULL): what the in-flight table's estimate costs. */
size_t cost_pack_bytes(const cost_pack *p);

#endif
