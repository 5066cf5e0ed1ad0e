build-fuzz/src/core/gen_sample.o: src/core/gen_sample.c src/core/err.h \
  src/core/gen_internal.h src/core/gen.h src/core/trace.h src/core/rng.h

src/core/err.h:

src/core/gen_internal.h:

src/core/gen.h:

src/core/trace.h:

src/core/rng.h:
