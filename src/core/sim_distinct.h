/* sim_distinct.h - the simulator's innermost work: U_l, the number of
 * distinct experts that a step's token rows activate in each layer
 * (tokens x layers x k expert marks a step). One counter for the event
 * loop (sim.c) and for the benchmark's floor (tests/bench/bench_sim.c),
 * so both measure the same marks.
 *
 * Two ways, the same counts:
 * - ids of one byte (E <= 256) on a CPU with AVX2: a layer's set of
 *   experts is a bitmap of (E + 63) / 64 words held in vector
 *   registers; four ids at a time become bits by variable shifts, with
 *   no store a mark (about five times the stamps' speed);
 * - otherwise a generation-stamped [L][E] array: an expert counts when
 *   its stamp is not this count's, so nothing is cleared between counts;
 *   row by row when the stamps fit in cache, else layer by layer. */
#ifndef ELDR_SIM_DISTINCT_H
#define ELDR_SIM_DISTINCT_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_distinct {
    int L, E, k, id_bytes;
    int simd;                  /* the AVX2 bitmaps (id_bytes 1, E <= 256) */
    int by_row;                /* stamps: row by row (they fit in cache) */
    uint32_t *stamp;           /* [L][E], NULL with simd */
    uint32_t gen;
} sim_distinct;

/* For rows of [L][k] ids of id_bytes (1: uint8_t, 2: uint16_t) below E.
 * simd_ok = 0 keeps the stamps whatever the CPU (tests compare both). */
int sim_distinct_init(sim_distinct *d, int L, int E, int k, int id_bytes, int simd_ok,
                      char *err, size_t errlen);
void sim_distinct_free(sim_distinct *d);

/* U[l] = the distinct ids of layer l over rows[0..nb). */
void sim_distinct_count(sim_distinct *d, const void *const *rows, int nb, int *U);

#endif
