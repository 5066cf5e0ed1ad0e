/* test_tui_views.c - the dashboard's data and the text frame of each view
 * (src/tui): a dashboard opened on a fixture trace (tracefix), fitted with
 * the default recipe; every view rendered to ASCII and checked for what
 * it must show (every worker named, sizes that sum to N, N* marked, the
 * legends, the centroids, every baseline); the simulation digest checked
 * against the simulator's own totals; what-if changes (tau, policy, K)
 * and a cancelled refit; every view at tiny and huge sizes; eldr-cost as
 * the shown policy (the overview, the header's CIs, view 7's cost cells
 * weighed as advise --cost-rule weighs them). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tui/dash.h"
#include "../../src/tui/tradeoff.h"
#include "../../src/tui/view_util.h"
#include "../../src/tui/whatif.h"
#include <time.h>
#include <unistd.h>
#include "kmeans.h"
#include "util_tracefix.h"

#define N_ROWS 240

static dash_t D;

static int setup(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(N_ROWS, 6, 16, 2, 11);
    if (!t)
        return -1;
    dash_opts o;
    dash_opts_default(&o);
    o.trace_path = "fixture.h5";
    /* batches of several requests: at the default 20 req/s every request
     * decodes alone and the header says routing is moot (test_moot) */
    o.rate = 400;
    char err[ELDR_ERRLEN];
    if (dash_open_trace(&D, &o, t, NULL, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dash_free(&D);
    return 0;
}

static char *frame(int view, int w, int h)
{
    canvas_t *c = canvas_new(w, h, 0, 0);
    assert_non_null(c);
    D.view = view;
    dash_render(&D, c);
    char *s = canvas_to_string(c);
    canvas_free(c);
    assert_non_null(s);
    return s;
}

/* The line of s that contains needle (copied into line), or 0. */
static int line_with(const char *s, const char *needle, char *line, size_t n)
{
    const char *p = strstr(s, needle);
    if (!p)
        return 0;
    const char *b = p, *e = p;
    while (b > s && b[-1] != '\n')
        b--;
    while (*e && *e != '\n')
        e++;
    snprintf(line, n, "%.*s", (int)(e - b), b);
    return 1;
}

/* When routing cannot matter the header says why instead of printing
 * changes of 0.0 +-0.0: batches of one (the fixture at the default
 * 20 req/s), one worker, a band of 2 (ELDR = join-shortest-queue). */
/* A what-if change as the session makes it: the change (one run on the
 * first look's rows), then the refine job (every row, the seeds). */
static void change_refined(whatif_t *w, int K, route_kind policy, double tau)
{
    assert_int_equal(whatif_start_change(w, &D, K, policy, tau), 0);
    assert_int_equal(whatif_collect(w), 0);
    assert_int_equal(whatif_start_refine(w, &D), 0);
    assert_int_equal(whatif_collect(w), 0);
    assert_int_equal(D.refined, 1);
}

static void test_moot(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN], why[160];
    static const struct { double rate, tau; int K; const char *want; } cases[] = {
        {0, -1, 0, "routing is moot: mean batch 1.0, requests decode alone"},
        {400, -1, 1, "routing is moot: K 1, one worker takes every request"},
        {400, 2, 0, "tau 2.00: the band holds every worker, ELDR is join-shortest-queue"},
        {400, -1, 0, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dash_opts o;
        dash_opts_default(&o);
        o.seeds = 1;
        o.rate = cases[i].rate;
        if (cases[i].K)
            o.K = cases[i].K;
        dash_t h;
        assert_int_equal(dash_open_trace(&h, &o, tracefix_make(N_ROWS, 6, 16, 2, 11), NULL,
                                         NULL, NULL, err, sizeof err), 0);
        if (cases[i].tau >= 0)
            h.tau = cases[i].tau;
        const char *got = dash_irrelevant(&h, why, sizeof why);
        canvas_t *c = canvas_new(120, 12, 0, 0);
        h.view = VIEW_OVERVIEW;
        dash_render(&h, c);
        char *s = canvas_to_string(c);
        canvas_free(c);
        if (cases[i].want) {
            assert_non_null(got);
            assert_non_null(strstr(got, cases[i].want));
            assert_non_null(strstr(s, cases[i].want));     /* in the header */
            assert_null(strstr(s, "TPOT p50 "));
        } else {
            assert_null(got);
            assert_non_null(strstr(s, "p50 "));
        }
        free(s);
        dash_free(&h);
    }
}

static void test_open_split(void **state)
{
    (void)state;
    assert_int_equal(D.n_rows, N_ROWS);
    assert_int_equal(D.n_calib, N_ROWS / 2);   /* 1000 rows, capped at half */
    assert_int_equal(D.fit->model->K, 4);
    assert_non_null(D.cur);
    for (int i = 0; i < DASH_N_BASE; i++)
        assert_non_null(D.base[i]);
    /* every simulated row but those with no token to emit (sim.h) */
    int64_t skipped = 0;
    for (int64_t r = 0; r < D.eval->n; r++)
        skipped += D.eval->decode_tokens[r] <= 0;
    assert_int_equal(D.eval->n, N_ROWS - N_ROWS / 2);
    assert_int_equal(D.cur->res.n + skipped, N_ROWS - N_ROWS / 2);
}

/* The default split is the core's seeded random draw, and the overview
 * says so; --split head gives other calibration rows (the first ones). */
static void test_split_random_default(void **state)
{
    (void)state;
    assert_int_equal(D.split_mode, SPLIT_RANDOM);
    assert_int_equal(D.split_seed, 1);
    char *s = frame(VIEW_OVERVIEW, 100, 30);
    assert_non_null(strstr(s, "split     random (seed 1): 120 calibrate, 120 simulated"));
    free(s);
    /* the same rows as split_make gives the simulator */
    trace_t *t = tracefix_make(N_ROWS, 6, 16, 2, 11);
    assert_non_null(t);
    split_spec sp;
    split_spec_default(&sp);
    split_rows rows;
    char err[ELDR_ERRLEN];
    assert_int_equal(split_make(t, &sp, &rows, err, sizeof err), 0);
    int head = 1;
    for (int64_t i = 0; i < rows.n_calib; i++) {
        assert_int_equal(D.calib->prompt_tokens[i], t->prompt_tokens[rows.calib[i]]);
        head &= rows.calib[i] == i;
    }
    assert_false(head);   /* not the first rows */
    split_rows_free(&rows);
    dash_opts o;
    dash_opts_default(&o);
    o.split.mode = SPLIT_HEAD;
    o.seeds = 2;
    dash_t h;
    assert_int_equal(dash_open_trace(&h, &o, t, NULL, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(h.split_mode, SPLIT_HEAD);
    assert_int_equal(h.n_calib, N_ROWS / 2);
    D.view = VIEW_OVERVIEW;
    canvas_t *c = canvas_new(100, 30, 0, 0);
    h.view = VIEW_OVERVIEW;
    dash_render(&h, c);
    s = canvas_to_string(c);
    canvas_free(c);
    assert_non_null(strstr(s, "split     head (the first rows): 120 calibrate"));
    assert_non_null(strstr(s, " +-"));   /* two seeds give an interval */
    free(s);
    dash_free(&h);
    /* one seed: no interval, the header shows the one run's change */
    t = tracefix_make(N_ROWS, 6, 16, 2, 11);
    o.seeds = 1;
    assert_int_equal(dash_open_trace(&h, &o, t, NULL, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(h.ci.valid, 0);
    c = canvas_new(100, 30, 0, 0);
    dash_render(&h, c);
    s = canvas_to_string(c);
    canvas_free(c);
    assert_null(strstr(s, "+-"));
    free(s);
    dash_free(&h);
}

/* The digest against the simulator's own totals. */
static void test_sim_digest(void **state)
{
    (void)state;
    const dash_sim *s = D.cur;
    int64_t routed = 0, served = 0;
    for (int k = 0; k < s->K; k++) {
        routed += s->routed[k];
        served += s->res.served[k];
        /* the per-layer means from the step callback average to the
         * simulator's per-worker mean distinct experts */
        double m = 0;
        for (int l = 0; l < s->L; l++)
            m += s->layer_distinct[(size_t)k * s->L + l];
        if (s->res.worker_steps[k])
            assert_true(fabs(m / s->L - s->res.worker_distinct[k]) < 1e-9 * (1 + m));
        for (int b = 0; b < s->nbins; b++) {
            float inf = s->inflight[(size_t)k * s->nbins + b];
            assert_true(inf >= -1e-3);
            assert_true(s->running[(size_t)k * s->nbins + b] <= inf + 1e-3 * (1 + inf));
        }
    }
    assert_int_equal(routed, s->res.n);
    assert_int_equal(served, s->res.n);
    /* the best baseline is the header's: the lowest mean over its seeds
     * (which the one run may not show lowest), else the run's lowest */
    const dash_sim *b = dash_best_base(&D);
    const dash_ci *ci = dash_shown_ci(&D);
    if (ci)
        assert_int_equal(b->policy, ci->best);
    for (int i = 0; i < DASH_N_BASE && !ci; i++)
        assert_true(b->res.tpot_p50_ms <= D.base[i]->res.tpot_p50_ms);
}

static void test_balance_frame(void **state)
{
    (void)state;
    char *s = frame(VIEW_BALANCE, 100, 30), line[256];
    int64_t sum = 0;
    for (int k = 0; k < D.fit->model->K; k++) {
        char name[32];
        snprintf(name, sizeof name, "w%d ", k);
        assert_true(line_with(s, name, line, sizeof line));
        /* "  w0           30 ####|..." : the size follows the name */
        long long size;
        char nm[32];
        assert_int_equal(sscanf(line + 2, "%31s %lld", nm, &size), 2);
        assert_int_equal(size, D.fit->sizes[k]);
        sum += size;
    }
    assert_int_equal(sum, D.fit->n_fit);
    char total[64];
    snprintf(total, sizeof total, "total %lld = N", (long long)sum);
    assert_non_null(strstr(s, total));
    assert_non_null(strstr(s, "1/K = 25.0%"));
    assert_non_null(strstr(s, "|"));
    free(s);
}

static void test_rho_frame(void **state)
{
    (void)state;
    assert_non_null(D.curve);
    char *s = frame(VIEW_RHO, 100, 30), want[64];
    snprintf(want, sizeof want, "N* = %d layers", D.curve_nstar);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof want, "^ N*=%d", D.curve_nstar);
    assert_non_null(strstr(s, want));
    assert_int_equal(strchr(s, '@') != NULL, 1);   /* the peak point */
    /* the peak: no point of the curve before N* is higher */
    for (int i = 0; i < D.curve_nstar - 1; i++)
        assert_true(D.curve[i] <= D.curve[D.curve_nstar - 1]);
    assert_non_null(strstr(s, "order:"));
    free(s);
}

static void test_heatmap_frame(void **state)
{
    (void)state;
    char *s = frame(VIEW_HEATMAP, 100, 30);
    const char *l1 = strstr(s, "legend:");
    assert_non_null(l1);
    assert_non_null(strstr(l1 + 1, "legend:"));   /* both matrices */
    assert_non_null(strstr(s, "1/8x"));
    assert_true(strstr(s, "w0: activation share") || strstr(s, "w0: share / global share"));
    assert_non_null(strstr(s, "distinct experts per step"));
    for (int k = 0; k < D.fit->model->K; k++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", k);
        assert_non_null(strstr(s, name));
    }
    /* the L0 row holds one ramp character per expert */
    char line[256];
    const char *row = strstr(s, "\n L0 ");
    if (!row)
        row = strstr(s, "\n*L0 ");   /* '*': a masked layer */
    assert_non_null(row);
    assert_true(line_with(row + 1, "L0 ", line, sizeof line));
    const char *cells = line + 6;
    for (int e = 0; e < D.E; e++)
        assert_non_null(strchr(CANVAS_RAMP, cells[e]));
    free(s);
}

static void test_queues_frame(void **state)
{
    (void)state;
    char *s = frame(VIEW_QUEUES, 100, 30);
    for (int k = 0; k < D.fit->model->K; k++) {
        char name[16];
        snprintf(name, sizeof name, "w%d ", k);
        assert_non_null(strstr(s, name));
    }
    assert_non_null(strstr(s, "in-flight"));
    free(s);
    D.zoom = 1;
    s = frame(VIEW_QUEUES, 100, 30);
    D.zoom = 0;
    assert_non_null(strstr(s, "+- w0 "));   /* the zoomed chart's box */
    free(s);
}

static void test_scatter_frame(void **state)
{
    (void)state;
    assert_true(D.fit->n_pts > 0);
    char *s = frame(VIEW_SCATTER, 100, 30);
    char want[64];
    snprintf(want, sizeof want, "PCA of %d signatures", D.fit->n_pts);
    assert_non_null(strstr(s, want));
    for (int k = 0; k < D.fit->model->K; k++)
        assert_non_null(strchr(s, 'A' + k));   /* every centroid is drawn */
    free(s);
}

static void test_overview_frame(void **state)
{
    (void)state;
    char *s = frame(VIEW_OVERVIEW, 160, 30);   /* wide: the header's long labels */
    assert_non_null(strstr(s, "eldr t=0.10"));
    const char *names[] = {"random", "rr", "jsq", "p2c"};
    for (int i = 0; i < 4; i++)
        assert_non_null(strstr(s, names[i]));
    char want[64];
    snprintf(want, sizeof want, "%s *", route_kind_name(dash_best_base(&D)->policy));
    assert_non_null(strstr(s, want));
    /* the header shows the mean over its seeds: the trade-off cell's number */
    const dash_ci *ci = dash_shown_ci(&D);
    snprintf(want, sizeof want, "TPOT p50 %.2fms", ci ? ci->tpot_p50.mean
                                                       : D.cur->res.tpot_p50_ms);
    assert_non_null(strstr(s, want));
    free(s);
}

/* The header's +-: the grid engine over 5 seeds; seed 0 is the shown
 * run (common random numbers), the change is the paired mean with its
 * 95% CI, and a what-if change brings its own CIs. */
static void test_header_ci(void **state)
{
    (void)state;
    const dash_ci *ci = dash_shown_ci(&D);
    assert_non_null(ci);
    assert_int_equal(ci->n_seeds, DASH_SEEDS);
    assert_true(ci->tpot_p50_first == D.cur->res.tpot_p50_ms);
    /* (the light fixture load can make every seed agree: a zero width) */
    assert_true(ci->vs_best_pct.lo <= ci->vs_best_pct.mean);
    assert_true(ci->vs_best_pct.mean <= ci->vs_best_pct.hi);
    char *s = frame(VIEW_BALANCE, 160, 30), want[128], line[256];
    assert_true(line_with(s, "TPOT p50", line, sizeof line));
    /* (a word - better, worse, even - follows each change on a text canvas) */
    snprintf(want, sizeof want, "TPOT p50 %.2fms %+.1f%% +-%.1f ", ci->tpot_p50.mean,
             ci->vs_best_pct.mean, (ci->vs_best_pct.hi - ci->vs_best_pct.lo) / 2);
    assert_non_null(strstr(line, want));
    snprintf(want, sizeof want, "p99 %.2fms %+.1f%% +-%.1f ", ci->tpot_p99.mean,
             ci->p99_vs_best_pct.mean, (ci->p99_vs_best_pct.hi - ci->p99_vs_best_pct.lo) / 2);
    assert_non_null(strstr(line, want));
    snprintf(want, sizeof want, "%+.1f%% +-%.1f ", ci->distinct_vs_best_pct.mean,
             (ci->distinct_vs_best_pct.hi - ci->distinct_vs_best_pct.lo) / 2);
    assert_non_null(strstr(line, want));
    snprintf(want, sizeof want, " vs %s", route_kind_name(ci->best));
    assert_non_null(strstr(line, want));
    free(s);
    /* a Unicode canvas says it with the plus-minus sign */
    canvas_t *c = canvas_new(100, 30, 1, 0);
    dash_render(&D, c);
    s = canvas_to_string(c);
    canvas_free(c);
    assert_non_null(strstr(s, "\u00b1"));
    free(s);
    /* a change: first one run and no CI (never the interval of another
     * setting), then the refine job gives the CI, which follows the
     * shown tau */
    whatif_t w;
    whatif_init(&w);
    assert_int_equal(whatif_start_change(&w, &D, 4, ROUTE_ELDR, 0.0), 0);
    assert_int_equal(whatif_collect(&w), 0);
    assert_null(dash_shown_ci(&D));
    assert_int_equal(D.refined, 0);
    s = frame(VIEW_BALANCE, 100, 30);
    assert_non_null(strstr(s, "FIRST LOOK"));
    free(s);
    assert_int_equal(whatif_start_refine(&w, &D), 0);
    assert_int_equal(whatif_collect(&w), 0);
    assert_int_equal(D.refined, 1);
    assert_non_null(dash_shown_ci(&D));
    assert_true(D.ci.tau == 0.0);
    assert_true(D.ci.tpot_p50_first == D.cur->res.tpot_p50_ms);
    change_refined(&w, 4, ROUTE_ELDR, 0.1);
    whatif_destroy(&w);
    /* a stale CI is not shown */
    D.ci.tau = 0.5;
    assert_null(dash_shown_ci(&D));
    s = frame(VIEW_BALANCE, 100, 30);
    assert_null(strstr(s, "+-"));
    free(s);
    D.ci.tau = 0.1;
}

static void test_every_size(void **state)
{
    (void)state;
    int sizes[][2] = {{40, 10}, {80, 24}, {41, 11}, {300, 90}};
    for (int z = 0; z < 2; z++)
        for (int v = 0; v < VIEW_N; v++)
            for (int i = 0; i < 4; i++) {
                D.zoom = z;
                D.help = i == 1;
                char *s = frame(v, sizes[i][0], sizes[i][1]);
                int lines = 0;
                for (const char *p = s; *p; p++)
                    lines += *p == '\n';
                assert_int_equal(lines, sizes[i][1]);
                free(s);
            }
    D.zoom = 0;
    D.help = 0;
}

static void test_whatif_tau_and_policy(void **state)
{
    (void)state;
    whatif_t w;
    whatif_init(&w);
    change_refined(&w, 4, ROUTE_ELDR, 0.0);
    assert_true(D.cur->tau == 0.0);
    assert_int_equal(D.cur->policy, ROUTE_ELDR);
    int64_t n = D.cur->res.n;
    change_refined(&w, 4, ROUTE_JSQ, 0.0);
    assert_int_equal(D.cur->policy, ROUTE_JSQ);
    assert_int_equal(D.cur->res.n, n);
    /* the same policy and seed as the baseline: the same numbers */
    assert_true(D.cur->res.tpot_p50_ms == D.base[2]->res.tpot_p50_ms);
    change_refined(&w, 4, ROUTE_ELDR, 0.1);
    whatif_destroy(&w);
}

static void test_whatif_refit(void **state)
{
    (void)state;
    whatif_t w;
    whatif_init(&w);
    change_refined(&w, 3, ROUTE_ELDR, 0.1);
    assert_int_equal(D.fit->model->K, 3);
    assert_int_equal(D.cur->K, 3);
    int64_t sum = 0, cap = (D.fit->n_fit + 2) / 3;
    for (int k = 0; k < 3; k++) {
        sum += D.fit->sizes[k];
        assert_true(D.fit->sizes[k] <= cap);   /* balanced: ceil(N/K) */
    }
    assert_int_equal(sum, D.fit->n_fit);
    for (int i = 0; i < DASH_N_BASE; i++)
        assert_int_equal(D.base[i]->K, 3);
    /* the recipe is kept */
    assert_int_equal(D.fit->model->recipe.n_layers, D.rows[DASH_LEVEL_FULL].work.dim / (size_t)D.E);
    char *s = frame(VIEW_BALANCE, 100, 30);
    assert_non_null(strstr(s, "1/K = 33.3%"));
    assert_null(strstr(s, "w3 "));
    free(s);
    /* and back */
    change_refined(&w, 4, ROUTE_ELDR, 0.1);
    assert_int_equal(D.fit->model->K, 4);
    whatif_destroy(&w);
}

static void test_refit_cancel_and_bad_K(void **state)
{
    (void)state;
    volatile int cancel = 1;
    dash_fit *f = (dash_fit *)1;
    char err[ELDR_ERRLEN];
    assert_int_equal(dash_refit(&D, 5, &cancel, NULL, NULL, &f, err, sizeof err),
                     KMEANS_CANCELLED);
    assert_null(f);
    assert_int_equal(dash_refit(&D, 100000, NULL, NULL, NULL, &f, err, sizeof err), -1);
    assert_null(f);
    assert_non_null(strstr(err, "K = 100000"));
    /* a failed change leaves the dashboard as it was */
    whatif_t w;
    whatif_init(&w);
    const dash_sim *before = D.cur;
    assert_int_equal(whatif_start_change(&w, &D, 100000, ROUTE_ELDR, 0.1), 0);
    assert_int_equal(whatif_collect(&w), -1);
    assert_ptr_equal(D.cur, before);
    assert_int_equal(D.fit->model->K, 4);
    whatif_destroy(&w);
}

/* A dashboard on the fixture with a model fitted on all N_ROWS rows (as a
 * model file would be: its sizes are its own fit's, not the dashboard's
 * calibration rows). sizes_null drops the sizes, as an old file would. */
static void open_with_model(dash_t *d, int sizes_null, model_t **copy)
{
    trace_t *t = tracefix_make(N_ROWS, 6, 16, 2, 11);
    assert_non_null(t);
    model_fit_opts fo;
    model_fit_opts_default(&fo, 4);
    fo.layers = MODEL_LAYERS_ALL;
    model_t *m = NULL;
    char err[ELDR_ERRLEN];
    if (model_fit(t, &fo, &m, NULL, err, sizeof err))
        fail_msg("model_fit: %s", err);
    if (sizes_null) {
        free(m->sizes);
        m->sizes = NULL;
    }
    if (copy) {   /* what the file held, to compare after a round trip */
        *copy = model_new(&m->recipe, m->k, m->K, err, sizeof err);
        assert_non_null(*copy);
        memcpy((*copy)->centroids, m->centroids, sizeof(float) * m->K * sig_dim(&m->recipe));
    }
    dash_opts o;
    dash_opts_default(&o);
    o.trace_path = "fixture.h5";
    o.model_path = "/some/dir/m.h5";
    if (dash_open_trace(d, &o, t, m, NULL, NULL, err, sizeof err))
        fail_msg("dash_open_trace: %s", err);
}

/* Issue 14: with -m, the size column is the model's own clusters, and
 * the re-assignment of the calibration rows is a column of its own. */
static void test_model_sizes(void **state)
{
    (void)state;
    dash_t d;
    open_with_model(&d, 0, NULL);
    const model_t *m = d.fit->model;
    assert_int_equal(d.fit->origin, DASH_FIT_FILE);
    assert_non_null(d.fit->reassigned);
    int64_t sum = 0, resum = 0;
    canvas_t *c = canvas_new(110, 30, 0, 0);
    d.view = VIEW_BALANCE;
    dash_render(&d, c);
    char *s = canvas_to_string(c), line[256];
    canvas_free(c);
    assert_non_null(strstr(s, "reassigned"));
    assert_non_null(strstr(s, "reassigned (calib rows)"));
    assert_non_null(strstr(s, "size: m.h5's own clusters (240 fitted)"));
    for (int k = 0; k < m->K; k++) {
        char name[32], nm[32];
        snprintf(name, sizeof name, "w%d ", k);
        assert_true(line_with(s, name, line, sizeof line));
        long long size, re;
        assert_int_equal(sscanf(line + 2, "%31s %lld %lld", nm, &size, &re), 3);
        assert_int_equal(size, m->sizes[k]);      /* the file's, not re-assigned */
        assert_int_equal(re, d.fit->reassigned[k]);
        sum += size;
        resum += re;
    }
    assert_int_equal(sum, N_ROWS);                /* the model saw every row */
    assert_int_equal(resum, d.fit->n_reassigned);
    assert_true(resum <= d.n_calib);
    free(s);
    dash_free(&d);

    /* an old file without sizes: "-", and the share from the re-assignment */
    open_with_model(&d, 1, NULL);
    assert_int_equal(d.fit->have_sizes, 0);
    c = canvas_new(110, 30, 0, 0);
    d.view = VIEW_BALANCE;
    dash_render(&d, c);
    s = canvas_to_string(c);
    canvas_free(c);
    assert_true(line_with(s, "w0 ", line, sizeof line));
    assert_non_null(strstr(line, " - "));
    assert_non_null(strstr(s, "holds no cluster sizes"));
    free(s);
    dash_free(&d);
}

static char *frame_of(dash_t *d, int view)
{
    canvas_t *c = canvas_new(110, 30, 0, 0);
    assert_non_null(c);
    d->view = view;
    dash_render(d, c);
    char *s = canvas_to_string(c);
    canvas_free(c);
    return s;
}

/* Issue 14: after ] the overview says the model was refitted here (and
 * with which K); [ back to the file's K restores the file's model. */
static void test_refit_and_restore(void **state)
{
    (void)state;
    dash_t d;
    model_t *orig = NULL;
    open_with_model(&d, 0, &orig);
    char *s = frame_of(&d, VIEW_OVERVIEW);
    assert_non_null(strstr(s, "source    m.h5"));
    free(s);
    whatif_t w;
    whatif_init(&w);
    assert_int_equal(whatif_start_change(&w, &d, 5, ROUTE_ELDR, 0.1), 0);
    assert_int_equal(whatif_collect(&w), 0);
    assert_int_equal(d.fit->model->K, 5);
    assert_int_equal(d.fit->origin, DASH_FIT_REFIT);
    s = frame_of(&d, VIEW_OVERVIEW);
    assert_null(strstr(s, "source    m.h5"));
    assert_non_null(strstr(s, "refitted here with K 5"));
    assert_non_null(strstr(s, "recipe of m.h5"));
    free(s);
    /* a refit's own sizes: no re-assignment column */
    s = frame_of(&d, VIEW_BALANCE);
    assert_null(strstr(s, "reassigned"));
    free(s);
    assert_int_equal(whatif_start_change(&w, &d, 4, ROUTE_ELDR, 0.1), 0);
    assert_int_equal(whatif_collect(&w), 0);
    assert_ptr_equal(d.fit, d.home);
    assert_int_equal(d.fit->origin, DASH_FIT_FILE);
    const model_t *m = d.fit->model;
    assert_int_equal(m->K, 4);
    assert_int_equal(m->recipe.n_layers, orig->recipe.n_layers);
    assert_memory_equal(m->centroids, orig->centroids,
                        sizeof(float) * m->K * sig_dim(&m->recipe));
    assert_int_equal(d.base[0]->K, 4);
    s = frame_of(&d, VIEW_OVERVIEW);
    assert_non_null(strstr(s, "source    m.h5"));
    assert_null(strstr(s, "refitted"));
    free(s);
    /* and once more up and back: the home fit survives the round trips */
    assert_int_equal(whatif_start_change(&w, &d, 3, ROUTE_ELDR, 0.1), 0);
    assert_int_equal(whatif_collect(&w), 0);
    assert_int_equal(whatif_start_change(&w, &d, 4, ROUTE_ELDR, 0.1), 0);
    assert_int_equal(whatif_collect(&w), 0);
    assert_ptr_equal(d.fit, d.home);
    whatif_destroy(&w);
    model_free(orig);
    dash_free(&d);
}

/* Issue 14: the header's deltas are green when better and red when worse
 * (colour terminals); without colour a word says it, at any width. */
static void test_header_deltas(void **state)
{
    (void)state;
    /* the single run's deltas: the seeds' CIs off (test_header_ci has them) */
    int ci_was = D.ci.valid;
    D.ci.valid = 0;
    const dash_sim *b = dash_best_base(&D);   /* the run's own, without the seeds */
    /* one worse, one better, one even, whatever the fixture gives */
    sim_result saved = D.cur->res;
    D.cur->res.tpot_p50_ms = b->res.tpot_p50_ms * 1.10;
    D.cur->res.tpot_p99_ms = b->res.tpot_p99_ms * 0.90;
    D.cur->res.distinct_per_step = b->res.distinct_per_step;
    double v[3] = {D.cur->res.tpot_p50_ms, D.cur->res.tpot_p99_ms, D.cur->res.distinct_per_step};
    double r[3] = {b->res.tpot_p50_ms, b->res.tpot_p99_ms, b->res.distinct_per_step};
    /* colour: the cells of each printed change carry its colour */
    canvas_t *c = canvas_new(140, 30, 0, 256);
    assert_non_null(c);
    D.view = VIEW_OVERVIEW;
    dash_render(&D, c);
    char *s = canvas_to_string(c), line[512];
    assert_true(line_with(s, "TPOT p50", line, sizeof line));
    assert_null(strstr(line, "worse"));        /* colour says it */
    assert_null(strstr(line, "better"));
    const char *p = line;
    for (int i = 0; i < 3; i++) {
        char ch[24];
        dash_fmt_change(ch, sizeof ch, v[i], r[i]);
        const char *at = strstr(p, ch);
        assert_non_null(at);
        double pct = 100.0 * (v[i] - r[i]) / r[i];
        const cv_cell *cell = canvas_at(c, (int)(at - line), 1);
        if (pct >= 0.05)
            assert_int_equal(cell->st.fg, 196);
        else if (pct <= -0.05)
            assert_int_equal(cell->st.fg, 40);
        else
            assert_int_equal(cell->st.fg, CV_DEFAULT);
        p = at + strlen(ch);
    }
    free(s);
    canvas_free(c);
    /* no colour: the words, also when the width forces the short forms */
    int widths[] = {140, 100, 80};
    for (int i = 0; i < 3; i++) {
        c = canvas_new(widths[i], 30, 0, 0);
        dash_render(&D, c);
        s = canvas_to_string(c);
        canvas_free(c);
        const char *hdr = strchr(s, '\n') + 1;
        snprintf(line, sizeof line, "%.*s", (int)(strchr(hdr, '\n') - hdr), hdr);
        int words = 0;
        const char *w[] = {" better", " worse", " even", " b", " w", " ="};
        for (int j = 0; j < 6; j++)
            for (const char *q = line; (q = strstr(q, w[j])); q++)
                words++;
        if (words < 3)
            fail_msg("width %d: header lacks a verdict per delta: '%s'", widths[i], line);
        if (widths[i] >= 140)
            assert_non_null(strstr(line, "TPOT p50"));
        /* the words, not letters, down to 100 columns; at 80 the letters,
         * for the baseline's name outranks the words' length (issue 22) */
        int wide = widths[i] >= 100;
        if (!strstr(line, wide ? "+10.0% worse" : "+10.0% w") ||
            !strstr(line, wide ? "-10.0% better" : "-10.0% b") ||
            !strstr(line, wide ? "+0.0% even" : "+0.0% =") || !strstr(line, " vs "))
            fail_msg("width %d: '%s'", widths[i], line);
        free(s);
    }
    D.cur->res = saved;
    D.ci.valid = ci_was;
}

/* An independent reckoning of the random-batch expectation: p[l][e] the
 * mean over the simulated requests of their decode share, and per step
 * of B requests sum_e 1 - (1 - p)^B, summed per worker. */
typedef struct exp_ctx {
    const double *p;
    int L, E;
    double sum[DASH_K_MAX];
    int64_t steps[DASH_K_MAX];
} exp_ctx;

static void exp_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                     int64_t kv)
{
    (void)t;
    (void)dt;
    (void)U;
    (void)L;
    (void)kv;
    exp_ctx *x = ctx;
    for (int l = 0; l < x->L; l++)
        for (int e = 0; e < x->E; e++)
            x->sum[worker] += 1 - pow(1 - x->p[l * x->E + e], B);
    x->steps[worker]++;
}

/* Issue 14: the heatmap marks the masked layers, reads out the cell
 * under the cursor with its sample size, and normalises distinct experts
 * per step by a random batch of the same size. */
static void test_heatmap_issue14(void **state)
{
    (void)state;
    const model_t *m = D.fit->model;
    const dash_sim *s = D.cur;
    char *f = frame(VIEW_HEATMAP, 120, 30);
    for (int l = 0; l < D.L; l++) {
        int masked = 0;
        for (int i = 0; i < m->recipe.n_layers; i++)
            masked |= m->recipe.layers[i] == l;
        char want[16];
        snprintf(want, sizeof want, "\n%cL%-3d", masked ? '*' : ' ', l);
        if (!strstr(f, want))
            fail_msg("layer %d should%s be marked:\n%s", l, masked ? "" : " not", f);
    }
    if (!strstr(f, "  *: signature layer"))   /* the long form where it fits */
        fail_msg("%s", f);
    free(f);

    /* the cursor: layer 2, expert 5 of worker 1 */
    D.hl = 2;
    D.he = 5;
    D.worker = 1;
    f = frame(VIEW_HEATMAP, 120, 30);
    char want[128];
    snprintf(want, sizeof want, "cursor L2 E5");
    assert_non_null(strstr(f, want));
    uint64_t act = s->res.heat[((size_t)1 * D.L + 2) * D.E + 5];
    snprintf(want, sizeof want, "%llu activations here; w1 served %lld/%lld requests",
             (unsigned long long)act, (long long)s->res.served[1], (long long)s->res.n);
    if (!strstr(f, want))
        fail_msg("readout lacks '%s':\n%s", want, f);
    assert_non_null(strstr(f, "served"));
    free(f);
    D.hl = D.he = D.worker = 0;

    /* the expectation, reckoned again from the rr baseline's steps */
    const dash_sim *rr = D.base[1];
    assert_int_equal(rr->policy, ROUTE_RR);
    double *p = calloc((size_t)D.L * D.E, sizeof *p);
    int64_t n = 0;
    for (int64_t r = 0; r < D.eval->n; r++) {
        if (D.eval->decode_tokens[r] <= 0)
            continue;
        for (int i = 0; i < D.L * D.E; i++)
            p[i] += (double)D.eval->decode_counts[(size_t)r * D.L * D.E + i] /
                    D.eval->decode_tokens[r];
        n++;
    }
    double ksum = 0;
    for (int i = 0; i < D.L * D.E; i++) {
        p[i] /= n;
        ksum += p[i];
    }
    assert_true(fabs(ksum - D.L * D.k) < 1e-9);   /* a token picks k experts a layer */
    exp_ctx x = {.p = p, .L = D.L, .E = D.E};
    route_policy pol;
    sim_result res;
    char err[ELDR_ERRLEN];
    assert_int_equal(route_policy_init(&pol, ROUTE_RR, rr->K, D.opts.seed, err, sizeof err), 0);
    assert_int_equal(sim_run(&D.rows[DASH_LEVEL_FULL].work, &pol, exp_step, &x, &res, err, sizeof err), 0);
    route_policy_free(&pol);
    sim_result_free(&res);
    for (int k = 0; k < rr->K; k++) {
        double got = 0;
        for (int l = 0; l < D.L; l++)
            got += rr->layer_expected[(size_t)k * D.L + l];
        double want_k = x.steps[k] ? x.sum[k] / x.steps[k] : 0;
        if (fabs(got - want_k) > 1e-9 * (1 + want_k))
            fail_msg("worker %d: expected %.9f, reckoned %.9f", k, got, want_k);
    }
    free(p);
    f = frame(VIEW_HEATMAP, 120, 30);
    assert_non_null(strstr(f, "/ random batch"));
    assert_non_null(strstr(f, "observed/expected"));
    snprintf(want, sizeof want, "random = %.2f", s->distinct_all / s->expected_all);
    assert_non_null(strstr(f, want));
    snprintf(want, sizeof want, "mean batch %.1f", s->res.mean_batch);
    assert_non_null(strstr(f, want));
    free(f);

    /* colour: glyphs over the coloured cells, so a text capture shows them */
    canvas_t *c = canvas_new(120, 30, 0, 256);
    D.view = VIEW_HEATMAP;
    dash_render(&D, c);
    f = canvas_to_string(c);
    const char *row = strstr(f, "\n L0 ");
    if (!row)
        row = strstr(f, "\n*L0 ");
    assert_non_null(row);
    int marks = 0;
    for (int e = 0; e < D.E; e++)   /* row[0] is the '\n'; the cells start at column 6 */
        marks += row[7 + e] != ' ' && strchr(CANVAS_RAMP, row[7 + e]) != NULL;
    if (marks < D.E / 2)
        fail_msg("colour heatmap is blank as text:\n%s", f);
    free(f);
    canvas_free(c);
}

static int count_lines_with(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* View 7: the tau x K grid around K 4 (2, 4, 8 x 0, 0.05, 0.1, 0.2),
 * every cell in the table with its change against its own K's best
 * baseline, the current cell '@', the front in capitals (never a cell
 * worse than its baseline), the verdict and what the intervals cover,
 * the scatter, the trail; the current cell over the same seeds is the
 * header's numbers; m's metrics each head the table. */
static void test_tradeoff_frame(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    D.trade.cursor = 0;
    assert_int_equal(tradeoff_compute(&D, 0, NULL, err, sizeof err), 0);
    assert_int_equal(D.trade.state, DASH_TRADE_DONE);
    const grid_result *g = &D.trade.g;
    int rows[64], pareto[64];
    int n = tradeoff_eldr_rows(g, rows, 64);
    assert_int_equal(n, 3 * 4);
    assert_int_equal(g->n_seeds, DASH_SEEDS);
    D.trade_metric = TRADE_P50;
    tradeoff_pareto(g, rows, n, TRADE_P50, pareto);
    char *s = frame(VIEW_TRADEOFF, 100, 30), want[512], line[256];
    assert_non_null(strstr(s, "[7 tradeoff]"));
    assert_non_null(strstr(s, "tau x K: TPOT p50 change vs each K's best baseline"));
    assert_non_null(strstr(s, "gain (y) vs imbalance"));   /* "(x)" cut at 100 columns: "..." */
    verdict vd;
    verdict_text vt;
    assert_true(tradeoff_verdict(g, D.trade.K0, &vd, &vt) >= 0);
    assert_int_equal(D.trade.K0, 4);
    assert_int_equal(g->rows[vd.row].K, 4);     /* the fleet's K only */
    snprintf(want, sizeof want, "verdict: %s", vt.head);
    assert_non_null(strstr(s, want));
    /* the baselines and margins are named on the screen */
    assert_non_null(strstr(s, "rule: beat each of jsq,rr,p2c by 1.0% p50, lose <= 5.0% p99, "
                           "<= 1.0% tok/s; m 4"));
    assert_non_null(strstr(s, "+-: 95% CI over 5 seeds"));
    int n_front = 0, cur_row = -1;
    static const int Ks[] = {2, 4, 8};
    static const double taus[] = {0, 0.05, 0.1, 0.2};
    for (int i = 0; i < n; i++) {
        const grid_row *r = &g->rows[rows[i]];
        assert_int_equal(r->K, Ks[i / 4]);
        assert_true(fabs(r->tau - taus[i % 4]) < 1e-12);
        /* " A@   0.10   4  -0.6% +-0.6   even   random    5.539" */
        snprintf(want, sizeof want, "%5.2f %3d  %+.1f%%", r->tau, r->K, r->vs_best_pct.mean);
        assert_true(line_with(s, want, line, sizeof line));
        snprintf(want, sizeof want, "%-6s %8.3f ", route_kind_name(g->rows[r->best_baseline].kind),
                 r->tpot_p50.mean);
        assert_non_null(strstr(line, want));
        char letter = (char)((pareto[i] ? 'A' : 'a') + i);
        assert_int_equal(line[1], letter);
        if (pareto[i])   /* the front holds only cells better than their baseline */
            assert_true(r->vs_best_pct.mean < 0);
        n_front += pareto[i];
        if (line[2] == '@')
            cur_row = i;
    }
    assert_int_equal(cur_row, 1 * 4 + 2);   /* K 4, tau 0.1 */
    assert_int_equal(line_with(s, ">", line, sizeof line), 1);
    assert_non_null(strstr(s, "Trail:"));
    assert_non_null(strstr(s, "  vs: K 2 "));
    /* the current cell is the header's grid (same model, seeds, workload),
     * and the header and the trail print its number */
    const grid_row *cur = &g->rows[rows[cur_row]];
    assert_true(fabs(cur->tpot_p50.mean - D.ci.tpot_p50.mean) < 1e-12);
    assert_true(fabs(cur->vs_best_pct.mean - D.ci.vs_best_pct.mean) < 1e-12);
    assert_true(cur->tpot_p50_ms[0] == D.cur->res.tpot_p50_ms);
    snprintf(want, sizeof want, "TPOT p50 %.3f ms", cur->tpot_p50.mean);
    assert_non_null(strstr(s, want));   /* the trail's line of the current setting */
    free(s);
    /* m: p99 and tokens/s head the table in turn */
    const char *heads[] = {"p99 change", "tok/s change"};
    for (int m = TRADE_P99; m <= TRADE_TPS; m++) {
        D.trade_metric = m;
        s = frame(VIEW_TRADEOFF, 100, 30);
        assert_non_null(strstr(s, heads[m - 1]));
        const grid_row *r = &g->rows[rows[0]];
        snprintf(want, sizeof want, "%5.2f %3d  %+.1f%%", r->tau, r->K,
                 tradeoff_change(r, m)->mean);
        assert_non_null(strstr(s, want));
        free(s);
    }
    D.trade_metric = TRADE_P50;
    /* every size draws exactly its lines */
    int sizes[][2] = {{40, 10}, {80, 24}, {99, 40}, {300, 90}};
    for (int i = 0; i < 4; i++) {
        s = frame(VIEW_TRADEOFF, sizes[i][0], sizes[i][1]);
        assert_int_equal(count_lines_with(s, "\n"), sizes[i][1]);
        if (sizes[i][1] >= 40)
            assert_non_null(strstr(s, "gain (y)"));   /* narrow: under the table */
        free(s);
    }
}

/* The front of (gain against the baseline, imbalance): ties kept, and a
 * cell worse than its baseline is never on it, however balanced. */
static void test_tradeoff_pareto(void **state)
{
    (void)state;
    grid_row r[5];
    memset(r, 0, sizeof r);
    double ch[5] = {-3.0, -2.5, -2.5, 1.0, -4.0}, im[5] = {1.0, 0.8, 1.5, 0.5, 3.0};
    for (int i = 0; i < 5; i++) {
        r[i].kind = ROUTE_ELDR;
        r[i].vs_best_pct.mean = ch[i];
        r[i].tps_vs_best_pct.mean = -ch[i];   /* tokens/s: higher is better */
        r[i].imbalance.mean = im[i];
    }
    grid_result g = {.rows = r, .n = 5};
    int rows[5], pareto[5];
    assert_int_equal(tradeoff_eldr_rows(&g, rows, 5), 5);
    int want[5] = {1, 1, 0, 0, 1};   /* 2.5/1.5 is beaten by 3.0/1.0; +1.0% is worse */
    for (int m = TRADE_P50; m <= TRADE_TPS; m += TRADE_TPS - TRADE_P50) {
        tradeoff_pareto(&g, rows, 5, m, pareto);
        for (int i = 0; i < 5; i++)
            assert_int_equal(pareto[i], want[i]);
    }
    /* nothing better than the baseline: no front, and the verdict says so */
    for (int i = 0; i < 5; i++)
        r[i].vs_best_pct.mean = 0.5 + i;
    tradeoff_pareto(&g, rows, 5, TRADE_P50, pareto);
    for (int i = 0; i < 5; i++)
        assert_int_equal(pareto[i], 0);
}

/* The verdict: the one of verdict.h at the fleet's K. K 8 wins, but the
 * fleet is K 4, where nothing gains: "keep"; around K 8 it is a win. */
static void test_tradeoff_verdict(void **state)
{
    (void)state;
    static double p50[4][5] = {{10, 10.2, 9.9, 10.1, 10}, {10.3, 10.4, 10.1, 10.3, 10.2},
                               {8, 8.1, 7.9, 8.2, 8}, {7.2, 7.3, 7.1, 7.4, 7.2}};
    static double p99[4][5], tps[4][5];
    grid_row r[4];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 4; i++) {
        r[i].kind = i % 2 ? ROUTE_ELDR : ROUTE_RR;
        r[i].K = i < 2 ? 4 : 8;
        r[i].tau = i % 2 ? 0.1 : NAN;
        r[i].n_seeds = 5;
        r[i].rate = 60;
        for (int s2 = 0; s2 < 5; s2++) {
            p99[i][s2] = 1.2 * p50[i][s2];
            tps[i][s2] = 900;
        }
        r[i].tpot_p50_ms = p50[i];
        r[i].tpot_p99_ms_seed = p99[i];
        r[i].tokens_per_s_seed = tps[i];
        r[i].tpot_p50.mean = (p50[i][0] + p50[i][1] + p50[i][2] + p50[i][3] + p50[i][4]) / 5;
    }
    grid_result g = {.rows = r, .n = 4, .n_seeds = 5, .steady = 1};
    verdict v;
    verdict_text t;
    assert_int_equal(tradeoff_verdict(&g, 4, &v, &t), VERDICT_KEEP);
    assert_string_equal(t.head, "keep rr at K 4");
    assert_int_equal(v.n_compared, 1);
    assert_int_equal(tradeoff_verdict(&g, 8, &v, &t), VERDICT_WIN);
    assert_string_equal(t.head, "use tau 0.1 at K 8");
    assert_int_equal(tradeoff_verdict(&g, 2, &v, &t), -1);
    assert_non_null(strstr(t.head, "no row at K 2"));
    /* the cells' better/even/worse read the interval corrected over their K */
    grid_stat ci = {-2, -3, -1}, wide;
    r[1].n_seeds = 5;
    tradeoff_corrected(&g, &r[1], &ci, &wide);
    assert_true(wide.lo == -3 && wide.hi == -1);   /* one setting at K 4: as it was */
}

/* The background job: progress, the result, and a cancel that stops it. */
static void test_tradeoff_job(void **state)
{
    (void)state;
    tradeoff_job j;
    tradeoff_job_init(&j);
    assert_int_equal(tradeoff_job_start(&j, &D), 0);
    assert_int_equal(D.trade.state, DASH_TRADE_RUNNING);
    char *s = frame(VIEW_TRADEOFF, 100, 30);
    assert_non_null(strstr(s, "computing the tau x K grid"));
    free(s);
    s = frame(VIEW_BALANCE, 100, 30);   /* other views: the footer counts it */
    assert_non_null(strstr(s, " 7 fits"));
    free(s);
    double last = -1;
    for (int i = 0; i < 1200 && !tradeoff_job_poll(&j, &D); i++) {
        assert_true(D.trade.progress <= 1.0);
        assert_true(D.trade.progress >= last || D.trade.progress < 0);
        last = D.trade.progress;
        usleep(50000);
    }
    assert_int_equal(tradeoff_job_collect(&j, &D), 0);
    assert_int_equal(D.trade.state, DASH_TRADE_DONE);
    assert_int_equal(D.trade.g.n, 3 * (3 + 4));   /* jsq, rr, p2c (GRID_DEFAULT_BASELINES) + 4 taus */
    /* cancelled: the grid stops and the view says so */
    volatile int stop = 1;
    char err[ELDR_ERRLEN];
    assert_int_equal(tradeoff_compute(&D, 0, &stop, err, sizeof err), -2);
    assert_int_equal(D.trade.state, DASH_TRADE_FAILED);
    s = frame(VIEW_TRADEOFF, 100, 30);
    assert_non_null(strstr(s, "cancelled"));
    free(s);
    /* the job's cancel (racing the job: it may have finished first) */
    assert_int_equal(tradeoff_job_start(&j, &D), 0);
    tradeoff_job_cancel(&j);
    int rc = tradeoff_job_collect(&j, &D);
    assert_true(rc == -2 || rc == 0);
    assert_int_equal(D.trade.state, rc ? DASH_TRADE_FAILED : DASH_TRADE_DONE);
    tradeoff_job_destroy(&j);
    /* a what-if change while the job runs: the job has its own model */
    whatif_t w;
    whatif_init(&w);
    assert_int_equal(tradeoff_job_start(&j, &D), 0);
    change_refined(&w, 3, ROUTE_ELDR, 0.1);
    change_refined(&w, 4, ROUTE_ELDR, 0.1);
    while (!tradeoff_job_poll(&j, &D))
        usleep(20000);
    assert_int_equal(tradeoff_job_collect(&j, &D), 0);
    whatif_destroy(&w);
    tradeoff_job_destroy(&j);
}

/* Every setting applied is appended to the trail, shown in view 7. */
static void test_trail(void **state)
{
    (void)state;
    int n0 = D.n_trail;
    assert_true(n0 >= 1);
    assert_int_equal(D.trail[0].K, 4);   /* the opening setting */
    whatif_t w;
    whatif_init(&w);
    change_refined(&w, 4, ROUTE_ELDR, 0.05);
    change_refined(&w, 4, ROUTE_ELDR, 0.0);
    assert_int_equal(D.n_trail, n0 + 2);
    assert_true(D.trail[n0].tau == 0.05);
    assert_true(D.trail[n0 + 1].tau == 0.0);
    /* the trail's number is the header's: the mean over the seeds */
    assert_true(D.trail[n0 + 1].tpot_p50 == (dash_shown_ci(&D) ? D.ci.tpot_p50.mean
                                                                : D.cur->res.tpot_p50_ms));
    char *s = frame(VIEW_TRADEOFF, 100, 40), want[64];
    snprintf(want, sizeof want, "Trail: %d settings", D.n_trail);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof want, "%2d  eldr tau 0.05  K 4", n0 + 1);
    assert_non_null(strstr(s, want));
    snprintf(want, sizeof want, "%2d  eldr tau 0.00  K 4", n0 + 2);
    assert_non_null(strstr(s, want));
    free(s);
    /* a failed change adds nothing */
    assert_int_equal(whatif_start_change(&w, &D, 100000, ROUTE_ELDR, 0.1), 0);
    assert_int_equal(whatif_collect(&w), -1);
    assert_int_equal(D.n_trail, n0 + 2);
    change_refined(&w, 4, ROUTE_ELDR, 0.1);
    whatif_destroy(&w);
    /* the tabs: a trace's seventh is the trade-off */
    assert_int_equal(dash_n_views(&D), 7);
    assert_int_equal(dash_view_at(&D, 6), VIEW_TRADEOFF);
    assert_int_equal(dash_view_tab(&D, VIEW_DRIFT), -1);
}

static void test_view_names(void **state)
{
    (void)state;
    for (int v = 0; v < VIEW_N; v++)
        assert_int_equal(dash_view_parse(dash_view_name(v)), v);
    assert_int_equal(dash_view_parse("nope"), -1);
}

/* eldr-cost shown: the header's CIs are its grid row, the overview lists
 * it above the baselines, and view 7 adds one eldr-cost cell per K, after
 * the taus, weighed by the verdict as one more setting (verdict.h, as
 * `eldr advise --cost-rule`); the current cell is the cost cell of K 4. */
static void test_cost_policy(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    whatif_t w;
    whatif_init(&w);
    D.policy = ROUTE_ELDR_COST;
    change_refined(&w, 4, ROUTE_ELDR_COST, D.tau);
    assert_int_equal(D.cur->policy, ROUTE_ELDR_COST);
    int64_t decided = 0;
    for (int u = 0; u < RULE_N; u++)
        decided += D.cur->res.rule_count[u];
    assert_true(decided > 0 && D.cur->res.rule_count[RULE_COST] == decided);
    assert_true(D.ci.valid && D.ci.policy == ROUTE_ELDR_COST);
    assert_true(D.ci.tpot_p50_first == D.cur->res.tpot_p50_ms);
    assert_non_null(dash_shown_ci(&D));
    char *s = frame(VIEW_OVERVIEW, 100, 40), line[256];
    assert_true(line_with(s, "  eldr-cost ", line, sizeof line));
    assert_null(strstr(s, "one of the baselines"));
    assert_true(line_with(s, "eldr-cost K 4 |", line, sizeof line));   /* the header */
    free(s);

    assert_int_equal(tradeoff_compute(&D, 0, NULL, err, sizeof err), 0);
    const grid_result *g = &D.trade.g;
    assert_int_equal(D.trade.cost, 1);
    int rows[TRADE_MAX_ROWS];
    int n = tradeoff_eldr_rows(g, rows, TRADE_MAX_ROWS);
    assert_int_equal(n, 3 * 5);
    for (int i = 0; i < n; i++)
        assert_int_equal(g->rows[rows[i]].kind, i % 5 == 4 ? ROUTE_ELDR_COST : ROUTE_ELDR);
    const grid_row *cur = &g->rows[rows[D.trade.cursor]];
    assert_int_equal(cur->kind, ROUTE_ELDR_COST);
    assert_int_equal(cur->K, 4);
    assert_true(fabs(cur->tpot_p50.mean - D.ci.tpot_p50.mean) < 1e-12);
    verdict vd;
    verdict_text vt;
    assert_true(tradeoff_verdict(g, 4, &vd, &vt) >= 0);
    assert_int_equal(vd.n_compared, 5);    /* K 4's 4 taus and its cost cell */
    assert_non_null(strstr(vt.rule, "Bonferroni-corrected over 5 settings"));
    char want[128];
    const grid_row *e = &g->rows[vd.setting];
    assert_int_equal(e->K, 4);
    assert_true(grid_kind_is_candidate(e->kind));
    s = frame(VIEW_TRADEOFF, 100, 40);
    snprintf(want, sizeof want, " cost   4  %+.1f%%", cur->vs_best_pct.mean);
    assert_true(line_with(s, want, line, sizeof line));
    assert_int_equal(line[2], '@');
    assert_null(strstr(s, "no eldr-cost cells"));
    free(s);
    /* p away from eldr-cost: the view says the grid has its cells, r drops them */
    D.policy = ROUTE_ELDR;
    s = frame(VIEW_TRADEOFF, 100, 40);
    assert_non_null(strstr(s, "r: without them"));
    free(s);
    change_refined(&w, 4, ROUTE_ELDR, D.tau);
    assert_int_equal(tradeoff_compute(&D, 0, NULL, err, sizeof err), 0);
    assert_int_equal(D.trade.cost, 0);
    assert_int_equal(tradeoff_eldr_rows(&D.trade.g, rows, TRADE_MAX_ROWS), 3 * 4);
    D.policy = ROUTE_ELDR_COST;
    s = frame(VIEW_TRADEOFF, 100, 40);
    assert_non_null(strstr(s, "no eldr-cost cells; r: add them"));
    free(s);
    D.policy = ROUTE_ELDR;
    dash_trade_clear(&D.trade);
    assert_true(dash_policy_shown(ROUTE_ELDR_COST) && !dash_policy_shown(ROUTE_DOMAIN) &&
                !dash_policy_shown(ROUTE_ELDR_ONLINE));
    whatif_destroy(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_split),
        cmocka_unit_test(test_moot),
        cmocka_unit_test(test_split_random_default),
        cmocka_unit_test(test_sim_digest),
        cmocka_unit_test(test_balance_frame),
        cmocka_unit_test(test_rho_frame),
        cmocka_unit_test(test_heatmap_frame),
        cmocka_unit_test(test_queues_frame),
        cmocka_unit_test(test_scatter_frame),
        cmocka_unit_test(test_overview_frame),
        cmocka_unit_test(test_header_ci),
        cmocka_unit_test(test_every_size),
        cmocka_unit_test(test_whatif_tau_and_policy),
        cmocka_unit_test(test_whatif_refit),
        cmocka_unit_test(test_refit_cancel_and_bad_K),
        cmocka_unit_test(test_tradeoff_frame),
        cmocka_unit_test(test_tradeoff_pareto),
        cmocka_unit_test(test_tradeoff_verdict),
        cmocka_unit_test(test_tradeoff_job),
        cmocka_unit_test(test_trail),
        cmocka_unit_test(test_view_names),
        cmocka_unit_test(test_model_sizes),
        cmocka_unit_test(test_header_deltas),
        cmocka_unit_test(test_heatmap_issue14),
        cmocka_unit_test(test_refit_and_restore),
        cmocka_unit_test(test_cost_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
