build-fuzz/src/core/gen.o: src/core/gen.c src/core/gen.h src/core/trace.h \
  src/core/blockhash.h src/core/err.h src/core/gen_internal.h \
  src/core/rng.h

src/core/gen.h:

src/core/trace.h:

src/core/blockhash.h:

src/core/err.h:

src/core/gen_internal.h:

src/core/rng.h:
