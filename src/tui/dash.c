/* dash.c - the interactive dashboard: terminal setup and restore, the
 * event loop, keys, and the blit of the canvas to ncurses; plus the
 * one-frame path (tui.h). State lives in dash_t (dash.h); slow work runs
 * on the what-if thread (whatif.h), and in live mode the network on the
 * poller thread (live.h), so the loop only ever waits for keys (100 ms at
 * a time) and draws. */
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "dash_tokens.h"
#include "frame_file.h"
#include "kmeans.h"
#include "live.h"
#include "sha256.h"
#include "push_key.h"
#include "tradeoff.h"
#include "tui.h"
#include "whatif.h"

/* a push waits at most this long for eldrd, each call (key P) */
#define PUSH_KEY_TIMEOUT_S 10.0

#define TAU_STEP 0.05
#define TAU_MAX ROUTE_TAU_MAX
#define CURSOR_STEP 0.05
#define KEY_ESC 27

/* p cycles them: eldr, the cost rule, then the baselines */
static const route_kind POLICIES[] = {ROUTE_ELDR, ROUTE_ELDR_COST, ROUTE_RANDOM, ROUTE_RR,
                                      ROUTE_JSQ, ROUTE_P2C};
#define N_POLICIES ((int)(sizeof POLICIES / sizeof POLICIES[0]))

int dash_policy_shown(route_kind k)
{
    for (int i = 0; i < N_POLICIES; i++)
        if (POLICIES[i] == k)
            return 1;
    return 0;
}

void tui_start_default(tui_start *s)
{
    memset(s, 0, sizeof *s);
    s->view = VIEW_OVERVIEW;
    s->policy = ROUTE_ELDR;
    s->tau = -1;
}

/* ---- loading ---- */

typedef struct hasher {
    const char *path;
    char hex[SHA256_HEX];
    int rc;
} hasher;

static void *hash_main(void *arg)
{
    hasher *h = arg;
    char err[ELDR_ERRLEN];
    h->rc = sha256_file(h->path, h->hex, err, sizeof err);
    return NULL;
}

/* The trace (its decode token rows left in the file: *reads, as
 * dash_load_trace) and the model, with the file's SHA-256 (the cache's key, the
 * in-sample check) read on a second thread meanwhile: on a 166 MB trace
 * the digest costs 1.4 s that the load would otherwise wait for. sha gets
 * the digest, or "" when it was not wanted or failed. */
static int load_inputs(const dash_opts *o, trace_t **t, model_t **m, char sha[SHA256_HEX],
                       int *reads, char *err, size_t errlen)
{
    hasher h = {.path = o->trace_path, .rc = -1};
    pthread_t th;
    int hashing = (!o->no_cache || o->model_path) &&
                  !pthread_create(&th, NULL, hash_main, &h);
    int rc = dash_load_trace(o->trace_path, t, reads, err, errlen);
    if (!rc && o->model_path && model_load(o->model_path, m, err, errlen)) {
        trace_free(*t);
        *t = NULL;
        rc = -1;
    }
    if (hashing)
        pthread_join(th, NULL);
    snprintf(sha, SHA256_HEX, "%s", hashing && h.rc == 0 ? h.hex : "");
    return rc;
}

/* ---- one frame ---- */

static void apply_view(dash_t *d, const tui_start *s)
{
    d->view = s->view;
    d->zoom = s->zoom;
    d->help = s->help;
    d->trade_metric = s->metric;
    int K = d->live ? d->live->now.K : d->fit ? d->fit->model->K : 1;
    d->worker = s->worker < K ? s->worker : K - 1;
    d->hl = s->cell_l < d->L ? s->cell_l : d->L - 1;
    d->he = s->cell_e < d->E ? s->cell_e : d->E - 1;
    d->hl = d->hl < 0 ? 0 : d->hl;
    d->he = d->he < 0 ? 0 : d->he;
    if (dash_view_tab(d, d->view) < 0)
        d->view = VIEW_OVERVIEW;
}

static int render_text(const dash_t *d, int w, int h, char **text, char *err, size_t errlen)
{
    canvas_t *c = canvas_new(w, h, 0, 0);
    if (!c)
        return eldr_errf(err, errlen, "dash: cannot make a %d x %d frame", w, h);
    dash_render(d, c);
    *text = canvas_to_string(c);
    canvas_free(c);
    return *text ? 0 : eldr_errf(err, errlen, "dash: out of memory for the frame");
}

int tui_frame_live(const tui_live *o, const tui_start *s, int w, int h, dash_t *d,
                   char **text, char *err, size_t errlen)
{
    *text = NULL;
    if (o->snapshot_path) {
        if (live_open_file(d, o->snapshot_path, err, errlen))
            return -1;
    } else {
        live_t *l = NULL;
        if (live_attach(d, o->url, o->interval_s, o->timeout_s, &l, err, errlen))
            return -1;
        live_stop(l);   /* never started: one poll is the frame */
    }
    apply_view(d, s);
    return render_text(d, w, h, text, err, errlen);
}

/* After the open: apply the start settings (a what-if change when they
 * differ from the model's), then render. */
static int frame_of(dash_t *d, const tui_start *s, int w, int h, char **text, char *err,
                    size_t errlen)
{
    int K = s->K > 0 ? s->K : d->fit->model->K;
    double tau = s->tau >= 0 ? s->tau : d->tau;
    /* a first look of other settings is a what-if change; a refined frame
     * needs one only for another K (the refit) */
    if (K != d->fit->model->K ||
        (s->first && (tau != d->tau || s->policy != d->policy))) {
        whatif_t wf;
        whatif_init(&wf);
        int rc = whatif_start_change(&wf, d, K, s->policy, tau);
        if (!rc)
            rc = whatif_collect(&wf);
        if (rc)
            snprintf(err, errlen, "%s", wf.err);
        whatif_destroy(&wf);
        if (rc)
            return -1;
    }
    d->tau = tau;
    d->policy = s->policy;
    if (!s->first && (!d->refined || d->cur->policy != s->policy ||
                      (s->policy == ROUTE_ELDR && d->cur->tau != tau))) {
        dash_refined r;
        if (dash_refine(d, d->fit->model, s->policy, tau, NULL, NULL, NULL, &r, err, errlen))
            return -1;
        dash_refined_apply(d, &r);
        dash_trail_add(d);
    }
    if (!d->refined) {   /* a first look says what it rests on */
        char on[160];
        dash_rests_on(d, on, sizeof on);
        snprintf(d->status, sizeof d->status, "%s (without --first: refined)", on);
    } else if (d->cache_note[0]) {
        snprintf(d->status, sizeof d->status, "%s", d->cache_note);
    }
    apply_view(d, s);
    /* a frame is complete: the trade-off grid is computed before it */
    if (d->view == VIEW_TRADEOFF && tradeoff_compute(d, s->first, NULL, err, errlen))
        return -1;
    return render_text(d, w, h, text, err, errlen);
}

int tui_frame(const dash_opts *o, const tui_start *s, int w, int h, dash_t *d, char **text,
              char *err, size_t errlen)
{
    *text = NULL;
    memset(d, 0, sizeof *d);   /* the caller frees it on every path */
    trace_t *t = NULL;
    model_t *m = NULL;
    char sha[SHA256_HEX];
    int reads = 0;
    if (load_inputs(o, &t, &m, sha, &reads, err, errlen))
        return -1;
    dash_opts oo = *o;
    oo.sha256 = sha;
    oo.read_tokens = reads;
    return tui_frame_trace(&oo, s, t, m, w, h, d, text, err, errlen);
}

int tui_frame_trace(const dash_opts *o, const tui_start *s, trace_t *t, model_t *m, int w,
                    int h, dash_t *d, char **text, char *err, size_t errlen)
{
    *text = NULL;
    dash_opts oo = *o;
    /* a refined frame refines at once: no first look's runs (another K's
     * refit makes its own) */
    oo.no_first = !s->first;
    int rc = dash_open_first(d, &oo, t, m, NULL, NULL, err, errlen) ? -1
             : frame_of(d, s, w, h, text, err, errlen);
    if (rc)
        dash_tokens_name_err(d, err, errlen);
    return rc;
}

/* ---- terminal ---- */

static volatile sig_atomic_t g_signal;
static int g_curses_on;

static void on_signal(int sig)
{
    g_signal = sig;   /* the loop notices within one key timeout */
}

static void restore_terminal(void)
{
    if (g_curses_on) {
        g_curses_on = 0;
        endwin();
    }
}

/* Colour pairs allocated on demand for (fg, bg). */
typedef struct pairs {
    int n, max;
    int16_t fg[1024], bg[1024];
} pairs;

static int pair_of(pairs *p, int colors, int fg, int bg)
{
    if (!colors || (fg == CV_DEFAULT && bg == CV_DEFAULT))
        return 0;
    if (colors < 256) {   /* fold the 256-colour indices onto 8 */
        fg = fg == CV_DEFAULT || fg < 8 ? fg : 1 + fg % 6;
        bg = bg == CV_DEFAULT || bg < 8 ? bg : 1 + bg % 6;
    }
    for (int i = 0; i < p->n; i++)
        if (p->fg[i] == fg && p->bg[i] == bg)
            return i + 1;
    if (p->n >= p->max)
        return 0;
    init_pair((short)(p->n + 1), (short)fg, (short)bg);
    p->fg[p->n] = (int16_t)fg;
    p->bg[p->n] = (int16_t)bg;
    return ++p->n;
}

static void blit(const canvas_t *c, pairs *p)
{
    for (int y = 0; y < c->h; y++)
        for (int x = 0; x < c->w; x++) {
            const cv_cell *cell = &c->cells[(size_t)y * c->w + x];
            attr_t a = A_NORMAL;
            if (cell->st.attr & CV_BOLD)
                a |= A_BOLD;
            if (cell->st.attr & CV_REVERSE)
                a |= A_REVERSE;
            if (cell->st.attr & CV_DIM)
                a |= A_DIM;
            wchar_t wc[2] = {(wchar_t)cell->ch, 0};
            cchar_t cc;
            setcchar(&cc, wc, a, (short)pair_of(p, c->colors, cell->st.fg, cell->st.bg), NULL);
            mvwadd_wch(stdscr, y, x, &cc);   /* the last cell may fail: no scroll */
        }
    wnoutrefresh(stdscr);
    doupdate();
}

static int term_colors(void)
{
    if (!has_colors() || start_color() == ERR)
        return 0;
    use_default_colors();
    return COLORS >= 256 ? 256 : COLORS >= 8 ? 8 : 0;
}

/* ---- the session ---- */

typedef struct session {
    dash_t d;
    dash_t shell;                /* drawn while the open job fills d */
    whatif_t wf;
    int ready;                   /* d is open */
    int K;                       /* wanted K (d->fit's once collected) */
    canvas_t *c;
    int unicode, colors;
    pairs pr;
    int quit;
    tui_start start;
    live_t *live;                /* live mode: the poller (d.live is set) */
    tradeoff_job tj;             /* the trade-off grid (view 7) */
    int refine_off;              /* Esc stopped a job: no refine starts by
                                  * itself until the next change */
    dash_push push;              /* key P (--push-to) */
} session;

static int current_K(const session *s)
{
    return s->d.live ? s->d.live->now.K : s->d.fit ? s->d.fit->model->K : 0;
}

/* Start a change job when what is wanted differs from what is shown;
 * else refine what is shown (every row, the seeds) unless it is refined
 * or Esc stopped the last job. */
static void kick(session *s)
{
    dash_t *d = &s->d;
    if (!s->ready || s->wf.running || !d->cur || d->live)
        return;
    if (s->K == current_K(s) && d->policy == d->cur->policy &&
        (d->policy != ROUTE_ELDR || fabs(d->tau - d->cur->tau) < 1e-12)) {
        if (d->refined || s->refine_off)
            return;
        if (whatif_start_refine(&s->wf, d)) {
            snprintf(d->status, sizeof d->status, "%s", s->wf.err);
            return;
        }
        d->busy = 1;
        d->progress = -1;
        snprintf(d->status, sizeof d->status, "refine");
        return;
    }
    if (whatif_start_change(&s->wf, d, s->K, d->policy, d->tau)) {
        snprintf(d->status, sizeof d->status, "%s", s->wf.err);
        return;
    }
    s->refine_off = 0;           /* a new setting: refine it once it shows */
    d->busy = 1;
    snprintf(d->status, sizeof d->status, "%s", s->K != current_K(s) ? "refit" : "simulate");
}

/* Esc stopped a job: what is wanted goes back to what is shown, so the
 * loop does not start the cancelled change again (issue 30: tau 0.10 ->
 * 0.15 was restarted at once), and no refine starts by itself. */
static void cancelled(session *s, whatif_kind kind)
{
    dash_t *d = &s->d;
    char on[160];
    s->refine_off = 1;
    s->K = current_K(s);
    if (d->cur) {
        d->policy = d->cur->policy;
        if (d->cur->policy == ROUTE_ELDR)
            d->tau = d->cur->tau;
    }
    dash_rests_on(d, on, sizeof on);
    snprintf(d->status, sizeof d->status, "%s cancelled; shown: %s",
             kind == WHATIF_REFINE ? "refine" : "what-if", on);
}

/* The trade-off grid starts when its view is first shown (it costs a few
 * seconds of both cores, so not before anyone asks), or on `r`. */
static void trade_start(session *s)
{
    dash_t *d = &s->d;
    if (!s->ready || d->live || s->tj.running)
        return;
    if (tradeoff_job_start(&s->tj, d))
        snprintf(d->status, sizeof d->status, "trade-off: %s", s->tj.err);
}

static void trade_poll(session *s)
{
    if (!s->tj.running || !tradeoff_job_poll(&s->tj, &s->d))
        return;
    if (tradeoff_job_collect(&s->tj, &s->d) == -1)
        snprintf(s->d.status, sizeof s->d.status, "trade-off grid failed: %s", s->d.trade.err);
}

static void view_shown(session *s)
{
    if (s->ready && s->d.view == VIEW_TRADEOFF && s->d.trade.state == DASH_TRADE_NONE)
        trade_start(s);
}

/* Keys of the trade-off view: a cell under the cursor, Enter applies it
 * as +/-/[/] would (the what-if job refits and re-simulates; the trail
 * keeps the setting it replaces). Returns 1 when the key was its. */
static int trade_key(session *s, int ch)
{
    dash_t *d = &s->d;
    dash_trade *t = &d->trade;
    /* Esc here stops the grid first (what this view shows computing); a
     * second Esc the what-if job */
    if (ch == KEY_ESC && s->tj.running && !s->tj.cancel) {
        tradeoff_job_cancel(&s->tj);   /* its simulations poll the flag */
        return 1;
    }
    if (ch == 'r' || ch == 'R') {
        if (s->tj.running)
            snprintf(d->status, sizeof d->status, "trade-off: already computing");
        else
            trade_start(s);
        return 1;
    }
    if (ch == 'm' || ch == 'M') {   /* the metric the cells compare on */
        d->trade_metric = (d->trade_metric + 1) % TRADE_N_METRICS;
        return 1;
    }
    if (t->state != DASH_TRADE_DONE)
        return 0;
    int rows[TRADE_MAX_ROWS];
    int n = tradeoff_eldr_rows(&t->g, rows, TRADE_MAX_ROWS);
    if (n < 1)
        return 0;
    switch (ch) {
    case KEY_UP: case 'k':
        t->cursor = t->cursor > 0 ? t->cursor - 1 : n - 1;
        return 1;
    case KEY_DOWN: case 'j':
        t->cursor = t->cursor + 1 < n ? t->cursor + 1 : 0;
        return 1;
    case '\n': case '\r': case KEY_ENTER: {
        const grid_row *r = &t->g.rows[rows[t->cursor < n ? t->cursor : 0]];
        s->K = r->K;
        if (r->kind == ROUTE_ELDR_COST)   /* the cost rule has no tau: it stays */
            d->policy = ROUTE_ELDR_COST;
        else {
            d->tau = r->tau;
            d->policy = ROUTE_ELDR;
        }
        kick(s);
        return 1;
    }
    default:
        return 0;
    }
}

static int poll_job(session *s, char *err, size_t errlen)
{
    dash_t *d = s->ready ? &s->d : &s->shell;
    if (!s->wf.running)
        return 0;
    if (!whatif_done(&s->wf)) {
        char stage[64], on[160];
        whatif_progress(&s->wf, stage, sizeof stage, &d->progress);
        snprintf(d->status, sizeof d->status, "%s", stage);
        if (s->ready && s->K != current_K(s))
            snprintf(d->status, sizeof d->status, "refit K=%d: %s", s->K, stage);
        else if (s->ready && s->wf.kind == WHATIF_REFINE) {
            /* short, so that the bar fits at 80 columns */
            const dash_rows *r = &d->rows[DASH_LEVEL_FIRST];
            if (d->level == DASH_LEVEL_FIRST && r->t)
                snprintf(on, sizeof on, "first look %lld/%lld rows", (long long)r->t->n,
                         (long long)d->eval->n);
            else
                snprintf(on, sizeof on, "%lld rows", (long long)d->eval->n);
            snprintf(d->status, sizeof d->status, "%s, 1 seed; refining: %s", on, stage);
        }
        return 0;
    }
    whatif_kind kind = s->wf.kind;
    int rc = whatif_collect(&s->wf);
    if (kind == WHATIF_OPEN) {
        if (rc) {
            snprintf(err, errlen, "%s", s->wf.err);
            return -1;
        }
        s->ready = 1;
        s->d.view = s->shell.view;
        tui_start st = s->start;
        st.view = s->shell.view;
        apply_view(&s->d, &st);
        s->K = st.K > 0 ? st.K : current_K(s);
        s->d.policy = st.policy;
        if (st.tau >= 0)
            s->d.tau = st.tau;
        s->d.progress = -1;
        snprintf(s->d.status, sizeof s->d.status, "%s", s->d.cache_note);
        s->d.cache_note[0] = '\0';
        view_shown(s);
    } else {
        d->busy = 0;
        d->progress = -1;
        if (rc == WHATIF_CANCELLED) {
            cancelled(s, kind);
        } else if (rc) {
            s->K = current_K(s);
            snprintf(d->status, sizeof d->status, "%s failed: %s", kind == WHATIF_REFINE
                     ? "refine" : "what-if", s->wf.err);
            s->refine_off = 1;   /* the same job would fail the same way */
        } else {
            snprintf(d->status, sizeof d->status, "%s", d->cache_note);
            d->cache_note[0] = '\0';
        }
        if (d->worker >= current_K(s))
            d->worker = current_K(s) - 1;
    }
    kick(s);
    return 0;
}

static void cycle_view(dash_t *d, int step)
{
    int n = dash_n_views(d), i = dash_view_tab(d, d->view);
    d->view = dash_view_at(d, ((i < 0 ? 0 : i) + step + n) % n);
}

static void key(session *s, int ch)
{
    dash_t *d = s->ready ? &s->d : &s->shell;
    /* q in the help overlay closes the overlay, as a pager's q does */
    if (d->help && (ch == '?' || ch == KEY_ESC || ch == 'q' || ch == 'Q')) {
        d->help = 0;
        return;
    }
    /* the push's question takes the next key: y sends, any other keeps */
    if (d->confirm.on) {
        dash_push_answer(&s->push, d, ch == 'y' || ch == 'Y');
        return;
    }
    if (ch == 'q' || ch == 'Q') {
        s->quit = 1;
        return;
    }
    if (ch == 's') {   /* the screen as last drawn: what the user sees */
        frame_file_key(s->c, d->status, sizeof d->status);
        return;
    }
    if (ch >= '1' && ch < '1' + dash_n_views(d))
        d->view = dash_view_at(d, ch - '1');
    else if (ch == '\t')
        cycle_view(d, 1);
    else if (ch == KEY_BTAB)
        cycle_view(d, -1);
    else if (ch == '?')
        d->help = 1;
    if (!s->ready)
        return;
    view_shown(s);
    if (d->view == VIEW_TRADEOFF && !d->live && trade_key(s, ch))
        return;
    if (ch == KEY_ESC && s->wf.running) {
        whatif_cancel(&s->wf);
        return;
    }
    int K = current_K(s);
    if (d->live && ch == ' ') {   /* hold the decisions still to read them */
        live_pause(d->live, !d->live->paused);
        return;
    }
    if (ch == 'P' && !d->live) {
        dash_push_ask(&s->push, d);
        return;
    }
    if (d->live && strchr("+=-_[]pP,<.>", ch) && ch) {
        snprintf(d->status, sizeof d->status, "live: tau and the model are the daemon's "
                 "(PUT /v1/config, PUT /v1/model)");
        return;
    }
    if (d->view == VIEW_HEATMAP && !d->live) {
        /* the heatmap's arrows move its cell cursor; j / k still pick
         * the worker whose matrix it is */
        int moved = 1;
        if (ch == KEY_UP)
            d->hl = d->hl > 0 ? d->hl - 1 : d->L - 1;
        else if (ch == KEY_DOWN)
            d->hl = d->hl + 1 < d->L ? d->hl + 1 : 0;
        else if (ch == KEY_LEFT)
            d->he = d->he > 0 ? d->he - 1 : d->E - 1;
        else if (ch == KEY_RIGHT)
            d->he = d->he + 1 < d->E ? d->he + 1 : 0;
        else
            moved = 0;
        if (moved)
            return;
    }
    switch (ch) {
    case '+': case '=':
        d->tau = fmin(TAU_MAX, d->tau + TAU_STEP);
        break;
    case '-': case '_':
        d->tau = fmax(0.0, d->tau - TAU_STEP);
        break;
    case '[':
        s->K = s->K > 1 ? s->K - 1 : 1;
        break;
    case ']':
        s->K = s->K < DASH_K_MAX ? s->K + 1 : DASH_K_MAX;
        break;
    case 'p': {
        int i = 0;
        while (i < N_POLICIES && POLICIES[i] != d->policy)
            i++;
        d->policy = POLICIES[(i + 1) % N_POLICIES];
        break;
    }
    case KEY_UP: case KEY_LEFT: case 'k':
        d->worker = d->worker > 0 ? d->worker - 1 : K - 1;
        break;
    case KEY_DOWN: case KEY_RIGHT: case 'j':
        d->worker = d->worker + 1 < K ? d->worker + 1 : 0;
        break;
    case '\n': case '\r': case KEY_ENTER:
        d->zoom = !d->zoom;
        break;
    case ',': case '<':
        d->cursor = fmax(0.0, d->cursor - CURSOR_STEP);
        break;
    case '.': case '>':
        d->cursor = fmin(1.0, d->cursor + CURSOR_STEP);
        break;
    default:
        break;
    }
    kick(s);
}

static int resize_canvas(session *s)
{
    canvas_free(s->c);
    int w = COLS > 0 ? COLS : 80, h = LINES > 0 ? LINES : 24;
    s->c = canvas_new(w, h, s->unicode, s->colors);
    return s->c ? 0 : -1;
}

static void draw(session *s)
{
    canvas_t *c = s->c;
    if (c->w < 40 || c->h < 10) {
        canvas_clear(c);
        canvas_text(c, 0, 0, cv_plain(), "eldr dash: terminal too small (40x10 at least)");
    } else {
        dash_render(s->ready ? &s->d : &s->shell, c);
    }
    blit(c, &s->pr);
}

static int loop(session *s, char *err, size_t errlen)
{
    while (!s->quit && !g_signal) {
        int ch = getch();
        if (ch == KEY_RESIZE) {
            if (resize_canvas(s))
                return eldr_errf(err, errlen, "dash: out of memory on resize");
            clearok(curscr, TRUE);   /* repaint everything: no garbage */
        } else if (ch != ERR) {
            key(s, ch);
        }
        if (poll_job(s, err, errlen))
            return -1;
        trade_poll(s);
        if (s->live)
            live_update(s->live, &s->d);
        draw(s);
    }
    return 0;
}

static void session_setup_terminal(session *s)
{
    s->unicode = !strcmp(nl_langinfo(CODESET), "UTF-8");
    initscr();
    g_curses_on = 1;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    timeout(100);
    s->colors = term_colors();
    s->pr.max = COLOR_PAIRS - 1 < 1024 ? COLOR_PAIRS - 1 : 1024;
    if (s->pr.max < 0)
        s->pr.max = 0;
}

/* The session's handlers; the caller's (the Lua REPL's, say) are put
 * back when it ends. */
static const int SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction g_old[3];

static void install_signals(void)
{
    static int registered;
    if (!registered++)
        atexit(restore_terminal);
    g_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(SIGNALS[i], &sa, &g_old[i]);
}

static void restore_signals(void)
{
    for (int i = 0; i < 3; i++)
        sigaction(SIGNALS[i], &g_old[i], NULL);
}

int tui_run(const dash_opts *o, const tui_start *st, char *err, size_t errlen)
{
    trace_t *t = NULL;
    model_t *m = NULL;
    char sha[SHA256_HEX];
    int reads = 0;
    if (load_inputs(o, &t, &m, sha, &reads, err, errlen))
        return -1;
    dash_opts oo = *o;
    oo.sha256 = sha;
    oo.read_tokens = reads;
    return tui_run_trace(&oo, st, t, m, err, errlen);
}

int tui_run_trace(const dash_opts *o, const tui_start *st, trace_t *t, model_t *m, char *err,
                  size_t errlen)
{
    session *s = calloc(1, sizeof *s);
    if (!s) {
        trace_free(t);
        model_free(m);
        return eldr_errf(err, errlen, "dash: out of memory");
    }
    s->start = *st;
    if (dash_push_open(&s->push, o->push_to, o->push_token_file, PUSH_KEY_TIMEOUT_S, err,
                       errlen) < 0) {
        free(s);
        trace_free(t);
        model_free(m);
        return -1;
    }
    s->shell.view = st->view;
    s->shell.busy = 1;
    s->shell.progress = -1;
    snprintf(s->shell.trace_name, sizeof s->shell.trace_name, "%s",
             o->trace_path ? o->trace_path : "trace");
    snprintf(s->shell.status, sizeof s->shell.status, "opening");
    whatif_init(&s->wf);
    tradeoff_job_init(&s->tj);

    setlocale(LC_ALL, "");
    install_signals();
    session_setup_terminal(s);

    int rc = -1;
    if (resize_canvas(s))
        eldr_errf(err, errlen, "dash: out of memory for the screen");
    else if (whatif_start_open(&s->wf, &s->d, o, t, m))
        eldr_errf(err, errlen, "%s", s->wf.err);
    else
        rc = loop(s, err, errlen);
    restore_terminal();
    if (s->tj.running) {   /* the grid stops at its next cell */
        tradeoff_job_cancel(&s->tj);
        tradeoff_job_collect(&s->tj, &s->d);
    }

    int detached = 0;
    if (s->wf.running) {
        /* an open job (the default fit) cannot be cancelled midway: leave
         * it to the process exit rather than free what it is using */
        whatif_cancel(&s->wf);
        if (s->wf.kind == WHATIF_OPEN)
            detached = 1;
        else
            whatif_collect(&s->wf);
    }
    restore_signals();
    canvas_free(s->c);
    dash_push_close(&s->push);
    if (!detached) {
        dash_free(&s->d);
        whatif_destroy(&s->wf);
        tradeoff_job_destroy(&s->tj);
        free(s);
    }
    if (rc == 0 && g_signal)
        rc = 128 + g_signal;
    return rc;
}

int tui_run_live(const tui_live *o, const tui_start *st, char *err, size_t errlen)
{
    session *s = calloc(1, sizeof *s);
    if (!s)
        return eldr_errf(err, errlen, "dash: out of memory");
    int rc = o->snapshot_path
                 ? live_open_file(&s->d, o->snapshot_path, err, errlen)
                 : live_attach(&s->d, o->url, o->interval_s, o->timeout_s, &s->live, err,
                               errlen);
    if (!rc && s->live)
        rc = live_start(s->live, err, errlen);
    if (rc) {
        live_stop(s->live);
        dash_free(&s->d);
        free(s);
        return -1;
    }
    s->start = *st;
    s->ready = 1;
    apply_view(&s->d, st);
    whatif_init(&s->wf);
    tradeoff_job_init(&s->tj);

    setlocale(LC_ALL, "");
    install_signals();
    session_setup_terminal(s);
    rc = -1;
    if (resize_canvas(s))
        eldr_errf(err, errlen, "dash: out of memory for the screen");
    else
        rc = loop(s, err, errlen);
    restore_terminal();

    restore_signals();
    live_stop(s->live);
    canvas_free(s->c);
    dash_free(&s->d);
    whatif_destroy(&s->wf);
    tradeoff_job_destroy(&s->tj);
    free(s);
    if (rc == 0 && g_signal)
        rc = 128 + g_signal;
    return rc;
}
