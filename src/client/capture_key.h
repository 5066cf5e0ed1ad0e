/* capture_key.h - `eldr capture --api-key-file FILE`: the engine's API key
 * (vLLM's and SGLang's --api-key), sent as "Authorization: Bearer KEY" on
 * every request, and what to say when the engine refuses (docs/capture.md,
 * "API key").
 *
 * The key is the file's first line, its line end ("\n" or "\r\n")
 * stripped. It is never printed: messages name the file, not the key. */
#ifndef ELDR_CAPTURE_KEY_H
#define ELDR_CAPTURE_KEY_H

#include <stddef.h>

#define CAPTURE_KEY_MAX 4096

/* The "Authorization: Bearer KEY" header line from the key file at path
 * into line (cap bytes, at least CAPTURE_KEY_MAX + 32). -1 with err naming
 * the file when it cannot be read, is empty, its first line is empty or
 * longer than CAPTURE_KEY_MAX, or holds a control character (a header
 * cannot carry it). line is wiped on failure. */
int capture_key_header(const char *path, char *line, size_t cap, char *err, size_t errlen);

/* Is status the engine's "no" to the key (401 or 403)? */
int capture_key_refused(long status);

/* The one-line error for such an answer to `what` ("GET /v1/models"):
 * "the engine wants an API key (--api-key-file)" when none was sent
 * (key_file NULL), "the key was refused (--api-key-file FILE)" when one
 * was. Returns -1. */
int capture_key_error(const char *url, const char *what, long status, const char *key_file,
                      char *err, size_t errlen);

#endif
