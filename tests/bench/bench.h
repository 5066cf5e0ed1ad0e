/* bench.h - helpers for the benchmark binaries (header-only). Rows go to
 * stdout as "what\tsize\tseconds\trate" for tests/bench/run.sh. */
#ifndef ELDR_BENCH_H
#define ELDR_BENCH_H

#include <stdio.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bench_row(const char *what, const char *size, double secs,
                             double rate, const char *unit)
{
    printf("%s\t%s\t%.6f\t%.1f %s\n", what, size, secs, rate, unit);
    fflush(stdout);
}

#endif
