/* view_tradeoff.c - view 7, "which tau and K?": the tau x K grid around
 * the current setting (tradeoff.h computes it in the background). Every
 * cell is its change against the best baseline of its own K (absolute
 * TPOT across K would compare different fleets); m cycles the metric
 * (TPOT p50, p99, tokens/s). On top a one-line verdict by advise's rule
 * and what the intervals cover; then the table, a text scatter of the
 * change against imbalance with the baseline's line, and the trail of
 * the settings tried this session, so a what-if change never erases what
 * was seen before it.
 *
 * Marks, so that a plain-text frame says it all: every ELDR cell has a
 * letter, the same in the table and the scatter; a CAPITAL letter is on
 * the front (better than its baseline, and no other such cell has both
 * a larger gain and a lower imbalance): a cell worse than its baseline
 * is never capital; '@' is the dashboard's current tau and K; '>' the
 * cursor. With eldr-cost as the dashboard's policy each K also has an
 * eldr-cost cell ("cost" in the tau column), one more setting of the
 * verdict (tradeoff.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "tradeoff.h"

#define MAX_CELLS TRADE_MAX_ROWS
#define TABLE_W 68               /* the table's columns; the scatter gets the rest */

static char cell_letter(int i, int pareto)
{
    char ch = (char)('a' + i % 26);
    return pareto ? (char)(ch - 'a' + 'A') : ch;
}

static int is_current(const dash_t *d, const grid_row *r)
{
    if (!d->cur || d->policy != r->kind || d->cur->policy != r->kind || r->K != d->cur->K)
        return 0;
    return r->kind == ROUTE_ELDR_COST || fabs(r->tau - d->cur->tau) < 1e-9;
}

/* The tau column: "0.10", or "cost" for the cost rule's cell. */
static void tau_cell(const grid_row *r, char *buf, size_t n)
{
    if (r->kind == ROUTE_ELDR_COST)
        snprintf(buf, n, "cost");
    else
        snprintf(buf, n, "%.2f", r->tau);
}

/* " +-0.041" / " \u00b10.041": a CI half-width with `prec` decimals. */
static void fmt_half(const canvas_t *c, char *buf, size_t n, const grid_stat *s, int prec)
{
    double half = (s->hi - s->lo) / 2;
    if (!isfinite(half))
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, c->unicode ? " \u00b1%.*f" : " +-%.*f", prec, half);
}

/* better / even / worse: by the interval when there is one (even: it
 * holds 0), Bonferroni-corrected over the cells of its K as the verdict
 * corrects, else by the mean. */
static const char *judge(const grid_result *g, const grid_row *r, int metric)
{
    grid_stat ch;
    tradeoff_corrected(g, r, tradeoff_change(r, metric), &ch);
    double lo = ch.lo, hi = ch.hi;
    if (!isfinite(lo) || !isfinite(hi))
        lo = hi = ch.mean;
    if (metric == TRADE_TPS) {   /* more tokens/s is better */
        double t = lo;
        lo = -hi;
        hi = -t;
    }
    return hi < 0 ? "better" : lo > 0 ? "worse" : "even";
}

static void draw_table(const dash_t *d, canvas_t *c, int x, int y, int h, const int *rows,
                       int n, const int *pareto)
{
    const grid_result *g = &d->trade.g;
    int m = d->trade_metric;
    canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, CV_DIM), "     %5s %3s  %-13s %-6s %-6s %8s %5s "
                 "%6s", "tau", "K", m == TRADE_TPS ? "tok/s change" : m == TRADE_P99
                 ? "p99 change" : "p50 change", "", "vs", m == TRADE_TPS ? "tok/s" : "ms",
                 "imbal", "U/step");
    int first = 0, avail = h - 1;
    if (avail < 1)
        return;
    if (d->trade.cursor >= avail)
        first = d->trade.cursor - avail + 1;
    for (int i = first; i < n && i - first < avail; i++) {
        const grid_row *r = &g->rows[rows[i]];
        int cur = i == d->trade.cursor, now = is_current(d, r);
        const grid_stat *ch = tradeoff_change(r, m);
        char vs[48], pm[24];
        fmt_half(c, pm, sizeof pm, ch, 1);
        snprintf(vs, sizeof vs, "%+.1f%%%s", ch->mean, pm);
        /* printf pads bytes: the UTF-8 plus-minus is two bytes, one column */
        int wide = c->unicode && pm[0];
        int attr = (cur ? CV_REVERSE : 0) | (now ? CV_BOLD : 0);
        const char *base = r->best_baseline >= 0 ? route_kind_name(g->rows[r->best_baseline].kind)
                                                 : "-";
        char tau[16];
        tau_cell(r, tau, sizeof tau);
        canvas_textf(c, x, y++, cv_fg(CV_DEFAULT, attr), "%c%c%c  %5s %3d  %-*s %-6s %-6s "
                     "%8.*f %5.2f %6.2f", cur ? '>' : ' ', cell_letter(i, pareto[i]),
                     now ? '@' : ' ', tau, r->K, 13 + wide, vs, judge(g, r, m), base,
                     m == TRADE_TPS ? 0 : 3, tradeoff_value(r, m)->mean, r->imbalance.mean,
                     r->distinct.mean);
    }
}

/* "  vs: K 2 random 7.506, K 4 random 5.570 ms", within w */
static void draw_baselines(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    const grid_result *g = &d->trade.g;
    int m = d->trade_metric;
    int cx = x + canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "  vs:");
    int last = -1, any = 0;
    for (int i = 0; i < g->n; i++) {
        int b = g->rows[i].best_baseline;
        if (b < 0 || b == last || !grid_kind_is_candidate(g->rows[i].kind))
            continue;
        last = b;
        char item[64];
        snprintf(item, sizeof item, "%s K %d %s %.*f", any ? "," : "", g->rows[b].K,
                 route_kind_name(g->rows[b].kind), m == TRADE_TPS ? 0 : 3,
                 tradeoff_value(&g->rows[b], m)->mean);
        if (cx + (int)strlen(item) > x + w)
            break;
        any = 1;
        cx += canvas_text(c, cx, y, cv_fg(CV_DEFAULT, CV_DIM), item);
    }
    const char *unit = m == TRADE_TPS ? " tok/s" : " ms";
    if (cx + (int)strlen(unit) <= x + w)
        canvas_text(c, cx, y, cv_fg(CV_DEFAULT, CV_DIM), unit);
}

static void draw_scatter(const dash_t *d, canvas_t *c, int x, int y, int w, int h,
                         const int *rows, int n, const int *pareto)
{
    const grid_result *g = &d->trade.g;
    int m = d->trade_metric;
    int pw = w - 2, ph = h - 3;
    if (pw < 8 || ph < 3 || n < 1)
        return;
    /* y: the change (better up), with 0 - the baseline - always in range */
    double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = 0;
    for (int i = 0; i < n; i++) {
        const grid_row *r = &g->rows[rows[i]];
        double gy = tradeoff_gain(r, m);
        if (!isfinite(gy) || !isfinite(r->imbalance.mean))
            continue;
        x0 = fmin(x0, r->imbalance.mean);
        x1 = fmax(x1, r->imbalance.mean);
        y0 = fmin(y0, gy);
        y1 = fmax(y1, gy);
    }
    if (!(x1 >= x0))
        return;
    canvas_box(c, x, y, pw + 2, ph + 2, cv_fg(CV_DEFAULT, CV_DIM), " gain (y) vs imbalance (x) ");
    double sx = x1 > x0 ? (pw - 1) / (x1 - x0) : 0, sy = y1 > y0 ? (ph - 1) / (y1 - y0) : 0;
    int zy = y1 > y0 ? (int)(y1 * sy + 0.5) : ph / 2;   /* the baseline's row */
    for (int i = 0; i < pw; i++)
        canvas_put(c, x + 1 + i, y + 1 + zy, '.', cv_fg(CV_DEFAULT, CV_DIM));
    canvas_text(c, x + pw - 3, y + 1 + zy, cv_fg(CV_DEFAULT, CV_DIM), "base");
    /* the cursor last, so it is never hidden under another cell */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const grid_row *r = &g->rows[rows[i]];
            double gy = tradeoff_gain(r, m);
            int cur = i == d->trade.cursor;
            if (cur != pass || !isfinite(gy) || !isfinite(r->imbalance.mean))
                continue;
            int px = x1 > x0 ? (int)((r->imbalance.mean - x0) * sx + 0.5) : pw / 2;
            int py = y1 > y0 ? (int)((y1 - gy) * sy + 0.5) : ph / 2;
            int now = is_current(d, r);
            uint32_t ch = now ? '@' : (uint32_t)cell_letter(i, pareto[i]);
            int attr = (pareto[i] ? CV_BOLD : 0) | (cur ? CV_REVERSE : 0);
            canvas_put(c, x + 1 + px, y + 1 + py, ch,
                       cv_fg(pareto[i] ? 70 : now ? 220 : CV_DEFAULT, attr));
        }
    canvas_textf(c, x, y + ph + 2, cv_fg(CV_DEFAULT, CV_DIM), " y %+.1f..%+.1f%%, x %.2f..%.2f",
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
    int n = t->first
                ? canvas_textf(c, x + 1, y, cv_plain(), "computing the tau x K grid around K "
                               "%d, first look: %lld rows, 1 seed%s", t->K0, (long long)t->rows,
                               t->progress < 0 ? ": fitting the other K" : "")
                : canvas_textf(c, x + 1, y, cv_plain(), "computing the tau x K grid around K "
                               "%d, %d seeds, in the background%s", t->K0, d->opts.seeds,
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

/* The verdict (at the fleet's K: the one of eldr advise), its baselines
 * and margins, and what the intervals cover, wrapped into w; returns the
 * lines used. */
static int draw_verdict(const dash_t *d, canvas_t *c, int x, int y, int w)
{
    const grid_result *g = &d->trade.g;
    verdict v;
    verdict_text t;
    char cov[300], base[96], line[1200];
    int ans = tradeoff_verdict(g, d->trade.K0, &v, &t);
    if (ans < 0)
        snprintf(line, sizeof line, "verdict: none: %s", t.head);
    else
        snprintf(line, sizeof line, "verdict: %s: %s", t.head, t.reason);
    int n = canvas_wrap(c, x + 1, y, w - 1, 2, cv_fg(ans == VERDICT_WIN ? 70 : CV_DEFAULT,
                                                      CV_BOLD), line);
    verdict_baselines(g, base, sizeof base);
    /* the essentials first: at 80 columns the line ends after m */
    snprintf(line, sizeof line, "rule: beat each of %s by %.1f%% p50, lose <= %.1f%% p99, <= "
             "%.1f%% tok/s; m %d (Bonferroni), every split; K %d only", base,
             VERDICT_P50_GAIN_PCT, VERDICT_P99_LOSS_PCT, VERDICT_TPS_LOSS_PCT,
             ans < 0 ? 0 : v.n_compared, d->trade.K0);
    n += canvas_wrap(c, x + 1, y + n, w - 1, 1, cv_fg(CV_DEFAULT, CV_DIM), line);
    tradeoff_covers(d, cov, sizeof cov);
    snprintf(line, sizeof line, "+-: %s; tok/s at steady state (warm-up, drain cut)", cov);
    return n + canvas_wrap(c, x + 1, y + n, w - 1, 2, cv_fg(CV_DEFAULT, CV_DIM), line);
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
    int rows[MAX_CELLS], pareto[MAX_CELLS], m = d->trade_metric;
    int n = tradeoff_eldr_rows(g, rows, MAX_CELLS);
    tradeoff_pareto(g, rows, n, m, pareto);
    char title[200];
    snprintf(title, sizeof title, "tau x K: %s change vs each K's best baseline, %s, %d seed%s "
             "(%.1f s; m: metric)", tradeoff_metric_name(m), d->arrivals, g->n_seeds,
             g->n_seeds == 1 ? "" : "s", g->seconds);
    int tl = canvas_wrap(c, x + 1, y, w - 1, 2, cv_fg(CV_DEFAULT, CV_BOLD), title);
    if (t->first) {   /* the first look's grid: on which rows, and the refine */
        int n = canvas_textf(c, x + 1, y + tl, cv_fg(CV_DEFAULT, CV_REVERSE), " FIRST LOOK: "
                             "%lld of %lld rows, 1 seed; %s ", (long long)t->rows,
                             (long long)d->eval->n, t->refine_off ? "not refined (r: the "
                             "full grid)" : "refining");
        int bw = w - n - 8 < 30 ? w - n - 8 : 30;
        if (!t->refine_off && t->refine >= 0 && bw > 4) {
            canvas_hbar(c, x + n + 2, y + tl, bw, t->refine, cv_plain());
            canvas_textf(c, x + n + 3 + bw, y + tl, cv_plain(), "%3.0f%%", 100 * t->refine);
        }
        tl++;
    }
    if (d->fit->model->K != t->K0)   /* K moved since: the grid is about the old one */
        canvas_textf(c, x + 1, y + tl, cv_fg(CV_DEFAULT, CV_REVERSE), " around K %d; r: around "
                     "K %d ", t->K0, d->fit->model->K);
    tl += d->fit->model->K != t->K0;
    if ((d->policy == ROUTE_ELDR_COST) != t->cost)   /* p moved to or from eldr-cost */
        canvas_textf(c, x + 1, y + tl++, cv_fg(CV_DEFAULT, CV_REVERSE), t->cost
                     ? " eldr-cost cells: its policy is no longer shown; r: without them "
                     : " no eldr-cost cells; r: add them ");
    y += tl;
    h -= tl;
    int vl = draw_verdict(d, c, x, y, w);
    y += vl;
    h -= vl;
    int side = w >= TABLE_W + 30;
    int trows = n + 1;
    if (trows > h - 4)
        trows = h - 4;
    draw_table(d, c, x, y, trows, rows, n, pareto);
    int yb = y + trows, tw = side ? TABLE_W - 1 : w;
    draw_baselines(d, c, x, yb, tw);
    canvas_text(c, x, yb + 1, cv_fg(CV_DEFAULT, CV_DIM), tw >= 66
                ? "  CAPITAL: front (gains, and no cell gains more at less imbal); @ now"
                : "  CAPITAL: front; @ current");
    int used = yb + 2 - y;
    if (side) {
        /* beside the table: its rows, the two lines under it and a label */
        int sh = used + 1 < 8 ? 8 : used + 1;
        if (sh > h - 1)
            sh = h - 1;
        draw_scatter(d, c, x + TABLE_W + 1, y, w - TABLE_W - 1, sh - 1, rows, n, pareto);
        used = sh > used ? sh : used;
        draw_trail(d, c, x, y + used, h - used);
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
