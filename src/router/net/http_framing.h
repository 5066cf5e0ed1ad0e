/* http_framing.h - libmicrohttpd's side of the request framing (router/net):
 * the verdict (framing.h) on a connection's request, and eldrd's own
 * answer to a request libmicrohttpd refused itself.
 *
 * libmicrohttpd 0.9.75 (Debian 12) checks Content-Length itself, right
 * after the headers and before eldrd's handler runs, and answers a value
 * that is not 1*DIGIT (400) or past 2^64 - 1 (413) with an HTML page whose
 * status line and headers it writes twice (connection.c of 0.9.75:
 * transmit_error_response_len builds the answer's head, then
 * MHD_connection_handle_idle goes on from MHD_CONNECTION_HEADERS_RECEIVED
 * to MHD_CONNECTION_START_REPLY, which builds it again). The client reads
 * the second head as the body. No option or callback of that version
 * replaces the answer, but its error logger runs first, on the thread that
 * serves the connection, while that connection is the only one of the
 * thread whose headers are complete (state HEADERS_RECEIVED or later, in
 * MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) with no answer queued
 * (MHD_CONNECTION_INFO_HTTP_STATUS) and no handler called. There
 * http_framing_refusing finds it, and the glue (http.c) writes eldrd's
 * answer on its socket with http_framing_answer - a status line, the JSON
 * error of framing.h's verdict, Connection: close - and shuts the
 * socket's write side, so that libmicrohttpd's own answer
 * fails to send and the connection closes. This works for the first
 * request of a connection and for any later one (kept alive, pipelined).
 */
#ifndef ELDR_ROUTER_HTTP_FRAMING_H
#define ELDR_ROUTER_HTTP_FRAMING_H

#include "framing.h"
#include "http_conns.h"

struct MHD_Connection;

/* The verdict on the request whose headers c holds; f gets its header
 * lines. Returns v->status (0: the framing is clear). */
int http_framing_judge(struct MHD_Connection *c, framing *f, framing_verdict *v);

/* Called from libmicrohttpd's logger when it reports an error answer:
 * the connection being refused at its headers now, among t's (of this
 * thread when this_thread; in loop mode one thread runs libmicrohttpd at
 * a time, so any). 1 with it and its socket; 0 when there is none (a
 * malformed chunk, headers over the connection's memory: libmicrohttpd's
 * answer, which is framed right, goes out). */
int http_framing_refusing(conns_t *t, int this_thread, struct MHD_Connection **c, int *fd);

/* Write an answer with status and the JSON text on fd - a status line,
 * Date, Connection: close, Content-Type, Content-Length, the text - then
 * shut fd's write side: what libmicrohttpd sends after it fails (EPIPE)
 * and the connection closes. */
void http_framing_answer(int fd, int status, const char *json);

#endif
