/* view_scatter.c - a 2-D PCA of a sample of calibration signatures,
 * coloured by cluster (each cluster also has its own letter, so the
 * picture survives without colour), centroids marked by the capital
 * letter in bold. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"

static char cluster_glyph(int k, int centroid)
{
    static const char lower[] = "abcdefghijklmnopqrstuvwxyz";
    return centroid ? (char)('A' + k % 26) : lower[k % 26];
}

void view_scatter(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_fit *f = d->fit;
    if (!f) {
        canvas_text(c, x + 1, y + 1, cv_plain(), d->live ? "no centroids in this snapshot "
                    "(save it with GET /v1/snapshot?centroids=1)" : "loading...");
        return;
    }
    if (f->n_pts == 0 && !f->cent) {
        canvas_textf(c, x + 1, y + 1, cv_plain(), "no scatter: %s", f->note);
        return;
    }
    int K = f->model->K;
    int legend_w = w >= 70 ? 24 : 0;
    int pw = w - 2 - legend_w, ph = h - 2;
    if (pw < 4 || ph < 3)
        return;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < f->n_pts + K; i++) {
        const double *p = i < f->n_pts ? f->pts + 2 * i : f->cent + 2 * (i - f->n_pts);
        x0 = fmin(x0, p[0]);
        x1 = fmax(x1, p[0]);
        y0 = fmin(y0, p[1]);
        y1 = fmax(y1, p[1]);
    }
    double sx = x1 > x0 ? (pw - 1) / (x1 - x0) : 0, sy = y1 > y0 ? (ph - 1) / (y1 - y0) : 0;
    canvas_box(c, x, y, pw + 2, ph + 2, cv_fg(CV_DEFAULT, CV_DIM), NULL);
    if (f->n_pts)
        canvas_put_fitf(c, x + 2, y, pw - 2, cv_fg(CV_DEFAULT, CV_BOLD), " PCA of %d signatures: PC1 %.0f%% "
                     "(x), PC2 %.0f%% (y) ", f->n_pts, 100 * f->explained[0],
                     100 * f->explained[1]);
    else   /* live: the served model's centroids alone */
        canvas_put_fitf(c, x + 2, y, pw - 2, cv_fg(CV_DEFAULT, CV_BOLD), " PCA of the %d centroids eldrd "
                     "serves: PC1 %.0f%% (x), PC2 %.0f%% (y) ", K, 100 * f->explained[0],
                     100 * f->explained[1]);
    /* members are their cluster's letter in every terminal: a colour
     * alone (a dot) cannot be told apart on a monochrome one */
    for (int i = 0; i < f->n_pts; i++) {
        int px = (int)((f->pts[2 * i] - x0) * sx + 0.5);
        int py = (int)((y1 - f->pts[2 * i + 1]) * sy + 0.5);
        int k = f->pt_cluster[i];
        canvas_put(c, x + 1 + px, y + 1 + py, (uint32_t)cluster_glyph(k, 0),
                   cv_fg(dash_cluster_color(k), 0));
    }
    for (int k = 0; k < K; k++) {
        int px = (int)((f->cent[2 * k] - x0) * sx + 0.5);
        int py = (int)((y1 - f->cent[2 * k + 1]) * sy + 0.5);
        canvas_put(c, x + 1 + px, y + 1 + py, (uint32_t)cluster_glyph(k, 1),
                   (cv_style){(int16_t)dash_cluster_color(k), CV_DEFAULT, CV_BOLD | CV_REVERSE});
    }
    if (!legend_w) {
        canvas_text(c, x + 1, y + ph + 1, cv_fg(CV_DEFAULT, CV_DIM),
                    " a..: clusters, A..: centroids ");
        return;
    }
    int lx = x + pw + 3;
    canvas_text(c, lx, y, cv_fg(CV_DEFAULT, CV_BOLD), "cluster  worker  size");
    int rows = h - 3;
    for (int k = 0; k < K && k < rows; k++) {
        cv_style st = cv_fg(dash_cluster_color(k), k == d->worker ? CV_BOLD : 0);
        char name[DASH_NAME_MAX];
        snprintf(name, sizeof name, "%s", dash_worker_name(d, k));
        canvas_fit_tail(name, 7);   /* decode-1, decode-2: the tail differs */
        int n = canvas_textf(c, lx, y + 1 + k, st, "%c %c    %-7s ", cluster_glyph(k, 0),
                             cluster_glyph(k, 1), name);
        if (f->have_sizes)
            canvas_textf(c, lx + n, y + 1 + k, st, "%5lld", (long long)f->sizes[k]);
        else
            canvas_text(c, lx + n, y + 1 + k, st, "    -");
    }
    int ly = y + 1 + (K < rows ? K : rows);
    if (ly < y + h)   /* wrapped into the legend's own columns */
        canvas_wrap(c, lx, ly, legend_w - 1, y + h - ly, cv_fg(CV_DEFAULT, CV_DIM),
                    "a, b, ...: members of a cluster; A, B, ...: its centroid");
}
