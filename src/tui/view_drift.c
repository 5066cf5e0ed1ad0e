/* view_drift.c - live: is the traffic still the calibration's? The mean
 * best similarity over eldrd's window of recent signatures against the
 * calibration's (with its history over the polls), and per cluster the
 * share of the window nearest to each centroid against the calibration
 * size share, with their total variation distance. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"

static void share_row(const dash_t *d, canvas_t *c, int x, int y, int bw, int k, double full)
{
    const dash_live_now *n = &d->live->now;
    double a = n->share[k], b = n->calib_share[k];
    cv_style st = k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain();
    char nb[DASH_NAME_MAX];
    canvas_textf(c, x, y, st, "%c%-8s", k == d->worker ? '>' : ' ',
                 dash_worker_label(d, k, 8, nb, sizeof nb));
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

/* The range a history is drawn over: the visible polls, widened to at
 * least DRIFT_MIN_SPAN so that noise in the fifth decimal does not fill
 * the chart. Auto-scaled (not 0..1): a drift of 0.005 in a similarity
 * near 0.7 must show. The calibration's level is not stretched in (it
 * may sit far off and flatten the polls); it is drawn when in range. */
#define DRIFT_MIN_SPAN 0.002

static int sim_range(const float *v, int m, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < m; i++)
        if (v[i] == v[i]) {
            *lo = v[i] < *lo ? v[i] : *lo;
            *hi = v[i] > *hi ? v[i] : *hi;
        }
    if (!(*hi >= *lo))
        return 0;
    if (*hi - *lo < DRIFT_MIN_SPAN) {
        double mid = (*hi + *lo) / 2;
        *lo = mid - DRIFT_MIN_SPAN / 2;
        *hi = mid + DRIFT_MIN_SPAN / 2;
    }
    return 1;
}

/* The mean best similarity over the polls as a chart of `rows` rows on
 * an auto-scaled axis (printed), the calibration's level dotted, daemon
 * restarts marked '!'. Returns the lines used. */
static int history(const dash_t *d, canvas_t *c, int x, int y, int w, int rows)
{
    const dash_live *L = d->live;
    double calib = L->now.calib_sim;
    int lw = 18, sw = w - lw, m = L->n_hist < sw ? L->n_hist : sw;
    const float *v = L->hist_sim + DASH_BINS - m;
    double lo, hi;
    cv_style dim = cv_fg(CV_DEFAULT, CV_DIM);
    if (m < 1 || !sim_range(v, m, &lo, &hi)) {
        canvas_text(c, x, y, dim, "  history: no similarity yet");
        return 1;
    }
    if (rows > 1) {   /* the axis' ends beside the chart */
        canvas_textf(c, x, y, dim, "  history %7.4f", hi);
        canvas_textf(c, x, y + rows - 1, dim, "          %7.4f", lo);
    } else {
        canvas_text(c, x, y, dim, "  history");
    }
    int x0 = x + lw + sw - m, crow = -1;
    if (calib >= lo && calib <= hi)   /* the row the calibration's level falls in */
        crow = rows - 1 - (int)((calib - lo) / (hi - lo) * rows * 0.999);
    for (int i = 0; i < m; i++) {
        /* a floor of one eighth: the lowest poll still shows */
        double f = v[i] == v[i] ? (0.125 + 0.875 * (v[i] - lo) / (hi - lo)) * rows : -1;
        for (int r = 0; r < rows; r++) {
            double fill = f - r;   /* rows from the bottom */
            uint32_t ch = fill >= 1 ? (c->unicode ? 0x2588 : '#')
                        : fill > 0 ? canvas_spark(c, fill) : ' ';
            int cy = y + rows - 1 - r;
            if (ch == ' ' && cy - y == crow)
                canvas_put(c, x0 + i, cy, '-', dim);
            else
                canvas_put(c, x0 + i, cy, ch, cv_fg(39, 0));
        }
    }
    int marks = dash_restart_marks(d, c, x0, y, m);
    char cal[48] = "";
    if (crow >= 0)
        snprintf(cal, sizeof cal, "; - calibration");
    else if (calib == calib)
        snprintf(cal, sizeof cal, "; calibration %.4f %s", calib, calib > hi ? "above" : "below");
    canvas_textf(c, x, y + rows, dim, "  axis %.4f..%.4f auto-scaled%s%s; newest right",
                 lo, hi, marks ? "; ! restart" : "", cal);
    return rows + 1;
}

/* The verdict line: TVD against the noise threshold (coloured), or why
 * there is none; then what the baseline is. Returns the lines used. */
static int verdict(const dash_live_now *n, canvas_t *c, int x, int y)
{
    cv_style dim = cv_fg(CV_DEFAULT, CV_DIM);
    int red = c->colors >= 256 ? 196 : 1, green = c->colors >= 256 ? 40 : 2;
    char line[200];
    int v = dash_drift_verdict(n, line, sizeof line);
    canvas_textf(c, x, y, v == DRIFT_NO_TVD ? dim : v == DRIFT_OVER ? cv_fg(red, CV_BOLD)
                                                                     : cv_plain(), "  %s", line);
    if (v >= DRIFT_WITHIN) {   /* the TVD itself: red past the threshold, green under it */
        int cx = x + canvas_text(c, x, y, cv_plain(), "  drift: TVD ");
        canvas_textf(c, cx, y, cv_fg(v == DRIFT_OVER ? red : green, CV_BOLD), "%.3f", n->tvd);
    }
    canvas_textf(c, x, y + 1, dim, "  baseline: %s",
                 n->baseline[0] ? n->baseline : "cluster sizes (an eldrd that does not say)");
    return 2;
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
    yy += verdict(n, c, x + 1, yy);
    if (n->mean_sim == n->mean_sim) {
        char ch[24] = "n/a", cal[24] = "n/a";
        if (n->calib_sim == n->calib_sim)
            snprintf(cal, sizeof cal, "%.4f", n->calib_sim);
        if (n->calib_sim > 0)
            snprintf(ch, sizeof ch, "%+.1f%%", 100 * (n->mean_sim - n->calib_sim) / n->calib_sim);
        canvas_textf(c, x + 1, yy++, cv_plain(), "  live %.4f   calibration %s   change %s",
                     n->mean_sim, cal, ch);
    }
    if (L->n_hist > 0 && w > 30)
        yy += history(d, c, x + 1, yy, w - 2, h >= 20 ? 3 : 1);
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
    canvas_text(c, x + 1, yy, dim, "share: nearest centroid of each signature (argmax cosine)");
}
