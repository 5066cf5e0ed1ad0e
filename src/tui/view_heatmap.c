/* view_heatmap.c - expert reuse. Left/top: for the selected worker, layers
 * x experts coloured by the worker's activation share against the global
 * share (log2 of the ratio, from 1/8x to 8x): where a worker's experts
 * concentrate. Right/bottom: workers x layers, the mean number of distinct
 * experts a step loads (fewer = more reuse). Both have a legend; colours
 * on a 256-colour terminal, the ASCII ramp " .:-=+*#%@" otherwise. Big
 * geometries are shown in groups of layers/experts (summed heat).
 * Live (no activations from a router): the selected worker's centroid
 * weight against the mean of all centroids, over the layers the model
 * uses: the experts its cluster is made of. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"

#define RATIO_SPAN 3.0   /* log2: the scale runs from 1/8x to 8x */

/* One heat cell of cw columns for a level in [0, 1] (NaN: no data). On a
 * 256-colour terminal the level is the background, and the ramp glyph is
 * drawn over it too (in black or white, whichever reads on that colour):
 * a plain-text capture of the terminal (tmux capture-pane, a pasted
 * screen) then still shows the map instead of blanks. */
static void heat_cell(canvas_t *c, int x, int y, int cw, double level)
{
    int valid = level == level;
    for (int i = 0; i < cw; i++) {
        if (c->colors >= 256 && valid && level > 0)
            canvas_put(c, x + i, y, canvas_ramp(level),
                       (cv_style){(int16_t)(level > 0.3 && level < 0.75 ? 16 : 231),
                                  (int16_t)dash_heat_color(c, level), 0});
        else if (c->colors >= 8 && valid)
            canvas_put(c, x + i, y, canvas_ramp(level), cv_fg(dash_heat_color(c, level), 0));
        else
            canvas_put(c, x + i, y, valid ? canvas_ramp(level) : ' ', cv_plain());
    }
}

static void legend(canvas_t *c, int x, int y, const char *lo, const char *hi, const char *tail)
{
    int n = canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "%s ", lo);
    for (int i = 0; i < 10; i++)
        heat_cell(c, x + n + i, y, 1, i == 0 ? 0.001 : i / 9.0);
    canvas_textf(c, x + n + 11, y, cv_fg(CV_DEFAULT, CV_DIM), "%s%s", hi, tail);
}

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

/* 1 when a layer of [l0, l1) is in the model's layer mask S. */
static int in_mask(const model_t *m, int l0, int l1)
{
    for (int i = 0; i < m->recipe.n_layers; i++)
        if (m->recipe.layers[i] >= l0 && m->recipe.layers[i] < l1)
            return 1;
    return 0;
}

/* "L5" or "L4-5": the range of one group of rows or columns. */
static void range_text(char *buf, size_t n, char p, int a, int b)
{
    if (b - a > 1)
        snprintf(buf, n, "%c%d-%d", p, a, b - 1);
    else
        snprintf(buf, n, "%c%d", p, a);
}

/* Activations of worker wk (all workers: wk < 0) over layers [l0, l1)
 * and experts [e0, e1). */
static double heat_sum(const dash_sim *s, int wk, int l0, int l1, int e0, int e1)
{
    double v = 0;
    for (int k = wk < 0 ? 0 : wk; k < (wk < 0 ? s->K : wk + 1); k++)
        for (int l = l0; l < l1; l++)
            for (int e = e0; e < e1 && e < s->E; e++)
                v += (double)s->res.heat[((size_t)k * s->L + l) * s->E + e];
    return v;
}

/* The cell under the cursor, in words: where, the ratio and the two
 * shares it comes from, the counts behind them and the sample size. */
static void readout(const dash_t *d, canvas_t *c, int x, int y, int gl, int ge)
{
    const dash_sim *s = d->cur;
    int wk = d->worker, L = s->L, E = s->E;
    int l0 = d->hl / gl * gl, e0 = d->he / ge * ge;
    int l1 = l0 + gl > L ? L : l0 + gl, e1 = e0 + ge > E ? E : e0 + ge;
    char lr[32], er[32];
    range_text(lr, sizeof lr, 'L', l0, l1);
    range_text(er, sizeof er, 'E', e0, e1);
    double wv = heat_sum(s, wk, l0, l1, e0, e1), gv = heat_sum(s, -1, l0, l1, e0, e1);
    double ws = heat_sum(s, wk, l0, l1, 0, E), gs = heat_sum(s, -1, l0, l1, 0, E);
    cv_style st = cv_fg(CV_DEFAULT, CV_BOLD);
    int n = canvas_textf(c, x, y, st, "cursor %s %s%s: ", lr, er,
                         in_mask(d->fit->model, l0, l1) ? " (in signature)" : "");
    if (gv > 0 && ws > 0 && gs > 0)
        canvas_put_fitf(c, x + n, y, c->w - x - n, st,
                        "%.2fx: %s %.2f%% vs all %.2f%% of %s's activations",
                     (wv / ws) / (gv / gs), dash_worker_name(d, wk), 100 * wv / ws,
                     100 * gv / gs, lr);
    else
        canvas_text(c, x + n, y, st, "no activations");
    canvas_put_fitf(c, x, y + 1, c->w - x, cv_plain(), "  %.0f activations here; %s served %lld/%lld "
                 "requests", wv, dash_worker_name(d, wk), (long long)s->res.served[wk],
                 (long long)s->res.n);
}

/* Matrix A for worker wk in (x, y, w, h). */
static void worker_matrix(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_sim *s = d->cur;
    const model_t *m = d->fit->model;
    int L = s->L, E = s->E, K = s->K, wk = d->worker;
    int rows = h - 5, cols = w - 6;   /* title, column header, legend, readout 2 */
    x = x < 1 ? 1 : x;                /* the mask mark goes left of the labels */
    if (rows < 1 || cols < 1)
        return;
    int gl = ceil_div(L, rows), ge = ceil_div(E, cols);
    int nr = ceil_div(L, gl), nc = ceil_div(E, ge);
    int cw = cols / nc > 3 ? 3 : cols / nc < 1 ? 1 : cols / nc;
    int cx = x + 5, cr = d->hl / gl, cc = d->he / ge;
    /* the panel beside it starts at x + w: the title and legend stay inside */
    char title[160];
    snprintf(title, sizeof title, "%s: activation share / global share, %lld requests served",
             dash_worker_name(d, wk), (long long)s->res.served[wk]);
    if ((int)strlen(title) > w)
        snprintf(title, sizeof title, "%s: share / global share, %lld served",
                 dash_worker_name(d, wk), (long long)s->res.served[wk]);
    canvas_put_fit(c, x, y, w, cv_fg(CV_DEFAULT, CV_BOLD), title);
    if (gl > 1 || ge > 1)
        canvas_textf(c, x, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "     (%d layer%s x %d expert%s "
                     "per cell)", gl, gl > 1 ? "s" : "", ge, ge > 1 ? "s" : "");
    else
        for (int j = 0; j < nc; j += 8)
            canvas_textf(c, cx + j * cw, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "%d", j * ge);
    cv_cell *mark = canvas_at(c, cx + cc * cw, y + 1);   /* the cursor's column */
    if (mark && mark->ch == ' ')
        *mark = (cv_cell){'v', cv_fg(CV_DEFAULT, CV_BOLD)};
    else if (mark)
        mark->st.attr |= CV_REVERSE;
    const uint64_t *heat = s->res.heat;
    for (int r = 0; r < nr; r++) {
        int l0 = r * gl, l1 = l0 + gl > L ? L : l0 + gl;
        canvas_textf(c, x, y + 2 + r, r == cr ? cv_fg(CV_DEFAULT, CV_BOLD)
                                              : cv_fg(CV_DEFAULT, CV_DIM), "L%-3d", l0);
        if (in_mask(m, l0, l1))   /* a layer the signature uses */
            canvas_put(c, x - 1, y + 2 + r, '*', cv_fg(CV_DEFAULT, CV_BOLD));
        double wsum = 0, gsum = 0;
        for (int l = l0; l < l1; l++)
            for (int e = 0; e < E; e++) {
                for (int k = 0; k < K; k++)
                    gsum += (double)heat[((size_t)k * L + l) * E + e];
                wsum += (double)heat[((size_t)wk * L + l) * E + e];
            }
        for (int j = 0; j < nc; j++) {
            double wv = 0, gv = 0;
            for (int l = l0; l < l1; l++)
                for (int e = j * ge; e < (j + 1) * ge && e < E; e++) {
                    for (int k = 0; k < K; k++)
                        gv += (double)heat[((size_t)k * L + l) * E + e];
                    wv += (double)heat[((size_t)wk * L + l) * E + e];
                }
            double level = NAN;
            if (gv > 0 && wsum > 0) {
                double ratio = (wv / wsum) / (gv / gsum);
                level = ratio > 0 ? (log2(ratio) + RATIO_SPAN) / (2 * RATIO_SPAN) : 0;
                level = level < 0.001 ? 0.001 : level > 1 ? 1 : level;
                if (wv == 0)
                    level = 0;
            }
            heat_cell(c, cx + j * cw, y + 2 + r, cw, level);
            if (r == cr && j == cc)
                for (int i = 0; i < cw; i++) {
                    cv_cell *cell = canvas_at(c, cx + j * cw + i, y + 2 + r);
                    if (cell)
                        cell->st.attr |= CV_REVERSE;
                }
        }
        if (r == cr)
            canvas_put(c, cx + nc * cw, y + 2 + r, '<', cv_fg(CV_DEFAULT, CV_BOLD));
    }
    static const char *tails[] = {"  blank: unused; *: signature layer", "  *: signature layer", ""};
    int ti = 0;
    while (ti < 2 && 25 + (int)strlen(tails[ti]) > w)   /* "legend: 1/8x " ramp " 8x" */
        ti++;
    legend(c, x, y + 2 + nr, "legend: 1/8x", "8x", tails[ti]);
    readout(d, c, x, y + 3 + nr, gl, ge);
}

/* Matrix B: workers x layers, the mean distinct experts per step over
 * what a random batch of the same size would load (dash.h): under 1 is
 * reuse the routing made, whatever the batch size. Falls back to the raw
 * means when there is nothing to compare with. */
static void distinct_matrix(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    const dash_sim *s = d->cur;
    int L = s->L, K = s->K;
    int rows = h - 5, cols = w - 10;
    if (rows < 1 || cols < 1)
        return;
    int norm = s->layer_expected && s->expected_all == s->expected_all;
    int gl = ceil_div(L, cols), nc = ceil_div(L, gl);
    int cw = cols / nc > 3 ? 3 : cols / nc < 1 ? 1 : cols / nc;
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < K; k++)
        for (int l = 0; l < L; l++) {
            double v = s->layer_distinct[(size_t)k * L + l];
            if (norm) {
                double ex = s->layer_expected[(size_t)k * L + l];
                if (!(ex > 0))
                    continue;
                v /= ex;
            }
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_BOLD), !norm ? (w >= 25 ? "distinct experts per step"
                                                             : "distinct experts/step")
                : w >= 60 ? "distinct experts per step / random batch of that size"
                : w >= 42 ? "distinct experts per step / random batch"
                : w >= 34 ? "distinct experts per step / random"
                : "distinct/step vs random");
    for (int j = 0; j < nc; j += 4)
        canvas_textf(c, x + 10 + j * cw, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "%d", j * gl);
    int first = d->worker >= rows ? d->worker - rows + 1 : 0;
    int shown = 0;
    for (int k = first; k < K && shown < rows; k++, shown++) {
        cv_style st = k == d->worker ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_fg(CV_DEFAULT, CV_DIM);
        char nb[DASH_NAME_MAX];
        canvas_textf(c, x, y + 2 + shown, st, "%c%-8s", k == d->worker ? '>' : ' ',
                     dash_worker_label(d, k, 8, nb, sizeof nb));
        for (int j = 0; j < nc; j++) {
            double v = 0, ex = 0;
            int n = 0;
            for (int l = j * gl; l < (j + 1) * gl && l < L; l++, n++) {
                v += s->layer_distinct[(size_t)k * L + l];
                if (norm)
                    ex += s->layer_expected[(size_t)k * L + l];
            }
            v = norm ? (ex > 0 ? v / ex : NAN) : n ? v / n : 0;
            double level = v != v ? NAN : hi > lo ? (v - lo) / (hi - lo) : 0.5;
            heat_cell(c, x + 10 + j * cw, y + 2 + shown, cw,
                      level == level && level < 0.001 ? 0.001 : level);
        }
    }
    char lo_s[32], hi_s[32];
    snprintf(lo_s, sizeof lo_s, "%s%.*f", w >= 30 ? "legend: " : "", norm ? 2 : 1,
             isfinite(lo) ? lo : 0);
    snprintf(hi_s, sizeof hi_s, norm ? "%.2f" : "%.1f", isfinite(hi) ? hi : 0);
    legend(c, x, y + 2 + shown, lo_s, hi_s, !norm ? (w >= 45 ? " per layer" : "")
           : w >= 45 ? " observed/expected" : "");
    if (norm) {   /* a side panel at 100 columns has about 26 */
        canvas_textf(c, x, y + 3 + shown, cv_fg(CV_DEFAULT, CV_DIM), w >= 34
                     ? "all: %.2f vs %.2f random = %.2f" : "all %.2f/%.2f = %.2f",
                     s->distinct_all, s->expected_all, s->distinct_all / s->expected_all);
        canvas_textf(c, x, y + 4 + shown, cv_fg(CV_DEFAULT, CV_DIM), w >= 31
                     ? "mean batch %.1f; under 1: reuse" : "batch %.1f; under 1: reuse",
                     s->res.mean_batch);
    }
}

/* Sum of centroid k's weights over layer-rows [r0, r1) and experts [e0, e1). */
static double cent_sum(const model_t *m, int k, int r0, int r1, int e0, int e1)
{
    int E = m->recipe.E;
    size_t dim = sig_dim(&m->recipe);
    double v = 0;
    for (int r = r0; r < r1; r++)
        for (int e = e0; e < e1 && e < E; e++)
            v += m->centroids[(size_t)k * dim + (size_t)r * E + e];
    return v;
}

static void heatmap_live(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (!d->fit) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "no centroids in this snapshot (save it with "
                    "GET /v1/snapshot?centroids=1)");
        return;
    }
    const model_t *m = d->fit->model;
    int S = m->recipe.n_layers, E = m->recipe.E, K = m->K, wk = d->worker;
    int rows = h - 4, cols = w - 8;
    if (rows < 1 || cols < 1 || S < 1)
        return;
    int gl = ceil_div(S, rows), ge = ceil_div(E, cols);
    int nr = ceil_div(S, gl), nc = ceil_div(E, ge);
    int cw = cols / nc > 3 ? 3 : cols / nc < 1 ? 1 : cols / nc;
    canvas_put_fitf(c, x + 1, y, w - 1, cv_fg(CV_DEFAULT, CV_BOLD), "%s: centroid weight / mean "
                    "of the %d centroids (the layers the model uses)", dash_worker_name(d, wk), K);
    if (gl > 1 || ge > 1)
        canvas_textf(c, x + 1, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "      (%d layer%s x %d expert%s "
                     "per cell)", gl, gl > 1 ? "s" : "", ge, ge > 1 ? "s" : "");
    else
        for (int j = 0; j < nc; j += 8)
            canvas_textf(c, x + 7 + j * cw, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "%d", j * ge);
    for (int r = 0; r < nr; r++) {
        int r0 = r * gl, r1 = r0 + gl > S ? S : r0 + gl;
        canvas_textf(c, x + 1, y + 2 + r, cv_fg(CV_DEFAULT, CV_DIM), "L%-3d", m->recipe.layers[r0]);
        for (int j = 0; j < nc; j++) {
            double wv = cent_sum(m, wk, r0, r1, j * ge, (j + 1) * ge), gv = 0;
            for (int k = 0; k < K; k++)
                gv += cent_sum(m, k, r0, r1, j * ge, (j + 1) * ge) / K;
            double level = NAN;
            if (gv > 0 && wv >= 0) {
                level = wv > 0 ? (log2(wv / gv) + RATIO_SPAN) / (2 * RATIO_SPAN) : 0;
                level = wv == 0 ? 0 : level < 0.001 ? 0.001 : level > 1 ? 1 : level;
            }
            heat_cell(c, x + 7 + j * cw, y + 2 + r, cw, level);
        }
    }
    legend(c, x + 1, y + 2 + nr, "legend: 1/8x", "8x", "  blank: no weight");
    if (y + 3 + nr < y + h)
        canvas_put_fit(c, x + 1, y + 3 + nr, w - 1, cv_fg(CV_DEFAULT, CV_DIM), "live: a router sees no "
                    "decode activations; this is what each worker's cluster is made of");
}

void view_heatmap(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        heatmap_live(d, c, x, y, w, h);
        return;
    }
    const dash_sim *s = d->cur;
    if (!s || !s->res.heat || !d->fit) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "loading...");
        return;
    }
    int needA = 6 + s->E, needB = 10 + s->L;
    int hB = s->K + 5;
    if (d->zoom) {
        worker_matrix(d, c, x + 1, y, w - 2, h);
    } else if (w >= needA + needB + 4) {
        int wA = w - needB - 4;
        if (wA > 5 + 3 * s->E)
            wA = 5 + 3 * s->E;
        worker_matrix(d, c, x + 1, y, wA, h);
        distinct_matrix(d, c, x + wA + 3, y, w - wA - 4, hB < h ? hB : h);
    } else {
        if (hB > h / 2)
            hB = h / 2;
        worker_matrix(d, c, x + 1, y, w - 2, h - hB);
        distinct_matrix(d, c, x + 1, y + h - hB, w - 2, hB);
    }
}
