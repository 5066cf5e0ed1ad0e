/* view_common.c - the frame around every view: the tab bar, the what-if
 * header with the headline numbers, the footer (keys, or the progress of
 * a running job) and the help overlay; plus the colours the views share. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"

static const dash_view_fn VIEWS[VIEW_N] = {view_overview, view_balance, view_heatmap,
                                           view_queues,   view_scatter, view_rho};

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

const char *dash_worker_name(const dash_t *d, int w)
{
    const model_t *m = d->fit ? d->fit->model : NULL;
    return m && w >= 0 && w < m->K ? m->workers[w] : "?";
}

static void draw_tabs(const dash_t *d, canvas_t *c)
{
    cv_style bar = {CV_DEFAULT, CV_DEFAULT, CV_REVERSE};
    int narrow = c->w < 100;
    canvas_fill(c, 0, 0, c->w, 1, ' ', bar);
    int x = narrow ? canvas_text(c, 0, 0, (cv_style){CV_DEFAULT, CV_DEFAULT, CV_REVERSE | CV_BOLD},
                                 " eldr ")
                   : canvas_textf(c, 0, 0, (cv_style){CV_DEFAULT, CV_DEFAULT, CV_REVERSE | CV_BOLD},
                                  " eldr dash %s ", d->trace_name);
    for (int v = 0; v < VIEW_N; v++) {
        char tab[32];
        snprintf(tab, sizeof tab, v == d->view ? "[%d %s]" : " %d %s ", v + 1,
                 dash_view_name(v));
        cv_style st = v == d->view ? (cv_style){CV_DEFAULT, CV_DEFAULT, CV_BOLD} : bar;
        x += canvas_text(c, x, 0, st, tab);
    }
    if (narrow && x + 2 + (int)strlen(d->trace_name) < c->w)
        canvas_text(c, c->w - (int)strlen(d->trace_name) - 1, 0, bar, d->trace_name);
}

/* "eldr tau 0.10 K 4 | TPOT p50 2.71ms -3.1% p99 ... | U/step 17.2 -20% vs jsq" */
static void draw_whatif(const dash_t *d, canvas_t *c, int y)
{
    const dash_sim *s = d->cur, *b = dash_best_base(d);
    int K = d->fit ? d->fit->model->K : 0;
    char ch50[24], ch99[24], chu[24];
    int x = canvas_textf(c, 0, y, cv_fg(CV_DEFAULT, CV_BOLD), "%s", route_kind_name(d->policy));
    if (d->policy == ROUTE_ELDR)
        x += canvas_textf(c, x, y, cv_plain(), " tau %.2f", d->tau);
    x += canvas_textf(c, x, y, cv_plain(), " K %d", K);
    if (d->busy)
        x += canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "...");
    if (!s) {
        canvas_text(c, x, y, cv_plain(), " | no simulation yet");
        return;
    }
    dash_fmt_change(ch50, sizeof ch50, s->res.tpot_p50_ms, b ? b->res.tpot_p50_ms : 0);
    dash_fmt_change(ch99, sizeof ch99, s->res.tpot_p99_ms, b ? b->res.tpot_p99_ms : 0);
    dash_fmt_change(chu, sizeof chu, s->res.distinct_per_step,
                    b ? b->res.distinct_per_step : 0);
    x += canvas_textf(c, x, y, cv_plain(), " | TPOT p50 %.2fms %s p99 %.2fms %s | "
                      "U/step %.1f %s", s->res.tpot_p50_ms, ch50, s->res.tpot_p99_ms, ch99,
                      s->res.distinct_per_step, chu);
    if (b)
        canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), c->w - x >= 10 ? " vs %s" : "",
                     route_kind_name(b->policy));
}

static void draw_footer(const dash_t *d, canvas_t *c)
{
    int y = c->h - 1;
    cv_style bar = {CV_DEFAULT, CV_DEFAULT, CV_REVERSE};
    canvas_fill(c, 0, y, c->w, 1, ' ', bar);
    if (d->busy || d->status[0]) {
        int x = canvas_textf(c, 0, y, bar, " %s", d->status);
        if (d->busy && d->progress >= 0) {
            int bw = c->w - x - 16;
            if (bw > 40)
                bw = 40;
            if (bw > 4) {
                canvas_hbar(c, x + 1, y, bw, d->progress, bar);
                canvas_textf(c, x + bw + 2, y, bar, "%3.0f%%", 100 * d->progress);
            }
        }
        if (d->busy)
            canvas_text(c, c->w - 12, y, bar, " Esc cancel ");
        return;
    }
    canvas_text(c, 0, y, bar, c->w >= 90 ? " 1-6/Tab view  +/- tau  [/] K  p policy  "
                "arrows worker  Enter zoom  , . time  ? help  q quit"
                : " 1-6 view +- tau [] K p policy arrows worker Enter zoom ? help q quit");
}

static void draw_help(canvas_t *c)
{
    static const char *lines[] = {
        "1..6, Tab, S-Tab   switch view (overview balance heatmap queues scatter rho)",
        "+ / -              tau up / down by 0.05 (re-simulates)",
        "[ / ]              K down / up (refits with the model's recipe)",
        "p                  cycle the policy: eldr random rr jsq p2c",
        "Up/Down, Left/Right  select a worker (balance, heatmap, queues)",
        "Enter              zoom on the selected worker / back",
        ", / .              move the time cursor ('now') in the simulation",
        "Esc                cancel a running refit",
        "?                  this help        q  quit",
        "",
        "Numbers compare the policy with the best load-balancing baseline",
        "(lowest TPOT p50 of random, rr, jsq, p2c) on the held-out rows.",
    };
    int n = (int)(sizeof lines / sizeof lines[0]);
    int w = 0;
    for (int i = 0; i < n; i++)
        if ((int)strlen(lines[i]) > w)
            w = (int)strlen(lines[i]);
    w += 4;
    int h = n + 2;
    if (w > c->w)
        w = c->w;
    int x = (c->w - w) / 2, y = (c->h - h) / 2;
    if (y < 0)
        y = 0;
    canvas_fill(c, x, y, w, h, ' ', cv_plain());
    canvas_box(c, x, y, w, h, cv_fg(CV_DEFAULT, CV_BOLD), "keys");
    for (int i = 0; i < n; i++)
        canvas_text(c, x + 2, y + 1 + i, cv_plain(), lines[i]);
}

void dash_render(const dash_t *d, canvas_t *c)
{
    canvas_clear(c);
    draw_tabs(d, c);
    if (c->h >= 3)
        draw_whatif(d, c, 1);
    if (c->h >= 5 && d->view >= 0 && d->view < VIEW_N)
        VIEWS[d->view](d, c, 0, 2, c->w, c->h - 3);
    if (c->h >= 2)
        draw_footer(d, c);
    if (d->help)
        draw_help(c);
}
