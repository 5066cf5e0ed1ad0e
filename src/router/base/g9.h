/* g9.h - a double as printf's "%.9g" writes it, and an integer as "%lld"
 * does, without printf.
 *
 * The route answer prints K + 2 reals; glibc's printf takes ~200 ns for
 * each (and every printf in eldrd goes through its slow positional path,
 * since libquadmath, loaded with OpenBLAS, registers printf hooks). This
 * formats the common range exactly (the correctly rounded 9 significant
 * digits, ties to even, as glibc gives them) with 128-bit integer
 * arithmetic, and hands everything else to snprintf. */
#ifndef ELDR_ROUTER_G9_H
#define ELDR_ROUTER_G9_H

/* Write v to out (at least 32 bytes), NUL-terminated; returns the length.
 * v must be finite. */
int g9_format(double v, char *out);

/* Write v as printf's "%lld" writes it to out (at least 21 bytes),
 * NUL-terminated; returns the length. For the integers on hot paths (an
 * answer's counts, a request's Content-Length, a stream's grpc-status). */
int g9_int(long long v, char *out);

#endif
