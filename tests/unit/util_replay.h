/* util_replay.h - run a fuzz harness's entry point on every file of its
 * corpus, tests/fuzz/corpus/<name>/ (seeds and inputs that once crashed),
 * under the ordinary and ASan builds. Shared by test_regress.c and
 * test_router_regress.c. Run from the repository root. */
#ifndef ELDR_UTIL_REPLAY_H
#define ELDR_UTIL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* Calls fn on each file's bytes; fails the test when the directory is
 * missing or empty. Returns the number of files. */
int corpus_replay(const char *name, int (*fn)(const uint8_t *, size_t));

#endif
