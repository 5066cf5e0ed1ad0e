/* view_balance.c - cluster balance: per worker, the calibration cluster
 * size, the share of the simulated requests routed to it (with the ideal
 * 1/K marked on the bar) and its in-flight count at the time cursor.
 * Enter on a worker adds a detail panel for it. Live: the same columns
 * from the daemon's totals, and the in-flight count of the last poll. */
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"

/* A share bar over [0, full] with a '|' at the ideal share. */
static void share_bar(const dash_t *d, canvas_t *c, int x, int y, int bw, double share,
                      double ideal, double full, int color)
{
    (void)d;
    canvas_hbar(c, x, y, bw, share / full, cv_fg(color, 0));
    int mx = x + (int)(ideal / full * bw + 0.5);
    if (mx >= x + bw)
        mx = x + bw - 1;
    cv_cell *cell = canvas_at(c, mx, y);
    if (cell)
        *cell = (cv_cell){'|', cv_fg(CV_DEFAULT, CV_BOLD)};
}

static void detail(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    const dash_sim *s = d->cur;
    int wk = d->worker;
    const sim_result *r = &s->res;
    const dash_fit *f = d->fit;
    int re = f->reassigned != NULL;   /* one more line: the re-assignment */
    canvas_box(c, x, y, w, 7 + re, cv_plain(), dash_worker_name(d, wk));
    int n = 0;
    if (f->have_sizes)
        n = canvas_textf(c, x + 2, y + 1, cv_plain(), "cluster size %lld of %lld; ",
                         (long long)f->sizes[wk], (long long)f->n_fit);
    canvas_textf(c, x + 2 + n, y + 1, cv_plain(), "routed %lld of %lld; served %lld",
                 (long long)s->routed[wk], (long long)r->n, (long long)r->served[wk]);
    if (re)
        canvas_textf(c, x + 2, y + 2, cv_plain(), "reassigned: %lld of the %lld calibration "
                     "rows here are nearest to it", (long long)f->reassigned[wk],
                     (long long)f->n_reassigned);
    y += re;
    double batch = 0;
    for (int b = 0; b < s->nbins; b++)
        batch += s->running[(size_t)wk * s->nbins + b];
    canvas_textf(c, x + 2, y + 2, cv_plain(), "steps %lld, busy %.2f s of %.2f s, mean batch "
                 "%.1f", (long long)r->worker_steps[wk], r->worker_busy_s[wk], r->makespan_s,
                 s->nbins ? batch / s->nbins : 0);
    canvas_textf(c, x + 2, y + 3, cv_plain(), "distinct experts per layer-step %.2f (all "
                 "workers %.2f)", r->worker_distinct[wk], r->distinct_per_step);
    canvas_textf(c, x + 2, y + 4, cv_plain(), "in-flight: mean %.2f, now %.1f",
                 r->inflight_mean[wk], dash_inflight_now(d, s, wk));
    canvas_text(c, x + 2, y + 5, cv_fg(CV_DEFAULT, CV_DIM), "Enter: back");
}

static void live_detail(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    const dash_live_now *n = &d->live->now;
    int wk = d->worker;
    canvas_box(c, x, y, w, 6, cv_plain(), dash_worker_name(d, wk));
    canvas_textf(c, x + 2, y + 1, cv_plain(), "routed %lld, finished %lld, in flight %lld",
                 (long long)n->routed[wk], (long long)n->finished[wk],
                 (long long)n->inflight[wk]);
    canvas_textf(c, x + 2, y + 2, cv_plain(), "rules: %s", n->rules[wk][0] ? n->rules[wk]
                                                                           : "(none yet)");
    if (n->share[wk] == n->share[wk] && n->calib_share[wk] == n->calib_share[wk])
        canvas_textf(c, x + 2, y + 3, cv_plain(), "nearest-centroid share of the window %.1f%% "
                     "(calibration %.1f%%)", 100 * n->share[wk], 100 * n->calib_share[wk]);
    else if (n->share[wk] == n->share[wk])   /* a model without a baseline: no nan */
        canvas_textf(c, x + 2, y + 3, cv_plain(), "nearest-centroid share of the window %.1f%% "
                     "(calibration unknown)", 100 * n->share[wk]);
    canvas_text(c, x + 2, y + 4, cv_fg(CV_DEFAULT, CV_DIM), "Enter: back");
}

/* The table's columns: mark+name 10, size 7, [reassigned 12,] bar, pct
 * 7, bar, pct 7, in-flight 8; the bars share what the width leaves.
 * Draws the header. */
typedef struct balance_cols {
    int bw, size, re, b1, p1, b2, p2, inf;
} balance_cols;

#define REASSIGN_W 12

static balance_cols balance_header(canvas_t *c, int x, int y, int w, int reassign)
{
    balance_cols col;
    int rw = reassign ? REASSIGN_W : 0;
    col.bw = (w - 10 - 7 - 7 - 7 - 10 - 4 - rw) / 2;
    if (col.bw < 4)
        col.bw = 4;
    col.size = x + 1;
    col.re = x + 18;
    col.b1 = x + 18 + rw;
    col.p1 = col.b1 + col.bw + 1;
    col.b2 = col.p1 + 8;
    col.p2 = col.b2 + col.bw + 1;
    col.inf = col.p2 + 8;
    cv_style hd = cv_fg(CV_DEFAULT, CV_BOLD);
    canvas_text(c, col.size, y, hd, "worker     size");
    if (reassign)
        canvas_text(c, col.re, y, hd, "reassigned");
    /* each heading within its bar and percentage (narrow: shorter words) */
    int w1 = col.b2 - col.b1 - 1, w2 = col.inf - col.b2 - 1;
    canvas_put_fit(c, col.b1, y, w1, hd, w1 >= 17 ? "calibration share" : "fit share");
    canvas_put_fit(c, col.b2, y, w2, hd, w2 >= 12 ? "routed share" : "routed");
    canvas_text(c, col.inf, y, hd, "in-flight");
    return col;
}

static void balance_live(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_live_now *n = &d->live->now;
    int K = n->K;
    int64_t total = 0, routed = 0;
    for (int k = 0; k < K; k++) {
        total += n->sizes[k] > 0 ? n->sizes[k] : 0;
        routed += n->routed[k];
    }
    double ideal = 1.0 / K, full = 2.0 * ideal;
    for (int k = 0; k < K; k++) {
        double a = total ? (double)n->sizes[k] / total : 0;
        double b = routed ? (double)n->routed[k] / routed : 0;
        full = a > full ? a : full;
        full = b > full ? b : full;
    }
    balance_cols col = balance_header(c, x, y, w, 0);
    int bw = col.bw, cx_size = col.size, cx_b1 = col.b1, cx_p1 = col.p1, cx_b2 = col.b2,
        cx_p2 = col.p2, cx_inf = col.inf;
    int rows = h - 4 - (d->zoom ? 6 : 0);
    if (rows < 1)
        rows = 1;
    int first = d->worker >= rows ? d->worker - rows + 1 : 0;
    for (int k = first, row = 0; k < K && row < rows; k++, row++) {
        int yy = y + 1 + row, sel = k == d->worker;
        cv_style st = sel ? (cv_style){CV_DEFAULT, CV_DEFAULT, CV_BOLD} : cv_plain();
        double a = total ? (double)n->sizes[k] / total : 0;
        double b = routed ? (double)n->routed[k] / routed : 0;
        char nb[DASH_NAME_MAX];
        canvas_textf(c, cx_size, yy, st, "%c%-8s ", sel ? '>' : ' ',
                     dash_worker_label(d, k, 8, nb, sizeof nb));
        if (n->sizes[k] >= 0)
            canvas_textf(c, cx_size + 10, yy, st, "%6lld", (long long)n->sizes[k]);
        if (total) {
            share_bar(d, c, cx_b1, yy, bw, a, ideal, full, dash_cluster_color(k));
            canvas_textf(c, cx_p1, yy, st, "%5.1f%%", 100 * a);
        }
        share_bar(d, c, cx_b2, yy, bw, b, ideal, full, dash_cluster_color(k));
        canvas_textf(c, cx_p2, yy, st, "%5.1f%%", 100 * b);
        canvas_textf(c, cx_inf, yy, st, "%7lld", (long long)n->inflight[k]);
    }
    int yy = y + 1 + (K - first < rows ? K - first : rows);
    canvas_textf(c, cx_size, yy++, cv_fg(CV_DEFAULT, CV_DIM), "routed %lld by eldrd; "
                 "'|' = ideal 1/K = %.1f%%; bars 0..%.0f%%", (long long)routed, 100 * ideal,
                 100 * full);
    canvas_textf(c, cx_size, yy++, cv_fg(CV_DEFAULT, CV_DIM), "in-flight: %s", d->live->attached
                 ? "the last poll" : "when the snapshot was taken");
    if (d->zoom)
        live_detail(d, c, x, yy, w);
}

void view_balance(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        balance_live(d, c, x, y, w, h);
        return;
    }
    const dash_sim *s = d->cur;
    if (!d->fit || !s) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "loading...");
        return;
    }
    const dash_fit *f = d->fit;
    int K = f->model->K;
    /* the calibration share is the model's own when it has sizes, else
     * the re-assignment of this trace's calibration rows */
    const int64_t *cal = f->have_sizes ? f->sizes : f->reassigned;
    int64_t ncal = f->have_sizes ? f->n_fit : f->n_reassigned;
    double ideal = 1.0 / K, full = 2.0 * ideal;
    for (int k = 0; k < K; k++) {
        double a = ncal && cal ? (double)cal[k] / ncal : 0;
        double b = s->res.n ? (double)s->routed[k] / s->res.n : 0;
        if (a > full)
            full = a;
        if (b > full)
            full = b;
    }
    balance_cols col = balance_header(c, x, y, w, f->reassigned != NULL);
    int bw = col.bw, cx_size = col.size, cx_b1 = col.b1, cx_p1 = col.p1, cx_b2 = col.b2,
        cx_p2 = col.p2, cx_inf = col.inf;
    int notes = f->reassigned ? 2 : 0;
    int rows = h - 4 - notes - (d->zoom ? 7 + (f->reassigned != NULL) : 0);
    if (rows < 1)
        rows = 1;
    int first = d->worker >= rows ? d->worker - rows + 1 : 0;
    for (int k = first, row = 0; k < K && row < rows; k++, row++) {
        int yy = y + 1 + row;
        int sel = k == d->worker;
        cv_style st = sel ? (cv_style){CV_DEFAULT, CV_DEFAULT, CV_BOLD} : cv_plain();
        double a = ncal && cal ? (double)cal[k] / ncal : 0;
        double b = s->res.n ? (double)s->routed[k] / s->res.n : 0;
        char nb[DASH_NAME_MAX];
        canvas_textf(c, cx_size, yy, st, "%c%-8s ", sel ? '>' : ' ',
                     dash_worker_label(d, k, 8, nb, sizeof nb));
        if (f->have_sizes)
            canvas_textf(c, cx_size + 10, yy, st, "%6lld", (long long)f->sizes[k]);
        else
            canvas_text(c, cx_size + 10, yy, st, "     -");
        if (f->reassigned)
            canvas_textf(c, col.re, yy, st, "%10lld", (long long)f->reassigned[k]);
        share_bar(d, c, cx_b1, yy, bw, a, ideal, full, dash_cluster_color(k));
        canvas_textf(c, cx_p1, yy, st, "%5.1f%%", 100 * a);
        share_bar(d, c, cx_b2, yy, bw, b, ideal, full, dash_cluster_color(k));
        canvas_textf(c, cx_p2, yy, st, "%5.1f%%", 100 * b);
        canvas_textf(c, cx_inf, yy, st, "%7.1f", dash_inflight_now(d, s, k));
    }
    int yy = y + 1 + (K - first < rows ? K - first : rows);
    cv_style dim = cv_fg(CV_DEFAULT, CV_DIM);
    if (!f->reassigned) {
        canvas_textf(c, cx_size, yy++, dim, "total %lld = N calibrated; '|' = ideal 1/K = "
                     "%.1f%%; bars 0..%.0f%%", (long long)f->n_fit, 100 * ideal, 100 * full);
    } else {
        if (f->have_sizes)
            canvas_textf(c, cx_size, yy++, dim, "size: %s's own clusters (%lld fitted), "
                         "as is the calibration share", d->model_name, (long long)f->n_fit);
        else
            canvas_textf(c, cx_size, yy++, dim, "size: - (%s holds no cluster sizes); "
                         "calibration share from the re-assignment", d->model_name);
        canvas_textf(c, cx_size, yy++, dim, "reassigned (calib rows): these %lld calibration "
                     "rows by nearest centroid", (long long)f->n_reassigned);
        canvas_textf(c, cx_size, yy++, dim, "'|' = ideal 1/K = %.1f%%; bars 0..%.0f%%",
                     100 * ideal, 100 * full);
    }
    double t = s->t_end * d->cursor;
    canvas_textf(c, cx_size, yy++, dim, "in-flight at t = %.2f s of %.2f s (, . move); "
                 "policy %s", t, s->t_end, route_kind_name(s->policy));
    if (d->zoom)
        detail(d, c, x, yy, w);
}
