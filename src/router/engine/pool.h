/* pool.h - the instances a front end sends requests to, shared by every
 * front end that does (the proxy now, the gateway picker next): the
 * prefill instances with their consistent-hash ring (pool_ring.h) and
 * in-flight loads, the decode instances (worker k is the model's worker
 * k; their loads are the routing state's, state.h), and each instance's
 * health.
 *
 * Health is what a front end observes: an instance it saw fail is
 * ejected until a time, and is then eligible again. An ejected prefill is
 * skipped on the ring (its points fall to the next instance, so the
 * others keep their prefixes); an ejected decode worker is left out of
 * the locality band (the eligibility mask that decide takes, decide.h).
 *
 * Thread safety: loads are atomics; health is under the pool's lock,
 * with an atomic count of ejected instances so that the common case,
 * nothing ejected, takes no lock and builds no mask. */
#ifndef ELDR_ROUTER_POOL_H
#define ELDR_ROUTER_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pool_ring.h"

typedef enum pool_role { POOL_PREFILL = 0, POOL_DECODE = 1 } pool_role;

typedef struct pool_inst {
    char *name;                  /* owned: a URL in proxy mode, else a name */
    atomic_llong load;           /* prefill: requests there now (decode: unused) */
    double ejected_until;        /* monotonic s; 0 = in rotation (under lock) */
    uint64_t ejections;          /* times ejected (under lock) */
} pool_inst;

typedef struct pool {
    int n_prefill, K;
    pool_inst *prefill;          /* [n_prefill] */
    pool_inst *decode;           /* [K] */
    pring ring;                  /* over the prefill names */
    pthread_mutex_t lock;
    atomic_int n_ejected;        /* instances whose ejected_until is set */
} pool;

/* Instances by name (copied); at most 256 prefill instances (the ring's
 * load array lives on the stack). -1 with err. */
int pool_init(pool *p, const char *const *prefill, int n_prefill, const char *const *decode,
              int K, char *err, size_t errlen);
void pool_free(pool *p);

/* The prefill instance for a prompt key (pool_ring.h), among those not
 * ejected at monotonic time now; its load goes up by one. -1 when every
 * prefill instance is ejected. */
int pool_prefill_acquire(pool *p, const void *key, size_t len, double now);
/* The request left prefill instance i. */
void pool_prefill_release(pool *p, int i);

/* The decode workers a decision may use at monotonic time now: NULL when
 * every one may (nothing is ejected: no mask to build), else ok[K]
 * filled (1 eligible) and returned. */
const uint8_t *pool_decode_eligible(pool *p, double now, uint8_t *ok);

/* Take instance i of a role out of rotation until monotonic time
 * `until`, or put it back now. */
void pool_eject(pool *p, pool_role role, int i, double until);
void pool_restore(pool *p, pool_role role, int i);
/* 1 when instance i is out of rotation at monotonic time now. */
int pool_ejected(pool *p, pool_role role, int i, double now);

#endif
