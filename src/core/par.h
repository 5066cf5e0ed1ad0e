/* par.h - one function run on several threads at once, this thread
 * among them: the worker pools of the grid (grid.c) and of `eldr sim`'s
 * policies (cmd_sim.c). fn takes its work from shared state it guards
 * itself; par_run returns when every thread has returned. */
#ifndef ELDR_PAR_H
#define ELDR_PAR_H

#include <stdint.h>

#define PAR_MAX_THREADS 64

/* How many threads for `tasks` tasks: `wanted` (<= 0: the online CPUs),
 * within 1..PAR_MAX_THREADS, at most one a task (at least 1). */
int par_threads(int wanted, int64_t tasks);

/* fn(arg) on `threads` threads, this one included; the threads that
 * cannot be started leave their share to the others. */
void par_run(int threads, void *(*fn)(void *), void *arg);

#endif
