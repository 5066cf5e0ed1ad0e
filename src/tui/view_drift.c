/* view_drift.c - live: is the traffic still the calibration's? The mean
 * best similarity over eldrd's window of recent signatures against the
 * calibration's (with its history over the polls), and per cluster the
 * share of the window nearest to each centroid against the calibration
 * size share, with their total variation distance. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"

static void share_row(const dash_t *d, canvas_t *c, int x, int y, int bw, int k, double full)
{
    const dash_live_now *n = &d->live->now;
    double a = n->share[k], b = n->calib_share[k];
    cv_style st = k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain();
    canvas_textf(c, x, y, st, "%c%-8.8s", k == d->worker ? '>' : ' ', dash_worker_name(d, k));
    if (a == a) {
        canvas_hbar(c, x + 10, y, bw, a / full, cv_fg(dash_cluster_color(k), 0));
        canvas_textf(c, x + 11 + bw, y, st, "%5.1f%%", 100 * a);
    } else {
        canvas_text(c, x + 11 + bw, y, cv_fg(CV_DEFAULT, CV_DIM), "    -");
    }
    if (b == b) {
        canvas_hbar(c, x + 19 + bw, y, bw, b / full, cv_fg(CV_DEFAULT, CV_DIM));
        canvas_textf(c, x + 20 + 2 * bw, y, st, "%5.1f%%", 100 * b);
    }
    if (a == a && b == b)
        canvas_textf(c, x + 28 + 2 * bw, y, st, "%+6.1f", 100 * (a - b));
}

void view_drift(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (!d->live) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "drift: live mode only (eldr dash --attach "
                    "URL, or --router-snapshot FILE)");
        return;
    }
    const dash_live *L = d->live;
    const dash_live_now *n = &L->now;
    cv_style hd = cv_fg(CV_DEFAULT, CV_BOLD), dim = cv_fg(CV_DEFAULT, CV_DIM);
    int yy = y;
    canvas_textf(c, x + 1, yy++, hd, "best similarity over the window of %lld recent signatures",
                 (long long)n->window);
    if (n->mean_sim == n->mean_sim) {
        char ch[24] = "n/a";
        if (n->calib_sim > 0)
            snprintf(ch, sizeof ch, "%+.1f%%", 100 * (n->mean_sim - n->calib_sim) / n->calib_sim);
        canvas_textf(c, x + 1, yy++, cv_plain(), "  live %.4f   calibration %.4f   change %s",
                     n->mean_sim, n->calib_sim, ch);
    } else {
        canvas_text(c, x + 1, yy++, dim, "  no signatures in the window yet (or the model "
                    "was just swapped)");
    }
    int sw = w - 14, m = L->n_hist < sw ? L->n_hist : sw;
    if (m > 0) {
        canvas_textf(c, x + 1, yy, dim, "  history ");
        dash_sparkline(c, x + 12 + sw - m, yy, m, L->hist_sim + DASH_BINS - m, m, 1.0, -1, 39);
        yy++;
        canvas_textf(c, x + 1, yy++, dim, "  (one column per poll, newest at the right; "
                     "full height = 1.0)");
    }
    yy++;
    int bw = (w - 40) / 2;
    bw = bw > 30 ? 30 : bw < 4 ? 4 : bw;
    canvas_textf(c, x + 1, yy++, hd, "%-9s %-*s %-*s %6s", "cluster", bw + 8, "window share",
                 bw + 8, "calibration share", "diff");
    double full = 2.0 / n->K;
    for (int k = 0; k < n->K; k++) {
        if (n->share[k] == n->share[k] && n->share[k] > full)
            full = n->share[k];
        if (n->calib_share[k] == n->calib_share[k] && n->calib_share[k] > full)
            full = n->calib_share[k];
    }
    int rows = y + h - yy - 1;
    int first = d->worker >= rows ? d->worker - rows + 1 : 0;
    for (int k = first; k < n->K && yy < y + h - 1; k++)
        share_row(d, c, x + 1, yy++, bw, k, full);
    if (n->tvd == n->tvd)
        canvas_textf(c, x + 1, yy, dim, "share: nearest centroid of each window signature; "
                     "total variation distance %.3f", n->tvd);
    else
        canvas_text(c, x + 1, yy, dim, "share: nearest centroid of each window signature "
                    "(no data yet)");
}
