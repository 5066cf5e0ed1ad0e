build-fuzz/src/core/kmeans.o: src/core/kmeans.c src/core/kmeans.h \
  /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
  /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
  src/core/assign.h src/core/err.h src/core/rng.h

src/core/kmeans.h:

/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:

/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:

src/core/assign.h:

src/core/err.h:

src/core/rng.h:
