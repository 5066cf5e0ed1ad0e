/* view_tradeoff.c - view 7, "which tau and K?": the tau x K grid around
 * the current setting (tradeoff.h computes it in the background) as a
 * table, a text scatter of TPOT p50 against imbalance with the Pareto
 * front marked, and the trail of the settings tried this session, so a
 * what-if change never erases what was seen before it.
 *
 * Marks, so that a plain-text frame says it all: every ELDR cell has a
 * letter, the same in the table and the scatter; a CAPITAL letter is on
 * the Pareto front (no other cell has both lower TPOT and lower
 * imbalance); '@' is the dashboard's current tau and K; '>' the cursor. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "tradeoff.h"

#define MAX_CELLS (GRID_MAX_LIST * 3)
#define TABLE_W 64               /* the table's columns; the scatter gets the rest */

static char cell_letter(int i, int pareto)
{
    char ch = (char)('a' + i % 26);
    return pareto ? (char)(ch - 'a' + 'A') : ch;
}

static int is_current(const dash_t *d, const grid_row *r)
{
    return d->cur && d->policy == ROUTE_ELDR && d->cur->policy == ROUTE_ELDR &&
           r->K == d->cur->K && fabs(r->tau - d->cur->tau) < 1e-9;
}

/* " +-0.041" / " \u00b10.041": a CI half-width with `prec` decimals. */
static void fmt_half(const canvas_t *c, char *buf, size_t n, const grid_stat *s, int prec,
                     const char *unit)
{
    double half = (s->hi - s->lo) / 2;
    if (!isfinite(half))
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, c->unicode ? " \u00b1%.*f%s" : " +-%.*f%s", prec, half, unit);
}

static void draw_table(const dash_t *d, canvas_t *c, int x, int y, int h, const int *rows,
                       int n, const int *pareto)
{
    const grid_result *g = &d->trade.g;
    canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_DIM), "     %5s %3s  %-16s %-15s %5s %7s",
                 "tau", "K", "TPOT p50 ms", "vs best", "imbal", "U/step");
    int first = 0, avail = h - 1;
    if (avail < 1)
        return;
    if (d->trade.cursor >= avail)
        first = d->trade.cursor - avail + 1;
    for (int i = first; i < n && i - first < avail; i++) {
        const grid_row *r = &g->rows[rows[i]];
        int cur = i == d->trade.cursor, now = is_current(d, r);
        char tp[64], vs[64], pm[24];
        fmt_half(c, pm, sizeof pm, &r->tpot_p50, 3, "");
        snprintf(tp, sizeof tp, "%.3f%s", r->tpot_p50.mean, pm);
        fmt_half(c, pm, sizeof pm, &r->vs_best_pct, 1, "");
        snprintf(vs, sizeof vs, "%+.1f%%%s", r->vs_best_pct.mean, pm);
        /* printf pads bytes: the UTF-8 plus-minus is two bytes, one column */
        int wide = c->unicode && pm[0];
        int attr = (cur ? CV_REVERSE : 0) | (now ? CV_BOLD : 0);
        canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, attr), "%c%c%c  %5.2f %3d  %-*s %-*s %5.2f "
                     "%7.2f", cur ? '>' : ' ', cell_letter(i, pareto[i]), now ? '@' : ' ',
                     r->tau, r->K, 16 + wide, tp, 15 + wide, vs, r->imbalance.mean,
                     r->distinct.mean);
    }
}

/* "  best baseline: K 2 jsq 3.590, K 4 rr 3.553 ms", within w columns */
static void draw_baselines(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    const grid_result *g = &d->trade.g;
    int cx = x + canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "  best baseline:");
    int last = -1;
    for (int i = 0; i < g->n; i++) {
        int b = g->rows[i].best_baseline;
        if (b < 0 || b == last || g->rows[i].kind != ROUTE_ELDR)
            continue;
        last = b;
        char item[64];
        snprintf(item, sizeof item, "%s K %d %s %.3f", last >= 0 && cx > x + 16 ? "," : "",
                 g->rows[b].K, route_kind_name(g->rows[b].kind), g->rows[b].tpot_p50.mean);
        if (cx + (int)strlen(item) > x + w)
            break;
        cx += canvas_text(c, cx, y, cv_fg(CV_DEFAULT, CV_DIM), item);
    }
    if (cx + 3 <= x + w)
        canvas_text(c, cx, y, cv_fg(CV_DEFAULT, CV_DIM), " ms");
}

static void draw_scatter(const dash_t *d, canvas_t *c, int x, int y, int w, int h,
                         const int *rows, int n, const int *pareto)
{
    const grid_result *g = &d->trade.g;
    int pw = w - 2, ph = h - 3;
    if (pw < 8 || ph < 3 || n < 1)
        return;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < n; i++) {
        const grid_row *r = &g->rows[rows[i]];
        if (!isfinite(r->tpot_p50.mean) || !isfinite(r->imbalance.mean))
            continue;
        x0 = fmin(x0, r->imbalance.mean);
        x1 = fmax(x1, r->imbalance.mean);
        y0 = fmin(y0, r->tpot_p50.mean);
        y1 = fmax(y1, r->tpot_p50.mean);
    }
    if (!(x1 >= x0) || !(y1 >= y0))
        return;
    canvas_box(c, x, y, pw + 2, ph + 2, cv_fg(CV_DEFAULT, CV_DIM),
               " TPOT p50 (y) vs imbalance (x) ");
    double sx = x1 > x0 ? (pw - 1) / (x1 - x0) : 0, sy = y1 > y0 ? (ph - 1) / (y1 - y0) : 0;
    /* the cursor last, so it is never hidden under another cell */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const grid_row *r = &g->rows[rows[i]];
            int cur = i == d->trade.cursor;
            if (cur != pass || !isfinite(r->tpot_p50.mean) || !isfinite(r->imbalance.mean))
                continue;
            int px = x1 > x0 ? (int)((r->imbalance.mean - x0) * sx + 0.5) : pw / 2;
            int py = y1 > y0 ? (int)((y1 - r->tpot_p50.mean) * sy + 0.5) : ph / 2;
            int now = is_current(d, r);
            uint32_t ch = now ? '@' : (uint32_t)cell_letter(i, pareto[i]);
            int attr = (pareto[i] ? CV_BOLD : 0) | (cur ? CV_REVERSE : 0);
            canvas_put(c, x + 1 + px, y + 1 + py, ch,
                       cv_fg(pareto[i] ? 70 : now ? 220 : CV_DEFAULT, attr));
        }
    canvas_textf(c, x, y + ph + 2, cv_fg(CV_DEFAULT, CV_DIM), " y %.3f..%.3f ms, x %.2f..%.2f",
                 y0, y1, x0, x1);
}

/* The settings tried this session, newest last (the oldest scroll off). */
static void draw_trail(const dash_t *d, canvas_t *c, int x, int y, int h)
{
    if (h < 2)
        return;
    canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_BOLD), " Trail: %d setting%s tried this "
                 "session (Enter, +/-, [/], p add to it)", d->n_trail, d->n_trail == 1 ? "" : "s");
    int first = d->n_trail > h - 1 ? d->n_trail - (h - 1) : 0;
    for (int i = first; i < d->n_trail; i++) {
        const dash_trail *t = &d->trail[i];
        char name[32], pm[24] = "";
        if (t->policy == ROUTE_ELDR)
            snprintf(name, sizeof name, "eldr tau %.2f", t->tau);
        else
            snprintf(name, sizeof name, "%s", route_kind_name(t->policy));
        if (isfinite(t->vs_half))
            snprintf(pm, sizeof pm, c->unicode ? " \u00b1%.1f" : " +-%.1f", t->vs_half);
        char vs[48];
        if (isfinite(t->vs_best))
            snprintf(vs, sizeof vs, "%+.1f%%%s vs best", t->vs_best, pm);
        else
            snprintf(vs, sizeof vs, "n/a");
        canvas_textf(c, x, y++, i == d->n_trail - 1 ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain(),
                     "  %2d  %-14s K %-3d TPOT p50 %.3f ms  %s", i + 1, name, t->K, t->tpot_p50,
                     vs);
    }
}

static void draw_pending(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    const dash_trade *t = &d->trade;
    if (t->state == DASH_TRADE_FAILED) {
        canvas_textf(c, x + 1, y, cv_plain(), "trade-off grid: %s (r: compute again)", t->err);
        return;
    }
    if (t->state == DASH_TRADE_NONE) {
        canvas_text(c, x + 1, y, cv_plain(), "the tau x K grid is computed when this view "
                    "opens (r: compute now)");
        return;
    }
    int n = canvas_textf(c, x + 1, y, cv_plain(), "computing the tau x K grid around K %d, %d "
                         "seeds, in the background%s", t->K0, d->opts.seeds,
                         t->progress < 0 ? ": fitting the other K" : "");
    int bw = w - n - 10;
    if (bw > 30)
        bw = 30;
    if (t->progress >= 0 && bw > 4) {
        canvas_hbar(c, x + n + 2, y, bw, t->progress, cv_plain());
        canvas_textf(c, x + n + 3 + bw, y, cv_plain(), "%3.0f%%", 100 * t->progress);
    }
    canvas_text(c, x + 1, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "the other views stay live; the "
                "table appears here when the grid is done (Esc cancels)");
}

void view_tradeoff(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "the trade-off grid simulates a trace: "
                    "eldr dash TRACE.h5 (live mode has none)");
        return;
    }
    if (!d->fit) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "loading...");
        return;
    }
    const dash_trade *t = &d->trade;
    if (t->state != DASH_TRADE_DONE) {
        draw_pending(d, c, x, y, w);
        draw_trail(d, c, x, y + 3, h - 3);
        return;
    }
    const grid_result *g = &t->g;
    int rows[MAX_CELLS], pareto[MAX_CELLS];
    int n = tradeoff_eldr_rows(g, rows, MAX_CELLS);
    tradeoff_pareto(g, rows, n, pareto);
    int tx = x + 1 + canvas_textf(c, x + 1, y, cv_fg(CV_DEFAULT, CV_BOLD), "tau x K at %s, %d "
                                  "seed%s; vs the best baseline of each K, +- 95%% CI (%.1f s)",
                                  d->arrivals, g->n_seeds, g->n_seeds == 1 ? "" : "s",
                                  g->seconds);
    if (d->fit->model->K != t->K0)   /* K moved since: the grid is about the old one */
        canvas_textf(c, tx, y, cv_fg(CV_DEFAULT, CV_REVERSE), " around K %d; r: around K %d ",
                     t->K0, d->fit->model->K);
    int side = w >= TABLE_W + 30;
    int trows = n + 1;
    if (trows > h - 4)
        trows = h - 4;
    draw_table(d, c, x, y + 1, trows, rows, n, pareto);
    int yb = y + 1 + trows, tw = side ? TABLE_W - 1 : w;
    draw_baselines(d, c, x, yb, tw);
    canvas_text(c, x, yb + 1, cv_fg(CV_DEFAULT, CV_DIM), tw >= 62
                ? "  CAPITAL: on the Pareto front; @ current; Enter applies >"
                : "  CAPITAL: Pareto; @ current");
    int used = yb + 2 - y;
    if (side) {
        /* beside the table: its rows, the two lines under it and a label */
        int sh = used + 1 < 8 ? 8 : used + 1;
        if (sh > h - 1)
            sh = h - 1;
        draw_scatter(d, c, x + TABLE_W + 1, y + 1, w - TABLE_W - 1, sh - 1, rows, n, pareto);
        used = sh > used ? sh : used;
        draw_trail(d, c, x, y + used + 1, h - used - 1);
        return;
    }
    /* narrow: the scatter under the table when there is room, then the trail */
    int rest = h - used;
    if (rest >= 12) {
        draw_scatter(d, c, x + 1, y + used, w - 2, rest / 2, rows, n, pareto);
        used += rest / 2 + 1;
    }
    draw_trail(d, c, x, y + used, h - used);
}
