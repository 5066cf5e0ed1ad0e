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
