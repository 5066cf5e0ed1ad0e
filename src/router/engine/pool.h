/* pool.h - the instances a front end sends requests to, shared by every
 * front end that does (the proxy now, the gateway picker next): the
 * prefill instances with their consistent-hash ring (pool_ring.h) and
 * in-flight loads, the decode instances (worker k is the model's worker
 * k; their loads are the routing state's, state.h), and each instance's
 * health.
 *
 * Health is what a front end observes (passive: pool_report after each
 * upstream answer; active: probes). After eject_after failures in a row
 * an instance is ejected: for eject_time seconds the first time, doubled
 * each time it is ejected again without a success in between (at most 64
 * x eject_time), as Envoy's outlier detection and nginx's max_fails /
 * fail_timeout do. When its time is up it is eligible again, and one more
 * failure ejects it again; a success forgets the streak. An ejected
 * prefill is skipped on the ring (its points fall to the next instance,
 * so the others keep their prefixes); an ejected decode worker is left
 * out of the locality band (the eligibility mask that decide takes,
 * decide.h). When every instance of a role is ejected, all of them are
 * eligible again (Envoy's panic routing: a guess beats a certain 503),
 * and the panic is counted.
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
    int fails;                   /* failures in a row (under lock) */
    int streak;                  /* ejections since the last success (under lock) */
    uint64_t failures;           /* failures reported, all time (under lock) */
} pool_inst;

typedef struct pool {
    int n_prefill, K;
    pool_inst *prefill;          /* [n_prefill] */
    pool_inst *decode;           /* [K] */
    pring ring;                  /* over the prefill names */
    pthread_mutex_t lock;
    atomic_int n_ejected;        /* instances whose ejected_until is set */
    int eject_after;             /* failures in a row that eject; 0 never */
    double eject_time;           /* the first ejection's length, seconds */
    atomic_ullong panics[2];     /* decisions made with every instance of a role ejected */
    /* told (outside the lock) each time decode worker k is ejected; NULL
     * none. Set before serving (the engine: its in-flight requests go) */
    void (*on_decode_eject)(void *cls, int k);
    void *on_decode_eject_cls;
} pool;

/* Instances by name (copied); at most 256 prefill instances (the ring's
 * load array lives on the stack). -1 with err. */
int pool_init(pool *p, const char *const *prefill, int n_prefill, const char *const *decode,
              int K, char *err, size_t errlen);
void pool_free(pool *p);

/* The ejection policy (defaults: 3 failures, 5 s). */
void pool_set_policy(pool *p, int eject_after, double eject_time);

/* The prefill instance for a prompt key (pool_ring.h), among those not
 * ejected at monotonic time now and other than `except` (-1: none; a
 * retry's failed instance); its load goes up by one. Every one ejected:
 * among all but except (panic); except the only one: except. */
int pool_prefill_acquire(pool *p, const void *key, size_t len, double now, int except);
/* The request left prefill instance i. */
void pool_prefill_release(pool *p, int i);

/* The decode workers a decision may use at monotonic time now, other
 * than `except` (-1: none): NULL when every one may (nothing is ejected:
 * no mask to build), else ok[K] filled (1 eligible) and returned. The
 * same fallbacks as pool_prefill_acquire: never an empty mask. */
const uint8_t *pool_decode_eligible(pool *p, double now, int except, uint8_t *ok);

/* What a front end saw of instance i: ok 1 an answer (any status below
 * 500), 0 a failure (no connection, a reset, a 5xx, silence). Returns 1
 * when this failure ejected it. A success while ejected (a probe) puts it
 * back at once. */
int pool_report(pool *p, pool_role role, int i, int ok, double now);

/* Take instance i of a role out of rotation until monotonic time
 * `until`, or put it back now. */
void pool_eject(pool *p, pool_role role, int i, double until);
void pool_restore(pool *p, pool_role role, int i);
/* 1 when instance i is out of rotation at monotonic time now. */
int pool_ejected(pool *p, pool_role role, int i, double now);

/* How many instances of a role are in rotation at monotonic time now;
 * when none, *back_in (if not NULL) gets the seconds until the first
 * ejection runs out. Readiness: a role with none cannot serve. */
int pool_in_rotation(pool *p, pool_role role, double now, double *back_in);

/* Instance i's health at monotonic time now, copied under the lock. */
typedef struct pool_health {
    int ejected;
    double ejected_for;          /* seconds left, 0 when in rotation */
    int fails;
    int streak;                  /* ejections since the last success: > 0 and not
                                  * ejected is on trial (one failure ejects again) */
    uint64_t ejections, failures;
} pool_health;
void pool_get_health(pool *p, pool_role role, int i, double now, pool_health *h);

#endif
