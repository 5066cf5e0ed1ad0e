/* client.h - an HTTP/JSON client of eldrd (docs/http-api.md) over libcurl:
 * what `eldr replay`, the Lua attach (eldr.attach) and the dashboard's
 * live mode (eldr dash --attach) speak to a running router.
 *
 * A client_t is one keep-alive connection to one daemon (a curl easy
 * handle): not thread-safe, so one per thread. Every call returns 0, or
 * -1 with one line in err naming the URL and what went wrong: the
 * transport error, or the HTTP status with the daemon's JSON error
 * ("http://127.0.0.1:8470/v1/finish: HTTP 404: 'x' is not in flight
 * (request_id)"). *status (where given) receives the HTTP status, 0 when
 * no answer came. JSON answers come back as jansson values that the
 * caller owns (json_decref).
 *
 * No curses, no Lua, no printing here. */
#ifndef ELDR_CLIENT_H
#define ELDR_CLIENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define CLIENT_URL_MAX 512

typedef struct client client_t;

/* url: "http://HOST:PORT" (a trailing '/' is dropped; "HOST:PORT" alone
 * gets "http://"). timeout_s bounds every call (connect included). NULL
 * with err on a bad URL or out of memory; nothing is sent yet. */
client_t *client_new(const char *url, double timeout_s, char *err, size_t errlen);
void client_free(client_t *c);
const char *client_url(const client_t *c);

/* One more header line ("Name: value") on every call from now on (eldr
 * capture's "Authorization: Bearer KEY"); -1 with err out of memory. */
int client_add_header(client_t *c, const char *line, char *err, size_t errlen);

/* Send the bearer token of the file at path (token.h: the rule eldrd
 * reads its own token files by) as "Authorization: Bearer TOKEN" on every
 * call from now on. opt names the option in messages ("--token-file").
 * -1 with err. */
int client_use_token_file(client_t *c, const char *path, const char *opt, char *err,
                          size_t errlen);
/* The same header line into line (len >= CLIENT_TOKEN_HEADER_MAX), for
 * clients made elsewhere (eldr replay's threads). */
#define CLIENT_TOKEN_HEADER_MAX 560
int client_token_header(const char *path, const char *opt, char *line, size_t len, char *err,
                        size_t errlen);

/* Any endpoint: method ("GET", "POST", "PUT"), path ("/v1/...", query
 * included), body (NULL for none). A 2xx with a JSON body gives *out
 * (may be NULL: then the answer is dropped); any other status is -1. */
int client_call(client_t *c, const char *method, const char *path, const char *body,
                size_t len, long *status, json_t **out, char *err, size_t errlen);

/* GET /healthz. */
int client_health(client_t *c, json_t **out, char *err, size_t errlen);

/* GET /v1/snapshot?centroids=0|1&decisions=N (decisions < 0: the
 * daemon's default). */
int client_snapshot(client_t *c, int centroids, int decisions, json_t **out, char *err,
                    size_t errlen);

/* What a route answer says, in C (the full answer is in *answer when
 * asked for). */
typedef struct client_routed {
    char request_id[256];
    char worker[128];
    int worker_index;
    char rule[24];
    uint64_t seq;
} client_routed;

/* POST /v1/route with dense counts: cells = L*E uint16 (each <= 32767),
 * sent as base64 of little-endian int16. request_id NULL or "" lets the
 * daemon name it. answer (may be NULL) gets the whole JSON answer; *status
 * (may be NULL) the HTTP status, 0 when nothing answered. */
int client_route(client_t *c, const char *request_id, const uint16_t *counts, size_t cells,
                 client_routed *r, json_t **answer, long *status, char *err, size_t errlen);

/* The same for a daemon serving a gate model: cells = L*E gate values,
 * sent as "gates", base64 of little-endian float32. */
int client_route_gates(client_t *c, const char *request_id, const float *gates, size_t cells,
                       client_routed *r, json_t **answer, long *status, char *err,
                       size_t errlen);

/* POST /v1/finish {request_id}; *worker_index (may be NULL) gets the
 * worker it left. 404 (not in flight) is an error like any other;
 * *status tells it apart. */
int client_finish(client_t *c, const char *request_id, int *worker_index, long *status,
                  char *err, size_t errlen);

/* GET /v1/explain/{request_id} (the id is URL-escaped). */
int client_explain(client_t *c, const char *request_id, json_t **out, char *err,
                   size_t errlen);

/* PUT /v1/config {"tau": tau}. */
int client_set_tau(client_t *c, double tau, char *err, size_t errlen);

/* GET /v1/window?n=N (n < 0: the daemon's default). */
int client_window(client_t *c, int n, json_t **out, char *err, size_t errlen);

/* Append n bytes to a growable, NUL-terminated buffer (*buf may be
 * NULL at first): the answer bodies of this client and of eldr capture.
 * 0, or -1 when out of memory (the buffer is left as it was). */
int client_buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n);

#endif
