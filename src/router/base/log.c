/* log.c - one-line log messages and the clocks (log.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "log.h"

static atomic_int quiet;

void log_set_quiet(int q)
{
    atomic_store(&quiet, q);
}

void log_msg(const char *fmt, ...)
{
    if (atomic_load(&quiet))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "eldrd: %s\n", line);   /* one write: lines do not interleave */
}

int log_once_a_second(atomic_long *last)
{
    long now = (long)time(NULL);
    long prev = atomic_load(last);
    return now != prev && atomic_compare_exchange_strong(last, &prev, now);
}

double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void wait_for(pthread_cond_t *c, pthread_mutex_t *m, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = (double)until.tv_sec + until.tv_nsec * 1e-9 + seconds;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    pthread_cond_timedwait(c, m, &until);
}
