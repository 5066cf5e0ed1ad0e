/* periodic.c - a thread on a clock (periodic.h). */
#include <pthread.h>
#include <stdlib.h>

#include "log.h"
#include "periodic.h"

struct periodic {
    double period;
    void (*fn)(void *cls);
    void *cls;
    pthread_t thread;
    pthread_mutex_t lock;        /* stop */
    pthread_cond_t wake;
    int stop;
};

static void *periodic_main(void *arg)
{
    periodic_t *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        wait_for(&p->wake, &p->lock, p->period);
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->lock);
        p->fn(p->cls);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

periodic_t *periodic_start(double period, void (*fn)(void *cls), void *cls)
{
    periodic_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    *p = (periodic_t){.period = period, .fn = fn, .cls = cls};
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->thread, NULL, periodic_main, p) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void periodic_stop(periodic_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
