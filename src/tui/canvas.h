/* canvas.h - the abstract screen every dashboard view draws on.
 *
 * A canvas is a W x H grid of cells; a cell holds one character (a
 * Unicode code point, drawn one column wide) and a style (foreground and
 * background colour as a 256-colour index or CV_DEFAULT, plus bold /
 * reverse / dim). Views draw here and know nothing of curses; the canvas
 * is then either blitted to the terminal (tui_term.c) or written as plain
 * text (canvas_write_text) for `eldr dash --frame`, so a frame file shows
 * the same characters the terminal does.
 *
 * The canvas also says what the output can show: `unicode` (block
 * characters for bars and sparklines) and `colors` (0, 8 or 256). Frames
 * are ASCII with no colour; views pick ASCII ramps then. Drawing outside
 * the grid is clipped silently, so views can be written for any size. */
#ifndef ELDR_CANVAS_H
#define ELDR_CANVAS_H

#include <stdint.h>
#include <stdio.h>

#define CV_DEFAULT (-1)          /* the terminal's own colour */
enum { CV_BOLD = 1, CV_REVERSE = 2, CV_DIM = 4 };

typedef struct cv_style {
    int16_t fg, bg;              /* 0..255 or CV_DEFAULT */
    uint8_t attr;                /* CV_BOLD | CV_REVERSE | CV_DIM */
} cv_style;

typedef struct cv_cell {
    uint32_t ch;                 /* code point, ' ' when empty */
    cv_style st;
} cv_cell;

typedef struct canvas {
    int w, h;
    int unicode;                 /* 1: block glyphs allowed */
    int colors;                  /* 0, 8 or 256 */
    cv_cell *cells;              /* [h][w] */
} canvas_t;

/* A blank canvas (w, h >= 1); NULL when out of memory. */
canvas_t *canvas_new(int w, int h, int unicode, int colors);
void canvas_free(canvas_t *c);
void canvas_clear(canvas_t *c);

static inline cv_style cv_plain(void)
{
    return (cv_style){CV_DEFAULT, CV_DEFAULT, 0};
}
static inline cv_style cv_fg(int fg, int attr)
{
    return (cv_style){(int16_t)fg, CV_DEFAULT, (uint8_t)attr};
}

/* The cell at (x, y), or NULL outside. */
cv_cell *canvas_at(canvas_t *c, int x, int y);
void canvas_put(canvas_t *c, int x, int y, uint32_t ch, cv_style st);
/* UTF-8 text from (x, y) on one line; returns the columns used (text
 * that would run past the right edge is fitted to it by canvas_fit; a
 * bad byte shows as '?'). */
int canvas_text(canvas_t *c, int x, int y, cv_style st, const char *utf8);
int canvas_textf(canvas_t *c, int x, int y, cv_style st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Text word-wrapped into w columns from (x, y), at most max_lines lines
 * (a word longer than w is cut, ending in "..."; words that do not fit
 * in max_lines are marked by "..." after the last whole one when it has
 * room); returns the lines used. So a legend or a sentence fits a side
 * panel instead of running off its edge. */
int canvas_wrap(canvas_t *c, int x, int y, int w, int max_lines, cv_style st, const char *utf8);
void canvas_fill(canvas_t *c, int x, int y, int w, int h, uint32_t ch, cv_style st);
/* A box outline with an optional title on its top edge. */
void canvas_box(canvas_t *c, int x, int y, int w, int h, cv_style st, const char *title);

/* A horizontal bar of `width` columns filled to frac (0..1), in eighths
 * of a cell with Unicode, '#' otherwise; the rest is blank. */
void canvas_hbar(canvas_t *c, int x, int y, int width, double frac, cv_style st);
/* One sparkline character for a level in [0, 1]: ' ' and eight blocks
 * with Unicode, the ramp " .-=+*#" otherwise. */
uint32_t canvas_spark(const canvas_t *c, double level);
/* One heat character for a level in [0, 1] on the ASCII ramp
 * " .:-=+*#%@", used wherever colour is not available: ' ' for exactly 0
 * (nothing), '.' to '@' in nine steps over (0, 1]. */
uint32_t canvas_ramp(double level);
extern const char CANVAS_RAMP[];

/* ---- text that must fit a width: every view's one rule ----
 *
 * Shortened text ends (or, for canvas_fit_tail, starts) with
 * CANVAS_ELLIPSIS, so a reader (and a check over a captured screen) can
 * tell a cut from a whole word. A number is never cut: "0.16" for 0.161
 * would be a different number, so a number that does not fit is dropped
 * whole. The string forms work in place (the result is never longer)
 * and count columns, not bytes (UTF-8). */
#define CANVAS_ELLIPSIS "..."
/* s fitted into w columns: left whole when it fits; else cut at the last
 * blank (or comma: a list "0,1,2...") that leaves room for the ellipsis
 * (the separators , ; : | ( before it dropped), so no word or number is cut; with no blank to cut at, a
 * first word holding a digit is dropped whole, any other word cut.
 * Returns the columns of the result. */
int canvas_fit(char *s, int w);
/* The same keeping the end: "...8163-591", for ids whose distinguishing
 * part is their tail (request ids that share a prefix). */
int canvas_fit_tail(char *s, int w);
/* A URL cut in the middle: "decode-1.vl...:8000" keeps the host's start
 * and the port whole; without a port (or no room for one) the start. */
int canvas_fit_url(char *s, int w);
/* Draw utf8 at (x, y) fitted into w columns (canvas_fit); returns the
 * columns used. */
int canvas_put_fit(canvas_t *c, int x, int y, int w, cv_style st, const char *utf8);
int canvas_put_fitf(canvas_t *c, int x, int y, int w, cv_style st, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Columns a UTF-8 string takes (one a code point). */
int canvas_cols(const char *utf8);

/* The grid as text: one line per row, trailing blanks trimmed, UTF-8.
 * Returns 0, or -1 when the write fails. */
int canvas_write_text(const canvas_t *c, FILE *f);
/* The same into a malloc'd NUL-terminated string (NULL on no memory). */
char *canvas_to_string(const canvas_t *c);

#endif
