build-fuzz/src/core/rho.o: src/core/rho.c src/core/rho.h \
  src/core/signature.h src/core/trace.h src/core/err.h src/core/rank.h \
  src/core/rng.h

src/core/rho.h:

src/core/signature.h:

src/core/trace.h:

src/core/err.h:

src/core/rank.h:

src/core/rng.h:
