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
 * go on) and resumes it. */
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "view_util.h"
#include "live.h"

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
    int idw = w >= 120 ? 36 : w >= 90 ? 24 : 14;
    int tx = x + 1 + canvas_put_fitf(c, x + 1, y, w - 1, cv_fg(CV_DEFAULT, CV_BOLD), "recent decisions, "
                                  "newest first (%d from the daemon's ring%s%s)", n_dec,
                                  d->zoom ? "; only " : "",
                                  d->zoom ? dash_worker_name(d, d->worker) : "");
    if (L->paused)
        canvas_textf(c, tx, y, (cv_style){CV_DEFAULT, CV_DEFAULT, CV_BOLD | CV_REVERSE},
                     " PAUSED: space resumes; %lld newer ", (long long)live_newer(L));
    canvas_textf(c, x + 1, y + 1, cv_fg(CV_DEFAULT, CV_DIM), "%8s %-*s %-8s %-12s %8s  %-10s %s",
                 "seq", idw, "request id", "worker", "rule", "best sim", "band", "loads seen");
    int row = 0, rows = h - 3;
    for (int i = 0; i < n_dec && row < rows; i++) {
        const dash_decision *e = &dec[i];
        if (d->zoom && e->worker != d->worker)
            continue;
        char sim[16];
        if (e->sim_max == e->sim_max)
            snprintf(sim, sizeof sim, "%8.4f", e->sim_max);
        else
            snprintf(sim, sizeof sim, "%8s", "-");
        cv_style st = e->worker == d->worker ? cv_fg(dash_cluster_color(e->worker), CV_BOLD)
                                             : cv_plain();
        /* ids of one client share their start (replay-8163-591, -592):
         * their tail tells them apart; a name's too (decode-1, decode-2) */
        char id[sizeof e->id], name[DASH_NAME_MAX], band[sizeof e->band];
        snprintf(id, sizeof id, "%s", e->id);
        snprintf(name, sizeof name, "%s", dash_worker_name(d, e->worker));
        snprintf(band, sizeof band, "%s", e->band);
        canvas_fit_tail(id, idw);
        canvas_fit_tail(name, 8);
        canvas_fit(band, 10);
        char line[320];
        int len = snprintf(line, sizeof line, "%8lld %-*s %-8s %-12s %s  %-10s %s",
                           (long long)e->seq, idw, id, name, e->rule, sim, band, e->loads);
        if (e->finished && len + 12 <= w - 1)   /* the loads go before the note */
            snprintf(line + len, sizeof line - (size_t)len, "  (finished)");
        canvas_put_fit(c, x + 1, y + 2 + row, w - 1, st, line);
        row++;
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
