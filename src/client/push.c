/* push.c - a new model to a running eldrd, aligned first (push.h). */
#include "push.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "snapshot.h"

/* eldrd's 404 for an admin path asked on its public listener names
 * --admin-listen (src/router/api/api.c); say where to go instead. */
static void admin_elsewhere(client_t *c, char *err, size_t errlen)
{
    if (strstr(err, "--admin-listen"))
        eldr_errf(err, errlen, "%s is eldrd's public listener; its admin endpoints "
                  "(GET /v1/snapshot, PUT /v1/model) answer on its --admin-listen address: "
                  "push there", client_url(c));
}

int push_prepare(client_t *c, const model_t *cand, push_plan *p, long *status, char *err,
                 size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->live_tau = NAN;
    p->live_generation = -1;
    json_t *snap;
    long st = 0;
    int rc = client_call(c, "GET", "/v1/snapshot?centroids=1&decisions=0", NULL, 0, &st, &snap,
                         err, errlen);
    if (status)
        *status = st;
    if (rc < 0) {
        if (st == 404)
            admin_elsewhere(c, err, errlen);
        return -1;
    }
    char where[CLIENT_URL_MAX + 32];
    snprintf(where, sizeof where, "%s/v1/snapshot", client_url(c));
    rc = snapshot_model_json(snap, where, &p->live, err, errlen);
    json_t *m = json_object_get(snap, "model"), *tau = json_object_get(snap, "tau");
    if (json_is_integer(json_object_get(m, "generation")))
        p->live_generation = (int64_t)json_integer_value(json_object_get(m, "generation"));
    const char *origin = json_string_value(json_object_get(m, "origin"));
    snprintf(p->live_origin, sizeof p->live_origin, "%s", origin ? origin : "");
    if (json_is_number(tau))
        p->live_tau = json_number_value(tau);
    json_decref(snap);
    if (rc < 0)
        return -1;
    if ((rc = model_align_plan(p->live, cand, &p->align, err, errlen)) < 0 ||
        !(p->aligned = model_align_apply(p->live, cand, &p->align, err, errlen))) {
        push_plan_free(p);
        return rc < 0 ? rc : -1;
    }
    return 0;
}

int push_send(client_t *c, const push_plan *p, json_t **out, long *status, char *err,
              size_t errlen)
{
    char *text;
    if (status)
        *status = 0;
    if (model_to_json_text(p->aligned, &text, err, errlen) < 0)
        return -1;
    int rc = client_call(c, "PUT", "/v1/model", text, strlen(text), status, out, err, errlen);
    free(text);
    return rc;
}

void push_plan_free(push_plan *p)
{
    model_free(p->live);
    model_free(p->aligned);
    p->live = p->aligned = NULL;
}
