/* atomicfile.c - temp-then-rename file replacement (see atomicfile.h). */
#include "atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

int atomic_file_begin(atomic_file *a, const char *path, char *err, size_t errlen)
{
    struct stat st;
    a->fd = -1;
    a->f = NULL;
    a->tmp[0] = '\0';
    if (strlen(path) >= sizeof a->path)
        return eldr_errf(err, errlen, "%s: path too long", path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return eldr_errf(err, errlen, "%s: exists and is not a regular file; refusing to replace it",
                         path);
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (a->fd < 0) {
        int e = errno;
        a->tmp[0] = '\0';
        return eldr_errf(err, errlen, "%s: cannot create %s.tmp.%ld: %s", path, path,
                         (long)getpid(), strerror(e));
    }
    return 0;
}

FILE *atomic_file_stream(atomic_file *a)
{
    if (!a->f && a->fd >= 0)
        a->f = fdopen(a->fd, "w");
    return a->f;
}

int atomic_file_write(atomic_file *a, const void *buf, size_t n, char *err, size_t errlen)
{
    if (a->f && fflush(a->f) != 0) {
        int e = errno;
        atomic_file_abort(a);
        return eldr_errf(err, errlen, "%s: write failed: %s", a->path, strerror(e));
    }
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(a->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            atomic_file_abort(a);
            return eldr_errf(err, errlen, "%s: write failed: %s", a->path, strerror(e));
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Make the rename durable. Some file systems refuse a directory fsync;
 * that costs durability, not correctness. */
static void fsync_dir(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int atomic_file_commit(atomic_file *a, char *err, size_t errlen)
{
    int e = 0;
    if (a->f && (fflush(a->f) != 0 || ferror(a->f)))
        e = errno ? errno : EIO;
    if (!e && fsync(a->fd) != 0)
        e = errno;
    if ((a->f ? fclose(a->f) : close(a->fd)) != 0 && !e)
        e = errno;
    a->f = NULL;
    a->fd = -1;
    if (!e && rename(a->tmp, a->path) != 0)
        e = errno;
    if (e) {
        atomic_file_abort(a);
        return eldr_errf(err, errlen, "%s: write failed: %s", a->path, strerror(e));
    }
    a->tmp[0] = '\0';
    fsync_dir(a->path);
    return 0;
}

void atomic_file_abort(atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    else if (a->fd >= 0)
        close(a->fd);
    a->f = NULL;
    a->fd = -1;
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = '\0';
}

int atomic_write_text(const char *path, const char *text, int add_newline, char *err,
                      size_t errlen)
{
    atomic_file a;
    if (atomic_file_begin(&a, path, err, errlen) ||
        atomic_file_write(&a, text, strlen(text), err, errlen) ||
        (add_newline && atomic_file_write(&a, "\n", 1, err, errlen)))
        return -1;
    return atomic_file_commit(&a, err, errlen);
}
