build-fuzz/src/core/route.o: src/core/route.c src/core/err.h \
  src/core/route.h src/core/rng.h

src/core/err.h:

src/core/route.h:

src/core/rng.h:
