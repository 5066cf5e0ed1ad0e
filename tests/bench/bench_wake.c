/* bench_wake.c - what this machine bills a thread, in CPU time, for going
 * to sleep and waking up: a thread sleeps 2000 times for 200 us and its
 * own CPU clock (CLOCK_THREAD_CPUTIME_ID, the clock eldrd's CPU rows sum)
 * is read around them. On bare metal a sleep and wake-up costs a
 * microsecond or two; in a virtual machine whose idle CPU halts, the
 * wake-up's latency can land on the thread that slept (seen here: 19 to
 * 31 us). An event loop that sleeps between bursts pays this once a
 * sleep, whatever it does per request: tests/bench/extproc.sh counts the
 * picker's wake-ups a pick and estimates its CPU per pick without them
 * with this number. The median of seven rounds of 300 sleeps. Prints one
 * row; with --us, the microseconds alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#define ROUNDS 7
#define SLEEPS 300               /* a round */
#define SLEEP_NS 200000L

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int only_us = argc > 1 && !strcmp(argv[1], "--us");
    double per[ROUNDS], t0 = bench_now();
    for (int r = 0; r < ROUNDS; r++) {
        double c0 = thread_cpu();
        for (int i = 0; i < SLEEPS; i++) {
            struct timespec ts = {0, SLEEP_NS};
            while (nanosleep(&ts, &ts) != 0) {
                /* interrupted: sleep the rest */
            }
        }
        per[r] = (thread_cpu() - c0) / SLEEPS * 1e6;
    }
    qsort(per, ROUNDS, sizeof *per, cmp_double);
    double us = per[ROUNDS / 2], secs = bench_now() - t0;   /* the median round */
    if (only_us)
        printf("%.2f\n", us);
    else
        bench_row("thread CPU billed per sleep and wake-up (this machine, median of 7)",
                  "300 x 200 us", secs, us, "us");
    return 0;
}
