/* g9.h - a double as printf's "%.9g" writes it, without printf.
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

#endif
