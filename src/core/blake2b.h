/* blake2b.h - BLAKE2b (RFC 7693), unkeyed, with a digest of 1..64 bytes.
 *
 * eldrd's proxy picks a prefill instance by consistent hashing on the
 * prompt's first bytes; the reference deployment hashes with BLAKE2b-64
 * (Python's hashlib.blake2b(digest_size=8)), so the same prompt goes to the
 * same prefill instance under either router. */
#ifndef ELDR_BLAKE2B_H
#define ELDR_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

/* The outlen-byte digest of data into out (outlen in 1..64). */
void blake2b(void *out, size_t outlen, const void *data, size_t len);

/* The 8-byte digest read as a big-endian integer, as Python's
 * int.from_bytes(blake2b(data, digest_size=8).digest(), "big"). */
uint64_t blake2b_64(const void *data, size_t len);

#endif
