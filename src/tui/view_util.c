/* view_util.c - what the views share (view_util.h): cluster and heat
 * colours, the change format, sparklines, restart marks, worker names
 * and the drift verdict. view_common.c draws the frame and calls the
 * views; the views call only this (docs/architecture.md, "Rooms"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "view_util.h"

int dash_cluster_color(int k)
{
    /* distinct, readable on dark and light backgrounds */
    static const int pal[] = {39, 208, 70, 199, 220, 33, 160, 43, 135, 178, 27, 203};
    return pal[(k < 0 ? -k : k) % (int)(sizeof pal / sizeof pal[0])];
}

int dash_heat_color(const canvas_t *c, double level)
{
    if (!(level >= 0))
        level = 0;
    if (level > 1)
        level = 1;
    if (c->colors >= 256) {
        /* diverging: blue (under) - grey (even) - red (over), xterm cube */
        static const int ramp[] = {17, 18, 19, 20, 26, 32, 67, 102, 245,
                                   138, 174, 167, 160, 124, 88};
        int n = (int)(sizeof ramp / sizeof ramp[0]);
        return ramp[(int)(level * (n - 1) + 0.5)];
    }
    if (c->colors >= 8)
        return level < 0.4 ? 4 : level > 0.6 ? 1 : CV_DEFAULT;
    return CV_DEFAULT;
}

void dash_fmt_change(char *buf, size_t n, double a, double b)
{
    if (!(b > 0) || !isfinite(a))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%+.1f%%", 100.0 * (a - b) / b);
}

void dash_sparkline(canvas_t *c, int x, int y, int width, const float *row, int n,
                    double top, int mark, int color)
{
    for (int i = 0; i < width && n > 0; i++) {
        int b0 = (int)((long)i * n / width), b1 = (int)((long)(i + 1) * n / width);
        if (b1 <= b0)
            b1 = b0 + 1;
        double v = 0;
        int m = 0;
        for (int b = b0; b < b1 && b < n; b++)
            if (row[b] == row[b]) {
                v += row[b];
                m++;
            }
        int at = mark >= b0 && mark < b1;
        uint32_t ch = m ? canvas_spark(c, top > 0 ? v / m / top : 0) : ' ';
        canvas_put(c, x + i, y, at && ch == ' ' ? '|' : ch, cv_fg(color, at ? CV_REVERSE : 0));
    }
}

int dash_restart_marks(const dash_t *d, canvas_t *c, int x, int y, int m)
{
    const dash_live *L = d->live;
    int n = 0;
    if (!L)
        return 0;
    for (int i = 0; i < m && i < L->n_hist; i++)
        if (L->hist_restart[DASH_BINS - m + i]) {
            canvas_put(c, x + i, y, '!', (cv_style){196, CV_DEFAULT, CV_BOLD});
            n++;
        }
    return n;
}

const char *dash_worker_name(const dash_t *d, int w)
{
    if (d->live)
        return w >= 0 && w < d->live->now.K ? d->live->now.names[w] : "?";
    const model_t *m = d->fit ? d->fit->model : NULL;
    return m && w >= 0 && w < m->K ? m->workers[w] : "?";
}

const char *dash_worker_label(const dash_t *d, int w, int width, char *buf, size_t n)
{
    snprintf(buf, n, "%s", dash_worker_name(d, w));
    canvas_fit_tail(buf, width);
    return buf;
}

int dash_drift_verdict(const dash_live_now *n, char *buf, size_t len)
{
    if (n->window < 1) {
        snprintf(buf, len, "drift: no signatures yet (the window restarts with each model)");
        return DRIFT_NO_TVD;
    }
    if (n->tvd != n->tvd) {
        snprintf(buf, len, "drift: no TVD (the model has no calibration shares)");
        return DRIFT_NO_TVD;
    }
    if (n->tvd_thr != n->tvd_thr) {
        snprintf(buf, len, "drift: TVD %.3f (no threshold from this eldrd)", n->tvd);
        return DRIFT_NO_THRESHOLD;
    }
    int over = n->tvd > n->tvd_thr;
    snprintf(buf, len, "drift: TVD %.3f %s threshold %.3f (99%% noise, n %lld): %s", n->tvd,
             over ? ">" : "<=", n->tvd_thr, (long long)n->window,
             over ? "DRIFT" : "within noise");
    return over ? DRIFT_OVER : DRIFT_WITHIN;
}
