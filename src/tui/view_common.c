/* view_common.c - the frame around every view: the tab bar, the what-if
 * header with the headline numbers, the footer (keys, or the progress of
 * a running job) and the help overlay. What the views share (colours,
 * worker names, sparklines) is view_util.c's, so the views do not call
 * back into the file that calls them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dash.h"
#include "live.h"
#include "view_util.h"

static const dash_view_fn VIEWS[VIEW_N] = {view_overview, view_balance,   view_heatmap,
                                           view_queues,   view_scatter,   view_rho,
                                           view_decisions, view_drift,    view_tradeoff};

/* A trace has no decisions or drift (those are the daemon's), and live
 * mode no grid to simulate: each has its own seventh tab. */
static const int TRACE_TABS[] = {VIEW_OVERVIEW, VIEW_BALANCE, VIEW_HEATMAP, VIEW_QUEUES,
                                 VIEW_SCATTER,  VIEW_RHO,     VIEW_TRADEOFF};
static const int LIVE_TABS[] = {VIEW_OVERVIEW, VIEW_BALANCE,   VIEW_HEATMAP, VIEW_QUEUES,
                                VIEW_SCATTER,  VIEW_RHO,       VIEW_DECISIONS, VIEW_DRIFT};

int dash_n_views(const dash_t *d)
{
    return d->live ? (int)(sizeof LIVE_TABS / sizeof *LIVE_TABS)
                   : (int)(sizeof TRACE_TABS / sizeof *TRACE_TABS);
}

int dash_view_at(const dash_t *d, int i)
{
    if (i < 0 || i >= dash_n_views(d))
        return VIEW_OVERVIEW;
    return d->live ? LIVE_TABS[i] : TRACE_TABS[i];
}

int dash_view_tab(const dash_t *d, int v)
{
    for (int i = 0; i < dash_n_views(d); i++)
        if (dash_view_at(d, i) == v)
            return i;
    return -1;
}

static const char *const SHORT_NAMES[VIEW_N] = {"over", "bal", "heat", "queue", "scat",
                                                "rho",  "dec", "drift", "trade"};

/* A tab's name: abbrev 0 the whole name, 1 the short name, 2 none (the
 * digit alone, under 60 columns); the current view's is always whole. */
static const char *tab_name(const dash_t *d, int v, int abbrev)
{
    return v == d->view || !abbrev ? dash_view_name(v) : abbrev == 1 ? SHORT_NAMES[v] : "";
}

/* Width of the tab row after the label. */
static int tabs_width(const dash_t *d, int abbrev)
{
    int n = 0;
    for (int i = 0; i < dash_n_views(d); i++) {
        int v = dash_view_at(d, i);
        const char *name = tab_name(d, v, abbrev);
        n += (int)strlen(name) + (*name ? 4 : 3);
    }
    return n;
}

static void draw_tabs(const dash_t *d, canvas_t *c)
{
    cv_style bar = {CV_DEFAULT, CV_DEFAULT, CV_REVERSE};
    char label[300];
    snprintf(label, sizeof label, " eldr dash %s ", d->trace_name);
    int narrow = c->w < 100 || (int)strlen(label) + tabs_width(d, 1) > c->w;
    if (narrow)
        snprintf(label, sizeof label, " eldr ");
    int abbrev = 0;
    while (abbrev < 2 && (int)strlen(label) + tabs_width(d, abbrev) > c->w)
        abbrev++;
    canvas_fill(c, 0, 0, c->w, 1, ' ', bar);
    int x = canvas_text(c, 0, 0, (cv_style){CV_DEFAULT, CV_DEFAULT, CV_REVERSE | CV_BOLD}, label);
    for (int i = 0; i < dash_n_views(d); i++) {
        char tab[32];
        int v = dash_view_at(d, i);
        const char *name = tab_name(d, v, abbrev);
        if (v == d->view)
            snprintf(tab, sizeof tab, "[%d %s]", i + 1, name);
        else if (*name)
            snprintf(tab, sizeof tab, " %d %s ", i + 1, name);
        else
            snprintf(tab, sizeof tab, " %d ", i + 1);
        cv_style st = v == d->view ? (cv_style){CV_DEFAULT, CV_DEFAULT, CV_BOLD} : bar;
        x += canvas_text(c, x, 0, st, tab);
    }
    if (narrow && x + 2 + (int)strlen(d->trace_name) < c->w)
        canvas_text(c, c->w - (int)strlen(d->trace_name) - 1, 0, bar, d->trace_name);
}

/* Live: "live URL | tau 0.10 K 4 gen 1 | in-flight 7, routed 120 | 3.2/s |
 * sim 0.61 (calib 0.69) | polled 0.3 s ago", or the poll's error. */
static void draw_live(const dash_t *d, canvas_t *c, int y)
{
    const dash_live *L = d->live;
    const dash_live_now *n = &L->now;
    int64_t inf = 0, routed = 0;
    for (int k = 0; k < n->K; k++) {
        inf += n->inflight[k];
        routed += n->routed[k];
    }
    int x = canvas_text(c, 0, y, cv_fg(CV_DEFAULT, CV_BOLD), L->attached ? "live" : "snapshot");
    int np = dash_live_problems(n);
    char prob[32] = "", age[48] = "";
    if (np > 0)
        snprintf(prob, sizeof prob, " | %d PROBLEM%s (1)", np, np > 1 ? "S" : "");
    if (L->attached && !L->error[0])   /* the age is never dropped: its short form */
        snprintf(age, sizeof age, " | %.1fs ago", L->age_s);
    /* the numbers in the first form that leaves room for the problems and
     * the age: narrower terminals lose "routed", then "gen" and the count */
    char head[3][128];
    snprintf(head[0], sizeof head[0], " tau %.2f K %d gen %lld | in-flight %lld, routed %lld",
             n->tau, n->K, (long long)n->generation, (long long)inf, (long long)routed);
    snprintf(head[1], sizeof head[1], " tau %.2f K %d gen %lld | in-flight %lld", n->tau, n->K,
             (long long)n->generation, (long long)inf);
    snprintf(head[2], sizeof head[2], " tau %.2f K %d", n->tau, n->K);
    int h = 0;
    while (h < 2 && x + canvas_cols(head[h]) + canvas_cols(prob) + canvas_cols(age) > c->w)
        h++;
    x += canvas_text(c, x, y, cv_plain(), head[h]);
    /* whatever view is up, the header says something needs the eye */
    if (np > 0)
        x += canvas_text(c, x, y, (cv_style){196, CV_DEFAULT, CV_BOLD}, prob);
    if (L->error[0]) {   /* the last numbers stay; the footer has the message */
        x += 1 + canvas_textf(c, x + 1, y, (cv_style){196, CV_DEFAULT, CV_BOLD | CV_REVERSE},
                              " NO ANSWER, retrying; %lld failed ", (long long)L->failures);
        canvas_textf(c, x, y, cv_fg(CV_DEFAULT, CV_BOLD), " last answer %.0fs ago", L->age_s);
        return;
    }
    /* the age of the last answer matters most when the line is short of
     * room: drop the calibration's similarity, the rate, the similarity */
    char rate[32] = "", sim[32] = "", cal[32] = "";
    if (L->rate == L->rate)
        snprintf(rate, sizeof rate, " | %.1f/s", L->rate);
    if (n->mean_sim == n->mean_sim)
        snprintf(sim, sizeof sim, " | sim %.3f", n->mean_sim);
    if (n->calib_sim == n->calib_sim)
        snprintf(cal, sizeof cal, " (calib %.3f)", n->calib_sim);
    if (L->attached)
        snprintf(age, sizeof age, " | last answer %.1fs ago", L->age_s);
    else
        snprintf(age, sizeof age, " | frozen at uptime %.0fs",
                 n->uptime_s == n->uptime_s ? n->uptime_s : 0);
    int need = x + (int)(strlen(rate) + strlen(sim) + strlen(cal) + strlen(age));
    if (!L->attached && need > c->w) {   /* a saved snapshot: its uptime goes first */
        need -= (int)strlen(age);
        age[0] = '\0';
    }
    if (need > c->w) {
        need -= (int)strlen(cal);
        cal[0] = '\0';
    }
    if (need > c->w) {
        need -= (int)strlen(rate);
        rate[0] = '\0';
    }
    if (need > c->w) {
        need -= (int)strlen(sim);
        sim[0] = '\0';
    }
    if (L->attached && need > c->w)   /* never cut the age itself */
        snprintf(age, sizeof age, " | %.1fs ago", L->age_s);
    x += canvas_text(c, x, y, cv_plain(), rate);
    x += canvas_text(c, x, y, cv_plain(), sim);
    x += canvas_text(c, x, y, cv_plain(), cal);
    canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), age);
}

void dash_fmt_pm(const canvas_t *c, char *buf, size_t n, const grid_stat *st)
{
    double half = (st->hi - st->lo) / 2;
    if (!isfinite(half))
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, c->unicode ? " \u00b1%.1f" : " +-%.1f", half);
}

/* A change of a against b (lower is better): -1 better, 1 worse, 0 even
 * (under 0.05%, what "%+.1f%%" prints as +0.0%), 2 unknown. */
static int verdict(double a, double b)
{
    if (!(b > 0) || !isfinite(a))
        return 2;
    double pct = 100.0 * (a - b) / b;
    return pct <= -0.05 ? -1 : pct >= 0.05 ? 1 : 0;
}

/* The header's deltas are coloured by verdict: green better, red worse.
 * Without colour (a plain terminal, and --frame text) a word follows
 * each delta instead, so a capture still says which way it went. When
 * the line does not fit it loses, in turn, the long labels, the units,
 * the "|" separators, the words' length (b / w / =), the p99 part, the
 * absolute numbers and at last the " vs rr"; the baseline's name and
 * U/step outlast the rest (60 columns keep both, issue 22). */
typedef struct hdr_form {
    unsigned shortl : 1, nounit : 1, tight : 1, letters : 1, nop99 : 1, noabs : 1, novs : 1;
} hdr_form;
static const hdr_form HDR_FORMS[] = {
    {0, 0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0, 0}, {1, 1, 1, 0, 0, 0, 0},
    {1, 1, 1, 1, 0, 0, 0}, {1, 1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1, 1},
};
#define N_HDR_FORMS ((int)(sizeof HDR_FORMS / sizeof HDR_FORMS[0]))

static const char *verdict_word(int v, int words, const hdr_form *f)
{
    static const char *names[] = {"better", "even", "worse"};
    static const char *letters[] = {"b", "=", "w"};
    if (!words || v == 2)
        return "";
    return f->letters ? letters[v + 1] : names[v + 1];
}

/* With the CIs a change is judged by its interval: better when it lies
 * below 0, worse above, even (within noise) when it holds 0. */
static int ci_verdict(const grid_stat *g)
{
    if (fabs(g->mean) < 0.05)   /* what prints as +0.0% */
        return 0;
    if (!isfinite(g->lo) || !isfinite(g->hi))
        return g->mean <= -0.05 ? -1 : g->mean >= 0.05 ? 1 : 0;
    return g->hi < 0 ? -1 : g->lo > 0 ? 1 : 0;
}

/* Text at x + *n (when draw) in style st; advances *n by its columns. */
static void put_part(canvas_t *c, int x, int y, int *n, cv_style st, const char *s, int draw)
{
    if (draw && *s)
        canvas_text(c, x + *n, y, st, s);
    *n += canvas_cols(s);
}

/* Draws (or, with draw 0, measures) the numbers part from x in form f;
 * returns the columns it takes. With the CIs (dash_shown_ci) the numbers
 * are the means over the seeds (the trade-off cell's and the trail's)
 * and the changes are paired per seed, each with its 95% half-width. */
static int whatif_numbers(const dash_t *d, canvas_t *c, int x, int y, const hdr_form *f,
                          int words, int draw)
{
    const dash_sim *s = d->cur, *b = dash_best_base(d);
    const dash_ci *ci = dash_shown_ci(d);
    double v[3] = {s->res.tpot_p50_ms, s->res.tpot_p99_ms, s->res.distinct_per_step};
    double r[3] = {b ? b->res.tpot_p50_ms : 0, b ? b->res.tpot_p99_ms : 0,
                   b ? b->res.distinct_per_step : 0};
    const grid_stat *g[3] = {NULL, NULL, NULL};
    if (ci) {
        v[0] = ci->tpot_p50.mean;
        v[1] = ci->tpot_p99.mean;
        v[2] = ci->distinct.mean;
        g[0] = &ci->vs_best_pct;
        g[1] = &ci->p99_vs_best_pct;
        g[2] = &ci->distinct_vs_best_pct;
    }
    const char *label[3] = {f->shortl ? " | p50 " : " | TPOT p50 ", " p99 ",
                            f->shortl ? " | U " : " | U/step "};
    if (f->tight) {   /* 80 columns: the words still fit without the bars */
        label[0] = " p50 ";
        label[2] = " U ";
    }
    const char *unit = f->nounit ? "" : "ms";
    int colour = !words && c->colors >= 8;
    int green = c->colors >= 256 ? 40 : 2, red = c->colors >= 256 ? 196 : 1;
    int n = 0;
    for (int i = 0; i < 3; i++) {
        if (i == 1 && f->nop99)
            continue;
        char num[32], ch[24], pm[24] = "", buf[96];
        snprintf(num, sizeof num, i < 2 ? "%.2f%s " : "%.1f ", v[i], unit);
        dash_fmt_change(ch, sizeof ch, v[i], r[i]);
        int vd = verdict(v[i], r[i]);
        if (g[i]) {
            snprintf(ch, sizeof ch, "%+.1f%%", g[i]->mean);
            dash_fmt_pm(c, pm, sizeof pm, g[i]);
            vd = ci_verdict(g[i]);
        }
        snprintf(buf, sizeof buf, "%s%s", label[i], f->noabs ? "" : num);
        put_part(c, x, y, &n, cv_plain(), buf, draw);
        cv_style st = colour && vd != 2 && vd != 0
                          ? cv_fg(vd < 0 ? green : red, CV_BOLD) : cv_plain();
        put_part(c, x, y, &n, st, ch, draw);
        put_part(c, x, y, &n, cv_plain(), pm, draw);
        const char *w = verdict_word(vd, words, f);
        if (*w) {
            snprintf(buf, sizeof buf, " %s", w);
            put_part(c, x, y, &n, cv_fg(CV_DEFAULT, CV_DIM), buf, draw);
        }
    }
    if (b && !f->novs) {
        char vs[32];
        snprintf(vs, sizeof vs, " vs %s", route_kind_name(b->policy));
        put_part(c, x, y, &n, cv_fg(CV_DEFAULT, CV_DIM), vs, draw);
    }
    return n;
}

/* "eldr tau 0.10 K 4 | TPOT p50 2.71ms -3.1% +-1.0 p99 ... | U/step 17.2 -20% +-2.1
 * vs jsq": with --seeds the numbers are means and the changes carry their 95% CIs. */
static void draw_whatif(const dash_t *d, canvas_t *c, int y)
{
    if (d->live) {
        draw_live(d, c, y);
        return;
    }
    const dash_sim *s = d->cur;
    int K = d->fit ? d->fit->model->K : 0;
    int x = canvas_textf(c, 0, y, cv_fg(CV_DEFAULT, CV_BOLD), "%s", route_kind_name(d->policy));
    if (d->policy == ROUTE_ELDR)
        x += canvas_textf(c, x, y, cv_plain(), " tau %.2f", d->tau);
    x += canvas_textf(c, x, y, cv_plain(), " K %d", K);
    if (d->busy)
        x += canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_DIM), "...");
    if (s && !d->refined)   /* a first look: the footer says on which rows */
        x += canvas_text(c, x, y, cv_fg(CV_DEFAULT, CV_BOLD), " FIRST LOOK");
    if (!s) {
        canvas_text(c, x, y, cv_plain(), " | no simulation yet");
        return;
    }
    char why[160];
    if (dash_irrelevant(d, why, sizeof why)) {   /* no precise zeros */
        canvas_put_fitf(c, x, y, c->w - x, cv_fg(CV_DEFAULT, CV_BOLD), " | %s", why);
        return;
    }
    int words = c->colors < 8, f = 0;
    while (f + 1 < N_HDR_FORMS && x + whatif_numbers(d, c, x, y, &HDR_FORMS[f], words, 0) > c->w)
        f++;
    whatif_numbers(d, c, x, y, &HDR_FORMS[f], words, 1);
}

/* The first of forms (widest first, NULL-ended) that fits the width: the
 * help line always fits whole, ending in "? help q quit". Returns its
 * columns. */
static int footer_form(canvas_t *c, int y, cv_style bar, const char *const *forms)
{
    int i = 0;
    while (forms[i + 1] && canvas_cols(forms[i]) > c->w)
        i++;
    return canvas_text(c, 0, y, bar, forms[i]);
}

static void draw_footer(const dash_t *d, canvas_t *c)
{
    int y = c->h - 1;
    cv_style bar = {CV_DEFAULT, CV_DEFAULT, CV_REVERSE};
    canvas_fill(c, 0, y, c->w, 1, ' ', bar);
    if (d->busy || d->status[0]) {
        /* a long message ends in "..." before " Esc cancel " */
        int x = canvas_put_fitf(c, 0, y, d->busy ? c->w - 12 : c->w, bar, " %s", d->status);
        if (d->busy && d->progress >= 0) {
            int bw = c->w - x - 20;   /* the bar, its percentage, then " Esc cancel " */
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
    if (d->live && d->live->error[0]) {
        canvas_put_fitf(c, 0, y, c->w, bar, " poll failed: %s", d->live->error);
        return;
    }
    if (d->live) {
        char f[3][160];
        long long newer = live_newer(d->live);
        if (d->live->paused) {
            snprintf(f[0], sizeof f[0], " decisions PAUSED: space resumes (%lld newer)   1-8 "
                     "view  ? help  q quit", newer);
            snprintf(f[1], sizeof f[1], " PAUSED: space resumes (%lld newer) ? help q quit",
                     newer);
            snprintf(f[2], sizeof f[2], " PAUSED (%lld newer) ? help q quit", newer);
        } else {
            snprintf(f[0], sizeof f[0], c->w >= 100 ? " 1-8/Tab view  arrows worker  Enter "
                     "zoom  space pause  ? help  q quit   %s" : " 1-8 view arrows worker "
                     "Enter zoom space pause ? help q quit", d->live->attached
                     ? "live: polls /v1/snapshot" : "saved snapshot");
            snprintf(f[1], sizeof f[1], " 1-8 view space pause ? help q quit");
            snprintf(f[2], sizeof f[2], " ? help q quit");
        }
        const char *forms[] = {f[0], f[1], f[2], NULL};
        footer_form(c, y, bar, forms);
        return;
    }
    if (d->view == VIEW_TRADEOFF) {
        const char *forms[] = {
            c->w >= 96 ? " 1-7/Tab view  Up/Down cell  Enter apply  m metric  r recompute  "
                         "+/- tau  [/] K  ? help  q quit"
                       : " 1-7 view Up/Down cell Enter apply m metric r recompute ? help q quit",
            " 1-7 view Up/Down cell Enter apply ? help q quit",
            " 1-7 view Up/Down Enter ? help q quit", " ? help q quit", NULL};
        footer_form(c, y, bar, forms);
        return;
    }
    const char *forms[] = {
        c->w >= 90 ? " 1-7/Tab view  +/- tau  [/] K  p policy  arrows worker  Enter zoom  "
                     ", . time  ? help  q quit"
                   : " 1-7 view +- tau [] K p policy arrows worker Enter zoom ? help q quit",
        " 1-7 view +- tau [] K p policy ? help q quit", " 1-7 view +- tau ? help q quit",
        " ? help q quit", NULL};
    int x = footer_form(c, y, bar, forms);
    /* the trade-off grid computing behind another view */
    if (d->trade.state == DASH_TRADE_RUNNING && c->w - x >= 8) {
        if (d->trade.progress >= 0)
            canvas_textf(c, c->w - 8, y, bar, " 7 %3.0f%%", 100 * d->trade.progress);
        else
            canvas_text(c, c->w - 8, y, bar, " 7 fits");
    }
}

/* The answer keys on a box's bottom border, right-aligned: " y send " */
static void box_keys(canvas_t *c, int x, int y, int w, const char *keys)
{
    int n = canvas_cols(keys) + 2;
    if (*keys && n <= w - 4)
        canvas_textf(c, x + w - 2 - n, y, cv_fg(CV_DEFAULT, CV_BOLD), " %s ", keys);
}

static void draw_help(const dash_t *d, canvas_t *c)
{
    static const char *live_lines[] = {
        "1..8, Tab, S-Tab   switch view (overview balance heatmap queues scatter",
        "                   rho decisions drift)",
        "Up/Down, Left/Right  select a worker (balance, heatmap, queues)",
        "Enter              zoom on the selected worker / back",
        "space              pause / resume the decisions list (polls go on)",
        "s                  save this screen as text: eldr-frame-NNN.txt",
        "?                  this help (?, Esc or q close it)    q  quit",
        "",
        "Live mode shows what eldrd's GET /v1/snapshot says: in-flight and",
        "totals per worker, the recent decisions with their evidence, drift.",
        "Histories grow by one point per poll. tau and the model are the",
        "daemon's: change them with PUT /v1/config and PUT /v1/model.",
    };
    static const char *lines[] = {
        "1..7, Tab, S-Tab   switch view (overview balance heatmap queues scatter rho",
        "                   tradeoff; live mode has decisions and drift instead)",
        "+ / -              tau up / down by 0.05 (re-simulates)",
        "[ / ]              K down / up (refits with the model's recipe; at the",
        "                   model's own K the model itself comes back)",
        "p                  cycle the policy: eldr eldr-cost random rr jsq p2c",
        "Up/Down, Left/Right  select a worker (balance, queues; j / k too)",
        "                   heatmap: move the cell cursor; j / k the worker",
        "Enter              zoom on the selected worker / back",
        ", / .              move the time cursor ('now') in the simulation",
        "7 tradeoff         the tau x K grid (computed in the background):",
        "                   Up/Down a cell, Enter applies it, r recomputes,",
        "                   m: compare on TPOT p50, p99 or tokens/s,",
        "                   Esc cancels the grid while it computes",
        "Esc                stop the running job: refit, what-if or refine",
        "s                  save this screen as text: eldr-frame-NNN.txt",
        "P                  push the model shown to eldrd (--push-to URL): the",
        "                   plan (which worker gets which cluster) first, y sends",
        "?                  this help (?, Esc or q close it)    q  quit",
        "",
        "Numbers compare the policy with the best baseline (lowest TPOT",
        "p50 of jsq, rr, p2c; random is shown for reference) on the",
        "held-out rows; the header's changes are means over --seeds seeds,",
        "+- their 95% CI.",
    };
    const char *const *text = d->live ? live_lines : lines;
    int n = d->live ? (int)(sizeof live_lines / sizeof live_lines[0])
                    : (int)(sizeof lines / sizeof lines[0]);
    int n_keys = 0;              /* the keys: the lines before the blank one */
    while (n_keys < n && text[n_keys][0])
        n_keys++;
    if (n + 2 > c->h)            /* short of rows: the keys first, the prose goes */
        n = n_keys;
    int w = 0;
    for (int i = 0; i < n; i++)
        if ((int)strlen(text[i]) > w)
            w = (int)strlen(text[i]);
    w += 4;
    int h = n + 2;
    if (w > c->w)
        w = c->w;
    int x = (c->w - w) / 2, y = (c->h - h) / 2;
    if (y < 0)
        y = 0;
    if (h > c->h)
        h = c->h;
    /* the whole rows it covers are blanked: a box narrower than the screen
     * would leave the view's words cut at its sides (the stray characters
     * at 80 columns) */
    canvas_fill(c, 0, y, c->w, h, ' ', cv_plain());
    /* named as what it is, unlike the push question's "confirm: ..." */
    canvas_box(c, x, y, w, h, cv_fg(CV_DEFAULT, CV_BOLD), w >= 40 ? "help: keys" : "keys");
    char close[64];
    if (n > h - 2) {             /* said, not silently dropped */
        snprintf(close, sizeof close, "%d more: taller terminal; ? Esc q close", n - (h - 2));
        if (canvas_cols(close) + 6 > w)
            snprintf(close, sizeof close, "+%d lines", n - (h - 2));
    } else {
        snprintf(close, sizeof close, "? Esc q: close");
    }
    box_keys(c, x, y + h - 1, w, close);
    for (int i = 0; i < n && i < h - 2; i++)
        canvas_put_fit(c, x + 2, y + 1 + i, w - 4, cv_plain(), text[i]);
}

/* A box of its own lines, centred over the view. */
static void draw_confirm(const dash_confirm *q, canvas_t *c)
{
    int w = (int)strlen(q->title) + 6;
    for (int i = 0; i < q->n; i++)
        if ((int)strlen(q->line[i]) + 4 > w)
            w = (int)strlen(q->line[i]) + 4;
    int h = q->n + 2;
    if (w > c->w)
        w = c->w;
    if (h > c->h)
        h = c->h;
    int x = (c->w - w) / 2, y = (c->h - h) / 2;
    canvas_fill(c, 0, y, c->w, h, ' ', cv_plain());   /* whole rows, as the help's */
    canvas_box(c, x, y, w, h, cv_fg(CV_DEFAULT, CV_BOLD), q->title);
    box_keys(c, x, y + h - 1, w, q->keys);
    for (int i = 0; i < q->n && i < h - 2; i++)
        canvas_put_fit(c, x + 2, y + 1 + i, w - 4,
                       i == q->n - 1 ? cv_fg(CV_DEFAULT, CV_BOLD) : cv_plain(), q->line[i]);
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
        draw_help(d, c);
    else if (d->confirm.on)
        draw_confirm(&d->confirm, c);
}
