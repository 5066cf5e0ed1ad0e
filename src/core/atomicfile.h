/* atomicfile.h - replace a file so that readers see the old or the new
 * version, never a torn one.
 *
 * begin creates "<path>.tmp.<pid>" beside the target; write appends to it;
 * commit fsyncs, renames it over the target and fsyncs the directory;
 * abort (and a failed commit) removes it and leaves any old file intact.
 * begin refuses a target that exists and is not a regular file (a device
 * such as /dev/null, a directory, a FIFO): renaming over it would replace
 * the node itself. Every writer of eldr's output files goes through here. */
#ifndef ELDR_ATOMICFILE_H
#define ELDR_ATOMICFILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

typedef struct atomic_file {
    int fd;                     /* the temporary, open for writing; -1 when closed */
    FILE *f;                    /* a stdio stream over fd, once asked for */
    char path[PATH_MAX];
    char tmp[PATH_MAX + 32];
} atomic_file;

int atomic_file_begin(atomic_file *a, const char *path, char *err, size_t errlen);
int atomic_file_write(atomic_file *a, const void *buf, size_t n, char *err, size_t errlen);
/* A stdio stream over the temporary, for fprintf-style writers; owned by
 * a (commit flushes and checks it). NULL when out of memory. */
FILE *atomic_file_stream(atomic_file *a);
int atomic_file_commit(atomic_file *a, char *err, size_t errlen);
void atomic_file_abort(atomic_file *a);

/* The whole file in one call: text, then a newline when add_newline. */
int atomic_write_text(const char *path, const char *text, int add_newline, char *err,
                      size_t errlen);

#endif
