/* view_overview.c - the trace, the model, the what-if settings and a table
 * of the current policy against every baseline. Live: the daemon, the
 * model it serves, a table of its workers and the drift in one line. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"

static int trace_block(const dash_t *d, canvas_t *c, int x, int y)
{
    cv_style h = cv_fg(CV_DEFAULT, CV_BOLD), p = cv_plain();
    int y0 = y;
    canvas_text(c, x, y++, h, "Trace");
    canvas_put_fitf(c, x, y++, c->w - x, p, "  file      %s", d->trace_name);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  model     %s", d->calib && d->calib->model[0]
                                                     ? d->calib->model : "(unnamed)");
    canvas_put_fitf(c, x, y++, c->w - x, p, "  geometry  L=%d layers, E=%d experts, top-%d", d->L, d->E, d->k);
    char split[160];
    dash_split_text(d, split, sizeof split);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  requests  %lld", (long long)d->n_rows);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  split     %s", split);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  arrivals  %s", d->arrivals);
    return y - y0;
}

/* "0,1" or "0-23,30": a run of three or more consecutive layers as a
 * range (24 layers fit in one 80-column line, no number cut). */
static void mask_text(const model_t *m, char *buf, size_t n)
{
    size_t used = 0;
    const int *l = m->recipe.layers;
    buf[0] = '\0';
    for (int i = 0; i < m->recipe.n_layers && used + 16 < n;) {
        int j = i;
        while (j + 1 < m->recipe.n_layers && l[j + 1] == l[j] + 1)
            j++;
        if (j - i >= 2)
            used += (size_t)snprintf(buf + used, n - used, "%s%d-%d", i ? "," : "", l[i], l[j]);
        else
            for (int t = i; t <= j; t++)
                used += (size_t)snprintf(buf + used, n - used, "%s%d", t ? "," : "", l[t]);
        i = j + 1;
    }
}

/* Where the model shown comes from; a refit must never pass for the
 * file's model (it has other centroids). */
static void source_line(const dash_t *d, canvas_t *c, int x, int y)
{
    const dash_fit *f = d->fit, *home = d->home;
    cv_style p = cv_plain();
    if (f->origin != DASH_FIT_REFIT || !home) {
        canvas_put_fitf(c, x, y, c->w - x, p, "  source    %s", f->origin == DASH_FIT_FILE && d->model_name[0]
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
    canvas_put_fitf(c, x, y, c->w - x, cv_fg(CV_DEFAULT, CV_BOLD), "  source    refitted here with K %d "
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
    canvas_put_fitf(c, x, y++, c->w - x, p, "  recipe    %s over %d layers: %s",
                 sig_variant_name(m->recipe.variant), m->recipe.n_layers, mask);
    if (isfinite(m->rho))
        canvas_put_fitf(c, x, y++, c->w - x, p, "  quality   rho %.3f, N* %d", m->rho, m->n_star);
    const dash_fit *f = d->fit;
    char names[160], bal[160];
    workers_text(m, names, sizeof names);
    balance_text(f, bal, sizeof bal);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  K         %s; %s", names, bal);
    if (!f->reassigned)
        canvas_put_fitf(c, x, y++, c->w - x, p, "  calib     %lld signatures clustered", (long long)f->n_fit);
    else if (f->have_sizes)
        canvas_put_fitf(c, x, y++, c->w - x, p, "  calib     %lld signatures clustered by the model's fit; "
                     "%lld calibration rows here re-assigned", (long long)f->n_fit,
                     (long long)f->n_reassigned);
    else
        canvas_put_fitf(c, x, y++, c->w - x, p, "  calib     the model file has no cluster sizes; %lld "
                     "calibration rows here re-assigned", (long long)f->n_reassigned);
    if (d->in_sample[0])
        canvas_put_fitf(c, x, y++, c->w - x, cv_fg(CV_DEFAULT, CV_BOLD | CV_REVERSE), "  warning   %s",
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
        canvas_put_fitf(c, x, y++, c->w - x, cv_fg(CV_DEFAULT, CV_DIM), "  (policy %s is one of the "
                     "baselines; p cycles back to eldr)", route_kind_name(d->cur->policy));
    const dash_ci *ci = dash_shown_ci(d);
    /* the star is the header's baseline (dash_best_base): with seeds, the
     * lowest mean over them, which this one run may not show as lowest */
    /* the baselines named: those of the verdict (random is shown only) */
    if (ci)
        canvas_put_fitf(c, x, y++, w, cv_fg(CV_DEFAULT, CV_DIM), "  * best of %s (lowest mean "
                     "TPOT p50 over the %d seeds); U/step = distinct experts/layer-step",
                     GRID_DEFAULT_BASELINES, ci->n_seeds);
    else
        canvas_put_fitf(c, x, y++, w, cv_fg(CV_DEFAULT, CV_DIM), "  * best of %s (lowest TPOT "
                        "p50); U/step = distinct experts per layer-step", GRID_DEFAULT_BASELINES);
    if (ci)   /* the header's changes come from more runs than this table */
        canvas_put_fitf(c, x, y, w, cv_fg(CV_DEFAULT, CV_DIM), "  one run (seed %llu); header: mean "
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
        canvas_put_fitf(c, x, y++, c->w - x, p, "  eldrd     %s, polled every %.1f s: %lld polls, %lld "
                     "failed", L->source, L->interval_s, (long long)L->polls,
                     (long long)L->failures);
    else
        canvas_put_fitf(c, x, y++, c->w - x, p, "  snapshot  %s (saved; one frozen poll)", L->source);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  uptime    %.0f s; loads from %s", n->uptime_s == n->uptime_s
                 ? n->uptime_s : 0, n->load_from);
    if (L->restarts)
        canvas_put_fitf(c, x, y++, c->w - x, (cv_style){196, CV_DEFAULT, CV_BOLD}, "  restarts  %lld seen "
                     "this session; the last: uptime %.0f s -> %.0f s ('!' in the histories)",
                     (long long)L->restarts, L->restart_from, L->restart_to);
    const model_t *m = d->fit ? d->fit->model : NULL;
    char mask[200] = "";
    if (m)
        mask_text(m, mask, sizeof mask);
    canvas_put_fitf(c, x, y++, c->w - x, p, "  model     generation %lld, %s%s%s, rho %.3f", (long long)n->generation,
                 n->variant, m ? " over layers " : "", mask, n->rho);
    if (!strcmp(n->policy, "cost"))
        canvas_put_fitf(c, x, y++, c->w - x, p, "  routing   cost rule (tau %.2f unused), K %d workers", n->tau,
                     n->K);
    else
        canvas_put_fitf(c, x, y++, c->w - x, p, "  routing   %stau %.2f, K %d workers",
                     n->policy[0] ? "band rule, " : "", n->tau, n->K);
    return y - y0;
}

/* What needs the operator's eye (the Problems block, unhealthy rows). */
static cv_style alarm(void)
{
    return (cv_style){196, CV_DEFAULT, CV_BOLD};
}

/* An instance's URL for a narrow column: without "http://" (https://
 * and other schemes stay), "-" unknown. */
static const char *short_url(const char *u)
{
    if (!u[0])
        return "-";
    return strncmp(u, "http://", 7) ? u : u + 7;
}

#define PROBLEMS_MAX 8

/* Each line, and the URL that ends it ("" none): fitted from the left
 * into what the width leaves (fit_left), the line's words whole. */
typedef struct problems {
    int n;
    char line[PROBLEMS_MAX][256];
    char url[PROBLEMS_MAX][DASH_URL_MAX];
} problems;

static void add_problem(problems *p, const char *url, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_problem(problems *p, const char *url, const char *fmt, ...)
{
    if (p->n == PROBLEMS_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->line[p->n], sizeof p->line[0], fmt, ap);
    va_end(ap);
    snprintf(p->url[p->n++], sizeof p->url[0], "%s", url ? short_url(url) : "");
}

/* "a 3, b 1" (count_first: "3 a, 1 b"): the nonzero counts of n named
 * values, "" when none. */
static void nonzero_list(char *dst, size_t len, const char *const *names, const int64_t *v,
                         int n, int count_first)
{
    size_t used = 0;
    dst[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        if (v[i] > 0)
            used += (size_t)(count_first
                ? snprintf(dst + used, len - used, "%s%lld %s", used ? ", " : "",
                           (long long)v[i], names[i])
                : snprintf(dst + used, len - used, "%s%s %lld", used ? ", " : "", names[i],
                           (long long)v[i]));
}

static void decode_problems(const dash_live_now *n, problems *p)
{
    int ej = 0;
    for (int k = 0; k < n->K; k++)
        ej += n->ejected[k];
    if (ej == n->K)
        add_problem(p, NULL, "decode    all %d ejected: each is used anyway (panic routing)",
                    n->K);
    else if (ej == 1 || ej == 2)
        for (int k = 0; k < n->K; k++) {
            if (n->ejected[k])
                add_problem(p, n->url[k], "ejected   %s, out %.0f s more, %lld failures: ",
                            n->names[k], n->ejected_for[k], (long long)n->up_failures[k]);
        }
    else if (ej > 2) {
        char names[200] = "";
        size_t used = 0;
        for (int k = 0; k < n->K && used < sizeof names; k++)
            if (n->ejected[k])
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                         used ? ", " : "", n->names[k]);
        add_problem(p, NULL, "ejected   %d of %d decoders: %s", ej, n->K, names);
    }
    for (int k = 0; k < n->K; k++)
        if (n->probing[k])
            add_problem(p, n->url[k], "probing   %s, back on trial (a failure ejects it): ",
                        n->names[k]);
}

static void prefill_problems(const dash_live_now *n, problems *p)
{
    int ej = n->prefill_ejected;
    if (!ej)
        return;
    const dash_prefill *f = NULL;
    for (int i = 0; i < n->n_prefill && i < DASH_PREFILL_MAX && !f; i++)
        if (n->prefill[i].state == DASH_EJECTED)
            f = &n->prefill[i];
    double left = f ? f->ejected_for : NAN;
    const char *url = f ? f->name : NULL;
    if (ej == 1 && n->n_prefill == 1)
        add_problem(p, url, "prefill   ejected, the only one (out %.0f s more): ", left);
    else if (ej == n->n_prefill)
        add_problem(p, url, "prefill   all %d ejected (the first out %.0f s more): ", ej, left);
    else
        add_problem(p, url, "prefill   %d of %d ejected (the first out %.0f s more): ", ej,
                    n->n_prefill, left);
}

static void failure_problems(const dash_failures *f, problems *p)
{
    if (!f->known)
        return;
    /* max_conns: the picker's full ext_proc listener (an HTTP listener at
     * --max-conns makes connections wait: docs/http-api.md). One line
     * when it fits 80 columns (3 + 10 + 64), else connections and
     * requests on a line each, so that no count is cut. */
    static const char *const refused[] = {"connections (--max-conns-per-ip)",
                                          "ext_proc (--max-conns)", "bodies (--body-budget)",
                                          "unauthorized (401)"};
    const int64_t rv[] = {f->per_ip, f->max_conns, f->body_budget, f->unauthorized};
    char buf[200];
    nonzero_list(buf, sizeof buf, refused, rv, 4, 1);
    if (strlen(buf) <= 64) {
        if (buf[0])
            add_problem(p, NULL, "refused   %s", buf);
    } else
        for (int g = 0; g < 4; g += 2) {
            nonzero_list(buf, sizeof buf, refused + g, rv + g, 2, 1);
            if (buf[0])
                add_problem(p, NULL, "refused   %s", buf);
        }
    if (f->ans_5xx + f->ans_4xx > 0)
        add_problem(p, NULL, "answered  %lld 5xx, %lld 4xx: %s", (long long)f->ans_5xx,
                    (long long)f->ans_4xx, f->codes);
    static const char *const phase[] = {"connect", "prefill", "decode", "idle"};
    nonzero_list(buf, sizeof buf, phase, f->timeouts, 4, 0);
    if (f->failed_routed > 0 || buf[0])
        add_problem(p, NULL, "failed    %lld routes at a decoder, %lld retried; timeouts: %s",
                    (long long)f->failed_routed, (long long)(f->retries[0] + f->retries[1]),
                    buf[0] ? buf : "none");
    static const char *const cut[] = {"--header-timeout", "--request-deadline", "malformed"};
    const int64_t cv[] = {f->header_timeouts, f->deadline_cuts, f->protocol_errors};
    nonzero_list(buf, sizeof buf, cut, cv, 3, 0);
    if (buf[0])
        add_problem(p, NULL, "cut       %s", buf);
}

static void gather_problems(const dash_live_now *n, problems *p)
{
    if (n->has_pool)
        decode_problems(n, p);
    prefill_problems(n, p);
    failure_problems(&n->fail, p);
}

int dash_live_problems(const dash_live_now *n)
{
    problems p = {0};
    gather_problems(n, &p);
    return p.n;
}

/* Anything not healthy, first, in colour; nothing when all is well. */
static int problems_block(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_live_now *n = &d->live->now;
    problems p = {0};
    gather_problems(n, &p);
    if (!p.n || h < 2)
        return 0;
    int y0 = y, shown = p.n < h - 1 ? p.n : h - 1;
    canvas_text(c, x, y++, alarm(), "Problems (counts since eldrd started)");
    for (int i = 0; i < shown; i++) {
        char line[260 + DASH_URL_MAX], url[DASH_URL_MAX];
        int len = snprintf(line, sizeof line, "  %s", p.line[i]);
        snprintf(url, sizeof url, "%s", p.url[i]);
        if (url[0] && w - 1 - len >= 12) {
            canvas_fit_url(url, w - 1 - len);
            snprintf(line + len, sizeof line - (size_t)len, "%s", url);
        } else if (len >= 2 && line[len - 2] == ':') {
            line[len - 2] = '\0';   /* no room for the URL: no dangling colon */
        }
        if (i == shown - 1 && shown < p.n)
            snprintf(line, sizeof line, "  ... and %d more (the whole list at 120x40)",
                     p.n - shown + 1);
        canvas_fit(line, w - 1);
        canvas_text(c, x, y++, (cv_style){196, CV_DEFAULT, 0}, line);
    }
    return y - y0;
}

static void state_text(const dash_live_now *n, int k, char *buf, size_t len)
{
    if (!n->has_pool)
        snprintf(buf, len, "-");
    else if (n->ejected[k])   /* at most 11 columns, the number whole */
        snprintf(buf, len, n->ejected_for[k] < 99.5     ? "ejected %.0fs"
                           : n->ejected_for[k] < 5970 ? "ejected %.0fm"
                                                      : "ejected %.0fh",
                 n->ejected_for[k] < 99.5 ? n->ejected_for[k]
                 : n->ejected_for[k] < 5970 ? n->ejected_for[k] / 60 : n->ejected_for[k] / 3600);
    else if (n->probing[k])
        snprintf(buf, len, "probing");
    else
        snprintf(buf, len, "in rotation");
}

/* The prefill instances (proxy mode, picker mode): one line each while
 * there is room, the rest counted. */
static int prefill_rows(const dash_live_now *n, canvas_t *c, int x, int y, int w, int h)
{
    if (n->n_prefill < 1 || h < 2)
        return 0;
    int y0 = y;
    canvas_put_fitf(c, x, y++, c->w - x, cv_fg(CV_DEFAULT, CV_BOLD), "Prefill (%d, %d in rotation)",
                 n->n_prefill, n->n_prefill - n->prefill_ejected);
    int room = h - 1, listed = n->n_prefill < DASH_PREFILL_MAX ? n->n_prefill
                                                                : DASH_PREFILL_MAX;
    for (int i = 0; i < listed && i < room; i++) {
        const dash_prefill *p = &n->prefill[i];
        char st[32], line[200];
        if (i == room - 1 && listed > room) {
            canvas_put_fitf(c, x, y++, c->w - x, cv_fg(CV_DEFAULT, CV_DIM), "  ... %d more",
                         n->n_prefill - i);
            break;
        }
        if (p->state == DASH_EJECTED)
            snprintf(st, sizeof st, "ejected %.0fs", p->ejected_for);
        else
            snprintf(st, sizeof st, "%s", p->state == DASH_PROBING ? "probing" : "in rotation");
        snprintf(line, sizeof line, "  %-12s in-flight %lld, %lld failures  %s", st,
                 (long long)p->in_flight, (long long)p->failures, short_url(p->name));
        canvas_fit(line, w - 1);
        canvas_text(c, x, y++, p->state == DASH_IN_ROTATION ? cv_plain() : alarm(), line);
    }
    return y - y0;
}

static void workers_table(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_live_now *n = &d->live->now;
    int wide = w >= 96;
    /* names whole (w1 and w10 must not look alike): as wide as the
     * longest, 6..16; the URL takes what is left */
    int nw = 6;
    for (int k = 0; k < n->K; k++)
        nw = (int)strlen(n->names[k]) > nw ? (int)strlen(n->names[k]) : nw;
    nw = nw > 16 ? 16 : nw;
    canvas_text(c, x, y++, cv_fg(CV_DEFAULT, CV_BOLD), "Workers");
    int col = canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_DIM),
                           "  %-*s %5s %6s %8s %6s  %-11s %-5s %s", nw, "worker", "in-fl",
                           "routed", "finished", "failed", "state", "load", "url");
    if (wide)
        canvas_textf(c, x + col, y, cv_fg(CV_DEFAULT, CV_DIM), "%*s%s", 24 - 3, "",
                     "decided by");
    y++;
    int64_t inf = 0, routed = 0, fin = 0, failed = 0;
    int known_failed = 0;
    /* the prefill lines go after the workers: keep them room when the
     * daemon has them (a dead prefill must show at 80x24) */
    int pre_h = n->n_prefill ? 1 + (n->n_prefill < 3 ? n->n_prefill : 3) : 0;
    int rows = h - 4 - pre_h;
    if (rows < n->K)
        rows--;   /* the "... more" line */
    int shown = 0;
    for (int k = 0; k < n->K; k++) {
        inf += n->inflight[k];
        routed += n->routed[k];
        fin += n->finished[k];
        if (n->failed[k] >= 0) {
            failed += n->failed[k];
            known_failed = 1;
        }
        if (k >= rows)
            continue;
        char st[32], fl[24], line[300], nb[DASH_NAME_MAX];
        state_text(n, k, st, sizeof st);
        snprintf(fl, sizeof fl, n->failed[k] >= 0 ? "%lld" : "-", (long long)n->failed[k]);
        int nl = snprintf(line, sizeof line, "  %-*s %5lld %6lld %8lld %6s  %-11s %-5s ",
                          nw, dash_worker_label(d, k, nw, nb, sizeof nb),
                          (long long)n->inflight[k], (long long)n->routed[k],
                          (long long)n->finished[k], fl, st, n->load_src[k]);
        char url[DASH_URL_MAX + 4];
        snprintf(url, sizeof url, "%s", short_url(n->url[k]));
        if (!wide)
            canvas_fit_url(url, w - 1 - nl > 8 ? w - 1 - nl : 8);
        else
            canvas_fit_url(url, 23);
        snprintf(line + nl, sizeof line - (size_t)nl, wide ? "%-23s %s" : "%s", url,
                 n->rules[k]);
        int bad = n->has_pool && (n->ejected[k] || n->probing[k]);
        canvas_text(c, x, y++, bad ? alarm() : k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD)
                                                              : cv_plain(), line);
        shown++;
    }
    if (shown < n->K)
        canvas_put_fitf(c, x, y++, c->w - x, cv_fg(CV_DEFAULT, CV_DIM), "  ... %d more workers (4 queues)",
                     n->K - shown);
    char fl[24];
    snprintf(fl, sizeof fl, known_failed ? "%lld" : "-", (long long)failed);
    canvas_put_fitf(c, x, y++, c->w - x, cv_fg(CV_DEFAULT, CV_BOLD), "  %-*s %5lld %6lld %8lld %6s", nw,
                 "total", (long long)inf, (long long)routed, (long long)fin, fl);
    y += prefill_rows(n, c, x, y, w, pre_h);
    /* the drift view's verdict, word for word (one answer on every
     * screen), and where to look */
    char verdict[200], line[240];
    int over = dash_drift_verdict(n, verdict, sizeof verdict) == DRIFT_OVER;
    snprintf(line, sizeof line, "  %s (8 drift)", verdict);
    if (canvas_cols(line) > w - 1)   /* the pointer goes before the verdict is cut */
        snprintf(line, sizeof line, "  %s", verdict);
    canvas_fit(line, w - 1);
    canvas_text(c, x, y, over ? cv_fg(c->colors >= 256 ? 196 : 1, CV_BOLD)
                              : cv_fg(CV_DEFAULT, CV_DIM), line);
}

void view_overview(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        /* problems first: at 80x24 nothing unhealthy may hide below */
        int th = problems_block(d, c, x + 1, y, w - 1, h / 2);
        th += router_block(d, c, x + 1, y + th);
        if (h - th >= 4)
            workers_table(d, c, x + 1, y + th, w - 1, h - th);
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
