/* readiness.h - whether this eldrd should be sent traffic now
 * (router/engine): the one answer that /healthz and the gateway picker's
 * grpc.health.v1 both give, so that one fleet reads the same on every
 * screen (docs/http-api.md, "GET /healthz"; docs/gateway.md, "Health").
 *
 * Not ready when:
 * - eldrd is draining (SIGTERM): it takes no new work;
 * - as the picker, the endpoints file does not map onto the model's
 *   workers;
 * - a role the daemon needs has no instance in rotation (every one
 *   ejected after failures, pool.h): prefill and decode in proxy mode,
 *   where eldrd makes both calls itself; decode as the picker.
 *
 * As the picker, prefill is shown (when the endpoints file maps prefill
 * pods) but not needed: llm-d's disaggregation profile handler fails a
 * request only when its decode profile has no endpoint and falls back to
 * decode alone when the prefill profile has none, and its EPP's readiness
 * counts no pods at all (docs/gateway.md, "Health", names the files and
 * commits). A prefill-less fleet is ready; every prefill ejected leaves it
 * ready and degraded (/healthz lists them), and the picker still picks
 * among them all (the pool's panic routing). */
#ifndef ELDR_ROUTER_READINESS_H
#define ELDR_ROUTER_READINESS_H

#include "engine.h"

typedef struct readiness {
    int ready;                   /* 1: send it traffic */
    /* why not: "draining", "endpoints", or the role with none in
     * rotation ("prefill", "decode"); NULL when ready */
    const char *why;
    double back;                 /* a role out: seconds until its first ejection runs out */
    /* by pool_role: shown (in /healthz's in_rotation), needed (none in
     * rotation: not ready), instances in rotation, instances */
    int shown[2], need[2], in[2], of[2];
} readiness;

/* The answer now; from any thread (it takes the pool's and the endpoints
 * table's locks, briefly). */
void readiness_get(engine_t *d, readiness *r);

#endif
