/* par.c - a function on several threads (par.h). */
#include <pthread.h>
#include <unistd.h>

#include "par.h"

int par_threads(int wanted, int64_t tasks)
{
    long t = wanted > 0 ? wanted : sysconf(_SC_NPROCESSORS_ONLN);
    if (t < 1)
        t = 1;
    if (t > PAR_MAX_THREADS)
        t = PAR_MAX_THREADS;
    if (tasks < t)
        t = tasks < 1 ? 1 : (long)tasks;
    return (int)t;
}

void par_run(int threads, void *(*fn)(void *), void *arg)
{
    pthread_t tid[PAR_MAX_THREADS];
    int started = 0;
    for (int i = 1; i < threads && i < PAR_MAX_THREADS; i++)
        if (pthread_create(&tid[started], NULL, fn, arg) == 0)
            started++;
    fn(arg);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
}
