/* l_progress.c - a Lua progress function behind the core's progress_fn
 * (l_util.h, "progress callbacks"). */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "l_util.h"

int l_progress_opt(lua_State *L, int opts, const char *fn, l_progress *p)
{
    p->L = L;
    p->fn_idx = p->failed = 0;
    p->cancel = 0;
    p->fn_idx = l_optfn(L, opts, fn, "progress", "a function(done, total, what)");
    return p->fn_idx != 0;
}

void l_progress_call(void *ctx, const char *what, int64_t done, int64_t total)
{
    l_progress *p = ctx;
    if (l_cancel_flag)
        p->cancel = 1;
    if (p->failed || !p->fn_idx)
        return;
    lua_State *L = p->L;
    lua_pushvalue(L, p->fn_idx);
    lua_pushinteger(L, done);
    lua_pushinteger(L, total);
    lua_pushstring(L, what);
    if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
        p->failed = lua_gettop(L); /* the error value stays on the stack */
        p->cancel = 1;
    }
}

volatile int *l_progress_cancel(l_progress *p)
{
    if (!p->fn_idx)
        return &l_cancel_flag;
    if (l_cancel_flag)
        p->cancel = 1;
    return &p->cancel;
}

void l_progress_check(lua_State *L, l_progress *p)
{
    if (!p->failed)
        return;
    lua_pushvalue(L, p->failed);
    lua_error(L);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void l_tty_bar_start(l_tty_bar *b, const char *fn)
{
    b->fn = fn;
    b->tty = isatty(STDERR_FILENO);
    b->drawn = 0;
    b->last = -1;
}

void l_tty_bar_draw(l_tty_bar *b, double frac)
{
    if (!b->tty)
        return;
    double now = mono_now();
    if (b->last >= 0 && now - b->last < 0.1 && frac < 1)
        return;
    b->last = now;
    enum { W = 24 };
    char bar[W + 1];
    int fill = (int)(frac * W + 0.5);
    for (int i = 0; i < W; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[W] = 0;
    fprintf(stderr, "\reldr.%s [%s] %3.0f%%  (Ctrl-C stops)\033[K", b->fn, bar, 100 * frac);
    fflush(stderr);
    b->drawn = 1;
}

void l_tty_bar_done(l_tty_bar *b)
{
    if (b->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    b->drawn = 0;
}
