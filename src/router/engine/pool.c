/* pool.c - instances, their loads and health (pool.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "pool.h"

#define POOL_PREFILL_MAX 256

static pool_inst *insts(const char *const *names, int n)
{
    pool_inst *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    for (int i = 0; v && i < n; i++) {
        atomic_init(&v[i].load, 0);
        if (!(v[i].name = strdup(names[i]))) {
            while (i--)
                free(v[i].name);
            free(v);
            return NULL;
        }
    }
    return v;
}

static void free_insts(pool_inst *v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i].name);
    free(v);
}

int pool_init(pool *p, const char *const *prefill, int n_prefill, const char *const *decode,
              int K, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (n_prefill < 1 || n_prefill > POOL_PREFILL_MAX)
        return eldr_errf(err, errlen, "%d prefill instances; 1 to %d", n_prefill,
                         POOL_PREFILL_MAX);
    p->n_prefill = n_prefill;
    p->K = K;
    pthread_mutex_init(&p->lock, NULL);
    atomic_init(&p->n_ejected, 0);
    p->eject_after = 3;
    p->eject_time = 5;
    if (!(p->prefill = insts(prefill, n_prefill)) || !(p->decode = insts(decode, K)) ||
        pring_init(&p->ring, prefill, n_prefill) < 0) {
        pool_free(p);
        return eldr_errf(err, errlen, "out of memory for the instance pool");
    }
    return 0;
}

void pool_free(pool *p)
{
    if (!p->prefill && !p->decode)
        return;
    pring_free(&p->ring);
    free_insts(p->prefill, p->n_prefill);
    free_insts(p->decode, p->K);
    p->prefill = p->decode = NULL;
    pthread_mutex_destroy(&p->lock);
}

static pool_inst *inst(pool *p, pool_role role, int i)
{
    return role == POOL_PREFILL ? &p->prefill[i] : &p->decode[i];
}

/* Under the lock: whether i is out at now (an ejection that has run out
 * is cleared here, so n_ejected falls back to 0 and the fast path
 * returns). */
static int out_locked(pool *p, pool_inst *x, double now)
{
    if (x->ejected_until <= 0)
        return 0;
    if (now < x->ejected_until)
        return 1;
    x->ejected_until = 0;
    atomic_fetch_sub(&p->n_ejected, 1);
    return 0;
}

void pool_set_policy(pool *p, int eject_after, double eject_time)
{
    p->eject_after = eject_after;
    p->eject_time = eject_time;
}

/* ok[n] for a role: in rotation and not except; then the fallbacks (all
 * but except, then except alone). Returns 1 when every instance is in ok
 * (no mask needed). */
static int fill_mask(pool *p, pool_role role, int n, double now, int except, uint8_t *ok)
{
    int n_ok = 0;
    if (atomic_load(&p->n_ejected) > 0) {
        pthread_mutex_lock(&p->lock);
        for (int i = 0; i < n; i++)
            n_ok += ok[i] = (uint8_t)(!out_locked(p, inst(p, role, i), now) && i != except);
        pthread_mutex_unlock(&p->lock);
    } else {
        for (int i = 0; i < n; i++)
            n_ok += ok[i] = (uint8_t)(i != except);
    }
    if (n_ok == 0) {
        atomic_fetch_add(&p->panics[role], 1);
        for (int i = 0; i < n; i++)
            n_ok += ok[i] = (uint8_t)(i != except);
    }
    if (n_ok == 0)
        for (int i = 0; i < n; i++)
            n_ok += ok[i] = 1;
    return n_ok == n;
}

int pool_prefill_acquire(pool *p, const void *key, size_t len, double now, int except)
{
    int64_t loads[POOL_PREFILL_MAX];
    uint8_t ok[POOL_PREFILL_MAX];
    for (int i = 0; i < p->n_prefill; i++)
        loads[i] = atomic_load(&p->prefill[i].load);
    int all = except < 0 && atomic_load(&p->n_ejected) == 0
                  ? 1 : fill_mask(p, POOL_PREFILL, p->n_prefill, now, except, ok);
    int i = pring_pick_among(&p->ring, key, len, loads, all ? NULL : ok);
    atomic_fetch_add(&p->prefill[i].load, 1);
    return i;
}

void pool_prefill_release(pool *p, int i)
{
    atomic_fetch_sub(&p->prefill[i].load, 1);
}

const uint8_t *pool_decode_eligible(pool *p, double now, int except, uint8_t *ok)
{
    if (except < 0 && atomic_load(&p->n_ejected) == 0)
        return NULL;
    return fill_mask(p, POOL_DECODE, p->K, now, except, ok) ? NULL : ok;
}

/* Under the lock: out until now + eject_time x 2^streak (at most 64 x). */
static void eject_locked(pool *p, pool_inst *x, double now)
{
    double t = p->eject_time * (double)(1 << (x->streak < 6 ? x->streak : 6));
    if (x->ejected_until <= 0)
        atomic_fetch_add(&p->n_ejected, 1);
    x->ejected_until = now + t;
    x->ejections++;
    x->streak++;
}

int pool_report(pool *p, pool_role role, int i, int ok, double now)
{
    int ejected = 0;
    pthread_mutex_lock(&p->lock);
    pool_inst *x = inst(p, role, i);
    if (ok) {
        x->fails = 0;
        x->streak = 0;
        if (x->ejected_until > 0) {
            x->ejected_until = 0;
            atomic_fetch_sub(&p->n_ejected, 1);
        }
    } else {
        x->failures++;
        x->fails++;
        /* one failure after an ejection ran out ejects again: its streak
         * says it has not answered since */
        int limit = x->streak > 0 ? 1 : p->eject_after;
        if (p->eject_after > 0 && x->fails >= limit && !out_locked(p, x, now)) {
            eject_locked(p, x, now);
            x->fails = 0;
            ejected = 1;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (ejected && role == POOL_DECODE && p->on_decode_eject)
        p->on_decode_eject(p->on_decode_eject_cls, i);
    return ejected;
}

int pool_in_rotation(pool *p, pool_role role, double now, double *back_in)
{
    int n = role == POOL_PREFILL ? p->n_prefill : p->K, in = 0;
    double soonest = -1;
    if (atomic_load(&p->n_ejected) == 0)
        return n;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < n; i++) {
        pool_inst *x = inst(p, role, i);
        if (!out_locked(p, x, now))
            in++;
        else if (soonest < 0 || x->ejected_until - now < soonest)
            soonest = x->ejected_until - now;
    }
    pthread_mutex_unlock(&p->lock);
    if (back_in)
        *back_in = in ? 0 : soonest;
    return in;
}

void pool_get_health(pool *p, pool_role role, int i, double now, pool_health *h)
{
    pthread_mutex_lock(&p->lock);
    pool_inst *x = inst(p, role, i);
    h->ejected = out_locked(p, x, now);
    h->ejected_for = h->ejected ? x->ejected_until - now : 0;
    h->fails = x->fails;
    h->streak = x->streak;
    h->ejections = x->ejections;
    h->failures = x->failures;
    pthread_mutex_unlock(&p->lock);
}

void pool_eject(pool *p, pool_role role, int i, double until)
{
    pthread_mutex_lock(&p->lock);
    pool_inst *x = inst(p, role, i);
    if (x->ejected_until <= 0)
        atomic_fetch_add(&p->n_ejected, 1);
    x->ejected_until = until;
    x->ejections++;
    pthread_mutex_unlock(&p->lock);
    if (role == POOL_DECODE && p->on_decode_eject)
        p->on_decode_eject(p->on_decode_eject_cls, i);
}

void pool_restore(pool *p, pool_role role, int i)
{
    pthread_mutex_lock(&p->lock);
    pool_inst *x = inst(p, role, i);
    if (x->ejected_until > 0)
        atomic_fetch_sub(&p->n_ejected, 1);
    x->ejected_until = 0;
    pthread_mutex_unlock(&p->lock);
}

int pool_ejected(pool *p, pool_role role, int i, double now)
{
    pthread_mutex_lock(&p->lock);
    int out = out_locked(p, inst(p, role, i), now);
    pthread_mutex_unlock(&p->lock);
    return out;
}
