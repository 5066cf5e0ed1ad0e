build-fuzz/src/core/model_fit.o: src/core/model_fit.c src/core/err.h \
  src/core/kmeans.h src/core/layersel.h src/core/rho.h \
  src/core/signature.h src/core/trace.h src/core/model.h \
  src/core/sha256.h

src/core/err.h:

src/core/kmeans.h:

src/core/layersel.h:

src/core/rho.h:

src/core/signature.h:

src/core/trace.h:

src/core/model.h:

src/core/sha256.h:
