/* token.c - a bearer token from a file (token.h). */
#include "token.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

int token_read_file(const char *path, const char *opt, char *out, size_t outlen, char *err,
                    size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return eldr_errf(err, errlen, "%s %s: cannot read it", opt, path);
    char line[TOKEN_MAX + 2];
    size_t n = 0;
    if (fgets(line, sizeof line, f))
        n = strlen(line);
    fclose(f);
    if (n == sizeof line - 1 && line[n - 1] != '\n')
        return eldr_errf(err, errlen, "%s %s: the token is longer than %d characters", opt,
                         path, TOKEN_MAX - 1);
    while (n && isspace((unsigned char)line[n - 1]))
        line[--n] = '\0';
    char *p = line;
    while (*p && isspace((unsigned char)*p))
        p++;
    n = strlen(p);
    if (n < 16)
        return eldr_errf(err, errlen, "%s %s: the token has %zu characters; give at least 16 "
                         "(for example: head -c 32 /dev/urandom | base64)", opt, path, n);
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)p[i]))
            return eldr_errf(err, errlen, "%s %s: the token has a character that is not "
                             "printable ASCII (at %zu)", opt, path, i + 1);
    if (n >= outlen)
        return eldr_errf(err, errlen, "%s %s: the token is too long", opt, path);
    memcpy(out, p, n + 1);
    return 0;
}
