/* auth.h - who may change eldrd's state (docs/eldrd.md, "Security").
 *
 * Two bearer tokens, each read from a file given on the command line: the
 * admin token guards PUT /v1/model, PUT /v1/config and the in-flight
 * admin endpoint; the kv token guards POST /v1/kv-events (the engines
 * send those, and should not hold the admin token). Without a kv token
 * the admin token guards kv-events too; without either, nothing is
 * guarded - which eldrd allows only on a loopback address, unless
 * --insecure says the operator means it. In proxy mode a third, the
 * route token, guards POST /v1/route and /v1/finish (clients of the proxy
 * need neither; a stranger could skew the loads with them). */
#ifndef ELDR_ROUTER_AUTH_H
#define ELDR_ROUTER_AUTH_H

#include <stddef.h>

#include "opts.h"
#include "token.h"

#define AUTH_TOKEN_MAX TOKEN_MAX   /* token.h: one reading rule for daemon and clients */

typedef enum auth_need { AUTH_NONE = 0, AUTH_ADMIN, AUTH_KV, AUTH_ROUTE } auth_need;

typedef struct auth_t {
    char admin[AUTH_TOKEN_MAX];  /* "" = none */
    char kv[AUTH_TOKEN_MAX];     /* "" = fall back to admin */
    char route[AUTH_TOKEN_MAX];  /* "" = routes and finishes open */
} auth_t;

/* Read a token: the file's first line, surrounding blanks removed; it
 * must be 16 to AUTH_TOKEN_MAX - 1 printable ASCII characters. -1 with
 * err naming the file and the option. */
int auth_read_token(const char *path, const char *opt, char *out, size_t outlen, char *err,
                    size_t errlen);

/* The token `need` asks for, or NULL when that endpoint is open; and
 * its name ("admin", "kv", "route") for messages. */
const char *auth_token_for(const auth_t *a, auth_need need);
const char *auth_token_name(const auth_t *a, auth_need need);

/* Does the Authorization header value carry `token` ("Bearer TOKEN")?
 * Compares in time independent of where the strings differ. */
int auth_bearer_ok(const char *header, const char *token);

/* 1 when every address HOST resolves to is a loopback address (127/8,
 * ::1), 0 when one is not, -1 with err when it does not resolve. */
int auth_host_is_loopback(const char *host, char *err, size_t errlen);

/* Before serving: read the token files and apply the bind rule (the
 * listener that serves the admin endpoints - --admin-listen when given,
 * else --listen - needs a loopback address, an admin token or
 * --insecure). -1 with err (eldrd exits 2). */
int auth_setup(auth_t *a, const eldrd_opts *o, char *err, size_t errlen);

#endif
