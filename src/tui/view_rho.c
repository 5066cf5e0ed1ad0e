/* view_rho.c - the greedy layer-selection curve: rho of the cumulative
 * signature after adding each layer in greedy order, with N* (the first
 * peak: the layers kept) marked, and the order of the layers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"

void view_rho(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (d->live) {
        const dash_live_now *n = &d->live->now;
        canvas_textf(c, x + 1, y + 1, cv_plain(), "no rho curve in live mode: eldrd serves a "
                     "fitted model (%s, rho %.4f);", n->variant, n->rho);
        canvas_text(c, x + 1, y + 2, cv_plain(), "the curve comes from a trace: eldr rho TRACE "
                    "--layers auto, or eldr dash TRACE -m MODEL");
        return;
    }
    if (!d->curve) {
        canvas_textf(c, x + 1, y + 1, cv_plain(), "%s", d->curve_note[0] ? d->curve_note
                                                                       : "loading...");
        return;
    }
    int n = d->curve_n, ns = d->curve_nstar;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(d->curve[i])) {
            lo = fmin(lo, d->curve[i]);
            hi = fmax(hi, d->curve[i]);
        }
    if (!isfinite(lo)) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "the rho curve is undefined everywhere");
        return;
    }
    if (hi - lo < 1e-6) {
        lo -= 0.01;
        hi += 0.01;
    }
    const model_t *m = d->fit ? d->fit->model : NULL;
    canvas_textf(c, x + 1, y, cv_fg(CV_DEFAULT, CV_BOLD), "greedy rho curve (%s, calibration "
                 "rows): N* = %d layers, rho %.4f", m ? sig_variant_name(m->recipe.variant) : "",
                 ns, ns >= 1 ? d->curve[ns - 1] : NAN);
    int ph = h - 5, pw = w - 10;
    if (ph < 3 || pw < n)
        pw = pw < 1 ? 1 : pw;
    if (ph < 3)
        return;
    int cw = pw / n < 1 ? 1 : pw / n > 4 ? 4 : pw / n;
    int ox = x + 9, oy = y + 1;
    canvas_textf(c, x + 1, oy, cv_fg(CV_DEFAULT, CV_DIM), "%7.4f", hi);
    canvas_textf(c, x + 1, oy + ph - 1, cv_fg(CV_DEFAULT, CV_DIM), "%7.4f", lo);
    for (int r = 0; r < ph; r++)
        canvas_put(c, ox - 1, oy + r, c->unicode ? 0x2502 : '|', cv_fg(CV_DEFAULT, CV_DIM));
    for (int i = 0; i < n && (i + 1) * cw <= pw; i++) {
        int px = ox + i * cw;
        if (i + 1 == ns)   /* N*: a vertical line under and over the point */
            for (int r = 0; r < ph; r++)
                canvas_put(c, px, oy + r, ':', cv_fg(CV_DEFAULT, CV_DIM));
        if (!isfinite(d->curve[i]))
            continue;
        int py = (int)((hi - d->curve[i]) / (hi - lo) * (ph - 1) + 0.5);
        int star = i + 1 == ns;
        canvas_put(c, px, oy + py, star ? '@' : '*',
                   star ? (cv_style){196, CV_DEFAULT, CV_BOLD} : cv_fg(39, 0));
    }
    int ay = oy + ph;
    for (int i = 0; i < n && (i + 1) * cw <= pw; i++)
        if (i == 0 || (i + 1) % 5 == 0 || i + 1 == ns)
            canvas_textf(c, ox + i * cw, ay, cv_fg(CV_DEFAULT, i + 1 == ns ? CV_BOLD : CV_DIM),
                         "%d", i + 1);
    /* the marker row: "^ N*" under the peak, the axis caption elsewhere */
    int nx = ox + (ns - 1) * cw;
    const char *cap = "layers (greedy order)";
    int capx = nx > ox + 24 ? ox : nx + 8;
    canvas_text(c, capx, ay + 1, cv_fg(CV_DEFAULT, CV_DIM), cap);
    canvas_textf(c, nx, ay + 1, cv_fg(196, CV_BOLD), "^ N*=%d", ns);
    char buf[512];
    size_t used = (size_t)snprintf(buf, sizeof buf, "order:");
    for (int i = 0; i < n && used + 8 < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, i + 1 == ns ? " %d |" : " %d",
                                 d->order[i]);
    canvas_text(c, x + 1, ay + 2, cv_plain(), buf);
    if (m)
        canvas_textf(c, x + 1, ay + 3, cv_fg(CV_DEFAULT, CV_DIM), "the model uses %d layers%s",
                     m->recipe.n_layers, d->model_name[0] ? " (from its file)" : " (the N* prefix)");
}
