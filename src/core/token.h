/* token.h - a bearer token from a file: one reading rule for both sides,
 * eldrd (--admin-token-file, --kv-token-file, --route-token-file;
 * src/router/net/auth.c) and the clients that send it (eldr push
 * --token-file, eldr replay --token-file, eldr.attach{token_file}), so a
 * token file the daemon accepts is read the same way by the client.
 *
 * The file's first line, surrounding blanks removed; it must be 16 to
 * TOKEN_MAX - 1 printable ASCII characters (docs/eldrd.md, "Security"). */
#ifndef ELDR_TOKEN_H
#define ELDR_TOKEN_H

#include <stddef.h>

#define TOKEN_MAX 512

/* The token of the file at path into out (outlen >= TOKEN_MAX for any
 * valid token). -1 with err naming the option (opt, e.g.
 * "--token-file") and the file. */
int token_read_file(const char *path, const char *opt, char *out, size_t outlen, char *err,
                    size_t errlen);

#endif
