/* wire.c - the one error shape (wire.h). */
#include <stdarg.h>
#include <stdio.h>

#include "wire.h"

int rb_fail(rb_err *e, int status, const char *where, const char *fmt, ...)
{
    e->status = status;
    snprintf(e->where, sizeof e->where, "%s", where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
    return -1;
}
