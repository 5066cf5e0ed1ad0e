/* view_queues.c - per-worker queues: a bar of the in-flight requests at
 * the time cursor, split into decoding (the batch) and waiting, and a
 * sparkline of the worker's in-flight history over the whole simulation
 * with the cursor marked. Enter on a worker draws its history as a chart.
 * Live: the in-flight count of the last poll, and its history over the
 * successive polls. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"

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

/* The selected worker's in-flight history (n values spanning span_s
 * seconds, mark: the cursor's, -1 none) as a chart of h rows. */
static void chart(const dash_t *d, canvas_t *c, int x, int y, int w, int h, const float *row,
                  int n, int cb, double span_s)
{
    if (n < 1)
        return;
    double top = row_max(row, n);
    canvas_box(c, x, y, w, h, cv_plain(), dash_worker_name(d, d->worker));
    int pw = w - 9, ph = h - 3;
    if (pw < 2 || ph < 1)
        return;
    canvas_textf(c, x + 1, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "%6.1f", top);
    canvas_textf(c, x + 1, y + ph, cv_fg(CV_DEFAULT, CV_DIM), "%6.1f", 0.0);
    for (int i = 0; i < pw; i++) {
        int b0 = (int)((long)i * n / pw), b1 = (int)((long)(i + 1) * n / pw);
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
    if (d->live)
        canvas_textf(c, x + 8, y + h - 2, cv_fg(CV_DEFAULT, CV_DIM), "-%.1f s%*snow", span_s,
                     pw - 12, "");
    else
        canvas_textf(c, x + 8, y + h - 2, cv_fg(CV_DEFAULT, CV_DIM), "0 s%*s%.1f s", pw - 10,
                     "", span_s);
}

/* Live: the in-flight count of the last poll and its history over the
 * polls so far (one column per poll, newest at the right). */
static void queues_live(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_live *L = d->live;
    int K = L->now.K, n = L->n_hist;
    double top = 1;
    for (int k = 0; k < K; k++) {
        double m = row_max(L->hist[k] + DASH_BINS - n, n);
        top = m > top ? m : top;
    }
    int bw = w >= 120 ? 30 : 16;
    canvas_textf(c, x + 1, y, cv_fg(CV_DEFAULT, CV_BOLD), "%-9s %-*s %9s  in-flight history, "
                 "%d polls (max %.0f)", "worker", bw, "in flight now", "now|max", n, top);
    int chart_h = d->zoom ? (h - 2) / 2 : 0;
    int rows = h - 2 - chart_h;
    int first = d->worker >= rows ? d->worker - rows + 1 : 0;
    int sx = x + 1 + 10 + bw + 1 + 10 + 1, sw = x + w - sx - 1, marks = 0, ejected = 0;
    for (int k = first, r = 0; k < K && r < rows; k++, r++) {
        int yy = y + 1 + r;
        const float *row = L->hist[k] + DASH_BINS - n;
        cv_style st = k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain();
        char nb[DASH_NAME_MAX];
        canvas_textf(c, x + 1, yy, st, "%c%-8s", k == d->worker ? '>' : ' ',
                     dash_worker_label(d, k, 8, nb, sizeof nb));
        canvas_hbar(c, x + 11, yy, bw, L->now.inflight[k] / top, cv_fg(dash_cluster_color(k), 0));
        canvas_textf(c, x + 12 + bw, yy, st, "%4lld|%-4.0f", (long long)L->now.inflight[k],
                     row_max(row, n));
        if (L->now.ejected[k]) {   /* over the bar: a worker that takes nothing now */
            char tag[40];
            snprintf(tag, sizeof tag, " EJECTED %.0fs ", L->now.ejected_for[k]);
            canvas_text(c, x + 11, yy, (cv_style){196, CV_DEFAULT, CV_BOLD | CV_REVERSE}, tag);
            ejected++;
        }
        if (sw > 4) {
            int m = n < sw ? n : sw;   /* the newest m polls, right-aligned */
            dash_sparkline(c, sx + sw - m, yy, m, row + n - m, m, top, -1, dash_cluster_color(k));
            marks += dash_restart_marks(d, c, sx + sw - m, yy, m);
        }
    }
    int shown = K - first < rows ? K - first : rows;
    int tx = x + 1;
    if (marks)   /* first: the note must not be cut off */
        tx += canvas_text(c, tx, y + 1 + shown, (cv_style){196, CV_DEFAULT, CV_BOLD},
                          "! daemon restart; ");
    if (ejected)
        tx += canvas_textf(c, tx, y + 1 + shown, (cv_style){196, CV_DEFAULT, CV_BOLD},
                           "%d ejected (failing: no traffic); ", ejected);
    canvas_textf(c, tx, y + 1 + shown, cv_fg(CV_DEFAULT, CV_DIM), "%s; history: one column "
                 "per poll, every %.1f s, newest at the right", L->attached ? "live"
                 : "saved snapshot (one poll)", L->interval_s);
    if (d->zoom && chart_h >= 4)
        chart(d, c, x, y + 2 + shown, w, chart_h, L->hist[d->worker] + DASH_BINS - n, n, -1,
              n * L->interval_s);
}

void view_queues(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        queues_live(d, c, x, y, w, h);
        return;
    }
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
        char nb[DASH_NAME_MAX];
        canvas_textf(c, x + 1, yy, st, "%c%-8s", k == d->worker ? '>' : ' ',
                     dash_worker_label(d, k, 8, nb, sizeof nb));
        double scale = top > 0 ? top : 1;
        canvas_hbar(c, x + 11, yy, bw, run / scale, cv_fg(dash_cluster_color(k), 0));
        int wx = x + 11 + (int)(run / scale * bw + 0.5);
        int ww = (int)(wait / scale * bw + 0.5);
        for (int i = 0; i < ww && wx + i < x + 11 + bw; i++)
            canvas_put(c, wx + i, yy, c->unicode ? 0x2591 : '.', cv_fg(dash_cluster_color(k), 0));
        canvas_textf(c, x + 12 + bw, yy, st, "%5.1f %4.1f|%-4.1f", inf, run, wait);
        if (sw > 4)
            dash_sparkline(c, sx, yy, sw, s->inflight + (size_t)k * s->nbins, s->nbins, top,
                           cb, dash_cluster_color(k));
    }
    int shown = K - first < rows ? K - first : rows;
    canvas_textf(c, x + 1, y + 1 + shown, cv_fg(CV_DEFAULT, CV_DIM),
                "bar: decoding then waiting at t = %.2f of %.2f s (, . move the cursor)",
                 s->t_end * d->cursor, s->t_end);
    if (d->zoom && chart_h >= 4)
        chart(d, c, x, y + 2 + shown, w, chart_h, s->inflight + (size_t)d->worker * s->nbins,
              s->nbins, cb, s->t_end);
}
