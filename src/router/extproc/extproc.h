/* extproc.h - eldrd as the endpoint picker (EPP) of an Envoy-based
 * inference gateway (router/extproc; docs/gateway.md).
 *
 * Envoy's ext_proc filter opens one gRPC stream per HTTP request
 * (envoy.service.ext_proc.v3.ExternalProcessor/Process) and, in
 * FULL_DUPLEX_STREAMED mode as the Gateway API Inference Extension
 * configures it, sends the request's headers and then its body in chunks.
 * At the body's end the picker decides the decode worker on the one
 * decision path (decide.h: the signature from kv_transfer_params.eldr_sig
 * or x-eldr-signature, the pool's eligible workers, the subset hint) and
 * answers: the request_headers response setting
 * x-gateway-destination-endpoint (and the same in envoy.lb dynamic
 * metadata), then the body echoed in streamed_response chunks. The
 * response phase (or the stream's end) finishes the request, so the
 * in-flight loads stay exact; a 5xx from the endpoint counts against it
 * in the pool as a failed proxied request does. grpc.health.v1 on the
 * same port.
 *
 * Everything runs on the event loop's thread; extproc_quiesce and the
 * stats are what other threads call. */
#ifndef ELDR_ROUTER_EXTPROC_H
#define ELDR_ROUTER_EXTPROC_H

#include <jansson.h>
#include <stddef.h>

#include "endpoints_file.h"
#include "engine.h"
#include "evloop.h"
#include "strbuf.h"

typedef struct extproc extproc_t;

/* Listen on the options' --ext-proc address, on loop l (not yet
 * running). ep: the decode endpoints (borrowed; the picker polls it for
 * a replaced file every second). NULL with err. */
extproc_t *extproc_start(engine_t *d, evloop *l, endpoints_table *ep, char *err,
                         size_t errlen);
int extproc_port(const extproc_t *x);

/* The drain: health turns NOT_SERVING, the connections open now are
 * told to open no new stream (GOAWAY), streams in progress go on. The
 * port stays open until extproc_free: a health check on a new connection
 * gets NOT_SERVING, a new Process stream the draining 503. Then wait up
 * to `grace` seconds for the streams; returns how many were still open.
 * loop_running: the loop's thread runs (the work is posted there and
 * waited for). */
int extproc_quiesce(extproc_t *x, int loop_running, double grace);
/* Close everything (open streams finish their requests). After the loop
 * stopped, or before it ran. */
void extproc_free(extproc_t *x);

/* The provider's parts (engine_provider): /metrics lines and the
 * snapshot's "ext_proc" object. */
void extproc_metrics(void *cls, strbuf *b);
json_t *extproc_snapshot(void *cls);

#endif
