/* view_util.h - what the dashboard's views share (view_util.c): colours,
 * the change format, sparklines, restart marks, worker names and the
 * drift verdict. */
#ifndef ELDR_VIEW_UTIL_H
#define ELDR_VIEW_UTIL_H

#include "dash.h"

/* The drift verdict every view states the same way (the drift view's
 * first line, the overview's last): "drift: TVD 0.161 > threshold 0.061
 * (99% noise, n 600): DRIFT", "... <= ...: within noise", or why there
 * is no verdict; never a NaN. Returns which (DRIFT_OVER only when the
 * TVD passes the threshold); a line with a TVD starts "drift: TVD ". */
enum { DRIFT_NO_TVD = -2, DRIFT_NO_THRESHOLD = -1, DRIFT_WITHIN = 0, DRIFT_OVER = 1 };
int dash_drift_verdict(const dash_live_now *n, char *buf, size_t len);

int dash_cluster_color(int k);                 /* a 256-colour index */
/* Heat colour for a level in [0,1] (256 colours: a blue-white-red scale
 * centred at 0.5; 8 colours: blue/default/red). */
int dash_heat_color(const canvas_t *c, double level);
/* "+3.2%" / "-1.0%" change of a against b (a lower-is-better metric). */
void dash_fmt_change(char *buf, size_t n, double a, double b);
/* A sparkline of n values over width columns, scaled to top (values
 * are averaged per column; NaN shows blank). */
void dash_sparkline(canvas_t *c, int x, int y, int width, const float *row, int n,
                    double top, int mark, int color);
/* Live: over a history of the newest m polls drawn one column each from
 * x, a '!' at each poll that found the daemon restarted; returns how many
 * it drew. */
int dash_restart_marks(const dash_t *d, canvas_t *c, int x, int y, int m);
/* Worker name of cluster w (the daemon's names in live mode). */
const char *dash_worker_name(const dash_t *d, int w);
/* The same fitted into width columns for a table: its tail kept
 * ("...alpha-07"), since names of one fleet share their start; in buf. */
const char *dash_worker_label(const dash_t *d, int w, int width, char *buf, size_t n);

#endif
