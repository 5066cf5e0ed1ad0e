/* progress_bar.c - the one progress bar of the `eldr` commands (cli.h):
 * fit, rho --layers auto, gen, sim and replay draw through it, so they
 * look alike and all stay silent when stderr is not a terminal. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define BAR_WIDTH 24
#define REDRAW_S 0.05   /* a terminal needs no more than ~20 redraws a second */

void cli_progress_start(cli_progress *p, const char *label)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->tty = isatty(STDERR_FILENO);
    p->last_pct = -1;
    p->t0 = p->t_stage = cli_now();
    p->last_draw = -1;
}

/* "\r" + the line + erase-to-end-of-line: a shorter line leaves no tail
 * of the previous one. */
static void draw(cli_progress *p, const char *what, double frac, const char *counts,
                 const char *rate)
{
    char bar[BAR_WIDTH + 4] = "";
    int fill = (int)(frac * BAR_WIDTH + 0.5);
    if (fill < 0)
        fill = 0;
    if (fill > BAR_WIDTH)
        fill = BAR_WIDTH;
    if (frac >= 0) { /* " [####....]"; no bar without a total */
        bar[0] = ' ';
        bar[1] = '[';
        memset(bar + 2, '#', (size_t)fill);
        memset(bar + 2 + fill, '.', (size_t)(BAR_WIDTH - fill));
        bar[BAR_WIDTH + 2] = ']';
        bar[BAR_WIDTH + 3] = 0;
    }
    fprintf(stderr, "\reldr %s%s%s%s %s  %.1fs%s%s\033[K", p->label, what ? ": " : "",
            what ? what : "", bar, counts, cli_now() - p->t0, rate[0] ? "  " : "", rate);
    fflush(stderr);
    p->drawn = 1;
}

/* Whether to redraw now: always on a new stage and at its end, else at
 * most every REDRAW_S. */
static int due(cli_progress *p, const char *what, int end)
{
    if (!p->tty)
        return 0;
    double now = cli_now();
    int new_stage = (what && (!p->what || strcmp(what, p->what))) || (!what && p->what);
    if (new_stage) {
        p->what = what;
        p->t_stage = now;
    }
    if (!new_stage && !end && p->last_draw >= 0 && now - p->last_draw < REDRAW_S)
        return 0;
    p->last_draw = now;
    return 1;
}

void cli_progress_update(cli_progress *p, double frac)
{
    if (frac < 0)
        frac = 0;
    if (frac > 1)
        frac = 1;
    int pct = (int)(frac * 100.0);
    if (pct == p->last_pct || !due(p, NULL, pct == 100))
        return;
    p->last_pct = pct;
    char counts[16];
    snprintf(counts, sizeof counts, "%3d%%", pct);
    draw(p, NULL, frac, counts, "");
}

void cli_progress_count(cli_progress *p, const char *what, int64_t done, int64_t total,
                        const char *unit)
{
    if (!due(p, what, total > 0 && done >= total))
        return;
    char counts[48], rate[48] = "";
    if (total > 0)
        snprintf(counts, sizeof counts, "%lld/%lld", (long long)done, (long long)total);
    else
        snprintf(counts, sizeof counts, "%lld", (long long)done);
    double dt = cli_now() - p->t_stage;
    /* a rate from a handful of milliseconds says nothing */
    if (unit && done > 0 && dt > 0.2)
        snprintf(rate, sizeof rate, "%.1f%s", (double)done / dt, unit);
    draw(p, what, total > 0 ? (double)done / (double)total : -1, counts, rate);
}

void cli_progress_core(void *ctx, const char *what, int64_t done, int64_t total)
{
    /* a one-unit stage ("signatures": 0/1, 1/1) has no rate to speak of */
    cli_progress_count(ctx, what, done, total, total > 1 ? "/s" : NULL);
}

void cli_progress_done(cli_progress *p)
{
    if (p->tty && p->drawn)
        fputs("\r\033[K", stderr);
    fflush(stderr);
    p->drawn = 0;
}
