/* capture_key.c - the engine's API key for eldr capture (capture_key.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capture_key.h"
#include "err.h"

#define PREFIX "Authorization: Bearer "

int capture_key_header(const char *path, char *line, size_t cap, char *err, size_t errlen)
{
    char key[CAPTURE_KEY_MAX + 2];
    FILE *f = fopen(path, "r");
    if (!f)
        return eldr_errf(err, errlen, "--api-key-file %s: %s", path, strerror(errno));
    size_t n = 0;
    int c, rc = 0;
    while ((c = fgetc(f)) != EOF && c != '\n' && n < sizeof key - 1)
        key[n++] = (char)c;
    if (ferror(f))
        rc = eldr_errf(err, errlen, "--api-key-file %s: %s", path, strerror(errno));
    fclose(f);
    if (rc == 0 && n && key[n - 1] == '\r')
        n--;
    if (rc == 0 && n == 0)
        rc = eldr_errf(err, errlen, "--api-key-file %s: %s", path,
                       c == EOF ? "the file is empty" : "its first line is empty");
    if (rc == 0 && n > CAPTURE_KEY_MAX)
        rc = eldr_errf(err, errlen, "--api-key-file %s: the key (its first line) is longer "
                       "than %d bytes", path, CAPTURE_KEY_MAX);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            rc = eldr_errf(err, errlen, "--api-key-file %s: the key holds a control character "
                           "at byte %zu (an HTTP header cannot carry it)", path, i + 1);
    if (rc == 0 && strlen(PREFIX) + n + 1 > cap)
        rc = eldr_errf(err, errlen, "--api-key-file %s: the key is too long", path);
    if (rc == 0) {
        memcpy(line, PREFIX, strlen(PREFIX));
        memcpy(line + strlen(PREFIX), key, n);
        line[strlen(PREFIX) + n] = '\0';
    } else if (cap) {
        explicit_bzero(line, cap);
    }
    explicit_bzero(key, sizeof key);
    return rc;
}

int capture_key_refused(long status)
{
    return status == 401 || status == 403;
}

int capture_key_error(const char *url, const char *what, long status, const char *key_file,
                      char *err, size_t errlen)
{
    if (key_file)
        return eldr_errf(err, errlen, "%s: %s answered %ld: the key was refused "
                         "(--api-key-file %s)", url, what, status, key_file);
    return eldr_errf(err, errlen, "%s: %s answered %ld: the engine wants an API key "
                     "(--api-key-file)", url, what, status);
}
