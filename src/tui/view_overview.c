/* view_overview.c - the trace, the model, the what-if settings and a table
 * of the current policy against every baseline. Live: the daemon, the
 * model it serves, a table of its workers and the drift in one line. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"

static int trace_block(const dash_t *d, canvas_t *c, int x, int y)
{
    cv_style h = cv_fg(CV_DEFAULT, CV_BOLD), p = cv_plain();
    int y0 = y;
    canvas_text(c, x, y++, h, "Trace");
    canvas_textf(c, x, y++, p, "  file      %s", d->trace_name);
    canvas_textf(c, x, y++, p, "  model     %s", d->calib && d->calib->model[0]
                                                     ? d->calib->model : "(unnamed)");
    canvas_textf(c, x, y++, p, "  geometry  L=%d layers, E=%d experts, top-%d", d->L, d->E, d->k);
    char split[160];
    dash_split_text(d, split, sizeof split);
    canvas_textf(c, x, y++, p, "  requests  %lld", (long long)d->n_rows);
    canvas_textf(c, x, y++, p, "  split     %s", split);
    canvas_textf(c, x, y++, p, "  arrivals  %s", d->arrivals);
    return y - y0;
}

static void mask_text(const model_t *m, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->recipe.n_layers && used + 8 < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ",%d" : "%d", m->recipe.layers[i]);
}

/* Where the model shown comes from; a refit must never pass for the
 * file's model (it has other centroids). */
static void source_line(const dash_t *d, canvas_t *c, int x, int y)
{
    const dash_fit *f = d->fit, *home = d->home;
    cv_style p = cv_plain();
    if (f->origin != DASH_FIT_REFIT || !home) {
        canvas_textf(c, x, y, p, "  source    %s", f->origin == DASH_FIT_FILE && d->model_name[0]
                     ? d->model_name : "fitted here (default recipe)");
        return;
    }
    char base[300];
    if (home->origin == DASH_FIT_FILE)
        snprintf(base, sizeof base, "recipe of %s; K %d restores it", d->model_name,
                 home->model->K);
    else
        snprintf(base, sizeof base, "default recipe; K %d restores the first fit",
                 home->model->K);
    canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_BOLD), "  source    refitted here with K %d "
                 "(%s)", f->model->K, base);
}

/* "1 worker (w0)", "2 workers (w0, w1)", "4 workers (w0 ... w3)" */
static void workers_text(const model_t *m, char *buf, size_t n)
{
    if (m->K == 1)
        snprintf(buf, n, "1 worker (%s)", m->workers[0]);
    else
        snprintf(buf, n, "%d workers (%s%s%s)", m->K, m->workers[0], m->K == 2 ? ", " : " ... ",
                 m->workers[m->K - 1]);
}

/* What "balanced" promises - a cap of ceil(N/K) members per cluster, not
 * equal sizes - with the sizes the fit gave. */
static void balance_text(const dash_fit *f, char *buf, size_t n)
{
    const model_t *m = f->model;
    int64_t lo = 0, hi = 0;
    for (int k = 0; k < m->K && f->have_sizes; k++) {
        lo = k == 0 || f->sizes[k] < lo ? f->sizes[k] : lo;
        hi = k == 0 || f->sizes[k] > hi ? f->sizes[k] : hi;
    }
    char sizes[64] = "";
    if (f->have_sizes)
        snprintf(sizes, sizeof sizes, lo == hi ? ", sizes %lld" : ", sizes %lld..%lld",
                 (long long)lo, (long long)hi);
    if (m->balanced == 1 && f->have_sizes && f->n_fit > 0)
        snprintf(buf, n, "balanced fit: at most ceil(%lld/%d) = %lld each%s",
                 (long long)f->n_fit, m->K, (long long)((f->n_fit + m->K - 1) / m->K), sizes);
    else if (m->balanced == 1)
        snprintf(buf, n, "balanced fit: at most ceil(N/K) members each");
    else if (m->balanced == 0)
        snprintf(buf, n, "unbalanced fit: each to its nearest centroid%s", sizes);
    else
        snprintf(buf, n, "fit's balance unknown%s", sizes);
}

static int model_block(const dash_t *d, canvas_t *c, int x, int y)
{
    cv_style h = cv_fg(CV_DEFAULT, CV_BOLD), p = cv_plain();
    const model_t *m = d->fit->model;
    char mask[200];
    int y0 = y;
    mask_text(m, mask, sizeof mask);
    canvas_text(c, x, y++, h, "Model");
    source_line(d, c, x, y++);
    canvas_textf(c, x, y++, p, "  recipe    %s over %d layers: %s",
                 sig_variant_name(m->recipe.variant), m->recipe.n_layers, mask);
    if (isfinite(m->rho))
        canvas_textf(c, x, y++, p, "  quality   rho %.3f, N* %d", m->rho, m->n_star);
    const dash_fit *f = d->fit;
    char names[160], bal[160];
    workers_text(m, names, sizeof names);
    balance_text(f, bal, sizeof bal);
    canvas_textf(c, x, y++, p, "  K         %s; %s", names, bal);
    if (!f->reassigned)
        canvas_textf(c, x, y++, p, "  calib     %lld signatures clustered", (long long)f->n_fit);
    else if (f->have_sizes)
        canvas_textf(c, x, y++, p, "  calib     %lld signatures clustered by the model's fit; "
                     "%lld calibration rows here re-assigned", (long long)f->n_fit,
                     (long long)f->n_reassigned);
    else
        canvas_textf(c, x, y++, p, "  calib     the model file has no cluster sizes; %lld "
                     "calibration rows here re-assigned", (long long)f->n_reassigned);
    if (d->in_sample[0])
        canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_BOLD | CV_REVERSE), "  warning   %s",
                     d->in_sample);
    return y - y0;
}

static void sim_row(const dash_t *d, canvas_t *c, int x, int y, const dash_sim *s, int mark,
                    int wide)
{
    char name[32];
    if (s->policy == ROUTE_ELDR)
        snprintf(name, sizeof name, "eldr t=%.2f", s->tau);
    else
        snprintf(name, sizeof name, "%s%s", route_kind_name(s->policy), mark ? " *" : "");
    cv_style st = s == d->cur ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain();
    const sim_result *r = &s->res;
    int n = canvas_textf(c, x, y, st, "  %-12s %8.2f %8.2f %8.2f %7.1f %6.2f", name,
                         r->tpot_p50_ms, r->tpot_p99_ms, r->distinct_per_step,
                         r->queue_p99_ms, r->imbalance);
    if (wide)
        canvas_textf(c, x + n, y, st, " %7.2f %9.1f", r->reuse, r->tokens_per_s);
}

static void sim_table(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    int wide = w >= 78;
    canvas_text(c, x, y++, cv_fg(CV_DEFAULT, CV_BOLD), "Simulation of the held-out rows");
    int n = canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "  %-12s %8s %8s %8s %7s %6s",
                         "policy", "TPOT p50", "p99 ms", "U/step", "q p99", "imbal");
    if (wide)
        canvas_textf(c, x + n, y, cv_fg(CV_DEFAULT, CV_DIM), " %7s %9s", "reuse", "tok/s");
    y++;
    const dash_sim *best = dash_best_base(d);
    int candidate = d->cur && grid_kind_is_candidate(d->cur->policy);
    if (candidate)                /* eldr or eldr-cost: above the baselines */
        sim_row(d, c, x, y++, d->cur, 0, wide);
    for (int i = 0; i < DASH_N_BASE; i++)
        if (d->base[i])
            sim_row(d, c, x, y++, d->base[i], d->base[i] == best, wide);
    if (d->cur && !candidate)
        canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_DIM), "  (policy %s is one of the "
                     "baselines; p cycles back to eldr)", route_kind_name(d->cur->policy));
    const dash_ci *ci = dash_shown_ci(d);
    /* the star is the header's baseline (dash_best_base): with seeds, the
     * lowest mean over them, which this one run may not show as lowest */
    if (ci)
        canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_DIM), "  * best baseline (lowest mean "
                     "TPOT p50 over the %d seeds); U/step = distinct experts/layer-step",
                     ci->n_seeds);
    else
        canvas_text(c, x, y++, cv_fg(CV_DEFAULT, CV_DIM), "  * best baseline (lowest TPOT "
                    "p50); U/step = distinct experts per layer-step");
    if (ci)   /* the header's changes come from more runs than this table */
        canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "  one run (seed %llu); header: mean "
                     "of %d seeds, %s, +- 95%% CI (7: tau x K)",
                     (unsigned long long)d->opts.seed, ci->n_seeds,
                     ci->resplit ? "each with its own split" : "arrivals only, this split");
}

static int router_block(const dash_t *d, canvas_t *c, int x, int y)
{
    cv_style hd = cv_fg(CV_DEFAULT, CV_BOLD), p = cv_plain();
    const dash_live *L = d->live;
    const dash_live_now *n = &L->now;
    int y0 = y;
    canvas_text(c, x, y++, hd, "Router");
    if (L->attached)
        canvas_textf(c, x, y++, p, "  eldrd     %s, polled every %.1f s: %lld polls, %lld "
                     "failed", L->source, L->interval_s, (long long)L->polls,
                     (long long)L->failures);
    else
        canvas_textf(c, x, y++, p, "  snapshot  %s (saved; one frozen poll)", L->source);
    canvas_textf(c, x, y++, p, "  uptime    %.0f s; loads from %s", n->uptime_s == n->uptime_s
                 ? n->uptime_s : 0, n->load_from);
    if (L->restarts)
        canvas_textf(c, x, y++, (cv_style){196, CV_DEFAULT, CV_BOLD}, "  restarts  %lld seen "
                     "this session; the last: uptime %.0f s -> %.0f s ('!' in the histories)",
                     (long long)L->restarts, L->restart_from, L->restart_to);
    const model_t *m = d->fit ? d->fit->model : NULL;
    char mask[200] = "";
    if (m)
        mask_text(m, mask, sizeof mask);
    canvas_textf(c, x, y++, p, "  model     generation %lld, %s%s%s, rho %.3f", (long long)n->generation,
                 n->variant, m ? " over layers " : "", mask, n->rho);
    if (!strcmp(n->policy, "cost"))
        canvas_textf(c, x, y++, p, "  routing   cost rule (tau %.2f unused), K %d workers", n->tau,
                     n->K);
    else
        canvas_textf(c, x, y++, p, "  routing   %stau %.2f, K %d workers",
                     n->policy[0] ? "band rule, " : "", n->tau, n->K);
    return y - y0;
}

static void workers_table(const dash_t *d, canvas_t *c, int x, int y, int h)
{
    const dash_live_now *n = &d->live->now;
    canvas_text(c, x, y++, cv_fg(CV_DEFAULT, CV_BOLD), "Workers");
    canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_DIM), "  %-10s %9s %9s %9s  %s", "worker",
                 "in-flight", "routed", "finished", "decided by");
    int64_t inf = 0, routed = 0, fin = 0;
    int rows = h - 4;
    for (int k = 0; k < n->K; k++) {
        inf += n->inflight[k];
        routed += n->routed[k];
        fin += n->finished[k];
        if (k < rows)
            canvas_textf(c, x, y++, k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain(),
                         "  %-10.10s %9lld %9lld %9lld  %s", n->names[k],
                         (long long)n->inflight[k], (long long)n->routed[k],
                         (long long)n->finished[k], n->rules[k]);
    }
    canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_BOLD), "  %-10s %9lld %9lld %9lld", "total",
                 (long long)inf, (long long)routed, (long long)fin);
    if (n->mean_sim == n->mean_sim)
        canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "  drift: best similarity %.3f "
                     "(calibration %.3f) over %lld signatures, share TVD %.3f (8 drift)",
                     n->mean_sim, n->calib_sim, (long long)n->window, n->tvd);
    else
        canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "  drift: no signatures in the "
                    "window yet");
}

void view_overview(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        int th = router_block(d, c, x + 1, y);
        if (h - th >= 4)
            workers_table(d, c, x + 1, y + th, h - th);
        return;
    }
    if (!d->fit) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "loading...");
        return;
    }
    int th;
    if (w >= 150) {
        th = trace_block(d, c, x + 1, y);
        int mh = model_block(d, c, x + w / 2, y);
        th = th > mh ? th : mh;
    } else {
        th = trace_block(d, c, x + 1, y);
        th += model_block(d, c, x + 1, y + th);
    }
    if (h - th >= 4)
        sim_table(d, c, x + 1, y + th, w - 1);
}
