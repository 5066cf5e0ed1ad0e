/* view_queues.c - per-worker queues: a bar of the in-flight requests at
 * the time cursor, split into decoding (the batch) and waiting, and a
 * sparkline of the worker's in-flight history over the whole simulation
 * with the cursor marked. Enter on a worker draws its history as a chart. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"

/* Mean of bins [b0, b1) of a history row. */
static double bin_mean(const float *row, int b0, int b1)
{
    double s = 0;
    for (int b = b0; b < b1; b++)
        s += row[b];
    return b1 > b0 ? s / (b1 - b0) : 0;
}

static double row_max(const float *row, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = row[i] > m ? row[i] : m;
    return m;
}

/* Sparkline of row (nbins) over width columns, scaled to top. */
static void sparkline(canvas_t *c, int x, int y, int width, const float *row, int nbins,
                      double top, int cursor_bin, int color)
{
    for (int i = 0; i < width; i++) {
        int b0 = (int)((long)i * nbins / width), b1 = (int)((long)(i + 1) * nbins / width);
        if (b1 <= b0)
            b1 = b0 + 1;
        double v = bin_mean(row, b0, b1);
        int at = cursor_bin >= b0 && cursor_bin < b1;
        cv_style st = cv_fg(color, at ? CV_REVERSE : 0);
        uint32_t ch = canvas_spark(c, top > 0 ? v / top : 0);
        canvas_put(c, x + i, y, at && ch == ' ' ? '|' : ch, st);
    }
}

/* The selected worker's in-flight history as a chart of h rows. */
static void chart(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_sim *s = d->cur;
    const float *row = s->inflight + (size_t)d->worker * s->nbins;
    double top = row_max(row, s->nbins);
    int cb = dash_cursor_bin(d, s);
    canvas_box(c, x, y, w, h, cv_plain(), dash_worker_name(d, d->worker));
    int pw = w - 9, ph = h - 3;
    if (pw < 2 || ph < 1)
        return;
    canvas_textf(c, x + 1, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "%6.1f", top);
    canvas_textf(c, x + 1, y + ph, cv_fg(CV_DEFAULT, CV_DIM), "%6.1f", 0.0);
    for (int i = 0; i < pw; i++) {
        int b0 = (int)((long)i * s->nbins / pw), b1 = (int)((long)(i + 1) * s->nbins / pw);
        if (b1 <= b0)
            b1 = b0 + 1;
        double v = top > 0 ? bin_mean(row, b0, b1) / top * ph : 0;
        int at = cb >= b0 && cb < b1;
        for (int r = 0; r < ph; r++) {
            double fill = v - r;   /* rows from the bottom */
            uint32_t ch = fill >= 1 ? (c->unicode ? 0x2588 : '#')
                        : fill > 0 ? canvas_spark(c, fill) : (at ? '|' : ' ');
            canvas_put(c, x + 8 + i, y + ph - r, ch, cv_fg(dash_cluster_color(d->worker), 0));
        }
    }
    canvas_textf(c, x + 8, y + h - 2, cv_fg(CV_DEFAULT, CV_DIM), "0 s%*s%.1f s", pw - 10, "",
                 s->t_end);
}

void view_queues(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_sim *s = d->cur;
    if (!s || !s->inflight || !d->fit) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "loading...");
        return;
    }
    int K = s->K, cb = dash_cursor_bin(d, s);
    double top = 0;
    for (int k = 0; k < K; k++) {
        double m = row_max(s->inflight + (size_t)k * s->nbins, s->nbins);
        top = m > top ? m : top;
    }
    int bw = w >= 120 ? 30 : 16;
    canvas_textf(c, x + 1, y, cv_fg(CV_DEFAULT, CV_BOLD), "%-9s %-*s %15s  in-flight "
                 "history (max %.0f)", "worker", bw, "now: run|wait", "now run|wait", top);
    int chart_h = d->zoom ? (h - 2) / 2 : 0;
    int rows = h - 2 - chart_h;
    int first = d->worker >= rows ? d->worker - rows + 1 : 0;
    int sx = x + 1 + 10 + bw + 1 + 16 + 1, sw = x + w - sx - 1;
    for (int k = first, r = 0; k < K && r < rows; k++, r++) {
        int yy = y + 1 + r;
        double inf = s->inflight[(size_t)k * s->nbins + cb];
        double run = s->running[(size_t)k * s->nbins + cb];
        if (run > inf)
            run = inf;
        double wait = inf - run;
        cv_style st = k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain();
        canvas_textf(c, x + 1, yy, st, "%c%-8.8s", k == d->worker ? '>' : ' ',
                     dash_worker_name(d, k));
        double scale = top > 0 ? top : 1;
        canvas_hbar(c, x + 11, yy, bw, run / scale, cv_fg(dash_cluster_color(k), 0));
        int wx = x + 11 + (int)(run / scale * bw + 0.5);
        int ww = (int)(wait / scale * bw + 0.5);
        for (int i = 0; i < ww && wx + i < x + 11 + bw; i++)
            canvas_put(c, wx + i, yy, c->unicode ? 0x2591 : '.', cv_fg(dash_cluster_color(k), 0));
        canvas_textf(c, x + 12 + bw, yy, st, "%5.1f %4.1f|%-4.1f", inf, run, wait);
        if (sw > 4)
            sparkline(c, sx, yy, sw, s->inflight + (size_t)k * s->nbins, s->nbins, top, cb,
                      dash_cluster_color(k));
    }
    int shown = K - first < rows ? K - first : rows;
    canvas_textf(c, x + 1, y + 1 + shown, cv_fg(CV_DEFAULT, CV_DIM),
                "bar: decoding then waiting at t = %.2f of %.2f s (, . move the cursor)",
                 s->t_end * d->cursor, s->t_end);
    if (d->zoom && chart_h >= 4)
        chart(d, c, x, y + 2 + shown, w, chart_h);
}
