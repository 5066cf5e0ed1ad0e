/* readiness.c - the one readiness answer (readiness.h). */
#include "readiness.h"

#include <string.h>

#include "endpoints_file.h"
#include "log.h"

static const char *const role_name[2] = {"prefill", "decode"};

void readiness_get(engine_t *d, readiness *r)
{
    memset(r, 0, sizeof *r);
    int picker = d->ep != NULL;
    /* the roles: both in proxy mode; as the picker, decode, and prefill
     * when the file maps prefill pods; none otherwise (eldrd only answers
     * /v1/route, and its callers keep their own health) */
    r->shown[POOL_PREFILL] = r->need[POOL_PREFILL] = d->o->proxy;
    r->shown[POOL_DECODE] = r->need[POOL_DECODE] = d->o->proxy || picker;
    if (picker && !d->o->proxy && endpoints_table_n_prefill(d->ep) > 0)
        r->shown[POOL_PREFILL] = 1;
    double now = mono_now();
    for (int role = POOL_PREFILL; role <= POOL_DECODE; role++) {
        if (!r->shown[role])
            continue;
        double back;
        r->of[role] = role == POOL_PREFILL ? d->pool.n_prefill : d->pool.K;
        r->in[role] = pool_in_rotation(&d->pool, (pool_role)role, now, &back);
        if (!r->in[role] && r->need[role] && !r->why) {
            r->why = role_name[role];
            r->back = back;
        }
    }
    if (picker && endpoints_table_k(d->ep) != d->K)
        r->why = "endpoints";
    if (atomic_load(&d->draining))
        r->why = "draining";
    r->ready = r->why == NULL;
}
