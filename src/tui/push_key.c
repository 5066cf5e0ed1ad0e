/* push_key.c - the dashboard's push (push_key.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "push_key.h"

int dash_push_open(dash_push *p, const char *url, const char *token_file, double timeout_s,
                   char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (!url)
        return 0;
    p->c = client_new(url, timeout_s, err, errlen);
    if (!p->c)
        return -1;
    if (token_file && client_use_token_file(p->c, token_file, "--token-file", err, errlen) < 0) {
        client_free(p->c);
        p->c = NULL;
        return -1;
    }
    return 0;
}

void dash_push_close(dash_push *p)
{
    if (p->planned)
        push_plan_free(&p->plan);
    client_free(p->c);
    memset(p, 0, sizeof *p);
}

#define LINE(q, ...) \
    do { \
        if ((q)->n < DASH_CONFIRM_LINES) \
            snprintf((q)->line[(q)->n++], sizeof (q)->line[0], __VA_ARGS__); \
    } while (0)

/* The plan as lines: a title that says it is a question and where the
 * model goes (never the help box's "help"), what is pushed and what is
 * served now, what each worker gets, what changes beside the centroids,
 * the answer keys. */
static void plan_lines(const dash_push *p, const dash_t *d, const model_t *m, dash_confirm *q)
{
    const push_plan *pl = &p->plan;
    const model_align *a = &pl->align;
    q->n = 0;
    snprintf(q->title, sizeof q->title, "confirm: push to %.70s", client_url(p->c));
    const dash_fit *f = d->fit;
    char what[80];
    if (f->origin == DASH_FIT_FILE && d->model_name[0])
        snprintf(what, sizeof what, "the model of %.60s", d->model_name);
    else
        snprintf(what, sizeof what, "%s", f->origin == DASH_FIT_REFIT
                                              ? "the model refitted here ([/] K)"
                                              : "the model fitted here (default recipe)");
    LINE(q, "push %.80s: K %d, %s over %d layers, tau %.2f", what, m->K,
         sig_variant_name(m->recipe.variant), m->recipe.n_layers, m->tau);
    LINE(q, "to eldrd at %s (PUT /v1/model), replacing generation %lld: K %d, tau %.2f",
         client_url(p->c), (long long)pl->live_generation, pl->live->K, pl->live_tau);
    LINE(q, "%-16s %-9s %12s %13s", "live worker", "gets", "cos aligned", "cos as given");
    int rows = DASH_CONFIRM_LINES - 7;
    for (int i = 0; i < a->K && i < rows; i++)
        LINE(q, "%-16.16s cluster %-2d %12.3f %13.3f", pl->live->workers[i], a->perm[i],
             a->cos[i], a->cos_as_given[i]);
    if (a->K > rows)
        LINE(q, "... and %d more workers", a->K - rows);
    LINE(q, "%d of %d workers take another cluster than the file's order gives them", a->moved,
         a->K);
    if (a->recipe_changed)
        LINE(q, "also changed: %.140s", a->what_changed);
    LINE(q, "y: send it (PUT /v1/model)   any other key: keep the live model");
    snprintf(q->keys, sizeof q->keys, "y send, other key keep");
}

void dash_push_ask(dash_push *p, dash_t *d)
{
    if (!p->c) {
        snprintf(d->status, sizeof d->status, "P pushes the model shown to eldrd: start the "
                 "dashboard with --push-to URL");
        return;
    }
    if (d->busy || !d->fit) {
        snprintf(d->status, sizeof d->status, "push: wait for the running job to finish");
        return;
    }
    if (p->planned) {
        push_plan_free(&p->plan);
        p->planned = 0;
    }
    char err[ELDR_ERRLEN];
    long status = 0;
    const model_t *m = d->fit->model;
    int rc = push_prepare(p->c, m, &p->plan, &status, err, sizeof err);
    if (rc != 0) {
        snprintf(d->status, sizeof d->status, "push: %s", err);
        return;
    }
    p->planned = 1;
    plan_lines(p, d, m, &d->confirm);
    d->confirm.on = 1;
}

void dash_push_answer(dash_push *p, dash_t *d, int yes)
{
    d->confirm.on = 0;
    if (!p->planned)
        return;
    if (!yes) {
        snprintf(d->status, sizeof d->status, "push: cancelled; eldrd keeps generation %lld",
                 (long long)p->plan.live_generation);
    } else {
        char err[ELDR_ERRLEN];
        long status = 0;
        json_t *out = NULL;
        if (push_send(p->c, &p->plan, &out, &status, err, sizeof err) < 0) {
            snprintf(d->status, sizeof d->status, "push: %s", err);
        } else {
            const json_t *g = json_object_get(out, "model_generation");
            snprintf(d->status, sizeof d->status, "pushed: eldrd serves generation %lld "
                     "(was %lld), K %d, %d workers took another cluster",
                     (long long)json_integer_value(g), (long long)p->plan.live_generation,
                     p->plan.align.K, p->plan.align.moved);
        }
        json_decref(out);
    }
    push_plan_free(&p->plan);
    p->planned = 0;
}
