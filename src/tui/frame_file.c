/* frame_file.c - numbered, atomic, never-overwriting frame files
 * (frame_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "frame_file.h"

const char *frame_file_dir(void)
{
    const char *d = getenv("ELDR_FRAME_DIR");
    return d && *d ? d : ".";
}

/* The whole of text to fd; 0 or -1 (errno set). */
static int write_all(int fd, const char *text)
{
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t w = write(fd, text + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

int frame_file_save(const canvas_t *c, char *path, size_t pathlen, char *err, size_t errlen)
{
    const char *dir = frame_file_dir();
    char *text = canvas_to_string(c);
    if (!text)
        return eldr_errf(err, errlen, "save frame: out of memory");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/.eldr-frame.tmp.%ld", dir, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(text);
        return eldr_errf(err, errlen, "save frame: cannot write in %s: %s", dir, strerror(e));
    }
    int rc = write_all(fd, text) || fsync(fd) ? -1 : 0;
    int e = errno;
    free(text);
    if (close(fd) && !rc) {
        rc = -1;
        e = errno;
    }
    if (rc) {
        unlink(tmp);
        return eldr_errf(err, errlen, "save frame: writing %s: %s", tmp, strerror(e));
    }
    /* link, not rename: it fails on a name that exists instead of
     * replacing the file behind it */
    for (int i = 1; i <= FRAME_FILE_MAX; i++) {
        snprintf(path, pathlen, "%s/eldr-frame-%03d.txt", dir, i);
        if (link(tmp, path) == 0) {
            unlink(tmp);
            return 0;
        }
        if (errno != EEXIST) {
            e = errno;
            unlink(tmp);
            return eldr_errf(err, errlen, "save frame: %s: %s", path, strerror(e));
        }
    }
    unlink(tmp);
    return eldr_errf(err, errlen, "save frame: %s holds eldr-frame-001 to -%03d already; "
                     "move them or set ELDR_FRAME_DIR", dir, FRAME_FILE_MAX);
}

void frame_file_key(const canvas_t *c, char *status, size_t n)
{
    char path[4200], err[ELDR_ERRLEN];
    if (frame_file_save(c, path, sizeof path, err, sizeof err))
        snprintf(status, n, "%s", err);
    else
        /* the name first: a long directory is what the footer cuts */
        snprintf(status, n, "frame saved: %s (%dx%d) in %s",
                 strrchr(path, '/') ? strrchr(path, '/') + 1 : path, c->w, c->h, frame_file_dir());
}
