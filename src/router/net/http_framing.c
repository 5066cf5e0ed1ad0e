/* http_framing.c - the framing verdict on a libmicrohttpd connection, and
 * eldrd's answer to a request libmicrohttpd refused at its headers
 * (http_framing.h). */
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "http_framing.h"

static enum MHD_Result each_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    framing_header(cls, key, value);
    return MHD_YES;
}

int http_framing_judge(struct MHD_Connection *c, framing *f, framing_verdict *v)
{
    framing_init(f);
    MHD_get_connection_values(c, MHD_HEADER_KIND, each_line, f);
    return framing_judge(f, v);
}

/* The connection libmicrohttpd is refusing now: its headers are in, no
 * answer is queued (and, being among those awaiting their headers in the
 * table, no handler has run). */
static int refusing(void *conn, void *cls)
{
    (void)cls;
    struct MHD_Connection *c = conn;
    return MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) != NULL &&
           MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS) == NULL;
}

int http_framing_refusing(conns_t *t, int this_thread, struct MHD_Connection **c, int *fd)
{
    void *conn;
    if (!t || conns_awaiting(t, this_thread, refusing, NULL, &conn, fd) != 1 || *fd < 0)
        return 0;
    *c = conn;
    return 1;
}

/* The socket's buffer is empty here (the connection's previous answer, if
 * any, was sent whole before this request was read), so the few hundred
 * bytes go at once; if they do not (a client that reads nothing), the
 * client gets a cut answer and the close, never libmicrohttpd's. */
void http_framing_answer(int fd, int status, const char *json)
{
    char date[64], head[384];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     status, reason && *reason ? reason : "Error", date, strlen(json));
    struct iovec iov[2] = {{head, (size_t)n}, {(void *)json, strlen(json)}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    (void)!sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
}
