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
 * request), what cost_state_remove takes; it borrows p, which must
 * outlive it. */
void cost_pack_view(const cost_pack *p, cost_req *view);

/* The request to remove p with: when p touches more than a third of the
 * cells, p scattered into row, a zeroed dense request of the state's
 * cells (cost_req_set's vectorised dense path is then the faster remove:
 * 1.3 ns a cell against 3.6 ns a stored cell), else the view of p in
 * *view. Both give the same products cell by cell. Give row back with
 * cost_pack_unscatter before it is used again. */
const cost_req *cost_pack_removal(const cost_pack *p, cost_req *view, cost_req *row);
/* row zeroed again where p was scattered into it (a no-op when it was not). */
void cost_pack_unscatter(const cost_pack *p, cost_req *row);

/* Bytes p holds (0 for NULL): what the in-flight table's estimate costs. */
size_t cost_pack_bytes(const cost_pack *p);

#endif
