/* dash_free.c - the destructors of the dashboard's owned results, a run
 * (dash_sim) and a fit (dash_fit): the data code that makes them, the
 * cache that loads them and live mode that builds a fit from a snapshot
 * all free them here, so none of those files calls another to free
 * (docs/architecture.md, "Rooms"). */
#include <stdlib.h>

#include "dash_free.h"

void dash_sim_free(dash_sim *s)
{
    if (!s)
        return;
    sim_result_free(&s->res);
    free(s->routed);
    free(s->layer_distinct);
    free(s->layer_expected);
    free(s->inflight);
    free(s->running);
    free(s);
}

void dash_fit_free(dash_fit *f)
{
    if (!f)
        return;
    model_free(f->model);
    free(f->sizes);
    free(f->reassigned);
    free(f->pts);
    free(f->pt_cluster);
    free(f->cent);
    free(f);
}
