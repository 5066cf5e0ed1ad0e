/* util_replay.c - corpus replay for the regression tests (util_replay.h). */
#include "util_replay.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

int corpus_replay(const char *name, int (*fn)(const uint8_t *, size_t))
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("%s: cannot open (run from the repository root)", dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        fn(buf, (size_t)len);
        free(buf);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
    return n;
}
