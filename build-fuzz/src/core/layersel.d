build-fuzz/src/core/layersel.o: src/core/layersel.c src/core/layersel.h \
  src/core/rho.h src/core/signature.h src/core/trace.h src/core/err.h \
  src/core/rank.h

src/core/layersel.h:

src/core/rho.h:

src/core/signature.h:

src/core/trace.h:

src/core/err.h:

src/core/rank.h:
