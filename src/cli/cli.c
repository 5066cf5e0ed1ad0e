/* cli.c - shared helpers of the subcommands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    fprintf(stderr, "eldr %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_BADINPUT;
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_RUNTIME;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "eldr %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try 'eldr %s --help')\n", cmd);
    return CLI_BADINPUT;
}

int cli_parse_int(const char *cmd, const char *opt, const char *s, long long lo,
                  long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return cli_fail(cmd, "%s: '%s' is not an integer", opt, s);
    if (v < lo || v > hi)
        return cli_fail(cmd, "%s: %lld out of range [%lld, %lld]", opt, v, lo, hi);
    *out = v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo,
                     double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return cli_fail(cmd, "%s: '%s' is not a number", opt, s);
    if (v < lo || v > hi)
        return cli_fail(cmd, "%s: %g out of range [%g, %g]", opt, v, lo, hi);
    *out = v;
    return 0;
}

int cli_parse_bytes(const char *cmd, const char *opt, const char *s, size_t *out)
{
    static const char units[] = "KMGT";
    char *end;
    errno = 0;
    int digits = 0;
    while (s[digits] >= '0' && s[digits] <= '9')
        digits++;
    unsigned long long v = digits ? strtoull(s, &end, 10) : 0;
    if (!digits || errno)
        goto bad;
    int shift = 0;
    if (*end) {
        int c = end[0] & ~0x20;
        const char *u = c ? strchr(units, c) : NULL;
        if (!u)
            goto bad;
        shift = 10 * (int)(u - units + 1);
        end++;
        if ((end[0] == 'i' && (end[1] == 'B' || end[1] == 'b') && !end[2]) ||
            ((end[0] == 'B' || end[0] == 'b') && !end[1]))
            end += strlen(end);
        if (*end)
            goto bad;
    }
    if (v == 0)
        return cli_fail(cmd, "%s: '%s' is no memory at all; give a positive byte count", opt,
                        s);
    if (v > (SIZE_MAX >> shift))
        return cli_fail(cmd, "%s: '%s' is more bytes than this machine can address", opt, s);
    *out = (size_t)v << shift;
    return 0;
bad:
    return cli_fail(cmd, "%s: '%s' is not a byte count (a number with an optional K, M, G or "
                    "T suffix, e.g. 512M)", opt, s);
}

void cli_format_bytes(double bytes, char *buf, size_t n)
{
    if (bytes >= 1073741824.0)
        snprintf(buf, n, "%.2f GiB", bytes / 1073741824.0);
    else if (bytes >= 1048576.0)
        snprintf(buf, n, "%.1f MiB", bytes / 1048576.0);
    else
        snprintf(buf, n, "%.0f KiB", bytes / 1024.0);
}

int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long long lo,
                       long long hi, long long **out, int *n)
{
    long long *v = NULL;
    int cnt = 0, cap = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long a = strtoll(p, &end, 10), b;
        if (end == p || errno)
            goto bad;
        b = a;
        if (*end == '-') {
            p = end + 1;
            b = strtoll(p, &end, 10);
            if (end == p || errno || b < a)
                goto bad;
        }
        if (a < lo || b > hi) {
            free(v);
            return cli_fail(cmd, "%s: value out of range [%lld, %lld] in '%s'", opt, lo, hi, s);
        }
        for (long long x = a; x <= b; x++) {
            if (cnt == cap) {
                cap = cap ? cap * 2 : 16;
                long long *nv = realloc(v, (size_t)cap * sizeof *v);
                if (!nv) {
                    free(v);
                    return cli_error(cmd, "out of memory");
                }
                v = nv;
            }
            v[cnt++] = x;
        }
        if (*end == ',' && end[1])
            p = end + 1;
        else if (*end == 0)
            p = end;
        else
            goto bad;
    }
    if (cnt == 0)
        goto bad;
    *out = v;
    *n = cnt;
    return 0;
bad:
    free(v);
    return cli_fail(cmd, "%s: '%s' is not a list like 0,2,5-7", opt, s);
}

void cli_print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (s) {
        puts(s);
        free(s);
    }
    json_decref(v);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts, void (*help)(void),
               int (*one)(int c, const char *arg, void *ctx), void *ctx)
{
    optind = 1;
    opterr = 0;
    int c, rc;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'h') {
            help();
            return -1;
        }
        if (c == ':')
            return cli_usage_error(cmd, "option %s needs a value", argv[optind - 1]);
        if (c == '?')
            return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
        if ((rc = one(c, optarg, ctx)))
            return rc;
    }
    return 0;
}
