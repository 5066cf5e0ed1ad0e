/* tui.h - the dashboard's front ends: the interactive ncurses session and
 * the one-frame text output (`eldr dash ... --frame FILE`). Both draw the
 * same canvas with dash_render (dash.h). */
#ifndef ELDR_TUI_H
#define ELDR_TUI_H

#include <stddef.h>

#include "dash.h"

/* What the user sees first (or in the frame). policy / tau / K apply as
 * what-if changes after opening; tau < 0 and K <= 0 keep the model's. */
typedef struct tui_start {
    int view, worker, zoom, help;
    int metric;                  /* the trade-off view's (trade_metric) */
    int cell_l, cell_e;          /* heatmap cursor (layer, expert); clamped */
    route_kind policy;
    double tau;
    int K;
    int first;                   /* the frame: the first look, not refined */
} tui_start;
void tui_start_default(tui_start *s);

/* Open synchronously, apply the start settings, refine them (every
 * simulated row, opts.seeds seeds; s->first: not, the frame is the first
 * look and its footer says what it rests on), render one w x h frame
 * as ASCII text into *text (malloc'd). The dashboard is left in d for
 * the caller (JSON output) to read and free. */
int tui_frame(const dash_opts *o, const tui_start *s, int w, int h, dash_t *d, char **text,
              char *err, size_t errlen);

/* The same on a trace already loaded (t and m, which may be NULL, are
 * taken over): for the Lua module. */
int tui_frame_trace(const dash_opts *o, const tui_start *s, trace_t *t, model_t *m, int w,
                    int h, dash_t *d, char **text, char *err, size_t errlen);

/* Live mode: a running eldrd (url) or a saved snapshot (snapshot_path). */
typedef struct tui_live {
    const char *url;             /* --attach URL, or NULL */
    const char *snapshot_path;   /* --router-snapshot FILE, or NULL */
    double interval_s;           /* between polls (LIVE_DEFAULT_INTERVAL) */
    double timeout_s;            /* of each HTTP call */
} tui_live;

/* One live frame: one poll (or the saved snapshot), rendered like
 * tui_frame. d is left for the caller to read and free. */
int tui_frame_live(const tui_live *o, const tui_start *s, int w, int h, dash_t *d,
                   char **text, char *err, size_t errlen);

/* The interactive session on the terminal. The trace and model are loaded
 * before the terminal is touched (so bad input fails cleanly); the fit
 * and simulations then run in the background with progress shown.
 * Returns 0 when the user quits, -1 with err on a failure, or 128 + the
 * signal number after SIGINT/SIGTERM (the terminal is restored first on
 * every path). */
int tui_run(const dash_opts *o, const tui_start *s, char *err, size_t errlen);
/* The same on a trace already loaded (t and m, which may be NULL, are
 * taken over): for the Lua module's eldr.dash(trace). */
int tui_run_trace(const dash_opts *o, const tui_start *s, trace_t *t, model_t *m, char *err,
                  size_t errlen);
/* Live: the first poll happens before the terminal is touched, so an
 * unreachable daemon or a bad snapshot fails cleanly (-1 with err);
 * later failed polls show in the header and are retried. */
int tui_run_live(const tui_live *o, const tui_start *s, char *err, size_t errlen);

#endif
