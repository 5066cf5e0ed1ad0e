/* http_side.c - a worker thread beside proxy mode's loop (http_side.h). */
#include "http_side.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct job {
    side_fn run;
    void *cls;
    struct job *next;
} job;

struct side {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t more;
    job *head, *tail;
    int stop, running;
};

static void *side_main(void *arg)
{
    side_t *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->more, &s->lock);
        job *j = s->head;
        if (!j)
            break;   /* stopped, and nothing left */
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        j->run(j->cls);
        free(j);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

side_t *side_start(void)
{
    side_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->more, NULL);
    if (pthread_create(&s->thread, NULL, side_main, s) != 0) {
        side_free(s);
        return NULL;
    }
    s->running = 1;
    return s;
}

int side_submit(side_t *s, side_fn run, void *cls)
{
    job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (job){run, cls, NULL};
    pthread_mutex_lock(&s->lock);
    if (s->stop) {
        pthread_mutex_unlock(&s->lock);
        free(j);
        return -1;
    }
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void side_stop(side_t *s)
{
    if (!s || !s->running)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->running = 0;
}

void side_free(side_t *s)
{
    if (!s)
        return;
    side_stop(s);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->more);
    free(s);
}
