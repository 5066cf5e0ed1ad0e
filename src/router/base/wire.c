/* wire.c - the one error shape (wire.h). */
#include <stdarg.h>
#include <stdio.h>

#include "wire.h"

/* A control character a client sent (a request id or block hash quoted
 * in the message) becomes '?': the error is one line wherever it goes
 * (a JSON body, a gateway's immediate response, the log). */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

const char *rb_error_type(int status)
{
    return status == 504 ? "timeout"
         : status == 502 ? "upstream_error"
         : status == 503 ? "service_unavailable"
         : status == 401 || status == 403 ? "authentication_error"
         : status == 404 ? "not_found_error"
         : status == 409 ? "conflict_error"
         : status == 413 ? "request_too_large"
         : status == 429 ? "rate_limit_error"
         : status == 501 ? "not_implemented_error"
         : status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
}

int rb_fail(rb_err *e, int status, const char *where, const char *fmt, ...)
{
    e->status = status;
    e->retry_after = 0;
    snprintf(e->where, sizeof e->where, "%s", where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
    one_line(e->where);
    one_line(e->error);
    return -1;
}
