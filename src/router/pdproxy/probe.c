/* probe.c - active health probes (probe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "probe.h"

typedef struct slot {
    struct probe *pr;
    pool_role role;
    int index;                   /* in its role */
    int origin;                  /* in the upstream client */
    upx *x;                      /* the probe in flight, or NULL */
} slot;

struct probe {
    evloop *loop;
    upc *up;
    pool *pool;
    double interval;
    char path[256];
    ev_timer tick;
    int n;
    slot *slots;
};

static const char *name_of(const slot *s)
{
    return s->role == POOL_PREFILL ? s->pr->pool->prefill[s->index].name
                                   : s->pr->pool->decode[s->index].name;
}

static void verdict(slot *s, int ok, const char *why)
{
    double now = mono_now();
    int was_out = pool_ejected(s->pr->pool, s->role, s->index, now);
    int ejected = pool_report(s->pr->pool, s->role, s->index, ok, now);
    const char *role = s->role == POOL_PREFILL ? "prefill" : "decode";
    if (was_out && ok)
        log_msg("%s %s answers its health probe: back in rotation", role, name_of(s));
    else if (ejected)
        log_msg("%s %s ejected: its health probe failed (%s)", role, name_of(s), why);
}

static int on_body(void *cls, const char *data, size_t n)
{
    (void)cls;
    (void)data;
    (void)n;
    return 0;   /* the status says it all */
}

static void on_done(void *cls, up_result res, int status, const char *why)
{
    slot *s = cls;
    s->x = NULL;
    char msg[300];
    if (res == UP_OK && status >= 200 && status < 300) {
        verdict(s, 1, "");
        return;
    }
    if (res == UP_OK)
        snprintf(msg, sizeof msg, "GET %s answered HTTP %d", s->pr->path, status);
    else
        snprintf(msg, sizeof msg, "GET %s: %s", s->pr->path, why);
    verdict(s, 0, msg);
}

static const up_handler probe_handler = {NULL, on_body, on_done};

static void round_(evloop *l, ev_timer *t)
{
    probe_t *pr = t->cls;
    for (int i = 0; i < pr->n; i++) {
        slot *s = &pr->slots[i];
        if (s->x) {   /* still no answer: the interval is its time limit */
            upc_cancel(pr->up, s->x);
            s->x = NULL;
            verdict(s, 0, "no answer within --health-interval");
        }
        s->x = upc_get(pr->up, s->origin, pr->path, &probe_handler, s);
    }
    evloop_timer_start(l, t, pr->interval);
}

probe_t *probe_start(evloop *l, upc *up, pool *p, double interval, const char *path,
                     char *err, size_t errlen)
{
    probe_t *pr = calloc(1, sizeof *pr);
    int n = p->n_prefill + p->K;
    if (!pr || !(pr->slots = calloc((size_t)n, sizeof *pr->slots))) {
        free(pr);
        eldr_errf(err, errlen, "--health-interval: out of memory");
        return NULL;
    }
    pr->loop = l;
    pr->up = up;
    pr->pool = p;
    pr->interval = interval;
    snprintf(pr->path, sizeof pr->path, "%s", path);
    pr->n = n;
    for (int i = 0; i < n; i++) {
        int pre = i < p->n_prefill;
        pr->slots[i] = (slot){pr, pre ? POOL_PREFILL : POOL_DECODE,
                              pre ? i : i - p->n_prefill, i, NULL};
    }
    evloop_timer_init(&pr->tick, round_, pr);
    evloop_timer_start(l, &pr->tick, 0);
    return pr;
}

void probe_stop(probe_t *pr)
{
    if (!pr)
        return;
    evloop_timer_stop(pr->loop, &pr->tick);
    for (int i = 0; i < pr->n; i++)
        if (pr->slots[i].x)
            upc_cancel(pr->up, pr->slots[i].x);
    free(pr->slots);
    free(pr);
}
