/* window_stream.h - GET /v1/window's answer, written as the socket drains.
 *
 * A window of 16384 signatures of 2560 floats is hundreds of megabytes of
 * JSON. Built whole (a jansson tree, then one dump) it held an HTTP thread
 * for seconds, and every connection libmicrohttpd had given that thread
 * waited behind it. Here the answer is a stream: each call of the reader
 * formats at most one record, so the thread serves its other connections
 * between records. The text is the same as jansson's compact dump with 9
 * significant digits. */
#ifndef ELDR_ROUTER_WINDOW_STREAM_H
#define ELDR_ROUTER_WINDOW_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "state.h"

typedef struct window_stream window_stream;

/* Takes over w (freed by window_stream_free). NULL when out of memory
 * (w is then freed too). */
window_stream *window_stream_new(window_copy *w);
void window_stream_free(void *ws);

/* libmicrohttpd's content reader: up to max bytes of the answer at pos
 * into buf; -1 (MHD_CONTENT_READER_END_OF_STREAM) at the end. */
ssize_t window_stream_read(void *ws, uint64_t pos, char *buf, size_t max);

#endif
