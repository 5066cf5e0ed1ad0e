/* view_decisions.c - live: eldrd's recent routing decisions, newest
 * first, each with its evidence: the request id, the worker it went to,
 * the rule that decided, the best similarity, the band the rule chose
 * among and the in-flight counts it saw. A decision of the cost rule
 * (eldrd --policy cost, rule "cost") has a second line: each worker's
 * predicted cost in ms (the chosen one has the least) and, when eldrd
 * sent them, each worker's terms B/U/dU (in flight, expected distinct
 * experts per decode step, what the request adds to them). Decisions
 * sent to the selected worker are bold; Enter shows only those. Space
 * pauses the list (it keeps the decisions of that moment while the polls
 * go on) and resumes it.
 *
 * Every worker's load stays readable at any K and width: under 120
 * columns the columns are as wide as their widest entry (seq, rule, the
 * band; a band is written as ranges at every width: "0-7"), and when a row still has no room for
 * every load whole they go on a line of their own under it ("loads seen
 * w0..w7: 33 33 ..."), never cut. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"
#include "live.h"

/* "0,1,2,3,5" -> "0-3,5": a run of three or more indices as a range */
static void band_ranges(const char *band, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    const char *p = band;
    while (*p && len < n) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p) {                       /* not a list of indices: as it is */
            snprintf(out, n, "%s", band);
            return;
        }
        long b = a;
        p = *end == ',' ? end + 1 : end;
        for (;;) {                            /* extend while the next is b + 1 */
            long v = strtol(p, &end, 10);
            if (end == p || v != b + 1)
                break;
            b = v;
            p = *end == ',' ? end + 1 : end;
        }
        len += (size_t)snprintf(out + len, n - len, len ? ",%ld" : "%ld", a);
        if (b > a && len < n)
            len += (size_t)snprintf(out + len, n - len, b == a + 1 ? ",%ld" : "-%ld", b);
    }
}

/* How wide each column is: at 120 columns and more the fixed widths;
 * narrower, each as wide as its widest entry among the shown rows. */
typedef struct dec_cols {
    int seq, id, rule, sim, band;
} dec_cols;

static void columns(const dash_t *d, const dash_decision *dec, int n_dec, int w, dec_cols *k)
{
    k->id = w >= 120 ? 36 : w >= 90 ? 24 : 14;
    if (w >= 120) {
        *k = (dec_cols){8, k->id, 12, 8, 10};
        return;
    }
    *k = (dec_cols){3, k->id, 4, 6, 4};
    for (int i = 0; i < n_dec; i++) {
        const dash_decision *e = &dec[i];
        if (d->zoom && e->worker != d->worker)
            continue;
        char b[64];
        int sq = snprintf(b, sizeof b, "%lld", (long long)e->seq);
        k->seq = sq > k->seq ? sq : k->seq;
        int rl = (int)strlen(e->rule);
        k->rule = rl > k->rule ? rl : k->rule;
        band_ranges(e->band, b, sizeof b);
        int bl = canvas_cols(b);
        k->band = bl > k->band ? (bl < 10 ? bl : 10) : k->band;
    }
}

void view_decisions(const dash_t *d, canvas_t *c, int x, int y, int w, int h)
{
    if (!d->live) {
        canvas_text(c, x + 1, y + 1, cv_plain(), "decisions: live mode only (eldr dash --attach "
                    "URL, or --router-snapshot FILE)");
        return;
    }
    const dash_live *L = d->live;
    /* paused: the list as it was when space was pressed; polls go on */
    int n_dec = L->paused ? L->n_frozen : L->now.n_dec;
    const dash_decision *dec = L->paused ? L->frozen : L->now.dec;
    dec_cols k;
    columns(d, dec, n_dec, w, &k);
    int tx = x + 1 + canvas_put_fitf(c, x + 1, y, w - 1, cv_fg(CV_DEFAULT, CV_BOLD), "recent decisions, "
                                  "newest first (%d from the daemon's ring%s%s)", n_dec,
                                  d->zoom ? "; only " : "",
                                  d->zoom ? dash_worker_name(d, d->worker) : "");
    if (L->paused)
        canvas_textf(c, tx, y, (cv_style){CV_DEFAULT, CV_DEFAULT, CV_BOLD | CV_REVERSE},
                     " PAUSED: space resumes; %lld newer ", (long long)live_newer(L));
    canvas_put_fitf(c, x + 1, y + 1, w - 1, cv_fg(CV_DEFAULT, CV_DIM),
                    "%*s %-*s %-8s %-*s %*s  %-*s %s", k.seq, "seq", k.id, "request id",
                    "worker", k.rule, "rule", k.sim, k.sim >= 8 ? "best sim" : "sim", k.band,
                    "band", "loads seen");
    int row = 0, rows = h - 3;
    for (int i = 0; i < n_dec && row < rows; i++) {
        const dash_decision *e = &dec[i];
        if (d->zoom && e->worker != d->worker)
            continue;
        char sim[16];
        if (e->sim_max == e->sim_max)
            snprintf(sim, sizeof sim, "%*.4f", k.sim, e->sim_max);
        else
            snprintf(sim, sizeof sim, "%*s", k.sim, "-");
        cv_style st = e->worker == d->worker ? cv_fg(dash_cluster_color(e->worker), CV_BOLD)
                                             : cv_plain();
        /* ids of one client share their start (replay-8163-591, -592):
         * their tail tells them apart; a name's too (decode-1, decode-2) */
        char id[sizeof e->id], name[DASH_NAME_MAX], band[sizeof e->band];
        snprintf(id, sizeof id, "%s", e->id);
        snprintf(name, sizeof name, "%s", dash_worker_name(d, e->worker));
        band_ranges(e->band, band, sizeof band);
        canvas_fit_tail(id, k.id);
        canvas_fit_tail(name, 8);
        canvas_fit(band, k.band);
        char line[320];
        int len = snprintf(line, sizeof line, "%*lld %-*s %-8s %-*s %s  %-*s ", k.seq,
                           (long long)e->seq, k.id, id, name, k.rule, e->rule, sim, k.band,
                           band);
        /* every load whole: on the row when it has room, else on a line
         * of its own under it */
        int own_line = len + canvas_cols(e->loads) > w - 1;
        if (!own_line)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s", e->loads);
        else
            len += snprintf(line + len, sizeof line - (size_t)len, "(below)");
        if (e->finished && len + 12 <= w - 1)   /* the loads go before the note */
            snprintf(line + len, sizeof line - (size_t)len, "  (finished)");
        canvas_put_fit(c, x + 1, y + 2 + row, w - 1, st, line);
        row++;
        if (own_line && row < rows) {
            char ll[160];
            int nw = 0;
            for (const char *q = e->loads; *q; q++)
                nw += *q != ' ' && (q == e->loads || q[-1] == ' ');
            snprintf(ll, sizeof ll, "loads seen %s..%s: %s", dash_worker_name(d, 0),
                     dash_worker_name(d, nw - 1), e->loads);
            if (canvas_cols(ll) > w - 10 || nw != L->now.K)   /* names only when they match */
                snprintf(ll, sizeof ll, "loads seen: %s", e->loads);
            canvas_put_fit(c, x + 10, y + 2 + row, w - 10, st, ll);
            row++;
        }
        if (e->has_cost && row < rows) {
            /* the costs whole before the terms: a label with none of
             * its terms ("B/U/dU...") says nothing */
            char cl[420];
            snprintf(cl, sizeof cl, "cost ms %s%s%s", e->costs, e->terms[0] ? "  B/U/dU " : "",
                     e->terms);
            if (canvas_cols(cl) > w - 10)
                snprintf(cl, sizeof cl, "cost ms %s", e->costs);
            canvas_put_fit(c, x + 10, y + 2 + row, w - 10, cv_fg(CV_DEFAULT, CV_DIM), cl);
            row++;
        }
    }
    if (row == 0)
        canvas_text(c, x + 1, y + 2, cv_fg(CV_DEFAULT, CV_DIM), d->zoom ? "(none to this worker "
                    "among the recent decisions)" : "(no decisions yet)");
    if (row < rows)
        canvas_put_fit(c, x + 1, y + 3 + row, w - 1, cv_fg(CV_DEFAULT, CV_DIM), "band: the workers the "
                    "rule chose among; loads: their in-flight counts at the time; "
                    "Enter: this worker only; space: pause");
    int any_cost = 0;
    for (int i = 0; i < n_dec; i++)
        any_cost |= dec[i].has_cost;
    if (any_cost && row + 1 < rows)
        canvas_put_fit(c, x + 1, y + 4 + row, w - 1, cv_fg(CV_DEFAULT, CV_DIM), "cost ms: each worker's "
                    "predicted increase (the least wins); B/U/dU: in flight, expected "
                    "experts/step, what it adds");
}
